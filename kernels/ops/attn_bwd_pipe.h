/* attn_bwd_pipe.h: the order of the attention layer's backward (attn_bwd.h steps 0-8), written once for both
 * twins on attn_pipe.h's backend (memory, another op through its own entry point: the forward itself and the
 * backward ops, attn's element steps) plus attn_bwd's own element steps.
 * Include after attn_bwd.h and ops.h (C) or ops_cuda.h (CUDA). */
#ifndef ALIGN_ATTN_BWD_PIPE_H
#define ALIGN_ATTN_BWD_PIPE_H

#include "attn_bwd.h"
#include "attn_pipe.h"

struct attn_bwd_be {
	struct attn_be f; /* alloc, op (any op: forward or backward), attn's element steps */
	int (*kern)(void *ctx, int kind, const struct attn_bwd_kargs *a);
};

static inline int attnb_kern(const struct attn_bwd_be *bbe, int kind, const void *a, void *out, int64_t rows, int64_t n,
			     int64_t lda, int64_t offa, int64_t ldo, int64_t offo)
{
	struct attn_bwd_kargs k;
	memset(&k, 0, sizeof k);
	k.a = a, k.out = out, k.rows = rows, k.n = n, k.lda = lda, k.offa = offa, k.ldo = ldo, k.offo = offo;
	return bbe->kern(bbe->f.ctx, kind, &k);
}

/* widen a contiguous bf16 [rows, n] into f32 */
static inline int attnb_widen(const struct attn_bwd_be *bbe, const void *a, float *out, int64_t rows, int64_t n)
{
	return attnb_kern(bbe, ATTNB_K_WIDEN, a, out, rows, n, n, 0, n, 0);
}

/* the forward's tensor lists (attn.h) from attn_bwd's inputs, outputs into the given buffers */
static inline void attnb_fwd_views(const struct attn_cfg *c, const struct align_tensor *in, struct align_tensor *fin,
				   struct align_tensor *fout, void *y, void *q, void *kv, void *o)
{
	const int64_t T = c->T, GH = c->G * c->H, F = c->F;
	for (int i = 0; i < 7; i++)
		fin[i] = in[i];
	fout[0] = attn_view(y, ALIGN_DT_BF16, 2, T, c->D, 0, "y");
	fout[1] = attn_view(q, ALIGN_DT_BF16, 3, T, GH, F, "q");
	fout[2] = attn_view(kv, ALIGN_DT_BF16, 2, T, F, 0, "kv");
	fout[3] = attn_view(o, ALIGN_DT_BF16, 3, T, GH, F, "o");
}

/* matmul_bwd's tensors: a[rows,K], b[N,K], dy[rows,N] f32, main_grad[N,K] -> da[rows,K] bf16, db[N,K] */
static inline void attnb_mm_views(int w_dtype, int64_t rows, int64_t K, int64_t N, const void *a, const void *b,
				  const void *dy, const void *mg, void *da, void *db, struct align_tensor *mi,
				  struct align_tensor *mo)
{
	mi[0] = attn_view((void *)a, ALIGN_DT_F32, 2, rows, K, 0, "a");
	mi[1] = attn_view((void *)b, ALIGN_DT_F32, 2, N, K, 0, "b");
	mi[2] = attn_view((void *)dy, ALIGN_DT_F32, 2, rows, N, 0, "dy");
	mi[3] = attn_view((void *)mg, w_dtype, 2, N, K, 0, "main_grad");
	mo[0] = attn_view(da, ALIGN_DT_BF16, 2, rows, K, 0, "da");
	mo[1] = attn_view(db, w_dtype, 2, N, K, 0, "db");
}

