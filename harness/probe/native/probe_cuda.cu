/* probe_cuda: the deferred GPU digest of align_probe (harness/probe/align_probe/digest.py loads
 * libalign_probe_cuda.so with ctypes). Per CUDA tensor, align_probe_cuda_enqueue launches the leaf
 * kernel of kernels/cuda/digest.cu (align_digest_leaves_cuda) on the framework's current stream into
 * device memory this library owns, and returns at once: no host copy of the tensor, no wait. At the
 * step's end align_probe_cuda_flush waits once for every tensor's kernels and copies all leaf digests
 * back, in enqueue order; the host finishes each tensor's root (digest_xxh3t64_root, harness/core/digest.c,
 * through align_probe_digest_roots of libalign_probe_digest.so), so
 *   digest = XXH3_64bits_withSeed(LE u64 leaves, seed = byte count)   exactly as README defines xxh3t64.
 *
 * A tensor that is not row-major (a transpose, a slice) is first gathered in logical row-major order by
 * probe_gather_kernel into a scratch buffer of this library, then hashed from there.
 *
 * What the run sees (README "Probes": why the numerics are untouched): the kernels only read the
 * tensor; they write only this library's memory (cudaMalloc'd leaf chunks and scratch, grown rarely,
 * kept until align_probe_cuda_close: the framework's caching allocator is never called); they run on
 * the framework's own stream, after the kernel that produced the tensor and before any later kernel
 * that could reuse its memory. An event after each tensor's kernels lets the caller drop its reference
 * to the tensor once they ran (align_probe_cuda_done).
 *
 * Side stream (align_probe_cuda_side_stream(c, 1)): the kernels run instead on a stream of this library,
 * after an event recorded on the framework's stream (cudaStreamWaitEvent: they start once the tensor is
 * made), so the framework's later kernels never wait for a digest and the memory-bound digests can run
 * beside its compute-bound GEMMs. The framework's stream then gets one event record per tensor and no
 * kernel. Its memory stays the tensor's until the caller drops its reference, which it does only once
 * align_probe_cuda_done says the digest ran (the caching allocator reuses a block only after its tensor is
 * freed), so a later kernel of the framework cannot overwrite what the digest still reads.
 *
 * Memory: leaf chunks of 2^20 leaves (8 MiB: 64 GiB of tensors per step) or one tensor's leaves when
 * larger; scratch of the largest non-row-major tensor; a pinned host copy of the leaves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digest_cuda.h"

#define PROBE_LEAF_BYTES 65536u /* = DIGEST_LEAF_BYTES of harness/core/digest.h */
#ifndef PROBE_CHUNK_LEAVES
#define PROBE_CHUNK_LEAVES (1u << 20) /* leaves per chunk of device memory (8 MiB) */
#endif
#define PROBE_GATHER_DIMS 16 /* dimensions after merging (more: PROBE_EDIMS, the caller copies) */
#define PROBE_EDIMS 4	     /* returned (no message) for more dimensions than the gather takes */
#define PROBE_GATHER_CTA 256

/* tests/probe/deferred.sh compiles this file as host C++ against a mock runtime (tests/probe/cuda-mock.h,
 * which defines PROBE_LAUNCH and small chunks) to check the bookkeeping and the gather's indexing. */
#ifndef PROBE_LAUNCH
#define PROBE_LAUNCH(kernel, grid, cta, stream, args) kernel<<<grid, cta, 0, stream>>> args
#endif

struct probe_chunk {
	uint64_t *dev;
	size_t cap, used; /* leaves */
};

struct probe_cuda {
	int device;
	struct probe_chunk *chunks;
	size_t n_chunks, cur; /* cur: the chunk being filled */
	cudaEvent_t *events;  /* events[i]: after tensor i's kernels (this step) */
	size_t n_events, tensors, done, leaves;
	void *scratch;
	size_t scratch_cap;
	cudaEvent_t scratch_ev; /* after the last kernel that read the scratch */
	cudaStream_t scratch_stream;
	int scratch_used;
	cudaStream_t own;  /* non-blocking: the copy back does not wait for the framework's later work */
	cudaStream_t side; /* non-blocking, the digests' stream when side-stream mode is on (else NULL) */
	cudaEvent_t ready; /* recorded on the framework's stream per tensor in side-stream mode */
	int use_side;
	uint64_t *pinned;
	size_t pinned_cap; /* leaves */
};

