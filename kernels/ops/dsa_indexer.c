/* dsa_indexer.c: CPU twin of the DeepSeek-V3.2 DSA indexer (contract in dsa_indexer.h). */
#include "dsa_indexer.h"

#include <math.h>
#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"q",
	 ALIGN_DT_BF16,
	 "T,H,D",
	 {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0},
	 "indexer queries after RoPE (before Hadamard)"},
	{"k", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "indexer keys after LayerNorm, RoPE"},
	{"w", ALIGN_DT_BF16, "T,H", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "head weights weights_proj(x) (unscaled)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"idx", ALIGN_DT_I32, "T,K", {ALIGN_FILL_NORMAL, 0, 0, 0}, "selected key rows (-1: none)"},
	{"score", ALIGN_DT_F32, "T,S", {ALIGN_FILL_NORMAL, 0, 0, 0}, "index scores (-inf: masked)"},
};

static int dsa_indexer_cfg_modes(struct dsa_indexer_cfg *c, const struct align_modes *m, struct align_err *err)
{
	const char *op = "dsa_indexer", *fn = "dsa_indexer_cfg_init";
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_DSA_INDEXER_SCORE, ALIGN_DSA_INDEXER_SCORE_FP32,
				   ALIGN_DSA_INDEXER_SCORE_FP8, &c->fp8));
	int v = m->v[MODE_DSA_FP8_SCALE];
	switch ((enum align_DSA_FP8_SCALE_value)v) {
	case ALIGN_DSA_FP8_SCALE_UE8M0:
		c->scale_rule = ALIGN_FP8_SCALE_UE8M0;
		break;
	case ALIGN_DSA_FP8_SCALE_MUL:
		c->scale_rule = ALIGN_FP8_SCALE_MUL;
		break;
	case ALIGN_DSA_FP8_SCALE_DIV:
		c->scale_rule = ALIGN_FP8_SCALE_DIV;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_DSA_FP8_SCALE, v, fn);
	}
	v = m->v[MODE_DSA_HADAMARD];
	switch ((enum align_DSA_HADAMARD_value)v) {
	case ALIGN_DSA_HADAMARD_BUTTERFLY:
		c->hadamard = ALIGN_HADAMARD_BUTTERFLY;
		break;
	case ALIGN_DSA_HADAMARD_DENSE:
		c->hadamard = ALIGN_HADAMARD_DENSE;
		break;
	case ALIGN_DSA_HADAMARD_NONE:
		c->hadamard = ALIGN_HADAMARD_NONE;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_DSA_HADAMARD, v, fn);
	}
	v = m->v[MODE_INDEXER_TOPK_ORDER];
	switch ((enum align_INDEXER_TOPK_ORDER_value)v) {
	case ALIGN_INDEXER_TOPK_ORDER_SORTED:
	case ALIGN_INDEXER_TOPK_ORDER_INDEX:
	case ALIGN_INDEXER_TOPK_ORDER_TORCH:
		c->ix.order = v;
		return ALIGN_OK;
	default:
		return op_cfg_unhandled(err, op, MODE_INDEXER_TOPK_ORDER, v, fn);
	}
}

int dsa_indexer_cfg_init(struct dsa_indexer_cfg *c, const struct dsa_indexer_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err)
{
	const char *op = "dsa_indexer";
	(void)device; /* every value runs on both twins */
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 3, 2));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	if (p->start < 0 || p->start > INT32_MAX)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: start %lld outside [0, 2^31)", op, (long long)p->start);
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[0].name, &in[0], 3));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[1].name, &in[1], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, out_specs[0].name, &out[0], 2));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], S = in[1].shape[0], K = out[0].shape[1];
	int64_t qs[3] = {T, H, D}, ks[2] = {S, D}, ws[2] = {T, H}, is[2] = {T, K}, ss[2] = {T, S};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[1].name, &in[1], ALIGN_DT_BF16, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[2].name, &in[2], ALIGN_DT_BF16, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[0].name, &out[0], ALIGN_DT_I32, 2, is));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[1].name, &out[1], ALIGN_DT_F32, 2, ss));
	if (H < 1 || !align_is_pow2(D) || D > DSA_INDEXER_D_MAX || S > INT32_MAX)
		return align_fail(err, ALIGN_ERR_INPUT,
				  "%s: need H >= 1, D a power of two <= %d and S < 2^31, got H = %lld, D = %lld", op,
				  DSA_INDEXER_D_MAX, (long long)H, (long long)D);
	ALIGN_TRY(err, dsa_indexer_cfg_modes(c, m, err));
	c->T = T, c->H = H, c->D = D, c->S = S, c->K = K, c->start = p->start;
	double h = 1.0 / sqrt((double)H), d = 1.0 / sqrt((double)D); /* Python's n ** -0.5 */
	c->hscale = (float)d;
	c->ix.T = T, c->ix.H = H, c->ix.D = D, c->ix.S = S, c->ix.K = K;
	c->ix.ratio = 1, c->ix.offset = 0;
	c->ix.bf16 = 0;	 /* fp32 einsum, relu, fp32 multiply and head sum */
	c->ix.twice = 1; /* fp32 path: *H^-0.5 then *D^-0.5 in bf16 */
	c->ix.s1 = (float)h;
	c->ix.s2 = (float)d;
	c->ix.s12 = (float)(d * h);
	return ALIGN_OK;
}

