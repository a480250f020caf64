/* test-ops-ref-bwd.c: fp64 reference checks of the backward ops (issue 18): matmul_bwd, rmsnorm_bwd,
 * qnorm_bwd. Three checks per op:
 *   1. every result, under every combination of the switches the op reads that the C twin runs and the
 *      three fill sets of test-ops.c, against a long double evaluation of the op's contract written
 *      independently here, within the bound the op's header states;
 *   2. finite differences: on a small shape, the op's gradients (in its most precise modes) against
 *      central differences of the forward evaluated in binary64, within a stated bound;
 *   3. the reduction orders by hand where the order is the point (matmul_bwd's sequence-first token map).
 * Determinism, batch invariance (the row outputs) and mode effects are test-ops.c's, which runs every op.
 * Exit status 0 = pass; prints seed, op, modes and the worst element on failure. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_bwd.h"
#include "rmsnorm_bwd.h"
#include "op_cfg.h"
#include "ops.h"
#include "qnorm_bwd.h"

#define SEED 0xb4c3ba11ull
#define NSETS 3
#define U 0x1p-24L

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

/* half an ulp of the output dtype of |v| + slack (the rounding of the stored result) */
static ld out_round(int dtype, ld v)
{
	return dtype == ALIGN_DT_BF16 ? ulp_bf16(v) / 2 : U * v;
}

struct ctx {
	const struct align_modes *m;
	const struct align_tensor *in, *out;
	const void *params;
	ld worst;
	int64_t worst_i;
};

static void judge(struct ctx *c, int64_t i, ld got, ld ref, ld tol)
{
	ld err = fabsl(got - ref);
	if (isnan(got) || isnan(ref))
		err = isnan(got) && isnan(ref) ? 0 : INFINITY;
	if (isinf(ref) && got == ref)
		err = 0;
	if (isinf(got) && fabsl(ref) - tol > FLT_MAX && (got > 0) == (ref > 0))
		err = 0; /* the exact value is beyond binary32: overflow to inf is the right result */
	if (isinf(got) && !isinf(ref) && fabsl(ref) + tol > FLT_MAX)
		err = 0; /* within the bound of overflowing */
	ld r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
	if (r > c->worst) {
		c->worst = r;
		c->worst_i = i;
		if (getenv("REF_DEBUG") && r > 1)
			printf("  element %" PRId64 ": got %La ref %La tol %La\n", i, got, ref, tol);
	}
}

static ld mm_op(float v, int operand)
{
	return matmul_operand(v, operand);
}

/* da = dy @ b and db = dy^T @ a (+ main_grad) in long double; bounds of matmul_bwd.h */
static void ref_matmul_bwd(struct ctx *c)
{
	const struct align_modes *m = c->m;
	int operand = m->v[MODE_MATMUL_OPERAND], accum = m->v[MODE_MATMUL_ACCUM], wacc = m->v[MODE_WGRAD_ACCUM];
	int order = m->v[MODE_WGRAD_ORDER];
	int64_t T = c->in[0].shape[0], D = c->in[0].shape[1], F = c->in[1].shape[0];
	const float *a = c->in[0].data, *b = c->in[1].data, *dy = c->in[2].data;
	for (int64_t t = 0; t < T; t++)
		for (int64_t d = 0; d < D; d++) {
			ld ref = 0, S = 0;
			for (int64_t f = 0; f < F; f++) {
				ld p = mm_op(dy[t * F + f], operand) * mm_op(b[f * D + d], operand);
				ref += p;
				S += fabsl(p);
			}
			ld dot = accum == ALIGN_MATMUL_ACCUM_FP64      ? U * fabsl(ref) + F * 0x1p-53L * S
				 : accum == ALIGN_MATMUL_ACCUM_SPLIT16 ? ((F + 15) / 16 + 16) * U * S
								       : F * U * S;
			judge(c, t * D + d, ops_ld(&c->out[0], t * D + d), ref,
			      dot + out_round(c->out[0].dtype, fabsl(ref) + dot));
		}
	for (int64_t f = 0; f < F; f++)
		for (int64_t d = 0; d < D; d++) {
			ld acc = 0, S = 0;
			for (int64_t t = 0; t < T; t++) {
				ld p = mm_op(dy[t * F + f], operand) * mm_op(a[t * D + d], operand);
				acc += p;
				S += fabsl(p);
			}
			ld tol = (order == ALIGN_WGRAD_ORDER_SPLIT16 ? (T + 15) / 16 + 16 : T) * U * S;
			ld mg = wacc == ALIGN_WGRAD_ACCUM_FRESH ? 0 : ops_ld(&c->in[3], f * D + d), ref = acc + mg;
			if (wacc == ALIGN_WGRAD_ACCUM_ADD)
				tol += ulp_bf16(fabsl(acc) + tol) / 2;
			if (wacc != ALIGN_WGRAD_ACCUM_FRESH)
				tol += U * (fabsl(acc) + tol + fabsl(mg));
			judge(c, T * D + f * D + d, ops_ld(&c->out[1], f * D + d), ref,
			      tol + out_round(c->out[1].dtype, fabsl(ref) + tol));
		}
}

