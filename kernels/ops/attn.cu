/* attn.cu: CUDA twin of the composed DSv4 attention layer (contract: attn.h; order: attn_pipe.h, the same
 * code as the C twin). The other ops run through their CUDA twins (ops_cuda_fwd, default launch) on the same
 * device context, so attn is bitwise equal to the C twin wherever they are (every portable mode); attn's
 * own steps (the linears, the cast, copy and positions, the FP8 QDQ of kv, the indexer-query rotation and
 * the index sets) are attn.h's element code, one thread per output element or row, compiled with
 * --fmad=false. GPU-only values reach the sub-ops, which run them (MATH_IMPL=cuda, RMSNORM_RSQRT=cuda, ...).
 * Memory: the intermediates come from one cudaMallocAsync per call, freed with cudaFreeAsync on dev->stream
 * (the sub-ops keep using the device context's own workspace, so the two never overlap).
 * Knobs: launch.block for attn's kernels (default 256), serial: attn's kernels with one thread; the sub-ops
 * run with their defaults.
 * Napkin maths (DSv4-Flash csa layer, 4096 tokens): the linears (D = 4096 to q_lora 1024, kv 512, the
 * compressors 2x1024 + 2x256, 64 head weights; q_lora to 64 x 512 + 64 x 128; grouped 8 x 4096 -> 1024 and
 * 8192 -> 4096) are ~140 G multiply-adds on CUDA cores in the bitwise order (~4 ms at ~67 TFLOP/s of fp32
 * issue); sparse_attn dominates the rest (its own header).
 */
#include "math_cuda.cuh" /* first: compressor.h takes dm_expf from it in the device pass */

#include "attn.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#include "attn_pipe.h"

#include "attn_cuda.cuh"

extern "C" int attn_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			     struct align_tensor *out, int n_out, const struct align_launch *launch,
			     struct align_dev *dev)
{
	const struct attn_params *p = (const struct attn_params *)params;
	struct attn_cfg c;
	ALIGN_TRY(dev->err, attn_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "attn", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("attn", "negative launch knob");
	if (c.T <= 0)
		return ALIGN_OK;
	struct attn_cuda_be b;
	memset(&b, 0, sizeof b);
	b.dev = dev;
	b.L = L;
	struct attn_be be = {&b, attn_cuda_alloc, attn_cuda_op, attn_cuda_kern};
	ALIGN_TRY(dev->err, attn_pipe(&c, p, m, in, out, &be)); /* counting pass: sizes only */
	b.cap = b.used + 256;
	b.used = 0;
	void *blk = NULL;
	cudaStream_t stream = (cudaStream_t)dev->stream;
	OPS_CUDA_TRY(cudaMallocAsync(&blk, b.cap, stream));
	b.base = (unsigned char *)blk;
	int rc = attn_pipe(&c, p, m, in, out, &be);
	cudaError_t fe = cudaFreeAsync(blk, stream);
	if (rc)
		return rc;
	OPS_CUDA_TRY(fe);
	return ALIGN_OK;
}
