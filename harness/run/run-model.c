/* run-model: `align run model`: a tiny DSv4 composed of the reference blocks' C twins, run for N steps.
 *
 * Model (sizes MODEL_*): token embedding -> N mHC streams (the embedding copied into each) -> L layers,
 * each an attention sublayer (mhc_pre, attn_norm rmsnorm, wq / wkv projections on the matmul op, RoPE on
 * q and kv, sliding-window sparse_attn with a sink over the sequence's last W tokens, inverse RoPE of
 * the output, wo projection, mhc_post) and a MoE sublayer (mhc_pre, ffn_norm, router, per expert the
 * w1/w3 projections of its tokens, swiglu with the routing weight, w2; the shared expert; moe_combine;
 * mhc_post) -> mhc_head -> final norm -> lm_head -> xent against the next token (labels -1 at each
 * sequence's end). MTP depth 1 (spec 8): the mtp op (the shared embedding of the ids shifted left by one,
 * 0 past the end, through enorm and e_proj, added to every stream of h_proj(hnorm(the main model's final
 * streams, per stream)), or one eh_proj per ALIGN_MTP_COMBINE), one layer as above with its own mHC parameters, its own mhc_head and final norm,
 * the shared lm_head, xent against the labels shifted by two.
 *
 * Weights come from the counter-based RNG (seed, "model.<name>"), each step adds a fixed perturbation
 * 2^-10 * d (d drawn once per weight, "model.<name>.d") to every fp32 weight: the loss moves from step to
 * step as in training, deterministically. Tokens: ids[T] drawn per step ("model.ids"), T = B sequences
 * of S tokens. Every block output is a trace record "<scope>.<op>.<tensor>" (scope "layer<i>.attn",
 * "layer<i>.ffn", "head", "mtp1", "mtp1.layer.attn", ...); the per-step losses are printed as a
 * Megatron or PaddleFleet log (run-model-log.c). */
#include "err.h"
#include "ops.h"
#include "run-model-impl.h"
#include "run-model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A weight: shape, dtype and fill; fp32 weights get a perturbation direction. */
static int wnew(struct model *md, const char *name, int dtype, struct align_fill f, int ndim, int64_t a, int64_t b)
{
	if (md->np == MODEL_PARAMS)
		return fail_internal(merr(md), "model: too many weights");
	struct mparam *p = &md->p[md->np++];
	snprintf(p->name, sizeof p->name, "%s", name);
	struct align_tensor *t = &p->t;
	t->dtype = dtype, t->ndim = ndim, t->name = p->name;
	t->shape[0] = a, t->shape[1] = b;
	size_t n = (size_t)align_tensor_numel(t);
	if (!(t->data = calloc(n, align_dtype_size(dtype))))
		return fail_internal(merr(md), "out of memory");
	if (ops_fill_tensor(&f, "model", t, md->seed, 0))
		return fail_internal(merr(md), "model: cannot fill weight '%s'", name);
	if (dtype != ALIGN_DT_F32 || f.kind == ALIGN_FILL_CONST)
		return ALIGN_OK;
	char dn[80];
	snprintf(dn, sizeof dn, "%s.d", name);
	struct align_tensor d = {.dtype = ALIGN_DT_F32, .ndim = 1, .shape = {(int64_t)n}, .name = dn};
	struct align_fill df = {ALIGN_FILL_NORMAL, 1.0f, 0, 0};
	if (!(p->d = d.data = malloc(n * sizeof(float))))
		return fail_internal(merr(md), "out of memory");
	return ops_fill_tensor(&df, "model", &d, md->seed, 0) ? fail_internal(merr(md), "model: cannot fill '%s'", dn)
							      : ALIGN_OK;
}

/* The fill of input idx of op as its spec states it (the weights' scales follow the ops' own tests). */
static struct align_fill spec_fill(const char *op, int idx)
{
	return ops_find(op)->impl->in[idx].fill;
}

