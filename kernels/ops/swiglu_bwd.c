/* swiglu_bwd.c: CPU twin of the SwiGLU backward (contract in swiglu_bwd.h). */
#include "swiglu_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"g", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_SPECIAL, 4.0f, 10.0f, 0}, "gate (forward input)"},
	{"u", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_SPECIAL, 4.0f, 10.0f, 0}, "up (forward input)"},
	{"p", ALIGN_DT_F32, "T", {ALIGN_FILL_POSITIVE, 1.0f, 0, 0}, "routing probability (forward input)"},
	{"da", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of the activation a"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dg", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the gate"},
	{"du", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the up projection"},
	{"dp", ALIGN_DT_F32, "T", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the routing probability"},
};

/* the SWIGLU_BWD_* switches and the forward's SWIGLU_* switches (every value runs on both twins) */
static int swiglu_bwd_cfg_modes(struct swiglu_bwd_cfg *c, const struct align_modes *m, int *shared_clamp,
				struct align_err *err)
{
	const char *fn = "swiglu_bwd_cfg_init", *op = "swiglu_bwd";
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_SWIGLU_SHARED_CLAMP, ALIGN_SWIGLU_SHARED_CLAMP_OFF,
				   ALIGN_SWIGLU_SHARED_CLAMP_ON, shared_clamp));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_SWIGLU_PROBS, ALIGN_SWIGLU_PROBS_BEFORE_W2,
				   ALIGN_SWIGLU_PROBS_AFTER_W2, &c->after));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_SWIGLU_ROUND, ALIGN_SWIGLU_ROUND_SINGLE,
				   ALIGN_SWIGLU_ROUND_DOUBLE, &c->dbl));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_SWIGLU_SCALE, ALIGN_SWIGLU_SCALE_FP32, ALIGN_SWIGLU_SCALE_BF16,
				   &c->scale_bf16));
	ALIGN_TRY(err,
		  op_cfg_flag(err, op, fn, m, MODE_SWIGLU_SILU, ALIGN_SWIGLU_SILU_DIV, ALIGN_SWIGLU_SILU_MUL, &c->mul));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_SWIGLU_BWD_CLAMP, ALIGN_SWIGLU_BWD_CLAMP_INCLUSIVE,
				   ALIGN_SWIGLU_BWD_CLAMP_STRICT, &c->strict));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_SWIGLU_BWD_DSILU, ALIGN_SWIGLU_BWD_DSILU_FACTORED,
				   ALIGN_SWIGLU_BWD_DSILU_EXPANDED, &c->expanded));
	int v = m->v[MODE_SWIGLU_BWD_DP_SUM];
	switch ((enum align_SWIGLU_BWD_DP_SUM_value)v) {
	case ALIGN_SWIGLU_BWD_DP_SUM_SEQ:
		c->sum = SWB_SUM_SEQ;
		break;
	case ALIGN_SWIGLU_BWD_DP_SUM_PAIRWISE:
		c->sum = SWB_SUM_PAIRWISE;
		break;
	case ALIGN_SWIGLU_BWD_DP_SUM_WARP32:
		c->sum = SWB_SUM_WARP32;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_SWIGLU_BWD_DP_SUM, v, fn);
	}
	return ALIGN_OK;
}

int swiglu_bwd_cfg_init(struct swiglu_bwd_cfg *c, const struct swiglu_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err)
{
	const char *op = "swiglu_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 4, 3));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "swiglu_bwd: no params");
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[0].name, &in[0], 2));
	int64_t T = in[0].shape[0], F = in[0].shape[1];
	int64_t gs[2] = {T, F}, ps[1] = {T};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 2, gs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[1].name, &in[1], ALIGN_DT_BF16, 2, gs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[2].name, &in[2], ALIGN_DT_F32, 1, ps));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[3].name, &in[3], ALIGN_DT_BF16, 2, gs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 2, gs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[1].name, &out[1], ALIGN_DT_BF16, 2, gs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[2].name, &out[2], ALIGN_DT_F32, 1, ps));
	int shared_clamp = 0;
	ALIGN_TRY(err, op_cfg_math(err, op, "swiglu_bwd_cfg_init", m, device, &c->math));
	ALIGN_TRY(err, swiglu_bwd_cfg_modes(c, m, &shared_clamp, err));
	c->T = T;
	c->F = F;
	c->L = p->limit;
	c->clamp = p->limit > 0.0f && (!p->shared || shared_clamp);
	return ALIGN_OK;
}

int swiglu_bwd_fwd_cpu(const struct swiglu_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out)
{
	struct swiglu_bwd_cfg c;
	ALIGN_TRY(NULL, swiglu_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "swiglu_bwd", in, n_in, out, n_out));
	const int64_t T = c.T, F = c.F;
	const float *prob = in[2].data;
	float *terms = malloc((size_t)(F > 0 ? F : 1) * sizeof *terms);
	if (!terms)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "swiglu_bwd: out of memory (%lld floats)", (long long)F);
	for (int64_t t = 0; t < T; t++) {
		float q = c.scale_bf16 ? align_round_bf16(prob[t]) : prob[t];
		for (int64_t f = 0; f < F; f++) {
			int64_t i = t * F + f;
			float g = ops_ld(&in[0], i), dg, du;
			float e = ops_math_expf(c.math, -swb_gate(&c, g));
			terms[f] = swb_elem(&c, g, ops_ld(&in[1], i), ops_ld(&in[3], i), q, e, &dg, &du);
			ops_st(&out[0], i, dg);
			ops_st(&out[1], i, du);
		}
		((float *)out[2].data)[t] = c.after ? 0.0f : swb_sum(c.sum, terms, F);
	}
	free(terms);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	struct swiglu_params *p = params;
	p->limit = 10.0f;
	p->shared = 0;
}

/* as swiglu: 0 routed expert, 1 shared expert, 2 no clamp (DS-V3.2) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct swiglu_params *p = params;
	params_default(params, d);
	if (k == 1)
		p->shared = 1;
	if (k == 2)
		p->limit = 0.0f;
	return k >= 0 && k <= 2;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return swiglu_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[3];
	struct swiglu_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&swiglu_bwd_impl, m, d, in, out, err));
	return swiglu_bwd_cfg_init(&c, params, m, in, 4, out, 3, device, err);
}

static const int modes_read[] = {
	MODE_MATH_IMPL,	  MODE_SWIGLU_SHARED_CLAMP, MODE_SWIGLU_PROBS,	   MODE_SWIGLU_ROUND,	  MODE_SWIGLU_SCALE,
	MODE_SWIGLU_SILU, MODE_SWIGLU_BWD_DP_SUM,   MODE_SWIGLU_BWD_CLAMP, MODE_SWIGLU_BWD_DSILU, -1};

const struct align_op_impl swiglu_bwd_impl = {
	4,
	in_specs,
	3,
	out_specs,
	"T=32,F=2048",
	modes_read,
	sizeof(struct swiglu_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
