/* attn_bwd.cu: CUDA twin of the attention layer's backward (contract: attn_bwd.h; order: attn_bwd_pipe.h, the
 * same code as the C twin). The forward (attn_pipe_run on attn_cuda.cuh's backend) and the backward ops
 * (matmul_bwd, rope_bwd, sparse_attn_bwd, qnorm_bwd, rmsnorm_bwd, compressor_bwd) run through their CUDA twins
 * (ops_cuda_fwd, default launch) on the same device context, so every output is bitwise the C twin's wherever
 * theirs are (every portable mode). attn's element steps run as in attn.cu; attn_bwd's (attn_bwd_elem: the
 * widenings, strided copies, zero fills and the dx sum) one thread per element, compiled with --fmad=false.
 * Memory: the intermediates come from one cudaMallocAsync per call (a counting pass sizes it), freed with
 * cudaFreeAsync on dev->stream. Knobs: launch.block (default 256), grid_cap, serial (one thread) for attn's and
 * attn_bwd's kernels; the sub-ops run with their defaults.
 * Napkin maths: about twice the forward's multiply-adds in the linears (dgrad and wgrad per linear) plus
 * sparse_attn_bwd (its own header) and compressor_bwd; a reference, not fast.
 */
#include "math_cuda.cuh" /* first: compressor.h takes dm_expf from it in the device pass */

#include "attn_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#include "attn_bwd_pipe.h"

#include "attn_cuda.cuh"

__global__ void attn_bwd_kernel(int kind, attn_bwd_kargs a, int64_t n)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		attn_bwd_elem(kind, &a, i);
}

static int cuda_kern_bwd(void *ctx, int kind, const struct attn_bwd_kargs *a)
{
	struct attn_cuda_be *b = (struct attn_cuda_be *)ctx;
	if (!b->base) /* counting pass */
		return ALIGN_OK;
	int64_t n = a->rows * a->n;
	if (n <= 0)
		return ALIGN_OK;
	int maxb = 0, rc = rows_max_block(attn_bwd_kernel, &maxb);
	if (rc)
		return rc;
	int block = b->L->block > 0 ? (b->L->block > 1024 ? 1024 : b->L->block) : 256;
	block = b->L->serial > 0 ? 1 : block > maxb ? maxb : block;
	int64_t grid = b->L->serial > 0 ? 1 : (n + block - 1) / block;
	int64_t cap = (int64_t)(b->dev->sm_count > 0 ? b->dev->sm_count : 1) * 16;
	if (b->L->grid_cap > 0 && cap > b->L->grid_cap)
		cap = b->L->grid_cap;
	grid = grid > cap ? cap : grid;
	ALIGN_CUDA_LAUNCH(attn_bwd_kernel, (unsigned)grid, block, 0, (cudaStream_t)b->dev->stream, kind, *a, n);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}

extern "C" int attn_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				 int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				 struct align_dev *dev)
{
	const struct attn_params *p = (const struct attn_params *)params;
	struct attn_bwd_cfg c;
	ALIGN_TRY(dev->err, attn_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "attn_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("attn_bwd", "negative launch knob");
	if (c.f.T <= 0)
		return ALIGN_OK;
	struct attn_cuda_be b;
	memset(&b, 0, sizeof b);
	b.dev = dev;
	b.L = L;
	struct attn_bwd_be be = {{&b, attn_cuda_alloc, attn_cuda_op, attn_cuda_kern}, cuda_kern_bwd};
	ALIGN_TRY(dev->err, attn_bwd_pipe(&c, p, m, in, out, &be)); /* counting pass: sizes only */
	b.cap = b.used + 256;
	b.used = 0;
	void *blk = NULL;
	cudaStream_t stream = (cudaStream_t)dev->stream;
	OPS_CUDA_TRY(cudaMallocAsync(&blk, b.cap, stream));
	b.base = (unsigned char *)blk;
	int rc = attn_bwd_pipe(&c, p, m, in, out, &be);
	cudaError_t fe = cudaFreeAsync(blk, stream);
	if (rc)
		return rc;
	OPS_CUDA_TRY(fe);
	return ALIGN_OK;
}