static int layer_weights(struct model *md, const char *pre)
{
	char n[64];
	struct align_fill one = {ALIGN_FILL_CONST, 1.0f, 0, 0};
	const int64_t N = MODEL_N, D = MODEL_D, HHD = MODEL_H * MODEL_HD, E = MODEL_E, F = MODEL_F;
	static const char *const sub[2] = {"attn", "ffn"};
	for (int s = 0; s < 2; s++) {
		snprintf(n, sizeof n, "%s.%s.hc_fn", pre, sub[s]);
		ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, spec_fill("mhc_pre", 1), 2, (2 + N) * N, N * D));
		snprintf(n, sizeof n, "%s.%s.hc_base", pre, sub[s]);
		ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, spec_fill("mhc_pre", 2), 1, (2 + N) * N, 0));
		snprintf(n, sizeof n, "%s.%s.hc_scale", pre, sub[s]);
		ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, spec_fill("mhc_pre", 3), 1, 3, 0));
		snprintf(n, sizeof n, "%s.%s.norm", pre, sub[s]);
		ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, one, 1, D, 0));
	}
	struct {
		const char *name;
		int64_t r, c;
		float scale;
	} mats[] = {{"wq", HHD, D, 0.125f},   {"wkv", MODEL_HD, D, 0.125f}, {"wo", D, HHD, 0.0625f},
		    {"w1", E * F, D, 0.125f}, {"w3", E * F, D, 0.125f},	    {"w2", E * D, F, 0.177f},
		    {"sw1", F, D, 0.125f},    {"sw3", F, D, 0.125f},	    {"sw2", D, F, 0.177f}};
	for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
		snprintf(n, sizeof n, "%s.%s", pre, mats[i].name);
		struct align_fill f = {ALIGN_FILL_NORMAL, mats[i].scale, 0, 0};
		ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, f, 2, mats[i].r, mats[i].c));
	}
	snprintf(n, sizeof n, "%s.sink", pre);
	ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, spec_fill("sparse_attn", 3), 1, MODEL_H, 0));
	snprintf(n, sizeof n, "%s.gate", pre);
	struct align_fill gf = {ALIGN_FILL_NORMAL, 0.125f, 0, 0};
	ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, gf, 2, E, D));
	snprintf(n, sizeof n, "%s.gate_bias", pre);
	ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, spec_fill("router", 2), 1, E, 0));
	snprintf(n, sizeof n, "%s.tid2eid", pre);
	struct align_fill hf = {ALIGN_FILL_EXPERT_IDS, 0, (float)E, 0};
	return wnew(md, n, ALIGN_DT_I32, hf, 2, MODEL_V, MODEL_K);
}

static int head_weights(struct model *md, const char *pre)
{
	char n[64];
	struct align_fill one = {ALIGN_FILL_CONST, 1.0f, 0, 0};
	snprintf(n, sizeof n, "%s.hc_fn", pre);
	ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, spec_fill("mhc_head", 1), 2, MODEL_N, MODEL_N * MODEL_D));
	snprintf(n, sizeof n, "%s.hc_base", pre);
	ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, spec_fill("mhc_head", 2), 1, MODEL_N, 0));
	snprintf(n, sizeof n, "%s.hc_scale", pre);
	ALIGN_TRY(merr(md), wnew(md, n, ALIGN_DT_F32, spec_fill("mhc_head", 3), 1, 1, 0));
	snprintf(n, sizeof n, "%s.norm", pre);
	return wnew(md, n, ALIGN_DT_F32, one, 1, MODEL_D, 0);
}

static int model_weights(struct model *md)
{
	struct align_fill one = {ALIGN_FILL_CONST, 1.0f, 0, 0};
	ALIGN_TRY(merr(md), wnew(md, "embed", ALIGN_DT_F32, spec_fill("embedding", 1), 2, MODEL_V, MODEL_D));
	for (int l = 0; l < MODEL_L; l++) {
		char pre[16];
		snprintf(pre, sizeof pre, "layer%d", l);
		ALIGN_TRY(merr(md), layer_weights(md, pre));
	}
	ALIGN_TRY(merr(md), head_weights(md, "head"));
	struct align_fill lf = {ALIGN_FILL_NORMAL, 0.125f, 0, 0};
	ALIGN_TRY(merr(md), wnew(md, "lm_head", ALIGN_DT_F32, lf, 2, MODEL_V, MODEL_D));
	ALIGN_TRY(merr(md), wnew(md, "mtp1.enorm", ALIGN_DT_F32, one, 1, MODEL_D, 0));
	ALIGN_TRY(merr(md), wnew(md, "mtp1.hnorm", ALIGN_DT_F32, one, 1, MODEL_D, 0));
	struct align_fill ef = {ALIGN_FILL_NORMAL, 0.088f, 0, 0};
	ALIGN_TRY(merr(md), wnew(md, "mtp1.e_proj", ALIGN_DT_F32, ef, 2, MODEL_D, MODEL_D));
	ALIGN_TRY(merr(md), wnew(md, "mtp1.h_proj", ALIGN_DT_F32, ef, 2, MODEL_D, MODEL_D));
	ALIGN_TRY(merr(md), layer_weights(md, "mtp1.layer"));
	return head_weights(md, "mtp1.head");
}

