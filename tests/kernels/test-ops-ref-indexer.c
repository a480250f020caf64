/* test-ops-ref-indexer.c: fp64 reference checks (as test-ops-ref.c) of the attention index-side ops:
 * rope, rope_bwd, indexer and indexer_bwd (compressor and dsa_indexer as they land). Every result, under every combination of the
 * switches the op reads (MATH_IMPL: portable and libm), every parameter variant and the three fill sets of
 * test-ops.c, is compared with a long double evaluation of the same contract written independently here,
 * against the bound the op's header states (operand roundings that are inputs of the contract, such as the
 * bf16 cos/sin cache, are applied with the numerics.h primitives; everything else is exact algebra).
 * Exit status 0 = pass; prints seed, op, modes and the worst element on failure. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "indexer_bwd.h"
#include "ops.h"
#include "rope.h"
#include "rope_bwd.h"

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
			ld slack = fabsl(theta) * 0x1p-23L + 0x1p-21L + (rc.cs_bf16 ? 0x1p-8L : 0) +
				   (rc.arith_bf16 ? 0x1p-7L : 0);
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

/* rope_bwd: (1) the conjugate rotation of dy within rope's bound (ref_rope under the flipped parameters);
 * (2) bit for bit rope's C twin under the flipped parameters (rope_bwd.h); (3) the adjoint identity that
 * makes it the gradient: <dy, rope(x)> = <rope_bwd(dy), x> for x = dy with its rows rotated by one (a
 * different vector), in long double, within 2^-6 sum |dy| |x| (the bf16 roundings are 2^-8 relative) */
static void ref_rope_bwd(struct ctx *c)
{
	struct rope_params q = rope_bwd_params(c->params);
	struct ctx d = *c;
	d.params = &q;
	ref_rope(&d);
	c->worst = d.worst;
	c->worst_i = d.worst_i;
	const struct align_op *rope = ops_find("rope");
	struct align_dims dims;
	ops_dims_default(rope, &dims);
	const int64_t T = c->in[0].shape[0], H = c->in[0].shape[1], D = c->in[0].shape[2], n = T * H * D;
	dims.v[ALIGN_DIM_T] = T, dims.v[ALIGN_DIM_H] = H, dims.v[ALIGN_DIM_D] = D;
	struct align_tensor in[2], out[1];
	ops_tensor_alloc(rope, 0, 0, &dims, c->m, &in[0]);
	ops_tensor_alloc(rope, 0, 1, &dims, c->m, &in[1]);
	ops_tensor_alloc(rope, 1, 0, &dims, c->m, &out[0]);
	memcpy(in[0].data, c->in[0].data, (size_t)n * sizeof(align_bf16));
	memcpy(in[1].data, c->in[1].data, (size_t)T * sizeof(int32_t));
	if (rope->impl->fwd_cpu(&q, c->m, in, 2, out, 1) != ALIGN_OK ||
	    memcmp(out[0].data, c->out[0].data, (size_t)n * sizeof(align_bf16)))
		judge(c, -2, 1, 0, 0); /* not rope's bytes under the flipped parameters */
	/* x = dy rows rotated by one, y = rope(x) under the op's own parameters */
	const align_bf16 *dy = c->in[0].data, *dx = c->out[0].data;
	align_bf16 *x = in[0].data;
	for (int64_t e = 0; e < n; e++)
		x[e] = dy[(e + D) % n];
	if (rope->impl->fwd_cpu(c->params, c->m, in, 2, out, 1) != ALIGN_OK) {
		judge(c, -3, 1, 0, 0);
	} else {
		const align_bf16 *y = out[0].data;
		ld A = 0, B = 0, M = 0;
		struct rope_cfg rc;
		int64_t lo = 0, hi = D; /* the rotated dims (the copied ones are checked bit for bit above) */
		if (rope_cfg_modes(&rc, c->params, D, c->m, ALIGN_DEVICE_CPU, NULL) == ALIGN_OK)
			lo = rc.first ? 0 : D - rc.rd, hi = rc.first ? rc.rd : D;
		for (int64_t r = 0; r < T * H; r++) { /* the identity holds row by row: skip rows with an inf/NaN */
			ld a = 0, b = 0, mm = 0;
			int finite = 1;
			for (int64_t e = r * D + lo; e < r * D + hi; e++) {
				ld g = align_bf16_to_f32(dy[e]), xv = align_bf16_to_f32(x[e]);
				ld yv = align_bf16_to_f32(y[e]), dv = align_bf16_to_f32(dx[e]);
				finite &= isfinite(g) && isfinite(xv) && isfinite(yv) && isfinite(dv);
				a += g * yv;
				b += dv * xv;
				mm += fabsl(g) * fabsl(xv);
			}
			if (finite)
				A += a, B += b, M += mm;
		}
		if (fabsl(A - B) > 0x1p-6L * M + 0x1p-120L)
			judge(c, -4, 1, 0, 0); /* not the transpose of rope's rotation */
	}
	ops_tensor_free(&in[0]);
	ops_tensor_free(&in[1]);
	ops_tensor_free(&out[0]);
}

