/* mtp_bwd_pipe.h: the order of the MTP pre-layer's backward (mtp_bwd.h steps 1-4), written once for both
 * twins on mtp_pipe.h's backend (memory, another op through its own entry point: the forward twins of steps
 * 1-3 and the backward ops, mtp's element steps) plus mtp_bwd's own element steps.
 * Include after mtp_bwd.h and ops.h (C) or ops_cuda.h (CUDA). */
#ifndef ALIGN_MTP_BWD_PIPE_H
#define ALIGN_MTP_BWD_PIPE_H

#include "mtp_bwd.h"
#include "mtp_pipe.h"

struct mtp_bwd_be {
	struct mtp_be f; /* alloc, op (any op: forward or backward), mtp's element steps */
	int (*kern)(void *ctx, int kind, const struct mtp_bwd_kargs *a);
};

static inline int mtpb_kern(const struct mtp_bwd_be *bbe, int kind, const void *a, void *out, int64_t rows, int64_t n,
			    int64_t lda, int64_t offa, int64_t ldo, int64_t offo, int64_t N, size_t esize)
{
	struct mtp_bwd_kargs k;
	memset(&k, 0, sizeof k);
	k.a = a, k.out = out, k.rows = rows, k.n = n, k.lda = lda, k.offa = offa, k.ldo = ldo, k.offo = offo, k.N = N,
	k.esize = (int)esize;
	return bbe->kern(bbe->f.ctx, kind, &k);
}

/* the forward's tensor lists (mtp.h) from mtp_bwd's inputs: ids stand in for pos (its shift is not used),
 * tok, e, en, hn into the given buffers, ep, hp and x unused (no data) */
static inline void mtpb_fwd_views(int64_t T, int64_t N, int64_t D, const struct align_tensor *in,
				  struct align_tensor *fin, struct align_tensor *fout, void *tok, void *e, void *en,
				  void *hn)
{
	fin[0] = in[0];
	fin[1] = in[0];
	fin[1].name = "pos";
	for (int i = 2; i < 6; i++)
		fin[i] = in[i - 1];
	fout[0] = mtp_view(tok, ALIGN_DT_I32, 2, 3, T, 0, "tok");
	fout[1] = mtp_view(e, ALIGN_DT_BF16, 2, T, D, 0, "e");
	fout[2] = mtp_view(en, ALIGN_DT_BF16, 2, T, D, 0, "en");
	fout[3] = mtp_view(hn, ALIGN_DT_BF16, 2, T * N, D, 0, "hn");
	fout[4] = mtp_view(NULL, ALIGN_DT_BF16, 2, T, D, 0, "ep");
	fout[5] = mtp_view(NULL, ALIGN_DT_BF16, 2, T * N, D, 0, "hp");
	fout[6] = mtp_view(NULL, ALIGN_DT_BF16, 3, T, N, D, "x");
}

/* matmul_bwd's tensors: a[rows,K], b[D,K], dy[rows,D], main_grad[D,K] -> da[rows,K] bf16, db[D,K] */
static inline void mtpb_mm_views(int w_dtype, int64_t rows, int64_t K, int64_t D, const void *a, const void *b,
				 const void *dy, const void *mg, void *da, void *db, struct align_tensor *mi,
				 struct align_tensor *mo)
{
	mi[0] = mtp_view(a, ALIGN_DT_F32, 2, rows, K, 0, "a");
	mi[1] = mtp_view(b, ALIGN_DT_F32, 2, D, K, 0, "b");
	mi[2] = mtp_view(dy, ALIGN_DT_F32, 2, rows, D, 0, "dy");
	mi[3] = mtp_view(mg, w_dtype, 2, D, K, 0, "main_grad");
	mo[0] = mtp_view(da, ALIGN_DT_BF16, 2, rows, K, 0, "da");
	mo[1] = mtp_view(db, w_dtype, 2, D, K, 0, "db");
}

/* rmsnorm_bwd's tensors: x[rows,D] bf16, w[D] f32, dy[rows,D] bf16 -> dx[rows,D] bf16, dw[D] */
static inline void mtpb_rms_views(int dw_dtype, int64_t rows, int64_t D, const void *x, const void *w, const void *dy,
				  void *dx, void *dw, struct align_tensor *ri, struct align_tensor *ro)
{
	ri[0] = mtp_view(x, ALIGN_DT_BF16, 2, rows, D, 0, "x");
	ri[1] = mtp_view(w, ALIGN_DT_F32, 1, D, 0, 0, "w");
	ri[2] = mtp_view(dy, ALIGN_DT_BF16, 2, rows, D, 0, "dy");
	ro[0] = mtp_view(dx, ALIGN_DT_BF16, 2, rows, D, 0, "dx");
	ro[1] = mtp_view(dw, dw_dtype, 1, D, 0, 0, "dw");
}

