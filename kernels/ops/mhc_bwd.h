/* mhc_bwd.h: the backward of mHC hc_pre and hc_head (mhc_pre_bwd.h, mhc_head_bwd.h): the configuration
 * both ops share and the scalar steps both twins call (ALIGN_HD; every binary32 operation through
 * nan_host.h), so the C twins (mhc_pre_bwd.c, mhc_head_bwd.c) and the CUDA twins (.cu) evaluate the same
 * operations in the same order. The contract (operation order, rounding points, reduction orders) is
 * written in mhc_pre_bwd.h; hc_head's backward is its special case (R = N pre rows, one scale, no
 * Sinkhorn).
 */
#ifndef ALIGN_MHC_BWD_H
#define ALIGN_MHC_BWD_H

#include "mhc_post_bwd.h" /* mhc_bwd_dsum */
#include "mhc_pre.h"
#include "nan_host.h"
#include "torch_order.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MHC_BWD_MAX_R ((2 + MHC_MAX_N) * MHC_MAX_N)
#define MHC_BWD_MAX_STEPS 128 /* Sinkhorn normalisation steps kept for the unrolled backward (2 * iters) */

struct mhc_bwd_cfg {
	int64_t T, N, D, K, R; /* x[T,N,D], K = N*D; R mapping rows (head: N; pre: (2+N)*N) */
	int head;	       /* 1: hc_head (R = N, scale[1]) */
	struct mhc_params p;
	struct mhc_modes mm;	   /* the forward's shared switches */
	int sinkhorn;		   /* ALIGN_MHC_SINKHORN_* (pre) */
	int torch_sums;		   /* MHC_SUM_ORDER=torch (pre) */
	int hpre_eps;		   /* MHC_HPRE_EPS=on (pre; head always adds it) */
	int hpost_eps;		   /* MHC_HPOST_EPS=on (pre) */
	int bwd_sinkhorn;	   /* ALIGN_MHC_BWD_SINKHORN_* (pre) */
	int dsum_split;		   /* MHC_BWD_DSUM=split16 */
	int dsum_torch;		   /* MHC_BWD_DSUM=torch: dpre as torch_rowdot_bf16 under dplan */
	struct torch_rowsum dplan; /* the [T*N, D] product's row reduction (dsum_torch) */
	int tsum_split;		   /* MHC_BWD_TSUM=split16 */
	int64_t tsum_step;	   /* MHC_BWD_TSUM=torch: torch_sum_cols_step(T, R) for dbase (>= 0); -1 otherwise */
};

/* hc_pre / hc_head backward config (mhc_pre_bwd.c): checks the tensors of op ("mhc_pre_bwd" or
 * "mhc_head_bwd") and decodes the modes */
int mhc_bwd_cfg_init(struct mhc_bwd_cfg *c, const char *op, const struct mhc_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err);

ALIGN_HD static inline float mhc_bwd_par(float v, int pb)
{
	return pb ? align_round_bf16(v) : v;
}

/* the scale group of mapping row r: 0 pre, 1 post, 2 comb (head: 0) */
ALIGN_HD static inline int mhc_bwd_group(const struct mhc_bwd_cfg *c, int64_t r)
{
	return r < c->N ? 0 : r < 2 * c->N ? 1 : 2;
}

/* sigmoid backward (ATen sigmoid_backward: grad * (1 - y) * y, left to right) */
ALIGN_HD static inline float mhc_bwd_sig(float g, float s)
{
	return hn_mul(hn_mul(g, hn_sub(1.0f, s)), s);
}

/* The token's backward after dh (step B2 of mhc_pre_bwd.h): scale_used[3] the parameter-rounded
 * scales; fills dmix[R] and ps[3] (the token's dscale terms) and writes dx[t] (K bf16 values); xt the
 * token's x row (K), fn the raw mapping weight [R, K], gy the token's dy row (D) and yc[N] the coefficients
 * y was formed with (pre'). */