/* indexer: scores against the exact weighted relu sum (wb as the contract rounds it), masked entries -inf;
 * idx: min(K, S) selections, -1 exactly for masked entries, the selected set is a top set of the op's own
 * scores, SORTED non-increasing, INDEX ascending, offsets applied */
static void ref_indexer(struct ctx *c)
{
	struct indexer_cfg ic;
	if (indexer_cfg_init(&ic, c->params, c->m, c->in, 3, c->out, 2, ALIGN_DEVICE_CPU, NULL)) {
		judge(c, -1, 1, 0, 0);
		return;
	}
	const align_bf16 *w = c->in[2].data;
	const int32_t *idx = c->out[0].data;
	const float *score = c->out[1].data;
	int64_t kk = ic.K < ic.S ? ic.K : ic.S;
	for (int64_t t = 0; t < ic.T; t++) {
		int64_t vis = (t + 1) / ic.ratio;
		for (int64_t s = 0; s < ic.S; s++) {
			int64_t e = t * ic.S + s;
			if (s >= vis) {
				if (!(isinf(score[e]) && score[e] < 0))
					judge(c, e, 1, 0, 0);
				continue;
			}
			ld ref = 0, A = 0;
			for (int64_t h = 0; h < ic.H; h++) {
				ld wb = indexer_weight(&ic, w[t * ic.H + h]), dot = 0, ab = 0;
				for (int64_t d = 0; d < ic.D; d++) {
					ld pr = ops_ld(&c->in[0], (t * ic.H + h) * ic.D + d) *
						(ld)ops_ld(&c->in[1], s * ic.D + d);
					dot += pr;
					ab += fabsl(pr);
				}
				ref += (dot > 0 ? dot : 0) * wb;
				A += fabsl(wb) * ab;
			}
			if (!(fabsl(ref) <= FLT_MAX && A <= FLT_MAX))
				continue; /* outside the bound's domain (binary32 overflow) */
			ld fp = (ic.D + ic.H + 1) * 0x1p-24L * A;
			ld tol = ic.bf16 ? ulp_bf16(ref) + 0x1p-7L * A + fp : fp;
			judge(c, e, score[e], ref, tol + 0x1p-140L);
		}
		int64_t nsel = 0;
		for (int64_t j = 0; j < ic.K; j++) {
			int32_t v = idx[t * ic.K + j];
			if (j >= kk || (v >= 0 && v - ic.offset >= vis) || (v < 0 && v != -1))
				judge(c, t * ic.K + j, v == -1 ? 0 : 1, 0, 0); /* past k: -1; never a masked entry */
			if (v >= 0)
				nsel++;
		}
		int64_t want = kk < vis ? kk : vis;
		if (nsel != want)
			judge(c, t * ic.K, 1, 0, 0);
		float minsel = INFINITY;
		for (int64_t j = 0; j < kk; j++) {
			int32_t v = idx[t * ic.K + j];
			if (v < 0)
				continue;
			float sv = score[t * ic.S + (v - ic.offset)];
			minsel = sv < minsel ? sv : minsel;
			if (j > 0 && idx[t * ic.K + j - 1] >= 0) {
				int32_t u = idx[t * ic.K + j - 1];
				float su = score[t * ic.S + (u - ic.offset)];
				if (ic.order == ALIGN_INDEXER_TOPK_ORDER_SORTED && !indexer_before(su, u, sv, v))
					judge(c, t * ic.K + j, 1, 0, 0);
				if (ic.order == ALIGN_INDEXER_TOPK_ORDER_INDEX && !(u < v))
					judge(c, t * ic.K + j, 1, 0, 0);
			}
		}
		for (int64_t s = 0; s < vis; s++) { /* an unselected visible entry never beats a selected one */
			int sel = 0;
			for (int64_t j = 0; j < kk && !sel; j++)
				sel = idx[t * ic.K + j] == s + ic.offset;
			if (!sel && score[t * ic.S + s] > minsel)
				judge(c, t * ic.S + s, 1, 0, 0);
		}
	}
}

