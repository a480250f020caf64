/* sparse_mla_bwd.h: backward of the DeepSeek-V3.2 sparse MLA attention, absorbed (MQA) form (sparse_mla.h;
 * specs/dsv4-numerics.md 4.3), issue 18. Inputs: the forward inputs q[T,H,D] bf16, kv[S,D] bf16, idx[T,N] i32
 * and do[T,H,F] bf16 (the gradient of o). Outputs: dq[T,H,D] bf16 (q's dtype, as autograd returns it and as
 * sparse_attn_bwd stores it), dkv[S,D] f32 (every query's contribution scattered in fp32 in a fixed order:
 * the value gradient on the latent columns d < F plus the logit gradient on all D columns).
 * Saved from forward: nothing. Recomputed as the forward computes them, with every DSA_MLA_* forward switch
 * (sparse_mla_row.h): the slot list (DSA_MLA_SLOTS), the logits z_k (DSA_MLA_QK, DSA_MLA_EXP), the statistics
 * m, l (DSA_MLA_SOFTMAX: full, or the online block recurrence of 64 / 1024 slots) and, for delta = dO.O,
 * O itself through the forward twin (sparse_mla_fwd_cpu / _cuda), bf16 as stored.
 * Per (t, h), slots k = 0..n-1 of sparse_mla_slots (CPU twin = specification; binary32, unfused, nan_host.h):
 *   1. z_k = sparse_mla_logit (the forward's bits; -inf for an invalid slot); m, l: full: m = max z_k in slot
 *      order, l = sum_k E(z_k - m) from +0 in slot order (the forward's); online B: per block m' = max(m,
 *      block's z), l = l * E(m - m') + (the block's E(z_k - m') summed from +0), m = m' (the forward's l).
 *   2. p_k = E(z_k - m) / l (full: the forward's p_k bit for bit; online: the LSE-style recomputation of the
 *      fused backward kernels from the forward's final m, l); P_k = R(p_k) (DSA_MLA_P=bf16) or p_k: the P
 *      operand of the value gradient and of delta = P.dP, the forward's own P (autograd reuses the saved
 *      tensor, fused kernels round the recomputed one as their forward does), so CSA_BWD_P is not read.
 *   3. dP_k = sum_{d<F} F(do_d) * F(kv_{j,d}) (d ascending from +0, exact products; +0 for an invalid slot).
 *   4. delta (CSA_BWD_DELTA, sparse_attn_bwd's switch): o: sum_{d<F} F(do_d) * F(O_d) (d ascending);
 *      p: sum_k P_k * dP_k (slot order), both from +0.
 *   5. dS_k = (p_k * (dP_k - delta)) * scale (the natural-log domain: with DSA_MLA_EXP=exp2 the logits carry
 *      log2(e) and E = exp2, the same probabilities; scale is params scale).
 *   6. dq_d = R(sum_k dS_k * F(kv_{j,d})) for every d < D (slot order, invalid slots skipped, from +0): the
 *      logit gradient reaches the latent and the rope columns alike (DSA_MLA_QK=split sums the two dots, whose
 *      gradient is the same product).
 *   A slot without a valid row carries no gradient (its logit is the constant -inf and its value row the
 *   constant 0), so a row with no valid slot gives dq = +0 and adds nothing to dkv whatever
 *   DSA_MLA_EMPTY_ROW says (it only picks the forward's constant output, NaN or 0; not read). The dense
 *   DS-V3.2 mask form under autograd would spread that row's NaN into dq and every kv row: not modelled.
 *   A NaN the statistics produce with valid slots (an online first block with no valid slot, as the forward's)
 *   propagates.
 * Over the queries (fixed order, no atomics): dkv[j,d] = sum over t ascending, h ascending, k ascending with
 *   list_{t,h}[k] = j of (dS_k * F(q_{t,h,d})) then, for d < F, (P_k * F(do_{t,h,d})), from +0. Gather
 *   counts a duplicate slot once per occurrence; mask visits each distinct valid row once.
 * CSA_BWD_SOFTMAX is not read: the statistics are the forward's (DSA_MLA_SOFTMAX), as every framework's
 *   backward reuses its forward's softmax (autograd the saved p, fused kernels the saved m, l); autograd through
 *   Megatron's unfused online chunks (unfused_dsa_fn) is not modelled.
 * Error bound vs long double (tests/kernels/test-ops-ref-dsa.c; exact p over the visited valid slots, exact O):
 *   per row eps = 4 dZ + (n + D + 16) U (sparse_mla.h's logit and softmax error, dZ the worst logit error,
 *   U = 2^-24) and w = 2^-7 + 4 eps; each dS_k taken as M_k = p_k (|dP_k| + |delta| + sum_d |do_d| A_d +
 *   sum_k p_k |dP_k|) scale w (A_d = sum_k p_k |v_k,d|); dq_d within ulp_bf16 + sum_k M_k |kv_j,d|; dkv within
 *   the sum of M_k |q_d| + (2^-7 + 2 eps) p_k |do_d| over its terms. Measured, not proven; the test prints the
 *   worst ratio. Rows whose long double statistics or terms are not finite binary32 are skipped (with the dkv
 *   elements they touch). dq rows are per (t, h) (batch invariant); dkv sums over the tokens.
 * Config: sparse_mla_bwd_cfg_init (sparse_mla_bwd.c, which decodes the forward switches with
 * sparse_mla_cfg_init); the row and dkv steps below are shared by both twins (ALIGN_HD).
 */
#ifndef ALIGN_SPARSE_MLA_BWD_H
#define ALIGN_SPARSE_MLA_BWD_H

