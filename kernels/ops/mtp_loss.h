/* mtp_loss.h: the loss side of multi-token prediction: the MTP losses of K depths scaled by
 * mtp_loss_scaling_factor / K, and the training loss's forward value built from the main (lm) loss and that
 * term, as Megatron-LM and PaddleNLP / PaddleFleet write it (specs/dsv4-numerics.md 8).
 * lm[T] f32 (the main loss, one row per micro-batch or step), mtp[T,K] f32 (the per-depth MTP losses,
 * already token means) -> scaled[T] f32 (the MTP term), total[T] f32 (the forward value of the loss that
 * backward starts from). params.factor: mtp_loss_scaling_factor / multi_token_pred_lambda (a Python float).
 *
 * Operation order per row (CPU twin = specification), R = binary32 rounding, R32(x) = (float)x:
 *   MTP_LOSS_SCALE=per_depth (Megatron-LM megatron/core/transformer/multi_token_prediction.py,
 *     MultiTokenPredictionBlock.forward / process_mtp_loss: `mtp_loss_scale = mtp_loss_scaling_factor /
 *     mtp_num_layers` in Python (binary64), then `mtp_loss_scale * mtp_loss` on an fp32 tensor (the scalar
 *     taken as fp32), once per depth):
 *       s = R32(factor / K) (binary64 divide), scaled = R(s * L_0), scaled = R(scaled + R(s * L_k)), k = 1..K-1
 *   MTP_LOSS_SCALE=sum_then_scale (PaddleNLP paddlenlp/transformers/deepseek_v2/modeling.py,
 *     DeepseekV2PretrainingCriterion.forward: `multi_token_pred_lambda * sum(mtp_loss_res) / len(mtp_loss_res)`;
 *     Python's sum from int 0, then Paddle's scalar ops: `x * c` is scale(x, c) and `x / n` is
 *     scale(x, 1.0 / n) (eager_math_op_patch.cc), both with the scale as fp32):
 *       sum = L_0, sum = R(sum + L_k) k = 1..K-1;  l = R(R32(factor) * sum);  scaled = R(l * R32(1.0 / K))
 *   MTP_LOSS_COMBINE:
 *     autoscaler  total = lm            (Megatron: MTPLossAutoScaler puts the scaled MTP loss into the
 *                                        gradient only; the loss backward starts from, and logs, is lm)
 *     add_detach  total = R(R(lm + scaled) - scaled)   (PaddleNLP add_loss: `main_loss + loss -
 *                                        loss.detach()`: the value is lm up to two roundings, the gradient
 *                                        carries the MTP term)
 *     add         total = R(lm + scaled)               (the objective lm + s * mtp summed in fp32)
 * Error bound vs fp64 (exact factor / K, exact sums), with u = 2^-24 and A = sum_k |L_k|:
 *   scaled: (K + 3) u (factor / K) A;  total: add u (|lm| + |scaled|) + the scaled bound, add_detach
 *   |total - lm| <= 2 u (|lm| + |scaled|), autoscaler exact. Checked by tests/kernels/test-ops-ref-mtp.c.
 * Rows are independent and each reads its K losses in depth order: batch invariant.
 * Config: mtp_loss_cfg_init checks the tensors and decodes both switches; both twins read it.
 */
#ifndef ALIGN_MTP_LOSS_H
#define ALIGN_MTP_LOSS_H

#include <stdint.h>

#include "numerics.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "modes.h"

struct align_tensor;
struct align_err;

struct mtp_loss_params {
	double factor; /* mtp_loss_scaling_factor (Megatron recipes 0.1) / multi_token_pred_lambda (Paddle 0.3) */
};

enum mtp_loss_combine { MTP_LOSS_AUTOSCALER, MTP_LOSS_ADD_DETACH, MTP_LOSS_ADD };

struct mtp_loss_cfg {
	int64_t T, K;
	int sum_first; /* MTP_LOSS_SCALE=sum_then_scale */
	int combine;   /* enum mtp_loss_combine */
	float s;       /* per_depth: R32(factor / K) */
	float lambda;  /* sum_then_scale: R32(factor) */
	float inv_k;   /* sum_then_scale: R32(1.0 / K) */
};

int mtp_loss_cfg_init(struct mtp_loss_cfg *c, const struct mtp_loss_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err);

/* row t: scaled and total from lm and the K losses L */
ALIGN_HD static inline void mtp_loss_row(const struct mtp_loss_cfg *c, float lm, const float *L, float *scaled,
					 float *total)
{
	float v;
	if (c->sum_first) {
		float sum = L[0];
		for (int64_t k = 1; k < c->K; k++)
			sum = sum + L[k];
		v = (c->lambda * sum) * c->inv_k;
	} else {
		v = c->s * L[0];
		for (int64_t k = 1; k < c->K; k++)
			v = v + c->s * L[k];
	}
	*scaled = v;
	*total = c->combine == MTP_LOSS_AUTOSCALER ? lm : c->combine == MTP_LOSS_ADD_DETACH ? (lm + v) - v : lm + v;
}

int mtp_loss_fwd_cpu(const struct mtp_loss_params *p, const struct align_modes *m, const struct align_tensor *in,
		     int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MTP_LOSS_H */
