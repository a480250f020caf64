/* router_bwd.h: backward of the DSv4 MoE gate (router.h; issue 18).
 * Inputs: the forward inputs x[T,D] bf16, w[E,D] f32, bias[E] f32, ids[T] i32, tid2eid[V,K] i32 and the
 * gradient of the top-k weights dwt[T,K] f32. Outputs: dl[T,E] f32 (the gradient of the logits: the top-k
 * scatter back to [T,E] through the score function), dx[T,D] bf16, dw[E,D] f32.
 * Saved from forward: nothing. The selection idx (router.h steps 3-6, not differentiable) is recomputed by
 * running the forward twin itself (router_fwd_cpu / router_fwd_cuda) on the same inputs and modes; the
 * logits l (step 1) and scores s (step 2) are recomputed with the forward's very operations (rb_scores).
 *
 * Operation order per token (CPU twin = specification; binary32, unfused, exp/sigmoid per MATH_IMPL):
 *   1. g_j = dwt_j * route_scale                                        (mul backward)
 *   2. non-softmax scores: v_j = s[idx_j]; Z = the forward's sum of v (ROUTER_SUM: fp32 in output order,
 *      binary64, or torch_sum_lastdim) + 1e-20f when ROUTER_NORM_EPS=1e-20 (exactly the forward's Z);
 *        ROUTER_BWD_NORM=autograd: a_j = g_j / Z; q_j = (-g_j) * ((v_j / Z) / Z); dZ = the same sum order
 *                 (ROUTER_SUM) over q; ds_j = a_j + dZ   (ATen div_tensor_self_backward grad / other and
 *                 div_tensor_other_backward -grad * ((self / other) / other); the broadcast den's gradient
 *                 reduced over the K slots; sum backward = expand)
 *        fused:   u_j = v_j / Z; dot = g_0 u_0 + g_1 u_1 + ... (fp32, j ascending); ds_j = (g_j - dot) / Z
 *      softmax scores: ds_j = g_j (no normalisation).
 *   3. scatter: ds_e = ds_j for e = idx_j, +0 for the other experts (idx distinct).
 *   4. score backward for every e (as autograd, also where ds_e = 0):
 *        sqrtsoftplus: h = ds_e / (2 * s_e); ROUTER_BWD_SP=torch: z = exp(l_e); l_e > 20 ? h : (h * z) / (z + 1)
 *                      (torch softplus_backward, beta 1, threshold 20); sigmoid: h * sigmoid(l_e)
 *        sigmoid:      dl_e = (ds_e * (1 - s_e)) * s_e                          (torch sigmoid_backward)
 *        softmax:      dot = sum_e ds_e s_e (fp32, e ascending from the first term); dl_e = (ds_e - dot) * s_e
 *   5. dx[t,d] = R(sum over e ascending of dl[t,e] * w'[e,d]) in fp32 from the first term, w' the forward's
 *      GEMM operand (ROUTER_GEMM: w, R(w), TF32(w)).
 *   6. dw[e,d] = sum over tokens of dl[t,e] * x'[t,d] in fp32 (x' the forward's operand) in the order
 *      ROUTER_BWD_WGRAD: seq (t ascending from the first term), pairwise, warp32 (reduce.h's associations).
 *      The gradient passes the bf16/TF32 cast of the weight unchanged (to the fp32 master weight).
 * Error bound vs fp64 of the same contract with the same selection (test-ops-bwd.c; the forward's own
 * scores and logits are taken as exact inputs of the backward): dl: 2^-16 relative to sum of the terms'
 * magnitudes per step, measured, not proven (the autograd formula subtracts nearly equal terms; the bound
 * is stated on |ds| |s'| + |dot| |s|); dx: ub |ref| + (E + 2) 2^-24 sum_e |dl w|; dw: (T + 2) 2^-24 sum_t |dl x|.
 * dl and dx are row-wise (batch invariant); dw sums over the tokens, so its bits depend on the batch by
 * definition (the order is fixed for a given batch).
 * Both twins call router_bwd_cfg_init and run rb_scores / rb_token / rb_wsum below (shared code). The
 * includer defines the math first: ops.h (C) or math_cuda.cuh (CUDA).
 */
