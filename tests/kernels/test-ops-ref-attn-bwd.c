/* test-ops-ref-attn-bwd.c: checks of attn_bwd (kernels/ops/attn_bwd.h), the attention layer's backward composed
 * on the backward ops.
 *   compose  every output is, byte for byte, the composition rebuilt here from the ops' own entry points: the
 *            forward's intermediates from attn's forward twin (q, kv, o) and the rmsnorm, qnorm, rope,
 *            compressor and indexer twins with attn.h's element code (the linears, the index sets, the
 *            indexer-query rotation); then matmul_bwd, rope_bwd, sparse_attn_bwd, qnorm_bwd, rmsnorm_bwd and
 *            compressor_bwd in attn_bwd.h's order, and the dx sum written here; per variant (csa, hca with a
 *            compressed entry and two rows outside it, swa) under the defaults, every value of every switch
 *            attn_bwd reads one at a time (fill set 0) and random assignments of all of them (every fill set of
 *            test-ops.c); the return codes must agree too (a value a sub-op refuses is refused the same way).
 *   fd       central differences of the forward twin (objective sum dy . y in long double, y the twin's bf16
 *            output) for a few entries of every gradient output and every variant, within a loose bound: the
 *            twin rounds y to bf16, so its differences carry those roundings (the step is large to keep them
 *            small: 2^-4 relative for the bf16 weights, which stay bf16-exact); the sign and size of each
 *            gradient are what this checks, the bits are compose's.
 * Determinism and each switch's effect: test-ops.c. Exit status 0 = pass; prints the modes and fill set of a
 * failure. */
#define ALIGN_NAN_WRITTEN_ORDER 1 /* the dx sum's NaN as attn_bwd.c picks it (nan_host.h) */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_bwd.h"
#include "indexer.h"
#include "ops.h"

#define SEED 0x5eedab1dull
#define NSETS 3
#define FD_TOL 0.05L /* relative, of g . step */
/* the step along the direction, of the rms of the input perturbed: large enough that g . step stands above the
 * forward's bf16 roundings, small enough for the curvature (2^-4: 2 of 40 directions off by 5-20%; 2^-3: all
 * within 4%); ape only reaches y through hca's single compressed entry (3 of 130 queries read it), so its step
 * is the rms itself (it enters the window softmax as an additive logit: near linear there, 1.4% measured) */
#define FD_STEP 0x1p-3L
#define FD_STEP_APE 1.0L

typedef long double ld;

static const struct align_op *OP;

static struct align_tensor view(void *data, int dtype, int ndim, int64_t a, int64_t b, int64_t c, const char *name)
{
	struct align_tensor t;
	memset(&t, 0, sizeof t);
	t.data = data;
	t.dtype = dtype;
	t.ndim = ndim;
	t.shape[0] = a;
	t.shape[1] = b;
	t.shape[2] = c;
	t.name = name;
	return t;
}

/* a scratch buffer of n elements of es bytes, freed by freeall */
static void *pool[128];
static int npool;

static void *buf(int64_t n, size_t es)
{
	void *p = calloc((size_t)(n > 0 ? n : 1), es);
	pool[npool++] = p;
	return p;
}

static void freeall(void)
{
	while (npool)
		free(pool[--npool]);
}

static int run_op(const char *name, const void *p, const struct align_modes *m, struct align_tensor *in, int n_in,
		  struct align_tensor *out, int n_out)
{
	return ops_find(name)->impl->fwd_cpu(p, m, in, n_in, out, n_out);
}

/* out[r*ldo + g*mm + j] = attn_linear(a + r*lda + g*ga, w + (g*mm + j)*n, n) */
static void lin(const align_bf16 *a, int64_t rows, int64_t lda, const align_bf16 *w, int64_t n, int64_t mm,
		int64_t groups, int64_t ga, align_bf16 *out, int64_t ldo)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t g = 0; g < groups; g++)
			for (int64_t j = 0; j < mm; j++)
				out[r * ldo + g * mm + j] = attn_linear(a + r * lda + g * ga, w + (g * mm + j) * n, n);
}