ALIGN_HD static inline void mhc_bwd_tail(const struct mhc_bwd_cfg *c, const float *scale_used, float ss, float rs,
					 const float *mix, const float *dh, const align_bf16 *xt, const float *fn,
					 const align_bf16 *gy, const float *yc, align_bf16 *dxt, float *dmix, float *ps)
{
	const int64_t R = c->R, K = c->K, D = c->D;
	float drs = 0.0f;
	ps[0] = ps[1] = ps[2] = 0.0f;
	for (int64_t r = 0; r < R; r++) {
		int g = mhc_bwd_group(c, r);
		float a = hn_mul(dh[r], scale_used[g]);
		dmix[r] = hn_mul(a, rs);
		drs = r ? hn_add(drs, hn_mul(a, mix[r])) : hn_mul(a, mix[r]);
		ps[g] = hn_add(ps[g], hn_mul(dh[r], hn_mul(mix[r], rs)));
	}
	float dss;
	if (c->mm.inv_rms) {
		float m = align_sqrtf(hn_div(ss, (float)K));
		dss = hn_div(hn_div(hn_mul(drs, hn_neg(hn_mul(rs, rs))), hn_mul(2.0f, m)), (float)K);
	} else {
		dss = hn_div(hn_mul(hn_mul(drs, -0.5f), hn_mul(hn_mul(rs, rs), rs)), (float)K);
	}
	const int pb = c->mm.param_bf16;
	for (int64_t i = 0; i < K; i++) {
		float xi = align_bf16_to_f32(xt[i]);
		float acc = hn_mul(yc[i / D], align_bf16_to_f32(gy[i % D]));
		for (int64_t r = 0; r < R; r++)
			acc = hn_add(acc, hn_mul(dmix[r], mhc_bwd_par(fn[r * K + i], pb)));
		acc = hn_add(acc, hn_mul(hn_mul(2.0f, xi), dss));
		dxt[i] = align_f32_to_bf16(acc);
	}
}

/* the token sum (MHC_BWD_TSUM) of v[t * stride] over t = 0..T-1: seq, or 16 contiguous token splits */
ALIGN_HD static inline float mhc_bwd_tsum(const float *v, int64_t stride, int64_t T, int split)
{
	if (T == 0)
		return 0.0f;
	int64_t c = split ? (T + 15) / 16 : T;
	float total = 0.0f;
	for (int64_t t0 = 0; t0 < T; t0 += c) {
		int64_t t1 = T - t0 < c ? T : t0 + c;
		float part = v[t0 * stride];
		for (int64_t t = t0 + 1; t < t1; t++)
			part = hn_add(part, v[t * stride]);
		total = t0 ? hn_add(total, part) : part;
	}
	return total;
}

/* dbase[r]: the token sum of dh[t, r] (dh [T, R]; MHC_BWD_TSUM=torch: autograd's sum_to over the expanded
 * base, x.sum(0) of [T, R]) */
ALIGN_HD static inline float mhc_bwd_dbase(const struct mhc_bwd_cfg *c, const float *dh, int64_t r)
{
	if (c->tsum_step >= 0)
		return c->T ? torch_sum_cols(dh + r, c->R, c->T, c->tsum_step) : 0.0f;
	return mhc_bwd_tsum(dh + r, c->R, c->T, c->tsum_split);
}

/* dfn[r, i]: the token sum of dmix[t, r] * F(x[t, i]) (dmix [T, R], x [T, K]) */
ALIGN_HD static inline float mhc_bwd_dfn(const struct mhc_bwd_cfg *c, const float *dmix, const align_bf16 *x, int64_t r,
					 int64_t i)
{
	const int64_t T = c->T, R = c->R, K = c->K;
	if (T == 0)
		return 0.0f;
	int64_t ch = c->tsum_split ? (T + 15) / 16 : T;
	float total = 0.0f;
	for (int64_t t0 = 0; t0 < T; t0 += ch) {
		int64_t t1 = T - t0 < ch ? T : t0 + ch;
		float part = hn_mul(dmix[t0 * R + r], align_bf16_to_f32(x[t0 * K + i]));
		for (int64_t t = t0 + 1; t < t1; t++)
			part = hn_add(part, hn_mul(dmix[t * R + r], align_bf16_to_f32(x[t * K + i])));
		total = t0 ? hn_add(total, part) : part;
	}
	return total;
}

/* dpre_j of token t: the D sum of F(dy[t, d]) * F(x[t, j, d]) (MHC_BWD_DSUM; torch: row t*N + j of the
 * [T*N, D] product) */
ALIGN_HD static inline float mhc_bwd_dpre(const struct mhc_bwd_cfg *c, const align_bf16 *gy, const align_bf16 *xj,
					  int64_t row)
{
	if (!c->D)
		return 0.0f;
	return c->dsum_torch ? torch_rowdot_bf16(gy, xj, &c->dplan, row) : mhc_bwd_dsum(gy, xj, c->D, c->dsum_split);
}

