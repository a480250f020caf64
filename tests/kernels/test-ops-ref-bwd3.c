/* test-ops-ref-bwd3.c: the backward ops of issue 18 written by the bwd3 branch (mhc_post_bwd, ...).
 * For each op:
 *   - every combination of the switches it reads, on its default dims: each gradient within the bound
 *     its header states against an fp64 (long double) evaluation of the same formula, computed here
 *     independently from the same inputs;
 *   - a finite-difference sanity check on a small shape in the default modes: central differences
 *     (h = 2^-10) of an fp64 forward L = sum(dy * y(inputs)) against the op's gradients, within the
 *     stated bound plus a relative 2^-20 (the forwards here are linear or smooth; the difference
 *     quotient's own error is far below that).
 * Exit status 0 = pass; prints the seed, op, modes and worst element on failure. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "mhc_post_bwd.h"
#include "ops.h"
#include "sparse_attn.h"

#define SEED 0xb3d5eedull
#define U 0x1p-24L
#define UB 0x1p-8L

typedef long double ld;

static ld ulp_bf16(ld v)
{
	v = fabsl(v);
	if (v < 0x1p-126L)
		return 0x1p-133L;
	int e;
	frexpl(v, &e);
	return ldexpl(1.0L, e - 8);
}

struct ctx {
	const struct align_modes *m;
	struct align_tensor *in;
	const struct align_tensor *out;
	const void *params;
	ld worst;
	int64_t worst_i;
	int worst_out;
};

static void judge(struct ctx *c, int o, int64_t i, ld got, ld ref, ld tol)
{
	ld err = fabsl(got - ref);
	if (isnan(got) || isnan(ref))
		err = isnan(got) && isnan(ref) ? 0 : INFINITY;
	ld r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
	if (r > c->worst) {
		c->worst = r;
		c->worst_i = i;
		c->worst_out = o;
		if (getenv("REF_DEBUG") && r > 1)
			printf("  out %d element %" PRId64 ": got %La ref %La tol %La\n", o, i, got, ref, tol);
	}
}

static ld ldi(const struct ctx *c, int k, int64_t i)
{
	return (ld)ops_ld(&c->in[k], i);
}

static ld ldo(const struct ctx *c, int k, int64_t i)
{
	return (ld)ops_ld(&c->out[k], i);
}

/* ---- mhc_post_bwd (mhc_post_bwd.h) ---- */

struct mpb_mode {
	int tr, dbl, cb, split;
};

static struct mpb_mode mpb_modes(const struct align_modes *m)
{
	struct mpb_mode r;
	r.tr = m->v[MODE_MHC_HRES_TRANSPOSE] == ALIGN_MHC_HRES_TRANSPOSE_ON;
	r.dbl = m->v[MODE_MHC_POST_ROUND] == ALIGN_MHC_POST_ROUND_DOUBLE;
	r.cb = r.dbl || m->v[MODE_MHC_COEF] == ALIGN_MHC_COEF_BF16;
	r.split = m->v[MODE_MHC_BWD_DSUM] == ALIGN_MHC_BWD_DSUM_SPLIT16;
	return r;
}

/* H(j,k) and P_k as used (rounded per the modes) */
static ld mpb_h(const struct ctx *c, struct mpb_mode md, int64_t t, int64_t N, int64_t j, int64_t k)
{
	const float *comb = c->in[3].data;
	float h = md.tr ? comb[(t * N + j) * N + k] : comb[(t * N + k) * N + j];
	return (ld)(md.cb ? align_round_bf16(h) : h);
}

static ld mpb_p(const struct ctx *c, struct mpb_mode md, int64_t t, int64_t N, int64_t k)
{
	float p = ((const float *)c->in[2].data)[t * N + k];
	return (ld)(md.cb ? align_round_bf16(p) : p);
}

static void ref_mhc_post_bwd(struct ctx *c)
{
	int64_t T = c->in[0].shape[0], N = c->in[0].shape[1], D = c->in[0].shape[2];
	struct mpb_mode md = mpb_modes(c->m);
	ld dfac = md.split ? (ld)((D + 15) / 16 + 16) : (ld)D;
	for (int64_t t = 0; t < T; t++) {
		for (int64_t d = 0; d < D; d++) {
			for (int64_t j = 0; j < N; j++) {
				ld s = 0, S = 0;
				for (int64_t k = 0; k < N; k++) {
					ld term = mpb_h(c, md, t, N, j, k) * ldi(c, 4, (t * N + k) * D + d);
					s += term;
					S += fabsl(term);
				}
				int64_t i = (t * N + j) * D + d;
				judge(c, 0, i, ldo(c, 0, i), s, ulp_bf16(s) + N * U * S + 0x1p-133L);
			}
			ld s = 0, S = 0;
			for (int64_t k = 0; k < N; k++) {
				ld term = mpb_p(c, md, t, N, k) * ldi(c, 4, (t * N + k) * D + d);
				s += term;
				S += fabsl(term);
			}
			judge(c, 1, t * D + d, ldo(c, 1, t * D + d), s,
			      ulp_bf16(s) + N * U * S + (md.dbl ? UB * S : 0) + 0x1p-133L);
		}
		for (int64_t k = 0; k < N; k++) {
			ld s = 0, S = 0;
			for (int64_t d = 0; d < D; d++) {
				ld term = ldi(c, 4, (t * N + k) * D + d) * ldi(c, 1, t * D + d);
				s += term;
				S += fabsl(term);
			}
			ld tol = dfac * U * S + (md.dbl ? ulp_bf16(s) : 0) + 0x1p-149L;
			judge(c, 2, t * N + k, ldo(c, 2, t * N + k), s, tol);
			for (int64_t j = 0; j < N; j++) {
				s = 0, S = 0;
				for (int64_t d = 0; d < D; d++) {
					ld term = ldi(c, 4, (t * N + k) * D + d) * ldi(c, 0, (t * N + j) * D + d);
					s += term;
					S += fabsl(term);
				}
				tol = dfac * U * S + (md.dbl ? ulp_bf16(s) : 0) + 0x1p-149L;
				int64_t i = t * N * N + (md.tr ? j * N + k : k * N + j);
				judge(c, 3, i, ldo(c, 3, i), s, tol);
			}
		}
	}
}