/* step 2 under concat_eh / concat_he: dx -> den, dhn and dproj through one K = 2D matmul_bwd */
static inline int mtpb_concat(const struct mtp_bwd_cfg *c, const struct align_tensor *in, struct align_tensor *out,
			      const struct mtp_bwd_be *bbe, const align_bf16 *en, const align_bf16 *hn,
			      const float *dxf, align_bf16 *den, align_bf16 *dhn)
{
	const struct mtp_be *be = &bbe->f;
	const int64_t T = c->f.T, N = c->f.N, D = c->f.D;
	const int eh = c->f.combine == MTP_CONCAT_EH;
	const size_t ws = align_dtype_size(c->w_dtype);
	const float *we = (const float *)in[4].data, *wh = we + D * D;
	const unsigned char *mg = (const unsigned char *)in[6].data;
	unsigned char *dp = (unsigned char *)out[3].data;
	MTP_ALLOC(a2, float, T *N * 2 * D);
	if (eh) /* the forward's operands (mtp_pipe step 5) */
		MTP_TRY(mtp_kern_run(be, MTP_K_CAT, en, hn, a2, T * N, D, N, 1, 0));
	else
		MTP_TRY(mtp_kern_run(be, MTP_K_CAT, hn, en, a2, T * N, D, 1, N, 0));
	MTP_ALLOC(w2, float, D * 2 * D);
	MTP_TRY(mtp_kern_run(be, MTP_K_WCAT, eh ? we : wh, eh ? wh : we, w2, D, D, 1, 1, 0));
	MTP_ALLOC(mg2, float, D * 2 * D); /* f32-sized: holds a bf16 main_grad too */
	MTP_TRY(mtpb_kern(bbe, MTPB_K_COPY, mg, mg2, D, D, D, 0, 2 * D, eh ? 0 : D, 1, ws));
	MTP_TRY(mtpb_kern(bbe, MTPB_K_COPY, mg + D * D * ws, mg2, D, D, D, 0, 2 * D, eh ? D : 0, 1, ws));
	MTP_ALLOC(da, align_bf16, T * N * 2 * D);
	MTP_ALLOC(db, float, D * 2 * D);
	struct align_tensor mi[4], mo[2];
	struct matmul_bwd_params ph = {c->f.S * N};
	mtpb_mm_views(c->w_dtype, T * N, 2 * D, D, a2, w2, dxf, mg2, da, db, mi, mo);
	MTP_TRY(be->op(be->ctx, ALIGN_OP_matmul_bwd, &ph, &c->mm, mi, 4, mo, 2));
	const int64_t oe = eh ? 0 : D, oh = eh ? D : 0;
	MTP_TRY(mtpb_kern(bbe, MTPB_K_SUMN, da, den, T, D, 2 * D, oe, D, 0, N, 2));
	MTP_TRY(mtpb_kern(bbe, MTPB_K_COPY, da, dhn, T * N, D, 2 * D, oh, D, 0, 1, 2));
	MTP_TRY(mtpb_kern(bbe, MTPB_K_COPY, db, dp, D, D, 2 * D, oe, D, 0, 1, ws));
	return mtpb_kern(bbe, MTPB_K_COPY, db, dp + D * D * ws, D, D, 2 * D, oh, D, 0, 1, ws);
}

