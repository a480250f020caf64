/* test-ops-ref2.c: the fp64 reference checks of test-ops-ref.c for router, mhc_pre and mhc_head.
 * Every result, under every combination of the switches the op reads (MATH_IMPL included) and the
 * three fill sets of test-ops.c (spec fills; EXTREME; constant with a large negative first input),
 * is compared with an fp64 (long double) evaluation of the same contract computed independently
 * here (operand roundings that are inputs of the contract - bf16/tf32 parameters - are applied
 * with the numerics.h rounding primitives; everything else is exact algebra), against the bound
 * the op's header states. Rows whose exact intermediates leave the binary32 range (a sum of
 * squares or a GEMM term above FLT_MAX, a score below FLT_MIN) are outside the bounds' domain:
 * they are counted and printed, not judged.
 * Router ids: the selected set must be a top-K of the fp64 selection scores up to the stated
 * relative tolerance (every admissible group choice is tried when group scores near-tie); rows
 * whose set differs from the exact fp64 top-K are counted as accepted near-ties.
 * The suite runs reduced dims (refs[] below); REF_DEFAULT_DIMS=1 runs the ops' default dims
 * (minutes), REF_VERBOSE=1 prints the modes of each worst element, REF_DEBUG=1 every new worst.
 * Exit status 0 = pass; prints the seed, op, modes and worst element on failure. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mhc_pre.h"
#include "ops.h"
#include "router.h"

#define SEED 0x0f64f64ull
#define NSETS 3
#define NOUT 4

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
	const struct align_tensor *in;
	const struct align_tensor *out;
	const void *params;
	ld worst[NOUT]; /* per output: max |err| / tol */
	int64_t worst_i[NOUT];
	int64_t skipped;   /* rows outside the bound's domain */
	int64_t near_ties; /* router rows whose set differs from the exact fp64 top-K, accepted */
};

static void judge(struct ctx *c, int o, int64_t i, ld got, ld ref, ld tol)
{
	ld err = fabsl(got - ref);
	if (isnan(got) || isnan(ref))
		err = isnan(got) && isnan(ref) ? 0 : INFINITY;
	ld r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
	if (r > c->worst[o]) {
		c->worst[o] = r;
		c->worst_i[o] = i;
		if (getenv("REF_DEBUG") && r > 1)
			printf("  out %d element %" PRId64 ": got %La ref %La tol %La\n", o, i, got, ref, tol);
	}
}

static ld ld_in(const struct ctx *c, int k, int64_t i)
{
	return (ld)ops_ld(&c->in[k], i);
}

static ld ld_out(const struct ctx *c, int k, int64_t i)
{
	return (ld)ops_ld(&c->out[k], i);
}

static ld sigmoidl(ld z)
{
	return 1.0L / (1.0L + expl(-z));
}

static ld softplusl(ld x)
{
	return x > 0 ? x + log1pl(expl(-x)) : log1pl(expl(x));
}

/* ---- router ---------------------------------------------------------------------------------- */

#define RT_TOL 0x1p-16L /* router.h: selection scores, relative */
#define RW_REL 0x1p-16L /* router.h: weights, relative */
#define RW_ABS 0x1p-40L /* router.h: weights, absolute */

/* how far `sel` (K ids) is from being a top-K of mb: max over e in sel, f not in sel of
 * (mb[f] - mb[e]) / (RT_TOL max(|mb[e]|, |mb[f]|)); <= 1 means valid */
static ld set_violation(const ld *mb, int64_t E, const int32_t *sel, int64_t K)
{
	ld v = 0;
	for (int64_t f = 0; f < E; f++) {
		int in = 0;
		for (int64_t j = 0; j < K; j++)
			in |= sel[j] == f;
		if (in)
			continue;
		for (int64_t j = 0; j < K; j++) {
			ld a = mb[sel[j]], b = mb[f];
			if (a == b || b < a)
				continue;
			ld tol = RT_TOL * fmaxl(fabsl(a), fabsl(b));
			ld r = isinf(a) || isinf(b) ? INFINITY : (tol > 0 ? (b - a) / tol : INFINITY);
			v = r > v ? r : v;
		}
	}
	return v;
}