#include "sparse_mla.h"
#include "sparse_mla_row.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sparse_mla_bwd_cfg {
	struct sparse_mla_cfg f; /* the forward's decoded switches and dims */
	float scale;		 /* params scale (the natural-log domain factor of dS) */
	int delta_o;		 /* CSA_BWD_DELTA=o */
};

int sparse_mla_bwd_cfg_init(struct sparse_mla_bwd_cfg *c, const struct sparse_mla_params *p,
			    const struct align_modes *m, const struct align_tensor *in, int n_in,
			    const struct align_tensor *out, int n_out, int device, struct align_err *err);

/* steps 1-2 for a row whose logits are z[0..n): m, l, then p_k into p */
ALIGN_HD static inline void smb_probs(const struct sparse_mla_cfg *c, const float *z, int64_t n, float *p)
{
	float m = -INFINITY, l = 0.0f;
	if (!c->block) {
		for (int64_t k = 0; k < n; k++)
			m = sa_max(m, z[k]);
		for (int64_t k = 0; k < n; k++)
			l = hn_add(l, sa_e(&c->sa, hn_sub(z[k], m)));
	} else {
		for (int64_t k0 = 0; k0 < n; k0 += c->block) {
			int64_t k1 = k0 + c->block < n ? k0 + c->block : n;
			float m2 = m;
			for (int64_t k = k0; k < k1; k++)
				m2 = sa_max(m2, z[k]);
			float a = sa_e(&c->sa, hn_sub(m, m2)), bs = 0.0f;
			for (int64_t k = k0; k < k1; k++)
				bs = hn_add(bs, sa_e(&c->sa, hn_sub(z[k], m2)));
			l = hn_add(hn_mul(l, a), bs);
			m = m2;
		}
	}
	for (int64_t k = 0; k < n; k++)
		p[k] = hn_div(sa_e(&c->sa, hn_sub(z[k], m)), l);
}

/* Steps 1-6 for row (t, h): q the row's D values, o and dO its F values (o unread unless delta_o), kv the
 * whole [S, D], idx the token's N slots; writes dq (D bf16), the slot list (N), dS and P (N floats each, by
 * slot: the dkv terms); returns the slot count n. */
ALIGN_HD static inline int64_t smb_row(const struct sparse_mla_bwd_cfg *b, const align_bf16 *q, const align_bf16 *kv,
				       const int32_t *idx, const align_bf16 *o, const align_bf16 *dO, align_bf16 *dq,
				       int32_t *list, float *dS, float *P)
{
	const struct sparse_mla_cfg *c = &b->f;
	const int64_t n = sparse_mla_slots(c, idx, list), D = c->D, F = c->F;
	int any = 0;
	for (int64_t k = 0; k < n; k++)
		any |= sa_valid(&c->sa, list[k]);
	if (!any) {
		for (int64_t k = 0; k < n; k++)
			dS[k] = P[k] = 0.0f;
		for (int64_t d = 0; d < D; d++)
			dq[d] = align_f32_to_bf16(0.0f);
		return n;
	}
	for (int64_t k = 0; k < n; k++) /* z_k into dS (reused) */
		dS[k] = sa_valid(&c->sa, list[k]) ? sparse_mla_logit(c, q, kv, list[k]) : -INFINITY;
	smb_probs(c, dS, n, P);
	float delta = 0.0f;
	if (b->delta_o)
		for (int64_t d = 0; d < F; d++)
			delta = hn_add(delta, hn_mul(align_bf16_to_f32(dO[d]), align_bf16_to_f32(o[d])));
	for (int64_t k = 0; k < n; k++) { /* dS_k holds dP_k for now */
		float dp = 0.0f;
		if (sa_valid(&c->sa, list[k]))
			for (int64_t d = 0; d < F; d++)
				dp = hn_add(dp, hn_mul(align_bf16_to_f32(dO[d]), sparse_mla_v(c, kv, list[k], d)));
		dS[k] = dp;
		if (!b->delta_o)
			delta = hn_add(delta, hn_mul(sa_p(&c->sa, P[k]), dp));
	}
	for (int64_t k = 0; k < n; k++) {
		dS[k] = hn_mul(hn_mul(P[k], hn_sub(dS[k], delta)), b->scale);
		P[k] = sa_p(&c->sa, P[k]);
	}
	for (int64_t d = 0; d < D; d++) {
		float acc = 0.0f;
		for (int64_t k = 0; k < n; k++)
			if (sa_valid(&c->sa, list[k]))
				acc = hn_add(acc, hn_mul(dS[k], sparse_mla_v(c, kv, list[k], d)));
		dq[d] = align_f32_to_bf16(acc);
	}
	return n;
}

/* dkv[j, d] in the fixed order above, scanning the rows' lists, counts, dS and P ([T*H, N] by slot) */
ALIGN_HD static inline float smb_dkv(const struct sparse_mla_bwd_cfg *b, const align_bf16 *q, const align_bf16 *dO,
				     const int32_t *list, const int64_t *cnt, const float *dS, const float *P,
				     int64_t j, int64_t d)
{
	const struct sparse_mla_cfg *c = &b->f;
	const int64_t rows = c->T * c->H, N = c->N, D = c->D, F = c->F;
	float acc = 0.0f;
	for (int64_t r = 0; r < rows; r++) /* r = t * H + h: t, then h ascending */
		for (int64_t k = 0; k < cnt[r]; k++) {
			if ((int64_t)list[r * N + k] != j)
				continue;
			acc = hn_add(acc, hn_mul(dS[r * N + k], align_bf16_to_f32(q[r * D + d])));
			if (d < F)
				acc = hn_add(acc, hn_mul(P[r * N + k], align_bf16_to_f32(dO[r * F + d])));
		}
	return acc;
}

int sparse_mla_bwd_fwd_cpu(const struct sparse_mla_params *p, const struct align_modes *m,
			   const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_SPARSE_MLA_BWD_H */
