/* mtp_pipe.h: the order of the MTP pre-layer (mtp.h steps 1-5), written once for both twins. A backend gives
 * memory, runs another op through its own entry point (C twin: its fwd_cpu; CUDA twin: its _fwd_cuda on the
 * same device context) and runs mtp's element steps (mtp_elem) over index ranges.
 * Include after mtp.h and ops.h (C) or ops_cuda.h (CUDA). */
#ifndef ALIGN_MTP_PIPE_H
#define ALIGN_MTP_PIPE_H

#include <string.h>

#include "embedding.h"
#include "matmul.h"
#include "mtp.h"
#include "rmsnorm.h"

struct mtp_be {
	void *ctx;
	void *(*alloc)(void *ctx, size_t bytes); /* NULL on failure */
	int (*op)(void *ctx, int op_id, const void *params, const struct align_modes *m, const struct align_tensor *in,
		  int n_in, struct align_tensor *out, int n_out);
	int (*kern)(void *ctx, int kind, const struct mtp_kargs *a);
};

static inline struct align_tensor mtp_view(const void *data, int dtype, int ndim, int64_t a, int64_t b, int64_t c,
					   const char *name)
{
	struct align_tensor t;
	memset(&t, 0, sizeof t);
	t.data = (void *)data;
	t.dtype = dtype;
	t.ndim = ndim;
	t.shape[0] = a;
	t.shape[1] = b;
	t.shape[2] = c;
	t.name = name;
	return t;
}

static inline int mtp_kern_run(const struct mtp_be *be, int kind, const void *a, const void *b, void *out, int64_t rows,
			       int64_t n, int64_t div, int64_t divb, int adt)
{
	struct mtp_kargs k;
	memset(&k, 0, sizeof k);
	k.a = a, k.b = b, k.out = out, k.rows = rows, k.n = n, k.div = div > 0 ? div : 1, k.divb = divb > 0 ? divb : 1,
	k.adt = adt;
	return be->kern(be->ctx, kind, &k);
}

#define MTP_TRY(call)                                                                                                  \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_)                                                                                               \
			return rc_;                                                                                    \
	} while (0)
#define MTP_ALLOC(var, type, count)                                                                                    \
	type *var = (type *)be->alloc(be->ctx, sizeof(type) * (size_t)((count) > 0 ? (count) : 1));                    \
	if (!var)                                                                                                      \
		return ALIGN_ERR_INTERNAL;

/* y[rows, F] = R(a[rows, K] @ w[F, K]^T) as bf16 into out: the matmul op (f32 operand a), then the rounding */
static inline int mtp_linear(const struct mtp_cfg *c, const struct align_modes *m, const struct mtp_be *be,
			     const float *a, int64_t rows, int64_t K, const float *w, int64_t F, align_bf16 *out)
{
	int mmb = c->mm_dtype == ALIGN_DT_BF16;
	MTP_ALLOC(y, float, rows *F); /* f32-sized: holds a bf16 output too */
	struct align_tensor mi[2] = {mtp_view(a, ALIGN_DT_F32, 2, rows, K, 0, "a"),
				     mtp_view(w, ALIGN_DT_F32, 2, F, K, 0, "b")};
	struct align_tensor mo = mtp_view(y, c->mm_dtype, 2, rows, F, 0, "y");
	struct matmul_params mp = {0};
	MTP_TRY(be->op(be->ctx, ALIGN_OP_matmul, &mp, m, mi, 2, &mo, 1));
	return mtp_kern_run(be, MTP_K_ROUND, y, NULL, out, rows, F, 1, 1, mmb);
}

