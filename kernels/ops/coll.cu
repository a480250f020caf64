/* coll.cu: CUDA twins of the collectives on ONE GPU, the N ranks' rows standing in for N ranks (contract:
 * coll.h; specification: coll.c), and the rank-order sum the --ranks path runs after its all-to-all.
 *
 * allreduce / reduce_scatter, ALIGN_COLL_IMPL=fixed: one thread per column i of x (grid-stride):
 * acc = F(x[0,i]); acc = acc + F(x[k,i]) for k = 1..N-1 (binary32, nan_host.h's hn_add so a NaN carries
 * the host's payload); y = R(acc) to the dtype, stored to every rank's row (allreduce) or to element i of
 * y (reduce_scatter: y[N,D] is the column order of the sum). No reduction tree: the thread owning i runs
 * the C twin's loop, so the bits cannot depend on the launch (block, grid cap) or on D.
 * all_gather: the rows copied with cudaMemcpyAsync (the bytes).
 * ALIGN_COLL_IMPL=nccl needs the ranks' communicator (align run --ranks, harness/run/run-ranks.c, run-nccl.cu): on one
 * GPU it is refused (status 4), never substituted; the model values are CPU-only (coll_cfg_init).
 *
 * Napkin maths: reads N*D, writes N*D (allreduce) or D (reduce_scatter) elements: memory bound; on an
 * H100 (~3 TB/s copy) N = 8, D = 64 Mi fp32 reads 2 GiB: ~0.7 ms.
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin, every launch), tests/gpu/bench-coll (GB/s).
 */
#include "coll.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct coll_sum_args {
	const void *x; /* N rows of row_len elements */
	void *y;       /* reps copies of n elements, rep stride n */
	int dt;	       /* enum align_dtype */
	int64_t N, row_len, n;
	int64_t reps; /* allreduce on one GPU: N (every rank's row); else 1 */
};

ALIGN_HD static inline float coll_ld(const void *x, int dt, int64_t k)
{
	return dt == ALIGN_DT_BF16  ? align_bf16_to_f32(((const align_bf16 *)x)[k])
	       : dt == ALIGN_DT_F16 ? align_f16_to_f32(((const align_f16 *)x)[k])
				    : ((const float *)x)[k];
}

ALIGN_HD static inline void coll_st(void *y, int dt, int64_t k, float v)
{
	if (dt == ALIGN_DT_BF16)
		((align_bf16 *)y)[k] = align_f32_to_bf16(v);
	else if (dt == ALIGN_DT_F16)
		((align_f16 *)y)[k] = align_f32_to_f16(v);
	else
		((float *)y)[k] = v;
}

__global__ static void coll_sum_kernel(coll_sum_args a)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float acc = coll_ld(a.x, a.dt, i);
		for (int64_t k = 1; k < a.N; k++)
			acc = hx_add<true>(acc, coll_ld(a.x, a.dt, k * a.row_len + i));
		for (int64_t r = 0; r < a.reps; r++)
			coll_st(a.y, a.dt, r * a.n + i, acc);
	}
}

static int coll_sum_launch(const coll_sum_args &a, const struct align_launch *L, cudaStream_t stream)
{
	if (a.n <= 0)
		return ALIGN_OK;
	int block = L && L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256;
	if (L && L->serial > 0)
		block = 1;
	int64_t grid = (a.n + block - 1) / block;
	if (grid > 65535 * 8)
		grid = 65535 * 8;
	if (L && L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(coll_sum_kernel, (unsigned)grid, block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}

extern "C" int coll_sum_rows_cuda(const void *x, int dt, int64_t nrows, int64_t row_len, int64_t n, void *y,
				  void *stream)
{
	coll_sum_args a = {x, y, dt, nrows, row_len, n, 1};
	return coll_sum_launch(a, NULL, (cudaStream_t)stream);
}

static int coll_fwd_cuda(int kind, const char *op, const void *params, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out,
			 const struct align_launch *launch, struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	struct coll_cfg c;
	ALIGN_TRY(dev->err, coll_cfg_init(&c, kind, (const struct coll_params *)params, m, in, n_in, out, n_out,
					  ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, op, in, n_in, out, n_out));
	if (launch && (launch->block < 0 || launch->rows_per_block < 0 || launch->grid_cap < 0 || launch->serial < 0))
		return ops_cuda_bad_input(op, "negative launch knob");
	if (c.impl == ALIGN_COLL_IMPL_NCCL) {
		fprintf(stderr,
			"error: %s (cuda): ALIGN_COLL_IMPL=nccl needs one process per rank "
			"(align run %s --ranks N); one GPU holding N rows has no NCCL communicator\n",
			op, op);
		return ALIGN_ERR_UNSUPPORTED;
	}
	size_t es = align_dtype_size(c.dtype);
	if (kind == COLL_ALL_GATHER) {
		size_t row = (size_t)c.N * (size_t)c.in_cols * es;
		for (int64_t r = 0; r < c.N; r++)
			OPS_CUDA_TRY(cudaMemcpyAsync((char *)out[0].data + (size_t)r * row, in[0].data, row,
						     cudaMemcpyDeviceToDevice, stream));
		return ALIGN_OK;
	}
	coll_sum_args a = {
		in[0].data, out[0].data, c.dtype, c.N, c.in_cols, c.in_cols, kind == COLL_ALLREDUCE ? c.N : 1};
	return coll_sum_launch(a, launch, stream);
}

extern "C" int allreduce_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				  int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				  struct align_dev *dev)
{
	return coll_fwd_cuda(COLL_ALLREDUCE, "allreduce", params, m, in, n_in, out, n_out, launch, dev);
}

extern "C" int reduce_scatter_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				       int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				       struct align_dev *dev)
{
	return coll_fwd_cuda(COLL_REDUCE_SCATTER, "reduce_scatter", params, m, in, n_in, out, n_out, launch, dev);
}

extern "C" int all_gather_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				   int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				   struct align_dev *dev)
{
	return coll_fwd_cuda(COLL_ALL_GATHER, "all_gather", params, m, in, n_in, out, n_out, launch, dev);
}
