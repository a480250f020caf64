/* sparse_attn_bwd.h: backward of the DSv4 sparse MQA attention with sink (sparse_attn.h; specs/
 * dsv4-numerics.md 3.7), issue 18. Inputs: the forward inputs q[T,H,D] bf16, kv[S,D] bf16, idx[T,N] i32,
 * sink[H] f32 and do[T,H,D] bf16 (the gradient of o). Outputs: dq[T,H,D] bf16, dkv[S,D] f32 (the
 * scatter of every query's contribution, accumulated in fp32 in a fixed order), dsink[H] f32.
 * Saved from forward: nothing. O (for delta = dO.O) is recomputed by the forward twin itself
 * (sparse_attn_fwd_cpu / _cuda, every CSA_* forward switch as given), bf16 as stored; the logits z_k
 * (sa_dot, sa_logit: CSA_QK, CSA_SUM_ORDER, CSA_EXP, CSA_INDEX_ORDER) and the sink s (CSA_SINK) as the
 * forward computes them. Rounding of the sink to bf16 passes the gradient straight through.
 * Per (t, h), slots k in visiting order (CPU twin = specification; binary32, unfused):
 *   CSA_BWD_SOFTMAX=autograd replaces steps 1-6 and the sums over the queries below with PyTorch autograd's
 *   evaluation of the unfused torch graph (sparse_attn_bwd_ag.h; O is not needed there).
 *   1. statistics (CSA_BWD_SOFTMAX): full: m = max(s if CSA_SINK_IN_MAX, z_k...), l = sum_k E(z_k - m)
 *      (k ascending; CSA_SUM_ORDER=torch: torch_sum_lastdim) + E(s - m); online64: the forward's 64-slot
 *      block recurrence (m' = max(m, block), l = l * E(m - m') + block sum), then l = l + E(s - m).
 *   2. p_k = E(z_k - m) / l; P_k = R(p_k) (CSA_BWD_P=bf16) or p_k; p_s = E(s - m) / l (the sink's weight).
 *   3. dP_k = sum_d F(do_d) * F(kv_{j,d}) (d ascending, exact products; 0 for an invalid slot).
 *   4. delta (CSA_BWD_DELTA): o: sum_d F(do_d) * F(O_d) (d ascending); p: sum_k P_k * dP_k (visiting order).
 *   5. dS_k = (p_k * (dP_k - delta)) * scale (the natural-log domain: with CSA_EXP=exp2 the logits carry
 *      log2(e) and E = exp2, the same probabilities); the sink's own gradient ds = -(p_s * delta).
 *   6. dq_d = R(sum_k dS_k * F(kv_{j,d})) (visiting order, invalid slots skipped, from +0).
 *   A row with no valid slot and CSA_EMPTY_ROW=zero: dS = P = ds = 0 (its forward output is a constant).
 * Over the queries (fixed orders, no atomics): dkv[j,d] = sum over t ascending, h ascending, k visiting
 * order with idx[t, slot k] = j of (dS_k * F(q_{t,h,d})) then (P_k * F(do_{t,h,d})), from +0;
 * dsink[h] = sum_t ds_{t,h} (t ascending, from +0).
 * Error bound vs fp64 of the same formula (exact O, p; tests/kernels/test-ops-ref-bwd3.c): each output
 * within 1 bf16 ulp (dq) + 2^-7 M, M the fp64 sum of the magnitudes of its terms with each dS_k taken
 * as p_k (|dP_k| + |delta| + sum_d |do_d O_d|) scale (the bf16 O and P roundings are the dominant
 * terms). Measured, not proven; the test prints the worst ratio. Rows whose fp64 statistics are not
 * finite are skipped. dq rows are per (t, h) (batch invariant); dkv and dsink sum over the tokens.
 * Config: sparse_attn_bwd_cfg_init (sparse_attn_bwd.c, which decodes the forward switches with
 * sparse_attn_cfg_init); the row steps are shared by both twins (ALIGN_HD below).
 */
#ifndef ALIGN_SPARSE_ATTN_BWD_H
#define ALIGN_SPARSE_ATTN_BWD_H

#include "sparse_attn.h"
#include "sparse_attn_bwd_ag.h"
#include "sparse_attn_row.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sparse_attn_bwd_cfg {
	struct sparse_attn_cfg f; /* the forward's decoded switches and dims */
	float scale;		  /* params scale */
	int online;		  /* CSA_BWD_SOFTMAX=online64 */
	int p_bf16;		  /* CSA_BWD_P=bf16 */
	int delta_o;		  /* CSA_BWD_DELTA=o */
	int autograd;		  /* CSA_BWD_SOFTMAX=autograd (sparse_attn_bwd_ag.h) */
	struct sab_ag_plan ag;	  /* its reduction plans */
};

int sparse_attn_bwd_cfg_init(struct sparse_attn_bwd_cfg *c, const struct sparse_attn_params *p,
			     const struct align_modes *m, const struct align_tensor *in, int n_in,
			     const struct align_tensor *out, int n_out, int device, struct align_err *err);

/* Steps 1-6 for row (t, h): q, o, dO the row's D values, kv the whole [S, D], idx the token's N slots;
 * writes dq (D bf16), dS and P (N floats each, by visiting position k: the dkv terms) and returns ds;
 * tmp: max(D, N) floats (the torch sums). */