struct probe_gather_dims {
	int ndim;
	int64_t shape[PROBE_GATHER_DIMS], strides[PROBE_GATHER_DIMS]; /* strides in elements */
};

extern "C" {
int align_probe_cuda_open(struct probe_cuda **out);
void align_probe_cuda_close(struct probe_cuda *c);
int align_probe_cuda_enqueue(struct probe_cuda *c, const void *ptr, size_t elem_size, int ndim, const int64_t *shape,
			     const int64_t *strides, cudaStream_t stream);
int align_probe_cuda_enqueue_bytes(struct probe_cuda *c, const void *ptr, size_t nbytes, cudaStream_t stream);
int align_probe_cuda_side_stream(struct probe_cuda *c, int on);
size_t align_probe_cuda_done(struct probe_cuda *c);
size_t align_probe_cuda_pending_leaves(struct probe_cuda *c);
int align_probe_cuda_flush(struct probe_cuda *c, uint64_t *host_leaves, size_t cap);
}

static int probe_cuda_fail(const char *call, cudaError_t e, int line)
{
	fprintf(stderr, "error: align_probe: %s failed: %s (%s) at %s:%d\n", call, cudaGetErrorString(e),
		cudaGetErrorName(e), __FILE__, line);
	return ALIGN_DIGEST_CUDA_ECUDA;
}

#define PROBE_TRY(call)                                                                                                \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ != cudaSuccess)                                                                                 \
			return probe_cuda_fail(#call, e_, __LINE__);                                                   \
	} while (0)

static int probe_einval(const char *what)
{
	fprintf(stderr, "error: align_probe_cuda_enqueue: %s\n", what);
	return ALIGN_DIGEST_CUDA_EINVAL;
}

/* out[i] = the i-th element of the tensor in row-major order of its logical shape. */
template <typename E>
__global__ void __launch_bounds__(PROBE_GATHER_CTA)
	probe_gather_kernel(const E *src, E *out, uint64_t n, struct probe_gather_dims g)
{
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		uint64_t r = i;
		int64_t off = 0;
		for (int d = g.ndim - 1; d >= 0; d--) {
			uint64_t s = (uint64_t)g.shape[d];
			off += (int64_t)(r % s) * g.strides[d];
			r /= s;
		}
		out[i] = src[off];
	}
}

int align_probe_cuda_open(struct probe_cuda **out)
{
	if (!out)
		return probe_einval("out is NULL");
	struct probe_cuda *c = (struct probe_cuda *)calloc(1, sizeof *c);
	if (!c)
		return probe_einval("out of host memory");
	*out = c;
	PROBE_TRY(cudaGetDevice(&c->device));
	PROBE_TRY(cudaStreamCreateWithFlags(&c->own, cudaStreamNonBlocking));
	PROBE_TRY(cudaEventCreateWithFlags(&c->scratch_ev, cudaEventDisableTiming));
	return 0;
}

void align_probe_cuda_close(struct probe_cuda *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_events; i++)
		cudaEventSynchronize(c->events[i]);
	for (size_t i = 0; i < c->n_events; i++)
		cudaEventDestroy(c->events[i]);
	for (size_t i = 0; i < c->n_chunks; i++)
		cudaFree(c->chunks[i].dev);
	if (c->scratch_ev)
		cudaEventDestroy(c->scratch_ev);
	cudaFree(c->scratch);
	cudaFreeHost(c->pinned);
	if (c->own)
		cudaStreamDestroy(c->own);
	if (c->side)
		cudaStreamDestroy(c->side);
	if (c->ready)
		cudaEventDestroy(c->ready);
	free(c->events);
	free(c->chunks);
	free(c);
}

/* Side-stream mode on (1) or off (0: the default, the framework's stream), for the tensors enqueued from
 * now on; switched only between batches (nothing enqueued since the last flush). */