/* exact top-K (ties: lower id) of mb, strict '>' like the contract */
static void topk_ld(const ld *mb, int64_t E, int64_t K, int32_t *sel)
{
	unsigned char taken[1024] = {0};
	for (int64_t j = 0; j < K; j++) {
		int64_t best = -1;
		for (int64_t e = 0; e < E; e++)
			if (!taken[e] && (best < 0 || mb[e] > mb[best]))
				best = e;
		taken[best] = 1;
		sel[j] = (int32_t)best;
	}
}

static int same_set(const int32_t *a, const int32_t *b, int64_t K)
{
	for (int64_t i = 0; i < K; i++) {
		int f = 0;
		for (int64_t j = 0; j < K; j++)
			f |= a[i] == b[j];
		if (!f)
			return 0;
	}
	return 1;
}

static void ref_router(struct ctx *c)
{
	const struct router_params *p = c->params;
	const struct align_modes *m = c->m;
	int64_t T = c->in[0].shape[0], D = c->in[0].shape[1], E = c->in[1].shape[0], K = c->in[4].shape[1];
	int gemm = m->v[MODE_ROUTER_GEMM];
	const float *w = c->in[1].data, *bias = c->in[2].data;
	const int32_t *ids = c->in[3].data, *tab = c->in[4].data, *oidx = c->out[0].data;
	ld *l = malloc(5 * (size_t)E * sizeof(ld)), *s = l + E, *b = s + E, *mb = b + E, *S = mb + E;
	for (int64_t t = 0; t < T; t++) {
		int dom = 1;
		for (int64_t e = 0; e < E; e++) {
			ld acc = 0, abs = 0;
			for (int64_t k = 0; k < D; k++) {
				float xv = ops_ld(&c->in[0], t * D + k), wv = w[e * D + k];
				if (gemm == 2) {
					xv = align_round_tf32(xv);
					wv = align_round_tf32(wv);
				} else if (gemm == 1) {
					wv = align_round_bf16(wv);
				}
				ld pr = (ld)xv * (ld)wv;
				acc += pr;
				abs += fabsl(pr);
			}
			l[e] = acc;
			S[e] = abs;
			dom &= abs < (ld)FLT_MAX;
			if (p->score != ROUTER_SCORE_SOFTMAX)
				dom &= acc > -80.0L; /* softplus / sigmoid below FLT_MIN */
		}
		if (p->score == ROUTER_SCORE_SOFTMAX) {
			ld mx = l[0], z = 0;
			for (int64_t e = 1; e < E; e++)
				mx = l[e] > mx ? l[e] : mx;
			for (int64_t e = 0; e < E; e++)
				z += expl(l[e] - mx);
			for (int64_t e = 0; e < E; e++)
				s[e] = expl(l[e] - mx) / z;
		} else {
			for (int64_t e = 0; e < E; e++) {
				if (p->score == ROUTER_SCORE_SIGMOID) {
					s[e] = sigmoidl(l[e]);
				} else {
					ld sp = softplusl(l[e]);
					if (m->v[MODE_ROUTER_SQRTSOFTPLUS_EPS] == ALIGN_ROUTER_SQRTSOFTPLUS_EPS_1E_20)
						sp += (ld)1e-20f;
					s[e] = sqrtl(sp);
				}
			}
		}
		if (!dom) {
			c->skipped++;
			continue;
		}
		const int32_t *sel = oidx + t * K;
		ld idv = 0; /* ids violation */
		if (p->hash) {
			for (int64_t j = 0; j < K; j++) {
				int32_t want = m->v[MODE_ROUTER_HASH_TABLE] == ALIGN_ROUTER_HASH_TABLE_TABLE
						       ? tab[ids[t] * K + j]
						       : (int32_t)((ids[t] + j) % E);
				if (m->v[MODE_ROUTER_TOPK_ORDER] == ALIGN_ROUTER_TOPK_ORDER_SORTED && sel[j] != want)
					idv = INFINITY;
			}
			if (m->v[MODE_ROUTER_TOPK_ORDER] ==
			    ALIGN_ROUTER_TOPK_ORDER_INDEX) { /* the same set, ascending */
				int32_t want[64];
				for (int64_t j = 0; j < K; j++)
					want[j] = m->v[MODE_ROUTER_HASH_TABLE] == ALIGN_ROUTER_HASH_TABLE_TABLE
							  ? tab[ids[t] * K + j]
							  : (int32_t)((ids[t] + j) % E);
				if (!same_set(sel, want, K))
					idv = INFINITY;
			}
		} else {
			for (int64_t e = 0; e < E; e++)
				b[e] = s[e] + (ld)bias[e];
			int G = p->n_groups > 1 ? p->n_groups : 1, kg = G > 1 ? p->topk_groups : 1;
			int64_t gs = E / G, per = K / kg > 0 ? K / kg : 1;
			ld gsc[64];
			for (int g = 0; g < G; g++) {
				int32_t top[64];
				topk_ld(b + g * gs, gs, per, top);
				gsc[g] = 0;
				for (int64_t j = 0; j < per; j++)
					gsc[g] += b[g * gs + top[j]];
			}
			/* every admissible kept-group subset: min kept score within tolerance of max dropped */
			ld best = INFINITY;
			int exact_match = 0;
			int32_t exact[64];
			for (unsigned mask = 0; mask < (1u << G); mask++) {
				if (__builtin_popcount(mask) != kg)
					continue;
				ld mn = INFINITY, mxo = -INFINITY;
				for (int g = 0; g < G; g++) {
					if (mask >> g & 1)
						mn = fminl(mn, gsc[g]);
					else
						mxo = fmaxl(mxo, gsc[g]);
				}
				if (G > 1 && mxo > mn && (mxo - mn) > RT_TOL * fmaxl(fabsl(mn), fabsl(mxo)))
					continue;
				for (int64_t e = 0; e < E; e++) {
					int kept = G == 1 || (mask >> (e / gs) & 1);
					mb[e] = kept ? b[e]
						: m->v[MODE_ROUTER_GROUP_MASK] == ALIGN_ROUTER_GROUP_MASK_NEGINF
							? -INFINITY
							: b[e] * 0.0L;
				}
				ld v = set_violation(mb, E, sel, K);
				if (m->v[MODE_ROUTER_TOPK_ORDER] == ALIGN_ROUTER_TOPK_ORDER_SORTED)
					for (int64_t j = 0; j + 1 < K; j++) {
						ld a = mb[sel[j]], bb = mb[sel[j + 1]];
						if (bb > a) {
							ld tol = RT_TOL * fmaxl(fabsl(a), fabsl(bb));
							ld r = isinf(a) || isinf(bb) || tol == 0 ? INFINITY
												 : (bb - a) / tol;
							v = r > v ? r : v;
						}
					}
				best = v < best ? v : best;
				/* the exact fp64 choice: the top kg groups (ties lower id) */
				int32_t kgsel[64];
				topk_ld(gsc, G, kg, kgsel);
				unsigned emask = 0;
				for (int j = 0; j < kg; j++)
					emask |= 1u << kgsel[j];
				if (mask == emask) {
					topk_ld(mb, E, K, exact);
					exact_match = same_set(sel, exact, K);
				}
			}
			idv = best;
			if (!exact_match && best <= 1)
				c->near_ties++;
		}
		if (m->v[MODE_ROUTER_TOPK_ORDER] == ALIGN_ROUTER_TOPK_ORDER_INDEX)
			for (int64_t j = 0; j + 1 < K; j++)
				if (sel[j] >= sel[j + 1])
					idv = INFINITY;
		if (idv > c->worst[0]) {
			c->worst[0] = idv;
			c->worst_i[0] = t;
		}
		/* weights on the op's set */
		ld sum = 0;
		for (int64_t j = 0; j < K; j++)
			sum += s[sel[j]];
		if (m->v[MODE_ROUTER_NORM_EPS] == ALIGN_ROUTER_NORM_EPS_1E_20)
			sum += (ld)1e-20f;
		for (int64_t j = 0; j < K; j++) {
			ld ref = p->score == ROUTER_SCORE_SOFTMAX ? s[sel[j]] : s[sel[j]] / sum;
			ref *= (ld)p->route_scale;
			judge(c, 1, t * K + j, ld_out(c, 1, t * K + j), ref, RW_REL * fabsl(ref) + RW_ABS);
		}
	}
	free(l);
}