ALIGN_HD static inline float sab_row(const struct sparse_attn_bwd_cfg *b, const align_bf16 *q, const align_bf16 *kv,
				     const int32_t *idx, float sink, const align_bf16 *o, const align_bf16 *dO,
				     align_bf16 *dq, float *dS, float *P, float *tmp)
{
	const struct sparse_attn_cfg *c = &b->f;
	const int64_t N = c->N, D = c->D;
	int any = 0;
	for (int64_t k = 0; k < N; k++)
		any |= sa_valid(c, idx[sa_slot(c, k)]);
	if (!any && c->empty_zero) {
		for (int64_t k = 0; k < N; k++)
			dS[k] = P[k] = 0.0f;
		for (int64_t d = 0; d < D; d++)
			dq[d] = align_f32_to_bf16(0.0f);
		return 0.0f;
	}
	/* z_k into dS (reused), statistics */
	for (int64_t k = 0; k < N; k++) {
		int32_t j = idx[sa_slot(c, k)];
		int v = sa_valid(c, j);
		dS[k] = v ? sa_logit(c, sa_dot(c, q, kv + (int64_t)j * D, tmp), 1) : -INFINITY;
	}
	const float s = sa_sink(c, sink);
	float m = c->sink_in_max ? s : -INFINITY, l = 0.0f;
	if (!b->online) {
		for (int64_t k = 0; k < N; k++)
			m = sa_max(m, dS[k]);
		for (int64_t k = 0; k < N; k++)
			P[k] = sa_e(c, hn_sub(dS[k], m));
		if (c->torch_sums) {
			l = N > 0 ? torch_sum_lastdim(P, 1, N) : 0.0f;
		} else {
			for (int64_t k = 0; k < N; k++)
				l = hn_add(l, P[k]);
		}
	} else {
		for (int64_t k0 = 0; k0 < N; k0 += SPARSE_ATTN_BLOCK) {
			int64_t k1 = k0 + SPARSE_ATTN_BLOCK < N ? k0 + SPARSE_ATTN_BLOCK : N;
			float m2 = m;
			for (int64_t k = k0; k < k1; k++)
				m2 = sa_max(m2, dS[k]);
			float a = sa_e(c, hn_sub(m, m2)), bs = 0.0f;
			for (int64_t k = k0; k < k1; k++)
				bs = hn_add(bs, sa_e(c, hn_sub(dS[k], m2)));
			l = hn_add(hn_mul(l, a), bs);
			m = m2;
		}
	}
	l = hn_add(l, sa_e(c, hn_sub(s, m)));
	const float ps = hn_div(sa_e(c, hn_sub(s, m)), l);
	/* p_k into P (rounded after dS is formed) */
	for (int64_t k = 0; k < N; k++)
		P[k] = hn_div(sa_e(c, hn_sub(dS[k], m)), l);
	float delta = 0.0f;
	if (b->delta_o) {
		for (int64_t d = 0; d < D; d++)
			delta = hn_add(delta, hn_mul(align_bf16_to_f32(dO[d]), align_bf16_to_f32(o[d])));
	}
	/* dS_k holds dP_k for now */
	for (int64_t k = 0; k < N; k++) {
		int32_t j = idx[sa_slot(c, k)];
		float dp = 0.0f;
		if (sa_valid(c, j))
			for (int64_t d = 0; d < D; d++)
				dp = hn_add(dp, hn_mul(align_bf16_to_f32(dO[d]),
						       align_bf16_to_f32(kv[(int64_t)j * D + d])));
		dS[k] = dp;
		if (!b->delta_o) {
			float pr = b->p_bf16 ? align_round_bf16(P[k]) : P[k];
			delta = hn_add(delta, hn_mul(pr, dp));
		}
	}
	for (int64_t k = 0; k < N; k++) {
		dS[k] = hn_mul(hn_mul(P[k], hn_sub(dS[k], delta)), b->scale);
		if (b->p_bf16)
			P[k] = align_round_bf16(P[k]);
	}
	for (int64_t d = 0; d < D; d++) {
		float acc = 0.0f;
		for (int64_t k = 0; k < N; k++) {
			int32_t j = idx[sa_slot(c, k)];
			if (sa_valid(c, j))
				acc = hn_add(acc, hn_mul(dS[k], align_bf16_to_f32(kv[(int64_t)j * D + d])));
		}
		dq[d] = align_f32_to_bf16(acc);
	}
	return hn_neg(hn_mul(ps, delta));
}

/* dkv[j, d] (the fixed scatter order above) from the rows' dS and P ([T, H, N] by visiting position) */
ALIGN_HD static inline float sab_dkv(const struct sparse_attn_bwd_cfg *b, const align_bf16 *q, const int32_t *idx,
				     const align_bf16 *dO, const float *dS, const float *P, int64_t j, int64_t d)
{
	const struct sparse_attn_cfg *c = &b->f;
	const int64_t T = c->T, H = c->H, N = c->N, D = c->D;
	float acc = 0.0f;
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++)
			for (int64_t k = 0; k < N; k++) {
				if ((int64_t)idx[t * N + sa_slot(c, k)] != j)
					continue;
				int64_t r = (t * H + h) * N + k, e = (t * H + h) * D + d;
				acc = hn_add(acc, hn_mul(dS[r], align_bf16_to_f32(q[e])));
				acc = hn_add(acc, hn_mul(P[r], align_bf16_to_f32(dO[e])));
			}
	return acc;
}

/* dsink[h]: ds of the rows (t, h), t ascending, from +0 */
ALIGN_HD static inline float sab_dsink(const struct sparse_attn_bwd_cfg *b, const float *ds, int64_t h)
{
	float acc = 0.0f;
	for (int64_t t = 0; t < b->f.T; t++)
		acc = hn_add(acc, ds[t * b->f.H + h]);
	return acc;
}

int sparse_attn_bwd_fwd_cpu(const struct sparse_attn_params *p, const struct align_modes *m,
			    const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_SPARSE_ATTN_BWD_H */
