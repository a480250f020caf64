/* dsa_indexer_bwd.h: backward of the DeepSeek-V3.2 DSA indexer's scores (dsa_indexer.h), issue 18, for the
 * fp32 score form (Megatron's unfused DSAIndexer, the path a training run differentiates), whatever
 * DSA_INDEXER_SCORE says (not read: the FP8 form is DS-V3.2's fp8_index inference kernel, which has no
 * backward). Inputs: q[T,H,D], k[S,D], w[T,H] (bf16, the forward's), dscore[T,S] f32; outputs dq, dk, dw (bf16).
 * Parameters and variants: dsa_indexer's (start, the position of query row 0). Saved from forward: nothing;
 * the rotated rows rq = R(hadamard(F(q))), rk = R(hadamard(F(k))) (DSA_HADAMARD, dsa_indexer_prep_row) and
 * the dots are recomputed in the forward's order.
 *
 * Operation order (CPU twin = specification), key j visible from query t iff j <= start + t (a masked
 * score's gradient is 0), wb = R(F(R(F(w) * s1)) * s2) as the forward:
 *   1. ddot[t,h,j], dwb_acc[t,h]: indexer_bwd.h's fp32 terms on the rotated rows (g = dscore; ddot =
 *      dot > 0 ? g * F(wb) : +0; dwb_acc = sum over visible j ascending of g * relu(dot), from +0);
 *      dw = R(F(R(F(R(dwb_acc)) * s2)) * s1) (the two bf16 multiplies' backward);
 *   2. drq[t,h,d] = R(sum over visible j ascending of ddot * F(rk[j,d])) (rq is a bf16 tensor: its fp32
 *      einsum gradient rounded once); drk[j,d] = R(sum over t ascending, then h, of ddot * F(rq[t,h,d]));
 *   3. the rotation's backward: the normalised Hadamard matrix is symmetric, so dq = R(hadamard(F(drq))) and
 *      dk = R(hadamard(F(drk))) with the forward's scale and DSA_HADAMARD implementation (the library's
 *      backward is its forward on the gradient: an inference for fast_hadamard_transform, not read);
 *      DSA_HADAMARD=none: dq = drq, dk = drk.
 * The einsum gradients in PyTorch are cuBLAS GEMMs (order not modelled): portable orders, no bitwise claim
 * against autograd. NaN bits: the host's rules (nan_host.h hn_*).
 * Error bound vs the exact gradients of the same rotated rows and dots (long double), u = 2^-24: drq within
 * S u A (A the sum of the absolute terms) and half a bf16 ulp; the rotation adds hadamard.h's log2(D) u
 * of the row's 2-norm and half a bf16 ulp; dw as indexer_bwd.h. Checked by test-ops-ref-dsa.c with central
 * differences of the fp64 score. dq and dw of row t depend only on row t; dk sums over the rows.
 */
#ifndef ALIGN_DSA_INDEXER_BWD_H
#define ALIGN_DSA_INDEXER_BWD_H

#include "dsa_indexer.h"
#include "indexer_bwd.h"

#ifdef __cplusplus
extern "C" {
#endif

int dsa_indexer_bwd_cfg_init(struct dsa_indexer_cfg *c, const struct dsa_indexer_params *p, const struct align_modes *m,
			     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			     int device, struct align_err *err);

ALIGN_HD static inline int dsa_indexer_bwd_visible(const struct dsa_indexer_cfg *c, int64_t t, int64_t j)
{
	return j <= c->start + t;
}

/* step 3 on one row of D gradient sums (binary32, rounded to bf16 first): out = R(hadamard(F(R(g)))) or
 * R(g); tmp: 2 D floats */
ALIGN_HD static inline void dsa_indexer_bwd_rotate(const struct dsa_indexer_cfg *c, const float *g, align_bf16 *out,
						   float *tmp)
{
	const int64_t D = c->D;
	for (int64_t d = 0; d < D; d++)
		tmp[d] = align_round_bf16(g[d]);
	if (c->hadamard != ALIGN_HADAMARD_NONE)
		align_hadamard_f32(tmp, D, c->hscale, c->hadamard, tmp + D);
	for (int64_t d = 0; d < D; d++)
		out[d] = align_f32_to_bf16(tmp[d]);
}

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_DSA_INDEXER_BWD_H */
