/* embedding.c: CPU twin of the token embedding lookup (contract in embedding.h). */
#include "embedding.h"

#include <math.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"ids", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 512.0f, 'V'}, "token ids"},
	{"table", ALIGN_DT_F32, "V,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "embedding table (fp32 master)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "embedded tokens"},
};

int embedding_check_ids(const int32_t *ids, int64_t T, int64_t V, struct align_err *err)
{
	for (int64_t t = 0; t < T; t++)
		if (ids[t] < 0 || ids[t] >= V)
			return align_fail(err, ALIGN_ERR_INPUT, "embedding: ids[%lld] = %d is outside [0, %lld)",
					  (long long)t, (int)ids[t], (long long)V);
	return ALIGN_OK;
}

int embedding_cfg_init(struct embedding_cfg *c, const struct embedding_params *p, const struct align_modes *m,
		       const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		       struct align_err *err)
{
	(void)device;
	ALIGN_TRY(err, op_cfg_counts(err, "embedding", m, in, n_in, out, n_out, 2, 1));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "embedding: no params");
	ALIGN_TRY(err, op_cfg_rank(err, "embedding", "ids", &in[0], 1));
	ALIGN_TRY(err, op_cfg_rank(err, "embedding", "table", &in[1], 2));
	int64_t T = in[0].shape[0], V = in[1].shape[0], D = in[1].shape[1];
	int64_t is[1] = {T}, ts[2] = {V, D}, ys[2] = {T, D};
	ALIGN_TRY(err, op_cfg_tensor(err, "embedding", "input", "ids", &in[0], ALIGN_DT_I32, 1, is));
	ALIGN_TRY(err, op_cfg_tensor(err, "embedding", "input", "table", &in[1], ALIGN_DT_F32, 2, ts));
	ALIGN_TRY(err, op_cfg_tensor(err, "embedding", "output", "y", &out[0], ALIGN_DT_BF16, 2, ys));
	if (!isfinite(p->scale))
		return align_fail(err, ALIGN_ERR_INPUT, "embedding: scale %g is not finite", (double)p->scale);
	int bf16 = 0;
	ALIGN_TRY(err, op_cfg_flag(err, "embedding", "embedding_cfg_init", m, MODE_EMBED_SCALE, ALIGN_EMBED_SCALE_FP32,
				   ALIGN_EMBED_SCALE_BF16, &bf16));
	c->T = T;
	c->V = V;
	c->D = D;
	c->scaled = p->scale != 0.0f;
	c->scale = bf16 ? align_round_bf16(p->scale) : p->scale;
	return ALIGN_OK;
}

int embedding_fwd_cpu(const struct embedding_params *p, const struct align_modes *m, const struct align_tensor *in,
		      int n_in, struct align_tensor *out, int n_out)
{
	struct embedding_cfg c;
	ALIGN_TRY(NULL, embedding_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "embedding", in, n_in, out, n_out));
	const int32_t *ids = in[0].data;
	const float *table = in[1].data;
	ALIGN_TRY(NULL, embedding_check_ids(ids, c.T, c.V, NULL));
	for (int64_t t = 0; t < c.T; t++)
		for (int64_t j = 0; j < c.D; j++)
			ops_st(&out[0], t * c.D + j, embedding_value(&c, table[(int64_t)ids[t] * c.D + j]));
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	((struct embedding_params *)params)->scale = 0.0f;
}

/* 0 no scale (DSv4), 1 scale sqrt(D) (Gemma-style), 2 scale 0.1 (not bf16-exact) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct embedding_params *p = params;
	params_default(params, d);
	if (k == 1)
		p->scale = sqrtf((float)d->v[ALIGN_DIM_D]);
	if (k == 2)
		p->scale = 0.1f;
	return k >= 0 && k <= 2;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return embedding_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[1];
	struct embedding_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&embedding_impl, m, d, in, out, err));
	return embedding_cfg_init(&c, params, m, in, 2, out, 1, device, err);
}

static const int modes_read[] = {MODE_EMBED_SCALE, -1};

const struct align_op_impl embedding_impl = {
	2,
	in_specs,
	1,
	out_specs,
	"T=32,V=512,D=256",
	modes_read,
	sizeof(struct embedding_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
