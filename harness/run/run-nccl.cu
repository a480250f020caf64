/* run-nccl: NCCL for the collectives' ranks (run-nccl.h). nccl.h gives the types and the signatures only:
 * the library is opened with dlopen, so the align binary has no link-time dependency on NCCL.
 *
 * ALIGN_COLL_IMPL=fixed on rank r of N (coll.h's order, the C twin's bits):
 *   allreduce:      C = ceil(D / N); the row, zero-padded to N*C, is cut into N chunks of C; an all-to-all
 *                   (ncclSend / ncclRecv of chunk k to rank k, grouped; its own chunk copied) leaves in
 *                   recv[k] rank k's chunk r; coll_sum_rows_cuda sums the N chunks in rank order 0..N-1
 *                   (fp32, one rounding), and ncclAllGather of the N summed chunks gives every rank the
 *                   whole sum (elements D..N*C-1 are padding, dropped). The chunking cannot change a bit:
 *                   element i is always the chain x[0,i] + ... + x[N-1,i].
 *   reduce_scatter: the row is N blocks of D; the all-to-all leaves in recv[k] rank k's block r, summed in
 *                   rank order into y.
 *   all_gather:     ncclAllGather (a copy; no order to fix).
 * ALIGN_COLL_IMPL=nccl: ncclAllReduce / ncclReduceScatter / ncclAllGather (sum) under the NCCL_*
 * environment; NCCL chooses algorithm, protocol and channels. */
#include "ops_cuda.h" /* first: it prepares ops.h for nvcc */
#include "run-nccl.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
	S_VERSION,
	S_UNIQUE_ID,
	S_INIT_RANK,
	S_DESTROY,
	S_ERROR_STRING,
	S_ALL_REDUCE,
	S_REDUCE_SCATTER,
	S_ALL_GATHER,
	S_SEND,
	S_RECV,
	S_GROUP_START,
	S_GROUP_END,
};
static const char *const sym_names[RUN_NCCL_NSYM] = {"ncclGetVersion",	  "ncclGetUniqueId",	"ncclCommInitRank",
						     "ncclCommDestroy",	  "ncclGetErrorString", "ncclAllReduce",
						     "ncclReduceScatter", "ncclAllGather",	"ncclSend",
						     "ncclRecv",	  "ncclGroupStart",	"ncclGroupEnd"};

#define FN(n, s, f) ((decltype(&f))(n)->sym[s])

/* the message of a failed NCCL call, status 3 */
static int nccl_fail(struct run_nccl *n, ncclResult_t r, const char *call, int line)
{
	const char *what = n->sym[S_ERROR_STRING] ? FN(n, S_ERROR_STRING, ncclGetErrorString)(r) : "?";
	return align_fail(n->err, ALIGN_ERR_INTERNAL, "rank %d: %s failed: %s (ncclResult %d) at %s:%d", n->rank, call,
			  what, (int)r, __FILE__, line);
}
#define NCCL_TRY(n, call, expr)                                                                                        \
	do {                                                                                                           \
		ncclResult_t r_ = (expr);                                                                              \
		if (r_ != ncclSuccess)                                                                                 \
			return nccl_fail(n, r_, call, __LINE__);                                                       \
	} while (0)
#define CUDA_TRY(d, call, expr)                                                                                        \
	do {                                                                                                           \
		cudaError_t e_ = (expr);                                                                               \
		if (e_ != cudaSuccess)                                                                                 \
			return align_dev_fail(d, call, (int)e_, __FILE__, __LINE__);                                   \
	} while (0)