int align_probe_cuda_side_stream(struct probe_cuda *c, int on)
{
	if (!c || c->tensors)
		return probe_einval("align_probe_cuda_side_stream: switched while tensors are enqueued");
	if (on && !c->side) {
		PROBE_TRY(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking));
		PROBE_TRY(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
	}
	c->use_side = on != 0;
	return 0;
}

/* The stream the digests of a tensor made on `stream` run on: `stream`, or in side-stream mode the
 * library's side stream, made to wait there for the work enqueued on `stream` so far. */
static int probe_stream(struct probe_cuda *c, cudaStream_t stream, cudaStream_t *run)
{
	*run = stream;
	if (!c->use_side)
		return 0;
	PROBE_TRY(cudaEventRecord(c->ready, stream));
	PROBE_TRY(cudaStreamWaitEvent(c->side, c->ready, 0));
	*run = c->side;
	return 0;
}

/* Merge dimensions: drop size-1 ones, join d and d+1 where d steps over the whole of d+1. Returns the
 * number of dimensions left (0: one element) and writes them to g; *row_major when they are. */
static int probe_merge_dims(int ndim, const int64_t *shape, const int64_t *strides, int64_t *sh, int64_t *st,
			    int *row_major)
{
	int m = 0;
	for (int d = 0; d < ndim; d++) {
		if (shape[d] == 1)
			continue;
		if (m > 0 && st[m - 1] == strides[d] * shape[d]) {
			sh[m - 1] *= shape[d];
			st[m - 1] = strides[d];
		} else {
			sh[m] = shape[d];
			st[m] = strides[d];
			m++;
		}
	}
	*row_major = m == 0 || (m == 1 && st[0] == 1);
	return m;
}

/* A chunk with room for n leaves (the current one, or the next, allocated when there is none). */
static int probe_room(struct probe_cuda *c, size_t n, uint64_t **where)
{
	while (c->cur < c->n_chunks && c->chunks[c->cur].cap - c->chunks[c->cur].used < n) {
		if (c->chunks[c->cur].used == 0 && c->chunks[c->cur].cap < n) { /* too small even when empty */
			PROBE_TRY(cudaFree(c->chunks[c->cur].dev));		/* not used this step */
			c->chunks[c->cur].dev = NULL;
			PROBE_TRY(cudaMalloc((void **)&c->chunks[c->cur].dev, n * sizeof(uint64_t)));
			c->chunks[c->cur].cap = n;
			break;
		}
		c->cur++;
	}
	if (c->cur == c->n_chunks) {
		struct probe_chunk *nc =
			(struct probe_chunk *)realloc(c->chunks, (c->n_chunks + 1) * sizeof *c->chunks);
		if (!nc)
			return probe_einval("out of host memory");
		c->chunks = nc;
		struct probe_chunk *k = &c->chunks[c->n_chunks];
		k->cap = n > PROBE_CHUNK_LEAVES ? n : PROBE_CHUNK_LEAVES;
		k->used = 0;
		PROBE_TRY(cudaMalloc((void **)&k->dev, k->cap * sizeof(uint64_t)));
		c->n_chunks++;
	}
	struct probe_chunk *k = &c->chunks[c->cur];
	*where = k->dev + k->used;
	k->used += n;
	return 0;
}

/* The scratch, at least `bytes` long, made safe to write on `stream`. */
static int probe_scratch(struct probe_cuda *c, size_t bytes, cudaStream_t stream)
{
	if (c->scratch_cap < bytes) {
		if (c->scratch_used)
			PROBE_TRY(cudaEventSynchronize(c->scratch_ev)); /* its last reader ran */
		PROBE_TRY(cudaFree(c->scratch));
		c->scratch = NULL;
		size_t cap = 2 * c->scratch_cap > bytes ? 2 * c->scratch_cap : bytes;
		PROBE_TRY(cudaMalloc(&c->scratch, cap));
		c->scratch_cap = cap;
		c->scratch_used = 0;
	}
	if (c->scratch_used && c->scratch_stream != stream) /* ordered after the other stream's reader */
		PROBE_TRY(cudaStreamWaitEvent(stream, c->scratch_ev, 0));
	return 0;
}

