/* qnorm.h: weightless per-head RMSNorm of Q (DSv4 only; specs/dsv4-numerics.md 2.2).
 * q[T,H,D] bf16 -> y[T,H,D] bf16 (f32 for QNORM_MODE=fp32_out). Each (t, h) row of D elements is
 * normalised independently; eps from RMSNORM_EPS, reduction order from RMSNORM_REDUCE, rsqrt
 * from RMSNORM_RSQRT (shared with rmsnorm.h). x = F(q).
 *
 * QNORM_MODE (operation order):
 *   bf16_eager  (DS-ref, PF eager): s_i = R(x_i*x_i); ms = R(sum(F(s)) / D) (fp32 accumulate,
 *               bf16 result); a = R(F(ms) + eps); r = R(rsqrt(F(a))); y = R(x * F(r)).
 *               Four bf16 roundings before the output rounding.
 *   fp32_fused  (MCore torch.compile): r = rsqrt(sum(x*x)/D + eps); y = R(x * r). One rounding.
 *   factor_bf16 (HF): r = R(rsqrt(sum(x*x)/D + eps)); y = R(x * F(r)).
 *   fp32_out    (PF swa_high_precision_norm): y = x * rsqrt(sum(x*x)/D + eps), binary32 output.
 * Error bound vs fp64 x / sqrt(mean(x^2) + eps), relative, ub = 2^-8, u = 2^-24, plus (D+16) u
 * for the binary32 steps: fp32_fused ub; factor_bf16 2 ub; bf16_eager 4 ub (3.5 ub derived:
 * square, mean, eps add each ub/2 through the rsqrt, factor and output roundings ub each);
 * fp32_out (D + 16) u. Checked by test-ops-ref.c.
 * Config: qnorm_cfg_init (qnorm.c) checks the tensors and decodes every mode once into struct qnorm_cfg
 * (RMSNORM_* through rmsnorm_factor_cfg_init); both twins call it first and read only the cfg.
 */
#ifndef ALIGN_QNORM_H
#define ALIGN_QNORM_H

#include "rmsnorm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct qnorm_params {
	int unused;
};

/* what both twins run: the dims and every decoded choice */
struct qnorm_cfg {
	int64_t T, H, D;	     /* q, y [T,H,D] */
	int64_t R;		     /* rows T*H of D elements */
	int mode;		     /* QNORM_MODE value (ALIGN_QNORM_MODE_*) */
	struct rmsnorm_factor_cfg f; /* RMSNORM_REDUCE, RSQRT, EPS */
};

/* Check in/out (data may be NULL; y must be f32 for fp32_out, else bf16) and decode the modes for device
 * (enum align_device). ALIGN_ERR_INPUT for a bad tensor, ALIGN_ERR_UNSUPPORTED for a value device cannot
 * run, ALIGN_ERR_INTERNAL for a value modes.def has but this function does not handle; the message goes
 * to err (NULL: stderr). */
int qnorm_cfg_init(struct qnorm_cfg *c, const struct qnorm_params *p, const struct align_modes *m,
		   const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		   struct align_err *err);

int qnorm_fwd_cpu(const struct qnorm_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		  struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_QNORM_H */
