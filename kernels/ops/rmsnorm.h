/* rmsnorm.h: weighted RMSNorm over the last dim (DSv4 attn_norm, ffn_norm, q_norm, kv_norm,
 * compressor norm, final norm; specs/dsv4-numerics.md 2.1). x[T,D] bf16, w[D] f32 -> y[T,D] bf16.
 *
 * Operation order per row (CPU twin = specification), x32 = F(x):
 *   1. ss  = sum of x32*x32 in the RMSNORM_REDUCE order (reduce.h: seq, pairwise, warp32, or
 *            fp64 with exact squares), binary32 result.
 *   2. ms  = ss / (float)D                       (binary32 divide: torch.mean = sum then divide)
 *   3. r   = rsqrt(ms + eps)                      eps = 1e-6f or 1e-5f (RMSNORM_EPS), binary32 add;
 *            rsqrt per RMSNORM_RSQRT: rn = align_rsqrtf (correctly rounded in practice),
 *            div = 1.0f/sqrtf, approx = mimic_rsqrtf_approx (<= 3.2 ulp, see test-math).
 *   4. y   = x32 * r                              (binary32)
 *   5. w'  = w (RMSNORM_WEIGHT=fp32) or F(R(w)) (bf16)
 *   6. out = R(w' * y)            (RMSNORM_CAST=after_weight: one rounding, DS-ref)
 *      out = R(F(R(y)) * F(R(w')))  (before_weight: normalised value stored as bf16, then a bf16
 *                                    multiply with the bf16 weight, HF/LLaMA style)
 * Error bound vs the fp64 evaluation of w' * x / sqrt(mean(x^2) + eps) (same w', same binary32
 * eps), relative to the reference, with ub = 2^-8 the bf16 unit roundoff and u = 2^-24:
 * after_weight: ub + (D+16) u (one bf16 rounding + the binary32 steps); before_weight:
 * 3 ub + (D+16) u (three bf16 roundings). Checked by test-ops-ref.c.
 * Rows are independent: a row's bytes do not depend on T (batch invariance).
 */
#ifndef ALIGN_RMSNORM_H
#define ALIGN_RMSNORM_H

#include "reduce.h"

struct align_modes;
struct align_tensor;

struct rmsnorm_params {
	int unused; /* eps comes from RMSNORM_EPS; shapes from the tensors */
};

/* binary32 eps for RMSNORM_EPS value v */
ALIGN_HD static inline float rmsnorm_eps(int v)
{
	return v == 1 ? 1e-5f : 1e-6f;
}

/* order of RMSNORM_REDUCE value v (seq|pairwise|warp32|fp64) */
ALIGN_HD static inline enum align_reduce_order rmsnorm_order(int v)
{
	return v == 1 ? ALIGN_REDUCE_PAIRWISE : v == 2 ? ALIGN_REDUCE_WARP32 : v == 3 ? ALIGN_REDUCE_F64 : ALIGN_REDUCE_SEQ;
}

/* rsqrt of RMSNORM_RSQRT value v (rn|div|approx) */
ALIGN_HD static inline float rmsnorm_rsqrt(int v, float x)
{
	return v == 1 ? align_rsqrtf_div(x) : v == 2 ? mimic_rsqrtf_approx(x) : align_rsqrtf(x);
}

/* steps 1-3: r = rsqrt(sum(x^2)/n + eps) over n binary32 values */
ALIGN_HD static inline float rmsnorm_factor(const float *x32, int64_t n, int reduce_v, int rsqrt_v, float eps)
{
	float ss = align_reduce(rmsnorm_order(reduce_v), x32, n, 1, 0, 1);
	return rmsnorm_rsqrt(rsqrt_v, ss / (float)n + eps);
}

int rmsnorm_fwd_cpu(const struct rmsnorm_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out);

#endif /* ALIGN_RMSNORM_H */