/* step 2 under add: dep = the stream sum of dx, then one matmul_bwd per projection */
static inline int mtpb_add(const struct mtp_bwd_cfg *c, const struct align_tensor *in, struct align_tensor *out,
			   const struct mtp_bwd_be *bbe, const align_bf16 *en, const align_bf16 *hn, const float *dxf,
			   align_bf16 *den, align_bf16 *dhn)
{
	const struct mtp_be *be = &bbe->f;
	const int64_t T = c->f.T, N = c->f.N, D = c->f.D;
	const size_t ws = align_dtype_size(c->w_dtype);
	const float *we = (const float *)in[4].data, *wh = we + D * D;
	const unsigned char *mg = (const unsigned char *)in[6].data;
	unsigned char *dp = (unsigned char *)out[3].data;
	MTP_ALLOC(dep, align_bf16, T * D);
	MTP_TRY(mtpb_kern(bbe, MTPB_K_SUMN, in[5].data, dep, T, D, D, 0, D, 0, N, 2));
	MTP_ALLOC(ef, float, T *D);
	MTP_ALLOC(depf, float, T *D);
	MTP_ALLOC(hf, float, T *N *D);
	MTP_TRY(mtp_kern_run(be, MTP_K_TOF32, en, NULL, ef, T, D, 1, 1, 0));
	MTP_TRY(mtp_kern_run(be, MTP_K_TOF32, dep, NULL, depf, T, D, 1, 1, 0));
	MTP_TRY(mtp_kern_run(be, MTP_K_TOF32, hn, NULL, hf, T * N, D, 1, 1, 0));
	struct align_tensor mi[4], mo[2];
	struct matmul_bwd_params pe = {c->f.S}, ph = {c->f.S * N};
	mtpb_mm_views(c->w_dtype, T, D, D, ef, we, depf, mg, den, dp, mi, mo);
	MTP_TRY(be->op(be->ctx, ALIGN_OP_matmul_bwd, &pe, &c->mm, mi, 4, mo, 2));
	mtpb_mm_views(c->w_dtype, T * N, D, D, hf, wh, dxf, mg + D * D * ws, dhn, dp + D * D * ws, mi, mo);
	return be->op(be->ctx, ALIGN_OP_matmul_bwd, &ph, &c->mm, mi, 4, mo, 2);
}

/* the backward: in/out as mtp_bwd.h lists them (checked by mtp_bwd_cfg_init) */
static inline int mtp_bwd_pipe(const struct mtp_bwd_cfg *c, const struct align_modes *m, const struct align_tensor *in,
			       struct align_tensor *out, const struct mtp_bwd_be *bbe)
{
	const struct mtp_be *be = &bbe->f;
	const int64_t T = c->f.T, N = c->f.N, D = c->f.D;
	/* 1. the forward's intermediates */
	MTP_ALLOC(tok, int32_t, 3 * T);
	MTP_ALLOC(e, align_bf16, T * D);
	MTP_ALLOC(en, align_bf16, T * D);
	MTP_ALLOC(hn, align_bf16, T * N * D);
	struct align_tensor fin[6], fout[7];
	mtpb_fwd_views(T, N, D, in, fin, fout, tok, e, en, hn);
	MTP_TRY(mtp_pipe_front(&c->f, m, fin, fout, be));
	/* 2. den, dhn, dproj */
	MTP_ALLOC(dxf, float, T *N *D);
	MTP_TRY(mtp_kern_run(be, MTP_K_TOF32, in[5].data, NULL, dxf, T * N, D, 1, 1, 0));
	MTP_ALLOC(den, align_bf16, T * D);
	MTP_ALLOC(dhn, align_bf16, T * N * D);
	if (c->f.combine == MTP_ADD)
		MTP_TRY(mtpb_add(c, in, out, bbe, en, hn, dxf, den, dhn));
	else
		MTP_TRY(mtpb_concat(c, in, out, bbe, en, hn, dxf, den, dhn));
	/* 3. hnorm, enorm */
	const float *wn = (const float *)in[3].data;
	unsigned char *dn = (unsigned char *)out[2].data;
	struct align_tensor ri[3], ro[2];
	struct rmsnorm_bwd_params rp = {0};
	mtpb_rms_views(c->dw_dtype, T * N, D, in[2].data, wn + D, dhn, out[1].data,
		       dn + D * align_dtype_size(c->dw_dtype), ri, ro);
	MTP_TRY(be->op(be->ctx, ALIGN_OP_rmsnorm_bwd, &rp, m, ri, 3, ro, 2));
	MTP_ALLOC(de, align_bf16, T * D);
	mtpb_rms_views(c->dw_dtype, T, D, e, wn, den, de, dn, ri, ro);
	MTP_TRY(be->op(be->ctx, ALIGN_OP_rmsnorm_bwd, &rp, m, ri, 3, ro, 2));
	/* 4. the table */
	struct embedding_params ep = {0.0f};
	struct align_tensor ei[3] = {mtp_view(tok, ALIGN_DT_I32, 1, T, 0, 0, "ids"), in[1],
				     mtp_view(de, ALIGN_DT_BF16, 2, T, D, 0, "dy")};
	return be->op(be->ctx, ALIGN_OP_embedding_bwd, &ep, m, ei, 3, &out[0], 1);
}

#endif /* ALIGN_MTP_BWD_PIPE_H */
