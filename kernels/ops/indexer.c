/* indexer.c: CPU twin of the DSv4 lightning indexer (contract in indexer.h). */
#include "indexer.h"

#include <math.h>
#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "indexer queries (after RoPE, Hadamard)"},
	{"k", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "indexer compressed keys"},
	{"w", ALIGN_DT_BF16, "T,H", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "head weights x @ Wweights^T (unscaled)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"idx", ALIGN_DT_I32, "T,K", {ALIGN_FILL_NORMAL, 0, 0, 0}, "selected entries + offset (-1: none)"},
	{"score", ALIGN_DT_F32, "T,S", {ALIGN_FILL_NORMAL, 0, 0, 0}, "index scores (-inf: masked)"},
};

static int indexer_cfg_modes(struct indexer_cfg *c, const struct align_modes *m, struct align_err *err)
{
	const char *fn = "indexer_cfg_init";
	ALIGN_TRY(err, op_cfg_flag(err, "indexer", fn, m, MODE_INDEXER_SCORE, ALIGN_INDEXER_SCORE_BF16,
				   ALIGN_INDEXER_SCORE_FP32, &c->bf16));
	c->bf16 = !c->bf16;
	ALIGN_TRY(err, op_cfg_flag(err, "indexer", fn, m, MODE_INDEXER_WEIGHT_SCALE, ALIGN_INDEXER_WEIGHT_SCALE_ONCE,
				   ALIGN_INDEXER_WEIGHT_SCALE_TWICE, &c->twice));
	int v = m->v[MODE_INDEXER_TOPK_ORDER];
	switch ((enum align_INDEXER_TOPK_ORDER_value)v) {
	case ALIGN_INDEXER_TOPK_ORDER_SORTED:
	case ALIGN_INDEXER_TOPK_ORDER_INDEX:
	case ALIGN_INDEXER_TOPK_ORDER_TORCH:
		c->order = v;
		return ALIGN_OK;
	default:
		return op_cfg_unhandled(err, "indexer", MODE_INDEXER_TOPK_ORDER, v, fn);
	}
}

int indexer_cfg_init(struct indexer_cfg *c, const struct indexer_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err)
{
	(void)device; /* every value runs on both twins */
	ALIGN_TRY(err, op_cfg_counts(err, "indexer", m, in, n_in, out, n_out, 3, 2));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "indexer: no params");
	if (p->ratio < 1 || p->offset < 0)
		return align_fail(err, ALIGN_ERR_INPUT, "indexer: ratio %d must be >= 1 and offset %lld >= 0", p->ratio,
				  (long long)p->offset);
	ALIGN_TRY(err, op_cfg_rank(err, "indexer", in_specs[0].name, &in[0], 3));
	ALIGN_TRY(err, op_cfg_rank(err, "indexer", in_specs[1].name, &in[1], 2));
	ALIGN_TRY(err, op_cfg_rank(err, "indexer", out_specs[0].name, &out[0], 2));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], S = in[1].shape[0], K = out[0].shape[1];
	int64_t qs[3] = {T, H, D}, ks[2] = {S, D}, ws[2] = {T, H}, is[2] = {T, K}, ss[2] = {T, S};
	ALIGN_TRY(err, op_cfg_tensor(err, "indexer", "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, "indexer", "input", in_specs[1].name, &in[1], ALIGN_DT_BF16, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, "indexer", "input", in_specs[2].name, &in[2], ALIGN_DT_BF16, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, "indexer", "output", out_specs[0].name, &out[0], ALIGN_DT_I32, 2, is));
	ALIGN_TRY(err, op_cfg_tensor(err, "indexer", "output", out_specs[1].name, &out[1], ALIGN_DT_F32, 2, ss));
	if (H < 1 || D < 1 || S > INT32_MAX || S + p->offset > INT32_MAX)
		return align_fail(err, ALIGN_ERR_INPUT, "indexer: need H, D >= 1 and S + offset < 2^31");
	ALIGN_TRY(err, indexer_cfg_modes(c, m, err));
	c->T = T;
	c->H = H;
	c->D = D;
	c->S = S;
	c->K = K;
	c->ratio = p->ratio;
	c->offset = p->offset;
	double h = 1.0 / sqrt((double)H), d = 1.0 / sqrt((double)D); /* Python's n ** -0.5 */
	c->s1 = (float)h;
	c->s2 = (float)d;
	c->s12 = (float)(d * h);
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

int indexer_fwd_cpu(const struct indexer_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out)
{
	struct indexer_cfg c;
	ALIGN_TRY(NULL, indexer_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "indexer", in, n_in, out, n_out));
	const align_bf16 *q = in[0].data, *k = in[1].data, *w = in[2].data;
	int32_t *idx = out[0].data;
	float *score = out[1].data;
	int64_t kk = c.K < c.S ? c.K : c.S;
	float *wb = malloc(sizeof(float) * (size_t)c.H);
	struct ent *e = malloc(sizeof(struct ent) * (size_t)(c.S > 0 ? c.S : 1));
	int32_t *sel = malloc(sizeof(int32_t) * (size_t)(kk > 0 ? kk : 1));
	if (!wb || !e || !sel) {
		free(wb);
		free(e);
		free(sel);
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "indexer: out of memory");
	}
	for (int64_t t = 0; t < c.T; t++) {
		int64_t vis = (t + 1) / c.ratio;
		for (int64_t h = 0; h < c.H; h++)
			wb[h] = indexer_weight(&c, w[t * c.H + h]);
		for (int64_t s = 0; s < c.S; s++) {
			float v = s < vis ? indexer_score(&c, q + t * c.H * c.D, k + s * c.D, wb) : -INFINITY;
			score[t * c.S + s] = v;
			e[s].v = v;
			e[s].c = (int32_t)s;
		}
		int torch = c.order == ALIGN_INDEXER_TOPK_ORDER_TORCH;
		qsort(e, (size_t)c.S, sizeof *e, torch ? by_key : by_sorted); /* total orders: any sort agrees */
		for (int64_t j = 0; j < kk; j++)
			sel[j] = e[j].c;
		if (c.order != ALIGN_INDEXER_TOPK_ORDER_SORTED)
			qsort(sel, (size_t)kk, sizeof *sel, by_entry);
		if (torch && kk > 0)
			indexer_torch_order(score + t * c.S, sel, kk, torch_radix_key(e[kk - 1].v));
		for (int64_t j = 0; j < c.K; j++)
			idx[t * c.K + j] = j < kk && sel[j] < vis ? (int32_t)(sel[j] + c.offset) : -1;
	}
	free(wb);
	free(e);
	free(sel);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	struct indexer_params *p = params;
	p->ratio = 4;
	p->offset = 0;
}

/* 0 standalone (offset 0); 1 inside kv_full: offset = 4 S (the raw KV length before the compressed part) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct indexer_params *p = params;
	params_default(params, d);
	if (k == 1)
		p->offset = 4 * (d->v[ALIGN_DIM_S] > 0 ? d->v[ALIGN_DIM_S] : 1);
	return k >= 0 && k <= 1;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return indexer_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[3], out[2];
	struct indexer_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&indexer_impl, m, d, in, out, err));
	return indexer_cfg_init(&c, params, m, in, 3, out, 2, device, err);
}

static const int modes_read[] = {MODE_INDEXER_SCORE, MODE_INDEXER_WEIGHT_SCALE, MODE_INDEXER_TOPK_ORDER, -1};

const struct align_op_impl indexer_impl = {
	3,
	in_specs,
	2,
	out_specs,
	"T=64,H=8,D=128,S=16,K=8",
	modes_read,
	sizeof(struct indexer_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