struct ref_entry {
	const char *op;
	void (*fn)(struct ctx *);
};

/* indexer_bwd: the exact sums of the contract's terms (the relu masks from the op's binary32 dots, the bf16
 * mode's rounded terms as the contract rounds them, the fp32 mode's products exact), against
 * indexer_bwd.h's bound */
static void ref_indexer_bwd(struct ctx *c)
{
	struct indexer_cfg ic;
	if (indexer_bwd_cfg_init(&ic, c->params, c->m, c->in, 4, c->out, 3, ALIGN_DEVICE_CPU, NULL)) {
		judge(c, -1, 1, 0, 0);
		return;
	}
	const align_bf16 *q = c->in[0].data, *k = c->in[1].data, *w = c->in[2].data;
	const float *ds = c->in[3].data;
	int64_t T = ic.T, H = ic.H, D = ic.D, S = ic.S;
	const ld u = 0x1p-24L;
	ld *dd = malloc((size_t)(T * H * S) * sizeof *dd);
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			float wb = indexer_weight(&ic, w[t * H + h]);
			ld acc = 0, A = 0;
			for (int64_t e = 0; e < S; e++) {
				ld v = 0;
				if (indexer_bwd_visible(&ic, t, e)) {
					float dot = indexer_bwd_dot(&ic, q + t * H * D, k + e * D, h), fd, ft;
					indexer_bwd_terms(&ic, dot, ds[t * S + e], wb, &fd, &ft);
					ld term = ic.bf16 ? (ld)ft : (ld)ds[t * S + e] * indexer_relu(dot);
					v = ic.bf16 ? (ld)fd : (dot > 0 ? (ld)ds[t * S + e] * wb : 0);
					acc += term;
					A += fabsl(term);
				}
				dd[(t * H + h) * S + e] = v;
			}
			ld sc = ic.twice ? (ld)ic.s2 * ic.s1 : (ld)ic.s12, ref = acc * sc;
			ld tol = (S * u * A + 0x1p-8L * fabsl(acc)) * fabsl(sc) +
				 (ic.twice ? 2 : 1) * 0x1p-8L * fabsl(ref) + ulp_bf16(fabsl(ref)) + 0x1p-140L;
			if (fabsl(ref) <= FLT_MAX && A <= FLT_MAX)
				judge(c, 2 * (T * H * D) + t * H + h, ops_ld(&c->out[2], t * H + h), ref, tol);
		}
	int fp32 = !ic.bf16;
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++)
			for (int64_t d = 0; d < D; d++) {
				ld ref = 0, A = 0;
				for (int64_t e = 0; e < S; e++) {
					ld pr = dd[(t * H + h) * S + e] * (ld)align_bf16_to_f32(k[e * D + d]);
					ref += pr;
					A += fabsl(pr);
				}
				ld tol = (S + fp32) * u * A + ulp_bf16(fabsl(ref) + (S + fp32) * u * A) / 2 + 0x1p-140L;
				if (fabsl(ref) <= FLT_MAX && A <= FLT_MAX)
					judge(c, (t * H + h) * D + d, ops_ld(&c->out[0], (t * H + h) * D + d), ref,
					      tol);
			}
	for (int64_t e = 0; e < S; e++)
		for (int64_t d = 0; d < D; d++) {
			ld ref = 0, A = 0;
			for (int64_t t = 0; t < T; t++)
				for (int64_t h = 0; h < H; h++) {
					ld pr = dd[(t * H + h) * S + e] * (ld)align_bf16_to_f32(q[(t * H + h) * D + d]);
					ref += pr;
					A += fabsl(pr);
				}
			ld tol = (T * H + fp32) * u * A + ulp_bf16(fabsl(ref) + (T * H + fp32) * u * A) / 2 + 0x1p-140L;
			if (fabsl(ref) <= FLT_MAX && A <= FLT_MAX)
				judge(c, T * H * D + e * D + d, ops_ld(&c->out[1], e * D + d), ref, tol);
		}
	free(dd);
}