/* fp64 forward of mhc_post (default modes: transpose on, fp32 coefficients), L = sum dy * x_new; v[k] are
 * the inputs as long double (x, f, post, comb) */
static ld fwd_mhc_post(const struct ctx *c, ld *const *v)
{
	int64_t T = c->in[0].shape[0], N = c->in[0].shape[1], D = c->in[0].shape[2];
	ld L = 0;
	for (int64_t t = 0; t < T; t++)
		for (int64_t k = 0; k < N; k++)
			for (int64_t d = 0; d < D; d++) {
				ld o = v[2][t * N + k] * v[1][t * D + d];
				for (int64_t j = 0; j < N; j++)
					o += v[3][(t * N + j) * N + k] * v[0][(t * N + j) * D + d];
				L += ldi(c, 4, (t * N + k) * D + d) * o;
			}
	return L;
}

/* ---- mhc_pre_bwd, mhc_head_bwd (mhc_pre_bwd.h) ---- */

#define LMAXR ((2 + MHC_MAX_N) * MHC_MAX_N)
#define LMAXS 128

struct lmhc {
	int head, pb, cb, inv, opd, sk, hpre, hpost, implicit, iters;
	int64_t T, N, D, K, R;
	ld heps, neps;
};

static struct lmhc lmhc_init(const struct ctx *c, const char *op)
{
	const struct mhc_params *p = c->params;
	const struct align_modes *m = c->m;
	struct lmhc q;
	q.head = !strcmp(op, "mhc_head_bwd");
	q.pb = m->v[MODE_MHC_PARAM] == ALIGN_MHC_PARAM_BF16;
	q.cb = m->v[MODE_MHC_COEF] == ALIGN_MHC_COEF_BF16;
	q.inv = m->v[MODE_MHC_RMS_FORM] == ALIGN_MHC_RMS_FORM_INV_RMS;
	q.opd = m->v[MODE_MHC_PROJ_GEMM] == ALIGN_MHC_PROJ_GEMM_TF32 ? ALIGN_MATMUL_OPERAND_TF32
								     : ALIGN_MATMUL_OPERAND_FP32;
	q.sk = m->v[MODE_MHC_SINKHORN];
	q.hpre = q.head || m->v[MODE_MHC_HPRE_EPS] == ALIGN_MHC_HPRE_EPS_ON;
	q.hpost = m->v[MODE_MHC_HPOST_EPS] == ALIGN_MHC_HPOST_EPS_ON;
	q.implicit = !q.head && m->v[MODE_MHC_BWD_SINKHORN] == ALIGN_MHC_BWD_SINKHORN_IMPLICIT;
	q.iters = p->sinkhorn_iters;
	q.heps = p->hc_eps;
	q.neps = p->norm_eps;
	q.T = c->in[0].shape[0], q.N = c->in[0].shape[1], q.D = c->in[0].shape[2];
	q.K = q.N * q.D;
	q.R = q.head ? q.N : (2 + q.N) * q.N;
	return q;
}

static ld lpar(const struct lmhc *q, ld v)
{
	return q->pb ? (ld)align_round_bf16((float)v) : v;
}

/* fp64 forward of one token: ss, rs, mix, h, s (sigmoids), pre (as y uses it), the Sinkhorn result P
 * and its states (St: input of step s; Dv: divisors) when St != NULL. v: x, fn, base, scale as ld. */
struct ltok {
	ld ss, rs, mix[LMAXR], h[LMAXR], s[LMAXR], yc[MHC_MAX_N], P[MHC_MAX_N * MHC_MAX_N], E[MHC_MAX_N * MHC_MAX_N];
};

