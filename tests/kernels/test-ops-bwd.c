/* test-ops-bwd.c: the backward ops (issue 18) of this file's list against references computed here:
 *   - fp64 (long double) reference of the same contract, every combination of the switches the op reads
 *     (GPU-only values left out), every parameter variant, SPECIAL and EXTREME-free fills: the error stays
 *     within the bound the op's header states;
 *   - finite differences: central differences of the fp64 forward (the forward op's math, no rounding)
 *     on a small shape away from the clamp limit agree with the op's gradients;
 *   - determinism (two runs, same bytes) and batch invariance (the first rows of a 2T run equal a T run);
 *   - swiglu_bwd's dp orders (swb_sum) equal reduce.h's orders bit for bit;
 *   - moe_combine_bwd: the same checks (finite differences of the linear combine for d_eo, d_w, d_shared);
 *     the GPU-only non-deterministic fan-in order is refused by the C twin and held by no profile;
 *   - router_bwd: fp64 from the forward's selection and logits, finite differences of the fp64 gate (the
 *     selection held fixed) for dx and dw, determinism, batch invariance of dl and dx.
 * Exit status 0 = pass; prints the op, modes and worst element on failure. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "reduce.h"
#include "moe_combine_bwd.h"
#include "router_bwd.h"
#include "swiglu_bwd.h"

#define SEED 0xb4dull
#define U 0x1p-24L
#define UB 0x1p-8L

typedef long double ld;

static int fails;

static ld sigl(ld x)
{
	return 1.0L / (1.0L + expl(-x));
}

/* worst |got - ref| / tol */
static ld ratio(ld got, ld ref, ld tol)
{
	if (isnan(got) || isnan(ref))
		return isnan(got) && isnan(ref) ? 0 : INFINITY;
	ld err = fabsl(got - ref);
	return tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
}

/* fp64 reference of swiglu_bwd.h steps 1-5 for every element; returns max error / bound */
static ld ref_swiglu_bwd(const struct swiglu_bwd_cfg *c, const struct align_tensor *in, const struct align_tensor *out,
			 int64_t *worst_at)
{
	ld worst = 0;
	const float *p = in[2].data;
	for (int64_t t = 0; t < c->T; t++) {
		ld q = c->scale_bf16 ? (ld)align_round_bf16(p[t]) : (ld)p[t], dp = 0, S = 0;
		for (int64_t f = 0; f < c->F; f++) {
			int64_t i = t * c->F + f;
			ld g = ops_ld(&in[0], i), u = ops_ld(&in[1], i), x = ops_ld(&in[3], i);
			int mg = 1, mu = 1;
			if (c->clamp) {
				ld L = c->L;
				mg = c->strict ? g < L : g <= L;
				mu = c->strict ? (-L < u && u < L) : (-L <= u && u <= L);
				u = u < -L ? -L : (u > L ? L : u);
				g = g > L ? L : g;
			}
			ld sg = sigl(g), s = g * sg, d = c->after ? x : x * q;
			ld dsilu = sg * (1 + g * (1 - sg));
			ld rdg = mg ? d * dsilu * u : 0, rdu = mu ? d * s : 0;
			ld tdg = UB * fabsl(rdg) + 16 * U * fabsl(d * u) * sg * (1 + fabsl(g) * (1 - sg));
			ld tdu = UB * fabsl(rdu) + 8 * U * fabsl(d * s);
			ld r1 = ratio(ops_ld(&out[0], i), rdg, tdg), r2 = ratio(ops_ld(&out[1], i), rdu, tdu);
			if (r1 > worst || r2 > worst) {
				worst = r1 > r2 ? r1 : r2;
				*worst_at = i;
			}
			ld a = s * u;
			if (c->dbl)
				a = align_round_bf16((float)a);
			dp += x * a;
			S += fabsl(x * a);
		}
		ld tol = (c->F + 8) * U * S + (c->dbl ? 2 * UB * S : 0);
		ld r = ratio(((const float *)out[2].data)[t], c->after ? 0 : dp, tol);
		if (r > worst) {
			worst = r;
			*worst_at = -1 - t;
		}
	}
	return worst;
}

struct run {
	struct align_tensor in[8], out[8];
};

static void run_alloc(const struct align_op *op, const struct align_dims *d, const struct align_modes *m, struct run *r,
		      const struct align_fill *fill, uint64_t seed)
{
	const struct align_op_impl *im = op->impl;
	for (int i = 0; i < im->n_in; i++) {
		ops_tensor_alloc(op, 0, i, d, m, &r->in[i]);
		if (fill && im->in[i].fill.kind == ALIGN_FILL_SPECIAL)
			ops_fill_tensor(fill, op->name, &r->in[i], seed, 0);
		else
			ops_fill_input_dims(op, i, &r->in[i], d, seed, 0);
	}
	for (int i = 0; i < im->n_out; i++)
		ops_tensor_alloc(op, 1, i, d, m, &r->out[i]);
}