extern "C" int run_nccl_load(struct run_nccl *n, struct align_err *err)
{
	memset(n, 0, sizeof *n);
	n->err = err;
	/* the loader's search path first; then where a CUDA toolkit keeps it (this machine: lib, not lib64) */
	static const char *const names[] = {"libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2",
					    "/usr/local/cuda/lib64/libnccl.so.2"};
	char first[512] = "";
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !n->lib; i++) {
		n->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!n->lib && !first[0])
			snprintf(first, sizeof first, "%s", dlerror());
		else if (n->lib)
			snprintf(n->path, sizeof n->path, "%s", names[i]);
	}
	if (!n->lib)
		return align_fail(
			err, ALIGN_ERR_UNSUPPORTED,
			"NCCL is needed for --ranks and was not found: %s (install NCCL 2 or put the directory "
			"of libnccl.so.2 on LD_LIBRARY_PATH; pip's nvidia-nccl-cu13 has it under "
			"site-packages/nvidia/nccl/lib)",
			first);
	struct link_map *lm = NULL;
	if (dlinfo(n->lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
		snprintf(n->path, sizeof n->path, "%s", lm->l_name);
	for (int i = 0; i < RUN_NCCL_NSYM; i++)
		if (!(n->sym[i] = dlsym(n->lib, sym_names[i])))
			return align_fail(err, ALIGN_ERR_UNSUPPORTED, "%s has no %s (NCCL 2.7 or newer is needed)",
					  n->path, sym_names[i]);
	NCCL_TRY(n, "ncclGetVersion", FN(n, S_VERSION, ncclGetVersion)(&n->version));
	return ALIGN_OK;
}

/* rank 0: a new unique id into path (created, never overwritten: an old id names a root that is gone) */
static int id_write(struct run_nccl *n, const char *path, ncclUniqueId *id)
{
	NCCL_TRY(n, "ncclGetUniqueId", FN(n, S_UNIQUE_ID, ncclGetUniqueId)(id));
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return align_fail(n->err, ALIGN_ERR_INPUT, "--nccl-id: cannot create '%s': %s", tmp, strerror(errno));
	int bad = write(fd, id, sizeof *id) != (ssize_t)sizeof *id;
	bad |= close(fd) != 0;
	/* link() publishes the complete file at once and fails when path exists */
	int exists = 0;
	if (!bad && link(tmp, path) != 0) {
		exists = errno == EEXIST;
		bad = 1;
	}
	int link_errno = errno;
	unlink(tmp);
	if (exists)
		return align_fail(n->err, ALIGN_ERR_INPUT,
				  "--nccl-id: '%s' exists (an id of another run): remove it or give a new path", path);
	if (bad)
		return align_fail(n->err, ALIGN_ERR_INPUT, "--nccl-id: cannot write '%s': %s", path,
				  strerror(link_errno));
	return ALIGN_OK;
}

/* ranks 1..N-1: wait for rank 0's file */
static int id_read(struct run_nccl *n, const char *path, double wait_s, ncclUniqueId *id)
{
	struct timespec pause = {0, 20 * 1000 * 1000};
	for (double waited = 0;; waited += 0.02) {
		int fd = open(path, O_RDONLY);
		if (fd >= 0) {
			ssize_t got = read(fd, id, sizeof *id);
			close(fd);
			if (got == (ssize_t)sizeof *id)
				return ALIGN_OK;
			return align_fail(n->err, ALIGN_ERR_INPUT,
					  "--nccl-id: '%s' holds %zd bytes, not an NCCL id (%zu)", path, got,
					  sizeof *id);
		}
		if (waited >= wait_s)
			return align_fail(n->err, ALIGN_ERR_INPUT,
					  "rank %d: no NCCL id in '%s' after %.0f s (rank 0 writes it: did it start?)",
					  n->rank, path, wait_s);
		nanosleep(&pause, NULL);
	}
}

extern "C" int run_nccl_init(struct run_nccl *n, struct align_dev *d, int device, int rank, int nranks,
			     const char *id_path, double wait_s)
{
	n->rank = rank;
	n->nranks = nranks;
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0)
		return align_fail(n->err, ALIGN_ERR_INTERNAL, "rank %d: no CUDA device (%s)", rank,
				  e != cudaSuccess ? cudaGetErrorString(e) : "none found");
	if (device >= count)
		return align_fail(n->err, ALIGN_ERR_INPUT,
				  "rank %d: needs CUDA device %d (device = local rank), this host has %d", rank, device,
				  count);
	ALIGN_TRY(n->err, align_dev_open(d, device, n->err));
	ncclUniqueId id;
	ALIGN_TRY(n->err, rank == 0 ? id_write(n, id_path, &id) : id_read(n, id_path, wait_s, &id));
	ncclComm_t comm = NULL;
	ncclResult_t r = FN(n, S_INIT_RANK, ncclCommInitRank)(&comm, nranks, id, rank);
	if (rank == 0)
		unlink(id_path); /* every rank has joined (or the run is over): the id is spent */
	if (r != ncclSuccess)
		return nccl_fail(n, r, "ncclCommInitRank", __LINE__);
	n->comm = comm;
	d->nccl_comm = comm;
	return ALIGN_OK;
}

