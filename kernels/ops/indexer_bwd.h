/* indexer_bwd.h: backward of the lightning indexer's scores (indexer.h), issue 18: the gradients of q, k and
 * the head weights w from the gradient of the score (the indexer's loss, e.g. the KL term against the main
 * attention, arrives as dscore; the top-k selection carries no gradient).
 * Inputs: q[T,H,D] bf16, k[S,D] bf16, w[T,H] bf16 (the forward's), dscore[T,S] f32; outputs dq[T,H,D] bf16,
 * dk[S,D] bf16, dw[T,H] bf16 (the bf16 tensors' gradients: each an fp32 sum rounded once). Parameters and
 * variants: indexer's (the ratio of the causal mask; the offset is not read). Saved from forward: nothing
 * beyond its inputs (the dots and the relu mask are recomputed in the forward's order).
 *
 * Operation order (CPU twin = specification), for a visible entry c of row t (c < floor((t + 1) / ratio);
 * a masked entry's score is masked_fill's -inf, whose gradient is 0), wb[t,h] = indexer_weight (step 1 of
 * indexer.h), dot[t,h,c] = the forward's binary32 dot (d ascending from +0):
 *   INDEXER_SCORE=fp32 (Megatron unfused: fp32 einsum, relu, * weights, fp32 head sum), autograd:
 *     g = dscore[t,c]; r = relu(dot); dr = g * F(wb) (the sum's expand, MulBackward0);
 *     ddot = dot > 0 ? dr : +0 (threshold_backward: not NaN, not 0);
 *     dwb_acc[t,h] = sum over visible c ascending of g * r, from +0 (the broadcast operand's sum_to);
 *   INDEXER_SCORE=bf16 (DS-ref bf16 einsum, relu_, bf16 multiply, bf16 head sum), autograd in bf16:
 *     g = R(dscore) (score.float()'s backward); rb = relu(R(dot)); dr = R(g * F(wb)); ddot = R(dot) > 0 ?
 *     dr : +0; dwb_acc[t,h] = sum over visible c ascending of R(g * rb) (binary32, from +0);
 *   dwb = R(dwb_acc) (wb is a bf16 tensor), then the weight scale's backward (bf16 MulBackward0 of the
 *   python-float products): INDEXER_WEIGHT_SCALE=once: dw = R(F(dwb) * s12); twice: dw =
 *   R(F(R(F(dwb) * s2)) * s1);
 *   dq[t,h,d] = R(sum over visible c ascending of ddot * F(k[c,d])), from +0 (the einsum's q gradient);
 *   dk[c,d] = R(sum over t ascending, then h ascending, of ddot[t,h,c] * F(q[t,h,d])), from +0, over the
 *   rows t that see c (the einsum's k gradient; rows that do not see c add nothing).
 * The einsum gradients in PyTorch are GEMMs (cuBLAS's K order and split, not modelled): this is the
 * portable order, for twins and contrast; bitwise equality with autograd is not claimed.
 * NaN bits: the host's NaN rules (nan_host.h hn_*).
 *
 * Error bound vs the exact gradients of the same dots (long double; relu masks and roundings before them as
 * the op computes them), u = 2^-24: dq within S u A_q, dk within T H u A_k, dw within (S u A_w + the bf16
 * roundings: 2^-8 |dwb| per rounding, three at most) (A: the sums of the absolute terms), plus half a bf16
 * ulp of each result (bf16 mode: the products' bf16 roundings add 2^-9 of each term, so A 2^-8 on top).
 * Checked by test-ops-ref-indexer.c with central differences of the fp64 score on a small shape.
 * Rows: dq and dw of row t depend only on row t (batch invariant in T); dk sums over the rows.
 * Config: indexer_bwd_cfg_init (indexer_bwd.c); both twins read it.
 */
#ifndef ALIGN_INDEXER_BWD_H
#define ALIGN_INDEXER_BWD_H

#include "indexer.h"

#ifdef __cplusplus
extern "C" {
#endif

int indexer_bwd_cfg_init(struct indexer_cfg *c, const struct indexer_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err);

/* entry c visible from row t */
ALIGN_HD static inline int indexer_bwd_visible(const struct indexer_cfg *c, int64_t t, int64_t e)
{
	return e < (t + 1) / c->ratio;
}

/* the forward's dot of head h of query row t (q: the row, H x D) with key row k (D) */
ALIGN_HD static inline float indexer_bwd_dot(const struct indexer_cfg *c, const align_bf16 *q, const align_bf16 *k,
					     int64_t h)
{
	float dot = 0.0f;
	for (int64_t d = 0; d < c->D; d++)
		dot = hn_add(dot, hn_mul(align_bf16_to_f32(q[h * c->D + d]), align_bf16_to_f32(k[d])));
	return dot;
}

/* for one visible (t, h, c): ddot (the dot's gradient) and the term of dwb_acc, from dscore ds and wb */
ALIGN_HD static inline void indexer_bwd_terms(const struct indexer_cfg *c, float dot, float ds, float wb, float *ddot,
					      float *dwb_term)
{
	if (c->bf16) {
		float g = align_round_bf16(ds), db = align_round_bf16(dot);
		*ddot = db > 0.0f ? align_round_bf16(hn_mul(g, wb)) : 0.0f;
		*dwb_term = align_round_bf16(hn_mul(g, indexer_relu(db)));
	} else {
		*ddot = dot > 0.0f ? hn_mul(ds, wb) : 0.0f;
		*dwb_term = hn_mul(ds, indexer_relu(dot));
	}
}

/* dw from the bf16 dwb: the weight scale's backward */
ALIGN_HD static inline float indexer_bwd_dw(const struct indexer_cfg *c, float dwb)
{
	return c->twice ? align_round_bf16(hn_mul(align_round_bf16(hn_mul(dwb, c->s2)), c->s1))
			: align_round_bf16(hn_mul(dwb, c->s12));
}

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_INDEXER_BWD_H */
