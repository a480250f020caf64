/* mtp_bwd.cu: CUDA twin of the MTP pre-layer's backward (contract: mtp_bwd.h; order: mtp_bwd_pipe.h, the same
 * code as the C twin). The forward's steps 1-3 (embedding, rmsnorm) and the backward ops (matmul_bwd,
 * rmsnorm_bwd, embedding_bwd) run through their CUDA twins (ops_cuda_fwd, default launch) on the same device
 * context, so every output is bitwise the C twin's wherever theirs are (every portable mode). mtp's element
 * steps (mtp_elem: widenings, the concat operands) and mtp_bwd's (mtp_bwd_elem: the stream sum, the strided
 * copies) run one thread per element, compiled with --fmad=false.
 * Memory: the intermediates come from one cudaMallocAsync per call, freed with cudaFreeAsync on dev->stream
 * (mtp_cuda.cuh, mtp.cu's backend). Knobs: launch.block for mtp_bwd's kernels (default 256), serial: one
 * thread; the sub-ops run with their defaults.
 * Napkin maths (DSv4-Flash MTP: 4096 tokens, D = 4096, N = 4): h_proj's dgrad and wgrad are 2 x 275 G
 * multiply-adds, e_proj's a quarter of that (portable engine: a reference, not fast); the rest is memory
 * bound (~2 GB moved).
 */
#include "math_cuda.cuh"

#include "mtp_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#include "mtp_bwd_pipe.h"

#include "mtp_cuda.cuh"

__global__ void mtp_bwd_fkernel(int kind, mtp_kargs a, int64_t n)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		mtp_elem(kind, &a, i);
}

__global__ void mtp_bwd_kernel(int kind, mtp_bwd_kargs a, int64_t n)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		mtp_bwd_elem(kind, &a, i);
}

static int cuda_kern(void *ctx, int kind, const struct mtp_kargs *a)
{
	struct mtp_cuda_be *b = (struct mtp_cuda_be *)ctx;
	if (!b->base) /* counting pass */
		return ALIGN_OK;
	int64_t n = mtp_elems(kind, a), grid;
	if (n <= 0)
		return ALIGN_OK;
	int block, rc = mtp_cuda_dims(b, mtp_bwd_fkernel, n, &block, &grid);
	if (rc)
		return rc;
	ALIGN_CUDA_LAUNCH(mtp_bwd_fkernel, (unsigned)grid, block, 0, (cudaStream_t)b->dev->stream, kind, *a, n);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}

static int cuda_kern_bwd(void *ctx, int kind, const struct mtp_bwd_kargs *a)
{
	struct mtp_cuda_be *b = (struct mtp_cuda_be *)ctx;
	if (!b->base) /* counting pass */
		return ALIGN_OK;
	int64_t n = a->rows * a->n, grid;
	if (n <= 0)
		return ALIGN_OK;
	int block, rc = mtp_cuda_dims(b, mtp_bwd_kernel, n, &block, &grid);
	if (rc)
		return rc;
	ALIGN_CUDA_LAUNCH(mtp_bwd_kernel, (unsigned)grid, block, 0, (cudaStream_t)b->dev->stream, kind, *a, n);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}

struct bwd_arg {
	const struct mtp_bwd_cfg *c;
	const struct align_modes *m;
	const struct align_tensor *in;
	struct align_tensor *out;
};

static int bwd_pass(void *arg, struct mtp_cuda_be *b)
{
	const struct bwd_arg *f = (const struct bwd_arg *)arg;
	struct mtp_bwd_be be = {{b, mtp_cuda_alloc, mtp_cuda_op, cuda_kern}, cuda_kern_bwd};
	return mtp_bwd_pipe(f->c, f->m, f->in, f->out, &be);
}

extern "C" int mtp_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				struct align_dev *dev)
{
	const struct mtp_params *p = (const struct mtp_params *)params;
	struct mtp_bwd_cfg c;
	ALIGN_TRY(dev->err, mtp_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "mtp_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("mtp_bwd", "negative launch knob");
	struct bwd_arg f = {&c, m, in, out};
	return mtp_cuda_run(dev, L, bwd_pass, &f);
}
