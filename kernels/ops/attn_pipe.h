/* attn_pipe.h: the order of the composed attention layer (attn.h steps 1-8), written once for both twins.
 * A backend gives memory, runs another op through its own entry point (C twin: its fwd_cpu; CUDA twin: its
 * _fwd_cuda on the same device context) and runs attn's own element steps (attn.h) over index ranges.
 * Include after attn.h and ops.h (C) or ops_cuda.h (CUDA). */
#ifndef ALIGN_ATTN_PIPE_H
#define ALIGN_ATTN_PIPE_H

#include <string.h>

#include "attn.h"
#include "indexer.h"
#include "qnorm.h"
#include "rmsnorm.h"
#include "sparse_attn.h"

enum attn_kind {
	ATTN_K_LINEAR, /* out[r*ldo + g*m + j] = attn_linear(a + r*lda + g*ga, w + (g*m + j)*n, n) */
	ATTN_K_CAST,   /* bf16 out[i] = R(f32 a[i]), i < rows */
	ATTN_K_COPY,   /* bf16 out[i] = a[i], i < rows */
	ATTN_K_IOTA,   /* i32 out[i] = i, i < rows */
	ATTN_K_KVQDQ,  /* FP8 QDQ of the nope dims of rows [rows, F] of out */
	ATTN_K_QIROT,  /* attn_qi_rotate of rows [rows, S] of out */
	ATTN_K_IDX,    /* i32 out[t*NS + j] = attn_slot(c, t, j, ci + t*topk), t < rows */
};

struct attn_kargs {
	const void *a, *w;
	void *out;
	int64_t rows, n, m, lda, ldo, groups, ga;
	const int32_t *ci;
	struct attn_cfg c;
};

struct attn_be {
	void *ctx;
	void *(*alloc)(void *ctx, size_t bytes); /* NULL on failure (the backend says why) */
	int (*op)(void *ctx, int op_id, const void *params, const struct align_modes *m, const struct align_tensor *in,
		  int n_in, struct align_tensor *out, int n_out);
	int (*kern)(void *ctx, int kind, const struct attn_kargs *a);
};

static inline struct align_tensor attn_view(void *data, int dtype, int ndim, int64_t a, int64_t b, int64_t c,
					    const char *name)
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

static inline int attn_linear_run(const struct attn_be *be, const struct attn_cfg *c, const void *a, int64_t rows,
				  int64_t lda, const void *w, int64_t n, int64_t m, void *out)
{
	struct attn_kargs k;
	memset(&k, 0, sizeof k);
	k.a = a, k.w = w, k.out = out, k.rows = rows, k.n = n, k.m = m, k.lda = lda, k.ldo = m, k.groups = 1;
	k.c = *c;
	return be->kern(be->ctx, ATTN_K_LINEAR, &k);
}

static inline int attn_kern_run(const struct attn_be *be, const struct attn_cfg *c, int kind, const void *a, void *out,
				int64_t rows, const int32_t *ci)
{
	struct attn_kargs k;
	memset(&k, 0, sizeof k);
	k.a = a, k.out = out, k.rows = rows, k.ci = ci, k.c = *c;
	return be->kern(be->ctx, kind, &k);
}

#define ATTN_ALLOC(var, type, count)                                                                                   \
	type *var = (type *)be->alloc(be->ctx, sizeof(type) * (size_t)((count) > 0 ? (count) : 1));                    \
	if (!var)                                                                                                      \
		return ALIGN_ERR_INTERNAL;
#define ATTN_TRY(call)                                                                                                 \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_)                                                                                               \
			return rc_;                                                                                    \
	} while (0)

/* the forward's intermediates a backward reads (attn_bwd_pipe.h): buffers of the backend, alive until it frees */
struct attn_saved {
	int32_t *pos;	     /* [T] positions 0..T-1 */
	align_bf16 *qa, *qr; /* [T,K] linear(x, wq_a); its rmsnorm */
	align_bf16 *qb;	     /* [T,G*H,F] linear(qr, wq_b): the qnorm input */
	align_bf16 *kva;     /* [T,F] linear(x, wkv): the kv_norm input */
	align_bf16 *kvf;     /* [T+nc,F] kv | compressed entries */
	int32_t *idx;	     /* [T,NS] index sets */
	align_bf16 *o2, *z;  /* [T,G*H,F] inverse-RoPE'd o; [T,G*E] the grouped projection */
};

