/* qnorm_bwd.c: CPU twin of the weightless Q norm backward (contract in qnorm_bwd.h) and its configuration. */
#include "qnorm_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "forward input (queries after wq_b)"},
	{"dy", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 0.01f, 0.1f, 0}, "gradient of the forward output y"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dq", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of q (QNORM_BWD_PREC)"},
};

int qnorm_bwd_cfg_init(struct qnorm_bwd_cfg *c, const struct qnorm_bwd_params *p, const struct align_modes *m,
		       const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		       struct align_err *err)
{
	const char *op = "qnorm_bwd", *fn = "qnorm_bwd_cfg_init";
	(void)p;
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 2, 1));
	ALIGN_TRY(err, op_cfg_rank(err, op, "q", &in[0], 3));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], qs[3] = {T, H, D};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "q", &in[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dy", &in[1], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dq", &out[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, rmsnorm_factor_cfg_init(&c->b.f, op, m, device, -1, 0, err));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_QNORM_BWD_PREC, ALIGN_QNORM_BWD_PREC_FP32,
				   ALIGN_QNORM_BWD_PREC_BF16_EAGER, &c->bf16));
	int v = m->v[MODE_RMSNORM_BWD_FORM];
	switch ((enum align_RMSNORM_BWD_FORM_value)v) {
	case ALIGN_RMSNORM_BWD_FORM_AUTOGRAD:
	case ALIGN_RMSNORM_BWD_FORM_TE:
	case ALIGN_RMSNORM_BWD_FORM_APEX:
		c->b.form = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_RMSNORM_BWD_FORM, v, fn);
	}
	c->b.wbf16 = 0;
	c->b.T = T * H;
	c->b.D = D;
	c->b.dw_order = ALIGN_REDUCE_SEQ; /* no weight */
	c->b.dw_chunk = 0;
	c->b.dw_dtype = ALIGN_DT_F32;
	c->T = T;
	c->H = H;
	c->D = D;
	c->R = T * H;
	return ALIGN_OK;
}

int qnorm_bwd_fwd_cpu(const struct qnorm_bwd_params *p, const struct align_modes *m, const struct align_tensor *in,
		      int n_in, struct align_tensor *out, int n_out)
{
	struct qnorm_bwd_cfg c;
	ALIGN_TRY(NULL, qnorm_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "qnorm_bwd", in, n_in, out, n_out));
	const int64_t D = c.D;
	float *x32 = malloc((size_t)(D > 0 ? 2 * D : 1) * sizeof *x32);
	if (!x32)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "qnorm_bwd: out of memory");
	const align_bf16 *q = in[0].data, *dy = in[1].data;
	align_bf16 *dq = out[0].data;
	for (int64_t row = 0; row < c.R; row++) {
		float arg = qnorm_bwd_pre(&c, q + row * D, x32, x32 + D);
		qnorm_bwd_post(&c, dy + row * D, x32, x32 + D, rmsnorm_rsqrt(c.b.f.rsqrt, arg), dq + row * D);
	}
	free(x32);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct qnorm_bwd_params *)params)->unused = 0;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return qnorm_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[1];
	struct qnorm_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&qnorm_bwd_impl, m, d, in, out, err));
	return qnorm_bwd_cfg_init(&c, params, m, in, 2, out, 1, device, err);
}

static const int modes_read[] = {MODE_QNORM_BWD_PREC, MODE_RMSNORM_BWD_FORM, MODE_RMSNORM_RSQRT,
				 MODE_RMSNORM_REDUCE, MODE_RMSNORM_EPS,	     -1};

const struct align_op_impl qnorm_bwd_impl = {
	2,
	in_specs,
	1,
	out_specs,
	"T=8,H=4,D=128",
	modes_read,
	sizeof(struct qnorm_bwd_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