/* The fixed step of every fp32 weight: w += 2^-10 * d. */
static void perturb(struct model *md)
{
	for (int i = 0; i < md->np; i++) {
		struct mparam *p = &md->p[i];
		if (!p->d)
			continue;
		float *w = p->t.data;
		for (int64_t k = 0; k < align_tensor_numel(&p->t); k++)
			w[k] += 0x1p-10f * p->d[k];
	}
}

/* x[T,N,D]: h[T,D] copied into each stream. */
static int streams(struct model *md, const struct align_tensor *h, struct align_tensor *x)
{
	ALIGN_TRY(merr(md), tnew(md, x, ALIGN_DT_BF16, "x", 3, MODEL_T, MODEL_N, MODEL_D));
	for (int t = 0; t < MODEL_T; t++)
		for (int s = 0; s < MODEL_N; s++)
			memcpy((align_bf16 *)x->data + ((size_t)t * MODEL_N + s) * MODEL_D,
			       (const align_bf16 *)h->data + (size_t)t * MODEL_D, MODEL_D * sizeof(align_bf16));
	return ALIGN_OK;
}

static int embed(struct model *md, const char *scope, const struct align_tensor *ids, struct align_tensor *y)
{
	struct align_tensor in[2] = {*ids, *W(md, NULL, "embed")};
	in[0].name = "ids", in[1].name = "table";
	char dims[64];
	snprintf(dims, sizeof dims, "T=%d,V=%d,D=%d", MODEL_T, MODEL_V, MODEL_D);
	return op(md, scope, "embedding", dims, in, y, NULL);
}

/* mhc_head, final norm, shared lm_head and xent: the loss (mean) of the scope. */
static int head_loss(struct model *md, const char *scope, const char *pre, const struct align_tensor *x,
		     const struct align_tensor *labels, struct align_tensor *h, float *loss)
{
	struct align_err *e = merr(md);
	struct align_tensor in[4] = {*x, *W(md, pre, "hc_fn"), *W(md, pre, "hc_base"), *W(md, pre, "hc_scale")};
	in[0].name = "x", in[1].name = "fn", in[2].name = "base", in[3].name = "scale";
	struct align_tensor hh[1], n[1], lg[1], xe[3];
	char dims[96];
	snprintf(dims, sizeof dims, "T=%d,N=%d,D=%d", MODEL_T, MODEL_N, MODEL_D);
	ALIGN_TRY(e, op(md, scope, "mhc_head", dims, in, hh, NULL));
	ALIGN_TRY(e, rmsnorm(md, scope, &hh[0], W(md, pre, "norm"), n));
	struct align_tensor lin[2] = {n[0], *W(md, NULL, "lm_head")};
	lin[0].name = "x", lin[1].name = "w";
	snprintf(dims, sizeof dims, "T=%d,D=%d,V=%d", MODEL_T, MODEL_D, MODEL_V);
	ALIGN_TRY(e, op(md, scope, "lm_head", dims, lin, lg, NULL));
	struct align_tensor xin[2] = {lg[0], *labels};
	xin[0].name = "logits", xin[1].name = "labels";
	snprintf(dims, sizeof dims, "T=%d,V=%d,S=%d", MODEL_T, MODEL_V, MODEL_S);
	ALIGN_TRY(e, op(md, scope, "xent", dims, xin, xe, NULL));
	*h = hh[0];
	*loss = ((const float *)xe[2].data)[0];
	return ALIGN_OK;
}