/* the layer: in/out as attn.h lists them (checked by attn_cfg_init); sv: NULL, or receives the intermediates */
static inline int attn_pipe_run(const struct attn_cfg *c, const struct attn_params *p, const struct align_modes *m,
				const struct align_tensor *in, struct align_tensor *out, const struct attn_be *be,
				struct attn_saved *sv)
{
	const int64_t T = c->T, D = c->D, GH = c->G * c->H, F = c->F, K = c->K, N = c->N, S = c->S, nc = c->nc;
	const align_bf16 *x = (const align_bf16 *)in[0].data, *wd = (const align_bf16 *)in[1].data;
	const align_bf16 *wq = (const align_bf16 *)in[2].data;
	float *ape = (float *)in[3].data, *vec = (float *)in[4].data;
	align_bf16 *y = (align_bf16 *)out[0].data, *qo = (align_bf16 *)out[1].data, *kvo = (align_bf16 *)out[2].data;
	align_bf16 *oo = (align_bf16 *)out[3].data;
	/* weight rows (attn.h) */
	const align_bf16 *w_qa = wd, *w_kv = wd + K * D, *w_ckv = wd + (K + F) * D, *w_cgate = wd + (K + 3 * F) * D;
	const align_bf16 *w_ikv = wd + (K + 5 * F) * D, *w_igate = wd + (K + 5 * F + 2 * S) * D;
	const align_bf16 *w_hw = wd + (K + 5 * F + 4 * S) * D, *w_qb = wq, *w_iqb = wq + GH * F * K;
	float *qnw = vec, *kvnw = vec + K, *cnw = vec + K + F, *inw = vec + K + 2 * F, *sink = vec + K + 2 * F + S;
	struct rmsnorm_params rp = {0};
	struct qnorm_params qp = {0};

	ATTN_ALLOC(pos, int32_t, T);
	ATTN_TRY(attn_kern_run(be, c, ATTN_K_IOTA, NULL, pos, T, NULL));
	struct align_tensor tpos = attn_view(pos, ALIGN_DT_I32, 1, T, 0, 0, "pos");

