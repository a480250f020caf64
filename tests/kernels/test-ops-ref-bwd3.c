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

#include "mhc_post_bwd.h"
#include "ops.h"

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

/* ---- the op table and the drivers ---- */

struct ref_entry {
	const char *op;
	void (*fn)(struct ctx *);
	ld (*fwd)(const struct ctx *, ld *const *); /* fp64 forward for the finite differences */
	int n_fd;				    /* inputs 0..n_fd-1 are differentiated ... */
	int fd_out[8];				    /* ... against these outputs */
	const char *fd_dims;
};

static const struct ref_entry refs[] = {
	{"mhc_post_bwd", ref_mhc_post_bwd, fwd_mhc_post, 4, {0, 1, 2, 3}, "T=2,N=4,D=8"},
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
	ops_dims_default(op, &d);
	void *params = calloc(1, im->params_size);
	ld worst = 0;
	for (int var = 0; im->params_variant(params, &d, var); var++)
		for (int cmb = 0; cmb < combos; cmb++) {
			struct align_modes m;
			modes_init_default(&m);
			for (int q = 0, rest = cmb; q < nm; q++) {
				m.v[ids[q]] = rest % modes_value_count(ids[q]);
				rest /= modes_value_count(ids[q]);
			}
			if (modes_gpu_only_in(&m, NULL) >= 0)
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
	printf("%-14s %4d mode combinations: worst error %.3Lf of the stated bound%s\n", op->name, runs, worst,
	       fails ? "  FAIL" : "");
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
	ld *v[8];
	for (int k = 0; k < e->n_fd; k++) {
		int64_t n = align_tensor_numel(&in[k]);
		v[k] = malloc(sizeof(ld) * (size_t)(n ? n : 1));
		for (int64_t i = 0; i < n; i++)
			v[k][i] = ldi(&c, k, i);
	}
	ld worst = 0, h = 0x1p-10L;
	for (int k = 0; k < e->n_fd; k++) {
		int64_t n = align_tensor_numel(&in[k]);
		const struct align_tensor *g = &out[e->fd_out[k]];
		for (int64_t i = 0; i < n; i++) {
			ld x0 = v[k][i], sc = fabsl(x0) > 1 ? fabsl(x0) : 1;
			v[k][i] = x0 + h * sc;
			ld lp = e->fwd(&c, v);
			v[k][i] = x0 - h * sc;
			ld lm = e->fwd(&c, v);
			v[k][i] = x0;
			ld fd = (lp - lm) / (2 * h * sc), got = ops_ld(g, i);
			ld tol = (g->dtype == ALIGN_DT_BF16 ? ulp_bf16(fd) : 0) + 0x1p-20L * (fabsl(fd) + 1) +
				 0x1p-16L * fabsl(fd);
			ld r = fabsl(got - fd) / tol;
			if (!(r <= 1)) {
				if (fails < 5)
					printf("FAIL %s fd: input %s element %" PRId64 ": op %La fd %La\n", op->name,
					       im->in[k].name, i, got, fd);
				fails++;
			}
			worst = r > worst ? r : worst;
		}
	}
	for (int k = 0; k < e->n_fd; k++)
		free(v[k]);
	printf("%-14s finite differences (%s): worst error %.3Lf of the bound%s\n", op->name, e->fd_dims, worst,
	       fails ? "  FAIL" : "");
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