static const struct ref_entry refs[] = {
	{"rope", ref_rope},
	{"rope_bwd", ref_rope_bwd},
	{"indexer", ref_indexer},
	{"indexer_bwd", ref_indexer_bwd},
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
	printf("%-12s %4d runs: worst error %.3Lf of the stated bound%s\n", op->name, runs, worst,
	       fails ? "  FAIL" : "");
	free(params);
	return fails;
}

/* indexer_bwd against central differences (h = 2^-12) of the long double loss L = sum over visible (t, c) of
 * dscore * sum_h relu(dot) wb, INDEXER_SCORE=fp32, both weight scales (T = 8, H = 2, D = 4, S = 2, ratio
 * 4): dq, dk with wb fixed at the contract's bf16 value, dw through wb = w * scale unrounded;
 * |op - fd| <= 2^-7 |fd| + 2^-14 for dq, dk (the bf16 store) and 2^-6 |fd| + 2^-14 for dw (three bf16
 * roundings); the seed keeps the dots off relu's kink (a dot within h of 0 would fail the check) */
static ld ib_loss(const ld *q, const ld *k, const ld *wb, const float *ds, int T, int H, int D, int S)
{
	ld L = 0;
	for (int t = 0; t < T; t++)
		for (int e = 0; e < S; e++) {
			if (e >= (t + 1) / 4)
				continue;
			for (int h = 0; h < H; h++) {
				ld dot = 0;
				for (int d = 0; d < D; d++)
					dot += q[(t * H + h) * D + d] * k[e * D + d];
				L += ds[t * S + e] * (dot > 0 ? dot : 0) * wb[t * H + h];
			}
		}
	return L;
}