static ld rms_eps(const struct align_modes *m)
{
	return m->v[MODE_RMSNORM_EPS] == ALIGN_RMSNORM_EPS_1E_5 ? (ld)1e-5f : (ld)1e-6f;
}

/* dx = r (dn - n mean(dn n)), dw = sum_t dy n in long double (every form is this gradient); bounds of
 * rmsnorm_bwd.h. Rows (and the dw columns summing them) whose binary32 evaluation cannot be finite are
 * skipped: the EXTREME fill set overflows x^2 in binary32, where the forward has no finite reference */
static void ref_rmsnorm_bwd(struct ctx *c)
{
	int64_t T = c->in[0].shape[0], D = c->in[0].shape[1];
	const float *w = c->in[1].data;
	int wbf16 = c->m->v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_BF16;
	ld *n = malloc((size_t)(T * D) * sizeof *n);
	int *bad = calloc((size_t)T, sizeof *bad);
	for (int64_t t = 0; t < T; t++) {
		ld ss = 0, s = 0, S = 0;
		for (int64_t j = 0; j < D; j++)
			ss += (ld)ops_ld(&c->in[0], t * D + j) * ops_ld(&c->in[0], t * D + j);
		ld r = 1.0L / sqrtl(ss / D + rms_eps(c->m));
		bad[t] = !(ss < (ld)FLT_MAX) || !isfinite(r);
		for (int64_t j = 0; j < D; j++) {
			ld wj = wbf16 ? (ld)align_round_bf16(w[j]) : (ld)w[j];
			ld dn = (ld)ops_ld(&c->in[2], t * D + j) * wj;
			n[t * D + j] = ops_ld(&c->in[0], t * D + j) * r;
			s += dn * n[t * D + j];
			S += fabsl(dn * n[t * D + j]);
		}
		for (int64_t j = 0; j < D && !bad[t]; j++) {
			ld wj = wbf16 ? (ld)align_round_bf16(w[j]) : (ld)w[j];
			ld dn = (ld)ops_ld(&c->in[2], t * D + j) * wj, nj = n[t * D + j];
			ld ref = r * (dn - nj * s / D);
			ld e = (2 * D + 64) * U * (r * fabsl(dn) + r * fabsl(nj) * S / D);
			judge(c, t * D + j, ops_ld(&c->out[0], t * D + j), ref, e + ulp_bf16(fabsl(ref) + e) / 2);
		}
	}
	for (int64_t j = 0; j < D; j++) {
		ld ref = 0, S = 0;
		int skip = 0;
		for (int64_t t = 0; t < T; t++) {
			ld q = (ld)ops_ld(&c->in[2], t * D + j) * n[t * D + j];
			skip |= bad[t];
			ref += q;
			S += fabsl(q);
		}
		ld e = (T + D + 32) * U * S;
		if (!skip)
			judge(c, T * D + j, ops_ld(&c->out[1], j), ref, e + out_round(c->out[1].dtype, fabsl(ref) + e));
	}
	free(n);
	free(bad);
}