static ncclDataType_t nccl_dtype(int dt)
{
	return dt == ALIGN_DT_BF16 ? ncclBfloat16 : dt == ALIGN_DT_F16 ? ncclFloat16 : ncclFloat32;
}

/* elements per all-to-all chunk of the fixed path */
static int64_t fixed_chunk(const struct coll_cfg *c)
{
	return c->kind == COLL_REDUCE_SCATTER ? c->D : (c->D + c->N - 1) / c->N;
}

extern "C" size_t run_nccl_scratch_bytes(const struct coll_cfg *c)
{
	if (c->impl != ALIGN_COLL_IMPL_FIXED || c->kind == COLL_ALL_GATHER)
		return 0;
	int64_t C = fixed_chunk(c);
	size_t es = align_dtype_size(c->dtype);
	/* allreduce: padded send, recv, the summed chunk, the gathered sum; reduce_scatter: recv */
	return (size_t)(c->kind == COLL_ALLREDUCE ? 3 * c->N * C + C : c->N * C) * es;
}

/* recv[k*C..] = chunk `rank` of rank k's send (send holds N chunks of C) */
static int all_to_all(struct run_nccl *n, struct align_dev *d, const char *send, char *recv, int64_t C, int dt)
{
	cudaStream_t s = (cudaStream_t)d->stream;
	size_t bytes = (size_t)C * align_dtype_size(dt);
	ncclComm_t comm = (ncclComm_t)n->comm;
	CUDA_TRY(d, "cudaMemcpyAsync (own chunk)",
		 cudaMemcpyAsync(recv + n->rank * bytes, send + n->rank * bytes, bytes, cudaMemcpyDeviceToDevice, s));
	if (n->nranks == 1 || C == 0)
		return ALIGN_OK;
	NCCL_TRY(n, "ncclGroupStart", FN(n, S_GROUP_START, ncclGroupStart)());
	for (int k = 0; k < n->nranks; k++) {
		if (k == n->rank)
			continue;
		NCCL_TRY(n, "ncclSend",
			 FN(n, S_SEND, ncclSend)(send + k * bytes, (size_t)C, nccl_dtype(dt), k, comm, s));
		NCCL_TRY(n, "ncclRecv",
			 FN(n, S_RECV, ncclRecv)(recv + k * bytes, (size_t)C, nccl_dtype(dt), k, comm, s));
	}
	NCCL_TRY(n, "ncclGroupEnd", FN(n, S_GROUP_END, ncclGroupEnd)());
	return ALIGN_OK;
}

static int coll_fixed(struct run_nccl *n, struct align_dev *d, const struct coll_cfg *c, const void *x, void *y,
		      void *scratch)
{
	cudaStream_t s = (cudaStream_t)d->stream;
	size_t es = align_dtype_size(c->dtype);
	int64_t C = fixed_chunk(c), N = c->N;
	if (c->kind == COLL_REDUCE_SCATTER) {
		ALIGN_TRY(n->err, all_to_all(n, d, (const char *)x, (char *)scratch, C, c->dtype));
		return coll_sum_rows_cuda(scratch, c->dtype, N, C, C, y, s)
			       ? align_fail(n->err, ALIGN_ERR_INTERNAL, "rank %d: the rank-order sum failed", n->rank)
			       : ALIGN_OK;
	}
	char *send = (char *)scratch, *recv = send + N * C * es, *sum = recv + N * C * es, *all = sum + C * es;
	CUDA_TRY(d, "cudaMemsetAsync (padding)", cudaMemsetAsync(send, 0, (size_t)(N * C) * es, s));
	CUDA_TRY(d, "cudaMemcpyAsync (row)", cudaMemcpyAsync(send, x, (size_t)c->D * es, cudaMemcpyDeviceToDevice, s));
	ALIGN_TRY(n->err, all_to_all(n, d, send, recv, C, c->dtype));
	if (coll_sum_rows_cuda(recv, c->dtype, N, C, C, sum, s))
		return align_fail(n->err, ALIGN_ERR_INTERNAL, "rank %d: the rank-order sum failed", n->rank);
	NCCL_TRY(n, "ncclAllGather",
		 FN(n, S_ALL_GATHER, ncclAllGather)(sum, all, (size_t)C, nccl_dtype(c->dtype), (ncclComm_t)n->comm, s));
	CUDA_TRY(d, "cudaMemcpyAsync (sum)", cudaMemcpyAsync(y, all, (size_t)c->D * es, cudaMemcpyDeviceToDevice, s));
	return ALIGN_OK;
}

