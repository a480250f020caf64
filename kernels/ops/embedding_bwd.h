/* embedding_bwd.h: backward of the token embedding (embedding.h), issue 18: the gradient of the table
 * from the gradient of the embedded tokens. Inputs: ids[T] i32, table[V,D] f32 (the forward's: its shape),
 * dy[T,D] bf16 (the gradient of y); output dtable[V,D] in EMBED_BWD_DTYPE (bf16: the bf16 parameter's
 * .grad; fp32: a sum kept in fp32). Parameters and variants: embedding's (the output scale). Saved from
 * forward: nothing.
 *
 * Per token t and column j the contribution is g = F(dy[t,j]) (scale == 0, DSv4), or with a scale
 * R(F(dy) * scale') (MulBackward0 of the bf16 row times the scale: opmath fp32, one bf16 rounding; scale'
 * as the forward applies it, EMBED_SCALE). Row r of dtable sums the contributions of the tokens with
 * ids[t] = r, in increasing t, in the EMBED_BWD_ORDER; R_o below is the output dtype's rounding (identity
 * for fp32); rows no token names are +0:
 *   seq    acc = +0, acc += g for each token in order (binary32), dtable = R_o(acc);
 *   torch  PyTorch's CUDA embedding_dense_backward (ATen Embedding.cu, EmbeddingBackwardKernel.cu; the
 *          gradient in dy's dtype, so R_o = bf16 there: EMBED_BWD_DTYPE=fp32 with torch is an fp32 dy's):
 *          T <= 3072 (embedding_backward_feature_kernel): the tokens in chunks of 32 (t / 32); per chunk
 *            the leader sums the row's tokens of the chunk in order from the first one (binary32, not
 *            from +0), then dtable = R_o(dtable + R_o(s)) with dtable starting +0 (BFloat16 +=);
 *          T > 3072 (sort, then compute_grad_weight and sum_and_scatter): the row's tokens in order (a
 *            stable radix sort), partials of 10 consecutive ones each summed from +0, the partials
 *            summed from +0 in order, dtable = R_o(total). PyTorch takes an atomic kernel instead
 *            (compute_grad_weight_atomic_accumulate: non-deterministic) when min(T, V) * D32 / min(D32,
 *            1024) < 4 * SMs (D32 = D rounded up to 32) and torch.use_deterministic_algorithms is off:
 *            not modelled (few rows, a wide GPU).
 * NaN bits: the host's NaN rules (nan_host.h hn_*). Signed zeros: every order's sum starts from or is
 * added to +0, so a row of -0 contributions is +0 in all of them.
 *
 * Error bound vs the exact sum of the contributions (long double), u = 2^-24: the n contributions of a
 * row summed in binary32 in any of the orders are within (n - 1) u sum|g|; the bf16 chunk roundings of
 * torch at T <= 3072 add 2^-9 of each running value: |out - ref| <= (n - 1) u S + k 2^-8 S + half a
 * bf16 ulp of the result, S = sum|g|, k the number of chunks the row appears in (fp32 output: k = 0,
 * no ulp term). Checked by test-ops-ref-model.c, with the orders rebuilt by hand there.
 * The row's contributions never depend on other rows: batch invariant in V; the sum depends on T (the
 * stated orders are functions of T and the token positions).
 * Config: embedding_bwd_cfg_init (embedding_bwd.c); both twins read it.
 */
#ifndef ALIGN_EMBEDDING_BWD_H
#define ALIGN_EMBEDDING_BWD_H

#include "embedding.h"
#include "modes.h"
#include "nan_host.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EMBED_BWD_TORCH_FEATURE_MAX 3072 /* PyTorch's feature kernel up to this many indices */
#define EMBED_BWD_TORCH_CHUNK 32	 /* the feature kernel's blockDim.y */
#define EMBED_BWD_TORCH_PARTIAL 10	 /* NROWS_PER_THREAD of the sorted path */

/* what both twins run */
struct embedding_bwd_cfg {
	struct embedding_cfg f; /* T, V, D, the scale as the forward applies it */
	int order;		/* EMBED_BWD_ORDER value */
	int bf16;		/* EMBED_BWD_DTYPE=bf16 */
};

int embedding_bwd_cfg_init(struct embedding_bwd_cfg *c, const struct embedding_params *p, const struct align_modes *m,
			   const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			   int device, struct align_err *err);

ALIGN_HD static inline float embedding_bwd_g(const struct embedding_bwd_cfg *c, const align_bf16 *dy, int64_t t,
					     int64_t j)
{
	float g = align_bf16_to_f32(dy[t * c->f.D + j]);
	return c->f.scaled ? align_round_bf16(hn_mul(g, c->f.scale)) : g;
}

ALIGN_HD static inline float embedding_bwd_ro(const struct embedding_bwd_cfg *c, float x)
{
	return c->bf16 ? align_round_bf16(x) : x;
}

/* dtable[r, j] from the row's tokens list[0..n) (increasing t) */
ALIGN_HD static inline float embedding_bwd_elem(const struct embedding_bwd_cfg *c, const int32_t *list, int64_t n,
						const align_bf16 *dy, int64_t j)
{
	if (c->order == ALIGN_EMBED_BWD_ORDER_SEQ) {
		float acc = 0.0f;
		for (int64_t k = 0; k < n; k++)
			acc = hn_add(acc, embedding_bwd_g(c, dy, list[k], j));
		return embedding_bwd_ro(c, acc);
	}
	if (c->f.T <= EMBED_BWD_TORCH_FEATURE_MAX) {
		float out = 0.0f;
		for (int64_t k = 0; k < n;) {
			int64_t chunk = list[k] / EMBED_BWD_TORCH_CHUNK;
			float s = embedding_bwd_g(c, dy, list[k], j);
			for (k++; k < n && list[k] / EMBED_BWD_TORCH_CHUNK == chunk; k++)
				s = hn_add(s, embedding_bwd_g(c, dy, list[k], j));
			out = embedding_bwd_ro(c, hn_add(out, embedding_bwd_ro(c, s)));
		}
		return out;
	}
	float tot = 0.0f;
	for (int64_t k = 0; k < n; k += EMBED_BWD_TORCH_PARTIAL) {
		float ps = 0.0f;
		for (int64_t q = k; q < n && q < k + EMBED_BWD_TORCH_PARTIAL; q++)
			ps = hn_add(ps, embedding_bwd_g(c, dy, list[q], j));
		tot = hn_add(tot, ps);
	}
	return embedding_bwd_ro(c, tot);
}

ALIGN_HD static inline void embedding_bwd_st(const struct embedding_bwd_cfg *c, void *out, int64_t i, float v)
{
	if (c->bf16)
		((align_bf16 *)out)[i] = align_f32_to_bf16(v);
	else
		((float *)out)[i] = v;
}

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_EMBEDDING_BWD_H */
