/* mhc_head_bwd.c: the hc_head backward op (contract in mhc_head_bwd.h); the C twin is mhc_bwd_fwd_cpu
 * (mhc_pre_bwd.c), shared with hc_pre's backward. */
#include "mhc_head_bwd.h"

#include "op_cfg.h"
#include "ops.h"

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mhc_bwd_fwd_cpu("mhc_head_bwd", params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[5], out[4];
	struct mhc_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mhc_head_bwd_impl, m, d, in, out, err));
	return mhc_bwd_cfg_init(&c, "mhc_head_bwd", params, m, in, 5, out, 4, device, err);
}

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "final residual streams"},
	{"fn", ALIGN_DT_F32, "N,N*D", {ALIGN_FILL_NORMAL, 0.02f, 0, 0}, "hc_head_fn"},
	{"base", ALIGN_DT_F32, "N", {ALIGN_FILL_NORMAL, 0.5f, 0, 0}, "hc_head_base"},
	{"scale", ALIGN_DT_F32, "1", {ALIGN_FILL_POSITIVE, 1.0f, 0, 0}, "hc_head_scale"},
	{"dy", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of y"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dx", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of x"},
	{"dfn", ALIGN_DT_F32, "N,N*D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of hc_head_fn (summed over tokens)"},
	{"dbase", ALIGN_DT_F32, "N", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of hc_head_base"},
	{"dscale", ALIGN_DT_F32, "1", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of hc_head_scale"},
};
static const int modes_read[] = {
	MODE_MATH_IMPL, MODE_MHC_RMS_FORM,     MODE_MHC_PROJ_GEMM, MODE_MHC_PARAM,    MODE_MHC_COEF,
	MODE_MHC_EXP,	MODE_MHC_COMPUTEH_FMA, MODE_MHC_BWD_DSUM,  MODE_MHC_BWD_TSUM, -1};

const struct align_op_impl mhc_head_bwd_impl = {
	5,
	in_specs,
	4,
	out_specs,
	"T=32,N=4,D=128",
	modes_read,
	sizeof(struct mhc_params),
	mhc_params_default,
	mhc_params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
