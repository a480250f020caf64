/* sparse_attn_bwd_ag.h: ALIGN_CSA_BWD_SOFTMAX=autograd, the sparse-attention backward term by term as PyTorch
 * autograd evaluates the unfused fp32 torch reference on CUDA (tests/gpu/torch-compare.py
 * torch_sparse_attn_bwd; MCore / PF unfused paths), issue 18. Shared by both twins (ALIGN_HD, binary32
 * through nan_host.h); the rest of the contract (inputs, outputs, what the forward recomputes) is
 * sparse_attn_bwd.h's.
 *
 * The torch graph (per token t, head h, physical slot k of idx[t], g = F(do[t,h])): kvg_k = valid ? F(kv[j])
 * : 0 (j = idx[t,k]); z_k = valid ? dot_k * c : -inf (the forward's logits); a = max_k z_k; m = max(a, s)
 * (CSA_SINK_IN_MAX; else m = a); e_k = E(z_k - m); es = E(s - m); den = l + es (the forward's l); p_k =
 * e_k / den; o = sum_k p_k kvg_k. Its backward, in autograd's evaluation order and ATen's CUDA sum orders
 * (torch_order.h):
 *   1. dp_k = sum_d g_d * kvg_k,d: sum_to of the [T,H,N,D] product over D (torch_rowdot_bf16, plan of
 *      T*H*N rows of D; +0 for an invalid slot: its products are zeros and the accumulators start at +0).
 *   2. DivBackward0: A_k = dp_k / den; B = sum_k -(dp_k * ((e_k / den) / den)) (sum_to over N: torch_rowsum,
 *      plan of T*H rows of N).
 *   3. grad_e_k = A_k + B (the division's and the sum's gradients of e, two terms);
 *      ExpBackward0: x_k = grad_e_k * e_k.
 *   4. m's gradient: gm = sum_k -x_k (SubBackward0's -grad reduced over N, same plan) + -(B * es) (the
 *      sink term exp(s - m): g_se = B * es).
 *   5. MaximumBackward0 (sink in max): ga = a > s ? gm : a == s ? gm / 2 : 0; the sink's share gb = s > a ?
 *      gm : s == a ? gm / 2 : 0. AmaxBackward0: the slots with z_k == a get ga / count (count = how many),
 *      every slot (ga / count) * mask_k: gz_k = x_k + (ga / count) * mask_k.
 *   6. WhereBackward0 and the scale: G_k = (valid ? gz_k : 0) * c (MulBackward0 by the Python float).
 *   7. dq_d = R(sum_k G_k * kvg_k,d): sum_to over N of the [T,H,N,D] product, a non-innermost reduction
 *      (torch_sum_cols, step torch_sum_cols_step_v(N, T*H*D, D)).
 *   8. kvg's gradient (two terms): sum_h F(do[t,h,d]) * p[t,h,k] + sum_h G[t,h,k] * F(q[t,h,d]), each the
 *      sum_to over H of a [T,H,N,D] product (torch_sum_cols, step torch_sum_cols_step_v(H, T*N*D, N*D));
 *      masked by valid; then IndexBackward0's index_put_(accumulate) on CUDA: the T*N positions sorted
 *      by the clamped index (a stable radix sort), each row j summed from +0 in ascending position order,
 *      the invalid positions (clamped to 0 or S-1) adding their +0.
 *   9. dsink[h] = sum_t g_se + sum_t gb: each the sum_to over T of a [T,H] gradient (torch_sum_cols,
 *      step torch_sum_cols_step(T, H); H = 1: a contiguous sum of T values, torch_rowsum of one row, which
 *      the GPU has confirmed for x.sum(-1) of one row but not for this sum_to), then the two added.
 * The graph is the unfused fp32 one: natural exp (MATH_IMPL's), fp32 q.kv products (CSA_SUM_ORDER's sum),
 * fp32 P, the physical slot order; CSA_SINK_IN_MAX and CSA_SINK (the bf16 rounding of the sink, which
 * passes the gradient straight through) are read. Not read under this value: CSA_EXP, CSA_QK, CSA_P,
 * CSA_INDEX_ORDER, CSA_SOFTMAX, CSA_EMPTY_ROW (a row with no valid slot has p = 0 when the sink is in the
 * max), CSA_BWD_P, CSA_BWD_DELTA. Dims: H <= SAB_AG_MAX_H and every plan and step modelled (refused where
 * torch_order.h is not).
 * Workspace: G, P [T,H,N] (the dkv terms), gse, gb [T,H], and 3 N floats a row.
 */
