/* swiglu.c: CPU twin of the DSv4 SwiGLU activation (contract in swiglu.h). */
#include "swiglu.h"

#include "ops.h"

int swiglu_fwd_cpu(const struct swiglu_params *p, const struct align_modes *m, const struct align_tensor *in,
		   int n_in, struct align_tensor *out, int n_out)
{
	if (n_in != 3 || n_out != 1 || in[0].ndim != 2)
		return ALIGN_ERR_INPUT;
	int64_t T = in[0].shape[0], F = in[0].shape[1];
	int64_t gs[2] = {T, F}, ps[1] = {T};
	if (ops_check(&in[0], ALIGN_DT_BF16, 2, gs) || ops_check(&in[1], ALIGN_DT_BF16, 2, gs) ||
	    ops_check(&in[2], ALIGN_DT_F32, 1, ps) || ops_check(&out[0], ALIGN_DT_BF16, 2, gs))
		return ALIGN_ERR_INPUT;
	float L = p->limit;
	int clamp = L > 0.0f && (!p->shared || m->v[MODE_SWIGLU_SHARED_CLAMP] == ALIGN_SWIGLU_SHARED_CLAMP_ON);
	int after = m->v[MODE_SWIGLU_PROBS] == ALIGN_SWIGLU_PROBS_AFTER_W2, dbl = m->v[MODE_SWIGLU_ROUND] == ALIGN_SWIGLU_ROUND_DOUBLE;
	int scale_bf16 = m->v[MODE_SWIGLU_SCALE] == ALIGN_SWIGLU_SCALE_BF16, mul = m->v[MODE_SWIGLU_SILU] == ALIGN_SWIGLU_SILU_MUL;
	const float *prob = in[2].data;
	for (int64_t t = 0; t < T; t++) {
		float q = scale_bf16 ? align_round_bf16(prob[t]) : prob[t];
		for (int64_t f = 0; f < F; f++) {
			int64_t i = t * F + f;
			float g = ops_ld(&in[0], i), u = ops_ld(&in[1], i);
			if (clamp) {
				u = u < -L ? -L : (u > L ? L : u);
				g = g > L ? L : g;
			}
			float e = ops_expf(m, -g);
			float s = mul ? g * (1.0f / (1.0f + e)) : g / (1.0f + e);
			float a = s * u;
			float o = after ? a : dbl ? align_round_bf16(a) * q : q * a;
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

static const struct align_tensor_spec in_specs[] = {
	{"g", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_SPECIAL, 4.0f, 10.0f}, "gate (x @ W1^T)"},
	{"u", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_SPECIAL, 4.0f, 10.0f}, "up (x @ W3^T)"},
	{"p", ALIGN_DT_F32, "T", {ALIGN_FILL_POSITIVE, 1.0f, 0}, "routing probability"},
};
static const struct align_tensor_spec out_specs[] = {
	{"a", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 0, 0}, "activation fed to W2"},
};
static const int modes_read[] = {MODE_MATH_IMPL, MODE_SWIGLU_SHARED_CLAMP, MODE_SWIGLU_PROBS, MODE_SWIGLU_ROUND,
				 MODE_SWIGLU_SCALE, MODE_SWIGLU_SILU, -1};

const struct align_op_impl swiglu_impl = {
	3, in_specs, 1, out_specs, "T=32,F=2048", modes_read, sizeof(struct swiglu_params),
	params_default, params_variant, fwd, NULL, NULL,
};