/* rmsnorm_bwd's tensors: x[rows,D] bf16, w[D] f32, dy[rows,D] bf16 -> dx[rows,D] bf16, dw[D] */
static inline void attnb_rms_views(int dw_dtype, int64_t rows, int64_t D, const void *x, const void *w, const void *dy,
				   void *dx, void *dw, struct align_tensor *ri, struct align_tensor *ro)
{
	ri[0] = attn_view((void *)x, ALIGN_DT_BF16, 2, rows, D, 0, "x");
	ri[1] = attn_view((void *)w, ALIGN_DT_F32, 1, D, 0, 0, "w");
	ri[2] = attn_view((void *)dy, ALIGN_DT_BF16, 2, rows, D, 0, "dy");
	ro[0] = attn_view(dx, ALIGN_DT_BF16, 2, rows, D, 0, "dx");
	ro[1] = attn_view(dw, dw_dtype, 1, D, 0, 0, "dw");
}

/* one linear's backward: a[rows,K] bf16 (row stride lda, offset offa), w[N,K] bf16 (contiguous), dy[rows,N] bf16
 * (stride ldy, offset offy) -> da[rows,K] bf16 (contiguous), dw[N,K] f32 (db widened when WGRAD_DTYPE=bf16);
 * mg: +0, at least N*K f32 */
static inline int attnb_linear(const struct attn_bwd_cfg *c, const struct attn_bwd_be *bbe, int64_t rows, int64_t K,
			       int64_t N, const align_bf16 *a, int64_t lda, int64_t offa, const align_bf16 *w,
			       const align_bf16 *dy, int64_t ldy, int64_t offy, const float *mg, align_bf16 *da,
			       float *dw)
{
	const struct attn_be *be = &bbe->f;
	ATTN_ALLOC(af, float, rows *K);
	ATTN_ALLOC(wf, float, N *K);
	ATTN_ALLOC(df, float, rows *N);
	ATTN_TRY(attnb_kern(bbe, ATTNB_K_WIDEN, a, af, rows, K, lda, offa, K, 0));
	ATTN_TRY(attnb_widen(bbe, w, wf, N, K));
	ATTN_TRY(attnb_kern(bbe, ATTNB_K_WIDEN, dy, df, rows, N, ldy, offy, N, 0));
	void *db = dw;
	if (c->w_dtype != ALIGN_DT_F32) {
		ATTN_ALLOC(dbh, align_bf16, N * K);
		db = dbh;
	}
	struct align_tensor mi[4], mo[2];
	struct matmul_bwd_params mp = {0};
	attnb_mm_views(c->w_dtype, rows, K, N, af, wf, df, mg, da, db, mi, mo);
	ATTN_TRY(be->op(be->ctx, ALIGN_OP_matmul_bwd, &mp, &c->mm, mi, 4, mo, 2));
	return db == (void *)dw ? ALIGN_OK : attnb_widen(bbe, db, dw, N, K);
}

/* rmsnorm_bwd with its dw widened into dw (f32) when RMSNORM_BWD_DW_DTYPE=bf16 */
static inline int attnb_rms(const struct attn_bwd_cfg *c, const struct attn_bwd_be *bbe, const struct align_modes *m,
			    int64_t rows, int64_t D, const void *x, const float *w, const void *dy, void *dx, float *dw)
{
	const struct attn_be *be = &bbe->f;
	void *db = dw;
	if (c->dw_dtype != ALIGN_DT_F32) {
		ATTN_ALLOC(dbh, align_bf16, D);
		db = dbh;
	}
	struct align_tensor ri[3], ro[2];
	struct rmsnorm_bwd_params rp = {0};
	attnb_rms_views(c->dw_dtype, rows, D, x, w, dy, dx, db, ri, ro);
	ATTN_TRY(be->op(be->ctx, ALIGN_OP_rmsnorm_bwd, &rp, m, ri, 3, ro, 2));
	return db == (void *)dw ? ALIGN_OK : attnb_widen(bbe, db, dw, 1, D);
}