#ifndef ALIGN_SPARSE_ATTN_BWD_AG_H
#define ALIGN_SPARSE_ATTN_BWD_AG_H

#include "sparse_attn.h"
#include "sparse_attn_row.h"
#include "torch_order.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SAB_AG_MAX_H 256

struct sab_ag_plan {
	struct torch_rowsum dp;	   /* [T*H*N, D] */
	struct torch_rowsum nr;	   /* [T*H, N] */
	int64_t dq_step;	   /* N-sum of dq */
	int64_t kv_step;	   /* H-sum of kvg's gradient */
	int64_t sink_step;	   /* T-sum of dsink (H > 1) */
	struct torch_rowsum sink1; /* H = 1: the [T, 1] gradient's sum is a contiguous one (torch_rowsum, 1 row) */
	struct sparse_attn_cfg g;  /* the forward's switches as the torch graph has them (see above) */
};

/* the kv row of slot value j as torch gathers it: F(kv[j, d]), 0 for an invalid slot */
ALIGN_HD static inline float sab_ag_kvg(const struct sparse_attn_cfg *c, const align_bf16 *kv, int32_t j, int64_t d)
{
	return sa_valid(c, j) ? align_bf16_to_f32(kv[(int64_t)j * c->D + d]) : 0.0f;
}

/* Steps 1-7 for row (t, h): q, dO the row's D values, idx the token's N slots; writes dq (D bf16), G and P
 * (N each: the dkv terms) and the sink's two terms gse, gb; wk: 3 N floats. */
ALIGN_HD static inline void sab_ag_row(const struct sab_ag_plan *pl, const align_bf16 *q, const align_bf16 *kv,
				       const int32_t *idx, float sink, const align_bf16 *dO, int64_t t, int64_t h,
				       align_bf16 *dq, float *G, float *P, float *gse, float *gb, float *wk)
{
	const struct sparse_attn_cfg *c = &pl->g;
	const int64_t N = c->N, D = c->D, H = c->H, row = t * H + h;
	float *z = wk, *e = wk + N, *v = wk + 2 * N;
	float tmp[SPARSE_ATTN_TORCH_D + 1]; /* sa_dot's torch order (D <= SPARSE_ATTN_TORCH_D) */
	/* the forward: z, a, m, e, l, es, den, p (CSA_SUM_ORDER's l, as sparse_attn computes it) */
	float a = -INFINITY;
	for (int64_t k = 0; k < N; k++) {
		int32_t j = idx[k];
		int ok = sa_valid(c, j);
		z[k] = ok ? sa_logit(c, sa_dot(c, q, kv + (int64_t)j * D, tmp), 1) : -INFINITY;
		a = sa_max(a, z[k]);
	}
	const float s = sa_sink(c, sink);
	const float m = c->sink_in_max ? sa_max(a, s) : a;
	float l = 0.0f;
	for (int64_t k = 0; k < N; k++)
		e[k] = sa_e(c, hn_sub(z[k], m));
	if (c->torch_sums) {
		l = N > 0 ? torch_sum_lastdim(e, 1, N) : 0.0f;
	} else {
		for (int64_t k = 0; k < N; k++)
			l = hn_add(l, e[k]);
	}
	const float es = sa_e(c, hn_sub(s, m)), den = hn_add(l, es);
	for (int64_t k = 0; k < N; k++)
		P[k] = hn_div(e[k], den);
	/* 1-2: dp_k (into G), B */
	for (int64_t k = 0; k < N; k++) {
		int32_t j = idx[k];
		G[k] = sa_valid(c, j) ? torch_rowdot_bf16(dO, kv + (int64_t)j * D, &pl->dp, row * N + k) : 0.0f;
		v[k] = hn_neg(hn_mul(G[k], hn_div(hn_div(e[k], den), den)));
	}
	const float B = N > 0 ? torch_rowsum(v, 0, &pl->nr, row, 0) : 0.0f;
	/* 3: x_k (into G), 4: gm */
	for (int64_t k = 0; k < N; k++) {
		G[k] = hn_mul(hn_add(hn_div(G[k], den), B), e[k]);
		v[k] = hn_neg(G[k]);
	}
	const float g_se = hn_mul(B, es);
	const float gm = hn_add(N > 0 ? torch_rowsum(v, 0, &pl->nr, row, 0) : 0.0f, hn_neg(g_se));
	/* 5: the max */
	float ga = gm, gs = 0.0f;
	if (c->sink_in_max) {
		ga = a > s ? gm : a == s ? hn_div(gm, 2.0f) : 0.0f;
		gs = s > a ? gm : s == a ? hn_div(gm, 2.0f) : 0.0f;
	}
	int64_t count = 0;
	for (int64_t k = 0; k < N; k++)
		count += z[k] == a;
	const float gc = count ? hn_div(ga, (float)count) : 0.0f;
	/* 5-6: G_k */
	for (int64_t k = 0; k < N; k++) {
		float gz = hn_add(G[k], hn_mul(gc, z[k] == a ? 1.0f : 0.0f));
		G[k] = hn_mul(sa_valid(c, idx[k]) ? gz : 0.0f, c->c);
	}
	*gse = g_se;
	*gb = gs;
	/* 7: dq */
	for (int64_t d = 0; d < D; d++) {
		for (int64_t k = 0; k < N; k++)
			v[k] = hn_mul(G[k], sab_ag_kvg(c, kv, idx[k], d));
		dq[d] = align_f32_to_bf16(N > 0 ? torch_sum_cols(v, 1, N, pl->dq_step) : 0.0f);
	}
}

