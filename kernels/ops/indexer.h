/* indexer.h: DSv4 lightning indexer scores and top-k selection (specs/dsv4-numerics.md 3.5, 3.6).
 * q[T,H,D] bf16 (indexer queries after RoPE and Hadamard, H = 64, D = 128), k[S,D] bf16 (indexer compressor
 * output, S compressed entries), w[T,H] bf16 (x @ Wweights^T, unscaled)
 *   -> idx[T,K] i32 (the selected compressed entries + offset, -1 = none), score[T,S] f32 (index scores,
 *      -inf where masked; bf16 values in INDEXER_SCORE=bf16), the saved state of a later backward / KL loss.
 *
 * Operation order (CPU twin = specification), row t is the query at position t:
 *   1. weight scale: s1 = (float)H^-0.5, s2 = (float)D^-0.5, s12 = (float)(D^-0.5 * H^-0.5) (binary64 host);
 *      INDEXER_WEIGHT_SCALE=once:  wb[h] = R(F(w[t,h]) * s12)               (DS-ref: one bf16 multiply)
 *                           twice: wb[h] = R(F(R(F(w[t,h]) * s1)) * s2)     (Megatron/Paddle: *64^-0.5, then *128^-0.5)
 *   2. causal mask: entry c is visible iff c < floor((t + 1) / ratio); masked: score = -inf.
 *   3. for a visible c: dot_h = sum_{d=0..D-1} F(q[t,h,d]) * F(k[c,d]), binary32, d ascending from +0;
 *      relu(v) = NaN ? v : (v > 0 ? v : +0);
 *      INDEXER_SCORE=bf16 (DS-ref bf16 einsum, relu_, bf16 multiply, bf16 head sum):
 *            p_h = R(relu(R(dot_h)) * F(wb[h])),  score = R(sum_h p_h)   (h ascending from +0, binary32)
 *      INDEXER_SCORE=fp32 (Megatron unfused: fp32 einsum, relu, * weights, fp32 head sum):
 *            p_h = relu(dot_h) * F(wb[h]),        score = sum_h p_h      (h ascending from +0)
 *   4. top-k over the S scores of row t, k = min(K, S); columns k..K-1 are -1. Orders (all select the same set
 *      up to ties at the k-th value):
 *      SORTED: descending score, NaN first, ties (+0 == -0 included) by ascending c (indexer_before).
 *      INDEX:  the SORTED selection, output by ascending c (unsorted kernels, sorted=False helpers).
 *      TORCH:  torch.topk(scores, k, sorted=True) on CUDA: the selection by radix key (NaN largest, -0 < +0;
 *              ties at the k-th key by ascending c), gathered as [keys above the k-th by c | keys equal to
 *              it by c], then k <= 32: the 32-slot bitonic network (torch_order.h torch_bitonic32);
 *              32 < k <= 128: stable sort by torch_gt (warp merge sort); k > 128: stable sort by radix key
 *              (block radix sort). Checked against PyTorch for k <= 64, S < 400 through the router's model;
 *              larger S (multi-block radix select) and k > 64 are an inference (torch-compare.py covers them).
 *      idx = c + offset for a visible c, -1 for a masked one (the causal rule, DS-ref).
 * Error bound vs fp64 (score only; the exact value sum_h relu(sum_d q k) wb_h with wb from step 1,
 * A = sum_h |wb_h| sum_d |q k|): fp32 |score - ref| <= (D + H + 1) 2^-24 A; bf16 adds ulp_bf16(ref) + 2^-7 A
 * (the dot, product and sum roundings to bf16). test-ops-ref-indexer.c checks it, and that the selection is
 * a top set of the op's own scores in the stated order, -1 exactly for masked or missing entries.
 * Rows are independent and never depend on T: batch invariant. No float atomics; the CUDA twin runs the
 * same sequential sums per (t, c) and the same total orders.
 *
 * C entry points for other ops (attn: host and device, ALIGN_HD): indexer_before / indexer_before_key give
 * the two total orders, indexer_relu the relu, indexer_weight the scaled head weight, indexer_score one
 * (t, c) score from rows of q and k.
 */
#ifndef ALIGN_INDEXER_H
#define ALIGN_INDEXER_H

#include <stdint.h>

#include "nan_host.h"
#include "numerics.h"
#include "torch_order.h"