/* ---- Sinkhorn (hc_pre step 5) with its states, and its three backwards ---- */

/* row sum / column sum of M (n x n) as mhc_pre.c sums them (MHC_SUM_ORDER) */
ALIGN_HD static inline float mhc_bwd_rowsum(const float *M, int n, int j, int torch)
{
	if (torch)
		return torch_sum_lastdim(M + j * n, 1, n);
	float s = M[j * n];
	for (int k = 1; k < n; k++)
		s = hn_add(s, M[j * n + k]);
	return s;
}

ALIGN_HD static inline float mhc_bwd_colsum(const float *M, int n, int k, int torch)
{
	if (torch)
		return torch_sum_strided(M + k, n, n);
	float s = M[k];
	for (int j = 1; j < n; j++)
		s = hn_add(s, M[j * n + k]);
	return s;
}

/* The forward Sinkhorn of mhc_pre.c from E = e(M0 - rowmax) (n x n, the twin's e()), keeping for step
 * s = 0..2*iters-1 its input St[s] (n*n), its divisors Dv[s] (n) and whether each was clamped (c0:
 * max(sum, eps) took eps; Cl[s]); the result goes to P. Step 0 of c1 is the softmax + eps (Dv = the
 * softmax denominators); even steps divide rows, odd steps columns. */
ALIGN_HD static inline void mhc_bwd_sinkhorn_fwd(const struct mhc_bwd_cfg *c, const float *E, int n, float *St,
						 float *Dv, unsigned char *Cl, float *P)
{
	const int contract = c->sinkhorn, torch = c->torch_sums, steps = 2 * c->p.sinkhorn_iters;
	const float eps = c->p.hc_eps;
	for (int i = 0; i < n * n; i++)
		P[i] = E[i];
	for (int s = 0; s < steps; s++) {
		float *in = St + s * n * n;
		for (int i = 0; i < n * n; i++)
			in[i] = P[i];
		for (int a = 0; a < n; a++) {
			float d;
			unsigned char cl = 0;
			if (s == 0 && contract == ALIGN_MHC_SINKHORN_C1) {
				d = torch ? torch_softmax_sum(P + a * n, 1, n) : mhc_bwd_rowsum(P, n, a, 0);
				for (int k = 0; k < n; k++)
					P[a * n + k] = hn_add(hn_div(P[a * n + k], d), eps);
			} else {
				float sum =
					s % 2 == 0 ? mhc_bwd_rowsum(P, n, a, torch) : mhc_bwd_colsum(P, n, a, torch);
				if (contract == ALIGN_MHC_SINKHORN_C0) {
					cl = !(sum > eps);
					d = sum > eps ? sum : eps;
				} else {
					d = hn_add(sum, eps);
				}
				for (int b = 0; b < n; b++) {
					int i = s % 2 == 0 ? a * n + b : b * n + a;
					P[i] = hn_div(P[i], d);
				}
			}
			Dv[s * n + a] = d;
			Cl[s * n + a] = cl;
		}
	}
}

/* Unrolled backward: G (n x n, the gradient of P) -> dM0 (the gradient of the Sinkhorn's logits), through
 * the steps in reverse. A row (column) step y = m / d: dot = sum_l G_l y_l (l ascending), dm = (G - dot)
 * / d, or G / d where c0 clamped d to eps. c1's softmax step y = p + eps, p = E / d: dot = sum_l G_l p_l,
 * dM0 = p * (G - dot) (torch softmax backward); c0 / c0p start from E = e(M0 - rowmax) with the max held
 * constant: dM0 = G * E. G is overwritten. */
ALIGN_HD static inline void mhc_bwd_sinkhorn_unrolled(const struct mhc_bwd_cfg *c, const float *St, const float *Dv,
						      const unsigned char *Cl, float *G, int n, float *dM0)
{
	const int contract = c->sinkhorn, steps = 2 * c->p.sinkhorn_iters;
	for (int s = steps - 1; s >= 0; s--) {
		const float *in = St + s * n * n;
		int softmax = s == 0 && contract == ALIGN_MHC_SINKHORN_C1;
		for (int a = 0; a < n; a++) {
			float d = Dv[s * n + a], dot = 0.0f;
			for (int b = 0; b < n; b++) {
				int i = s % 2 == 0 ? a * n + b : b * n + a;
				float y = hn_div(in[i], d); /* the step's output (softmax: p, before the eps) */
				dot = b ? hn_add(dot, hn_mul(G[i], y)) : hn_mul(G[i], y);
			}
			for (int b = 0; b < n; b++) {
				int i = s % 2 == 0 ? a * n + b : b * n + a;
				if (softmax)
					G[i] = hn_mul(hn_div(in[i], d), hn_sub(G[i], dot));
				else
					G[i] = Cl[s * n + a] ? hn_div(G[i], d) : hn_div(hn_sub(G[i], dot), d);
			}
		}
	}
	for (int i = 0; i < n * n; i++) /* c1: G is now d(logits); c0, c0p: d(E), times E */
		dM0[i] = contract == ALIGN_MHC_SINKHORN_C1 ? G[i] : hn_mul(G[i], St[i]);
}

