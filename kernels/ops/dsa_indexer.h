/* dsa_indexer.h: DeepSeek-V3.2 DSA lightning indexer (specs/dsv4-numerics.md 4.2; DS-V3.2-Exp inference/model.py
 * Indexer.forward, kernel.py act_quant / fp8_index; Megatron-Core DSAIndexer).
 * q[T,H,D] bf16 (indexer queries after RoPE, before the Hadamard rotation; H = 64, D = 128), k[S,D] bf16 (keys
 * after LayerNorm and RoPE, before the rotation: raw tokens, S = start + T in a prefill), w[T,H] bf16
 * (weights_proj(x), unscaled)
 *   -> idx[T,K] i32 (selected key rows, -1 = none), score[T,S] f32 (index scores, -inf where masked: the saved
 *      state of a later backward / indexer KL loss). D is a power of two <= 128 (the quantisation block is the
 *      whole row: DS-V3.2 D = block = 128).
 * params: start = the position of query row 0 (keys are positions 0..S-1; DS-V3.2 start_pos).
 *
 * Operation order (CPU twin = specification; F = bf16 -> binary32, R = round to bf16, + * / binary32):
 *   1. rotation of every q row (t, h) and k row s (hadamard.h, scale c = (float)D^-0.5 from binary64, impl per
 *      DSA_HADAMARD: butterfly / dense / none): x = F(row); y = hadamard(x); r = R(y) (the library returns the
 *      input dtype); none: r = the row.
 *   2. DSA_INDEXER_SCORE=fp8 (DS-V3.2): per row, amax = the largest |r_d| (NaN skipped), the block scale
 *      s = align_fp8_scale(amax, DSA_FP8_SCALE: ue8m0 / mul / div; fp8.h), codes c_d = align_fp8_code(r_d, s)
 *      (e4m3 values, exact in bf16): q_s[t,h], k_s[s]. Head weight (model.py: bf16 Linear output * 64^-0.5,
 *      then * q_scale * 128^-0.5 in fp32): wh = R(F(w[t,h]) * s1); w'_h = (F(wh) * q_s[t,h]) * s2,
 *      s1 = (float)H^-0.5, s2 = (float)D^-0.5.
 *      score(t, j) = (sum_h relu(dot_h) * w'_h) * k_s[j], dot_h = sum_d cq_d * ck_d (d ascending from +0: the
 *      products are exact; fp8_index's tensor-core fp32 accumulation is modelled as this sequential sum, and its
 *      head reduction as h ascending from +0: an inference, not Hopper's own order).
 *      DSA_INDEXER_SCORE=fp32 (Megatron unfused): wb_h = R(F(R(F(w) * s1)) * s2) (two bf16 multiplies);
 *      score(t, j) = sum_h relu(dot_h) * F(wb_h), dot_h = sum_d F(rq_d) * F(rk_d) (d ascending, h ascending,
 *      from +0). Both are indexer.h's indexer_score (fp32 form) on the rows of step 1 / 2.
 *      relu(v) = NaN ? v : (v > 0 ? v : +0) (indexer_relu).
 *   3. causal mask: key j is visible from query t iff j <= start + t; a masked score is -inf (DS-V3.2 adds the
 *      -inf mask; a NaN score at a masked position would stay NaN there).
 *   4. top-k, k = min(K, S), columns k..K-1 = -1: indexer.h's orders (INDEXER_TOPK_ORDER: sorted, ties by lower
 *      key; index: the sorted selection by ascending key; torch: torch.topk on CUDA), a selected masked key is
 *      written -1 (DS-V3.2 returns its position, which its MLA masks again: the same attention).
 * Error bound vs fp64 (score; the exact value of step 2's formula on the step-1/2 operands, which the test
 *   recomputes with hadamard.h and fp8.h and checks separately; A = sum_h |w_h| sum_d |q_d k_d| (times k_s for
 *   fp8)): |score - ref| <= (D + H + 2) 2^-24 A. Rows are independent and never depend on T: batch invariant.
 *   No float atomics: the CUDA twin runs the same per-row code (ALIGN_HD helpers below) and the same orders.
 *
 * C entry points (host and device): dsa_indexer_prep_row (steps 1-2 on one row), dsa_indexer_weight,
 * dsa_indexer_score.
 */
