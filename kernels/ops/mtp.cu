/* mtp.cu: CUDA twin of the MTP pre-layer (contract: mtp.h; order: mtp_pipe.h, the same code as the C twin).
 * The embedding, rmsnorm and matmul ops run through their CUDA twins (ops_cuda_fwd, default launch) on the
 * same device context, so mtp is bitwise equal to the C twin wherever they are (every portable mode; with
 * MATMUL_IMPL=tc / cublas_pinned / cublas the projections are those engines' bits). mtp's own steps (the
 * shift, the fp32 operand copies and concatenations, the bf16 rounding and the bf16 add) are mtp_elem, one
 * thread per element, compiled with --fmad=false. The ids are checked on the host first (embedding.cu's
 * check: it waits for that copy).
 * Memory: the intermediates come from one cudaMallocAsync per call, freed with cudaFreeAsync on dev->stream.
 * Knobs: launch.block for mtp's kernels (default 256), serial: mtp's kernels with one thread; the sub-ops
 * run with their defaults.
 * Napkin maths (DSv4-Flash MTP: 4096 tokens, D = 4096, N = 4): h_proj is 4096*4*4096*4096 = 275 G
 * multiply-adds (~4 ms on a bf16 tensor-core engine, seconds on the portable one); the rest is memory bound
 * (~1 GB moved).
 */
#include "math_cuda.cuh"

#include "mtp.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#include "mtp_pipe.h"

__global__ void mtp_kernel(int kind, mtp_kargs a, int64_t n)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		mtp_elem(kind, &a, i);
}

struct cuda_be {
	struct align_dev *dev;
	const struct align_launch *L;
	unsigned char *base; /* one cudaMallocAsync block */
	size_t used, cap;
};

/* a bump allocator over the block (sized by a first pass that only counts) */
static void *cuda_alloc(void *ctx, size_t bytes)
{
	struct cuda_be *b = (struct cuda_be *)ctx;
	size_t at = (b->used + 255) / 256 * 256;
	b->used = at + bytes;
	if (!b->base)
		return (void *)(uintptr_t)256; /* counting pass: a non-NULL placeholder, never dereferenced */
	if (b->used > b->cap)
		return NULL;
	return b->base + at;
}

static int cuda_op(void *ctx, int op_id, const void *params, const struct align_modes *m, const struct align_tensor *in,
		   int n_in, struct align_tensor *out, int n_out)
{
	struct cuda_be *b = (struct cuda_be *)ctx;
	if (!b->base)
		return ALIGN_OK;
	return ops_cuda_fwd(ops_at(op_id))(params, m, in, n_in, out, n_out, NULL, b->dev);
}

static int cuda_kern(void *ctx, int kind, const struct mtp_kargs *a)
{
	struct cuda_be *b = (struct cuda_be *)ctx;
	if (!b->base) /* counting pass */
		return ALIGN_OK;
	int64_t n = mtp_elems(kind, a);
	if (n <= 0)
		return ALIGN_OK;
	int maxb = 0, rc = rows_max_block(mtp_kernel, &maxb);
	if (rc)
		return rc;
	int block = b->L->block > 0 ? (b->L->block > 1024 ? 1024 : b->L->block) : 256;
	block = b->L->serial > 0 ? 1 : block > maxb ? maxb : block;
	int64_t grid = b->L->serial > 0 ? 1 : (n + block - 1) / block;
	int64_t cap = (int64_t)(b->dev->sm_count > 0 ? b->dev->sm_count : 1) * 16;
	if (b->L->grid_cap > 0 && cap > b->L->grid_cap)
		cap = b->L->grid_cap;
	grid = grid > cap ? cap : grid;
	ALIGN_CUDA_LAUNCH(mtp_kernel, (unsigned)grid, block, 0, (cudaStream_t)b->dev->stream, kind, *a, n);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}

extern "C" int mtp_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			    struct align_tensor *out, int n_out, const struct align_launch *launch,
			    struct align_dev *dev)
{
	const struct mtp_params *p = (const struct mtp_params *)params;
	struct mtp_cfg c;
	ALIGN_TRY(dev->err, mtp_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "mtp", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("mtp", "negative launch knob");
	if (c.T <= 0)
		return ALIGN_OK;
	struct cuda_be b;
	memset(&b, 0, sizeof b);
	b.dev = dev;
	b.L = L;
	struct mtp_be be = {&b, cuda_alloc, cuda_op, cuda_kern};
	ALIGN_TRY(dev->err, mtp_pipe(&c, m, in, out, &be)); /* counting pass: sizes only */
	b.cap = b.used + 256;
	b.used = 0;
	void *blk = NULL;
	cudaStream_t stream = (cudaStream_t)dev->stream;
	OPS_CUDA_TRY(cudaMallocAsync(&blk, b.cap, stream));
	b.base = (unsigned char *)blk;
	int rc = mtp_pipe(&c, m, in, out, &be);
	cudaError_t fe = cudaFreeAsync(blk, stream);
	if (rc)
		return rc;
	OPS_CUDA_TRY(fe);
	return ALIGN_OK;
}
