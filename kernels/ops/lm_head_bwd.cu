/* lm_head_bwd.cu: CUDA twin of the LM head backward (contract: lm_head_bwd.h; specification:
 * lm_head_bwd.c): x and dlogits widened to binary32 into pool memory (exact), then matmul_bwd's CUDA twin
 * (matmul_bwd.cu, its launch knobs) under LMHEAD_LOGITS's operand mode and a bf16 dx, so its bytes are the
 * C twin's. tests/emu/run-emu.sh builds it into the emulator with matmul_bwd.cu.
 * Napkin maths (DSv4-Flash: T = 4096, D = 4096, V = 129280): 2 x 2 T D V = 8.7 TFLOP for dx and dW; the
 * portable engine is a reference, not fast; the widening moves T (D + V) elements once.
 */
#include "lm_head_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

extern "C" int matmul_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				   int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				   struct align_dev *dev);

/* dst[i] = F(src[i]) for bf16 src, or src[i] (f32), grid-stride */
__global__ void lm_head_bwd_widen_kernel(const void *src, int bf16, float *dst, int64_t n)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		dst[i] = bf16 ? align_bf16_to_f32(((const align_bf16 *)src)[i]) : ((const float *)src)[i];
}

static int widen(const struct align_tensor *t, float **dst, struct align_dev *dev)
{
	int64_t n = align_tensor_numel(t);
	void *p = NULL;
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(n > 0 ? n : 1) * sizeof(float), &p));
	*dst = (float *)p;
	if (n > 0) {
		int64_t grid = (n + 255) / 256;
		ALIGN_CUDA_LAUNCH(lm_head_bwd_widen_kernel, (unsigned)(grid > 4096 ? 4096 : grid), 256, 0,
				  (cudaStream_t)dev->stream, t->data, t->dtype == ALIGN_DT_BF16, *dst, n);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	}
	return ALIGN_OK;
}

extern "C" int lm_head_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				    int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				    struct align_dev *dev)
{
	struct align_modes mm;
	ALIGN_TRY(dev->err, lm_head_bwd_cfg_init(&mm, (const struct matmul_bwd_params *)params, m, in, n_in, out, n_out,
						 dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "lm_head_bwd", in, n_in, out, n_out));
	float *xf = NULL, *df = NULL;
	ALIGN_TRY(dev->err, widen(&in[0], &xf, dev));
	ALIGN_TRY(dev->err, widen(&in[2], &df, dev));
	struct align_tensor mi[4];
	lm_head_bwd_mm_inputs(in, mi, xf, df);
	return matmul_bwd_fwd_cuda(params, &mm, mi, 4, out, n_out, launch, dev);
}