/* steps 1-3 (tok, e, en, hn into out[0..3]): the forward's intermediates, which mtp_bwd recomputes with it */
static inline int mtp_pipe_front(const struct mtp_cfg *c, const struct align_modes *m, const struct align_tensor *in,
				 struct align_tensor *out, const struct mtp_be *be)
{
	const int64_t T = c->T, N = c->N, D = c->D;
	/* 1. the shift */
	struct mtp_kargs k;
	memset(&k, 0, sizeof k);
	k.out = out[0].data, k.rows = T, k.n = 1, k.div = 1, k.divb = 1, k.S = c->S, k.shift_pos = c->shift_pos;
	k.ids = (const int32_t *)in[0].data, k.pos = (const int32_t *)in[1].data;
	MTP_TRY(be->kern(be->ctx, MTP_K_SHIFT, &k));
	/* 2. the embedding of the shifted ids */
	struct embedding_params ep = {0.0f};
	struct align_tensor ei[2] = {mtp_view(out[0].data, ALIGN_DT_I32, 1, T, 0, 0, "ids"), in[2]};
	MTP_TRY(be->op(be->ctx, ALIGN_OP_embedding, &ep, m, ei, 2, &out[1], 1));
	/* 3. enorm, hnorm (per stream) */
	struct rmsnorm_params rp = {0};
	const float *wn = (const float *)in[4].data;
	struct align_tensor ri[2] = {out[1], mtp_view(wn, ALIGN_DT_F32, 1, D, 0, 0, "w")};
	MTP_TRY(be->op(be->ctx, ALIGN_OP_rmsnorm, &rp, m, ri, 2, &out[2], 1));
	ri[0] = mtp_view(in[3].data, ALIGN_DT_BF16, 2, T * N, D, 0, "x");
	ri[1] = mtp_view(wn + D, ALIGN_DT_F32, 1, D, 0, 0, "w");
	return be->op(be->ctx, ALIGN_OP_rmsnorm, &rp, m, ri, 2, &out[3], 1);
}

/* the pre-layer: in/out as mtp.h lists them (checked by mtp_cfg_init) */
static inline int mtp_pipe(const struct mtp_cfg *c, const struct align_modes *m, const struct align_tensor *in,
			   struct align_tensor *out, const struct mtp_be *be)
{
	const int64_t T = c->T, N = c->N, D = c->D;
	MTP_TRY(mtp_pipe_front(c, m, in, out, be));
	/* 4. e_proj, h_proj */
	const float *we = (const float *)in[5].data, *wh = we + D * D;
	MTP_ALLOC(ef, float, T *D);
	MTP_TRY(mtp_kern_run(be, MTP_K_TOF32, out[2].data, NULL, ef, T, D, 1, 1, 0));
	MTP_TRY(mtp_linear(c, m, be, ef, T, D, we, D, (align_bf16 *)out[4].data));
	MTP_ALLOC(hf, float, T *N *D);
	MTP_TRY(mtp_kern_run(be, MTP_K_TOF32, out[3].data, NULL, hf, T * N, D, 1, 1, 0));
	MTP_TRY(mtp_linear(c, m, be, hf, T * N, D, wh, D, (align_bf16 *)out[5].data));
	/* 5. X0 */
	if (c->combine == MTP_ADD)
		return mtp_kern_run(be, MTP_K_ADD, out[4].data, out[5].data, out[6].data, T * N, D, N, 1, 0);
	int eh = c->combine == MTP_CONCAT_EH;
	MTP_ALLOC(w2, float, D * 2 * D);
	MTP_TRY(mtp_kern_run(be, MTP_K_WCAT, eh ? we : wh, eh ? wh : we, w2, D, D, 1, 1, 0));
	MTP_ALLOC(a2, float, T *N * 2 * D);
	if (eh) /* row t*N+s: [en[t] | hn[t*N+s]] */
		MTP_TRY(mtp_kern_run(be, MTP_K_CAT, out[2].data, out[3].data, a2, T * N, D, N, 1, 0));
	else /* [hn[t*N+s] | en[t]] */
		MTP_TRY(mtp_kern_run(be, MTP_K_CAT, out[3].data, out[2].data, a2, T * N, D, 1, N, 0));
	return mtp_linear(c, m, be, a2, T * N, 2 * D, w2, D, (align_bf16 *)out[6].data);
}

#endif /* ALIGN_MTP_PIPE_H */
