/* mhc_post_bwd.h: backward of mHC hc_post (mhc_post.h; specs/dsv4-numerics.md 6.5), issue 18.
 * Inputs: the forward inputs x[T,N,D] bf16, f[T,D] bf16, post[T,N] f32, comb[T,N,N] f32 and the output
 * gradient dy[T,N,D] bf16 (of x_new). Outputs: dx[T,N,D] bf16, df[T,D] bf16, dpost[T,N] f32,
 * dcomb[T,N,N] f32 (the gradient dtypes of autograd: a gradient has its tensor's dtype).
 *
 * Saved from forward: nothing; the coefficients H'(j,k), P'_k are rebuilt from post and comb exactly as
 * mhc_post.c builds them (MHC_HRES_TRANSPOSE, MHC_COEF, MHC_POST_ROUND=double rounds them to bf16). The
 * bf16 rounding of a coefficient passes the gradient straight through (torch's .to(bf16) backward), so
 * d(comb), d(post) are the gradients of the rounded coefficients. MHC_POST_ORDER is not read: the
 * forward's fp32 sum order does not enter the gradient of a linear map.
 *
 * Operation order per token t (CPU twin = specification); g_k = F(dy[t,k,d]), X_j = F(x[t,j,d]),
 * fo = F(f[t,d]); products of two bf16 values are exact in binary32:
 *   1. dx[t,j,d] = R(ssum_k H'(j,k) * g_k)
 *   2. MHC_POST_ROUND=single: df[t,d] = R(ssum_k P'_k * g_k)
 *      double (MCore: pf = R(P' * f) is a bf16 mul broadcast over k; its backward rounds each product to
 *      bf16 and sums them over k into a bf16 tensor): df[t,d] = R(ssum_k F(R(P'_k * g_k)))
 *   3. dpost[t,k] = dsum_d (g_k * fo); dH(j,k) = dsum_d (g_k * X_j); double: both F(R(.)) (bf16 bmm /
 *      bf16 mul-reduce outputs). dcomb[t][j][k] = dH(j,k) (transpose on) or dcomb[t][k][j] = dH(j,k).
 *   ssum (stream sum over k = 0..N-1, MHC_BWD_STREAM_SUM): seq = left to right from k = 0; pairwise =
 *      the halving tree (width w = 1, 2, 4: v[i] += v[i + w] for i = 0, 2w, ...; N = 4: (v0+v1)+(v2+v3)),
 *      the order of a tree/butterfly reduction. PyTorch's x.sum(-2) over N = 4 (torch_sum_strided) is
 *      the seq order; a bmm's inner N-sum is the library's (not modelled).
 *   dsum (sum over d = 0..D-1, MHC_BWD_DSUM): seq = left to right; split16 = the MATMUL_ACCUM=split16
 *      order (16 contiguous splits of ceil(D/16), each left to right, partials left to right); torch =
 *      dpost only (autograd's sum_to of grad * f over D: torch_order.h torch_rowdot_bf16, row t*N + k of
 *      the [T*N, D] product, refused where torch_rowsum_plan is not ok), dH stays seq (a bmm's sum).
 * Error bound vs fp64 of the same formula (same coefficient rounding), u = 2^-24, S = sum |terms|:
 *   dx, df: 1 bf16 ulp + N u S (double df: + 2^-8 S); dpost, dcomb: seq D u S, split16
 *   (ceil(D/16) + 16) u S, double + 1 bf16 ulp. Tokens are independent (batch invariance). N <= MHC_MAX_N.
 * Config: mhc_post_bwd_cfg_init (mhc_post_bwd.c); both twins call it and then the shared scalar steps
 * below (ALIGN_HD), so the CUDA twin (mhc_post_bwd.cu) evaluates the same binary32 operations.
 */
#ifndef ALIGN_MHC_POST_BWD_H
#define ALIGN_MHC_POST_BWD_H

#include <stdint.h>

#include "mhc_pre.h"
#include "nan_host.h"
#include "torch_order.h"

#ifdef __cplusplus
extern "C" {
#endif

struct align_err;

struct mhc_post_bwd_cfg {
	int64_t T, D;
	int N;
	int transpose;		   /* MHC_HRES_TRANSPOSE=on */
	int dbl;		   /* MHC_POST_ROUND=double */
	int coef_bf16;		   /* MHC_COEF=bf16 or double */
	int pair_ssum;		   /* MHC_BWD_STREAM_SUM=pairwise */
	int dsum_split;		   /* MHC_BWD_DSUM=split16 */
	int dsum_torch;		   /* MHC_BWD_DSUM=torch: dpost as torch_rowdot_bf16 under dplan */
	struct torch_rowsum dplan; /* the [T*N, D] product's row reduction */
};

/* MHC_BWD_DSUM of op: split16 / torch flags and, for torch, the plan of the [rows, D] product (refused
 * where torch_rowsum_plan does not model it) */
int mhc_bwd_dsum_cfg(struct align_err *err, const char *op, const struct align_modes *m, int64_t rows, int64_t D,
		     int *split, int *torch, struct torch_rowsum *plan);

int mhc_post_bwd_cfg_init(struct mhc_post_bwd_cfg *c, const struct mhc_params *p, const struct align_modes *m,
			  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			  int device, struct align_err *err);

int mhc_post_bwd_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in,
			 int n_in, struct align_tensor *out, int n_out);