static void lmhc_tok(const struct lmhc *q, ld *const *v, int64_t t, struct ltok *o, ld *St, ld *Dv)
{
	const int64_t N = q->N, K = q->K, R = q->R;
	const ld *x = v[0] + t * K;
	o->ss = 0;
	for (int64_t i = 0; i < K; i++)
		o->ss += x[i] * x[i];
	o->rs = q->inv ? 1 / (sqrtl(o->ss / K) + q->neps) : 1 / sqrtl(o->ss / K + q->neps);
	for (int64_t r = 0; r < R; r++) {
		ld a = 0;
		for (int64_t i = 0; i < K; i++) {
			ld xi = q->opd == ALIGN_MATMUL_OPERAND_TF32 ? (ld)matmul_operand((float)x[i], q->opd) : x[i];
			ld fi = lpar(q, v[1][r * K + i]);
			if (q->opd == ALIGN_MATMUL_OPERAND_TF32)
				fi = (ld)matmul_operand((float)fi, q->opd);
			a += xi * fi;
		}
		o->mix[r] = a;
		int g = r < N ? 0 : r < 2 * N ? 1 : 2;
		o->h[r] = a * o->rs * lpar(q, v[3][g]) + lpar(q, v[2][r]);
		o->s[r] = 1 / (1 + expl(-o->h[r]));
	}
	for (int64_t j = 0; j < N; j++) {
		ld pre = q->hpre ? o->s[j] + q->heps : o->s[j];
		o->yc[j] = q->cb ? (ld)align_round_bf16((float)pre) : pre;
	}
	if (q->head)
		return;
	int n = (int)N;
	ld *P = o->P;
	for (int j = 0; j < n; j++) {
		ld mx = o->h[2 * N + j * N];
		for (int k = 1; k < n; k++)
			mx = fmaxl(mx, o->h[2 * N + j * N + k]);
		for (int k = 0; k < n; k++)
			o->E[j * n + k] = P[j * n + k] = expl(o->h[2 * N + j * N + k] - mx);
	}
	for (int st = 0; st < 2 * q->iters; st++) {
		if (St)
			memcpy(St + st * n * n, P, sizeof(ld) * (size_t)(n * n));
		for (int a = 0; a < n; a++) {
			ld sum = 0, d;
			for (int b = 0; b < n; b++)
				sum += st % 2 == 0 ? P[a * n + b] : P[b * n + a];
			int soft = st == 0 && q->sk == ALIGN_MHC_SINKHORN_C1;
			d = soft ? sum : q->sk == ALIGN_MHC_SINKHORN_C0 ? fmaxl(sum, q->heps) : sum + q->heps;
			for (int b = 0; b < n; b++) {
				int i = st % 2 == 0 ? a * n + b : b * n + a;
				P[i] = soft ? P[i] / d + q->heps : P[i] / d;
			}
			if (Dv)
				Dv[st * n + a] = d;
		}
	}
}

/* L = sum dy * y + (pre) sum dpost * post + sum dcomb * comb, in fp64 (inputs 4.. are the gradients) */
static ld fwd_mhc_bwd(const struct ctx *c, ld *const *v, const char *op)
{
	struct lmhc q = lmhc_init(c, op);
	ld L = 0;
	struct ltok o;
	for (int64_t t = 0; t < q.T; t++) {
		lmhc_tok(&q, v, t, &o, NULL, NULL);
		for (int64_t d = 0; d < q.D; d++) {
			ld y = 0;
			for (int64_t j = 0; j < q.N; j++)
				y += o.yc[j] * v[0][t * q.K + j * q.D + d];
			L += ldi(c, 4, t * q.D + d) * y;
		}
		if (q.head)
			continue;
		for (int64_t i = 0; i < q.N; i++) {
			ld post = q.hpost ? 2 * (o.s[q.N + i] + q.heps) : 2 * o.s[q.N + i];
			L += ldi(c, 5, t * q.N + i) * post;
		}
		for (int64_t i = 0; i < q.N * q.N; i++)
			L += ldi(c, 6, t * q.N * q.N + i) * o.P[i];
	}
	return L;
}

static ld fwd_mhc_pre_bwd(const struct ctx *c, ld *const *v)
{
	return fwd_mhc_bwd(c, v, "mhc_pre_bwd");
}

static ld fwd_mhc_head_bwd(const struct ctx *c, ld *const *v)
{
	return fwd_mhc_bwd(c, v, "mhc_head_bwd");
}

/* fp64 Sinkhorn backwards (mhc_bwd.h's formulas) */
static void lsink_unrolled(const struct lmhc *q, const ld *St, const ld *Dv, const ld *E, ld *G, int n, ld *dM0)
{
	for (int st = 2 * q->iters - 1; st >= 0; st--) {
		const ld *in = St + st * n * n;
		int soft = st == 0 && q->sk == ALIGN_MHC_SINKHORN_C1;
		for (int a = 0; a < n; a++) {
			ld d = Dv[st * n + a], dot = 0;
			int cl = q->sk == ALIGN_MHC_SINKHORN_C0 && !(d > q->heps);
			for (int b = 0; b < n; b++) {
				int i = st % 2 == 0 ? a * n + b : b * n + a;
				dot += G[i] * in[i] / d;
			}
			for (int b = 0; b < n; b++) {
				int i = st % 2 == 0 ? a * n + b : b * n + a;
				G[i] = soft ? in[i] / d * (G[i] - dot) : cl ? G[i] / d : (G[i] - dot) / d;
			}
		}
	}
	for (int i = 0; i < n * n; i++)
		dM0[i] = q->sk == ALIGN_MHC_SINKHORN_C1 ? G[i] : G[i] * E[i];
}

