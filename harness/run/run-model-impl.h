/* run-model-impl.h: what the files of `align run model` share (run-model.c: weights, tokens, the steps,
 * MTP; run-model-call.c: activations and the op calls; run-model-layer.c: the attention and MoE
 * sublayers): the sizes, the model state, and the helpers. Internal to harness/run. */
#ifndef ALIGN_RUN_MODEL_IMPL_H
#define ALIGN_RUN_MODEL_IMPL_H

#include "ctx.h"
#include "ops.h"
#include "run-trace.h"

#include <stdint.h>

enum {
	MODEL_B = 2,	   /* sequences */
	MODEL_S = 8,	   /* tokens per sequence */
	MODEL_T = 16,	   /* B * S tokens */
	MODEL_D = 64,	   /* hidden */
	MODEL_V = 256,	   /* vocabulary */
	MODEL_N = 4,	   /* mHC streams */
	MODEL_H = 4,	   /* attention heads */
	MODEL_HD = 64,	   /* head dim */
	MODEL_ROPE = 32,   /* rotated dims: the last 32 of a head */
	MODEL_W = 8,	   /* sliding window (index slots per query) */
	MODEL_E = 8,	   /* routed experts */
	MODEL_K = 2,	   /* experts per token */
	MODEL_F = 32,	   /* expert ffn */
	MODEL_L = 2,	   /* layers */
	MODEL_PARAMS = 96, /* weights */
	MODEL_TMP = 2048,  /* activations of one step */
};

struct mparam {
	char name[64];
	struct align_tensor t; /* the weight */
	float *d;	       /* its per-step perturbation (fp32 weights), else NULL */
};

struct model {
	struct align_ctx *ctx;
	const struct align_modes *m;
	struct run_trace *tr;
	struct align_dev *dev; /* --device cuda: every op runs its CUDA twin on copies of the host tensors */
	unsigned long long seed;
	int step;
	struct mparam p[MODEL_PARAMS];
	int np;
	void *tmp[MODEL_TMP]; /* the step's activations, freed at its end */
	int ntmp;
};

/* Token inputs of a step: positions in the sequence and the window index rows. */
struct model_tokens {
	struct align_tensor ids, labels, mtp_ids, mtp_labels, pos, mtp_pos, win;
};

static inline struct align_err *merr(struct model *md)
{
	return &md->ctx->err;
}

/* Keep data as an activation of the step (freed by release); out of memory when data is NULL. */
int keep(struct model *md, void *data);
void release(struct model *md);
/* A new zeroed activation of the step. */
int tnew(struct model *md, struct align_tensor *t, int dtype, const char *name, int ndim, int64_t a, int64_t b,
	 int64_t c);
/* src's values as dtype in a new activation of the given shape (same element count). */
int tcast(struct model *md, const struct align_tensor *src, struct align_tensor *t, int dtype, int ndim, int64_t a,
	  int64_t b, int64_t c);
/* The weight named "<prefix>.<name>" ("<name>" when prefix is NULL); it exists (model_weights). */
const struct align_tensor *W(struct model *md, const char *prefix, const char *name);
/* Rows [row0, row0 + rows) of the fp32 weight w, a view. */
struct align_tensor wrows(const struct align_tensor *w, int64_t row0, int64_t rows);
/* Op `name` on in[] with dims text; out[] allocated as the step's activations, traced as
 * "<scope>.<name>.<tensor>" unless scope is NULL; tweak (may be NULL) edits the default params. */
int op(struct model *md, const char *scope, const char *name, const char *dims, struct align_tensor *in,
       struct align_tensor *out, void (*tweak)(void *params));
/* y = x @ w^T on the matmul op, stored as dtype; traced as "<scope>.<name>.y" unless scope is NULL. */
int linear(struct model *md, const char *scope, const char *name, const struct align_tensor *x,
	   const struct align_tensor *w, int dtype, struct align_tensor *y);
int rmsnorm(struct model *md, const char *scope, const struct align_tensor *x, const struct align_tensor *w,
	    struct align_tensor *y);
/* mhc_pre of the streams x with the weights "<pre>.hc_*": y, pre, post, comb */
int hc_pre(struct model *md, const char *scope, const char *pre, const struct align_tensor *x,
	   struct align_tensor out[4]);
/* mhc_post: x <- post * f + comb^T x */
int hc_post(struct model *md, const char *scope, struct align_tensor *x, const struct align_tensor *f,
	    const struct align_tensor pre[4]);
/* the sublayers of layer `pre` on the streams x (run-model-layer.c) */
int attention(struct model *md, const char *pre, struct align_tensor *x, const struct model_tokens *tk,
	      const struct align_tensor *pos);
int moe(struct model *md, const char *pre, struct align_tensor *x, const struct model_tokens *tk);

#endif
