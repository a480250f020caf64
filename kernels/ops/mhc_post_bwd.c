/* mhc_post_bwd.c: CPU twin of the hc_post backward (contract in mhc_post_bwd.h) and its configuration,
 * which the CUDA twin (mhc_post_bwd.cu) calls too. */
#include "mhc_post_bwd.h"

#include <inttypes.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "residual streams (forward input)"},
	{"f", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "sublayer output (forward input)"},
	{"post", ALIGN_DT_F32, "T,N", {ALIGN_FILL_POSITIVE, 2.0f, 0, 0}, "H_post (forward input)"},
	{"comb", ALIGN_DT_F32, "T,N,N", {ALIGN_FILL_POSITIVE, 0.5f, 0, 0}, "H_res, rows = source stream"},
	{"dy", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of x_new"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dx", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of x"},
	{"df", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of f"},
	{"dpost", ALIGN_DT_F32, "T,N", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of post"},
	{"dcomb", ALIGN_DT_F32, "T,N,N", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of comb"},
};

int mhc_bwd_dsum_cfg(struct align_err *err, const char *op, const struct align_modes *m, int64_t rows, int64_t D,
		     int *split, int *torch, struct torch_rowsum *plan)
{
	int v;
	*split = *torch = 0;
	switch ((enum align_MHC_BWD_DSUM_value)(v = m->v[MODE_MHC_BWD_DSUM])) {
	case ALIGN_MHC_BWD_DSUM_SEQ:
		break;
	case ALIGN_MHC_BWD_DSUM_SPLIT16:
		*split = 1;
		break;
	case ALIGN_MHC_BWD_DSUM_TORCH:
		*torch = 1;
		*plan = torch_rowsum_plan(rows, D);
		if (rows > 0 && D > 0 && !plan->ok)
			return align_fail(err, ALIGN_ERR_UNSUPPORTED,
					  "%s: ALIGN_MHC_BWD_DSUM=torch: the [%" PRId64 ", %" PRId64
					  "] product's row reduction is not modelled (ATen splits such rows over CTAs, "
					  "sized by the SM count, or splits a tensor past 2^31 bytes)",
					  op, rows, D);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MHC_BWD_DSUM, v, "mhc_bwd_dsum_cfg");
	}
	return ALIGN_OK;
}

int mhc_post_bwd_cfg_init(struct mhc_post_bwd_cfg *c, const struct mhc_params *p, const struct align_modes *m,
			  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			  int device, struct align_err *err)
{
	const char *op = "mhc_post_bwd", *fn = "mhc_post_bwd_cfg_init";
	(void)p;
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 5, 4));
	ALIGN_TRY(err, mhc_check_x(op, &in[0], device, err));
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2];
	int64_t xs[3] = {T, N, D}, fs[2] = {T, D}, ns[2] = {T, N}, cs[3] = {T, N, N};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "f", &in[1], ALIGN_DT_BF16, 2, fs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "post", &in[2], ALIGN_DT_F32, 2, ns));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "comb", &in[3], ALIGN_DT_F32, 3, cs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dy", &in[4], ALIGN_DT_BF16, 3, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dx", &out[0], ALIGN_DT_BF16, 3, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "df", &out[1], ALIGN_DT_BF16, 2, fs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dpost", &out[2], ALIGN_DT_F32, 2, ns));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dcomb", &out[3], ALIGN_DT_F32, 3, cs));
	int coef_bf16 = 0;
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_MHC_HRES_TRANSPOSE, ALIGN_MHC_HRES_TRANSPOSE_OFF,
				   ALIGN_MHC_HRES_TRANSPOSE_ON, &c->transpose));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_MHC_POST_ROUND, ALIGN_MHC_POST_ROUND_SINGLE,
				   ALIGN_MHC_POST_ROUND_DOUBLE, &c->dbl));
	ALIGN_TRY(err,
		  op_cfg_flag(err, op, fn, m, MODE_MHC_COEF, ALIGN_MHC_COEF_FP32, ALIGN_MHC_COEF_BF16, &coef_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_MHC_BWD_STREAM_SUM, ALIGN_MHC_BWD_STREAM_SUM_SEQ,
				   ALIGN_MHC_BWD_STREAM_SUM_PAIRWISE, &c->pair_ssum));
	ALIGN_TRY(err, mhc_bwd_dsum_cfg(err, op, m, T * N, D, &c->dsum_split, &c->dsum_torch, &c->dplan));
	c->coef_bf16 = c->dbl || coef_bf16;
	c->T = T;
	c->N = (int)N;
	c->D = D;
	return ALIGN_OK;
}

int mhc_post_bwd_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in,
			 int n_in, struct align_tensor *out, int n_out)
{
	struct mhc_post_bwd_cfg c;
	ALIGN_TRY(NULL, mhc_post_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "mhc_post_bwd", in, n_in, out, n_out));
	const int N = c.N;
	const align_bf16 *x = in[0].data, *f = in[1].data, *dy = in[4].data;
	const float *post = in[2].data, *comb = in[3].data;
	for (int64_t t = 0; t < c.T; t++) {
		float H[MHC_MAX_N * MHC_MAX_N], P[MHC_MAX_N];
		for (int i = 0; i < N * N + N; i++) {
			float v = mhc_post_bwd_coef(&c, post, comb, t, i);
			if (i < N * N)
				H[i] = v;
			else
				P[i - N * N] = v;
		}
		for (int64_t d = 0; d < c.D; d++)
			mhc_post_bwd_point(&c, H, P, dy, out[0].data, out[1].data, t, d);
		for (int r = 0; r < N + N * N; r++)
			mhc_post_bwd_red(&c, x, f, dy, out[2].data, out[3].data, t, r);
	}
	return ALIGN_OK;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mhc_post_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[5], out[4];
	struct mhc_post_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mhc_post_bwd_impl, m, d, in, out, err));
	return mhc_post_bwd_cfg_init(&c, params, m, in, 5, out, 4, device, err);
}

static const int modes_read[] = {MODE_MHC_HRES_TRANSPOSE, MODE_MHC_COEF,     MODE_MHC_POST_ROUND,
				 MODE_MHC_BWD_STREAM_SUM, MODE_MHC_BWD_DSUM, -1};

const struct align_op_impl mhc_post_bwd_impl = {
	5,
	in_specs,
	4,
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