/* dq = r (g - n mean(g n)) per head row in long double; bounds of qnorm_bwd.h; rows whose binary32 x^2 sum
 * overflows are skipped as in ref_rmsnorm_bwd */
static void ref_qnorm_bwd(struct ctx *c)
{
	int64_t R = c->in[0].shape[0] * c->in[0].shape[1], D = c->in[0].shape[2];
	int bf16 = c->m->v[MODE_QNORM_BWD_PREC] == ALIGN_QNORM_BWD_PREC_BF16_EAGER;
	for (int64_t row = 0; row < R; row++) {
		ld ss = 0, s = 0, S = 0;
		for (int64_t j = 0; j < D; j++)
			ss += (ld)ops_ld(&c->in[0], row * D + j) * ops_ld(&c->in[0], row * D + j);
		ld r = 1.0L / sqrtl(ss / D + rms_eps(c->m));
		if (!(ss < (ld)FLT_MAX) || !isfinite(r))
			continue;
		for (int64_t j = 0; j < D; j++) {
			ld q = (ld)ops_ld(&c->in[1], row * D + j) * ops_ld(&c->in[0], row * D + j) * r;
			s += q;
			S += fabsl(q);
		}
		for (int64_t j = 0; j < D; j++) {
			ld g = ops_ld(&c->in[1], row * D + j), nj = ops_ld(&c->in[0], row * D + j) * r;
			ld ref = r * (g - nj * s / D);
			ld k = bf16 ? 8 * 0x1p-8L : (2 * D + 64) * U;
			ld e = k * (r * fabsl(g) + r * fabsl(nj) * S / D);
			judge(c, row * D + j, ops_ld(&c->out[0], row * D + j), ref, e + ulp_bf16(fabsl(ref) + e) / 2);
		}
	}
}

struct ref_entry {
	const char *op;
	void (*fn)(struct ctx *);
};

static const struct ref_entry refs[] = {
	{"matmul_bwd", ref_matmul_bwd},
	{"rmsnorm_bwd", ref_rmsnorm_bwd},
	{"qnorm_bwd", ref_qnorm_bwd},
};

static int fill(const struct align_op *op, struct align_tensor *t, int i, int set)
{
	struct align_fill f = op->impl->in[i].fill;
	if (t->dtype != ALIGN_DT_I32 && set == 1 && f.kind == ALIGN_FILL_SPECIAL)
		f.kind = ALIGN_FILL_EXTREME;
	if (t->dtype != ALIGN_DT_I32 && set == 2) {
		f.kind = ALIGN_FILL_CONST;
		f.scale = i == 0 ? -100.0f * f.scale : f.scale;
	}
	return ops_fill_tensor(&f, op->name, t, SEED, 0);
}

