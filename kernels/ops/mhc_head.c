/* mhc_head.c: CPU twin of mHC hc_head (contract in mhc_head.h) and the op's configuration
 * (mhc_head_cfg_init), which the CUDA twin (mhc_head.cu) calls too. */
#include "mhc_head.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

int mhc_head_cfg_init(struct mhc_head_cfg *c, const struct mhc_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err)
{
	const char *op = "mhc_head";
	if (!c || !p || !m || !in || !out || n_in != 4 || n_out != 1)
		return align_fail(err, ALIGN_ERR_INPUT, "mhc_head: expects x[T,N,D], fn, base, scale -> y");
	ALIGN_TRY(err, mhc_check_x(op, &in[0], device, err));
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2], K = N * D;
	int64_t fs[2] = {N, K}, bs[1] = {N}, ss[1] = {1}, ys[2] = {T, D};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "fn", &in[1], ALIGN_DT_F32, 2, fs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "base", &in[2], ALIGN_DT_F32, 1, bs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "scale", &in[3], ALIGN_DT_F32, 1, ss));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "y", &out[0], ALIGN_DT_BF16, 2, ys));
	c->T = T, c->N = N, c->D = D, c->K = K;
	c->p = *p;
	return mhc_modes_init(&c->mm, op, m, device, err);
}

int mhc_head_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		     struct align_tensor *out, int n_out)
{
	struct mhc_head_cfg c;
	ALIGN_TRY(NULL, mhc_head_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "mhc_head", in, n_in, out, n_out));
	const int64_t T = c.T, N = c.N, D = c.D, K = c.K;
	const struct mhc_modes *mm = &c.mm;
	float *buf = malloc(((size_t)N * K + 3 * (size_t)K) * sizeof(float));
	if (!buf)
		return ALIGN_ERR_INTERNAL;
	float *fn = buf, *x32 = fn + N * K, *scratch = x32 + K;
	const int pb = mm->param_bf16;
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
		float rs = mhc_rms_factor(x32, K, mm->inv_rms, c.p.norm_eps);
		mhc_project(mm, x32, fn, N, K, scratch, mix);
		for (int64_t i = 0; i < N; i++) {
			pre[i] = mhc_sigmoid(mm, mhc_compute_h(mix[i], rs, scale, base[i], mm->computeh_fma)) +
				 c.p.hc_eps;
			if (mm->coef_bf16)
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

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mhc_head_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[1];
	struct mhc_head_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mhc_head_impl, m, d, in, out, err));
	return mhc_head_cfg_init(&c, params, m, in, 4, out, 1, device, err);
}

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "final residual streams"},
	{"fn", ALIGN_DT_F32, "N,N*D", {ALIGN_FILL_NORMAL, 0.02f, 0, 0}, "hc_head_fn"},
	{"base", ALIGN_DT_F32, "N", {ALIGN_FILL_NORMAL, 0.5f, 0, 0}, "hc_head_base"},
	{"scale", ALIGN_DT_F32, "1", {ALIGN_FILL_POSITIVE, 1.0f, 0, 0}, "hc_head_scale"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "contracted hidden state"},
};
static const int modes_read[] = {MODE_MATH_IMPL, MODE_MHC_RMS_FORM, MODE_MHC_PROJ_GEMM,	   MODE_MHC_PARAM,
				 MODE_MHC_COEF,	 MODE_MHC_EXP,	    MODE_MHC_COMPUTEH_FMA, -1};

const struct align_op_impl mhc_head_impl = {
	4,
	in_specs,
	1,
	out_specs,
	"T=8,N=4,D=1024",
	modes_read,
	sizeof(struct mhc_params),
	mhc_params_default,
	mhc_params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