/* ---- mHC ------------------------------------------------------------------------------------- */

#define MP_ABS 0x1p-18L /* mhc_pre.h: pre, post absolute; y: times sum_j |x_j| */
#define MC_ABS 0x1p-14L /* mhc_pre.h: comb absolute */

struct mhc_tok {
	ld x[8 * 4096];
	ld h[(2 + MHC_MAX_N) * MHC_MAX_N];
	int dom;
};

/* rs, mix and h for token t of rows R of fn (fp64 of mhc_pre.h steps 0-3) */
static void mhc_h(const struct ctx *c, int64_t t, int64_t R, int64_t N, struct mhc_tok *k)
{
	const struct mhc_params *p = c->params;
	int64_t D = c->in[0].shape[2], K = N * D;
	int pb = c->m->v[MODE_MHC_PARAM] == ALIGN_MHC_PARAM_BF16,
	    tf = c->m->v[MODE_MHC_PROJ_GEMM] == ALIGN_MHC_PROJ_GEMM_TF32;
	const float *fn = c->in[1].data, *base = c->in[2].data, *scale = c->in[3].data;
	ld ss = 0;
	for (int64_t i = 0; i < K; i++) {
		k->x[i] = ld_in(c, 0, t * K + i);
		ss += k->x[i] * k->x[i];
	}
	k->dom = ss < (ld)FLT_MAX && ss / K > (ld)FLT_MIN;
	ld eps = (ld)p->norm_eps;
	ld rs = c->m->v[MODE_MHC_RMS_FORM] == ALIGN_MHC_RMS_FORM_INV_RMS ? 1.0L / (sqrtl(ss / K) + eps)
									 : 1.0L / sqrtl(ss / K + eps);
	for (int64_t r = 0; r < R; r++) {
		ld mix = 0;
		for (int64_t i = 0; i < K; i++) {
			float f = fn[r * K + i], xv = (float)k->x[i];
			if (pb)
				f = align_round_bf16(f);
			if (tf) {
				f = align_round_tf32(f);
				xv = align_round_tf32(xv);
			}
			mix += (ld)xv * (ld)f;
		}
		int cl = r < N ? 0 : r < 2 * N ? 1 : 2;
		float sc = R == N ? scale[0] : scale[cl], bs = base[r];
		if (pb) {
			sc = align_round_bf16(sc);
			bs = align_round_bf16(bs);
		}
		k->h[r] = mix * rs * (ld)sc + (ld)bs;
	}
}

