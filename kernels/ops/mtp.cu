/* mtp.cu: CUDA twin of the MTP pre-layer (contract: mtp.h; order: mtp_pipe.h, the same code as the C twin).
 * The embedding, rmsnorm and matmul ops run through their CUDA twins (ops_cuda_fwd, default launch) on the
 * same device context, so mtp is bitwise equal to the C twin wherever they are (every portable mode; with
 * MATMUL_IMPL=tc / cublas_pinned / cublas the projections are those engines' bits). mtp's own steps (the
 * shift, the fp32 operand copies and concatenations, the bf16 rounding and the bf16 add) are mtp_elem, one
 * thread per element, compiled with --fmad=false. The ids are checked on the host first (embedding.cu's
 * check: it waits for that copy).
 * Memory: the intermediates come from one cudaMallocAsync per call, freed with cudaFreeAsync on dev->stream
 * (mtp_cuda.cuh, the backend mtp_bwd.cu shares). Knobs: launch.block for mtp's kernels (default 256), serial:
 * mtp's kernels with one thread; the sub-ops run with their defaults.
 * Napkin maths (DSv4-Flash MTP: 4096 tokens, D = 4096, N = 4): h_proj is 4096*4*4096*4096 = 275 G
 * multiply-adds (~4 ms on a bf16 tensor-core engine, seconds on the portable one); the rest is memory bound
 * (~1 GB moved).
 */
#include "math_cuda.cuh"

#include "mtp.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#include "mtp_pipe.h"

#include "mtp_cuda.cuh"

__global__ void mtp_kernel(int kind, mtp_kargs a, int64_t n)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		mtp_elem(kind, &a, i);
}

static int cuda_kern(void *ctx, int kind, const struct mtp_kargs *a)
{
	struct mtp_cuda_be *b = (struct mtp_cuda_be *)ctx;
	if (!b->base) /* counting pass */
		return ALIGN_OK;
	int64_t n = mtp_elems(kind, a), grid;
	if (n <= 0)
		return ALIGN_OK;
	int block, rc = mtp_cuda_dims(b, mtp_kernel, n, &block, &grid);
	if (rc)
		return rc;
	ALIGN_CUDA_LAUNCH(mtp_kernel, (unsigned)grid, block, 0, (cudaStream_t)b->dev->stream, kind, *a, n);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}

struct fwd_arg {
	const struct mtp_cfg *c;
	const struct align_modes *m;
	const struct align_tensor *in;
	struct align_tensor *out;
};

static int fwd_pass(void *arg, struct mtp_cuda_be *b)
{
	const struct fwd_arg *f = (const struct fwd_arg *)arg;
	struct mtp_be be = {b, mtp_cuda_alloc, mtp_cuda_op, cuda_kern};
	return mtp_pipe(f->c, f->m, f->in, f->out, &be);
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
	struct fwd_arg f = {&c, m, in, out};
	return mtp_cuda_run(dev, L, fwd_pass, &f);
}