/* rope_bwd over [rows, H, F] at the positions pos */
static inline int attnb_rope(const struct attn_be *be, const struct rope_params *rp, const struct align_modes *m,
			     const int32_t *pos, int64_t T, int64_t H, int64_t F, const void *dy, void *dx)
{
	struct align_tensor ri[2] = {attn_view((void *)dy, ALIGN_DT_BF16, 3, T, H, F, "dy"),
				     attn_view((void *)pos, ALIGN_DT_I32, 1, T, 0, 0, "pos")};
	struct align_tensor ro = attn_view(dx, ALIGN_DT_BF16, 3, T, H, F, "dx");
	return be->op(be->ctx, ALIGN_OP_rope_bwd, rp, m, ri, 2, &ro, 1);
}

/* step 7: the compressor's backward (nc > 0): gc[nc*r, D] and its rows of dwd, dape, dvec */
static inline int attnb_compressor(const struct attn_bwd_cfg *c, const struct attn_params *p,
				   const struct align_modes *m, const struct align_tensor *in, struct align_tensor *out,
				   const struct attn_bwd_be *bbe, const float *dkvf, align_bf16 *gc)
{
	const struct attn_be *be = &bbe->f;
	const int64_t T = c->f.T, D = c->f.D, F = c->f.F, K = c->f.K, nc = c->f.nc, r = c->f.ratio, cf = c->f.coff;
	const align_bf16 *wd = (const align_bf16 *)in[1].data;
	float *dwd = (float *)out[1].data;
	ATTN_ALLOC(dc, align_bf16, nc * F);
	ATTN_TRY(attn_kern_run(be, &c->f, ATTN_K_CAST, dkvf + T * F, dc, nc * F, NULL));
	struct compressor_params cp;
	cp.rotate = 0;
	cp.rope = p->rope;
	cp.pos0 = 0;
	struct align_tensor ci[6] = {
		attn_view(in[0].data, ALIGN_DT_BF16, 2, nc * r, D, 0, "x"),
		attn_view((void *)(wd + (K + F) * D), ALIGN_DT_BF16, 2, cf * F, D, 0, "wkv"),
		attn_view((void *)(wd + (K + 3 * F) * D), ALIGN_DT_BF16, 2, cf * F, D, 0, "wgate"),
		attn_view(in[3].data, ALIGN_DT_F32, 2, r, cf * F, 0, "ape"),
		attn_view((float *)in[4].data + K + F, ALIGN_DT_F32, 1, F, 0, 0, "w"),
		attn_view(dc, ALIGN_DT_BF16, 2, nc, F, 0, "dc"),
	};
	struct align_tensor co[5] = {
		attn_view(gc, ALIGN_DT_BF16, 2, nc * r, D, 0, "dx"),
		attn_view(dwd + (K + F) * D, ALIGN_DT_F32, 2, cf * F, D, 0, "dwkv"),
		attn_view(dwd + (K + 3 * F) * D, ALIGN_DT_F32, 2, cf * F, D, 0, "dwgate"),
		attn_view(out[3].data, ALIGN_DT_F32, 2, r, cf * F, 0, "dape"),
		attn_view((float *)out[4].data + K + F, ALIGN_DT_F32, 1, F, 0, 0, "dw"),
	};
	return be->op(be->ctx, ALIGN_OP_compressor_bwd, &cp, m, ci, 6, co, 5);
}

