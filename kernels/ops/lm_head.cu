/* lm_head.cu: CUDA twin of the LM head (contract: lm_head.h): the matmul op's CUDA twin (matmul.cu, every
 * engine and launch knob of it) under the MATMUL_OPERAND / MATMUL_OUT values that LMHEAD_LOGITS fixes, so
 * the portable engine gives the C twin's bytes and MATMUL_IMPL=cublas is F.linear as PyTorch runs it.
 * It launches nothing itself: matmul.cu's kernels run through its ALIGN_CUDA_LAUNCH (so tests/emu/run-emu.sh
 * builds this twin into the emulator with matmul.cu).
 * Napkin maths (DSv4-Flash: T = 4096 tokens, D = 4096, V = 129280): 2 T D V = 4.3 TFLOP, compute bound
 * (~5 ms on an H100 with a bf16 tensor-core engine; the portable engine is a reference, not fast).
 */
#include "lm_head.h"

#include "ops_cuda.h"

#include "matmul.h"

extern "C" int lm_head_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				struct align_dev *dev)
{
	struct align_modes mm;
	struct matmul_params mp = {0};
	ALIGN_TRY(dev->err,
		  lm_head_cfg_init(&mm, (const struct lm_head_params *)params, m, in, n_in, out, n_out, dev->err));
	return matmul_fwd_cuda(&mp, &mm, in, n_in, out, n_out, launch, dev);
}
