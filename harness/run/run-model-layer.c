/* run-model-layer: the two sublayers of a layer of `align run model` (run-model.c says the model):
 * attention (mhc_pre, attn_norm, wq / wkv, RoPE, sliding-window sparse_attn with sink, inverse RoPE, wo,
 * mhc_post) and MoE (mhc_pre, ffn_norm, router, each expert's w1/w3 -> swiglu -> w2 over its tokens, the
 * shared expert, moe_combine, mhc_post). */
#include "err.h"
#include "rope.h"
#include "run-model-impl.h"
#include "sparse_attn.h"
#include "swiglu.h"

#include <stdio.h>
#include <string.h>

static void rope_dsv4(void *params)
{
	((struct rope_params *)params)->rope_dim = MODEL_ROPE;
}

static void rope_inverse(void *params)
{
	rope_dsv4(params);
	((struct rope_params *)params)->inverse = 1;
}

/* every index slot is a window slot (the model's attention is sliding-window) */
static void window_all(void *params)
{
	((struct sparse_attn_params *)params)->window = MODEL_W;
}

static void shared_expert(void *params)
{
	((struct swiglu_params *)params)->shared = 1;
}

static int rope(struct model *md, const char *scope, struct align_tensor *x, const struct align_tensor *pos,
		void (*tweak)(void *))
{
	struct align_tensor in[2] = {*x, *pos}, out[1];
	in[0].name = "x", in[1].name = "pos";
	char dims[64];
	snprintf(dims, sizeof dims, "T=%lld,H=%lld,D=%lld", (long long)x->shape[0], (long long)x->shape[1],
		 (long long)x->shape[2]);
	ALIGN_TRY(merr(md), op(md, scope, "rope", dims, in, out, tweak));
	*x = out[0];
	return ALIGN_OK;
}

int attention(struct model *md, const char *pre, struct align_tensor *x, const struct model_tokens *tk,
	      const struct align_tensor *pos)
{
	char scope[48];
	snprintf(scope, sizeof scope, "%s.attn", pre);
	struct align_err *e = merr(md);
	struct align_tensor hp[4], a[1], q, kv, o[1], f;
	const int64_t T = MODEL_T, H = MODEL_H, HD = MODEL_HD;
	char pre_attn[48];
	snprintf(pre_attn, sizeof pre_attn, "%s.attn", pre);
	ALIGN_TRY(e, hc_pre(md, scope, pre_attn, x, hp));
	ALIGN_TRY(e, rmsnorm(md, scope, &hp[0], W(md, pre_attn, "norm"), a));
	ALIGN_TRY(e, linear(md, scope, "wq", &a[0], W(md, pre, "wq"), ALIGN_DT_BF16, &q));
	ALIGN_TRY(e, linear(md, scope, "wkv", &a[0], W(md, pre, "wkv"), ALIGN_DT_BF16, &kv));
	q.ndim = 3, q.shape[1] = H, q.shape[2] = HD;
	kv.ndim = 3, kv.shape[1] = 1, kv.shape[2] = HD;
	ALIGN_TRY(e, rope(md, scope, &q, pos, rope_dsv4));
	ALIGN_TRY(e, rope(md, scope, &kv, pos, rope_dsv4));
	kv.ndim = 2, kv.shape[1] = HD;
	struct align_tensor in[4] = {q, kv, tk->win, *W(md, pre, "sink")};
	in[0].name = "q", in[1].name = "kv", in[2].name = "idx", in[3].name = "sink";
	char dims[96];
	snprintf(dims, sizeof dims, "T=%lld,H=%lld,D=%lld,S=%lld,N=%d", (long long)T, (long long)H, (long long)HD,
		 (long long)T, MODEL_W);
	ALIGN_TRY(e, op(md, scope, "sparse_attn", dims, in, o, window_all));
	ALIGN_TRY(e, rope(md, scope, &o[0], pos, rope_inverse));
	ALIGN_TRY(e, linear(md, scope, "wo", &o[0], W(md, pre, "wo"), ALIGN_DT_BF16, &f));
	return hc_post(md, scope, x, &f, hp);
}