static float *widen(const align_bf16 *a, int64_t rows, int64_t n, int64_t lda, int64_t off)
{
	float *f = buf(rows * n, 4);
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < n; j++)
			f[r * n + j] = align_bf16_to_f32(a[r * lda + off + j]);
	return f;
}

/* matmul_bwd of one linear; dw gets db widened to f32 */
static int mmb(const struct align_modes *mm, int wdt, int64_t rows, int64_t K, int64_t N, const align_bf16 *a,
	       int64_t lda, int64_t offa, const align_bf16 *w, const align_bf16 *dy, int64_t ldy, int64_t offy,
	       align_bf16 *da, float *dw)
{
	struct align_tensor mi[4] = {view(widen(a, rows, K, lda, offa), ALIGN_DT_F32, 2, rows, K, 0, "a"),
				     view(widen(w, N, K, K, 0), ALIGN_DT_F32, 2, N, K, 0, "b"),
				     view(widen(dy, rows, N, ldy, offy), ALIGN_DT_F32, 2, rows, N, 0, "dy"),
				     view(buf(N * K, 4), wdt, 2, N, K, 0, "main_grad")};
	struct align_tensor mo[2] = {view(da, ALIGN_DT_BF16, 2, rows, K, 0, "da"),
				     view(buf(N * K, 4), wdt, 2, N, K, 0, "db")};
	struct matmul_bwd_params mp = {0};
	int rc = run_op("matmul_bwd", &mp, mm, mi, 4, mo, 2);
	for (int64_t i = 0; i < N * K; i++)
		dw[i] = ops_ld(&mo[1], i);
	return rc;
}

static int rmsb(const struct align_modes *m, int64_t rows, int64_t D, const align_bf16 *x, const float *w,
		const align_bf16 *dy, align_bf16 *dx, float *dw)
{
	int dt = m->v[MODE_RMSNORM_BWD_DW_DTYPE] == ALIGN_RMSNORM_BWD_DW_DTYPE_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
	struct align_tensor ri[3] = {view((void *)x, ALIGN_DT_BF16, 2, rows, D, 0, "x"),
				     view((void *)w, ALIGN_DT_F32, 1, D, 0, 0, "w"),
				     view((void *)dy, ALIGN_DT_BF16, 2, rows, D, 0, "dy")};
	struct align_tensor ro[2] = {view(dx, ALIGN_DT_BF16, 2, rows, D, 0, "dx"),
				     view(buf(D, 4), dt, 1, D, 0, 0, "dw")};
	struct rmsnorm_bwd_params rp = {0};
	int rc = run_op("rmsnorm_bwd", &rp, m, ri, 3, ro, 2);
	for (int64_t i = 0; i < D; i++)
		dw[i] = ops_ld(&ro[1], i);
	return rc;
}

static int rope(const char *name, const struct rope_params *rp, const struct align_modes *m, const int32_t *pos,
		int64_t T, int64_t H, int64_t F, const align_bf16 *x, align_bf16 *y)
{
	struct align_tensor ri[2] = {view((void *)x, ALIGN_DT_BF16, 3, T, H, F, "x"),
				     view((void *)pos, ALIGN_DT_I32, 1, T, 0, 0, "pos")};
	struct align_tensor ro = view(y, ALIGN_DT_BF16, 3, T, H, F, "y");
	return run_op(name, rp, m, ri, 2, &ro, 1);
}

#define TRY(x)                                                                                                         \
	do {                                                                                                           \
		int rc_ = (x);                                                                                         \
		if (rc_)                                                                                               \
			return rc_;                                                                                    \
	} while (0)