static void lsink_implicit(const ld *P, const ld *G, int n, ld *dM0)
{
	ld a[MHC_MAX_N], b[MHC_MAX_N], r[MHC_MAX_N], qv[MHC_MAX_N], u[MHC_MAX_N], v[MHC_MAX_N], A[MHC_MAX_N][MHC_MAX_N],
		z[MHC_MAX_N];
	for (int j = 0; j < n; j++) {
		a[j] = b[j] = r[j] = qv[j] = 0;
		for (int k = 0; k < n; k++) {
			a[j] += P[j * n + k];
			b[j] += P[k * n + j];
			r[j] += P[j * n + k] * G[j * n + k];
			qv[j] += P[k * n + j] * G[k * n + j];
		}
	}
	int m = n - 1;
	for (int k = 0; k < m; k++) {
		z[k] = qv[k];
		for (int j = 0; j < n; j++)
			z[k] -= P[j * n + k] * r[j] / a[j];
		for (int l = 0; l < m; l++) {
			A[k][l] = k == l ? b[k] : 0;
			for (int j = 0; j < n; j++)
				A[k][l] -= P[j * n + k] * P[j * n + l] / a[j];
		}
	}
	for (int p = 0; p < m; p++) /* partial pivoting: an independent solve */
	{
		int best = p;
		for (int k = p + 1; k < m; k++)
			if (fabsl(A[k][p]) > fabsl(A[best][p]))
				best = k;
		for (int l = 0; l < m; l++) {
			ld tmp = A[p][l];
			A[p][l] = A[best][l];
			A[best][l] = tmp;
		}
		ld tz = z[p];
		z[p] = z[best];
		z[best] = tz;
		for (int k = p + 1; k < m; k++) {
			ld f = A[k][p] / A[p][p];
			for (int l = p; l < m; l++)
				A[k][l] -= f * A[p][l];
			z[k] -= f * z[p];
		}
	}
	v[n - 1] = 0;
	for (int k = m - 1; k >= 0; k--) {
		ld s = z[k];
		for (int l = k + 1; l < m; l++)
			s -= A[k][l] * v[l];
		v[k] = s / A[k][k];
	}
	for (int j = 0; j < n; j++) {
		ld s = r[j];
		for (int k = 0; k < n; k++)
			s -= P[j * n + k] * v[k];
		u[j] = s / a[j];
	}
	for (int j = 0; j < n; j++)
		for (int k = 0; k < n; k++)
			dM0[j * n + k] = P[j * n + k] * (G[j * n + k] - u[j] - v[k]);
}