/* The step's tokens: ids, next-token labels (-1 at a sequence's end), positions, window index rows (the
 * MTP layer's ids, labels and positions are the mtp op's). */
static int tokens(struct model *md, struct model_tokens *tk)
{
	struct align_err *e = merr(md);
	const int T = MODEL_T, S = MODEL_S;
	ALIGN_TRY(e, tnew(md, &tk->ids, ALIGN_DT_I32, "ids", 1, T, 0, 0));
	struct align_fill f = {ALIGN_FILL_TOKEN_IDS, 0, (float)MODEL_V, 0};
	if (ops_fill_tensor(&f, "model", &tk->ids, md->seed, md->step))
		return fail_internal(e, "model: cannot draw the tokens");
	ALIGN_TRY(e, tnew(md, &tk->labels, ALIGN_DT_I32, "labels", 1, T, 0, 0));
	ALIGN_TRY(e, tnew(md, &tk->pos, ALIGN_DT_I32, "pos", 1, T, 0, 0));
	ALIGN_TRY(e, tnew(md, &tk->win, ALIGN_DT_I32, "idx", 2, T, MODEL_W, 0));
	const int32_t *ids = tk->ids.data;
	for (int t = 0; t < T; t++) {
		int p = t % S;
		((int32_t *)tk->pos.data)[t] = p;
		((int32_t *)tk->labels.data)[t] = p + 1 < S ? ids[t + 1] : -1;
		for (int j = 0; j < MODEL_W; j++)
			((int32_t *)tk->win.data)[t * MODEL_W + j] = j <= p ? t - j : -1;
	}
	return md->tr->f ? run_trace_tensor(md->tr, "model", md->step, "input", &tk->ids) : ALIGN_OK;
}

/* rows r0 and r1 (each [n] of the fp32 weights a and b) stacked into a new [2n or 2 rows, ...] activation */
static int stack2(struct model *md, const struct align_tensor *a, const struct align_tensor *b, const char *name,
		  int ndim, int64_t r, int64_t c, struct align_tensor *t)
{
	ALIGN_TRY(merr(md), tnew(md, t, ALIGN_DT_F32, name, ndim, r, c, 0));
	size_t n = (size_t)align_tensor_numel(a);
	memcpy(t->data, a->data, n * sizeof(float));
	memcpy((float *)t->data + n, b->data, n * sizeof(float));
	return ALIGN_OK;
}

/* MTP depth 1 (spec 8, DSv4): the mtp op (kernels/ops/mtp.h: the shift of ids, labels and positions, the
 * shared embedding of the shifted ids, enorm, hnorm of the main model's final streams per stream, e_proj
 * and h_proj, X0 by ALIGN_MTP_COMBINE), one layer with its own mHC parameters, its own hc_head and final
 * norm, the shared lm_head, xent on the labels shifted by two. The op's outputs are traced under the names
 * the blocks had when the model called them one by one. */
