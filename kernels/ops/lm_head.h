/* lm_head.h: the output layer, logits[T,V] = x[T,D] @ w[V,D]^T (DS-ref `ParallelHead`, MCore
 * `output_layer`, PaddleFleet `lm_head`), run by the matmul op's entry points (matmul.h) under modes
 * that LMHEAD_LOGITS fixes:
 *   fp32 (DS-ref: fp32 head weight, F(x) @ W^T in fp32): MATMUL_OPERAND=fp32, MATMUL_OUT=fp32,
 *        logits f32;
 *   bf16 (MCore / PaddleFleet bf16 output layer): MATMUL_OPERAND=bf16 (x as is, w rounded to its bf16
 *        parameter value), MATMUL_OUT=bf16, logits bf16.
 * Everything else follows the matmul contract with the caller's MATMUL_ACCUM, MATMUL_FMA and MATMUL_IMPL
 * (portable on both twins; the *-cuda profiles' cublas is nn.Linear / F.linear as PyTorch calls it).
 * lm_head overrides MATMUL_OPERAND and MATMUL_OUT: they do not change its bits.
 * Error bound vs fp64: matmul.h's (seq: D u S, plus half a bf16 ulp of the result with bf16 logits),
 * checked by test-ops-ref-model.c. Rows are independent and each dot runs in a fixed K order: batch
 * invariant (portable; tc and cublas_pinned too, cublas not).
 * x is the final-norm output (bf16); w is the fp32 master of the (shared) output matrix.
 */
#ifndef ALIGN_LM_HEAD_H
#define ALIGN_LM_HEAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "modes.h"

struct align_tensor;
struct align_err;

struct lm_head_params {
	int unused; /* shapes from the tensors */
};

/* Check x bf16 [T,D], w f32 [V,D], logits [T,V] (f32 or bf16 per LMHEAD_LOGITS) and write into *mm the
 * modes the matmul entry points run with (m with MATMUL_OPERAND and MATMUL_OUT set as above).
 * ALIGN_ERR_INPUT for a bad tensor, ALIGN_ERR_INTERNAL for a value not handled. */
int lm_head_cfg_init(struct align_modes *mm, const struct lm_head_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
		     struct align_err *err);

/* the logits dtype of LMHEAD_LOGITS value v (enum align_dtype) */
int lm_head_logits_dtype(int v);

int lm_head_fwd_cpu(const struct lm_head_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_LM_HEAD_H */