/* the compressor (rotate 0: main; 1: the indexer's) over the first nc*r rows of x */
static int comp(const struct attn_params *p, const struct align_modes *m, int rotate, const align_bf16 *x, int64_t rows,
		int64_t D, const align_bf16 *wkv, const align_bf16 *wg, int64_t cF, const float *ape, int64_t r,
		const float *w, int64_t F, int64_t nc, align_bf16 *out)
{
	struct compressor_params cp = {rotate, p->rope, 0};
	struct align_tensor ci[5] = {view((void *)x, ALIGN_DT_BF16, 2, rows, D, 0, "x"),
				     view((void *)wkv, ALIGN_DT_BF16, 2, cF, D, 0, "wkv"),
				     view((void *)wg, ALIGN_DT_BF16, 2, cF, D, 0, "wgate"),
				     view((void *)ape, ALIGN_DT_F32, 2, r, cF, 0, "ape"),
				     view((void *)w, ALIGN_DT_F32, 1, F, 0, 0, "w")};
	struct align_tensor co = view(out, ALIGN_DT_BF16, 2, nc, F, 0, "c");
	return run_op("compressor", &cp, m, ci, 5, &co, 1);
}

/* attn_bwd.h's steps by hand into out (dims from d) */
static int compose(const struct align_dims *d, const struct attn_params *p, const struct align_modes *m,
		   struct align_tensor *in, struct align_tensor *out)
{
	const int64_t T = d->v[ALIGN_DIM_T], D = d->v[ALIGN_DIM_D], G = d->v[ALIGN_DIM_G], H = d->v[ALIGN_DIM_H];
	const int64_t F = d->v[ALIGN_DIM_F], K = d->v[ALIGN_DIM_K], E = d->v[ALIGN_DIM_E], N = d->v[ALIGN_DIM_N];
	const int64_t S = d->v[ALIGN_DIM_S], V = p->window, GH = G * H, HF = H * F, GE = G * E;
	const int64_t r = p->variant == ATTN_CSA ? 4 : p->variant == ATTN_HCA ? 128 : 0, cf = r == 4 ? 2 : 1;
	const int64_t nc = r ? T / r : 0, C = p->variant == ATTN_CSA ? p->topk : nc, NS = V + C;
	const align_bf16 *x = in[0].data, *wd = in[1].data, *wq = in[2].data, *woa = in[5].data, *wob = in[6].data;
	const align_bf16 *dy = in[7].data;
	const float *ape = in[3].data, *vec = in[4].data;
	float *dwd = out[1].data, *dwq = out[2].data, *dape = out[3].data, *dvec = out[4].data;
	float *dwoa = out[5].data, *dwob = out[6].data;
	int wdt = m->v[MODE_WGRAD_DTYPE] == ALIGN_WGRAD_DTYPE_FP32 ? ALIGN_DT_F32 : ALIGN_DT_BF16;
	struct align_modes mm = *m;
	mm.v[MODE_MATMUL_OUT] = ALIGN_MATMUL_OUT_BF16;
	mm.v[MODE_MATMUL_OPERAND] = ALIGN_MATMUL_OPERAND_BF16;
	memset(dwd, 0, sizeof(float) * (size_t)(in[1].shape[0] * D));
	memset(dwq, 0, sizeof(float) * (size_t)(in[2].shape[0] * K));
	memset(dape, 0, sizeof(float) * (size_t)in[3].shape[0]);
	memset(dvec, 0, sizeof(float) * (size_t)in[4].shape[0]);
	/* the forward: attn's twin for q, kv, o; the intermediates by the ops */
	align_bf16 *q = buf(T * GH * F, 2), *kv = buf(T * F, 2), *o = buf(T * GH * F, 2);
	struct align_tensor fo[4] = {
		view(buf(T * D, 2), ALIGN_DT_BF16, 2, T, D, 0, "y"), view(q, ALIGN_DT_BF16, 3, T, GH, F, "q"),
		view(kv, ALIGN_DT_BF16, 2, T, F, 0, "kv"), view(o, ALIGN_DT_BF16, 3, T, GH, F, "o")};
	TRY(run_op("attn", p, m, in, 7, fo, 4));
	int32_t *pos = buf(T, 4);
	for (int64_t t = 0; t < T; t++)
		pos[t] = (int32_t)t;
	align_bf16 *qa = buf(T * K, 2), *qr = buf(T * K, 2), *qb = buf(T * GH * F, 2), *kva = buf(T * F, 2);
	lin(x, T, D, wd, D, K, 1, 0, qa, K);
	struct rmsnorm_params rp = {0};
	struct align_tensor ri[2] = {view(qa, ALIGN_DT_BF16, 2, T, K, 0, "x"),
				     view((void *)vec, ALIGN_DT_F32, 1, K, 0, 0, "w")};
	struct align_tensor ro = view(qr, ALIGN_DT_BF16, 2, T, K, 0, "y");
	TRY(run_op("rmsnorm", &rp, m, ri, 2, &ro, 1));
	lin(qr, T, K, wq, K, GH * F, 1, 0, qb, GH * F);
	lin(x, T, D, wd + K * D, D, F, 1, 0, kva, F);
	align_bf16 *kvf = buf((T + nc) * F, 2);
	memcpy(kvf, kv, sizeof(align_bf16) * (size_t)(T * F));
	if (nc > 0)
		TRY(comp(p, m, 0, x, nc * r, D, wd + (K + F) * D, wd + (K + 3 * F) * D, cf * F, ape, r, vec + K + F, F,
			 nc, kvf + T * F));
	int32_t *ci = buf(T * p->topk, 4), *idx = buf(T * NS, 4);
	struct attn_cfg ac;
	memset(&ac, 0, sizeof ac);
	ac.V = V, ac.variant = p->variant, ac.nc = nc, ac.T = T, ac.S = S, ac.topk = p->topk;
	if (p->variant == ATTN_CSA && nc > 0) { /* the indexer (attn.h step 5) */
		struct compressor_params ip = {1, p->rope, 0};
		TRY(compressor_cfg_modes(&ac.cc, &ip, S, -1, m, ALIGN_DEVICE_CPU, NULL));
		align_bf16 *ki = buf(nc * S, 2), *qia = buf(T * N * S, 2), *qi = buf(T * N * S, 2), *hw = buf(T * N, 2);
		const int64_t o5 = K + 5 * F;
		TRY(comp(p, m, 1, x, nc * 4, D, wd + o5 * D, wd + (o5 + 2 * S) * D, 2 * S, ape + 256 * F, 4,
			 vec + K + 2 * F, S, nc, ki));
		lin(qr, T, K, wq + GH * F * K, K, N * S, 1, 0, qia, N * S);
		TRY(rope("rope", &p->rope, m, pos, T, N, S, qia, qi));
		float *tmp = buf(S, 4);
		for (int64_t i = 0; i < T * N; i++)
			attn_qi_rotate(&ac, qi + i * S, tmp);
		lin(x, T, D, wd + (o5 + 4 * S) * D, D, N, 1, 0, hw, N);
		struct indexer_params xp = {4, T};
		struct align_tensor ii[3] = {view(qi, ALIGN_DT_BF16, 3, T, N, S, "q"),
					     view(ki, ALIGN_DT_BF16, 2, nc, S, 0, "k"),
					     view(hw, ALIGN_DT_BF16, 2, T, N, 0, "w")};
		struct align_tensor io[2] = {view(ci, ALIGN_DT_I32, 2, T, p->topk, 0, "idx"),
					     view(buf(T * nc, 4), ALIGN_DT_F32, 2, T, nc, 0, "score")};
		TRY(run_op("indexer", &xp, m, ii, 3, io, 2));
	}
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < NS; j++)
			idx[t * NS + j] = attn_slot(&ac, t, j, ci + t * p->topk);
	struct rope_params inv = p->rope;
	inv.inverse = 1;
	align_bf16 *o2 = buf(T * GH * F, 2), *z = buf(T * GE, 2);
	TRY(rope("rope", &inv, m, pos, T, GH, F, o, o2));
	lin(o2, T, GH * F, woa, HF, E, G, HF, z, GE);
	/* 1-2 */
	align_bf16 *dz = buf(T * GE, 2), *do2 = buf(T * GH * F, 2), *dog = buf(T * HF, 2);
	TRY(mmb(&mm, wdt, T, GE, D, z, GE, 0, wob, dy, D, 0, dz, dwob));
	for (int64_t g = 0; g < G; g++) {
		TRY(mmb(&mm, wdt, T, HF, E, o2, GH * F, g * HF, woa + g * E * HF, dz, GE, g * E, dog,
			dwoa + g * E * HF));
		for (int64_t t = 0; t < T; t++)
			memcpy(do2 + t * GH * F + g * HF, dog + t * HF, sizeof(align_bf16) * (size_t)HF);
	}
	/* 3-4 */
	align_bf16 *dO = buf(T * GH * F, 2), *dq = buf(T * GH * F, 2);
	float *dkvf = buf((T + nc) * F, 4);
	TRY(rope("rope_bwd", &inv, m, pos, T, GH, F, do2, dO));
	struct sparse_attn_params sp = {(float)(1.0 / sqrt((double)F)), (int)V};
	struct align_tensor si[5] = {view(q, ALIGN_DT_BF16, 3, T, GH, F, "q"),
				     view(kvf, ALIGN_DT_BF16, 2, T + nc, F, 0, "kv"),
				     view(idx, ALIGN_DT_I32, 2, T, NS, 0, "idx"),
				     view((void *)(vec + K + 2 * F + S), ALIGN_DT_F32, 1, GH, 0, 0, "sink"),
				     view(dO, ALIGN_DT_BF16, 3, T, GH, F, "do")};
	struct align_tensor so[3] = {view(dq, ALIGN_DT_BF16, 3, T, GH, F, "dq"),
				     view(dkvf, ALIGN_DT_F32, 2, T + nc, F, 0, "dkv"),
				     view(dvec + K + 2 * F + S, ALIGN_DT_F32, 1, GH, 0, 0, "dsink")};
	TRY(run_op("sparse_attn_bwd", &sp, m, si, 5, so, 3));
	/* 5. q */
	align_bf16 *dqn = buf(T * GH * F, 2), *dqb = buf(T * GH * F, 2), *dqr = buf(T * K, 2), *dqa = buf(T * K, 2);
	align_bf16 *gq = buf(T * D, 2), *gkv = buf(T * D, 2), *gc = buf(nc * r * D, 2);
	TRY(rope("rope_bwd", &p->rope, m, pos, T, GH, F, dq, dqn));
	struct qnorm_bwd_params qp = {0};
	struct align_tensor qi2[2] = {view(qb, ALIGN_DT_BF16, 3, T, GH, F, "q"),
				      view(dqn, ALIGN_DT_BF16, 3, T, GH, F, "dy")};
	struct align_tensor qo = view(dqb, ALIGN_DT_BF16, 3, T, GH, F, "dq");
	TRY(run_op("qnorm_bwd", &qp, m, qi2, 2, &qo, 1));
	TRY(mmb(&mm, wdt, T, K, GH * F, qr, K, 0, wq, dqb, GH * F, 0, dqr, dwq));
	TRY(rmsb(m, T, K, qa, vec, dqr, dqa, dvec));
	TRY(mmb(&mm, wdt, T, D, K, x, D, 0, wd, dqa, K, 0, gq, dwd));
	/* 6. kv */
	align_bf16 *dkv = buf(T * F, 2), *dkvn = buf(T * F, 2), *dkva = buf(T * F, 2);
	for (int64_t i = 0; i < T * F; i++)
		dkv[i] = align_f32_to_bf16(dkvf[i]);
	TRY(rope("rope_bwd", &p->rope, m, pos, T, 1, F, dkv, dkvn));
	TRY(rmsb(m, T, F, kva, vec + K, dkvn, dkva, dvec + K));
	TRY(mmb(&mm, wdt, T, D, F, x, D, 0, wd + K * D, dkva, F, 0, gkv, dwd + K * D));
	/* 7. compressor */
	if (nc > 0) {
		align_bf16 *dc = buf(nc * F, 2);
		for (int64_t i = 0; i < nc * F; i++)
			dc[i] = align_f32_to_bf16(dkvf[T * F + i]);
		struct compressor_params cp = {0, p->rope, 0};
		struct align_tensor ci6[6] = {
			view((void *)x, ALIGN_DT_BF16, 2, nc * r, D, 0, "x"),
			view((void *)(wd + (K + F) * D), ALIGN_DT_BF16, 2, cf * F, D, 0, "wkv"),
			view((void *)(wd + (K + 3 * F) * D), ALIGN_DT_BF16, 2, cf * F, D, 0, "wgate"),
			view((void *)ape, ALIGN_DT_F32, 2, r, cf * F, 0, "ape"),
			view((void *)(vec + K + F), ALIGN_DT_F32, 1, F, 0, 0, "w"),
			view(dc, ALIGN_DT_BF16, 2, nc, F, 0, "dc")};
		struct align_tensor co5[5] = {view(gc, ALIGN_DT_BF16, 2, nc * r, D, 0, "dx"),
					      view(dwd + (K + F) * D, ALIGN_DT_F32, 2, cf * F, D, 0, "dwkv"),
					      view(dwd + (K + 3 * F) * D, ALIGN_DT_F32, 2, cf * F, D, 0, "dwgate"),
					      view(dape, ALIGN_DT_F32, 2, r, cf * F, 0, "dape"),
					      view(dvec + K + F, ALIGN_DT_F32, 1, F, 0, 0, "dw")};
		TRY(run_op("compressor_bwd", &cp, m, ci6, 6, co5, 5));
	}
	/* 8. dx: q, kv, then the compressor's term, binary32, one rounding */
	align_bf16 *dx = out[0].data;
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < D; j++) {
			float acc = hn_add(align_bf16_to_f32(gq[t * D + j]), align_bf16_to_f32(gkv[t * D + j]));
			if (t < nc * r)
				acc = hn_add(acc, align_bf16_to_f32(gc[t * D + j]));
			dx[t * D + j] = align_f32_to_bf16(acc);
		}
	return 0;
}

