/* rmsnorm.c: CPU twin of the weighted RMSNorm (contract in rmsnorm.h). */
#include "rmsnorm.h"

#include <stdlib.h>

#include "ops.h"

int rmsnorm_fwd_cpu(const struct rmsnorm_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out)
{
	if (n_in != 2 || n_out != 1 || in[0].ndim != 2)
		return ALIGN_ERR_INPUT;
	int64_t T = in[0].shape[0], D = in[0].shape[1];
	int64_t xs[2] = {T, D}, ws[1] = {D};
	if (ops_check(&in[0], ALIGN_DT_BF16, 2, xs) || ops_check(&in[1], ALIGN_DT_F32, 1, ws) ||
	    ops_check(&out[0], ALIGN_DT_BF16, 2, xs))
		return ALIGN_ERR_INPUT;
	float *x32 = malloc((size_t)D * sizeof *x32);
	if (!x32)
		return ALIGN_ERR_INTERNAL;
	const float *w = in[1].data;
	int wbf16 = m->v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_BF16, before = m->v[MODE_RMSNORM_CAST] == ALIGN_RMSNORM_CAST_BEFORE_WEIGHT;
	float eps = rmsnorm_eps(m->v[MODE_RMSNORM_EPS]);
	for (int64_t t = 0; t < T; t++) {
		for (int64_t j = 0; j < D; j++)
			x32[j] = ops_ld(&in[0], t * D + j);
		float r = rmsnorm_factor(x32, D, m->v[MODE_RMSNORM_REDUCE], m->v[MODE_RMSNORM_RSQRT], eps);
		for (int64_t j = 0; j < D; j++) {
			float y = x32[j] * r;
			float wj = wbf16 ? align_round_bf16(w[j]) : w[j];
			float o = before ? align_round_bf16(y) * align_round_bf16(wj) : wj * y;
			ops_st(&out[0], t * D + j, o);
		}
	}
	free(x32);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct rmsnorm_params *)params)->unused = 0;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return rmsnorm_fwd_cpu(params, m, in, n_in, out, n_out);
}

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f}, "hidden states"},
	{"w", ALIGN_DT_F32, "D", {ALIGN_FILL_POSITIVE, 2.0f, 0}, "norm weight (fp32, not bf16-exact)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0}, "normalised, weighted"},
};
static const int modes_read[] = {MODE_RMSNORM_WEIGHT, MODE_RMSNORM_CAST, MODE_RMSNORM_RSQRT, MODE_RMSNORM_REDUCE,
				 MODE_RMSNORM_EPS, -1};

const struct align_op_impl rmsnorm_impl = {
	2, in_specs, 1, out_specs, "T=16,D=4096", modes_read, sizeof(struct rmsnorm_params),
	params_default, params_variant, fwd, NULL, NULL,
};