/* y_d = sum_j pre'_j x_j: reference and tolerance (1 bf16 ulp + MP_ABS sum|x_j|; with MHC_COEF=bf16
 * a coefficient whose fp64 value lies within MP_ABS of a bf16 rounding boundary may round either
 * way: the difference of the two roundings times |x_j| is added) */
static void mhc_y(struct ctx *c, int o, int64_t t, int64_t N, const ld *pre, const struct mhc_tok *k)
{
	int64_t D = c->in[0].shape[2];
	int cb = c->m->v[MODE_MHC_COEF] == ALIGN_MHC_COEF_BF16;
	ld coef[MHC_MAX_N], amb[MHC_MAX_N];
	for (int64_t j = 0; j < N; j++) {
		coef[j] = pre[j];
		amb[j] = 0;
		if (cb) {
			float lo = align_round_bf16((float)(pre[j] - MP_ABS)),
			      hi = align_round_bf16((float)(pre[j] + MP_ABS));
			coef[j] = (ld)align_round_bf16((float)pre[j]);
			amb[j] = (ld)hi - (ld)lo;
		}
	}
	for (int64_t d = 0; d < D; d++) {
		ld y = 0, sx = 0, a = 0;
		for (int64_t j = 0; j < N; j++) {
			y += coef[j] * k->x[j * D + d];
			sx += fabsl(k->x[j * D + d]);
			a += amb[j] * fabsl(k->x[j * D + d]);
		}
		judge(c, o, t * D + d, ld_out(c, o, t * D + d), y, ulp_bf16(y) + MP_ABS * sx + a + 0x1p-133L);
	}
}