static int fill(const struct align_dims *d, struct align_tensor *t, int i, int set)
{
	struct align_fill f = OP->impl->in[i].fill;
	if (f.dim)
		f.limit = (float)d->v[strchr(ALIGN_DIM_LETTERS, f.dim) - ALIGN_DIM_LETTERS];
	if (set == 1 && f.kind == ALIGN_FILL_SPECIAL)
		f.kind = ALIGN_FILL_EXTREME;
	if (set == 2) {
		f.kind = ALIGN_FILL_CONST;
		f.scale = i == 0 ? -100.0f * f.scale : f.scale;
	}
	return ops_fill_tensor(&f, OP->name, t, SEED, 0);
}

static const char *const DIMS[3] = {"T=8,D=16,G=2,H=1,F=64,K=16,E=8,N=2,S=64,V=4",
				    "T=130,D=16,G=1,H=2,F=64,K=16,E=8,N=1,S=64,V=8",
				    "T=6,D=16,G=2,H=2,F=64,K=16,E=8,N=1,S=64,V=3"};

static int alloc_io(const struct align_dims *d, const struct align_modes *m, struct align_tensor *in,
		    struct align_tensor *a, struct align_tensor *b, int set)
{
	for (int i = 0; i < 8; i++)
		if (ops_tensor_alloc(OP, 0, i, d, m, &in[i]) || fill(d, &in[i], i, set))
			return 1;
	for (int i = 0; i < 7; i++)
		if (ops_tensor_alloc(OP, 1, i, d, m, &a[i]) || (b && ops_tensor_alloc(OP, 1, i, d, m, &b[i])))
			return 1;
	return 0;
}