/* One expert's w1/w3 -> swiglu -> w2 over the (token, slot) pairs routed to it; results scattered into
 * the [T,K,*] tensors gu (g then u), act and eo. */
static int expert(struct model *md, const char *pre, int ex, const struct align_tensor *a, const struct align_tensor *r,
		  struct align_tensor *g_all, struct align_tensor *u_all, struct align_tensor *act,
		  struct align_tensor *eo)
{
	struct align_err *e = merr(md);
	const int32_t *idx = r[0].data;
	const float *wt = r[1].data;
	int rows[MODEL_T * MODEL_K], n = 0;
	for (int i = 0; i < MODEL_T * MODEL_K; i++)
		if (idx[i] == ex)
			rows[n++] = i;
	if (!n)
		return ALIGN_OK;
	const int64_t D = MODEL_D, F = MODEL_F;
	struct align_tensor x, p, g, u, h[1], y;
	ALIGN_TRY(e, tnew(md, &x, ALIGN_DT_BF16, "x", 2, n, D, 0));
	ALIGN_TRY(e, tnew(md, &p, ALIGN_DT_F32, "p", 1, n, 0, 0));
	for (int i = 0; i < n; i++) {
		memcpy((align_bf16 *)x.data + i * D, (const align_bf16 *)a->data + (rows[i] / MODEL_K) * D,
		       (size_t)D * sizeof(align_bf16));
		((float *)p.data)[i] = wt[rows[i]];
	}
	struct align_tensor w1 = wrows(W(md, pre, "w1"), ex * F, F), w3 = wrows(W(md, pre, "w3"), ex * F, F);
	struct align_tensor w2 = wrows(W(md, pre, "w2"), ex * D, D);
	ALIGN_TRY(e, linear(md, NULL, "w1", &x, &w1, ALIGN_DT_BF16, &g));
	ALIGN_TRY(e, linear(md, NULL, "w3", &x, &w3, ALIGN_DT_BF16, &u));
	struct align_tensor in[3] = {g, u, p};
	in[0].name = "g", in[1].name = "u", in[2].name = "p";
	char dims[64];
	snprintf(dims, sizeof dims, "T=%d,F=%lld", n, (long long)F);
	ALIGN_TRY(e, op(md, NULL, "swiglu", dims, in, h, NULL));
	ALIGN_TRY(e, linear(md, NULL, "w2", &h[0], &w2, ALIGN_DT_BF16, &y));
	for (int i = 0; i < n; i++) {
		memcpy((align_bf16 *)g_all->data + rows[i] * F, (align_bf16 *)g.data + i * F, (size_t)F * 2);
		memcpy((align_bf16 *)u_all->data + rows[i] * F, (align_bf16 *)u.data + i * F, (size_t)F * 2);
		memcpy((align_bf16 *)act->data + rows[i] * F, (align_bf16 *)h[0].data + i * F, (size_t)F * 2);
		memcpy((align_bf16 *)eo->data + rows[i] * D, (align_bf16 *)y.data + i * D, (size_t)D * 2);
	}
	return ALIGN_OK;
}