static int probe_gather(const void *ptr, void *out, size_t esz, uint64_t n, const struct probe_gather_dims *g,
			cudaStream_t stream)
{
	uint64_t ctas = (n + PROBE_GATHER_CTA - 1) / PROBE_GATHER_CTA;
	unsigned grid = ctas > 65536 ? 65536 : (unsigned)ctas;
	switch (esz) {
	case 1:
		PROBE_LAUNCH(probe_gather_kernel<uint8_t>, grid, PROBE_GATHER_CTA, stream,
			     ((const uint8_t *)ptr, (uint8_t *)out, n, *g));
		break;
	case 2:
		PROBE_LAUNCH(probe_gather_kernel<uint16_t>, grid, PROBE_GATHER_CTA, stream,
			     ((const uint16_t *)ptr, (uint16_t *)out, n, *g));
		break;
	case 4:
		PROBE_LAUNCH(probe_gather_kernel<uint32_t>, grid, PROBE_GATHER_CTA, stream,
			     ((const uint32_t *)ptr, (uint32_t *)out, n, *g));
		break;
	case 8:
		PROBE_LAUNCH(probe_gather_kernel<uint64_t>, grid, PROBE_GATHER_CTA, stream,
			     ((const uint64_t *)ptr, (uint64_t *)out, n, *g));
		break;
	default:
		return probe_einval("element size is not 1, 2, 4 or 8 bytes");
	}
	PROBE_TRY(cudaGetLastError()); /* the launch of probe_gather_kernel */
	return 0;
}

static int probe_event(struct probe_cuda *c, cudaStream_t stream)
{
	if (c->tensors == c->n_events) {
		size_t n = c->n_events ? 2 * c->n_events : 64;
		cudaEvent_t *ev = (cudaEvent_t *)realloc(c->events, n * sizeof *ev);
		if (!ev)
			return probe_einval("out of host memory");
		c->events = ev;
		for (size_t i = c->n_events; i < n; i++)
			PROBE_TRY(cudaEventCreateWithFlags(&c->events[c->n_events++], cudaEventDisableTiming));
	}
	PROBE_TRY(cudaEventRecord(c->events[c->tensors], stream));
	c->tensors++;
	return 0;
}

/* Enqueue the leaf digests of one tensor (strides in elements; NULL: row-major) on `stream`. Returns
 * 0, ALIGN_DIGEST_CUDA_EINVAL (bad arguments), ALIGN_DIGEST_CUDA_ECUDA, or PROBE_EDIMS (4: more than 16
 * dimensions that do not merge; nothing enqueued, the caller digests a row-major copy). */
int align_probe_cuda_enqueue(struct probe_cuda *c, const void *ptr, size_t elem_size, int ndim, const int64_t *shape,
			     const int64_t *strides, cudaStream_t stream)
{
	if (!c || elem_size == 0 || PROBE_LEAF_BYTES % elem_size || ndim < 0 || (ndim && !shape))
		return probe_einval("bad arguments");
	uint64_t n = 1;
	for (int d = 0; d < ndim; d++) {
		if (shape[d] < 0)
			return probe_einval("negative dimension");
		n *= (uint64_t)shape[d];
	}
	size_t bytes = (size_t)n * elem_size;
	int dev = -1;
	PROBE_TRY(cudaGetDevice(&dev));
	if (dev != c->device)
		return probe_einval("the current device is not the one the probe's digests opened on");
	struct probe_gather_dims g = {};
	int row_major = 1;
	if (n > 0 && strides) {
		int64_t sh[64], st[64];
		if (ndim > 64)
			return probe_einval("more than 64 dimensions");
		int m = probe_merge_dims(ndim, shape, strides, sh, st, &row_major);
		if (!row_major) {
			if (m > PROBE_GATHER_DIMS)
				return PROBE_EDIMS; /* no message: the caller copies instead */
			g.ndim = m;
			for (int d = 0; d < m; d++) {
				g.shape[d] = sh[d];
				g.strides[d] = st[d];
			}
		}
	}
	if (n > 0 && !ptr)
		return probe_einval("device pointer is NULL");
	size_t nl = (bytes + PROBE_LEAF_BYTES - 1) / PROBE_LEAF_BYTES;
	int rc = probe_stream(c, stream, &stream);
	if (rc)
		return rc;
	if (nl) {
		uint64_t *leaves = NULL;
		if ((rc = probe_room(c, nl, &leaves)))
			return rc;
		const void *src = ptr;
		if (!row_major) {
			if ((rc = probe_scratch(c, bytes, stream)) ||
			    (rc = probe_gather(ptr, c->scratch, elem_size, n, &g, stream)))
				return rc;
			src = c->scratch;
		}
		if ((rc = align_digest_leaves_cuda(src, bytes, leaves, stream)))
			return rc;
		if (!row_major) {
			PROBE_TRY(cudaEventRecord(c->scratch_ev, stream));
			c->scratch_stream = stream;
			c->scratch_used = 1;
		}
		c->leaves += nl;
	}
	return probe_event(c, stream);
}