static void free_io(struct align_tensor *in, struct align_tensor *a, struct align_tensor *b)
{
	for (int i = 0; i < 8; i++)
		ops_tensor_free(&in[i]);
	for (int i = 0; i < 7; i++) {
		ops_tensor_free(&a[i]);
		if (b)
			ops_tensor_free(&b[i]);
	}
}

/* one assignment on one fill set: attn_bwd against the composition */
static int compare(int var, const struct align_modes *m, int set)
{
	struct align_dims d;
	char err[128];
	ops_dims_parse(DIMS[var], &d, err, sizeof err);
	struct attn_params p;
	OP->impl->params_variant(&p, &d, var);
	p.topk = 4;
	struct align_tensor in[8], a[7], b[7];
	if (alloc_io(&d, m, in, a, b, set))
		return 1;
	int ra = OP->impl->fwd_cpu(&p, m, in, 8, a, 7), rb = compose(&d, &p, m, in, b), fails = 0;
	freeall();
	for (int i = 0; i < 7 && !ra && !rb; i++) {
		size_t n = (size_t)align_tensor_numel(&a[i]) * align_dtype_size(a[i].dtype);
		if (memcmp(a[i].data, b[i].data, n) != 0) {
			fails++;
			if (getenv("REF_DEBUG"))
				printf("  output %s differs\n", a[i].name);
		}
	}
	if (ra != rb || fails) {
		char mb[2048];
		modes_format(m, mb, sizeof mb);
		printf("FAIL attn_bwd variant %d (set %d, rc %d vs composed %d, %d outputs differ): %s\n", var, set, ra,
		       rb, fails, mb);
		fails++;
	}
	free_io(in, a, b);
	return fails ? 1 : 0;
}