static int check_indexer_bwd_fd(void)
{
	const struct align_op *op = ops_find("indexer_bwd");
	enum { T = 8, H = 2, D = 4, S = 2 };
	struct align_dims dm;
	ops_dims_parse("T=8,H=2,D=4,S=2", &dm, NULL, 0);
	int fails = 0;
	for (int twice = 0; twice < 2; twice++) {
		struct align_modes m;
		modes_init_default(&m);
		m.v[MODE_INDEXER_SCORE] = ALIGN_INDEXER_SCORE_FP32;
		m.v[MODE_INDEXER_WEIGHT_SCALE] =
			twice ? ALIGN_INDEXER_WEIGHT_SCALE_TWICE : ALIGN_INDEXER_WEIGHT_SCALE_ONCE;
		struct align_tensor in[4], out[3];
		for (int i = 0; i < 4; i++)
			ops_tensor_alloc(op, 0, i, &dm, &m, &in[i]);
		for (int i = 0; i < 3; i++)
			ops_tensor_alloc(op, 1, i, &dm, &m, &out[i]);
		ld q[T * H * D], k[S * D], w[T * H], wb[T * H];
		uint64_t st = 991;
		for (int i = 0; i < T * H * D + S * D + T * H + T * S; i++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			float v = align_round_bf16((float)((int)(st >> 40) % 4000 - 2000) / 1000.0f);
			if (i < T * H * D)
				((align_bf16 *)in[0].data)[i] = align_f32_to_bf16(v), q[i] = v;
			else if (i < T * H * D + S * D)
				((align_bf16 *)in[1].data)[i - T * H * D] = align_f32_to_bf16(v), k[i - T * H * D] = v;
			else if (i < T * H * D + S * D + T * H)
				((align_bf16 *)in[2].data)[i - T * H * D - S * D] = align_f32_to_bf16(v),
									       w[i - T * H * D - S * D] = v;
			else
				((float *)in[3].data)[i - T * H * D - S * D - T * H] = v;
		}
		struct indexer_params prm;
		op->impl->params_default(&prm, &dm);
		struct indexer_cfg ic;
		indexer_bwd_cfg_init(&ic, &prm, &m, in, 4, out, 3, ALIGN_DEVICE_CPU, NULL);
		ld sc = twice ? (ld)ic.s2 * ic.s1 : (ld)ic.s12;
		for (int i = 0; i < T * H; i++)
			wb[i] = indexer_weight(&ic, ((align_bf16 *)in[2].data)[i]);
		if (op->impl->fwd_cpu(&prm, &m, in, 4, out, 3)) {
			printf("FAIL indexer_bwd finite differences: run failed\n");
			fails++;
		}
		const ld hh = 0x1p-12L;
		ld worst = 0;
		int n = T * H * D + S * D + T * H;
		for (int i = 0; i < n && !fails; i++) {
			ld *v = i < T * H * D		? &q[i]
				: i < T * H * D + S * D ? &k[i - T * H * D]
							: &w[i - T * H * D - S * D];
			ld keep = *v, lp, lm;
			if (i >= T * H * D + S * D) { /* w: through wb = w * scale, unrounded */
				int j = i - T * H * D - S * D;
				ld kb = wb[j];
				wb[j] = (keep + hh) * sc;
				lp = ib_loss(q, k, wb, in[3].data, T, H, D, S);
				wb[j] = (keep - hh) * sc;
				lm = ib_loss(q, k, wb, in[3].data, T, H, D, S);
				wb[j] = kb;
			} else {
				*v = keep + hh;
				lp = ib_loss(q, k, wb, in[3].data, T, H, D, S);
				*v = keep - hh;
				lm = ib_loss(q, k, wb, in[3].data, T, H, D, S);
				*v = keep;
			}
			ld fd = (lp - lm) / (2 * hh);
			ld got = i < T * H * D		 ? ops_ld(&out[0], i)
				 : i < T * H * D + S * D ? ops_ld(&out[1], i - T * H * D)
							 : ops_ld(&out[2], i - T * H * D - S * D);
			ld tol = (i < T * H * D + S * D ? 0x1p-7L : 0x1p-6L) * fabsl(fd) + 0x1p-14L;
			ld r = fabsl(got - fd) / tol;
			worst = r > worst ? r : worst;
			if (r > 1) {
				printf("FAIL indexer_bwd finite difference (scale %s): gradient %d: op %.9Lg, central "
				       "difference %.9Lg\n",
				       twice ? "twice" : "once", i, got, fd);
				fails++;
			}
		}
		printf("indexer_bwd  finite differences (scale %s, %d gradients): worst %.3Lf of the bound\n",
		       twice ? "twice" : "once", n, worst);
		for (int i = 0; i < 4; i++)
			ops_tensor_free(&in[i]);
		for (int i = 0; i < 3; i++)
			ops_tensor_free(&out[i]);
	}
	return fails;
}

int main(void)
{
	int fails = check_indexer_bwd_fd();
	for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
		fails += check_op(ops_find(refs[k].op), refs[k].fn);
	printf("test-ops-ref-indexer: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
