/* rmsnorm.c: CPU twin of the weighted RMSNorm (contract in rmsnorm.h). */
#include "rmsnorm.h"

#include <inttypes.h>
#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "hidden states"},
	{"w", ALIGN_DT_F32, "D", {ALIGN_FILL_POSITIVE, 2.0f, 0, 0}, "norm weight (fp32, not bf16-exact)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "normalised, weighted"},
};

int rmsnorm_factor_cfg_init(struct rmsnorm_factor_cfg *f, const char *op, const struct align_modes *m, int device,
			    int64_t rows, int64_t n, struct align_err *err)
{
	const char *fn = "rmsnorm_factor_cfg_init";
	int v = m->v[MODE_RMSNORM_REDUCE];
	switch ((enum align_RMSNORM_REDUCE_value)v) {
	case ALIGN_RMSNORM_REDUCE_SEQ:
		f->order = ALIGN_REDUCE_SEQ;
		break;
	case ALIGN_RMSNORM_REDUCE_PAIRWISE:
		f->order = ALIGN_REDUCE_PAIRWISE;
		break;
	case ALIGN_RMSNORM_REDUCE_WARP32:
		f->order = ALIGN_REDUCE_WARP32;
		break;
	case ALIGN_RMSNORM_REDUCE_FP64:
		f->order = ALIGN_REDUCE_F64;
		break;
	case ALIGN_RMSNORM_REDUCE_TORCH:
		if (rows < 0)
			return align_fail(err, ALIGN_ERR_UNSUPPORTED,
					  "%s: ALIGN_RMSNORM_REDUCE=torch is not modelled for this op (ATen's row "
					  "reduction is modelled for rmsnorm, rmsnorm_bwd, mtp's norms and the "
					  "compressor op's own)",
					  op);
		f->order = ALIGN_REDUCE_TORCH;
		f->tr = torch_rowsum_plan(rows, n);
		if (!f->tr.ok)
			return align_fail(
				err, ALIGN_ERR_UNSUPPORTED,
				"%s: ALIGN_RMSNORM_REDUCE=torch: rows of %" PRId64 " values at %" PRId64
				" rows are not modelled (ATen splits such rows over CTAs, sized by the SM count, or "
				"splits a tensor past 2^31 bytes)",
				op, n, rows);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_RMSNORM_REDUCE, v, fn);
	}
	switch ((enum align_RMSNORM_RSQRT_value)(v = m->v[MODE_RMSNORM_RSQRT])) {
	case ALIGN_RMSNORM_RSQRT_RN:
	case ALIGN_RMSNORM_RSQRT_DIV:
	case ALIGN_RMSNORM_RSQRT_APPROX:
		break;
	case ALIGN_RMSNORM_RSQRT_CUDA: /* CUDA's rsqrtf: no C twin */
		if (device != ALIGN_DEVICE_CUDA)
			return op_cfg_refuse(err, op, MODE_RMSNORM_RSQRT, v, device);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_RMSNORM_RSQRT, v, fn);
	}
	f->rsqrt = v;
	switch ((enum align_RMSNORM_EPS_value)(v = m->v[MODE_RMSNORM_EPS])) {
	case ALIGN_RMSNORM_EPS_1E_6:
		f->eps = 1e-6f;
		break;
	case ALIGN_RMSNORM_EPS_1E_5:
		f->eps = 1e-5f;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_RMSNORM_EPS, v, fn);
	}
	return ALIGN_OK;
}

int rmsnorm_cfg_init(struct rmsnorm_cfg *c, const struct rmsnorm_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err)
{
	const char *fn = "rmsnorm_cfg_init";
	ALIGN_TRY(err, op_cfg_counts(err, "rmsnorm", m, in, n_in, out, n_out, 2, 1));
	ALIGN_TRY(err, op_cfg_rank(err, "rmsnorm", in_specs[0].name, &in[0], 2));
	int64_t T = in[0].shape[0], D = in[0].shape[1];
	int64_t xs[2] = {T, D}, ws[1] = {D};
	ALIGN_TRY(err, op_cfg_tensor(err, "rmsnorm", "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, "rmsnorm", "input", in_specs[1].name, &in[1], ALIGN_DT_F32, 1, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, "rmsnorm", "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, rmsnorm_factor_cfg_init(&c->f, "rmsnorm", m, device, T, D, err));
	ALIGN_TRY(err, op_cfg_flag(err, "rmsnorm", fn, m, MODE_RMSNORM_WEIGHT, ALIGN_RMSNORM_WEIGHT_FP32,
				   ALIGN_RMSNORM_WEIGHT_BF16, &c->wbf16));
	ALIGN_TRY(err, op_cfg_flag(err, "rmsnorm", fn, m, MODE_RMSNORM_CAST, ALIGN_RMSNORM_CAST_AFTER_WEIGHT,
				   ALIGN_RMSNORM_CAST_BEFORE_WEIGHT, &c->before));
	c->T = T;
	c->D = D;
	return ALIGN_OK;
}

int rmsnorm_fwd_cpu(const struct rmsnorm_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out)
{
	struct rmsnorm_cfg c;
	ALIGN_TRY(NULL, rmsnorm_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "rmsnorm", in, n_in, out, n_out));
	const int64_t T = c.T, D = c.D;
	float *x32 = malloc((size_t)D * sizeof *x32);
	if (!x32)
		return ALIGN_ERR_INTERNAL;
	const float *w = in[1].data;
	for (int64_t t = 0; t < T; t++) {
		for (int64_t j = 0; j < D; j++)
			x32[j] = ops_ld(&in[0], t * D + j);
		float r = rmsnorm_factor(x32, D, t, &c.f);
		for (int64_t j = 0; j < D; j++) {
			float y = x32[j] * r;
			float wj = c.wbf16 ? align_round_bf16(w[j]) : w[j];
			float o = c.before ? align_round_bf16(y) * align_round_bf16(wj) : wj * y;
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

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[1];
	struct rmsnorm_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&rmsnorm_impl, m, d, in, out, err));
	return rmsnorm_cfg_init(&c, params, m, in, 2, out, 1, device, err);
}

static const int modes_read[] = {MODE_RMSNORM_WEIGHT, MODE_RMSNORM_CAST, MODE_RMSNORM_RSQRT,
				 MODE_RMSNORM_REDUCE, MODE_RMSNORM_EPS,	 -1};

const struct align_op_impl rmsnorm_impl = {
	2,
	in_specs,
	1,
	out_specs,
	"T=16,D=4096",
	modes_read,
	sizeof(struct rmsnorm_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