#ifdef __cplusplus
extern "C" {
#endif

struct align_modes;
struct align_tensor;
struct align_err;

struct indexer_params {
	int ratio;	/* compress ratio of the keys (4) */
	int64_t offset; /* added to valid indices: the raw KV length s in DS-ref's kv_full (0 standalone) */
};

struct indexer_cfg {
	int64_t T, H, D, S, K;
	int ratio;
	int64_t offset;
	int bf16;	  /* INDEXER_SCORE=bf16 */
	int twice;	  /* INDEXER_WEIGHT_SCALE=twice */
	int order;	  /* ALIGN_INDEXER_TOPK_ORDER_* */
	float s1, s2, s12; /* H^-0.5, D^-0.5, their product */
};

int indexer_cfg_init(struct indexer_cfg *c, const struct indexer_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err);

int indexer_fwd_cpu(const struct indexer_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

ALIGN_HD static inline float indexer_relu(float v)
{
	return align_isnanf(v) ? v : (v > 0.0f ? v : 0.0f);
}

/* step 1 */
ALIGN_HD static inline float indexer_weight(const struct indexer_cfg *c, align_bf16 w)
{
	float x = align_bf16_to_f32(w);
	return c->twice ? align_round_bf16(hn_mul(align_round_bf16(hn_mul(x, c->s1)), c->s2))
			: align_round_bf16(hn_mul(x, c->s12));
}

/* step 3: one score from q row t (H x D, bf16) and key row c (D), wb[H] from indexer_weight */
ALIGN_HD static inline float indexer_score(const struct indexer_cfg *c, const align_bf16 *q, const align_bf16 *k,
					   const float *wb)
{
	float sum = 0.0f;
	for (int64_t h = 0; h < c->H; h++) {
		float dot = 0.0f;
		for (int64_t d = 0; d < c->D; d++)
			dot = hn_add(dot, hn_mul(align_bf16_to_f32(q[h * c->D + d]), align_bf16_to_f32(k[d])));
		float p = c->bf16 ? align_round_bf16(hn_mul(indexer_relu(align_round_bf16(dot)), wb[h]))
				  : hn_mul(indexer_relu(dot), wb[h]);
		sum = hn_add(sum, p);
	}
	return c->bf16 ? align_round_bf16(sum) : sum;
}

/* SORTED order: a (entry ia) before b (entry ib) */
ALIGN_HD static inline int indexer_before(float a, int64_t ia, float b, int64_t ib)
{
	int na = align_isnanf(a), nb = align_isnanf(b);
	if (na != nb)
		return na;
	if (!na && a != b)
		return a > b;
	return ia < ib;
}

/* torch.topk's selection order: radix key descending, ties by ascending entry */
ALIGN_HD static inline int indexer_before_key(float a, int64_t ia, float b, int64_t ib)
{
	uint32_t ka = torch_radix_key(a), kb = torch_radix_key(b);
	return ka != kb ? ka > kb : ia < ib;
}

/* TORCH order of the k selected entries sel[0..k) (given in ascending entry order), scores x (stride 1),
 * kth = the radix key of the k-th selected value: rewrites sel in torch.topk's output order */
ALIGN_HD static inline void indexer_torch_order(const float *x, int32_t *sel, int64_t k, uint32_t kth)
{
	int64_t m = 0; /* gather: keys above kth first (stable partition, entries ascending) */
	for (int64_t i = 0; i < k; i++)
		if (torch_radix_key(x[sel[i]]) > kth) {
			int32_t v = sel[i];
			for (int64_t j = i; j > m; j--)
				sel[j] = sel[j - 1];
			sel[m++] = v;
		}
	if (k <= 1)
		return;
	if (k <= 32) {
		float key[32];
		int32_t val[32];
		unsigned char valid[32];
		for (int i = 0; i < 32; i++) {
			key[i] = i < k ? x[sel[i]] : 0.0f;
			val[i] = i < k ? sel[i] : 0;
			valid[i] = i < k;
		}
		torch_bitonic32(key, val, valid);
		for (int64_t i = 0; i < k; i++)
			sel[i] = val[i];
		return;
	}
	for (int64_t j = 1; j < k; j++) /* stable insertion sort, descending */
		for (int64_t i = j; i > 0; i--) {
			float a = x[sel[i]], b = x[sel[i - 1]];
			int above = k <= 128 ? torch_gt(a, b) : torch_radix_key(a) > torch_radix_key(b);
			if (!above)
				break;
			int32_t t = sel[i];
			sel[i] = sel[i - 1];
			sel[i - 1] = t;
		}
}

#endif /* ALIGN_INDEXER_H */