/* Enqueue a copy of the nbytes (1..16) at device address ptr into the next two leaf slots (so they come
 * back with the leaves, in enqueue order; bytes past nbytes are undefined), on `stream`, without waiting:
 * the exact bits of a one-element tensor (a loss) without the synchronisation that .item() or a copy to
 * pageable host memory makes. Counts as one tensor for align_probe_cuda_done. */
int align_probe_cuda_enqueue_bytes(struct probe_cuda *c, const void *ptr, size_t nbytes, cudaStream_t stream)
{
	if (!c || !ptr || nbytes == 0 || nbytes > 2 * sizeof(uint64_t))
		return probe_einval("bad arguments (1 to 16 bytes at a device address)");
	int dev = -1;
	PROBE_TRY(cudaGetDevice(&dev));
	if (dev != c->device)
		return probe_einval("the current device is not the one the probe's digests opened on");
	uint64_t *slot = NULL;
	int rc = probe_stream(c, stream, &stream);
	if (rc || (rc = probe_room(c, 2, &slot)))
		return rc;
	PROBE_TRY(cudaMemcpyAsync(slot, ptr, nbytes, cudaMemcpyDeviceToDevice, stream));
	c->leaves += 2;
	return probe_event(c, stream);
}

/* How many tensors, counted from the first enqueued this step, have had their kernels run (a tensor
 * whose kernels ran, after one that has not, is not counted). */
size_t align_probe_cuda_done(struct probe_cuda *c)
{
	while (c->done < c->tensors) {
		cudaError_t e = cudaEventQuery(c->events[c->done]);
		if (e != cudaSuccess) {
			(void)cudaGetLastError(); /* not ready (or an error flush reports): not the next launch's */
			break;
		}
		c->done++;
	}
	return c->done;
}

size_t align_probe_cuda_pending_leaves(struct probe_cuda *c)
{
	return c->leaves;
}

/* Wait for every enqueued tensor's kernels, copy all leaf digests (enqueue order) to host_leaves (cap
 * leaves), and start a new batch. */
int align_probe_cuda_flush(struct probe_cuda *c, uint64_t *host_leaves, size_t cap)
{
	if (!c || (c->leaves && !host_leaves) || cap < c->leaves)
		return probe_einval("align_probe_cuda_flush: host buffer too small");
	for (size_t i = c->done; i < c->tensors; i++)
		PROBE_TRY(cudaEventSynchronize(c->events[i]));
	if (c->pinned_cap < c->leaves) {
		PROBE_TRY(cudaFreeHost(c->pinned));
		c->pinned = NULL;
		c->pinned_cap = 0;
		PROBE_TRY(cudaMallocHost((void **)&c->pinned, c->leaves * sizeof(uint64_t)));
		c->pinned_cap = c->leaves;
	}
	size_t at = 0;
	for (size_t i = 0; i <= c->cur && i < c->n_chunks; i++) {
		struct probe_chunk *k = &c->chunks[i];
		if (k->used)
			PROBE_TRY(cudaMemcpyAsync(c->pinned + at, k->dev, k->used * sizeof(uint64_t),
						  cudaMemcpyDeviceToHost, c->own));
		at += k->used;
		k->used = 0;
	}
	PROBE_TRY(cudaStreamSynchronize(c->own));
	if (at)
		memcpy(host_leaves, c->pinned, at * sizeof(uint64_t));
	c->cur = 0;
	c->tensors = c->done = c->leaves = 0;
	return 0;
}
