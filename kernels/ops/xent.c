/* xent.c: CPU twin of the cross-entropy (contract in xent.h). */
#include "xent.h"

#include <stdlib.h>

#include "lm_head.h"
#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"logits",
	 ALIGN_DT_F32,
	 "T,V",
	 {ALIGN_FILL_SPECIAL, 4.0f, 30.0f, 0},
	 "LM head output (f32 or bf16 per LMHEAD_LOGITS)"},
	{"labels", ALIGN_DT_I32, "T", {ALIGN_FILL_KV_IDX, 0, 512.0f, 'V'}, "target ids (-1: ignored token)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"loss", ALIGN_DT_F32, "T", {ALIGN_FILL_NORMAL, 0, 0, 0}, "per-token loss (0 where ignored)"},
	{"lse", ALIGN_DT_F32, "T", {ALIGN_FILL_NORMAL, 0, 0, 0}, "logsumexp of each row"},
	{"mean", ALIGN_DT_F32, "1", {ALIGN_FILL_NORMAL, 0, 0, 0}, "token mean of the loss over valid tokens"},
};

static int xent_cfg_modes(struct xent_cfg *c, const struct align_modes *m, int64_t V, int device, struct align_err *err)
{
	const char *fn = "xent_cfg_init";
	ALIGN_TRY(err, op_cfg_math(err, "xent", fn, m, device, &c->math));
	ALIGN_TRY(err, op_cfg_flag(err, "xent", fn, m, MODE_XENT_FORM, ALIGN_XENT_FORM_SHIFTED, ALIGN_XENT_FORM_LSE,
				   &c->lse));
	int v = m->v[MODE_XENT_SUM];
	switch ((enum align_XENT_SUM_value)v) {
	case ALIGN_XENT_SUM_SEQ:
	case ALIGN_XENT_SUM_PAIRWISE:
	case ALIGN_XENT_SUM_WARP32:
		break;
	case ALIGN_XENT_SUM_TORCH:
		if (V > XENT_TORCH_MAX_V)
			return align_fail(err, ALIGN_ERR_UNSUPPORTED,
					  "xent: ALIGN_XENT_SUM=torch models PyTorch's persistent log_softmax "
					  "kernel, V <= %d (got V = %lld)",
					  XENT_TORCH_MAX_V, (long long)V);
		break;
	default:
		return op_cfg_unhandled(err, "xent", MODE_XENT_SUM, v, fn);
	}
	c->sum = v;
	v = m->v[MODE_XENT_MEAN];
	switch ((enum align_XENT_MEAN_value)v) {
	case ALIGN_XENT_MEAN_TOKEN:
	case ALIGN_XENT_MEAN_SEQ_FIRST:
	case ALIGN_XENT_MEAN_TORCH32:
		break;
	default:
		return op_cfg_unhandled(err, "xent", MODE_XENT_MEAN, v, fn);
	}
	c->mean = v;
	return ALIGN_OK;
}

int xent_cfg_init(struct xent_cfg *c, const struct xent_params *p, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		  struct align_err *err)
{
	ALIGN_TRY(err, op_cfg_counts(err, "xent", m, in, n_in, out, n_out, 2, 3));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "xent: no params");
	ALIGN_TRY(err, op_cfg_rank(err, "xent", "logits", &in[0], 2));
	int64_t T = in[0].shape[0], V = in[0].shape[1], S = p->S > 0 ? p->S : T;
	int64_t ls[2] = {T, V}, ts[1] = {T}, one[1] = {1};
	int dt = lm_head_logits_dtype(m->v[MODE_LMHEAD_LOGITS]);
	ALIGN_TRY(err, op_cfg_tensor(err, "xent", "input", "logits", &in[0], dt, 2, ls));
	ALIGN_TRY(err, op_cfg_tensor(err, "xent", "input", "labels", &in[1], ALIGN_DT_I32, 1, ts));
	ALIGN_TRY(err, op_cfg_tensor(err, "xent", "output", "loss", &out[0], ALIGN_DT_F32, 1, ts));
	ALIGN_TRY(err, op_cfg_tensor(err, "xent", "output", "lse", &out[1], ALIGN_DT_F32, 1, ts));
	ALIGN_TRY(err, op_cfg_tensor(err, "xent", "output", "mean", &out[2], ALIGN_DT_F32, 1, one));
	if (V < 1)
		return align_fail(err, ALIGN_ERR_INPUT, "xent: empty vocabulary");
	if (T % S != 0)
		return align_fail(err, ALIGN_ERR_INPUT, "xent: %lld tokens are not whole sequences of S = %lld",
				  (long long)T, (long long)S);
	ALIGN_TRY(err, xent_cfg_modes(c, m, V, device, err));
	c->T = T;
	c->V = V;
	c->S = S;
	c->bf16 = dt == ALIGN_DT_BF16;
	return ALIGN_OK;
}

int xent_fwd_cpu(const struct xent_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		 struct align_tensor *out, int n_out)
{
	struct xent_cfg c;
	ALIGN_TRY(NULL, xent_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "xent", in, n_in, out, n_out));
	const int32_t *labels = in[1].data;
	for (int64_t t = 0; t < c.T; t++)
		if (labels[t] >= c.V)
			return align_fail(NULL, ALIGN_ERR_INPUT, "xent: labels[%lld] = %d is outside [0, %lld)",
					  (long long)t, (int)labels[t], (long long)c.V);
	float *e = malloc((size_t)c.V * sizeof *e);
	if (!e)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "xent: out of memory");
	float *loss = out[0].data, *lse = out[1].data;
	size_t es = align_dtype_size(in[0].dtype);
	for (int64_t t = 0; t < c.T; t++)
		xent_row(&c, (const char *)in[0].data + (size_t)(t * c.V) * es, labels[t], e, &loss[t], &lse[t]);
	free(e);
	((float *)out[2].data)[0] = xent_mean(&c, loss, labels);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct xent_params *)params)->S = d->v[ALIGN_DIM_S];
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return xent_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int in_dtype(const struct align_modes *m, int i)
{
	return i == 0 ? lm_head_logits_dtype(m->v[MODE_LMHEAD_LOGITS]) : in_specs[i].dtype;
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[3];
	struct xent_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&xent_impl, m, d, in, out, err));
	return xent_cfg_init(&c, params, m, in, 2, out, 3, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL, MODE_LMHEAD_LOGITS, MODE_XENT_SUM, MODE_XENT_FORM, MODE_XENT_MEAN, -1};

const struct align_op_impl xent_impl = {
	2,
	in_specs,
	3,
	out_specs,
	"T=64,V=512,S=16",
	modes_read,
	sizeof(struct xent_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	in_dtype,
};