#ifndef ALIGN_ROUTER_BWD_H
#define ALIGN_ROUTER_BWD_H

#include <stdint.h>

#include "matmul.h"
#include "nan_host.h"
#include "numerics.h"
#include "router.h"
#include "torch_order.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ROUTER_BWD_MAX_E 1024 /* most experts (the per-token arrays of the CUDA twin) */

enum rb_wsum_order { RB_WSUM_SEQ, RB_WSUM_PAIRWISE, RB_WSUM_WARP32 };

struct router_bwd_cfg {
	struct router_cfg r; /* the forward's config (shapes, params, modes) */
	int fused;	     /* ROUTER_BWD_NORM=fused */
	int sp_sigmoid;	     /* ROUTER_BWD_SP=sigmoid */
	int wsum;	     /* enum rb_wsum_order */
};

int router_bwd_cfg_init(struct router_bwd_cfg *c, const struct router_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err);

int router_bwd_fwd_cpu(const struct router_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#define RB_EXPF(m, x) dm_expf(m, x)
#define RB_SIGMOIDF(m, x) dm_sigmoidf(m, x)
#define RB_SOFTPLUSF(m, x) dm_softplusf(m, x)
#else
#define RB_EXPF(m, x) ops_math_expf(m, x)
#define RB_SIGMOIDF(m, x) ops_math_sigmoidf(m, x)
#define RB_SOFTPLUSF(m, x) ops_math_softplusf(m, x)
#endif

/* router.h step 2 for one token, router.c's operations (scores()) */
ALIGN_HD static inline void rb_scores(const struct router_cfg *c, const float *l, float *s)
{
	const int64_t E = c->E;
	if (c->p.score == ROUTER_SCORE_SOFTMAX) {
		float mx = l[0];
		for (int64_t e = 1; e < E; e++)
			mx = l[e] > mx ? l[e] : mx;
		float z = 0.0f;
		for (int64_t e = 0; e < E; e++) {
			s[e] = RB_EXPF(c->math, hn_sub(l[e], mx));
			z = e ? hn_add(z, s[e]) : s[e];
		}
		for (int64_t e = 0; e < E; e++)
			s[e] = hn_div(s[e], z);
		return;
	}
	for (int64_t e = 0; e < E; e++) {
		if (c->p.score == ROUTER_SCORE_SIGMOID) {
			s[e] = RB_SIGMOIDF(c->math, l[e]);
		} else {
			float sp = RB_SOFTPLUSF(c->math, l[e]);
			if (c->sp_eps)
				sp = hn_add(sp, 1e-20f);
			s[e] = align_sqrtf(sp);
		}
	}
}

/* the forward's sum of v[0..K) (ROUTER_SUM) */
ALIGN_HD static inline float rb_ksum(const struct router_cfg *c, const float *v, int64_t K)
{
	if (c->sum == ALIGN_ROUTER_SUM_TORCH)
		return torch_sum_lastdim(v, 1, K);
	if (c->sum == ALIGN_ROUTER_SUM_FP64) {
		double d = 0.0;
		for (int64_t j = 0; j < K; j++)
			d = hn_addd(d, hn_f2d(v[j]));
		return hn_d2f(d);
	}
	float s = v[0];
	for (int64_t j = 1; j < K; j++)
		s = hn_add(s, v[j]);
	return s;
}

/* steps 1-4 for one token: l, s [E] (recomputed), sel[K] (the forward's idx), dwt[K] -> dl[E]; tmp: 2K floats */
ALIGN_HD static inline void rb_token(const struct router_bwd_cfg *b, const float *l, const float *s, const int32_t *sel,
				     const float *dwt, float *dl, float *tmp)
{
	const struct router_cfg *c = &b->r;
	const int64_t E = c->E, K = c->K;
	float *v = tmp, *ds = tmp + K;
	for (int64_t j = 0; j < K; j++)
		ds[j] = hn_mul(dwt[j], c->p.route_scale);
	if (c->p.score != ROUTER_SCORE_SOFTMAX && K > 0) {
		for (int64_t j = 0; j < K; j++)
			v[j] = s[sel[j]];
		float Z = rb_ksum(c, v, K);
		if (c->norm_eps)
			Z = hn_add(Z, 1e-20f);
		if (b->fused) {
			float dot = 0.0f;
			for (int64_t j = 0; j < K; j++) {
				float term = hn_mul(ds[j], hn_div(v[j], Z));
				dot = j ? hn_add(dot, term) : term;
			}
			for (int64_t j = 0; j < K; j++)
				ds[j] = hn_div(hn_sub(ds[j], dot), Z);
		} else {
			for (int64_t j = 0; j < K; j++) { /* v[j] becomes q_j, ds[j] becomes a_j */
				float q = hn_mul(hn_neg(ds[j]), hn_div(hn_div(v[j], Z), Z));
				ds[j] = hn_div(ds[j], Z);
				v[j] = q;
			}
			float dZ = rb_ksum(c, v, K);
			for (int64_t j = 0; j < K; j++)
				ds[j] = hn_add(ds[j], dZ);
		}
	}
	for (int64_t e = 0; e < E; e++)
		dl[e] = 0.0f;
	for (int64_t j = 0; j < K; j++)
		dl[sel[j]] = ds[j];
	if (c->p.score == ROUTER_SCORE_SOFTMAX) {
		float dot = 0.0f;
		for (int64_t e = 0; e < E; e++) {
			float term = hn_mul(dl[e], s[e]);
			dot = e ? hn_add(dot, term) : term;
		}
		for (int64_t e = 0; e < E; e++)
			dl[e] = hn_mul(hn_sub(dl[e], dot), s[e]);
		return;
	}
	for (int64_t e = 0; e < E; e++) {
		float d = dl[e];
		if (c->p.score == ROUTER_SCORE_SIGMOID) {
			dl[e] = hn_mul(hn_mul(d, hn_sub(1.0f, s[e])), s[e]);
		} else {
			float h = hn_div(d, hn_mul(2.0f, s[e]));
			if (b->sp_sigmoid) {
				dl[e] = hn_mul(h, RB_SIGMOIDF(c->math, l[e]));
			} else if (l[e] > 20.0f) {
				dl[e] = h;
			} else {
				float z = RB_EXPF(c->math, l[e]);
				dl[e] = hn_div(hn_mul(h, z), hn_add(z, 1.0f));
			}
		}
	}
}

/* step 6 for one (e, d): sum over t of dl[t*E + e] * xq[t*D + d] in order ROUTER_BWD_WGRAD (streamed) */
ALIGN_HD static inline float rb_wsum(int order, const float *dl, const float *xq, int64_t T, int64_t E, int64_t D,
				     int64_t e, int64_t d)
{
	if (T <= 0)
		return 0.0f;
	if (order == RB_WSUM_SEQ) {
		float s = hn_mul(dl[e], xq[d]);
		for (int64_t t = 1; t < T; t++)
			s = hn_add(s, hn_mul(dl[t * E + e], xq[t * D + d]));
		return s;
	}
	if (order == RB_WSUM_WARP32) {
		float v[32];
		for (int l = 0; l < 32; l++) {
			float s = 0.0f;
			for (int64_t t = l; t < T; t += 32)
				s = hn_add(s, hn_mul(dl[t * E + e], xq[t * D + d]));
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
	for (int64_t t = 0; t < T; t++) {
		float v = hn_mul(dl[t * E + e], xq[t * D + d]);
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

/* step 5 for one (t, d): sum over e of dl[t*E + e] * wq[e*D + d], e ascending from the first term */
ALIGN_HD static inline float rb_dx(const float *dl, const float *wq, int64_t E, int64_t D, int64_t t, int64_t d)
{
	float s = 0.0f;
	for (int64_t e = 0; e < E; e++) {
		float term = hn_mul(dl[t * E + e], wq[e * D + d]);
		s = e ? hn_add(s, term) : term;
	}
	return s;
}

#endif /* ALIGN_ROUTER_BWD_H */
