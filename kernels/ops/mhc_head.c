/* mhc_head.c: CPU twin of mHC hc_head (contract in mhc_head.h). */
#include "mhc_head.h"

#include <stdlib.h>

#include "ops.h"

int mhc_head_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in,
		     int n_in, struct align_tensor *out, int n_out)
{
	if (n_in != 4 || n_out != 1 || in[0].ndim != 3)
		return ALIGN_ERR_INPUT;
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2], K = N * D;
	int64_t xs[3] = {T, N, D}, fs[2] = {N, K}, bs[1] = {N}, ss[1] = {1}, ys[2] = {T, D};
	if (N > MHC_MAX_N || ops_check(&in[0], ALIGN_DT_BF16, 3, xs) || ops_check(&in[1], ALIGN_DT_F32, 2, fs) ||
	    ops_check(&in[2], ALIGN_DT_F32, 1, bs) || ops_check(&in[3], ALIGN_DT_F32, 1, ss) ||
	    ops_check(&out[0], ALIGN_DT_BF16, 2, ys))
		return ALIGN_ERR_INPUT;
	float *buf = malloc(((size_t)N * K + 3 * (size_t)K) * sizeof(float));
	if (!buf)
		return ALIGN_ERR_INTERNAL;
	float *fn = buf, *x32 = fn + N * K, *scratch = x32 + K;
	int pb = m->v[MODE_MHC_PARAM] == ALIGN_MHC_PARAM_BF16, fma = m->v[MODE_MHC_COMPUTEH_FMA] == ALIGN_MHC_COMPUTEH_FMA_ON;
	const float *fn_in = in[1].data, *base_in = in[2].data;
	for (int64_t i = 0; i < N * K; i++)
		fn[i] = pb ? align_round_bf16(fn_in[i]) : fn_in[i];
	float scale = ((const float *)in[3].data)[0], base[MHC_MAX_N], mix[MHC_MAX_N], pre[MHC_MAX_N];
	scale = pb ? align_round_bf16(scale) : scale;
	for (int64_t i = 0; i < N; i++)
		base[i] = pb ? align_round_bf16(base_in[i]) : base_in[i];
	for (int64_t t = 0; t < T; t++) {
		for (int64_t i = 0; i < K; i++)
			x32[i] = ops_ld(&in[0], t * K + i);
		float rs = mhc_rms_factor(x32, K, m->v[MODE_MHC_RMS_FORM] == ALIGN_MHC_RMS_FORM_INV_RMS, p->norm_eps);
		mhc_project(m, x32, fn, N, K, scratch, mix);
		for (int64_t i = 0; i < N; i++) {
			pre[i] = mhc_sigmoid(m, mhc_compute_h(mix[i], rs, scale, base[i], fma)) + p->hc_eps;
			if (m->v[MODE_MHC_COEF] == ALIGN_MHC_COEF_BF16)
				pre[i] = align_round_bf16(pre[i]);
		}
		for (int64_t d = 0; d < D; d++) {
			float acc = pre[0] * x32[d];
			for (int64_t j = 1; j < N; j++)
				acc = acc + pre[j] * x32[j * D + d];
			ops_st(&out[0], t * D + d, acc);
		}
	}
	free(buf);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	struct mhc_params *p = params;
	p->sinkhorn_iters = 20;
	p->hc_eps = 1e-6f;
	p->norm_eps = 1e-6f;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mhc_head_fwd_cpu(params, m, in, n_in, out, n_out);
}

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f}, "final residual streams"},
	{"fn", ALIGN_DT_F32, "N,N*D", {ALIGN_FILL_NORMAL, 0.02f, 0}, "hc_head_fn"},
	{"base", ALIGN_DT_F32, "N", {ALIGN_FILL_NORMAL, 0.5f, 0}, "hc_head_base"},
	{"scale", ALIGN_DT_F32, "1", {ALIGN_FILL_POSITIVE, 1.0f, 0}, "hc_head_scale"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0}, "contracted hidden state"},
};
static const int modes_read[] = {MODE_MATH_IMPL, MODE_MHC_RMS_FORM, MODE_MHC_PROJ_GEMM, MODE_MHC_PARAM,
				 MODE_MHC_COEF, MODE_MHC_EXP, MODE_MHC_COMPUTEH_FMA, -1};

const struct align_op_impl mhc_head_impl = {
	4, in_specs, 1, out_specs, "T=8,N=4,D=1024", modes_read, sizeof(struct mhc_params),
	params_default, params_variant, fwd, NULL, NULL,
};