static void ref_mhc_bwd(struct ctx *c, const char *op)
{
	struct lmhc q = lmhc_init(c, op);
	const int64_t T = q.T, N = q.N, D = q.D, K = q.K, R = q.R;
	const int n = (int)N;
	const int tsplit = c->m->v[MODE_MHC_BWD_TSUM] == ALIGN_MHC_BWD_TSUM_SPLIT16;
	(void)tsplit;
	ld *v[4];
	for (int k = 0; k < 4; k++) {
		int64_t ne = align_tensor_numel(&c->in[k]);
		v[k] = malloc(sizeof(ld) * (size_t)ne);
		for (int64_t i = 0; i < ne; i++)
			v[k][i] = ldi(c, k, i);
	}
	ld *dmix = calloc((size_t)(T * R), sizeof(ld)), *dh = calloc((size_t)(T * R), sizeof(ld)),
	   *ps = calloc((size_t)(T * 3), sizeof(ld)), *pa = calloc((size_t)(T * 3), sizeof(ld));
	ld *St = malloc(sizeof(ld) * LMAXS * MHC_MAX_N * MHC_MAX_N), *Dv = malloc(sizeof(ld) * LMAXS * MHC_MAX_N);
	struct ltok o;
	for (int64_t t = 0; t < T; t++) {
		lmhc_tok(&q, v, t, &o, St, Dv);
		ld *dht = dh + t * R;
		for (int64_t j = 0; j < N; j++) {
			ld dpre = 0;
			for (int64_t d = 0; d < D; d++)
				dpre += ldi(c, 4, t * D + d) * v[0][t * K + j * D + d];
			dht[j] = dpre * (1 - o.s[j]) * o.s[j];
		}
		if (!q.head) {
			ld G[MHC_MAX_N * MHC_MAX_N];
			for (int64_t i = 0; i < N; i++)
				dht[N + i] = 2 * ldi(c, 5, t * N + i) * (1 - o.s[N + i]) * o.s[N + i];
			for (int i = 0; i < n * n; i++)
				G[i] = ldi(c, 6, t * N * N + i);
			if (q.implicit)
				lsink_implicit(o.P, G, n, dht + 2 * N);
			else
				lsink_unrolled(&q, St, Dv, o.E, G, n, dht + 2 * N);
		}
		ld drs = 0;
		for (int64_t r = 0; r < R; r++) {
			int g = r < N ? 0 : r < 2 * N ? 1 : 2;
			ld a = dht[r] * lpar(&q, v[3][g]);
			dmix[t * R + r] = a * o.rs;
			drs += a * o.mix[r];
			ps[t * 3 + g] += dht[r] * o.mix[r] * o.rs;
			pa[t * 3 + g] += fabsl(dht[r] * o.mix[r] * o.rs);
		}
		ld dss =
			q.inv ? drs * -(o.rs * o.rs) / (2 * sqrtl(o.ss / K)) / K : drs * -0.5L * o.rs * o.rs * o.rs / K;
		for (int64_t i = 0; i < K; i++) {
			ld xi = v[0][t * K + i], yt = o.yc[i / D] * ldi(c, 4, t * D + i % D), lt = 2 * xi * dss;
			ld s = yt + lt, M = fabsl(yt) + fabsl(lt);
			for (int64_t r = 0; r < R; r++) {
				ld term = dmix[t * R + r] * lpar(&q, v[1][r * K + i]);
				s += term;
				M += fabsl(term);
			}
			judge(c, 0, t * K + i, ldo(c, 0, t * K + i), s, ulp_bf16(s) + 0x1p-12L * M + 0x1p-133L);
		}
	}
	for (int64_t r = 0; r < R; r++) {
		for (int64_t i = 0; i < K; i++) {
			ld s = 0, M = 0;
			for (int64_t t = 0; t < T; t++) {
				ld term = dmix[t * R + r] * v[0][t * K + i];
				s += term;
				M += fabsl(term);
			}
			judge(c, 1, r * K + i, ldo(c, 1, r * K + i), s, 0x1p-12L * M + 0x1p-140L);
		}
		ld s = 0, M = 0;
		for (int64_t t = 0; t < T; t++) {
			s += dh[t * R + r];
			M += fabsl(dh[t * R + r]);
		}
		judge(c, 2, r, ldo(c, 2, r), s, 0x1p-12L * M + 0x1p-140L);
	}
	for (int g = 0; g < (q.head ? 1 : 3); g++) {
		ld s = 0, M = 0;
		for (int64_t t = 0; t < T; t++) {
			s += ps[t * 3 + g];
			M += pa[t * 3 + g];
		}
		judge(c, 3, g, ldo(c, 3, g), s, 0x1p-12L * M + 0x1p-140L);
	}
	for (int k = 0; k < 4; k++)
		free(v[k]);
	free(dmix);
	free(dh);
	free(ps);
	free(pa);
	free(St);
	free(Dv);
}

static void ref_mhc_pre_bwd(struct ctx *c)
{
	ref_mhc_bwd(c, "mhc_pre_bwd");
}

static void ref_mhc_head_bwd(struct ctx *c)
{
	ref_mhc_bwd(c, "mhc_head_bwd");
}

/* ---- sparse_attn_bwd (sparse_attn_bwd.h) ---- */

/* fp64 statistics of row (t, h) from q, kv, sink as ld (v[0], v[1], v[3]); returns 0 for a row with no
 * valid slot; z[N] logits (natural domain), p[N], *ps the sink weight */
static int lsa_row(const struct ctx *c, ld *const *v, int64_t t, int64_t h, ld *z, ld *p, ld *ps)
{
	const struct sparse_attn_params *pr = c->params;
	int64_t H = c->in[0].shape[1], D = c->in[0].shape[2], S = c->in[1].shape[0], N = c->in[2].shape[1];
	const int32_t *idx = c->in[2].data;
	int sb = c->m->v[MODE_CSA_SINK] == ALIGN_CSA_SINK_BF16;
	ld s = sb ? (ld)align_round_bf16((float)v[3][h]) : v[3][h], m = s;
	int any = 0;
	for (int64_t k = 0; k < N; k++) {
		int32_t j = idx[t * N + k];
		if (j < 0 || j >= S) {
			z[k] = -INFINITY;
			continue;
		}
		ld dot = 0;
		for (int64_t d = 0; d < D; d++)
			dot += v[0][(t * H + h) * D + d] * v[1][(int64_t)j * D + d];
		z[k] = (ld)pr->scale * dot;
		m = fmaxl(m, z[k]);
		any = 1;
	}
	ld l = expl(s - m);
	for (int64_t k = 0; k < N; k++)
		l += z[k] == -INFINITY ? 0 : expl(z[k] - m);
	for (int64_t k = 0; k < N; k++)
		p[k] = z[k] == -INFINITY ? 0 : expl(z[k] - m) / l;
	*ps = expl(s - m) / l;
	return any;
}