static int check_op(const struct align_op *op, void (*fn)(struct ctx *))
{
	const struct align_op_impl *im = op->impl;
	int ids[16], nm = 0, fails = 0, combos = 1, runs = 0;
	for (const int *p = im->modes; *p >= 0; p++) {
		ids[nm++] = *p;
		combos *= modes_value_count(*p);
	}
	struct align_dims d;
	ops_dims_default(op, &d);
	void *params = calloc(1, im->params_size);
	ld worst = 0;
	for (int var = 0; im->params_variant(params, &d, var); var++)
		for (int set = 0; set < NSETS; set++)
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
				for (int i = 0; i < im->n_in; i++) {
					ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
					fill(op, &in[i], i, set);
				}
				for (int i = 0; i < im->n_out; i++)
					ops_tensor_alloc(op, 1, i, &d, &m, &out[i]);
				struct ctx c = {&m, in, out, params, 0, -1};
				if (im->fwd_cpu(params, &m, in, im->n_in, out, im->n_out) != ALIGN_OK) {
					printf("FAIL %s: run failed\n", op->name);
					fails++;
				} else {
					fn(&c);
					runs++;
					worst = c.worst > worst ? c.worst : worst;
					if (c.worst > 1) {
						char buf[2048];
						modes_format(&m, buf, sizeof buf);
						printf("FAIL %s variant %d set %d element %" PRId64
						       ": error %.3Lg x bound (seed 0x%llx) modes %s\n",
						       op->name, var, set, c.worst_i, c.worst, (unsigned long long)SEED,
						       buf);
						fails++;
					}
				}
				for (int i = 0; i < im->n_in; i++)
					ops_tensor_free(&in[i]);
				for (int i = 0; i < im->n_out; i++)
					ops_tensor_free(&out[i]);
			}
	printf("%-12s %4d runs: worst error %.3Lf of the stated bound%s\n", op->name, runs, worst,
	       fails ? "  FAIL" : "");
	free(params);
	return fails;
}

/* run op at dims text with modes "K=V ..." applied on the defaults; inputs filled normal (seeded);
 * returns the run's tensors (caller frees) */
struct fd_run {
	const struct align_op *op;
	struct align_dims d;
	struct align_modes m;
	struct align_tensor in[8], out[8];
	void *params;
};

static int fd_setup(struct fd_run *r, const char *opname, const char *dims, const char *const *modes)
{
	char e[256];
	memset(r, 0, sizeof *r);
	r->op = ops_find(opname);
	if (!r->op || ops_dims_parse(dims, &r->d, e, sizeof e))
		return -1;
	modes_init_default(&r->m);
	for (int k = 0; modes[k]; k += 2) {
		int id = modes_find(modes[k]);
		int v = id >= 0 ? modes_value_index(id, modes[k + 1]) : -1;
		if (v < 0)
			return -1;
		r->m.v[id] = v;
	}
	const struct align_op_impl *im = r->op->impl;
	r->params = calloc(1, im->params_size);
	im->params_default(r->params, &r->d);
	for (int i = 0; i < im->n_in; i++) {
		struct align_fill f = {ALIGN_FILL_NORMAL, 1.0f, 0, 0};
		if (ops_tensor_alloc(r->op, 0, i, &r->d, &r->m, &r->in[i]) ||
		    ops_fill_tensor(&f, r->op->name, &r->in[i], SEED + (uint64_t)i, 0))
			return -1;
	}
	for (int i = 0; i < im->n_out; i++)
		if (ops_tensor_alloc(r->op, 1, i, &r->d, &r->m, &r->out[i]))
			return -1;
	return im->fwd_cpu(r->params, &r->m, r->in, im->n_in, r->out, im->n_out);
}

static void fd_free(struct fd_run *r)
{
	for (int i = 0; i < r->op->impl->n_in; i++)
		ops_tensor_free(&r->in[i]);
	for (int i = 0; i < r->op->impl->n_out; i++)
		ops_tensor_free(&r->out[i]);
	free(r->params);
}

/* L = sum_t,f dy[t,f] * (a[t,:] . b[f,:]) in binary64 */
static double fd_matmul_loss(const double *a, const double *b, const float *dy, int64_t T, int64_t D, int64_t F)
{
	double L = 0;
	for (int64_t t = 0; t < T; t++)
		for (int64_t f = 0; f < F; f++) {
			double y = 0;
			for (int64_t d = 0; d < D; d++)
				y += a[t * D + d] * b[f * D + d];
			L += (double)dy[t * F + f] * y;
		}
	return L;
}