extern "C" int run_nccl_coll_dev(struct run_nccl *n, struct align_dev *d, const struct coll_cfg *c, const void *x,
				 void *y, void *scratch)
{
	cudaStream_t s = (cudaStream_t)d->stream;
	ncclComm_t comm = (ncclComm_t)n->comm;
	ncclDataType_t dt = nccl_dtype(c->dtype);
	if (c->N != n->nranks)
		return align_fail(n->err, ALIGN_ERR_INPUT,
				  "rank %d: the collective has N = %lld rows, the run %d ranks", n->rank,
				  (long long)c->N, n->nranks);
	if (c->kind == COLL_ALL_GATHER) {
		NCCL_TRY(n, "ncclAllGather", FN(n, S_ALL_GATHER, ncclAllGather)(x, y, (size_t)c->D, dt, comm, s));
		return ALIGN_OK;
	}
	if (c->impl == ALIGN_COLL_IMPL_FIXED)
		return coll_fixed(n, d, c, x, y, scratch);
	if (c->impl != ALIGN_COLL_IMPL_NCCL)
		return align_fail(n->err, ALIGN_ERR_UNSUPPORTED,
				  "rank %d: ALIGN_COLL_IMPL: only fixed and nccl run on ranks", n->rank);
	if (c->kind == COLL_ALLREDUCE)
		NCCL_TRY(n, "ncclAllReduce",
			 FN(n, S_ALL_REDUCE, ncclAllReduce)(x, y, (size_t)c->D, dt, ncclSum, comm, s));
	else
		NCCL_TRY(n, "ncclReduceScatter",
			 FN(n, S_REDUCE_SCATTER, ncclReduceScatter)(x, y, (size_t)c->D, dt, ncclSum, comm, s));
	return ALIGN_OK;
}

extern "C" int run_nccl_coll(struct run_nccl *n, struct align_dev *d, const struct coll_cfg *c, const void *x_row,
			     void *y_row)
{
	cudaStream_t s = (cudaStream_t)d->stream;
	size_t es = align_dtype_size(c->dtype), xb = (size_t)c->in_cols * es, yb = (size_t)c->out_cols * es;
	size_t sb = run_nccl_scratch_bytes(c);
	void *x, *y, *scratch = NULL;
	ALIGN_TRY(n->err, align_dev_alloc(d, xb ? xb : 1, &x));
	ALIGN_TRY(n->err, align_dev_alloc(d, yb ? yb : 1, &y));
	if (sb)
		ALIGN_TRY(n->err, align_dev_alloc(d, sb, &scratch));
	CUDA_TRY(d, "cudaMemcpyAsync (row in)", cudaMemcpyAsync(x, x_row, xb, cudaMemcpyHostToDevice, s));
	CUDA_TRY(d, "cudaMemsetAsync (result)", cudaMemsetAsync(y, 0, yb, s));
	ALIGN_TRY(n->err, run_nccl_coll_dev(n, d, c, x, y, scratch));
	CUDA_TRY(d, "cudaMemcpyAsync (row out)", cudaMemcpyAsync(y_row, y, yb, cudaMemcpyDeviceToHost, s));
	ALIGN_TRY(n->err, align_dev_sync(d));
	align_dev_release_all(d);
	return ALIGN_OK;
}

extern "C" void run_nccl_close(struct run_nccl *n, struct align_dev *d)
{
	if (n->comm && n->sym[S_DESTROY])
		FN(n, S_DESTROY, ncclCommDestroy)((ncclComm_t)n->comm);
	n->comm = NULL;
	if (d) {
		d->nccl_comm = NULL;
		align_dev_close(d);
	}
	if (n->lib)
		dlclose(n->lib);
	n->lib = NULL;
}