static void sinkhorn_ld(const struct mhc_params *p, int contract, ld *M, int n)
{
	ld eps = (ld)p->hc_eps;
	for (int j = 0; j < n; j++) {
		ld mx = M[j * n];
		for (int k = 1; k < n; k++)
			mx = fmaxl(mx, M[j * n + k]);
		for (int k = 0; k < n; k++)
			M[j * n + k] = expl(M[j * n + k] - mx);
	}
	int rounds = p->sinkhorn_iters, first = contract == 0;
	for (int it = 0; it < rounds; it++) {
		for (int j = 0; j < n; j++) {
			ld s = 0;
			for (int k = 0; k < n; k++)
				s += M[j * n + k];
			ld d = first ? s : contract == 1 ? fmaxl(s, eps) : s + eps;
			for (int k = 0; k < n; k++)
				M[j * n + k] = first ? M[j * n + k] / d + eps : M[j * n + k] / d;
		}
		first = 0;
		for (int k = 0; k < n; k++) {
			ld s = 0;
			for (int j = 0; j < n; j++)
				s += M[j * n + k];
			ld d = contract == 1 ? fmaxl(s, eps) : s + eps;
			for (int j = 0; j < n; j++)
				M[j * n + k] /= d;
		}
	}
}

static struct mhc_tok tok;

static void ref_mhc_pre(struct ctx *c)
{
	const struct mhc_params *p = c->params;
	int64_t T = c->in[0].shape[0], N = c->in[0].shape[1], R = (2 + N) * N;
	int con = c->m->v[MODE_MHC_SINKHORN];
	for (int64_t t = 0; t < T; t++) {
		mhc_h(c, t, R, N, &tok);
		if (!tok.dom) {
			c->skipped++;
			continue;
		}
		ld pre[MHC_MAX_N], M[MHC_MAX_N * MHC_MAX_N];
		for (int64_t i = 0; i < N; i++) {
			pre[i] = sigmoidl(tok.h[i]) +
				 (c->m->v[MODE_MHC_HPRE_EPS] == ALIGN_MHC_HPRE_EPS_ON ? (ld)p->hc_eps : 0);
			ld so = sigmoidl(tok.h[N + i]);
			ld post = c->m->v[MODE_MHC_HPOST_EPS] == ALIGN_MHC_HPOST_EPS_OFF ? 2 * so
											 : 2 * (so + (ld)p->hc_eps);
			judge(c, 1, t * N + i, ld_out(c, 1, t * N + i), pre[i], MP_ABS);
			judge(c, 2, t * N + i, ld_out(c, 2, t * N + i), post, MP_ABS);
		}
		for (int64_t i = 0; i < N * N; i++)
			M[i] = tok.h[2 * N + i];
		sinkhorn_ld(p, con, M, (int)N);
		for (int64_t i = 0; i < N * N; i++)
			judge(c, 3, t * N * N + i, ld_out(c, 3, t * N * N + i), M[i], MC_ABS);
		mhc_y(c, 0, t, N, pre, &tok);
	}
}

static void ref_mhc_head(struct ctx *c)
{
	const struct mhc_params *p = c->params;
	int64_t T = c->in[0].shape[0], N = c->in[0].shape[1];
	for (int64_t t = 0; t < T; t++) {
		mhc_h(c, t, N, N, &tok);
		if (!tok.dom) {
			c->skipped++;
			continue;
		}
		ld pre[MHC_MAX_N];
		for (int64_t i = 0; i < N; i++)
			pre[i] = sigmoidl(tok.h[i]) + (ld)p->hc_eps;
		mhc_y(c, 0, t, N, pre, &tok);
	}
}

/* ---- driver ---------------------------------------------------------------------------------- */

struct ref_entry {
	const char *op;
	const char *dims; /* smaller than the op's defaults: every mode combination x 3 fill sets */
	void (*fn)(struct ctx *);
};

static const struct ref_entry refs[] = {
	{"router", "T=8,D=256,E=256,K=6,V=1024", ref_router},
	{"mhc_pre", "T=4,N=4,D=256", ref_mhc_pre},
	{"mhc_head", "T=4,N=4,D=256", ref_mhc_head},
};