/* matmul_bwd (fp32 operands, fp64 dgrad, fp32 outputs, fresh buffer) against central differences of the
 * binary64 forward: |grad - fd| <= 2^-20 sum |terms| + 2^-30 (fd: L is bilinear, so the central difference
 * is exact up to binary64 rounding, ~2^-52 |L| / h with h = 2^-10) */
static int check_fd_matmul(void)
{
	static const char *const modes[] = {"ALIGN_MATMUL_OPERAND",
					    "fp32",
					    "ALIGN_MATMUL_ACCUM",
					    "fp64",
					    "ALIGN_MATMUL_OUT",
					    "fp32",
					    "ALIGN_WGRAD_DTYPE",
					    "fp32",
					    "ALIGN_WGRAD_ORDER",
					    "sb",
					    NULL};
	struct fd_run r;
	int fails = 0;
	if (fd_setup(&r, "matmul_bwd", "T=6,D=5,F=4,S=3", modes) != ALIGN_OK) {
		printf("FAIL matmul_bwd finite differences: setup\n");
		return 1;
	}
	int64_t T = 6, D = 5, F = 4;
	double a[30], b[20], h = 0x1p-10, worst = 0;
	for (int i = 0; i < T * D; i++)
		a[i] = ((const float *)r.in[0].data)[i];
	for (int i = 0; i < F * D; i++)
		b[i] = ((const float *)r.in[1].data)[i];
	const float *dy = r.in[2].data;
	for (int which = 0; which < 2; which++) {
		double *x = which ? b : a;
		int64_t n = which ? F * D : T * D;
		for (int64_t i = 0; i < n; i++) {
			double x0 = x[i];
			x[i] = x0 + h;
			double lp = fd_matmul_loss(a, b, dy, T, D, F);
			x[i] = x0 - h;
			double lm = fd_matmul_loss(a, b, dy, T, D, F);
			x[i] = x0;
			double fd = (lp - lm) / (2 * h), got = ((const float *)r.out[which].data)[i], S = 0;
			int64_t row = which ? i / D : i / D, col = i % D;
			if (which)
				for (int64_t t = 0; t < T; t++)
					S += fabs(dy[t * F + row] * a[t * D + col]);
			else
				for (int64_t f = 0; f < F; f++)
					S += fabs(dy[row * F + f] * b[f * D + col]);
			double tol = 0x1p-20 * S + 0x1p-30, e = fabs(got - fd) / tol;
			worst = e > worst ? e : worst;
			if (e > 1) {
				printf("FAIL matmul_bwd finite differences: %s[%lld] = %a, central difference %a\n",
				       which ? "db" : "da", (long long)i, got, fd);
				fails++;
			}
		}
	}
	printf("matmul_bwd finite differences (T=6,D=5,F=4): worst %.3f of the bound%s\n", worst,
	       fails ? "  FAIL" : "");
	fd_free(&r);
	return fails;
}

/* L = sum_t,j dy[t,j] * w_j x_tj / sqrt(mean_j x_tj^2 + eps) in binary64 */
static double fd_rms_loss(const double *x, const double *w, const double *dy, int64_t T, int64_t D, double eps)
{
	double L = 0;
	for (int64_t t = 0; t < T; t++) {
		double ss = 0;
		for (int64_t j = 0; j < D; j++)
			ss += x[t * D + j] * x[t * D + j];
		double r = 1.0 / sqrt(ss / (double)D + eps);
		for (int64_t j = 0; j < D; j++)
			L += dy[t * D + j] * w[j] * x[t * D + j] * r;
	}
	return L;
}

/* rmsnorm_bwd in each form (fp32 dw, fp64 row sums) against central differences of the binary64 forward
 * (h = 2^-12: the truncation error is ~h^2 times the third derivative, ~1e-7 here): |dx - fd| <= 2^-7 |fd|
 * + 2^-6 max|fd| (dx is stored in bf16: half an ulp is 2^-9 relative), |dw - fd| <= 2^-16 sum |terms|
 * + 2^-20 */