static int check_compose(void)
{
	int fails = 0, runs = 0;
	uint64_t rng = SEED;
	for (int var = 0; var < 3; var++) {
		struct align_modes def;
		modes_init_default(&def);
		for (int set = 0; set < NSETS; set++)
			fails += compare(var, &def, set), runs++;
		for (const int *s = OP->impl->modes; *s >= 0; s++)
			for (int v = 0; v < modes_value_count(*s); v++) {
				if (v == def.v[*s] || modes_value_gpu_only(*s, v))
					continue;
				struct align_modes m = def;
				m.v[*s] = v;
				fails += compare(var, &m, 0), runs++;
			}
		for (int k = 0; k < 6; k++) {
			struct align_modes m = def;
			for (const int *s = OP->impl->modes; *s >= 0; s++) {
				rng = rng * 6364136223846793005ull + 1442695040888963407ull;
				int v = (int)((rng >> 33) % (uint64_t)modes_value_count(*s));
				if (!modes_value_gpu_only(*s, v))
					m.v[*s] = v;
			}
			fails += compare(var, &m, k % NSETS), runs++;
		}
	}
	printf("compose  %4d runs: the bytes of attn -> matmul_bwd -> rope_bwd -> sparse_attn_bwd -> rope_bwd -> "
	       "qnorm_bwd / rmsnorm_bwd -> matmul_bwd, compressor_bwd, the dx sum%s\n",
	       runs, fails ? "  FAIL" : "");
	return fails;
}

