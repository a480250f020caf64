/* lm_head_bwd.h: backward of the LM head (lm_head.h), issue 18: dx = dlogits @ W and dW = dlogits^T @ x,
 * run by matmul_bwd's entry points (matmul_bwd.h) under the modes LMHEAD_LOGITS fixes, as the forward runs
 * matmul's:
 *   fp32 (DS-ref: F(x) @ W^T with the fp32 head weight): MATMUL_OPERAND=fp32, f32 dlogits;
 *   bf16 (MCore / PaddleFleet bf16 output layer): MATMUL_OPERAND=bf16 (dlogits and x as they are, W rounded
 *        to its bf16 parameter value), bf16 dlogits.
 * dx is the bf16 activation's gradient in both (MATMUL_OUT=bf16: the bf16 GEMM's output, or the fp32 dot
 * rounded once by the backward of x.float()); dW follows WGRAD_ORDER, WGRAD_ACCUM and WGRAD_DTYPE
 * (Megatron's output layer is a column-parallel linear on [s,b,h] activations: sb order, main_grad).
 * Inputs: x[T,D] bf16, w[V,D] f32, dlogits[T,V] (f32 or bf16 per LMHEAD_LOGITS), main_grad[V,D]
 * (WGRAD_DTYPE); outputs dx[T,D] bf16, dw[V,D] (WGRAD_DTYPE). Parameters: matmul_bwd's (S tokens per
 * sequence; variant 1 one sequence). Saved from forward: x and W (the forward's inputs).
 * x and a bf16 dlogits are widened to binary32 exactly before matmul_bwd (its inputs are f32), so every
 * bit is matmul_bwd's: its operation order, rounding points, error bound (checked by test-ops-ref-bwd.c
 * there) and batch invariance (dx per row; dW sums over the tokens) hold as stated in matmul_bwd.h.
 * lm_head_bwd overrides MATMUL_OPERAND and MATMUL_OUT: they do not change its bits.
 */
#ifndef ALIGN_LM_HEAD_BWD_H
#define ALIGN_LM_HEAD_BWD_H

#include "lm_head.h"
#include "matmul_bwd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Check x, w, dlogits, main_grad, dx, dw and write into *mm the modes matmul_bwd runs with (m with
 * MATMUL_OPERAND and MATMUL_OUT set as above). ALIGN_ERR_INPUT for a bad tensor. */
int lm_head_bwd_cfg_init(struct align_modes *mm, const struct matmul_bwd_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			 struct align_err *err);

/* matmul_bwd's four input tensors from lm_head_bwd's: x and dlogits as the binary32 buffers xf (T*D) and
 * df (T*V floats, the caller's, which widens into them), w and main_grad as they are */
void lm_head_bwd_mm_inputs(const struct align_tensor *in, struct align_tensor *mm_in, float *xf, float *df);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_LM_HEAD_BWD_H */