/* the stream sum of v[0..n) (ssum above; pairwise overwrites v) */
ALIGN_HD static inline float mhc_bwd_ssum(float *v, int n, int pairwise)
{
	if (pairwise) {
		for (int w = 1; w < n; w *= 2)
			for (int i = 0; i + w < n; i += 2 * w)
				v[i] = hn_add(v[i], v[i + w]);
		return v[0];
	}
	float s = v[0];
	for (int k = 1; k < n; k++)
		s = hn_add(s, v[k]);
	return s;
}

/* sum over i = lo..hi-1 of F(a[i]) * F(b[i]) left to right (exact products) */
ALIGN_HD static inline float mhc_bwd_dot_seq(const align_bf16 *a, const align_bf16 *b, int64_t lo, int64_t hi)
{
	float s = hn_mul(align_bf16_to_f32(a[lo]), align_bf16_to_f32(b[lo]));
	for (int64_t i = lo + 1; i < hi; i++)
		s = hn_add(s, hn_mul(align_bf16_to_f32(a[i]), align_bf16_to_f32(b[i])));
	return s;
}

/* the D sum (dsum above) of F(a[i]) * F(b[i]), n >= 1 */
ALIGN_HD static inline float mhc_bwd_dsum(const align_bf16 *a, const align_bf16 *b, int64_t n, int split)
{
	if (!split)
		return mhc_bwd_dot_seq(a, b, 0, n);
	int64_t c = (n + 15) / 16;
	float total = 0.0f;
	for (int64_t k0 = 0; k0 < n; k0 += c) {
		float part = mhc_bwd_dot_seq(a, b, k0, n - k0 < c ? n : k0 + c);
		total = k0 ? hn_add(total, part) : part;
	}
	return total;
}

/* coefficient i of token t as mhc_post.c builds it: i < N*N: H'[i] (i = j*N + k), else P'[i - N*N] */
ALIGN_HD static inline float mhc_post_bwd_coef(const struct mhc_post_bwd_cfg *c, const float *post, const float *comb,
					       int64_t t, int i)
{
	const int64_t N = c->N;
	float v;
	if (i < N * N) {
		int64_t j = i / N, k = i % N;
		v = c->transpose ? comb[t * N * N + j * N + k] : comb[t * N * N + k * N + j];
	} else {
		v = post[t * N + (i - N * N)];
	}
	return c->coef_bf16 ? align_round_bf16(v) : v;
}

/* steps 1-2 at (t, d): dx[t, 0..N-1, d] and df[t, d]; H (N x N) and P the token's coefficients */
ALIGN_HD static inline void mhc_post_bwd_point(const struct mhc_post_bwd_cfg *c, const float *H, const float *P,
					       const align_bf16 *dy, align_bf16 *dx, align_bf16 *df, int64_t t,
					       int64_t d)
{
	const int N = c->N;
	const int64_t D = c->D;
	float g[MHC_MAX_N] = {0}, v[MHC_MAX_N] = {0};
	for (int k = 0; k < N; k++)
		g[k] = align_bf16_to_f32(dy[(t * N + k) * D + d]);
	for (int j = 0; j < N; j++) {
		for (int k = 0; k < N; k++)
			v[k] = hn_mul(H[j * N + k], g[k]);
		dx[(t * N + j) * D + d] = align_f32_to_bf16(mhc_bwd_ssum(v, N, c->pair_ssum));
	}
	for (int k = 0; k < N; k++) {
		v[k] = hn_mul(P[k], g[k]);
		if (c->dbl)
			v[k] = align_round_bf16(v[k]);
	}
	df[t * D + d] = align_f32_to_bf16(mhc_bwd_ssum(v, N, c->pair_ssum));
}

/* step 3, output r of token t: r < N: dpost[t, r]; else dH(j, k) with r - N = j*N + k into dcomb */
ALIGN_HD static inline void mhc_post_bwd_red(const struct mhc_post_bwd_cfg *c, const align_bf16 *x, const align_bf16 *f,
					     const align_bf16 *dy, float *dpost, float *dcomb, int64_t t, int r)
{
	const int64_t N = c->N, D = c->D;
	if (D == 0) {
		if (r < N)
			dpost[t * N + r] = 0.0f;
		else
			dcomb[t * N * N + (r - N)] = 0.0f;
		return;
	}
	if (r < N) {
		const align_bf16 *g = dy + (t * N + r) * D;
		float s = c->dsum_torch ? torch_rowdot_bf16(g, f + t * D, &c->dplan, t * N + r)
					: mhc_bwd_dsum(g, f + t * D, D, c->dsum_split);
		dpost[t * N + r] = c->dbl ? align_round_bf16(s) : s;
		return;
	}
	int64_t j = (r - N) / N, k = (r - N) % N;
	float s = mhc_bwd_dsum(dy + (t * N + k) * D, x + (t * N + j) * D, D, c->dsum_split);
	if (c->dbl)
		s = align_round_bf16(s);
	dcomb[t * N * N + (c->transpose ? j * N + k : k * N + j)] = s;
}

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MHC_POST_BWD_H */
