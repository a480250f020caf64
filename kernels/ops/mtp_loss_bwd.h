/* mtp_loss_bwd.h: backward of the MTP loss side (mtp_loss.h), issue 18: from the gradient of the training
 * loss, the gradient that reaches the main (lm) loss and each depth's MTP loss, as Megatron-LM's and
 * PaddleNLP's autograd evaluate it (specs/dsv4-numerics.md 8). Inputs: mtp[T,K] f32 (the forward's; only its
 * shape is read: every step below is linear, no framework saves a value for it), dtotal[T] f32 (the gradient
 * of total, the loss backward starts from); outputs dlm[T] f32, dmtp[T,K] f32. Switches: the forward's
 * MTP_LOSS_SCALE and MTP_LOSS_COMBINE (the profiles give both ops the same values). Parameters: factor as
 * mtp_loss; main_scale: MTPLossAutoScaler.main_loss_backward_scale, an fp32 tensor (default
 * torch.tensor(1.0); Megatron's schedules.py forward_step_calc_loss sets loss_scale / num_microbatches, or
 * loss_scale with calculate_per_token_loss), taken as R32(main_scale). Saved from forward: nothing.
 *
 * Operation order per row (CPU twin = specification), R = binary32 rounding, s, lambda, inv_k as mtp_loss.h
 * (s = R32(factor / K), lambda = R32(factor), inv_k = R32(1.0 / K)):
 *   1. dlm = dtotal (bits copied): every combination's main branch is the identity (autoscaler: total is lm,
 *      and MTPLossAutoScaler.backward returns grad_output unchanged, Megatron-LM
 *      megatron/core/transformer/multi_token_prediction.py, read; add: torch add's backward passes grad;
 *      add_detach: PaddleNLP paddlenlp/transformers/deepseek_v2/modeling.py DeepseekV2PretrainingCriterion
 *      add_loss `main_loss + loss - loss.detach()`, read: Paddle's subtract_grad and add_grad pass dout to x
 *      for equal shapes (inference: their yaml entries read, not their kernels)).
 *   2. g, the gradient of the scaled MTP term (MTP_LOSS_COMBINE):
 *        autoscaler  g = R32(main_scale), whatever dtotal is (MTPLossAutoScaler.backward:
 *                    `torch.ones_like(mtp_loss) * main_loss_backward_scale`, exact)
 *        add_detach  g = dtotal (the `+ loss` branch; `- loss.detach()` has no gradient: add's bits)
 *        add         g = dtotal
 *   3. d, the gradient of each depth's loss (MTP_LOSS_SCALE), the same for every k:
 *        per_depth       d = R(g * s)  (multi_token_prediction.py process_mtp_loss: `mtp_loss_scale *
 *                        mtp_loss` is torch.mul(mtp_loss, python float), read; its backward grad * other
 *                        with the wrapped scalar taken as fp32 by the binary32 kernel is inference (ATen's
 *                        mul_tensor_backward, not read here); the depths' sum fans the gradient out)
 *        sum_then_scale  dl = R(inv_k * g) + 0.0f;  d = R(lambda * dl) + 0.0f
 *                        (DeepseekV2PretrainingCriterion: `lambda * sum(...) / len(...)`: scale(x, lambda)
 *                        then scale(x, 1.0 / K) (Paddle eager_math_op_patch.cc CallScalarFunction, read),
 *                        whose backward is scale(dout, same scale, bias 0.0, bias_after_scale) (read in
 *                        the eager GradNodeScale, scale_node.cc; the generated scale_grad: inference),
 *                        computed `scale * x + bias` (phi ScaleKernel, read: EigenScale on the CPU,
 *                        ScaleFunctor on the GPU, where nvcc's fmaf(scale, x, 0) gives the same bits;
 *                        scale and bias as fp32): the + 0.0f turns a -0 into +0; the sum's tensor adds
 *                        fan dsum out unchanged, and Python's sum starts with 0 + L_0, scale(L_0, 1.0,
 *                        bias 0), whose backward R(1 * d) + 0 is d itself)
 *      dmtp[t,k] = d for k = 0..K-1.
 * Not modelled: Megatron's per-token form. Its losses are `mtp_loss_scale * loss_t / num_tokens` per token
 * (the division between, and calculate_per_token_loss's original / rolled token ratio); this op's L_k are
 * token means, as mtp_loss's, so a per-token gradient R(R(g / n) * s) is not R(R(g * s) / n) in general.
 * NaN bits: the host's rules (nan_host.h hn_*). Rows are independent: batch invariant.
 *
 * Error bound vs long double (the exact derivative of lm + c * (factor / K) * sum_k L_k, c = dtotal or
 * R32(main_scale), factor and 1 / K exact), u = 2^-24: dlm exact; |dmtp - c factor / K| <= e |c factor / K|
 * + z with per_depth e = 3u (2u + 2^-53 + O(u^2): s, one product), z = 2^-150 (a subnormal product);
 * sum_then_scale e = 5u (4u + O(u^2): lambda, inv_k, two products), z = (1 + |factor|) 2^-150. Checked by
 * tests/kernels/test-ops-ref-mtp.c, with central differences of the mtp_loss twin.
 * Config: mtp_loss_bwd_cfg_init (mtp_loss_bwd.c) checks the tensors and decodes both switches through
 * mtp_loss_cfg_init; both twins read it.
 */
#ifndef ALIGN_MTP_LOSS_BWD_H
#define ALIGN_MTP_LOSS_BWD_H

#include "mtp_loss.h"
#include "nan_host.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mtp_loss_bwd_params {
	double factor;	   /* as mtp_loss_params.factor */
	double main_scale; /* MTPLossAutoScaler.main_loss_backward_scale (autoscaler only); rounded to fp32 */
};

struct mtp_loss_bwd_cfg {
	struct mtp_loss_cfg f; /* the forward's: T, K, sum_first, combine, s, lambda, inv_k */
	float main_scale;      /* R32(main_scale) */
};

int mtp_loss_bwd_cfg_init(struct mtp_loss_bwd_cfg *c, const struct mtp_loss_bwd_params *p, const struct align_modes *m,
			  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			  int device, struct align_err *err);

/* row t: dlm and the K depth gradients dL from dtotal (steps 1-3) */
ALIGN_HD static inline void mtp_loss_bwd_row(const struct mtp_loss_bwd_cfg *c, float dtotal, float *dlm, float *dL)
{
	const struct mtp_loss_cfg *f = &c->f;
	float g = f->combine == MTP_LOSS_AUTOSCALER ? c->main_scale : dtotal, d;
	if (f->sum_first)
		d = hn_add(hn_mul(f->lambda, hn_add(hn_mul(f->inv_k, g), 0.0f)), 0.0f);
	else
		d = hn_mul(g, f->s);
	*dlm = dtotal;
	for (int64_t k = 0; k < f->K; k++)
		dL[k] = d;
}

int mtp_loss_bwd_fwd_cpu(const struct mtp_loss_bwd_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MTP_LOSS_BWD_H */