static ld fwd_sparse_attn(const struct ctx *c, ld *const *v)
{
	int64_t T = c->in[0].shape[0], H = c->in[0].shape[1], D = c->in[0].shape[2], S = c->in[1].shape[0],
		N = c->in[2].shape[1];
	const int32_t *idx = c->in[2].data;
	ld *z = malloc(sizeof(ld) * (size_t)N), *p = malloc(sizeof(ld) * (size_t)N), ps, L = 0;
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			if (!lsa_row(c, v, t, h, z, p, &ps))
				continue;
			for (int64_t d = 0; d < D; d++) {
				ld o = 0;
				for (int64_t k = 0; k < N; k++) {
					int32_t j = idx[t * N + k];
					if (j >= 0 && j < S)
						o += p[k] * v[1][(int64_t)j * D + d];
				}
				L += ldi(c, 4, (t * H + h) * D + d) * o;
			}
		}
	free(z);
	free(p);
	return L;
}

static void ref_sparse_attn_bwd(struct ctx *c)
{
	const struct sparse_attn_params *pr = c->params;
	int64_t T = c->in[0].shape[0], H = c->in[0].shape[1], D = c->in[0].shape[2], S = c->in[1].shape[0],
		N = c->in[2].shape[1];
	const int32_t *idx = c->in[2].data;
	int ez = c->m->v[MODE_CSA_EMPTY_ROW] == ALIGN_CSA_EMPTY_ROW_ZERO,
	    sim = c->m->v[MODE_CSA_SINK_IN_MAX] == ALIGN_CSA_SINK_IN_MAX_ON;
	ld *v[5];
	for (int k = 0; k < 5; k++) {
		if (k == 2) {
			v[k] = NULL;
			continue;
		}
		int64_t ne = align_tensor_numel(&c->in[k]);
		v[k] = malloc(sizeof(ld) * (size_t)(ne ? ne : 1));
		for (int64_t i = 0; i < ne; i++)
			v[k][i] = ldi(c, k, i);
	}
	ld *z = malloc(sizeof(ld) * (size_t)N), *p = malloc(sizeof(ld) * (size_t)N);
	ld *dS = calloc((size_t)(T * H * N), sizeof(ld)), *MdS = calloc((size_t)(T * H * N), sizeof(ld)),
	   *dkv = calloc((size_t)(S * D), sizeof(ld)), *Mkv = calloc((size_t)(S * D), sizeof(ld));
	ld ds_sum[64] = {0}, ds_M[64] = {0};
	int ds_nan[64] = {0};
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			ld ps;
			int64_t r = t * H + h;
			if (!lsa_row(c, v, t, h, z, p, &ps)) {
				if (!ez && !sim)
					ds_nan[h] = 1;
				continue;
			}
			ld delta = 0, dsum = 0, pdp = 0, dP[512];
			if (N > 512) {
				judge(c, 0, r * D, INFINITY, 0, 1); /* the reference's limit */
				continue;
			}
			for (int64_t k = 0; k < N; k++) {
				int32_t j = idx[t * N + k];
				dP[k] = 0;
				if (j >= 0 && j < S)
					for (int64_t d = 0; d < D; d++)
						dP[k] += v[4][r * D + d] * v[1][(int64_t)j * D + d];
				pdp += p[k] * fabsl(dP[k]);
				delta += p[k] * dP[k];
			}
			for (int64_t d = 0; d < D; d++) {
				ld o = 0;
				for (int64_t k = 0; k < N; k++) {
					int32_t j = idx[t * N + k];
					if (j >= 0 && j < S)
						o += p[k] * v[1][(int64_t)j * D + d];
				}
				dsum += fabsl(v[4][r * D + d] * o);
			}
			for (int64_t k = 0; k < N; k++) {
				dS[r * N + k] = p[k] * (dP[k] - delta) * pr->scale;
				MdS[r * N + k] = p[k] * (fabsl(dP[k]) + fabsl(delta) + dsum + pdp) * pr->scale;
			}
			ds_sum[h] += -ps * delta;
			ds_M[h] += ps * (fabsl(delta) + dsum + pdp);
			for (int64_t d = 0; d < D; d++) {
				ld s = 0, M = 0;
				for (int64_t k = 0; k < N; k++) {
					int32_t j = idx[t * N + k];
					if (j < 0 || j >= S)
						continue;
					s += dS[r * N + k] * v[1][(int64_t)j * D + d];
					M += MdS[r * N + k] * fabsl(v[1][(int64_t)j * D + d]);
					dkv[(int64_t)j * D + d] +=
						dS[r * N + k] * v[0][r * D + d] + p[k] * v[4][r * D + d];
					Mkv[(int64_t)j * D + d] +=
						MdS[r * N + k] * fabsl(v[0][r * D + d]) + fabsl(p[k] * v[4][r * D + d]);
				}
				judge(c, 0, r * D + d, ldo(c, 0, r * D + d), s, ulp_bf16(s) + 0x1p-7L * M + 0x1p-133L);
			}
		}
	for (int64_t i = 0; i < S * D; i++)
		judge(c, 1, i, ldo(c, 1, i), dkv[i], 0x1p-7L * Mkv[i] + 0x1p-140L);
	for (int64_t h = 0; h < H && h < 64; h++)
		judge(c, 2, h, ldo(c, 2, h), ds_nan[h] ? NAN : ds_sum[h], 0x1p-7L * ds_M[h] + 0x1p-140L);
	for (int k = 0; k < 5; k++)
		free(v[k]);
	free(z);
	free(p);
	free(dS);
	free(MdS);
	free(dkv);
	free(Mkv);
}

