/* rmsnorm_bwd.c: CPU twin of the RMSNorm backward (contract in rmsnorm_bwd.h) and its configuration. */
/* NaN picks in the written operand order, as the CUDA twin makes them (nan_host.h): in attn_bwd under
 * ROPE_ARITH=fma_ac / fma_bd with the extreme fill, NaNs of both signs meet in this op's sums (a sign-flipped
 * default NaN from RoPE's backward against the default NaN), and gcc 12 -O2 commuted operands here (H100 and
 * emulator, 2026-12-07: dwd, dvec, dx NaN signs) */
#define ALIGN_NAN_WRITTEN_ORDER 1

#include "rmsnorm_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "forward input (hidden states)"},
	{"w", ALIGN_DT_F32, "D", {ALIGN_FILL_POSITIVE, 2.0f, 0, 0}, "norm weight (fp32)"},
	{"dy", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 0.01f, 0.1f, 0}, "gradient of the forward output y"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dx", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of x (RMSNORM_BWD_FORM)"},
	{"dw", ALIGN_DT_F32, "D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of w, summed over tokens (RMSNORM_BWD_DW_*)"},
};

static int dw_dtype(const struct align_modes *m)
{
	return m->v[MODE_RMSNORM_BWD_DW_DTYPE] == ALIGN_RMSNORM_BWD_DW_DTYPE_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
}

int rmsnorm_bwd_cfg_init(struct rmsnorm_bwd_cfg *c, const struct rmsnorm_bwd_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err)
{
	const char *op = "rmsnorm_bwd", *fn = "rmsnorm_bwd_cfg_init";
	(void)p;
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 3, 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "x", &in[0], 2));
	int64_t T = in[0].shape[0], D = in[0].shape[1], xs[2] = {T, D}, ws[1] = {D};
	int v;
	switch ((enum align_RMSNORM_BWD_DW_DTYPE_value)(v = m->v[MODE_RMSNORM_BWD_DW_DTYPE])) {
	case ALIGN_RMSNORM_BWD_DW_DTYPE_FP32:
	case ALIGN_RMSNORM_BWD_DW_DTYPE_BF16:
		c->dw_dtype = dw_dtype(m);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_RMSNORM_BWD_DW_DTYPE, v, fn);
	}
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "x", &in[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "w", &in[1], ALIGN_DT_F32, 1, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dy", &in[2], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dx", &out[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dw", &out[1], c->dw_dtype, 1, ws));
	ALIGN_TRY(err, rmsnorm_factor_cfg_init(&c->f, op, m, device, T, D, err));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_RMSNORM_WEIGHT, ALIGN_RMSNORM_WEIGHT_FP32,
				   ALIGN_RMSNORM_WEIGHT_BF16, &c->wbf16));
	switch ((enum align_RMSNORM_BWD_FORM_value)(v = m->v[MODE_RMSNORM_BWD_FORM])) {
	case ALIGN_RMSNORM_BWD_FORM_AUTOGRAD:
	case ALIGN_RMSNORM_BWD_FORM_TE:
	case ALIGN_RMSNORM_BWD_FORM_APEX:
		c->form = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_RMSNORM_BWD_FORM, v, fn);
	}
	c->dw_chunk = 0;
	c->dw_torch = -1;
	switch ((enum align_RMSNORM_BWD_DW_ORDER_value)(v = m->v[MODE_RMSNORM_BWD_DW_ORDER])) {
	case ALIGN_RMSNORM_BWD_DW_ORDER_SEQ:
		c->dw_order = ALIGN_REDUCE_SEQ;
		break;
	case ALIGN_RMSNORM_BWD_DW_ORDER_PAIRWISE:
		c->dw_order = ALIGN_REDUCE_PAIRWISE;
		break;
	case ALIGN_RMSNORM_BWD_DW_ORDER_SPLIT16:
		c->dw_order = ALIGN_REDUCE_CHUNKED;
		c->dw_chunk = (T + 15) / 16;
		break;
	case ALIGN_RMSNORM_BWD_DW_ORDER_TORCH:
		c->dw_order = ALIGN_REDUCE_SEQ; /* not read */
		c->dw_torch = torch_sum_cols_step(T, D);
		if (c->dw_torch < 0)
			return align_fail(
				err, ALIGN_ERR_UNSUPPORTED,
				"%s: ALIGN_RMSNORM_BWD_DW_ORDER=torch models x.sum(0) without ATen's cross-CTA "
				"reduce and for D > 1: T=%lld, D=%lld is outside it",
				op, (long long)T, (long long)D);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_RMSNORM_BWD_DW_ORDER, v, fn);
	}
	c->T = T;
	c->D = D;
	return ALIGN_OK;
}

int rmsnorm_bwd_fwd_cpu(const struct rmsnorm_bwd_params *p, const struct align_modes *m, const struct align_tensor *in,
			int n_in, struct align_tensor *out, int n_out)
{
	struct rmsnorm_bwd_cfg c;
	ALIGN_TRY(NULL, rmsnorm_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "rmsnorm_bwd", in, n_in, out, n_out));
	const int64_t T = c.T, D = c.D;
	float *x32 = malloc((size_t)(D > 0 ? D : 1) * sizeof *x32), *pr = malloc((size_t)(D > 0 ? D : 1) * sizeof *pr);
	float *q = malloc((size_t)(T * D > 0 ? T * D : 1) * sizeof *q);
	if (!x32 || !pr || !q) {
		free(x32);
		free(pr);
		free(q);
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "rmsnorm_bwd: out of memory");
	}
	const float *w = in[1].data;
	for (int64_t t = 0; t < T; t++) {
		for (int64_t j = 0; j < D; j++)
			x32[j] = ops_ld(&in[0], t * D + j);
		float r = rmsnorm_factor(x32, D, t, &c.f);
		for (int64_t j = 0; j < D; j++)
			pr[j] = rmsb_p(&c, ops_ld(&in[2], t * D + j), w[j], x32[j], r);
		float s = rmsnorm_rowsum(&c.f, pr, D, t, 0, 0);
		for (int64_t j = 0; j < D; j++) {
			float g = ops_ld(&in[2], t * D + j);
			ops_st(&out[0], t * D + j, rmsb_dx(&c, g, w[j], x32[j], r, s));
			q[t * D + j] = rmsb_q(g, x32[j], r);
		}
	}
	for (int64_t j = 0; j < D; j++)
		ops_st(&out[1], j, rmsb_dw(&c, q, j, 0));
	free(x32);
	free(pr);
	free(q);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct rmsnorm_bwd_params *)params)->unused = 0;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return rmsnorm_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int out_dtype(const struct align_modes *m, int i)
{
	return i == 1 ? dw_dtype(m) : ALIGN_DT_BF16;
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[3], out[2];
	struct rmsnorm_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&rmsnorm_bwd_impl, m, d, in, out, err));
	return rmsnorm_bwd_cfg_init(&c, params, m, in, 3, out, 2, device, err);
}

static const int modes_read[] = {
	MODE_RMSNORM_WEIGHT,   MODE_RMSNORM_RSQRT,	  MODE_RMSNORM_REDUCE,	     MODE_RMSNORM_EPS,
	MODE_RMSNORM_BWD_FORM, MODE_RMSNORM_BWD_DW_ORDER, MODE_RMSNORM_BWD_DW_DTYPE, -1};

const struct align_op_impl rmsnorm_bwd_impl = {
	3,
	in_specs,
	2,
	out_specs,
	"T=32,D=256",
	modes_read,
	sizeof(struct rmsnorm_bwd_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