static int mtp(struct model *md, const struct model_tokens *tk0, const struct align_tensor *x_main, float *loss)
{
	struct align_err *e = merr(md);
	const int64_t T = MODEL_T, D = MODEL_D;
	struct align_tensor in[6], out[7], hh;
	in[0] = tk0->ids, in[1] = tk0->pos, in[2] = *W(md, NULL, "embed"), in[3] = *x_main;
	ALIGN_TRY(e, stack2(md, W(md, "mtp1", "enorm"), W(md, "mtp1", "hnorm"), "norm", 2, 2, D, &in[4]));
	ALIGN_TRY(e, stack2(md, W(md, "mtp1", "e_proj"), W(md, "mtp1", "h_proj"), "proj", 2, 2 * D, D, &in[5]));
	static const char *const inames[6] = {"ids", "pos", "table", "h", "norm", "proj"};
	for (int i = 0; i < 6; i++)
		in[i].name = inames[i];
	char dims[96];
	snprintf(dims, sizeof dims, "T=%d,S=%d,V=%d,N=%d,D=%d", MODEL_T, MODEL_S, MODEL_V, MODEL_N, MODEL_D);
	ALIGN_TRY(e, op(md, NULL, "mtp", dims, in, out, NULL));
	if (md->tr->f) {
		static const char *const scope[6] = {"mtp1.embedding", "mtp1.enorm.rmsnorm", "mtp1.hnorm.rmsnorm",
						     "mtp1.e_proj",    "mtp1.h_proj",	     "mtp1.input"};
		static const char *const tname[6] = {"y", "y", "y", "y", "y", "x"};
		for (int k = 1; k < 7; k++) {
			struct align_tensor r = out[k];
			r.name = tname[k - 1];
			ALIGN_TRY(e, run_trace_tensor(md->tr, scope[k - 1], md->step, "fwd", &r));
		}
	}
	struct model_tokens tk = *tk0;
	const int32_t *tok = out[0].data;
	tk.mtp_ids = tk.mtp_labels = tk.mtp_pos = out[0];
	tk.mtp_ids.ndim = tk.mtp_labels.ndim = tk.mtp_pos.ndim = 1;
	tk.mtp_ids.shape[0] = tk.mtp_labels.shape[0] = tk.mtp_pos.shape[0] = T;
	tk.mtp_ids.data = (void *)tok, tk.mtp_labels.data = (void *)(tok + T), tk.mtp_pos.data = (void *)(tok + 2 * T);
	tk.mtp_ids.name = "ids", tk.mtp_labels.name = "labels", tk.mtp_pos.name = "pos";
	struct align_tensor x = out[6];
	ALIGN_TRY(e, attention(md, "mtp1.layer", &x, &tk, &tk.mtp_pos));
	ALIGN_TRY(e, moe(md, "mtp1.layer", &x, &tk));
	return head_loss(md, "mtp1.head", "mtp1.head", &x, &tk.mtp_labels, &hh, loss);
}

/* One forward step: the main loss and the MTP loss. */
static int model_step(struct model *md, float *lm_loss, float *mtp_loss)
{
	struct align_err *e = merr(md);
	struct model_tokens tk;
	struct align_tensor emb[1], x, h;
	ALIGN_TRY(e, tokens(md, &tk));
	ALIGN_TRY(e, embed(md, "embed", &tk.ids, emb));
	ALIGN_TRY(e, streams(md, &emb[0], &x));
	for (int l = 0; l < MODEL_L; l++) {
		char pre[16];
		snprintf(pre, sizeof pre, "layer%d", l);
		ALIGN_TRY(e, attention(md, pre, &x, &tk, &tk.pos));
		ALIGN_TRY(e, moe(md, pre, &x, &tk));
	}
	ALIGN_TRY(e, head_loss(md, "head", "head", &x, &tk.labels, &h, lm_loss));
	return mtp(md, &tk, &x, mtp_loss);
}

static void model_free(struct model *md)
{
	release(md);
	for (int i = 0; i < md->np; i++) {
		free(md->p[i].t.data);
		free(md->p[i].d);
	}
}

const char *const *run_model_ops(void)
{
	static const char *const names[] = {"embedding",   "mhc_pre", "mhc_post",    "mhc_head", "rmsnorm",
					    "matmul",	   "rope",    "sparse_attn", "router",	 "swiglu",
					    "moe_combine", "lm_head", "xent",	     "mtp",	 NULL};
	return names;
}

int run_model_steps(struct align_ctx *ctx, const struct run_opts *o, struct run_trace *tr, int log_format)
{
	struct model *md = calloc(1, sizeof *md);
	if (!md)
		return fail_internal(&ctx->err, "out of memory");
	md->ctx = ctx, md->m = &ctx->modes, md->tr = tr, md->seed = o->seed, md->dev = ctx->dev;
	int rc = model_weights(md);
	for (int step = 1; !rc && step <= o->steps; step++) {
		float lm = 0, mt = 0;
		md->step = step;
		if (step > 1)
			perturb(md);
		rc = model_step(md, &lm, &mt);
		if (!rc)
			rc = run_model_log(ctx, log_format, step, (int)o->steps, lm, mt);
		release(md);
	}
	model_free(md);
	free(md);
	return rc;
}