/* Autograd backward (MHC_BWD_SINKHORN=autograd): the unrolled backward term by term as PyTorch's autograd
 * evaluates the unfused torch loop (torch_mhc_pre_bwd in tests/gpu/torch-compare.py). A row (column) step
 * y = m / d, d = sum + eps (DivBackward0: grad / other, and -(grad * ((self / other) / other)) reduced to
 * d's shape by sum_to): dm_i = G_i / d + S, S = the sum over the step's line of -(G_l * ((m_l / d) / d))
 * (MHC_SUM_ORDER: seq left to right, or torch's x.sum(-1) lane tree for rows, x.sum(-2) chain for
 * columns); G_i / d only where c0 clamped d (clamp_min passes no gradient to the sum). c1's softmax step
 * (y = p + eps): dM0 = torch_softmax_bwd(G, p) (tmp = G * p; fmaf(-p, s, tmp), s the butterfly (torch)
 * or left-to-right (seq) sum of tmp). c0 / c0p: dM0 = G * E, the row max held constant (as unrolled).
 * G is overwritten. */
ALIGN_HD static inline void mhc_bwd_sinkhorn_autograd(const struct mhc_bwd_cfg *c, const float *St, const float *Dv,
						      const unsigned char *Cl, float *G, int n, float *dM0)
{
	const int contract = c->sinkhorn, steps = 2 * c->p.sinkhorn_iters, torch = c->torch_sums;
	for (int s = steps - 1; s >= 0; s--) {
		const float *in = St + s * n * n;
		if (s == 0 && contract == ALIGN_MHC_SINKHORN_C1) {
			for (int a = 0; a < n; a++) {
				float p[MHC_MAX_N], tmp[MHC_MAX_N], d = Dv[a];
				for (int b = 0; b < n; b++)
					p[b] = hn_div(in[a * n + b], d);
				if (torch) {
					torch_softmax_bwd(G + a * n, p, n, tmp);
				} else {
					float sum = 0.0f;
					for (int b = 0; b < n; b++) {
						tmp[b] = hn_mul(G[a * n + b], p[b]);
						sum = b ? hn_add(sum, tmp[b]) : tmp[b];
					}
					for (int b = 0; b < n; b++)
						tmp[b] = hn_fmaf(hn_neg(p[b]), sum, tmp[b]);
				}
				for (int b = 0; b < n; b++)
					G[a * n + b] = tmp[b];
			}
			continue;
		}
		for (int a = 0; a < n; a++) {
			float d = Dv[s * n + a], q[MHC_MAX_N];
			for (int b = 0; b < n; b++) {
				int i = s % 2 == 0 ? a * n + b : b * n + a;
				q[b] = hn_neg(hn_mul(G[i], hn_div(hn_div(in[i], d), d)));
			}
			float S;
			if (torch)
				S = s % 2 == 0 ? torch_sum_lastdim(q, 1, n) : torch_sum_strided(q, 1, n);
			else {
				S = q[0];
				for (int b = 1; b < n; b++)
					S = hn_add(S, q[b]);
			}
			for (int b = 0; b < n; b++) {
				int i = s % 2 == 0 ? a * n + b : b * n + a;
				G[i] = Cl[s * n + a] ? hn_div(G[i], d) : hn_add(hn_div(G[i], d), S);
			}
		}
	}
	for (int i = 0; i < n * n; i++) /* c1: G is now d(logits); c0, c0p: d(E), times E */
		dM0[i] = contract == ALIGN_MHC_SINKHORN_C1 ? G[i] : hn_mul(G[i], St[i]);
}

