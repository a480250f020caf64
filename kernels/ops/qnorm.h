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
 */
#ifndef ALIGN_QNORM_H
#define ALIGN_QNORM_H

#include "rmsnorm.h"

struct qnorm_params {
	int unused;
};

int qnorm_fwd_cpu(const struct qnorm_params *p, const struct align_modes *m, const struct align_tensor *in,
		  int n_in, struct align_tensor *out, int n_out);

#endif /* ALIGN_QNORM_H */
