/* swiglu.c: CPU twin of the DSv4 SwiGLU activation (contract in swiglu.h). */
#include "swiglu.h"

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"g", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_SPECIAL, 4.0f, 10.0f, 0}, "gate (x @ W1^T)"},
	{"u", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_SPECIAL, 4.0f, 10.0f, 0}, "up (x @ W3^T)"},
	{"p", ALIGN_DT_F32, "T", {ALIGN_FILL_POSITIVE, 1.0f, 0, 0}, "routing probability"},
};
static const struct align_tensor_spec out_specs[] = {
	{"a", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "activation fed to W2"},
};

/* the SWIGLU_* switches (every value runs on both twins) */
static int swiglu_cfg_modes(struct swiglu_cfg *c, const struct align_modes *m, int *shared_clamp, struct align_err *err)
{
	const char *fn = "swiglu_cfg_init";
	ALIGN_TRY(err, op_cfg_flag(err, "swiglu", fn, m, MODE_SWIGLU_SHARED_CLAMP, ALIGN_SWIGLU_SHARED_CLAMP_OFF,
				   ALIGN_SWIGLU_SHARED_CLAMP_ON, shared_clamp));
	ALIGN_TRY(err, op_cfg_flag(err, "swiglu", fn, m, MODE_SWIGLU_PROBS, ALIGN_SWIGLU_PROBS_BEFORE_W2,
				   ALIGN_SWIGLU_PROBS_AFTER_W2, &c->after));
	ALIGN_TRY(err, op_cfg_flag(err, "swiglu", fn, m, MODE_SWIGLU_ROUND, ALIGN_SWIGLU_ROUND_SINGLE,
				   ALIGN_SWIGLU_ROUND_DOUBLE, &c->dbl));
	ALIGN_TRY(err, op_cfg_flag(err, "swiglu", fn, m, MODE_SWIGLU_SCALE, ALIGN_SWIGLU_SCALE_FP32,
				   ALIGN_SWIGLU_SCALE_BF16, &c->scale_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, "swiglu", fn, m, MODE_SWIGLU_SILU, ALIGN_SWIGLU_SILU_DIV, ALIGN_SWIGLU_SILU_MUL,
				   &c->mul));
	return ALIGN_OK;
}

int swiglu_cfg_init(struct swiglu_cfg *c, const struct swiglu_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		    struct align_err *err)
{
	ALIGN_TRY(err, op_cfg_counts(err, "swiglu", m, in, n_in, out, n_out, 3, 1));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "swiglu: no params");
	ALIGN_TRY(err, op_cfg_rank(err, "swiglu", in_specs[0].name, &in[0], 2));
	int64_t T = in[0].shape[0], F = in[0].shape[1];
	int64_t gs[2] = {T, F}, ps[1] = {T};
	ALIGN_TRY(err, op_cfg_tensor(err, "swiglu", "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 2, gs));
	ALIGN_TRY(err, op_cfg_tensor(err, "swiglu", "input", in_specs[1].name, &in[1], ALIGN_DT_BF16, 2, gs));
	ALIGN_TRY(err, op_cfg_tensor(err, "swiglu", "input", in_specs[2].name, &in[2], ALIGN_DT_F32, 1, ps));
	ALIGN_TRY(err, op_cfg_tensor(err, "swiglu", "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 2, gs));
	int shared_clamp = 0;
	ALIGN_TRY(err, op_cfg_math(err, "swiglu", "swiglu_cfg_init", m, device, &c->math));
	ALIGN_TRY(err, swiglu_cfg_modes(c, m, &shared_clamp, err));
	c->T = T;
	c->F = F;
	c->L = p->limit;
	c->clamp = p->limit > 0.0f && (!p->shared || shared_clamp);
	return ALIGN_OK;
}

int swiglu_fwd_cpu(const struct swiglu_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		   struct align_tensor *out, int n_out)
{
	struct swiglu_cfg c;
	ALIGN_TRY(NULL, swiglu_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "swiglu", in, n_in, out, n_out));
	const int64_t T = c.T, F = c.F;
	const float L = c.L;
	const float *prob = in[2].data;
	for (int64_t t = 0; t < T; t++) {
		float q = c.scale_bf16 ? align_round_bf16(prob[t]) : prob[t];
		for (int64_t f = 0; f < F; f++) {
			int64_t i = t * F + f;
			float g = ops_ld(&in[0], i), u = ops_ld(&in[1], i);
			if (c.clamp) {
				u = u < -L ? -L : (u > L ? L : u);
				g = g > L ? L : g;
			}
			float e = c.math == ALIGN_MATH_IMPL_LIBM ? mimic_libm_expf(-g) : align_expf(-g); /* ops_expf */
			float s = c.mul ? g * (1.0f / (1.0f + e)) : g / (1.0f + e);
			float a = s * u;
			float o = c.after ? a : c.dbl ? align_round_bf16(a) * q : q * a;
			ops_st(&out[0], i, o);
		}
	}
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	struct swiglu_params *p = params;
	p->limit = 10.0f;
	p->shared = 0;
}

/* 0 routed expert, 1 shared expert, 2 no clamp (DS-V3.2) */
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
	return swiglu_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[3], out[1];
	struct swiglu_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&swiglu_impl, m, d, in, out, err));
	return swiglu_cfg_init(&c, params, m, in, 3, out, 1, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL,
				 MODE_SWIGLU_SHARED_CLAMP,
				 MODE_SWIGLU_PROBS,
				 MODE_SWIGLU_ROUND,
				 MODE_SWIGLU_SCALE,
				 MODE_SWIGLU_SILU,
				 -1};

const struct align_op_impl swiglu_impl = {
	3,
	in_specs,
	1,
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