static int check_fd_rmsnorm(void)
{
	static const char *const forms[] = {"autograd", "te", "apex"};
	int fails = 0;
	for (int k = 0; k < 3; k++) {
		const char *const modes[] = {"ALIGN_RMSNORM_BWD_FORM", forms[k], "ALIGN_RMSNORM_REDUCE", "fp64", NULL};
		struct fd_run r;
		if (fd_setup(&r, "rmsnorm_bwd", "T=3,D=8", modes) != ALIGN_OK) {
			printf("FAIL rmsnorm_bwd finite differences: setup\n");
			return fails + 1;
		}
		enum { T = 3, D = 8 };
		double x[T * D], w[D], dy[T * D], h = 0x1p-12, eps = 1e-6f, worst = 0, big = 0;
		for (int i = 0; i < T * D; i++) {
			x[i] = ops_ld(&r.in[0], i);
			dy[i] = ops_ld(&r.in[2], i);
		}
		for (int j = 0; j < D; j++)
			w[j] = ((const float *)r.in[1].data)[j];
		double fdx[T * D], fdw[D];
		for (int i = 0; i < T * D + D; i++) {
			double *v = i < T * D ? &x[i] : &w[i - T * D], v0 = *v;
			*v = v0 + h;
			double lp = fd_rms_loss(x, w, dy, T, D, eps);
			*v = v0 - h;
			double lm = fd_rms_loss(x, w, dy, T, D, eps);
			*v = v0;
			double fd = (lp - lm) / (2 * h);
			if (i < T * D) {
				fdx[i] = fd;
				big = fabs(fd) > big ? fabs(fd) : big;
			} else {
				fdw[i - T * D] = fd;
			}
		}
		int f0 = fails;
		for (int i = 0; i < T * D + D; i++) {
			double got = i < T * D ? ops_ld(&r.out[0], i) : ((const float *)r.out[1].data)[i - T * D];
			double fd = i < T * D ? fdx[i] : fdw[i - T * D], tol;
			if (i < T * D) {
				tol = 0x1p-7 * fabs(fd) + 0x1p-6 * big;
			} else {
				double S = 0;
				for (int t = 0; t < T; t++)
					S += fabs(dy[t * D + i - T * D] * x[t * D + i - T * D]) * 4;
				tol = 0x1p-16 * S + 0x1p-20;
			}
			double e = fabs(got - fd) / tol;
			worst = e > worst ? e : worst;
			if (e > 1) {
				printf("FAIL rmsnorm_bwd %s finite differences: %s[%d] = %a, central difference %a\n",
				       forms[k], i < T * D ? "dx" : "dw", i < T * D ? i : i - T * D, got, fd);
				fails++;
			}
		}
		printf("rmsnorm_bwd %-8s finite differences (T=3,D=8): worst %.3f of the bound%s\n", forms[k], worst,
		       fails > f0 ? "  FAIL" : "");
		fd_free(&r);
	}
	return fails;
}

/* qnorm_bwd against central differences of the binary64 forward (w = 1), 4 head rows of 8: fp32 in each
 * form as check_fd_rmsnorm; bf16_eager within 2^-4 max|fd| (its dozen bf16 roundings, qnorm_bwd.h) */