static int fill_inputs(const struct align_op *op, int set, struct align_tensor *in)
{
	for (int i = 0; i < op->impl->n_in; i++) {
		struct align_fill f = op->impl->in[i].fill;
		if (in[i].dtype != ALIGN_DT_I32 && set == 1 && f.kind == ALIGN_FILL_SPECIAL)
			f.kind = ALIGN_FILL_EXTREME;
		if (in[i].dtype != ALIGN_DT_I32 && set == 2) {
			f.kind = ALIGN_FILL_CONST;
			f.scale = i == 0 ? -100.0f * f.scale : f.scale;
		}
		if (ops_fill_tensor(&f, op->name, &in[i], SEED, 0))
			return -1;
	}
	return 0;
}

static int check_op(const struct ref_entry *re)
{
	const struct align_op *op = ops_find(re->op);
	const struct align_op_impl *im = op->impl;
	int ids[16], nm = 0, fails = 0, combos = 1;
	for (const int *p = im->modes; *p >= 0; p++) {
		ids[nm++] = *p;
		combos *= modes_value_count(*p);
	}
	struct align_dims d;
	char err[128];
	if (getenv("REF_DEFAULT_DIMS") ? ops_dims_default(op, &d) : ops_dims_parse(re->dims, &d, err, sizeof err))
		return printf("FAIL %s: dims %s\n", re->op, err), 1;
	void *params = calloc(1, im->params_size);
	for (int var = 0; im->params_variant(params, &d, var); var++)
		for (int set = 0; set < NSETS; set++) {
			ld worst[NOUT] = {0};
			int64_t skipped = 0, ties = 0, runs = 0;
			char wm[NOUT][2048] = {{0}};
			for (int cmb = 0; cmb < combos; cmb++) {
				struct align_modes m;
				modes_init_default(&m);
				for (int q = 0, rest = cmb; q < nm; q++) {
					m.v[ids[q]] = rest % modes_value_count(ids[q]);
					rest /= modes_value_count(ids[q]);
				}
				if (modes_gpu_only_in(&m, NULL) >= 0 || ops_refused_in(op, &m))
					continue; /* GPU-only values: the C twin refuses them */
				struct align_tensor in[8], out[8];
				for (int i = 0; i < im->n_in; i++)
					ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
				fill_inputs(op, set, in);
				for (int i = 0; i < im->n_out; i++)
					ops_tensor_alloc(op, 1, i, &d, &m, &out[i]);
				struct ctx c = {&m, in, out, params, {0}, {0}, 0, 0};
				if (im->fwd_cpu(params, &m, in, im->n_in, out, im->n_out) != ALIGN_OK) {
					printf("FAIL %s: run failed\n", op->name);
					fails++;
				} else {
					re->fn(&c);
					runs++;
					skipped += c.skipped;
					ties += c.near_ties;
					for (int o = 0; o < im->n_out; o++) {
						if (c.worst[o] > worst[o]) {
							worst[o] = c.worst[o];
							modes_format(&m, wm[o], sizeof wm[o]);
						}
						if (c.worst[o] > 1) {
							char buf[2048];
							modes_format(&m, buf, sizeof buf);
							printf("FAIL %s variant %d fill %d out %s element %" PRId64
							       ": error %.3Lg x bound (seed 0x%llx) modes %s\n",
							       op->name, var, set, im->out[o].name, c.worst_i[o],
							       c.worst[o], (unsigned long long)SEED, buf);
							fails++;
						}
					}
				}
				for (int i = 0; i < im->n_in; i++)
					ops_tensor_free(&in[i]);
				for (int i = 0; i < im->n_out; i++)
					ops_tensor_free(&out[i]);
			}
			printf("%-9s variant %d fill %d: %4" PRId64 " mode combinations, %" PRId64
			       " rows outside the domain, %" PRId64 " near-tie rows; worst error / bound:",
			       op->name, var, set, runs, skipped, ties);
			for (int o = 0; o < im->n_out; o++)
				printf(" %s %.3Lf", im->out[o].name, worst[o]);
			printf("\n");
			if (getenv("REF_VERBOSE"))
				for (int o = 0; o < im->n_out; o++)
					printf("    %s worst at %s\n", im->out[o].name, wm[o]);
		}
	free(params);
	return fails;
}

int main(void)
{
	int fails = 0;
	for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
		fails += check_op(&refs[k]);
	printf("test-ops-ref2: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
