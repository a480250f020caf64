/* swiglu_bwd.h: backward of the DSv4 SwiGLU activation (swiglu.h; issue 18).
 * Inputs: the forward inputs g[T,F] bf16, u[T,F] bf16, p[T] f32 and the output gradient da[T,F] bf16.
 * Outputs: dg[T,F] bf16, du[T,F] bf16, dp[T] f32 (the routing-probability gradient).
 * Saved from forward: nothing; the clamp, sigmoid and silu are recomputed from g and u here (as the fused
 * backward of Megatron and PaddleFleet does from its saved input y = [g | u]).
 *
 * Operation order per element (CPU twin = specification), g32 = F(g), u32 = F(u), L = limit, all binary32,
 * unfused, exp per MATH_IMPL as in swiglu.h:
 *   1. clamp as the forward (swiglu.h step 1) when it clamps; masks (SWIGLU_BWD_CLAMP):
 *        inclusive: mg = g32 <= L, mu = -L <= u32 && u32 <= L   (torch.clamp's backward: the gradient
 *                   passes at the limit itself; NaN compares false: no gradient)
 *        strict:    mg = g32 < L,  mu = -L < u32 && u32 < L
 *      no clamp: mg = mu = 1.
 *   2. e = exp(-g); sig = 1.0f / (1.0f + e); s = silu(g) as the forward (SWIGLU_SILU div / mul).
 *   3. q = p (SWIGLU_SCALE=fp32) or F(R(p)) (bf16); x = F(da); SWIGLU_PROBS=before_w2: d = x * q;
 *      after_w2: d = x (the probability is applied after W2).
 *   4. silu' term (SWIGLU_BWD_DSILU):
 *        factored: t = (d * sig) * (1.0f + g * (1.0f - sig))   (Megatron-LM fused_bias_swiglu.py
 *                  swiglu_back, called by weighted_swiglu_back with g * weights; PaddleFleet's copy of
 *                  it; ATen's silu_backward, dy * s * (1 + x * (1 - s)))
 *        expanded: t = d * (sig + (g * sig) * (1.0f - sig))    (Triton SwiGLU backward kernels: gate_sigmoid
 *                  + gate_silu * (1 - gate_sigmoid), with gate_silu = g * sig)
 *      dg = mg ? R(t * u) : +0;  du = mu ? R(d * s) : +0.
 *   5. dp[t] (before_w2 only; after_w2: +0): terms c_f = x * A_f with A_f = s * u (SWIGLU_ROUND=single) or
 *      F(R(s * u)) (double: the forward multiplied the rounded activation), summed over f in fp32 in the
 *      order SWIGLU_BWD_DP_SUM: seq (f ascending from c_0), pairwise or warp32 (reduce.h's orders, with
 *      the host's NaN rules on the GPU). The gradient of q passes the bf16 cast of SWIGLU_SCALE unchanged.
 * Error bound vs fp64 of the same contract (exact exp and sigmoid; test-ops-bwd.c):
 *   dg: ub |ref| + 16 2^-24 |d| |u| sig (1 + |g| (1 - sig)); du: ub |ref| + 8 2^-24 |d s|
 *   (ub = 2^-8, the bf16 store); dp: (F + 8) 2^-24 sum_f |c_f|, + 2 ub sum_f |c_f| under SWIGLU_ROUND=double
 *   (the reference rounds its exact activation, which may round the other way). Finite differences of
 *   the fp64 forward agree within that bound plus the difference step's error.
 * Elementwise, dp per row: batch invariant by construction (rows are independent).
 * Config: swiglu_bwd_cfg_init (swiglu_bwd.c) checks the tensors and decodes every mode once; both twins
 * call it first and read only the cfg, and both run swb_elem and swb_sum below (shared code).
 */
#ifndef ALIGN_SWIGLU_BWD_H
#define ALIGN_SWIGLU_BWD_H

#include <stdint.h>

#include "nan_host.h"
#include "numerics.h"