static int check_fd_qnorm(void)
{
	static const char *const cases[][2] = {
		{"fp32", "autograd"}, {"fp32", "te"}, {"fp32", "apex"}, {"bf16_eager", "autograd"}};
	int fails = 0;
	for (int k = 0; k < 4; k++) {
		const char *const modes[] = {"ALIGN_QNORM_BWD_PREC",
					     cases[k][0],
					     "ALIGN_RMSNORM_BWD_FORM",
					     cases[k][1],
					     "ALIGN_RMSNORM_REDUCE",
					     "fp64",
					     NULL};
		struct fd_run r;
		if (fd_setup(&r, "qnorm_bwd", "T=2,H=2,D=8", modes) != ALIGN_OK) {
			printf("FAIL qnorm_bwd finite differences: setup\n");
			return fails + 1;
		}
		enum { R = 4, D = 8 };
		double x[R * D], w[D], dy[R * D], h = 0x1p-12, eps = 1e-6f, worst = 0, big = 0, fdx[R * D];
		for (int i = 0; i < R * D; i++) {
			x[i] = ops_ld(&r.in[0], i);
			dy[i] = ops_ld(&r.in[1], i);
		}
		for (int j = 0; j < D; j++)
			w[j] = 1.0;
		for (int i = 0; i < R * D; i++) {
			double v0 = x[i];
			x[i] = v0 + h;
			double lp = fd_rms_loss(x, w, dy, R, D, eps);
			x[i] = v0 - h;
			double lm = fd_rms_loss(x, w, dy, R, D, eps);
			x[i] = v0;
			fdx[i] = (lp - lm) / (2 * h);
			big = fabs(fdx[i]) > big ? fabs(fdx[i]) : big;
		}
		int f0 = fails;
		for (int i = 0; i < R * D; i++) {
			double got = ops_ld(&r.out[0], i);
			double tol = k == 3 ? 0x1p-4 * big : 0x1p-7 * fabs(fdx[i]) + 0x1p-6 * big,
			       e = fabs(got - fdx[i]) / tol;
			worst = e > worst ? e : worst;
			if (e > 1) {
				printf("FAIL qnorm_bwd %s/%s finite differences: dq[%d] = %a, central difference %a\n",
				       cases[k][0], cases[k][1], i, got, fdx[i]);
				fails++;
			}
		}
		printf("qnorm_bwd %s/%-8s finite differences (T=2,H=2,D=8): worst %.3f of the bound%s\n", cases[k][0],
		       cases[k][1], worst, fails > f0 ? "  FAIL" : "");
		fd_free(&r);
	}
	return fails;
}

/* WGRAD_ORDER by hand: T = 4 tokens of S = 2 (B = 2), a = 1, dy[t] = {2^24, 1, -2^24, 1}: bs adds
 * 2^24 + 1 (-> 2^24) - 2^24 + 1 = 1; sb visits t = 0, 2, 1, 3: 2^24 - 2^24 + 1 + 1 = 2; split16 (chunks of
 * one token) = bs here = 1 */
static int check_wgrad_orders(void)
{
	struct matmul_bwd_cfg c = {4,
				   1,
				   1,
				   2,
				   2,
				   ALIGN_MATMUL_OPERAND_FP32,
				   ALIGN_MATMUL_ACCUM_SEQ,
				   0,
				   ALIGN_DT_F32,
				   ALIGN_WGRAD_ORDER_BS,
				   ALIGN_WGRAD_ACCUM_FRESH,
				   ALIGN_DT_F32};
	const float a[4] = {1, 1, 1, 1}, dy[4] = {0x1p24f, 1.0f, -0x1p24f, 1.0f};
	float want[3] = {1.0f, 2.0f, 1.0f};
	int orders[3] = {ALIGN_WGRAD_ORDER_BS, ALIGN_WGRAD_ORDER_SB, ALIGN_WGRAD_ORDER_SPLIT16}, fails = 0;
	for (int k = 0; k < 3; k++) {
		c.order = orders[k];
		for (int fma = 0; fma < 2; fma++) {
			c.fma = fma;
			float got = matmul_bwd_wgrad(&c, dy, a, 0, 0, 0.0f);
			if (got != want[k]) {
				printf("FAIL matmul_bwd wgrad order %s fma %d: %a, want %a\n",
				       modes_value_name(MODE_WGRAD_ORDER, orders[k]), fma, got, want[k]);
				fails++;
			}
		}
	}
	/* main_grad: one add of the fp32 accumulator; add: the accumulator rounded to bf16 first */
	const float a1[1] = {1.0f}, dy1[1] = {1.0f + 0x1p-12f};
	c.T = 1, c.S = 1, c.B = 1, c.order = ALIGN_WGRAD_ORDER_BS, c.fma = 0;
	c.wacc = ALIGN_WGRAD_ACCUM_MAIN_GRAD;
	float mg = matmul_bwd_wgrad(&c, dy1, a1, 0, 0, 1.0f);
	c.wacc = ALIGN_WGRAD_ACCUM_ADD;
	float ad = matmul_bwd_wgrad(&c, dy1, a1, 0, 0, 1.0f);
	if (mg != 2.0f + 0x1p-12f || ad != 2.0f) {
		printf("FAIL matmul_bwd accumulation: main_grad %a (want %a), add %a (want 0x1p+1)\n", mg,
		       2.0f + 0x1p-12f, ad);
		fails++;
	}
	return fails;
}