/* Implicit (fixed-point) backward: P = diag(u') E diag(v') taken as the exact balanced limit with row
 * sums a_j = sum_k P_jk and column sums b_k (as P has them): dM0 = P * (G - u_j - v_k), where
 * [diag(a) P; P^T diag(b)] [u; v] = [r; q], r_j = sum_k P_jk G_jk, q_k = sum_j P_jk G_jk; v_{n-1} = 0 fixes
 * the one-dimensional null space. Eliminating u: A v = z with A_kl = b_k [k = l] - sum_j P_jk P_jl / a_j,
 * z_k = q_k - sum_j P_jk r_j / a_j (sums j ascending), solved for k, l < n-1 by Gaussian elimination
 * without pivoting (A is symmetric positive definite there), pivot order ascending, back substitution
 * descending; then u_j = (r_j - sum_k P_jk v_k) / a_j. All binary32, sums left to right. */
ALIGN_HD static inline void mhc_bwd_sinkhorn_implicit(const float *P, const float *G, int n, float *dM0)
{
	float a[MHC_MAX_N], b[MHC_MAX_N], r[MHC_MAX_N], q[MHC_MAX_N], u[MHC_MAX_N], v[MHC_MAX_N],
		A[MHC_MAX_N * MHC_MAX_N], z[MHC_MAX_N];
	for (int j = 0; j < n; j++) {
		a[j] = mhc_bwd_rowsum(P, n, j, 0);
		b[j] = mhc_bwd_colsum(P, n, j, 0);
		float sr = hn_mul(P[j * n], G[j * n]), sq = hn_mul(P[j], G[j]);
		for (int k = 1; k < n; k++) {
			sr = hn_add(sr, hn_mul(P[j * n + k], G[j * n + k]));
			sq = hn_add(sq, hn_mul(P[k * n + j], G[k * n + j]));
		}
		r[j] = sr;
		q[j] = sq;
	}
	const int m = n - 1;
	for (int k = 0; k < m; k++) {
		float zk = q[k];
		for (int j = 0; j < n; j++)
			zk = hn_sub(zk, hn_div(hn_mul(P[j * n + k], r[j]), a[j]));
		z[k] = zk;
		for (int l = 0; l < m; l++) {
			float s = k == l ? b[k] : 0.0f;
			for (int j = 0; j < n; j++)
				s = hn_sub(s, hn_div(hn_mul(P[j * n + k], P[j * n + l]), a[j]));
			A[k * n + l] = s;
		}
	}
	for (int p = 0; p < m; p++)
		for (int k = p + 1; k < m; k++) {
			float f = hn_div(A[k * n + p], A[p * n + p]);
			for (int l = p; l < m; l++)
				A[k * n + l] = hn_sub(A[k * n + l], hn_mul(f, A[p * n + l]));
			z[k] = hn_sub(z[k], hn_mul(f, z[p]));
		}
	v[n - 1] = 0.0f;
	for (int k = m - 1; k >= 0; k--) {
		float s = z[k];
		for (int l = k + 1; l < m; l++)
			s = hn_sub(s, hn_mul(A[k * n + l], v[l]));
		v[k] = hn_div(s, A[k * n + k]);
	}
	for (int j = 0; j < n; j++) {
		float s = r[j];
		for (int k = 0; k < n; k++)
			s = hn_sub(s, hn_mul(P[j * n + k], v[k]));
		u[j] = hn_div(s, a[j]);
	}
	for (int j = 0; j < n; j++)
		for (int k = 0; k < n; k++)
			dM0[j * n + k] = hn_mul(P[j * n + k], hn_sub(hn_sub(G[j * n + k], u[j]), v[k]));
}

/* the Sinkhorn backward MHC_BWD_SINKHORN selects: G = d(P) (overwritten) -> dM0 */
ALIGN_HD static inline void mhc_bwd_sinkhorn(const struct mhc_bwd_cfg *c, const float *St, const float *Dv,
					     const unsigned char *Cl, const float *P, float *G, int n, float *dM0)
{
	if (c->bwd_sinkhorn == ALIGN_MHC_BWD_SINKHORN_IMPLICIT)
		mhc_bwd_sinkhorn_implicit(P, G, n, dM0);
	else if (c->bwd_sinkhorn == ALIGN_MHC_BWD_SINKHORN_AUTOGRAD)
		mhc_bwd_sinkhorn_autograd(c, St, Dv, Cl, G, n, dM0);
	else
		mhc_bwd_sinkhorn_unrolled(c, St, Dv, Cl, G, n, dM0);
}

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MHC_BWD_H */