static void run_free(const struct align_op *op, struct run *r)
{
	for (int i = 0; i < op->impl->n_in; i++)
		ops_tensor_free(&r->in[i]);
	for (int i = 0; i < op->impl->n_out; i++)
		ops_tensor_free(&r->out[i]);
}

static size_t nbytes(const struct align_tensor *t)
{
	return (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
}

/* every combination of the op's CPU switch values x variants x fills: bound, determinism, batch invariance */
static void check_swiglu_bwd(void)
{
	const struct align_op *op = ops_find("swiglu_bwd");
	const struct align_op_impl *im = op->impl;
	int ids[16], nm = 0, combos = 1, runs = 0;
	for (const int *p = im->modes; *p >= 0; p++) {
		ids[nm++] = *p;
		combos *= modes_value_count(*p);
	}
	struct align_dims d;
	ops_dims_parse("T=6,F=160", &d, NULL, 0);
	struct align_fill fills[2] = {{ALIGN_FILL_SPECIAL, 4.0f, 10.0f, 0}, {ALIGN_FILL_NORMAL, 12.0f, 0, 0}};
	struct swiglu_params prm;
	ld worst = 0;
	for (int var = 0; im->params_variant(&prm, &d, var); var++)
		for (int fi = 0; fi < 2; fi++)
			for (int cmb = 0; cmb < combos; cmb++) {
				struct align_modes m;
				modes_init_default(&m);
				for (int q = 0, rest = cmb; q < nm; q++) {
					m.v[ids[q]] = rest % modes_value_count(ids[q]);
					rest /= modes_value_count(ids[q]);
				}
				if (modes_refused_on(&m, im->modes, ALIGN_DEVICE_CPU) >= 0)
					continue;
				struct run a, b, big;
				struct align_dims d2 = d;
				d2.v[ALIGN_DIM_T] *= 2;
				run_alloc(op, &d, &m, &a, &fills[fi], SEED + var);
				run_alloc(op, &d, &m, &b, &fills[fi], SEED + var);
				run_alloc(op, &d2, &m, &big, &fills[fi], SEED + var);
				/* the big run's first T rows are a's inputs */
				for (int i = 0; i < im->n_in; i++)
					memcpy(big.in[i].data, a.in[i].data, nbytes(&a.in[i]));
				char buf[2048];
				modes_format(&m, buf, sizeof buf);
				if (im->fwd_cpu(&prm, &m, a.in, 4, a.out, 3) ||
				    im->fwd_cpu(&prm, &m, b.in, 4, b.out, 3) ||
				    im->fwd_cpu(&prm, &m, big.in, 4, big.out, 3)) {
					printf("FAIL swiglu_bwd: run failed, modes %s\n", buf);
					fails++;
				} else {
					struct swiglu_bwd_cfg c;
					swiglu_bwd_cfg_init(&c, &prm, &m, a.in, 4, a.out, 3, ALIGN_DEVICE_CPU, NULL);
					int64_t at = 0;
					ld r = ref_swiglu_bwd(&c, a.in, a.out, &at);
					runs++;
					worst = r > worst ? r : worst;
					if (r > 1) {
						printf("FAIL swiglu_bwd variant %d fill %d element %" PRId64
						       " (negative: dp row): error %.3Lg x bound, modes %s\n",
						       var, fi, at, r, buf);
						fails++;
					}
					for (int i = 0; i < 3; i++) {
						if (memcmp(a.out[i].data, b.out[i].data, nbytes(&a.out[i]))) {
							printf("FAIL swiglu_bwd: output %s not deterministic, modes "
							       "%s\n",
							       im->out[i].name, buf);
							fails++;
						}
						if (memcmp(a.out[i].data, big.out[i].data, nbytes(&a.out[i]))) {
							printf("FAIL swiglu_bwd: output %s not batch invariant, modes "
							       "%s\n",
							       im->out[i].name, buf);
							fails++;
						}
					}
				}
				run_free(op, &a);
				run_free(op, &b);
				run_free(op, &big);
			}
	printf("swiglu_bwd   %d runs (mode combinations x variants x fills): worst error %.3Lf of the stated bound, "
	       "deterministic, batch invariant%s\n",
	       runs, worst, fails ? "  FAIL" : "");
}

/* fp64 forward of swiglu (swiglu.h, no rounding): L = sum da * p * silu(min(g, 10)) * clamp(u) */
static ld fwd_loss(const ld *g, const ld *u, const ld *p, const ld *da, int T, int F)
{
	ld L = 0;
	for (int t = 0; t < T; t++)
		for (int f = 0; f < F; f++) {
			int i = t * F + f;
			ld gg = g[i] > 10 ? 10 : g[i], uu = u[i] < -10 ? -10 : (u[i] > 10 ? 10 : u[i]);
			L += da[i] * p[t] * gg * sigl(gg) * uu;
		}
	return L;
}

/* central differences (h = 2^-12) of the fp64 forward against the op's dg, du, dp (default modes, T=3,
 * F=16, inputs away from the clamp limit): |op - fd| <= 2^-7 |fd| + 2^-12 (bf16 store + O(h^2)) */
static void check_fd(void)
{
	const struct align_op *op = ops_find("swiglu_bwd");
	enum { T = 3, F = 16, N = T * F };
	struct align_dims d;
	ops_dims_parse("T=3,F=16", &d, NULL, 0);
	struct align_modes m;
	modes_init_default(&m);
	struct run r;
	run_alloc(op, &d, &m, &r, NULL, SEED);
	ld g[N], u[N], p[T], da[N];
	uint64_t st = 12345;
	for (int i = 0; i < N; i++) { /* exact bf16 values in (-4, 4) */
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		g[i] = align_round_bf16((float)((int)(st >> 40) % 4000) / 1000.0f);
		u[i] = align_round_bf16((float)((int)(st >> 20 & 0xfff) - 2048) / 600.0f);
		da[i] = align_round_bf16((float)((int)(st >> 8 & 0xff) - 128) / 64.0f);
		((align_bf16 *)r.in[0].data)[i] = align_f32_to_bf16((float)g[i]);
		((align_bf16 *)r.in[1].data)[i] = align_f32_to_bf16((float)u[i]);
		((align_bf16 *)r.in[3].data)[i] = align_f32_to_bf16((float)da[i]);
	}
	for (int t = 0; t < T; t++)
		p[t] = ((float *)r.in[2].data)[t] = 0.25f + 0.25f * (float)t;
	struct swiglu_params prm = {10.0f, 0};
	if (op->impl->fwd_cpu(&prm, &m, r.in, 4, r.out, 3)) {
		printf("FAIL swiglu_bwd finite differences: run failed\n");
		fails++;
		run_free(op, &r);
		return;
	}
	const ld h = 0x1p-12L;
	ld worst = 0;
	for (int k = 0; k < 2 * N + T; k++) {
		ld *v = k < N ? &g[k] : k < 2 * N ? &u[k - N] : &p[k - 2 * N];
		ld keep = *v;
		*v = keep + h;
		ld lp = fwd_loss(g, u, p, da, T, F);
		*v = keep - h;
		ld lm = fwd_loss(g, u, p, da, T, F);
		*v = keep;
		ld fd = (lp - lm) / (2 * h);
		ld got = k < N	     ? ops_ld(&r.out[0], k)
			 : k < 2 * N ? ops_ld(&r.out[1], k - N)
				     : ops_ld(&r.out[2], k - 2 * N);
		ld q = ratio(got, fd, 0x1p-7L * fabsl(fd) + 0x1p-12L);
		worst = q > worst ? q : worst;
		if (q > 1) {
			printf("FAIL swiglu_bwd finite difference: gradient %d: op %.9Lg, central difference %.9Lg\n",
			       k, got, fd);
			fails++;
		}
	}
	printf("swiglu_bwd   finite differences (%d gradients): worst %.3Lf of the bound\n", 2 * N + T, worst);
	run_free(op, &r);
}

/* swb_sum's three orders against reduce.h's, bit for bit, on random and special values */
static void check_sums(void)
{
	float x[700];
	uint64_t st = 99;
	int bad = 0;
	for (int n = 1; n <= 700; n += (n < 70 ? 1 : 37)) {
		for (int i = 0; i < n; i++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			x[i] = (float)((int64_t)(st >> 33) - (1ll << 30)) * 0x1p-20f * (i % 7 == 0 ? 1e6f : 1.0f);
		}
		float a[3] = {swb_sum(SWB_SUM_SEQ, x, n), swb_sum(SWB_SUM_PAIRWISE, x, n),
			      swb_sum(SWB_SUM_WARP32, x, n)};
		float b[3] = {align_reduce_seq(x, n, 1, 0), align_reduce_pairwise(x, n, 1, 0),
			      align_reduce_warp32(x, n, 1, 0)};
		bad += memcmp(a, b, sizeof a) != 0;
	}
	if (bad) {
		printf("FAIL swb_sum differs from reduce.h in %d lengths\n", bad);
		fails++;
	} else {
		printf("swb_sum      seq, pairwise, warp32 equal to reduce.h's orders bit for bit\n");
	}
}

/* fp64 reference of moe_combine_bwd.h; returns max error / bound */
static ld ref_moe_combine_bwd(const struct moe_combine_bwd_cfg *c, const struct align_tensor *in,
			      const struct align_tensor *out, int64_t *worst_at)
{
	const int64_t T = c->T, K = c->K, D = c->D;
	const float *w = in[2].data, *dw = out[1].data;
	ld worst = 0, r;
#define JUDGE(got, ref, tol, at)                                                                                       \
	do {                                                                                                           \
		r = ratio(got, ref, tol);                                                                              \
		if (r > worst) {                                                                                       \
			worst = r;                                                                                     \
			*worst_at = at;                                                                                \
		}                                                                                                      \
	} while (0)
	for (int64_t t = 0; t < T; t++) {
		for (int64_t s = 0; s < K; s++) {
			ld acc = 0, S = 0;
			for (int64_t d = 0; d < D; d++) {
				ld x = ops_ld(&in[4], t * D + d), e = ops_ld(&in[0], (t * K + s) * D + d);
				ld ref = c->after ? x * w[t * K + s] : x;
				JUDGE(ops_ld(&out[0], (t * K + s) * D + d), ref, (UB + 4 * U) * fabsl(ref),
				      (t * K + s) * D + d);
				acc += x * e;
				S += fabsl(x * e);
			}
			JUDGE(dw[t * K + s], c->after ? acc : 0, (D + 2) * U * S, -1 - (t * K + s));
		}
		for (int64_t d = 0; d < D; d++) {
			ld x = ops_ld(&in[4], t * D + d), acc = ops_ld(&in[6], t * D + d), S = fabsl(acc);
			for (int64_t s = 0; s < K; s++) {
				ld v = ops_ld(&in[5], (t * K + s) * D + d);
				acc += v;
				S += fabsl(v);
			}
			JUDGE(ops_ld(&out[2], t * D + d), x, 0, t * D + d);
			JUDGE(ops_ld(&out[3], t * D + d), acc, UB * fabsl(acc) + (K + 2) * (c->bf16 ? UB : U) * S,
			      t * D + d);
		}
	}
#undef JUDGE
	return worst;
}

/* every CPU combination x fills: bound, determinism, batch invariance; slot and expert orders differ */
static void check_moe_combine_bwd(void)
{
	const struct align_op *op = ops_find("moe_combine_bwd");
	const struct align_op_impl *im = op->impl;
	struct align_dims d;
	ops_dims_parse("T=8,K=6,D=96,E=16", &d, NULL, 0);
	struct align_fill fills[2] = {{ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, {ALIGN_FILL_NORMAL, 1000.0f, 0, 0}};
	struct moe_combine_params prm = {0};
	ld worst = 0;
	int runs = 0, refused = 0;
	for (int fi = 0; fi < 2; fi++)
		for (int pv = 0; pv < ALIGN_SWIGLU_PROBS__COUNT; pv++)
			for (int k = 0; k < 2 * ALIGN_MOE_COMBINE_BWD_ORDER__COUNT; k++) {
				int ov = k / 2;
				struct align_modes m;
				modes_init_default(&m);
				m.v[MODE_SWIGLU_PROBS] = pv;
				m.v[MODE_MOE_COMBINE_ACC] =
					k % 2 ? ALIGN_MOE_COMBINE_ACC_BF16 : ALIGN_MOE_COMBINE_ACC_FP32;
				m.v[MODE_MOE_COMBINE_BWD_ORDER] = ov;
				struct run a, b, big;
				struct align_dims d2 = d;
				d2.v[ALIGN_DIM_T] *= 2;
				run_alloc(op, &d, &m, &a, &fills[fi], SEED);
				char buf[2048];
				modes_format(&m, buf, sizeof buf);
				if (ov == ALIGN_MOE_COMBINE_BWD_ORDER_ATOMIC) { /* GPU only, non-deterministic */
					struct moe_combine_bwd_cfg c;
					struct align_err err = {0};
					int rc = moe_combine_bwd_cfg_init(&c, &prm, &m, a.in, 7, a.out, 4,
									  ALIGN_DEVICE_CPU, &err);
					int rc2 = ops_fwd_cpu(op, &prm, &m, a.in, 7, a.out, 4);
					if (rc != ALIGN_ERR_UNSUPPORTED || !strstr(err.msg, "non-deterministic") ||
					    rc2 != ALIGN_ERR_UNSUPPORTED) {
						printf("FAIL moe_combine_bwd: atomic on the CPU gave %d / %d (%s)\n",
						       rc, rc2, err.msg);
						fails++;
					}
					refused++;
					run_free(op, &a);
					continue;
				}
				run_alloc(op, &d, &m, &b, &fills[fi], SEED);
				run_alloc(op, &d2, &m, &big, &fills[fi], SEED);
				for (int i = 0; i < im->n_in; i++)
					memcpy(big.in[i].data, a.in[i].data, nbytes(&a.in[i]));
				if (im->fwd_cpu(&prm, &m, a.in, 7, a.out, 4) ||
				    im->fwd_cpu(&prm, &m, b.in, 7, b.out, 4) ||
				    im->fwd_cpu(&prm, &m, big.in, 7, big.out, 4)) {
					printf("FAIL moe_combine_bwd: run failed, modes %s\n", buf);
					fails++;
				} else {
					struct moe_combine_bwd_cfg c;
					moe_combine_bwd_cfg_init(&c, &prm, &m, a.in, 7, a.out, 4, ALIGN_DEVICE_CPU,
								 NULL);
					int64_t at = 0;
					ld r = ref_moe_combine_bwd(&c, a.in, a.out, &at);
					runs++;
					worst = r > worst ? r : worst;
					if (r > 1) {
						printf("FAIL moe_combine_bwd fill %d element %" PRId64
						       ": error %.3Lg x bound, modes %s\n",
						       fi, at, r, buf);
						fails++;
					}
					for (int i = 0; i < 4; i++)
						if (memcmp(a.out[i].data, b.out[i].data, nbytes(&a.out[i])) ||
						    memcmp(a.out[i].data, big.out[i].data, nbytes(&a.out[i]))) {
							printf("FAIL moe_combine_bwd: output %s not deterministic or "
							       "not batch "
							       "invariant, modes %s\n",
							       im->out[i].name, buf);
							fails++;
						}
				}
				run_free(op, &a);
				run_free(op, &b);
				run_free(op, &big);
			}
	/* no profile holds a non-deterministic value */
	for (const char *const *p = modes_profiles(); *p; p++) {
		struct align_modes m;
		modes_init_default(&m);
		modes_apply_profile(&m, *p, NULL, 0);
		int id = modes_nondet_in(&m, NULL);
		if (id >= 0) {
			printf("FAIL profile %s holds the non-deterministic %s\n", *p, modes_info(id)->env);
			fails++;
		}
	}
	printf("moe_combine_bwd %d runs: worst error %.3Lf of the stated bound, deterministic, batch invariant; "
	       "atomic refused on the CPU %d times, in no profile\n",
	       runs, worst, refused);
}

/* central differences of the fp64 combine (after_w2: y = sum_s eo_s w_s + shared; L = sum dy y) against
 * d_eo, d_w, d_shared (exact-ish: the forward is linear, so only the op's roundings differ) */
static void check_moe_fd(void)
{
	const struct align_op *op = ops_find("moe_combine_bwd");
	struct align_dims d;
	ops_dims_parse("T=2,K=3,D=8,E=8", &d, NULL, 0);
	struct align_modes m;
	modes_init_default(&m);
	m.v[MODE_SWIGLU_PROBS] = ALIGN_SWIGLU_PROBS_AFTER_W2;
	struct run r;
	run_alloc(op, &d, &m, &r, NULL, SEED);
	struct moe_combine_params prm = {0};
	if (op->impl->fwd_cpu(&prm, &m, r.in, 7, r.out, 4)) {
		printf("FAIL moe_combine_bwd finite differences: run failed\n");
		fails++;
		run_free(op, &r);
		return;
	}
	enum { T = 2, K = 3, D = 8 };
	ld eo[T * K * D], w[T * K], sh[T * D], dy[T * D];
	for (int i = 0; i < T * K * D; i++)
		eo[i] = ops_ld(&r.in[0], i);
	for (int i = 0; i < T * K; i++)
		w[i] = ((float *)r.in[2].data)[i];
	for (int i = 0; i < T * D; i++) {
		sh[i] = ops_ld(&r.in[3], i);
		dy[i] = ops_ld(&r.in[4], i);
	}
	const ld h = 0x1p-10L;
	ld worst = 0;
	int n = T * K * D + T * K + T * D;
	for (int k = 0; k < n; k++) {
		ld *v = k < T * K * D ? &eo[k] : k < T * K * D + T * K ? &w[k - T * K * D] : &sh[k - T * K * D - T * K];
		ld keep = *v, L[2];
		for (int side = 0; side < 2; side++) {
			*v = keep + (side ? -h : h);
			L[side] = 0;
			for (int t = 0; t < T; t++)
				for (int dd = 0; dd < D; dd++) {
					ld y = sh[t * D + dd];
					for (int s = 0; s < K; s++)
						y += eo[(t * K + s) * D + dd] * w[t * K + s];
					L[side] += dy[t * D + dd] * y;
				}
		}
		*v = keep;
		ld fd = (L[0] - L[1]) / (2 * h);
		ld got = k < T * K * D		 ? ops_ld(&r.out[0], k)
			 : k < T * K * D + T * K ? ((float *)r.out[1].data)[k - T * K * D]
						 : ops_ld(&r.out[2], k - T * K * D - T * K);
		ld q = ratio(got, fd, 0x1p-7L * fabsl(fd) + 0x1p-20L);
		worst = q > worst ? q : worst;
		if (q > 1) {
			printf("FAIL moe_combine_bwd finite difference: gradient %d: op %.9Lg, central difference "
			       "%.9Lg\n",
			       k, got, fd);
			fails++;
		}
	}
	printf("moe_combine_bwd finite differences (%d gradients): worst %.3Lf of the bound\n", n, worst);
	run_free(op, &r);
}

/* "ENV=value ..." of the switches im reads */
static void op_modes_text(const struct align_op_impl *im, const struct align_modes *m, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (const int *p = im->modes; *p >= 0 && n + 80 < len; p++)
		n += (size_t)snprintf(buf + n, len - n, "%s=%s ", modes_info(*p)->env, modes_value_name(*p, m->v[*p]));
}

/* exact score of logit l (router.h step 2, non-softmax) */
static ld rb_score_l(const struct router_cfg *c, ld l)
{
	if (c->p.score == ROUTER_SCORE_SIGMOID)
		return sigl(l);
	ld sp = l > 40 ? l : log1pl(expl(l));
	return sqrtl(sp + (c->sp_eps ? 1e-20L : 0));
}

/* fp64 reference of router_bwd.h with the op's selection (idx) and the forward's fp32 logits (l32[T*E]):
 * dl, dx, dw; returns max error / bound */
static ld ref_router_bwd(const struct router_bwd_cfg *b, const struct align_tensor *in, const struct align_tensor *out,
			 const int32_t *idx, const float *l32, const float *xq, const float *wq, int64_t *worst_at)
{
	const struct router_cfg *c = &b->r;
	const int64_t T = c->T, D = c->D, E = c->E, K = c->K;
	const float *dwt = in[5].data, *dl = out[0].data, *dw = out[2].data;
	ld *rdl = calloc((size_t)(T * E), sizeof(ld)), *tdl = calloc((size_t)(T * E), sizeof(ld));
	ld worst = 0, r;
	for (int64_t t = 0; t < T; t++) {
		const float *l = l32 + t * E;
		ld s[ROUTER_BWD_MAX_E], ds[ROUTER_BWD_MAX_E] = {0}, dsm[ROUTER_BWD_MAX_E] = {0};
		if (c->p.score == ROUTER_SCORE_SOFTMAX) {
			ld mx = l[0], z = 0;
			for (int64_t e = 0; e < E; e++)
				mx = l[e] > mx ? l[e] : mx;
			for (int64_t e = 0; e < E; e++)
				z += s[e] = expl((ld)l[e] - mx);
			for (int64_t e = 0; e < E; e++)
				s[e] /= z;
		} else {
			for (int64_t e = 0; e < E; e++)
				s[e] = rb_score_l(c, l[e]);
		}
		ld g[ROUTER_MAX_K], Z = 0, gv = 0, gva = 0;
		for (int64_t j = 0; j < K; j++) {
			g[j] = (ld)dwt[t * K + j] * c->p.route_scale;
			Z += s[idx[t * K + j]];
		}
		if (c->norm_eps)
			Z += 1e-20L;
		for (int64_t j = 0; j < K; j++) {
			gv += g[j] * s[idx[t * K + j]];
			gva += fabsl(g[j]) * s[idx[t * K + j]];
		}
		for (int64_t j = 0; j < K; j++) {
			int e = idx[t * K + j];
			if (c->p.score == ROUTER_SCORE_SOFTMAX) {
				ds[e] = g[j];
				dsm[e] = fabsl(g[j]);
			} else {
				ds[e] = g[j] / Z - gv / (Z * Z);
				dsm[e] = fabsl(g[j]) / Z + gva / (Z * Z);
			}
		}
		ld dot = 0, dota = 0;
		for (int64_t e = 0; e < E; e++) {
			dot += ds[e] * s[e];
			dota += dsm[e] * s[e];
		}
		for (int64_t e = 0; e < E; e++) {
			ld ref, mag;
			if (c->p.score == ROUTER_SCORE_SOFTMAX) {
				ref = (ds[e] - dot) * s[e];
				mag = (dsm[e] + dota) * s[e];
			} else if (c->p.score == ROUTER_SCORE_SIGMOID) {
				ref = ds[e] * s[e] * (1 - s[e]);
				mag = dsm[e] * s[e] * (1 - s[e]);
			} else {
				ref = ds[e] * sigl(l[e]) / (2 * s[e]);
				mag = dsm[e] * sigl(l[e]) / (2 * s[e]);
			}
			if (dsm[e] == 0 && c->p.score != ROUTER_SCORE_SOFTMAX)
				ref = mag = 0; /* not selected: exactly +0 (s > 0 on these inputs) */
			rdl[t * E + e] = ref;
			tdl[t * E + e] = 0x1p-16L * mag;
			r = ratio(dl[t * E + e], ref, tdl[t * E + e]);
			if (r > worst) {
				worst = r;
				*worst_at = t * E + e;
			}
		}
	}
	for (int64_t t = 0; t < T; t++)
		for (int64_t d = 0; d < D; d++) {
			ld ref = 0, S = 0, P = 0;
			for (int64_t e = 0; e < E; e++) {
				ref += rdl[t * E + e] * wq[e * D + d];
				S += fabsl(rdl[t * E + e] * wq[e * D + d]);
				P += tdl[t * E + e] * fabsl(wq[e * D + d]);
			}
			r = ratio(ops_ld(&out[1], t * D + d), ref, UB * fabsl(ref) + (E + 2) * U * S + 2 * P);
			if (r > worst) {
				worst = r;
				*worst_at = 1000000 + t * D + d;
			}
		}
	for (int64_t e = 0; e < E; e++)
		for (int64_t d = 0; d < D; d++) {
			ld ref = 0, S = 0, P = 0;
			for (int64_t t = 0; t < T; t++) {
				ref += rdl[t * E + e] * xq[t * D + d];
				S += fabsl(rdl[t * E + e] * xq[t * D + d]);
				P += tdl[t * E + e] * fabsl(xq[t * D + d]);
			}
			r = ratio(dw[e * D + d], ref, (T + 2) * U * S + 2 * P);
			if (r > worst) {
				worst = r;
				*worst_at = 2000000 + e * D + d;
			}
		}
	free(rdl);
	free(tdl);
	return worst;
}

/* the forward's selection and fp32 logits, operands (the op's own recomputation, router_bwd.h) */
static void rb_forward(const struct router_bwd_cfg *b, const struct router_params *p, const struct align_modes *m,
		       const struct align_tensor *in, int32_t *idx, float *wt, float *l32, float *xq, float *wq)
{
	const struct router_cfg *c = &b->r;
	struct align_tensor fo[2] = {{idx, ALIGN_DT_I32, 2, {c->T, c->K}, "idx"},
				     {wt, ALIGN_DT_F32, 2, {c->T, c->K}, "wt"}};
	router_fwd_cpu(p, m, in, 5, fo, 2);
	for (int64_t i = 0; i < c->T * c->D; i++)
		xq[i] = matmul_operand(ops_ld(&in[0], i), c->x_opd);
	for (int64_t i = 0; i < c->E * c->D; i++)
		wq[i] = matmul_operand(((const float *)in[1].data)[i], c->w_opd);
	for (int64_t t = 0; t < c->T; t++)
		for (int64_t e = 0; e < c->E; e++)
			l32[t * c->E + e] = matmul_dot(xq + t * c->D, wq + e * c->D, c->D, ALIGN_MATMUL_ACCUM_SEQ, 0);
}

static void check_router_bwd(void)
{
	const struct align_op *op = ops_find("router_bwd");
	const struct align_op_impl *im = op->impl;
	struct align_dims d;
	ops_dims_parse("T=8,D=64,E=64,K=6,V=16", &d, NULL, 0);
	/* forward switch variations, one at a time from the defaults */
	static const struct {
		int mode, value;
	} fw[] = {{-1, 0},
		  {MODE_ROUTER_SUM, ALIGN_ROUTER_SUM_FP64},
		  {MODE_ROUTER_SUM, ALIGN_ROUTER_SUM_TORCH},
		  {MODE_ROUTER_NORM_EPS, ALIGN_ROUTER_NORM_EPS_1E_20},
		  {MODE_ROUTER_SQRTSOFTPLUS_EPS, ALIGN_ROUTER_SQRTSOFTPLUS_EPS_1E_20},
		  {MODE_ROUTER_GEMM, ALIGN_ROUTER_GEMM_BF16W},
		  {MODE_ROUTER_GEMM, ALIGN_ROUTER_GEMM_TF32},
		  {MODE_ROUTER_TOPK_ORDER, ALIGN_ROUTER_TOPK_ORDER_INDEX},
		  {MODE_MATH_IMPL, ALIGN_MATH_IMPL_LIBM}};
	struct router_params prm;
	ld worst = 0;
	int runs = 0;
	size_t T = 8, D = 64, E = 64, K = 6;
	int32_t *idx = malloc(2 * T * K * sizeof *idx);
	float *wt = malloc(2 * T * K * sizeof *wt), *l32 = malloc(T * E * sizeof *l32),
	      *xq = malloc(T * D * sizeof *xq), *wq = malloc(E * D * sizeof *wq);
	for (int var = 0; im->params_variant(&prm, &d, var); var++)
		for (size_t f = 0; f < sizeof fw / sizeof fw[0]; f++)
			for (int k = 0; k < 12; k++) {
				struct align_modes m;
				modes_init_default(&m);
				if (fw[f].mode >= 0)
					m.v[fw[f].mode] = fw[f].value;
				m.v[MODE_ROUTER_BWD_NORM] = k % 2;
				m.v[MODE_ROUTER_BWD_SP] = k / 2 % 2;
				m.v[MODE_ROUTER_BWD_WGRAD] = k / 4;
				char buf[2048];
				op_modes_text(im, &m, buf, sizeof buf);
				struct run a, b2, big;
				struct align_dims d2 = d;
				d2.v[ALIGN_DIM_T] *= 2;
				run_alloc(op, &d, &m, &a, NULL, SEED + var);
				run_alloc(op, &d, &m, &b2, NULL, SEED + var);
				run_alloc(op, &d2, &m, &big, NULL, SEED + var);
				for (int i = 0; i < im->n_in; i++) /* x, ids, dwt: the first T rows; the rest whole */
					memcpy(big.in[i].data, a.in[i].data, nbytes(&a.in[i]));
				if (im->fwd_cpu(&prm, &m, a.in, 6, a.out, 3) ||
				    im->fwd_cpu(&prm, &m, b2.in, 6, b2.out, 3) ||
				    im->fwd_cpu(&prm, &m, big.in, 6, big.out, 3)) {
					printf("FAIL router_bwd: run failed, variant %d modes %s\n", var, buf);
					fails++;
				} else {
					struct router_bwd_cfg c;
					router_bwd_cfg_init(&c, &prm, &m, a.in, 6, a.out, 3, ALIGN_DEVICE_CPU, NULL);
					rb_forward(&c, &prm, &m, a.in, idx, wt, l32, xq, wq);
					int64_t at = 0;
					ld r = ref_router_bwd(&c, a.in, a.out, idx, l32, xq, wq, &at);
					runs++;
					worst = r > worst ? r : worst;
					if (r > 1) {
						printf("FAIL router_bwd variant %d element %" PRId64
						       " (dl; 1e6+: dx; 2e6+: dw): error %.3Lg x bound, modes %s\n",
						       var, at, r, buf);
						fails++;
					}
					for (int i = 0; i < 3; i++)
						if (memcmp(a.out[i].data, b2.out[i].data, nbytes(&a.out[i]))) {
							printf("FAIL router_bwd: %s not deterministic, modes %s\n",
							       im->out[i].name, buf);
							fails++;
						}
					for (int i = 0; i < 2; i++) /* dl, dx: row-wise */
						if (memcmp(a.out[i].data, big.out[i].data, nbytes(&a.out[i]))) {
							printf("FAIL router_bwd: %s not batch invariant, variant %d "
							       "modes %s\n",
							       im->out[i].name, var, buf);
							fails++;
						}
				}
				run_free(op, &a);
				run_free(op, &b2);
				run_free(op, &big);
			}
	free(idx), free(wt), free(l32), free(xq), free(wq);
	printf("router_bwd   %d runs: worst error %.3Lf of the stated bound, deterministic, dl and dx batch "
	       "invariant%s\n",
	       runs, worst, fails ? "  FAIL" : "");
}

/* central differences of the fp64 gate with the op's selection held: L = sum_t sum_j dwt * rs * s_j / Z
 * (sqrtsoftplus, variant 0, default modes: fp32 operands as stored), against dx and dw */
static void check_router_fd(void)
{
	const struct align_op *op = ops_find("router_bwd");
	enum { T = 2, D = 4, E = 16, K = 4 };
	struct align_dims d;
	ops_dims_parse("T=2,D=4,E=16,K=4,V=8", &d, NULL, 0);
	struct align_modes m;
	modes_init_default(&m);
	struct router_params prm;
	op->impl->params_default(&prm, &d);
	struct run r;
	run_alloc(op, &d, &m, &r, NULL, SEED);
	if (op->impl->fwd_cpu(&prm, &m, r.in, 6, r.out, 3)) {
		printf("FAIL router_bwd finite differences: run failed\n");
		fails++;
		run_free(op, &r);
		return;
	}
	struct router_bwd_cfg c;
	router_bwd_cfg_init(&c, &prm, &m, r.in, 6, r.out, 3, ALIGN_DEVICE_CPU, NULL);
	int32_t idx[T * K];
	float wt[T * K], l32[T * E], xq[T * D], wq[E * D];
	rb_forward(&c, &prm, &m, r.in, idx, wt, l32, xq, wq);
	ld x[T * D], w[E * D];
	for (int i = 0; i < T * D; i++)
		x[i] = xq[i];
	for (int i = 0; i < E * D; i++)
		w[i] = wq[i];
	const float *dwt = r.in[5].data;
	const ld h = 0x1p-14L;
	ld worst = 0;
	for (int k = 0; k < T * D + E * D; k++) {
		ld *v = k < T * D ? &x[k] : &w[k - T * D], keep = *v, L[2];
		for (int side = 0; side < 2; side++) {
			*v = keep + (side ? -h : h);
			L[side] = 0;
			for (int t = 0; t < T; t++) {
				ld s[K], Z = 0;
				for (int j = 0; j < K; j++) {
					ld l = 0;
					for (int q = 0; q < D; q++)
						l += x[t * D + q] * w[idx[t * K + j] * D + q];
					Z += s[j] = rb_score_l(&c.r, l);
				}
				for (int j = 0; j < K; j++)
					L[side] += (ld)dwt[t * K + j] * prm.route_scale * s[j] / Z;
			}
		}
		*v = keep;
		ld fd = (L[0] - L[1]) / (2 * h);
		ld got = k < T * D ? ops_ld(&r.out[1], k) : ((const float *)r.out[2].data)[k - T * D];
		ld q = ratio(got, fd, 0x1p-7L * fabsl(fd) + 0x1p-16L);
		worst = q > worst ? q : worst;
		if (q > 1) {
			printf("FAIL router_bwd finite difference: gradient %d: op %.9Lg, central difference %.9Lg\n",
			       k, got, fd);
			fails++;
		}
	}
	printf("router_bwd   finite differences (%d gradients of x and w): worst %.3Lf of the bound\n", T * D + E * D,
	       worst);
	run_free(op, &r);
}

int main(void)
{
	check_sums();
	check_fd();
	check_swiglu_bwd();
	check_moe_fd();
	check_moe_combine_bwd();
	check_router_fd();
	check_router_bwd();
	printf("test-ops-bwd: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