struct ent {
	float v;
	int32_t c;
};

static int by_sorted(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	return indexer_before(x->v, x->c, y->v, y->c) ? -1 : indexer_before(y->v, y->c, x->v, x->c) ? 1 : 0;
}

static int by_key(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	return indexer_before_key(x->v, x->c, y->v, y->c) ? -1 : indexer_before_key(y->v, y->c, x->v, x->c) ? 1 : 0;
}

static int by_entry(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

int dsa_indexer_fwd_cpu(const struct dsa_indexer_params *p, const struct align_modes *m, const struct align_tensor *in,
			int n_in, struct align_tensor *out, int n_out)
{
	struct dsa_indexer_cfg c;
	ALIGN_TRY(NULL, dsa_indexer_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "dsa_indexer", in, n_in, out, n_out));
	const align_bf16 *q = in[0].data, *k = in[1].data, *w = in[2].data;
	int32_t *idx = out[0].data;
	float *score = out[1].data;
	const int64_t T = c.T, H = c.H, D = c.D, S = c.S, K = c.K, kk = K < S ? K : S;
	align_bf16 *qp = malloc(sizeof(align_bf16) * (size_t)(H * D)),
		   *kp = malloc(sizeof(align_bf16) * (size_t)(S * D + 1));
	float *ks = malloc(sizeof(float) * (size_t)(S + 1)), *wt = malloc(sizeof(float) * (size_t)H);
	float tmp[2 * DSA_INDEXER_D_MAX];
	struct ent *e = malloc(sizeof(struct ent) * (size_t)(S > 0 ? S : 1));
	int32_t *sel = malloc(sizeof(int32_t) * (size_t)(kk > 0 ? kk : 1));
	int rc = ALIGN_OK;
	if (!qp || !kp || !ks || !wt || !e || !sel) {
		rc = align_fail(NULL, ALIGN_ERR_INTERNAL, "dsa_indexer: out of memory");
		goto done;
	}
	for (int64_t j = 0; j < S; j++)
		ks[j] = dsa_indexer_prep_row(&c, k + j * D, kp + j * D, tmp);
	for (int64_t t = 0; t < T; t++) {
		const int64_t last = c.start + t; /* keys 0..last visible */
		for (int64_t h = 0; h < H; h++) {
			float qs = dsa_indexer_prep_row(&c, q + (t * H + h) * D, qp + h * D, tmp);
			wt[h] = dsa_indexer_weight(&c, w[t * H + h], qs);
		}
		for (int64_t j = 0; j < S; j++) {
			float v = j <= last ? dsa_indexer_score(&c, qp, kp + j * D, wt, ks[j]) : -INFINITY;
			score[t * S + j] = v;
			e[j].v = v;
			e[j].c = (int32_t)j;
		}
		int torch = c.ix.order == ALIGN_INDEXER_TOPK_ORDER_TORCH;
		qsort(e, (size_t)S, sizeof *e, torch ? by_key : by_sorted); /* total orders: any sort agrees */
		for (int64_t j = 0; j < kk; j++)
			sel[j] = e[j].c;
		if (c.ix.order != ALIGN_INDEXER_TOPK_ORDER_SORTED)
			qsort(sel, (size_t)kk, sizeof *sel, by_entry);
		if (torch && kk > 0)
			indexer_torch_order(score + t * S, sel, kk, torch_radix_key(e[kk - 1].v));
		for (int64_t j = 0; j < K; j++)
			idx[t * K + j] = j < kk && sel[j] <= last ? sel[j] : -1;
	}
done:
	free(qp);
	free(kp);
	free(ks);
	free(wt);
	free(e);
	free(sel);
	return rc;
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	struct dsa_indexer_params *p = params;
	p->start = 0;
}

/* 0 prefill from position 0; 1 a chunk after S/2 cached keys (chunked prefill / decode: rows see more keys) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct dsa_indexer_params *p = params;
	params_default(params, d);
	if (k == 1)
		p->start = d->v[ALIGN_DIM_S] / 2; /* not T: the first T/2 rows keep their bits (batch invariance) */
	return k >= 0 && k <= 1;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return dsa_indexer_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[3], out[2];
	struct dsa_indexer_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&dsa_indexer_impl, m, d, in, out, err));
	return dsa_indexer_cfg_init(&c, params, m, in, 3, out, 2, device, err);
}

static const int modes_read[] = {MODE_DSA_INDEXER_SCORE, MODE_DSA_FP8_SCALE, MODE_DSA_HADAMARD, MODE_INDEXER_TOPK_ORDER,
				 -1};

const struct align_op_impl dsa_indexer_impl = {
	3,
	in_specs,
	2,
	out_specs,
	"T=16,H=4,D=32,S=24,K=8",
	modes_read,
	sizeof(struct dsa_indexer_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
