/* xent_bwd.c: CPU twin of the cross-entropy backward (contract in xent_bwd.h). */
#include "xent_bwd.h"

#include <stdlib.h>

#include "lm_head.h"
#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"logits",
	 ALIGN_DT_F32,
	 "T,V",
	 {ALIGN_FILL_SPECIAL, 4.0f, 30.0f, 0},
	 "the forward's logits (f32 or bf16 per LMHEAD_LOGITS)"},
	{"labels", ALIGN_DT_I32, "T", {ALIGN_FILL_KV_IDX, 0, 512.0f, 'V'}, "target ids (-1: ignored token)"},
	{"dloss", ALIGN_DT_F32, "T", {ALIGN_FILL_SPECIAL, 0.05f, 1.0f, 0}, "gradient of each token's loss"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dlogits", ALIGN_DT_F32, "T,V", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the logits (their dtype)"},
};

static int xent_bwd_cfg_modes(struct xent_bwd_cfg *c, const struct align_modes *m, struct align_err *err)
{
	const char *fn = "xent_bwd_cfg_init";
	int v = m->v[MODE_XENT_BWD_PROB];
	switch ((enum align_XENT_BWD_PROB_value)v) {
	case ALIGN_XENT_BWD_PROB_DIV:
	case ALIGN_XENT_BWD_PROB_EXPLSM:
		break;
	default:
		return op_cfg_unhandled(err, "xent_bwd", MODE_XENT_BWD_PROB, v, fn);
	}
	c->prob = v;
	v = m->v[MODE_XENT_BWD_FORM];
	switch ((enum align_XENT_BWD_FORM_value)v) {
	case ALIGN_XENT_BWD_FORM_SCALE:
	case ALIGN_XENT_BWD_FORM_LSM:
	case ALIGN_XENT_BWD_FORM_LSM_FMA:
		break;
	default:
		return op_cfg_unhandled(err, "xent_bwd", MODE_XENT_BWD_FORM, v, fn);
	}
	c->form = v;
	return ALIGN_OK;
}

/* xent's config under the forward's tensors: the logits, labels and (as placeholders for its loss, lse and
 * mean checks) tensors of the shapes it wants; then the backward's own tensors and modes */
int xent_bwd_cfg_init(struct xent_bwd_cfg *c, const struct xent_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err)
{
	const char *op = "xent_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 3, 1));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, "logits", &in[0], 2));
	int64_t T = in[0].shape[0], V = in[0].shape[1], ls[2] = {T, V}, ts[1] = {T};
	int dt = lm_head_logits_dtype(m->v[MODE_LMHEAD_LOGITS]);
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "logits", &in[0], dt, 2, ls));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "labels", &in[1], ALIGN_DT_I32, 1, ts));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dloss", &in[2], ALIGN_DT_F32, 1, ts));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dlogits", &out[0], dt, 2, ls));
	struct align_tensor fo[3];
	for (int i = 0; i < 3; i++) {
		fo[i] = in[2]; /* shape and dtype only: xent's config reads no data */
		fo[i].data = NULL;
	}
	fo[2].shape[0] = 1;
	struct xent_params fp = {T}; /* one sequence: the mean's order is not the backward's business */
	ALIGN_TRY(err, xent_cfg_init(&c->f, &fp, m, in, 2, fo, 3, device, err));
	return xent_bwd_cfg_modes(c, m, err);
}

/* labels >= V are refused before any output is written (the forward's message) */
static int check_labels(const struct xent_bwd_cfg *c, const int32_t *labels)
{
	for (int64_t t = 0; t < c->f.T; t++)
		if (labels[t] >= c->f.V)
			return align_fail(NULL, ALIGN_ERR_INPUT, "xent_bwd: labels[%lld] = %d is outside [0, %lld)",
					  (long long)t, (int)labels[t], (long long)c->f.V);
	return ALIGN_OK;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	struct xent_bwd_cfg c;
	ALIGN_TRY(NULL, xent_bwd_cfg_init(&c, params, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "xent_bwd", in, n_in, out, n_out));
	const int32_t *labels = in[1].data;
	const float *dloss = in[2].data;
	ALIGN_TRY(NULL, check_labels(&c, labels));
	float *e = malloc((size_t)c.f.V * sizeof *e);
	if (!e)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "xent_bwd: out of memory");
	size_t es = align_dtype_size(in[0].dtype);
	for (int64_t t = 0; t < c.f.T; t++)
		xent_bwd_row(&c, (const char *)in[0].data + (size_t)(t * c.f.V) * es, labels[t], dloss[t], e,
			     (char *)out[0].data + (size_t)(t * c.f.V) * es);
	free(e);
	return ALIGN_OK;
}

/* xent's parameters (S, tokens per sequence): the backward's rows do not depend on them */
static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	((struct xent_params *)params)->S = 0;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int dtype_of(const struct align_modes *m)
{
	return lm_head_logits_dtype(m->v[MODE_LMHEAD_LOGITS]);
}

static int in_dtype(const struct align_modes *m, int i)
{
	return i == 0 ? dtype_of(m) : in_specs[i].dtype;
}

static int out_dtype(const struct align_modes *m, int i)
{
	(void)i;
	return dtype_of(m);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[3], out[1];
	struct xent_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&xent_bwd_impl, m, d, in, out, err));
	return xent_bwd_cfg_init(&c, params, m, in, 3, out, 1, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL,     MODE_LMHEAD_LOGITS, MODE_XENT_SUM,
				 MODE_XENT_BWD_PROB, MODE_XENT_BWD_FORM, -1};

const struct align_op_impl xent_bwd_impl = {
	3,
	in_specs,
	1,
	out_specs,
	"T=64,V=512",
	modes_read,
	sizeof(struct xent_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	in_dtype,
};