/* bad input: status 2 (ALIGN_ERR_INPUT) with a message naming the op, the tensor and what was expected */
static int expect_refusal(const char *what, int rc, const struct align_err *e, const char *want)
{
	if (rc == ALIGN_ERR_INPUT && e->status == ALIGN_ERR_INPUT && strstr(e->msg, want))
		return 0;
	printf("FAIL %s: status %d, message '%s' (want status %d naming '%s')\n", what, rc, e->msg, ALIGN_ERR_INPUT,
	       want);
	return 1;
}

static int check_bad_input(void)
{
	struct align_modes m;
	modes_init_default(&m);
	struct align_tensor in[4], out[2];
	struct align_dims d;
	char text[256];
	int fails = 0;
	const struct align_op *op = ops_find("matmul_bwd");
	memset(&d, 0, sizeof d);
	ops_dims_parse("T=6,D=4,F=3,S=4", &d, text, sizeof text);
	struct matmul_bwd_params p = {4};
	struct matmul_bwd_cfg c;
	struct align_err e = {0};
	op_cfg_tensors(op->impl, &m, &d, in, out, &e);
	fails +=
		expect_refusal("matmul_bwd T % S", matmul_bwd_cfg_init(&c, &p, &m, in, 4, out, 2, ALIGN_DEVICE_CPU, &e),
			       &e, "6 tokens are not whole sequences of S = 4");
	memset(&e, 0, sizeof e);
	p.S = 3;
	in[3].dtype = ALIGN_DT_F32; /* WGRAD_DTYPE=bf16 (the default): main_grad must be bf16 */
	fails += expect_refusal("matmul_bwd main_grad dtype",
				matmul_bwd_cfg_init(&c, &p, &m, in, 4, out, 2, ALIGN_DEVICE_CPU, &e), &e,
				"matmul_bwd: input 'main_grad' must be bf16 [3,4], got f32 [3,4]");
	const struct align_op *rop = ops_find("rmsnorm_bwd");
	struct rmsnorm_bwd_cfg rc;
	ops_dims_parse("T=2,D=8", &d, text, sizeof text);
	memset(&e, 0, sizeof e);
	op_cfg_tensors(rop->impl, &m, &d, in, out, &e);
	in[2].shape[1] = 7;
	fails += expect_refusal("rmsnorm_bwd dy shape",
				rmsnorm_bwd_cfg_init(&rc, NULL, &m, in, 3, out, 2, ALIGN_DEVICE_CPU, &e), &e,
				"rmsnorm_bwd: input 'dy' must be bf16 [2,8], got bf16 [2,7]");
	printf("bad input: %s\n", fails ? "FAIL" : "refused with status 2 and the tensor named");
	return fails;
}

int main(void)
{
	int fails = check_wgrad_orders();
	fails += check_bad_input();
	fails += check_fd_matmul();
	fails += check_fd_rmsnorm();
	fails += check_fd_qnorm();
	for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
		fails += check_op(ops_find(refs[k].op), refs[k].fn);
	printf("test-ops-ref-bwd: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