#ifndef ALIGN_DSA_INDEXER_H
#define ALIGN_DSA_INDEXER_H

#include <stdint.h>

#include "fp8.h"
#include "hadamard.h"
#include "indexer.h"
#include "nan_host.h"
#include "numerics.h"

#define DSA_INDEXER_D_MAX 128

#ifdef __cplusplus
extern "C" {
#endif

struct align_modes;
struct align_tensor;
struct align_err;

struct dsa_indexer_params {
	int64_t start; /* position of query row 0 */
};

struct dsa_indexer_cfg {
	int64_t T, H, D, S, K, start;
	int fp8;	       /* DSA_INDEXER_SCORE=fp8 */
	int scale_rule;	       /* ALIGN_FP8_SCALE_* */
	int hadamard;	       /* ALIGN_HADAMARD_* */
	float hscale;	       /* (float)D^-0.5 */
	struct indexer_cfg ix; /* H, D, fp32 score form, weight factors s1, s2, top-k order */
};

int dsa_indexer_cfg_init(struct dsa_indexer_cfg *c, const struct dsa_indexer_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err);

int dsa_indexer_fwd_cpu(const struct dsa_indexer_params *p, const struct align_modes *m, const struct align_tensor *in,
			int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

/* steps 1-2 on one row of D: out = the rotated row (R(y)) or its e4m3 codes (fp8); returns the block scale
 * (fp8) or 1. tmp: 2 D floats. */
ALIGN_HD static inline float dsa_indexer_prep_row(const struct dsa_indexer_cfg *c, const align_bf16 *in,
						  align_bf16 *out, float *tmp)
{
	const int64_t D = c->D;
	if (c->hadamard == ALIGN_HADAMARD_NONE) {
		for (int64_t d = 0; d < D; d++)
			out[d] = in[d];
	} else {
		for (int64_t d = 0; d < D; d++)
			tmp[d] = align_bf16_to_f32(in[d]);
		align_hadamard_f32(tmp, D, c->hscale, c->hadamard, tmp + D);
		for (int64_t d = 0; d < D; d++)
			out[d] = align_f32_to_bf16(tmp[d]);
	}
	if (!c->fp8)
		return 1.0f;
	float amax = 0.0f;
	for (int64_t d = 0; d < D; d++)
		amax = align_fp8_absmax(amax, align_bf16_to_f32(out[d]));
	float s = align_fp8_scale(amax, c->scale_rule);
	for (int64_t d = 0; d < D; d++)
		out[d] = align_f32_to_bf16(align_fp8_code(align_bf16_to_f32(out[d]), s));
	return s;
}

/* the head weight of (t, h): w'_h (fp8, qs = q_s[t,h]) or F(wb_h) (fp32) */
ALIGN_HD static inline float dsa_indexer_weight(const struct dsa_indexer_cfg *c, align_bf16 w, float qs)
{
	if (!c->fp8)
		return indexer_weight(&c->ix, w);
	float wh = align_round_bf16(hn_mul(align_bf16_to_f32(w), c->ix.s1));
	return hn_mul(hn_mul(wh, qs), c->ix.s2);
}

/* one visible score: q rows of query t (H x D, prepared), key row (D, prepared), weights wt[H], key scale ks */
ALIGN_HD static inline float dsa_indexer_score(const struct dsa_indexer_cfg *c, const align_bf16 *q,
					       const align_bf16 *k, const float *wt, float ks)
{
	float v = indexer_score(&c->ix, q, k, wt);
	return c->fp8 ? hn_mul(v, ks) : v;
}

#endif /* ALIGN_DSA_INDEXER_H */