int moe(struct model *md, const char *pre, struct align_tensor *x, const struct model_tokens *tk)
{
	char scope[48];
	snprintf(scope, sizeof scope, "%s.ffn", pre);
	struct align_err *e = merr(md);
	const int64_t T = MODEL_T, K = MODEL_K, D = MODEL_D, F = MODEL_F;
	struct align_tensor hp[4], a[1], r[2], g, u, act, eo, sg, su, sh[1], shared, y[1];
	ALIGN_TRY(e, hc_pre(md, scope, scope, x, hp));
	ALIGN_TRY(e, rmsnorm(md, scope, &hp[0], W(md, scope, "norm"), a));
	struct align_tensor rin[5] = {a[0], *W(md, pre, "gate"), *W(md, pre, "gate_bias"), tk->ids,
				      *W(md, pre, "tid2eid")};
	rin[0].name = "x", rin[1].name = "w", rin[2].name = "bias", rin[3].name = "ids", rin[4].name = "tid2eid";
	char dims[96];
	snprintf(dims, sizeof dims, "T=%lld,D=%lld,E=%d,K=%lld,V=%d", (long long)T, (long long)D, MODEL_E, (long long)K,
		 MODEL_V);
	ALIGN_TRY(e, op(md, scope, "router", dims, rin, r, NULL));
	ALIGN_TRY(e, tnew(md, &g, ALIGN_DT_BF16, "g", 3, T, K, F));
	ALIGN_TRY(e, tnew(md, &u, ALIGN_DT_BF16, "u", 3, T, K, F));
	ALIGN_TRY(e, tnew(md, &act, ALIGN_DT_BF16, "a", 3, T, K, F));
	ALIGN_TRY(e, tnew(md, &eo, ALIGN_DT_BF16, "y", 3, T, K, D));
	for (int ex = 0; ex < MODEL_E; ex++)
		ALIGN_TRY(e, expert(md, pre, ex, &a[0], r, &g, &u, &act, &eo));
	if (md->tr->f) {
		char full[96];
		snprintf(full, sizeof full, "%s.w13", scope);
		ALIGN_TRY(e, run_trace_tensor(md->tr, full, md->step, "fwd", &g));
		ALIGN_TRY(e, run_trace_tensor(md->tr, full, md->step, "fwd", &u));
		snprintf(full, sizeof full, "%s.swiglu", scope);
		ALIGN_TRY(e, run_trace_tensor(md->tr, full, md->step, "fwd", &act));
		snprintf(full, sizeof full, "%s.w2", scope);
		ALIGN_TRY(e, run_trace_tensor(md->tr, full, md->step, "fwd", &eo));
	}
	ALIGN_TRY(e, linear(md, scope, "shared.w1", &a[0], W(md, pre, "sw1"), ALIGN_DT_BF16, &sg));
	ALIGN_TRY(e, linear(md, scope, "shared.w3", &a[0], W(md, pre, "sw3"), ALIGN_DT_BF16, &su));
	struct align_tensor p;
	ALIGN_TRY(e, tnew(md, &p, ALIGN_DT_F32, "p", 1, T, 0, 0));
	for (int64_t t = 0; t < T; t++)
		((float *)p.data)[t] = 1.0f;
	struct align_tensor sin[3] = {sg, su, p};
	sin[0].name = "g", sin[1].name = "u";
	snprintf(dims, sizeof dims, "T=%lld,F=%lld", (long long)T, (long long)F);
	char sscope[64];
	snprintf(sscope, sizeof sscope, "%s.shared", scope);
	ALIGN_TRY(e, op(md, sscope, "swiglu", dims, sin, sh, shared_expert));
	ALIGN_TRY(e, linear(md, scope, "shared.w2", &sh[0], W(md, pre, "sw2"), ALIGN_DT_BF16, &shared));
	struct align_tensor cin[4] = {eo, r[0], r[1], shared};
	cin[0].name = "eo", cin[1].name = "idx", cin[2].name = "w", cin[3].name = "shared";
	snprintf(dims, sizeof dims, "T=%lld,K=%lld,D=%lld,E=%d", (long long)T, (long long)K, (long long)D, MODEL_E);
	ALIGN_TRY(e, op(md, scope, "moe_combine", dims, cin, y, NULL));
	struct align_tensor f;
	ALIGN_TRY(e, tcast(md, &y[0], &f, ALIGN_DT_BF16, 2, T, D, 0));
	return hc_post(md, scope, x, &f, hp);
}