#ifdef __cplusplus
extern "C" {
#endif

struct align_modes;
struct align_tensor;
struct align_err;

#include "swiglu.h" /* struct swiglu_params: the forward's limit and shared flag */

enum swb_sum_order { SWB_SUM_SEQ, SWB_SUM_PAIRWISE, SWB_SUM_WARP32 };

struct swiglu_bwd_cfg {
	int64_t T, F;	/* g, u, da, dg, du [T,F]; p, dp [T] */
	float L;	/* clamp limit */
	int clamp;	/* as the forward */
	int strict;	/* SWIGLU_BWD_CLAMP=strict */
	int expanded;	/* SWIGLU_BWD_DSILU=expanded */
	int sum;	/* enum swb_sum_order (SWIGLU_BWD_DP_SUM) */
	int after;	/* SWIGLU_PROBS=after_w2 */
	int dbl;	/* SWIGLU_ROUND=double */
	int scale_bf16; /* SWIGLU_SCALE=bf16 */
	int mul;	/* SWIGLU_SILU=mul */
	int math;	/* MATH_IMPL value */
};

int swiglu_bwd_cfg_init(struct swiglu_bwd_cfg *c, const struct swiglu_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err);

int swiglu_bwd_fwd_cpu(const struct swiglu_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

/* One element, steps 1-5 of the contract: e = exp(-g32') computed by the twin per MATH_IMPL after the clamp
 * (g32' = the clamped g), x = F(da), q the scale of step 3. Writes the binary32 dg and du before their
 * bf16 store and returns the dp term c (0 under after_w2). Shared by both twins: hn_* are the plain
 * operators on the host and the host's NaN rules on the device. */
ALIGN_HD static inline float swb_elem(const struct swiglu_bwd_cfg *c, float g, float u, float x, float q, float e,
				      float *dg, float *du)
{
	int mg = 1, mu = 1;
	if (c->clamp) {
		float L = c->L, nL = -c->L;
		mg = c->strict ? g < L : g <= L;
		mu = c->strict ? (nL < u && u < L) : (nL <= u && u <= L);
		u = u < nL ? nL : (u > L ? L : u);
		g = g > L ? L : g;
	}
	float den = hn_add(1.0f, e);
	float sig = hn_div(1.0f, den);
	float s = c->mul ? hn_mul(g, sig) : hn_div(g, den);
	float d = c->after ? x : hn_mul(x, q);
	float t;
	if (c->expanded)
		t = hn_mul(d, hn_add(sig, hn_mul(hn_mul(g, sig), hn_sub(1.0f, sig))));
	else
		t = hn_mul(hn_mul(d, sig), hn_add(1.0f, hn_mul(g, hn_sub(1.0f, sig))));
	*dg = mg ? hn_mul(t, u) : 0.0f;
	*du = mu ? hn_mul(d, s) : 0.0f;
	if (c->after)
		return 0.0f;
	float a = hn_mul(s, u);
	return hn_mul(x, c->dbl ? align_round_bf16(a) : a);
}

/* the clamped gate that exp(-g) is taken of (step 2) */
ALIGN_HD static inline float swb_gate(const struct swiglu_bwd_cfg *c, float g)
{
	return c->clamp && g > c->L ? c->L : g;
}

/* sum of x[0..n) in order (enum swb_sum_order): reduce.h's SEQ, PAIRWISE and WARP32 associations written
 * with hn_add (test-ops-bwd.c checks them against reduce.h bit for bit) */
ALIGN_HD static inline float swb_sum(int order, const float *x, int64_t n)
{
	if (n <= 0)
		return 0.0f;
	if (order == SWB_SUM_SEQ) {
		float s = x[0];
		for (int64_t i = 1; i < n; i++)
			s = hn_add(s, x[i]);
		return s;
	}
	if (order == SWB_SUM_WARP32) {
		float v[32];
		for (int l = 0; l < 32; l++) {
			float s = 0.0f;
			for (int64_t i = l; i < n; i += 32)
				s = hn_add(s, x[i]);
			v[l] = s;
		}
		for (int off = 16; off >= 1; off /= 2)
			for (int l = 0; l < off; l++)
				v[l] = hn_add(v[l], v[l + off]);
		return v[0];
	}
	float val[64];
	int64_t cnt[64];
	int top = 0;
	for (int64_t i = 0; i < n; i++) {
		float v = x[i];
		int64_t k = 1;
		while (top > 0 && cnt[top - 1] == k) {
			v = hn_add(val[top - 1], v);
			k *= 2;
			top--;
		}
		val[top] = v;
		cnt[top] = k;
		top++;
	}
	float s = val[top - 1];
	for (int j = top - 2; j >= 0; j--)
		s = hn_add(val[j], s);
	return s;
}

#endif /* ALIGN_SWIGLU_BWD_H */