	/* 2. q */
	ATTN_ALLOC(qa, align_bf16, T * K);
	ATTN_ALLOC(qr, align_bf16, T * K);
	ATTN_TRY(attn_linear_run(be, c, x, T, D, w_qa, D, K, qa));
	{
		struct align_tensor i2[2] = {attn_view(qa, ALIGN_DT_BF16, 2, T, K, 0, "x"),
					     attn_view(qnw, ALIGN_DT_F32, 1, K, 0, 0, "w")};
		struct align_tensor o1 = attn_view(qr, ALIGN_DT_BF16, 2, T, K, 0, "y");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_rmsnorm, &rp, m, i2, 2, &o1, 1));
	}
	ATTN_ALLOC(qb, align_bf16, T * GH * F);
	ATTN_ALLOC(qn, float, T *GH *F); /* bf16 or f32 (QNORM_MODE=fp32_out) */
	ATTN_TRY(attn_linear_run(be, c, qr, T, K, w_qb, K, GH * F, qb));
	{
		struct align_tensor i1 = attn_view(qb, ALIGN_DT_BF16, 3, T, GH, F, "q");
		struct align_tensor o1 = attn_view(qn, c->qnorm_f32 ? ALIGN_DT_F32 : ALIGN_DT_BF16, 3, T, GH, F, "y");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_qnorm, &qp, m, &i1, 1, &o1, 1));
		if (c->qnorm_f32) { /* into its own buffer: qb stays the qnorm input (attn_saved) */
			ATTN_ALLOC(qc, align_bf16, T * GH * F);
			ATTN_TRY(attn_kern_run(be, c, ATTN_K_CAST, qn, qc, T * GH * F, NULL));
			i1.data = qc;
		} else {
			i1.data = qn;
		}
		struct align_tensor i2[2] = {i1, tpos};
		struct align_tensor o2 = attn_view(qo, ALIGN_DT_BF16, 3, T, GH, F, "y");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_rope, &p->rope, m, i2, 2, &o2, 1));
	}

	/* 3. kv, then kv_full = [kv | compressed] */
	ATTN_ALLOC(kva, align_bf16, T * F);
	ATTN_ALLOC(kvn, align_bf16, T * F);
	ATTN_ALLOC(kvf, align_bf16, (T + nc) * F);
	ATTN_TRY(attn_linear_run(be, c, x, T, D, w_kv, D, F, kva));
	{
		struct align_tensor i2[2] = {attn_view(kva, ALIGN_DT_BF16, 2, T, F, 0, "x"),
					     attn_view(kvnw, ALIGN_DT_F32, 1, F, 0, 0, "w")};
		struct align_tensor o1 = attn_view(kvn, ALIGN_DT_BF16, 2, T, F, 0, "y");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_rmsnorm, &rp, m, i2, 2, &o1, 1));
		struct align_tensor r2[2] = {attn_view(kvn, ALIGN_DT_BF16, 3, T, 1, F, "x"), tpos};
		struct align_tensor ro = attn_view(kvo, ALIGN_DT_BF16, 3, T, 1, F, "y");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_rope, &p->rope, m, r2, 2, &ro, 1));
	}
	if (c->cc.qat)
		ATTN_TRY(attn_kern_run(be, c, ATTN_K_KVQDQ, NULL, kvo, T, NULL));
	ATTN_TRY(attn_kern_run(be, c, ATTN_K_COPY, kvo, kvf, T * F, NULL));

	/* 4. main compressor */
	struct compressor_params cp;
	cp.rotate = 0;
	cp.rope = p->rope;
	cp.pos0 = 0;
	if (nc > 0) {
		int64_t r = c->ratio, cf = c->coff;
		struct align_tensor ci5[5] = {
			attn_view((void *)x, ALIGN_DT_BF16, 2, nc * r, D, 0, "x"),
			attn_view((void *)w_ckv, ALIGN_DT_BF16, 2, cf * F, D, 0, "wkv"),
			attn_view((void *)w_cgate, ALIGN_DT_BF16, 2, cf * F, D, 0, "wgate"),
			attn_view(ape, ALIGN_DT_F32, 2, r, cf * F, 0, "ape"),
			attn_view(cnw, ALIGN_DT_F32, 1, F, 0, 0, "w"),
		};
		struct align_tensor co = attn_view(kvf + T * F, ALIGN_DT_BF16, 2, nc, F, 0, "c");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_compressor, &cp, m, ci5, 5, &co, 1));
	}

	/* 5. indexer (csa) */
	ATTN_ALLOC(ci, int32_t, T * c->topk);
	if (c->variant == ATTN_CSA && nc > 0) {
		ATTN_ALLOC(ki, align_bf16, nc * S);
		cp.rotate = 1;
		struct align_tensor ci5[5] = {
			attn_view((void *)x, ALIGN_DT_BF16, 2, nc * 4, D, 0, "x"),
			attn_view((void *)w_ikv, ALIGN_DT_BF16, 2, 2 * S, D, 0, "wkv"),
			attn_view((void *)w_igate, ALIGN_DT_BF16, 2, 2 * S, D, 0, "wgate"),
			attn_view(ape + 256 * F, ALIGN_DT_F32, 2, 4, 2 * S, 0, "ape"),
			attn_view(inw, ALIGN_DT_F32, 1, S, 0, 0, "w"),
		};
		struct align_tensor ko = attn_view(ki, ALIGN_DT_BF16, 2, nc, S, 0, "c");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_compressor, &cp, m, ci5, 5, &ko, 1));
		ATTN_ALLOC(qia, align_bf16, T * N * S);
		ATTN_ALLOC(qi, align_bf16, T * N * S);
		ATTN_ALLOC(hw, align_bf16, T * N);
		ATTN_ALLOC(score, float, T *nc);
		ATTN_TRY(attn_linear_run(be, c, qr, T, K, w_iqb, K, N * S, qia));
		struct align_tensor r2[2] = {attn_view(qia, ALIGN_DT_BF16, 3, T, N, S, "x"), tpos};
		struct align_tensor ro = attn_view(qi, ALIGN_DT_BF16, 3, T, N, S, "y");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_rope, &p->rope, m, r2, 2, &ro, 1));
		ATTN_TRY(attn_kern_run(be, c, ATTN_K_QIROT, NULL, qi, T * N, NULL));
		ATTN_TRY(attn_linear_run(be, c, x, T, D, w_hw, D, N, hw));
		struct indexer_params ip = {4, T};
		struct align_tensor ii[3] = {ro, ko, attn_view(hw, ALIGN_DT_BF16, 2, T, N, 0, "w")};
		struct align_tensor io[2] = {attn_view(ci, ALIGN_DT_I32, 2, T, c->topk, 0, "idx"),
					     attn_view(score, ALIGN_DT_F32, 2, T, nc, 0, "score")};
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_indexer, &ip, m, ii, 3, io, 2));
	}

	/* 6-7. index sets, sparse attention */
	ATTN_ALLOC(idx, int32_t, T * c->NS);
	ATTN_TRY(attn_kern_run(be, c, ATTN_K_IDX, NULL, idx, T, ci));
	{
		struct sparse_attn_params sp;
		sp.scale = (float)(1.0 / sqrt((double)F));
		sp.window = (int)c->V;
		struct align_tensor si[4] = {attn_view(qo, ALIGN_DT_BF16, 3, T, GH, F, "q"),
					     attn_view(kvf, ALIGN_DT_BF16, 2, T + nc, F, 0, "kv"),
					     attn_view(idx, ALIGN_DT_I32, 2, T, c->NS, 0, "idx"),
					     attn_view(sink, ALIGN_DT_F32, 1, GH, 0, 0, "sink")};
		struct align_tensor so = attn_view(oo, ALIGN_DT_BF16, 3, T, GH, F, "o");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_sparse_attn, &sp, m, si, 4, &so, 1));
	}

	/* 8. inverse RoPE, grouped low-rank output projection */
	ATTN_ALLOC(o2, align_bf16, T * GH * F);
	ATTN_ALLOC(z, align_bf16, T * c->G * c->E);
	{
		struct rope_params inv = p->rope;
		inv.inverse = 1;
		struct align_tensor r2[2] = {attn_view(oo, ALIGN_DT_BF16, 3, T, GH, F, "x"), tpos};
		struct align_tensor ro = attn_view(o2, ALIGN_DT_BF16, 3, T, GH, F, "y");
		ATTN_TRY(be->op(be->ctx, ALIGN_OP_rope, &inv, m, r2, 2, &ro, 1));
		struct attn_kargs k;
		memset(&k, 0, sizeof k);
		k.a = o2, k.w = in[5].data, k.out = z, k.rows = T, k.n = c->H * F, k.m = c->E;
		k.lda = GH * F, k.ldo = c->G * c->E, k.groups = c->G, k.ga = c->H * F, k.c = *c;
		ATTN_TRY(be->kern(be->ctx, ATTN_K_LINEAR, &k));
	}
	if (sv) {
		sv->pos = pos, sv->qa = qa, sv->qr = qr, sv->qb = qb, sv->kva = kva, sv->kvf = kvf, sv->idx = idx;
		sv->o2 = o2, sv->z = z;
	}
	return attn_linear_run(be, c, z, T, c->G * c->E, in[6].data, c->G * c->E, D, y);
}

static inline int attn_pipe(const struct attn_cfg *c, const struct attn_params *p, const struct align_modes *m,
			    const struct align_tensor *in, struct align_tensor *out, const struct attn_be *be)
{
	return attn_pipe_run(c, p, m, in, out, be, NULL);
}

#endif /* ALIGN_ATTN_PIPE_H */