/* ---- the op table and the drivers ---- */

struct ref_entry {
	const char *op;
	void (*fn)(struct ctx *);
	ld (*fwd)(const struct ctx *, ld *const *); /* fp64 forward for the finite differences */
	int n_fd;				    /* inputs fd_in[0..n_fd-1] are differentiated ... */
	int fd_in[8];
	int fd_out[8]; /* ... against these outputs */
	double fd_rel; /* plus this fraction of the largest |difference quotient| of the tensor */
	int fd_mode;   /* the finite differences run with switch fd_mode (MODE_*; -1: none) set to fd_val */
	int fd_val;
	const char *fd_dims;
	const char *sweep_dims; /* dims of the mode sweep (NULL: the op's defaults) */
	int stride;		/* check every stride-th mode combination (1: all) */
};

static const struct ref_entry refs[] = {
	{"mhc_post_bwd",
	 ref_mhc_post_bwd,
	 fwd_mhc_post,
	 4,
	 {0, 1, 2, 3},
	 {0, 1, 2, 3},
	 0,
	 -1,
	 0,
	 "T=2,N=4,D=8",
	 NULL,
	 1},
	{"mhc_head_bwd",
	 ref_mhc_head_bwd,
	 fwd_mhc_head_bwd,
	 4,
	 {0, 1, 2, 3},
	 {0, 1, 2, 3},
	 0,
	 -1,
	 0,
	 "T=2,N=4,D=4",
	 "T=4,N=4,D=64",
	 1},
	/* 9216 combinations: every 5th (5 is prime to every switch's value count, so each value of each
	 * switch is visited) */
	{"mhc_pre_bwd",
	 ref_mhc_pre_bwd,
	 fwd_mhc_pre_bwd,
	 4,
	 {0, 1, 2, 3},
	 {0, 1, 2, 3},
	 0,
	 -1,
	 0,
	 "T=2,N=4,D=4",
	 "T=3,N=4,D=32",
	 5},
	/* 2^14 combinations x 3 variants: every 7th; fd in the default modes (bf16 O and P in the backward:
	 * 2^-6 of the largest difference quotient) but with empty rows zeroed (IEEE: the forward's and so the
	 * sink gradient's NaN with the sink out of the max) */
	{"sparse_attn_bwd",
	 ref_sparse_attn_bwd,
	 fwd_sparse_attn,
	 3,
	 {0, 1, 3},
	 {0, 1, 2},
	 0x1p-6,
	 MODE_CSA_EMPTY_ROW,
	 ALIGN_CSA_EMPTY_ROW_ZERO,
	 "T=16,H=2,D=8,S=24,N=8",
	 "T=4,H=2,D=32,S=40,N=20",
	 7},
};

static int run(const struct align_op *op, const void *params, const struct align_dims *d, const struct align_modes *m,
	       struct align_tensor *in, struct align_tensor *out)
{
	const struct align_op_impl *im = op->impl;
	for (int i = 0; i < im->n_in; i++) {
		ops_tensor_alloc(op, 0, i, d, m, &in[i]);
		ops_fill_input(op, i, &in[i], SEED, 0);
	}
	for (int i = 0; i < im->n_out; i++)
		ops_tensor_alloc(op, 1, i, d, m, &out[i]);
	return im->fwd_cpu(params, m, in, im->n_in, out, im->n_out);
}

static void run_free(const struct align_op *op, struct align_tensor *in, struct align_tensor *out)
{
	for (int i = 0; i < op->impl->n_in; i++)
		ops_tensor_free(&in[i]);
	for (int i = 0; i < op->impl->n_out; i++)
		ops_tensor_free(&out[i]);
}

static int check_op(const struct ref_entry *e)
{
	const struct align_op *op = ops_find(e->op);
	const struct align_op_impl *im = op->impl;
	int ids[16], nm = 0, fails = 0, combos = 1, runs = 0;
	for (const int *p = im->modes; *p >= 0; p++)
		if (*p != MODE_MATH_IMPL) {
			ids[nm++] = *p;
			combos *= modes_value_count(*p);
		}
	struct align_dims d;
	char perr[128];
	ops_dims_default(op, &d);
	if (e->sweep_dims && ops_dims_parse(e->sweep_dims, &d, perr, sizeof perr) != 0) {
		printf("FAIL %s: sweep dims %s\n", op->name, e->sweep_dims);
		return 1;
	}
	void *params = calloc(1, im->params_size);
	ld worst = 0;
	for (int var = 0; im->params_variant(params, &d, var); var++)
		for (int cmb = 0; cmb < combos; cmb += e->stride) {
			struct align_modes m;
			modes_init_default(&m);
			for (int q = 0, rest = cmb; q < nm; q++) {
				m.v[ids[q]] = rest % modes_value_count(ids[q]);
				rest /= modes_value_count(ids[q]);
			}
			if (modes_gpu_only_in(&m, NULL) >= 0 || ops_refused_in(op, &m))
				continue;
			struct align_tensor in[8], out[8];
			if (run(op, params, &d, &m, in, out) != ALIGN_OK) {
				printf("FAIL %s: run failed\n", op->name);
				fails++;
			} else {
				struct ctx c = {&m, in, out, params, 0, -1, 0};
				e->fn(&c);
				runs++;
				worst = c.worst > worst ? c.worst : worst;
				if (c.worst > 1) {
					char buf[2048];
					modes_format(&m, buf, sizeof buf);
					printf("FAIL %s variant %d output %d element %" PRId64
					       ": error %.3Lg x bound (seed 0x%llx) modes %s\n",
					       op->name, var, c.worst_out, c.worst_i, c.worst, (unsigned long long)SEED,
					       buf);
					fails++;
				}
			}
			run_free(op, in, out);
		}
	printf("%-14s %4d mode combinations (%s): worst error %.3Lf of the stated bound%s\n", op->name, runs,
	       e->sweep_dims ? e->sweep_dims : im->dims, worst, fails ? "  FAIL" : "");
	free(params);
	return fails;
}