/* the backward: in/out as attn_bwd.h lists them (checked by attn_bwd_cfg_init) */
static inline int attn_bwd_pipe(const struct attn_bwd_cfg *c, const struct attn_params *p, const struct align_modes *m,
				const struct align_tensor *in, struct align_tensor *out, const struct attn_bwd_be *bbe)
{
	const struct attn_be *be = &bbe->f;
	const struct attn_cfg *fc = &c->f;
	const int64_t T = fc->T, D = fc->D, G = fc->G, H = fc->H, GH = G * H, F = fc->F, K = fc->K, E = fc->E;
	const int64_t nc = fc->nc, HF = H * F, GE = G * E;
	const align_bf16 *wd = (const align_bf16 *)in[1].data, *wq = (const align_bf16 *)in[2].data;
	const align_bf16 *woa = (const align_bf16 *)in[5].data, *wob = (const align_bf16 *)in[6].data;
	const align_bf16 *x = (const align_bf16 *)in[0].data, *dy = (const align_bf16 *)in[7].data;
	const float *vec = (const float *)in[4].data;
	float *dwd = (float *)out[1].data, *dwq = (float *)out[2].data, *dvec = (float *)out[4].data;
	float *dwoa = (float *)out[5].data, *dwob = (float *)out[6].data;
	/* +0 where no step writes (attn_bwd.h) */
	ATTN_TRY(attnb_kern(bbe, ATTNB_K_ZERO, NULL, dwd, 1, in[1].shape[0] * D, 0, 0, 0, 0));
	ATTN_TRY(attnb_kern(bbe, ATTNB_K_ZERO, NULL, dwq, 1, in[2].shape[0] * K, 0, 0, 0, 0));
	ATTN_TRY(attnb_kern(bbe, ATTNB_K_ZERO, NULL, out[3].data, 1, in[3].shape[0], 0, 0, 0, 0));
	ATTN_TRY(attnb_kern(bbe, ATTNB_K_ZERO, NULL, dvec, 1, in[4].shape[0], 0, 0, 0, 0));
	/* main_grad = +0, sized for the largest weight */
	int64_t mgn = D * GE;
	mgn = E * HF > mgn ? E * HF : mgn;
	mgn = GH * F * K > mgn ? GH * F * K : mgn;
	mgn = K * D > mgn ? K * D : mgn;
	mgn = F * D > mgn ? F * D : mgn;
	ATTN_ALLOC(mg, float, mgn);
	ATTN_TRY(attnb_kern(bbe, ATTNB_K_ZERO, NULL, mg, 1, mgn, 0, 0, 0, 0));

	/* 0. the forward */
	ATTN_ALLOC(y, align_bf16, T * D);
	ATTN_ALLOC(q, align_bf16, T * GH * F);
	ATTN_ALLOC(kv, align_bf16, T * F);
	ATTN_ALLOC(o, align_bf16, T * GH * F);
	struct align_tensor fin[7], fout[4];
	struct attn_saved sv;
	attnb_fwd_views(fc, in, fin, fout, y, q, kv, o);
	ATTN_TRY(attn_pipe_run(fc, p, m, fin, fout, be, &sv));

	/* 1. wo_b */
	ATTN_ALLOC(dz, align_bf16, T * GE);
	ATTN_TRY(attnb_linear(c, bbe, T, GE, D, sv.z, GE, 0, wob, dy, D, 0, mg, dz, dwob));
	/* 2. wo_a, per group */
	ATTN_ALLOC(do2, align_bf16, T * GH * F);
	ATTN_ALLOC(dog, align_bf16, T * HF);
	for (int64_t g = 0; g < G; g++) {
		ATTN_TRY(attnb_linear(c, bbe, T, HF, E, sv.o2, GH * F, g * HF, woa + g * E * HF, dz, GE, g * E, mg, dog,
				      dwoa + g * E * HF));
		ATTN_TRY(attnb_kern(bbe, ATTNB_K_COPY, dog, do2, T, HF, HF, 0, GH * F, g * HF));
	}
	/* 3. the inverse RoPE's backward */
	struct rope_params inv = p->rope;
	inv.inverse = 1;
	ATTN_ALLOC(dO, align_bf16, T * GH * F);
	ATTN_TRY(attnb_rope(be, &inv, m, sv.pos, T, GH, F, do2, dO));
	/* 4. sparse attention */
	ATTN_ALLOC(dq, align_bf16, T * GH * F);
	ATTN_ALLOC(dkvf, float, (T + nc) * F);
	{
		struct sparse_attn_params sp;
		sp.scale = (float)(1.0 / sqrt((double)F));
		sp.window = (int)fc->V;
		struct align_tensor si[5] = {
			attn_view(q, ALIGN_DT_BF16, 3, T, GH, F, "q"),
			attn_view(sv.kvf, ALIGN_DT_BF16, 2, T + nc, F, 0, "kv"),
			attn_view(sv.idx, ALIGN_DT_I32, 2, T, fc->NS, 0, "idx"),
			attn_view((void *)(vec + K + 2 * F + fc->S), ALIGN_DT_F32, 1, GH, 0, 0, "sink"),
			attn_view(dO, ALIGN_DT_BF16, 3, T, GH, F, "do")};
		struct align_tensor so[3] = {attn_view(dq, ALIGN_DT_BF16, 3, T, GH, F, "dq"),
					     attn_view(dkvf, ALIGN_DT_F32, 2, T + nc, F, 0, "dkv"),
					     attn_view(dvec + K + 2 * F + fc->S, ALIGN_DT_F32, 1, GH, 0, 0, "dsink")};
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_sparse_attn_bwd, &sp, m, si, 5, so, 3));
	}
	/* 5. q path */
	ATTN_ALLOC(dqn, align_bf16, T * GH * F);
	ATTN_ALLOC(dqb, align_bf16, T * GH * F);
	ATTN_ALLOC(dqr, align_bf16, T * K);
	ATTN_ALLOC(dqa, align_bf16, T * K);
	ATTN_ALLOC(gq, align_bf16, T * D);
	ATTN_TRY(attnb_rope(be, &p->rope, m, sv.pos, T, GH, F, dq, dqn));
	{
		struct qnorm_bwd_params qp = {0};
		struct align_tensor qi[2] = {attn_view(sv.qb, ALIGN_DT_BF16, 3, T, GH, F, "q"),
					     attn_view(dqn, ALIGN_DT_BF16, 3, T, GH, F, "dy")};
		struct align_tensor qo = attn_view(dqb, ALIGN_DT_BF16, 3, T, GH, F, "dq");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_qnorm_bwd, &qp, m, qi, 2, &qo, 1));
	}
	ATTN_TRY(attnb_linear(c, bbe, T, K, GH * F, sv.qr, K, 0, wq, dqb, GH * F, 0, mg, dqr, dwq));
	ATTN_TRY(attnb_rms(c, bbe, m, T, K, sv.qa, vec, dqr, dqa, dvec));
	ATTN_TRY(attnb_linear(c, bbe, T, D, K, x, D, 0, wd, dqa, K, 0, mg, gq, dwd));
	/* 6. kv path */
	ATTN_ALLOC(dkv, align_bf16, T * F);
	ATTN_ALLOC(dkvn, align_bf16, T * F);
	ATTN_ALLOC(dkva, align_bf16, T * F);
	ATTN_ALLOC(gkv, align_bf16, T * D);
	ATTN_TRY(attn_kern_run(be, fc, ATTN_K_CAST, dkvf, dkv, T * F, NULL));
	ATTN_TRY(attnb_rope(be, &p->rope, m, sv.pos, T, 1, F, dkv, dkvn));
	ATTN_TRY(attnb_rms(c, bbe, m, T, F, sv.kva, vec + K, dkvn, dkva, dvec + K));
	ATTN_TRY(attnb_linear(c, bbe, T, D, F, x, D, 0, wd + K * D, dkva, F, 0, mg, gkv, dwd + K * D));
	/* 7. compressor path */
	ATTN_ALLOC(gc, align_bf16, nc * fc->ratio * D);
	if (nc > 0)
		ATTN_TRY(attnb_compressor(c, p, m, in, out, bbe, dkvf, gc));
	/* 8. dx */
	struct attn_bwd_kargs k;
	memset(&k, 0, sizeof k);
	k.a = gq, k.b = gkv, k.c = gc, k.out = out[0].data, k.rows = T, k.n = D, k.crows = nc * fc->ratio;
	return bbe->kern(be->ctx, ATTNB_K_DX, &k);
}

#endif /* ALIGN_ATTN_BWD_PIPE_H */
