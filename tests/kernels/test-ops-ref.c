/* test-ops-ref.c: every op result, under every combination of the switches it reads, lies
 * within the error bound its header states against an fp64 (long double) reference computed
 * independently here from the same inputs. Ops covered: matmul, rmsnorm, qnorm, swiglu,
 * moe_combine, mhc_post, sparse_attn (router, mhc_pre and mhc_head: tests/kernels/test-ops-ref2.c).
 * Exit status 0 = pass; prints the seed, op, modes and worst element on failure. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "ops.h"
#include "sparse_attn.h"
#include "swiglu.h"

#define SEED 0x0f64f64ull
#define U 0x1p-24L
#define UB 0x1p-8L /* bf16 unit roundoff: 8 significant bits */

typedef long double ld;

/* one bf16 ulp at |v| (binade of v; subnormal spacing below 2^-126) */
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
	ld worst;	 /* max |err| / tol */
	int64_t worst_i; /* element */
	int out_index;
};

static void judge(struct ctx *c, int64_t i, ld got, ld ref, ld tol)
{
	ld err = fabsl(got - ref);
	if (isnan(got) || isnan(ref))
		err = isnan(got) && isnan(ref) ? 0 : INFINITY;
	ld r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
	if (r > c->worst) {
		c->worst = r;
		c->worst_i = i;
		if (getenv("REF_DEBUG") && r > 1)
			printf("  element %" PRId64 ": got %La ref %La tol %La\n", i, got, ref, tol);
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

static void ref_matmul(struct ctx *c)
{
	int64_t T = c->in[0].shape[0], D = c->in[0].shape[1], F = c->in[1].shape[0];
	int opd = c->m->v[MODE_MATMUL_OPERAND], acc = c->m->v[MODE_MATMUL_ACCUM];
	for (int64_t t = 0; t < T; t++)
		for (int64_t f = 0; f < F; f++) {
			ld s = 0, S = 0;
			for (int64_t k = 0; k < D; k++) {
				ld p = (ld)matmul_operand(ops_ld(&c->in[0], t * D + k), opd) *
				       (ld)matmul_operand(ops_ld(&c->in[1], f * D + k), opd);
				s += p;
				S += fabsl(p);
			}
			ld tol = acc == ALIGN_MATMUL_ACCUM_SEQ	     ? D * U * S
				 : acc == ALIGN_MATMUL_ACCUM_SPLIT16 ? ((D + 15) / 16 + 16) * U * S
								     : U * fabsl(s) + D * 0x1p-53L * S;
			if (c->out[0].dtype == ALIGN_DT_BF16)
				tol += ulp_bf16(fabsl(s) + tol) / 2;
			judge(c, t * F + f, ld_out(c, 0, t * F + f), s, tol + 0x1p-149L);
		}
}

static ld epsv(const struct ctx *c)
{
	return c->m->v[MODE_RMSNORM_EPS] == ALIGN_RMSNORM_EPS_1E_5 ? (ld)1e-5f : (ld)1e-6f;
}

static void ref_rmsnorm(struct ctx *c)
{
	int64_t T = c->in[0].shape[0], D = c->in[0].shape[1];
	const float *w = c->in[1].data;
	int before = c->m->v[MODE_RMSNORM_CAST] == ALIGN_RMSNORM_CAST_BEFORE_WEIGHT;
	for (int64_t t = 0; t < T; t++) {
		ld ss = 0;
		for (int64_t j = 0; j < D; j++)
			ss += ld_in(c, 0, t * D + j) * ld_in(c, 0, t * D + j);
		ld r = 1.0L / sqrtl(ss / D + epsv(c));
		for (int64_t j = 0; j < D; j++) {
			ld wj = c->m->v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_BF16 ? (ld)align_round_bf16(w[j])
											  : (ld)w[j];
			ld ref = wj * ld_in(c, 0, t * D + j) * r;
			judge(c, t * D + j, ld_out(c, 0, t * D + j), ref,
			      ((before ? 3 : 1) * UB + (D + 16) * U) * fabsl(ref) + 0x1p-133L);
		}
	}
}

static void ref_qnorm(struct ctx *c)
{
	int64_t R = c->in[0].shape[0] * c->in[0].shape[1], D = c->in[0].shape[2];
	int mode = c->m->v[MODE_QNORM_MODE];
	for (int64_t r = 0; r < R; r++) {
		ld ss = 0;
		for (int64_t j = 0; j < D; j++)
			ss += ld_in(c, 0, r * D + j) * ld_in(c, 0, r * D + j);
		ld f = 1.0L / sqrtl(ss / D + epsv(c));
		for (int64_t j = 0; j < D; j++) {
			ld ref = ld_in(c, 0, r * D + j) * f;
			ld k = mode == 0 ? 4 : mode == 1 ? 1 : mode == 2 ? 2 : 0;
			ld tol = (k * UB + (D + 16) * U) * fabsl(ref);
			judge(c, r * D + j, ld_out(c, 0, r * D + j), ref, tol + 0x1p-140L);
		}
	}
}

static void ref_swiglu(struct ctx *c)
{
	const struct swiglu_params *p = c->params;
	int64_t T = c->in[0].shape[0], F = c->in[0].shape[1];
	ld L = p->limit;
	int clamp = L > 0 && (!p->shared || c->m->v[MODE_SWIGLU_SHARED_CLAMP] == ALIGN_SWIGLU_SHARED_CLAMP_ON);
	int after = c->m->v[MODE_SWIGLU_PROBS] == ALIGN_SWIGLU_PROBS_AFTER_W2;
	int two = c->m->v[MODE_SWIGLU_ROUND] == ALIGN_SWIGLU_ROUND_DOUBLE ||
		  c->m->v[MODE_SWIGLU_SCALE] == ALIGN_SWIGLU_SCALE_BF16;
	const float *prob = c->in[2].data;
	for (int64_t t = 0; t < T; t++)
		for (int64_t f = 0; f < F; f++) {
			int64_t i = t * F + f;
			ld g = ld_in(c, 0, i), u = ld_in(c, 1, i);
			if (clamp) {
				u = u < -L ? -L : u > L ? L : u;
				g = g > L ? L : g;
			}
			ld a = g / (1.0L + expl(-g)) * u;
			ld ref = after ? a : (ld)prob[t] * a;
			ld tol = ((after || !two ? 1 : 3) * UB + 8 * U) * fabsl(ref);
			judge(c, i, ld_out(c, 0, i), ref, tol + 0x1p-133L);
		}
}

static void ref_moe_combine(struct ctx *c)
{
	int64_t T = c->in[0].shape[0], K = c->in[0].shape[1], D = c->in[0].shape[2];
	int after = c->m->v[MODE_SWIGLU_PROBS] == ALIGN_SWIGLU_PROBS_AFTER_W2,
	    bf16 = c->m->v[MODE_MOE_COMBINE_ACC] == ALIGN_MOE_COMBINE_ACC_BF16;
	const float *w = c->in[2].data;
	for (int64_t t = 0; t < T; t++)
		for (int64_t d = 0; d < D; d++) {
			ld s = ld_in(c, 3, t * D + d), S = fabsl(s);
			for (int64_t k = 0; k < K; k++) {
				ld v = ld_in(c, 0, (t * K + k) * D + d);
				if (after)
					v *= (ld)w[t * K + k];
				s += v;
				S += fabsl(v);
			}
			ld tol = bf16 ? (K + 2) * UB * S + ulp_bf16(s) : ulp_bf16(s) / 2 + (K + 1) * U * S;
			judge(c, t * D + d, ld_out(c, 0, t * D + d), s, tol + 0x1p-133L);
		}
}

static void ref_mhc_post(struct ctx *c)
{
	int64_t T = c->in[0].shape[0], N = c->in[0].shape[1], D = c->in[0].shape[2];
	int tr = c->m->v[MODE_MHC_HRES_TRANSPOSE] == ALIGN_MHC_HRES_TRANSPOSE_ON,
	    dbl = c->m->v[MODE_MHC_POST_ROUND] == ALIGN_MHC_POST_ROUND_DOUBLE;
	int cb = dbl || c->m->v[MODE_MHC_COEF] == ALIGN_MHC_COEF_BF16;
	const float *post = c->in[2].data, *comb = c->in[3].data;
	for (int64_t t = 0; t < T; t++)
		for (int64_t k = 0; k < N; k++)
			for (int64_t d = 0; d < D; d++) {
				float pk = post[t * N + k];
				ld pf = (ld)(cb ? align_round_bf16(pk) : pk) * ld_in(c, 1, t * D + d);
				ld mixed = 0, S = fabsl(pf);
				for (int64_t j = 0; j < N; j++) {
					float h = tr ? comb[(t * N + j) * N + k] : comb[(t * N + k) * N + j];
					ld term = (ld)(cb ? align_round_bf16(h) : h) * ld_in(c, 0, (t * N + j) * D + d);
					mixed += term;
					S += fabsl(term);
				}
				ld ref = mixed + pf;
				ld tol = ulp_bf16(ref) + (N + 1) * U * S + (dbl ? UB * (fabsl(mixed) + fabsl(pf)) : 0);
				int64_t i = (t * N + k) * D + d;
				judge(c, i, ld_out(c, 0, i), ref, tol + 0x1p-133L);
			}
}

/* sparse_attn.h: exact sink softmax over the valid slots (their order does not matter in fp64) */
static void ref_sparse_attn(struct ctx *c)
{
	const struct sparse_attn_params *p = c->params;
	int64_t T = c->in[0].shape[0], H = c->in[0].shape[1], D = c->in[0].shape[2], S = c->in[1].shape[0],
		N = c->in[2].shape[1];
	const int32_t *idx = c->in[2].data;
	const float *sinkp = c->in[3].data;
	int pb = c->m->v[MODE_CSA_P] == ALIGN_CSA_P_BF16, sb = c->m->v[MODE_CSA_SINK] == ALIGN_CSA_SINK_BF16;
	ld *sc = malloc(sizeof(ld) * (size_t)N), *ds = malloc(sizeof(ld) * (size_t)N);
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			ld s = (ld)(sb ? align_round_bf16(sinkp[h]) : sinkp[h]), m = s;
			int any = 0;
			for (int64_t k = 0; k < N; k++) {
				int32_t j = idx[t * N + k];
				if (j < 0 || j >= S)
					continue;
				ld dot = 0, abs = 0;
				for (int64_t d = 0; d < D; d++) {
					ld pr = ld_in(c, 0, (t * H + h) * D + d) * ld_in(c, 1, (int64_t)j * D + d);
					dot += pr;
					abs += fabsl(pr);
				}
				sc[k] = (ld)p->scale * dot;
				ds[k] = (ld)p->scale * D * U * abs;
				m = sc[k] > m ? sc[k] : m;
				any = 1;
			}
			if (!any)
				continue;
			ld den = expl(s - m), dsmax = 0;
			for (int64_t k = 0; k < N; k++) {
				int32_t j = idx[t * N + k];
				if (j < 0 || j >= S)
					continue;
				den += expl(sc[k] - m);
				ld e = ds[k] + 4 * U * (fabsl(sc[k]) + fabsl(m));
				dsmax = e > dsmax ? e : dsmax;
			}
			for (int64_t d = 0; d < D; d++) {
				ld ref = 0, A = 0;
				for (int64_t k = 0; k < N; k++) {
					int32_t j = idx[t * N + k];
					if (j < 0 || j >= S)
						continue;
					ld pk = expl(sc[k] - m) / den, v = ld_in(c, 1, (int64_t)j * D + d);
					ref += pk * v;
					A += pk * fabsl(v);
				}
				if (!isfinite(ref))
					continue;
				ld tol = ulp_bf16(ref) + (pb ? UB * A : 0) + (4 * dsmax + (N + D + 16) * U) * 2 * A;
				int64_t i = (t * H + h) * D + d;
				judge(c, i, ld_out(c, 0, i), ref, tol + 0x1p-133L);
			}
		}
	free(sc);
	free(ds);
}

struct ref_entry {
	const char *op;
	void (*fn)(struct ctx *);
};

static const struct ref_entry refs[] = {
	{"matmul", ref_matmul},		  {"rmsnorm", ref_rmsnorm},	    {"qnorm", ref_qnorm},
	{"swiglu", ref_swiglu},		  {"moe_combine", ref_moe_combine}, {"mhc_post", ref_mhc_post},
	{"sparse_attn", ref_sparse_attn},
};

static int check_op(const struct align_op *op, void (*fn)(struct ctx *))
{
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
			if (modes_gpu_only_in(&m, NULL) >= 0 || ops_refused_in(op, &m))
				continue; /* GPU-only values: the C twin refuses them */
			struct align_tensor in[8], out[8];
			for (int i = 0; i < im->n_in; i++) {
				ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
				ops_fill_input(op, i, &in[i], SEED, 0);
			}
			for (int i = 0; i < im->n_out; i++)
				ops_tensor_alloc(op, 1, i, &d, &m, &out[i]);
			struct ctx c = {&m, in, out, params, 0, -1, 0};
			if (im->fwd_cpu(params, &m, in, im->n_in, out, im->n_out) != ALIGN_OK) {
				printf("FAIL %s: run failed\n", op->name);
				fails++;
			} else {
				fn(&c);
				runs++;
				if (c.worst > worst)
					worst = c.worst;
				if (c.worst > 1) {
					char buf[2048];
					modes_format(&m, buf, sizeof buf);
					printf("FAIL %s variant %d element %" PRId64
					       ": error %.3Lg x bound (seed 0x%llx) modes %s\n",
					       op->name, var, c.worst_i, c.worst, (unsigned long long)SEED, buf);
					fails++;
				}
			}
			for (int i = 0; i < im->n_in; i++)
				ops_tensor_free(&in[i]);
			for (int i = 0; i < im->n_out; i++)
				ops_tensor_free(&out[i]);
		}
	printf("%-12s %4d mode combinations: worst error %.3Lf of the stated bound%s\n", op->name, runs, worst,
	       fails ? "  FAIL" : "");
	free(params);
	return fails;
}

int main(void)
{
	int fails = 0;
	for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
		fails += check_op(ops_find(refs[k].op), refs[k].fn);
	printf("test-ops-ref: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
