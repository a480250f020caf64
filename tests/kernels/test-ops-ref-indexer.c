/* test-ops-ref-indexer.c: fp64 reference checks (as test-ops-ref.c) of the attention index-side ops:
 * rope (and, as they land, indexer, compressor, dsa_indexer). Every result, under every combination of the
 * switches the op reads (MATH_IMPL: portable and libm), every parameter variant and the three fill sets of
 * test-ops.c, is compared with a long double evaluation of the same contract written independently here,
 * against the bound the op's header states (operand roundings that are inputs of the contract, such as the
 * bf16 cos/sin cache, are applied with the numerics.h primitives; everything else is exact algebra).
 * Exit status 0 = pass; prints seed, op, modes and the worst element on failure. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "rope.h"

#define SEED 0x1d7e5eedull
#define NSETS 3

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
	ld r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
	if (r > c->worst) {
		c->worst = r;
		c->worst_i = i;
		if (getenv("REF_DEBUG") && r > 1)
			printf("  element %" PRId64 ": got %La ref %La tol %La\n", i, got, ref, tol);
	}
}

/* rope: y = rotation of each pair by theta = pos * f_j (f_j: the binary32 value of rope.h step 1) */
static void ref_rope(struct ctx *c)
{
	const struct rope_params *p = c->params;
	struct rope_cfg rc;
	int64_t T = c->in[0].shape[0], H = c->in[0].shape[1], D = c->in[0].shape[2];
	if (rope_cfg_modes(&rc, p, D, c->m, ALIGN_DEVICE_CPU, NULL)) {
		judge(c, -1, 1, 0, 0);
		return;
	}
	const int32_t *pos = c->in[1].data;
	for (int64_t t = 0; t < T; t++)
		for (int j = 0; j < rc.rd / 2; j++) {
			ld theta = (ld)pos[t] * (ld)rope_freq(&rc, j);
			ld co = cosl(theta), si = sinl(theta) * (rc.inverse ? -1 : 1);
			if (rc.cs_bf16) { /* the cache's rounding is part of the contract: round the exact value */
				co = align_round_bf16((float)co);
				si = align_round_bf16((float)si);
			}
			ld slack = fabsl(theta) * 0x1p-23L + 0x1p-21L + (rc.cs_bf16 ? 0x1p-8L : 0) + (rc.arith_bf16 ? 0x1p-7L : 0);
			for (int64_t h = 0; h < H; h++) {
				int64_t row = (t * H + h) * D, ia, ib;
				rope_pair_index(&rc, D, j, &ia, &ib);
				ld a = ops_ld(&c->in[0], row + ia), b = ops_ld(&c->in[0], row + ib);
				ld ya = a * co - b * si, yb = a * si + b * co;
				ld s = (fabsl(a) + fabsl(b)) * slack;
				judge(c, row + ia, ops_ld(&c->out[0], row + ia), ya, ulp_bf16(ya) + s + 0x1p-133L);
				judge(c, row + ib, ops_ld(&c->out[0], row + ib), yb, ulp_bf16(yb) + s + 0x1p-133L);
			}
		}
	/* the copied dims are bit for bit the input */
	for (int64_t r = 0; r < T * H; r++)
		for (int64_t k = 0; k < D - rc.rd; k++) {
			int64_t e = r * D + (rc.first ? rc.rd : 0) + k;
			if (((const align_bf16 *)c->in[0].data)[e] != ((const align_bf16 *)c->out[0].data)[e])
				judge(c, e, 1, 0, 0);
		}
}

struct ref_entry {
	const char *op;
	void (*fn)(struct ctx *);
};

static const struct ref_entry refs[] = {
	{"rope", ref_rope},
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
				if (modes_gpu_only_in(&m, NULL) >= 0)
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
	printf("%-12s %4d runs: worst error %.3Lf of the stated bound%s\n", op->name, runs, worst, fails ? "  FAIL" : "");
	free(params);
	return fails;
}

int main(void)
{
	int fails = 0;
	for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
		fails += check_op(ops_find(refs[k].op), refs[k].fn);
	printf("test-ops-ref-indexer: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