/* Step 8: dkv[j, d] from the rows' G and P ([T, H, N]) */
ALIGN_HD static inline float sab_ag_dkv(const struct sab_ag_plan *pl, const align_bf16 *q, const int32_t *idx,
					const align_bf16 *dO, const float *G, const float *P, int64_t j, int64_t d)
{
	const struct sparse_attn_cfg *c = &pl->g;
	const int64_t T = c->T, H = c->H, N = c->N, D = c->D, S = c->S;
	float acc = 0.0f, u[SAB_AG_MAX_H], w[SAB_AG_MAX_H];
	for (int64_t t = 0; t < T; t++)
		for (int64_t k = 0; k < N; k++) {
			int32_t x = idx[t * N + k];
			int64_t jc = x < 0 ? 0 : x >= S ? S - 1 : x;
			if (jc != j)
				continue;
			float gk = 0.0f;
			if (sa_valid(c, x)) {
				for (int64_t h = 0; h < H; h++) {
					int64_t r = (t * H + h) * N + k, e = (t * H + h) * D + d;
					u[h] = hn_mul(align_bf16_to_f32(dO[e]), P[r]);
					w[h] = hn_mul(G[r], align_bf16_to_f32(q[e]));
				}
				gk = hn_add(torch_sum_cols(u, 1, H, pl->kv_step), torch_sum_cols(w, 1, H, pl->kv_step));
			}
			acc = hn_add(acc, gk);
		}
	return acc;
}

/* Step 9: dsink[h] from gse, gb ([T, H]) */
ALIGN_HD static inline float sab_ag_dsink(const struct sab_ag_plan *pl, const float *gse, const float *gb, int64_t h)
{
	const struct sparse_attn_cfg *c = &pl->g;
	if (c->T == 0)
		return 0.0f;
	if (c->H == 1) /* the iterator drops the size-1 dims: one contiguous row of T values */
		return hn_add(torch_rowsum(gse, 0, &pl->sink1, 0, 0), torch_rowsum(gb, 0, &pl->sink1, 0, 0));
	return hn_add(torch_sum_cols(gse + h, c->H, c->T, pl->sink_step),
		      torch_sum_cols(gb + h, c->H, c->T, pl->sink_step));
}

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_SPARSE_ATTN_BWD_AG_H */