/* ---- fd: central differences of the forward twin ---- */

static ld objective(const struct attn_params *p, const struct align_modes *m, struct align_tensor *in,
		    struct align_tensor *fo)
{
	if (ops_find("attn")->impl->fwd_cpu(p, m, in, 7, fo, 4))
		return NAN;
	ld s = 0;
	for (int64_t i = 0; i < align_tensor_numel(&fo[0]); i++)
		s += (ld)ops_ld(&in[7], i) * ops_ld(&fo[0], i);
	return s;
}

static int check_fd(void)
{
	int fails = 0, checked = 0;
	ld worst = 0;
	for (int var = 0; var < 3; var++) {
		struct align_dims d;
		char err[128];
		ops_dims_parse(DIMS[var], &d, err, sizeof err);
		struct attn_params p;
		OP->impl->params_variant(&p, &d, var);
		p.topk = 4;
		struct align_modes m;
		modes_init_default(&m);
		m.v[MODE_CSA_QAT] = ALIGN_CSA_QAT_OFF; /* the QDQ is straight-through in attn_bwd (its contract) */
		struct align_tensor in[8], g[7], fo[4];
		if (alloc_io(&d, &m, in, g, NULL, 0))
			return 1;
		for (int i = 0; i < 4; i++)
			if (ops_tensor_alloc(ops_find("attn"), 1, i, &d, &m, &fo[i]))
				return 1;
		if (OP->impl->fwd_cpu(&p, &m, in, 8, g, 7)) {
			printf("FAIL attn_bwd variant %d: rc\n", var);
			return 1;
		}
		for (int o = 0; o < 7; o++)
			for (int dir = 0; dir < 2; dir++) { /* the whole gradient; its odd-indexed half */
				struct align_tensor *t = &in[o];
				int64_t n = align_tensor_numel(&g[o]);
				ld gmax = 0, rms = 0;
				for (int64_t i = 0; i < n; i++) {
					gmax = fmaxl(gmax, fabsl((ld)ops_ld(&g[o], i)));
					rms += (ld)ops_ld(t, i) * ops_ld(t, i);
				}
				if (gmax == 0)
					continue;
				float h = (float)((o == 3 ? FD_STEP_APE : FD_STEP) * sqrtl(rms / n)), *v0 = buf(n, 4),
				      *vp = buf(n, 4), *vm = buf(n, 4);
				for (int64_t i = 0; i < n; i++) {
					v0[i] = ops_ld(t, i);
					float u = (dir && !(i & 1)) ? 0.0f : (float)(ops_ld(&g[o], i) / gmax);
					ops_st(t, i, v0[i] + h * u);
					vp[i] = ops_ld(t, i);
				}
				ld lp = objective(&p, &m, in, fo), pred = 0;
				for (int64_t i = 0; i < n; i++) {
					float u = (dir && !(i & 1)) ? 0.0f : (float)(ops_ld(&g[o], i) / gmax);
					ops_st(t, i, v0[i] - h * u);
					vm[i] = ops_ld(t, i);
					pred += (ld)ops_ld(&g[o], i) * ((ld)vp[i] - vm[i]);
				}
				ld lm = objective(&p, &m, in, fo);
				for (int64_t i = 0; i < n; i++)
					ops_st(t, i, v0[i]);
				freeall();
				ld fd = lp - lm, r = fabsl(fd - pred) / (FD_TOL * fabsl(pred) + 1e-30L);
				worst = fmaxl(worst, r);
				checked++;
				if (!(r <= 1) || getenv("REF_DEBUG"))
					printf("%s variant %d %s direction %d: g . step %.6Lg, central difference "
					       "%.6Lg\n",
					       r <= 1 ? "   " : "FAIL", var, g[o].name, dir, pred, fd);
				fails += !(r <= 1);
			}
		free_io(in, g, NULL);
		for (int i = 0; i < 4; i++)
			ops_tensor_free(&fo[i]);
	}
	printf("fd       %4d directions: central differences of the forward twin along g (and half of it), worst "
	       "%.3Lg of the bound (%.2Lg |g . step|)%s\n",
	       checked, worst, FD_TOL, fails ? "  FAIL" : "");
	return fails;
}

int main(void)
{
	OP = ops_find("attn_bwd");
	int fails = check_compose() + check_fd();
	printf("test-ops-ref-attn-bwd: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