/* central differences of e->fwd against the op's gradients, default modes, dims e->fd_dims */
static int check_fd(const struct ref_entry *e)
{
	const struct align_op *op = ops_find(e->op);
	const struct align_op_impl *im = op->impl;
	struct align_dims d;
	struct align_modes m;
	modes_init_default(&m);
	if (e->fd_mode >= 0)
		m.v[e->fd_mode] = e->fd_val;
	char perr[128];
	ops_dims_default(op, &d);
	if (ops_dims_parse(e->fd_dims, &d, perr, sizeof perr) != 0) {
		printf("FAIL %s: fd dims %s\n", op->name, e->fd_dims);
		return 1;
	}
	void *params = calloc(1, im->params_size);
	im->params_default(params, &d);
	struct align_tensor in[8], out[8];
	int fails = 0;
	if (run(op, params, &d, &m, in, out) != ALIGN_OK) {
		printf("FAIL %s: fd run failed\n", op->name);
		run_free(op, in, out);
		free(params);
		return 1;
	}
	struct ctx c = {&m, in, out, params, 0, -1, 0};
	ld *v[8] = {0};
	for (int k = 0; k < im->n_in; k++) {
		if (in[k].dtype == ALIGN_DT_I32)
			continue;
		int64_t n = align_tensor_numel(&in[k]);
		v[k] = malloc(sizeof(ld) * (size_t)(n ? n : 1));
		for (int64_t i = 0; i < n; i++)
			v[k][i] = ldi(&c, k, i);
	}
	ld worst = 0, h = 0x1p-14L, fdmax = 0;
	for (int f = 0; f < e->n_fd; f++) {
		int k = e->fd_in[f];
		int64_t n = align_tensor_numel(&in[k]);
		const struct align_tensor *g = &out[e->fd_out[f]];
		ld *fd = malloc(sizeof(ld) * (size_t)(n ? n : 1)), mx = 0;
		for (int64_t i = 0; i < n; i++) {
			ld x0 = v[k][i], sc = fabsl(x0) > 1 ? fabsl(x0) : 1;
			v[k][i] = x0 + h * sc;
			ld lp = e->fwd(&c, v);
			v[k][i] = x0 - h * sc;
			ld lm = e->fwd(&c, v);
			v[k][i] = x0;
			fd[i] = (lp - lm) / (2 * h * sc);
			mx = fabsl(fd[i]) > mx ? fabsl(fd[i]) : mx;
		}
		fdmax = mx > fdmax ? mx : fdmax;
		for (int64_t i = 0; i < n; i++) {
			ld got = ops_ld(g, i);
			ld tol = (g->dtype == ALIGN_DT_BF16 ? ulp_bf16(fd[i]) : 0) + 0x1p-20L * (fabsl(fd[i]) + 1) +
				 0x1p-16L * fabsl(fd[i]) + (ld)e->fd_rel * mx;
			ld r = fabsl(got - fd[i]) / tol;
			if (!(r <= 1)) {
				if (fails < 5)
					printf("FAIL %s fd: input %s element %" PRId64 ": op %La fd %La\n", op->name,
					       im->in[k].name, i, got, fd[i]);
				fails++;
			}
			worst = r > worst ? r : worst;
		}
		free(fd);
	}
	for (int k = 0; k < im->n_in; k++)
		free(v[k]);
	printf("%-14s finite differences (%s): worst error %.3Lf of the bound (largest |quotient| %.3Lg)%s\n", op->name,
	       e->fd_dims, worst, fdmax, fails ? "  FAIL" : "");
	if (!(fdmax > 0)) {
		printf("FAIL %s fd: every difference quotient is 0 (the shape tests nothing)\n", op->name);
		fails++;
	}
	run_free(op, in, out);
	free(params);
	return fails;
}

int main(void)
{
	int fails = 0;
	for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++) {
		fails += check_op(&refs[k]);
		fails += check_fd(&refs[k]);
	}
	printf("test-ops-ref-bwd3: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
