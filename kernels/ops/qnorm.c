/* qnorm.c: CPU twin of the weightless per-head Q RMSNorm (contract in qnorm.h). */
#include "qnorm.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "queries after wq_b"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "per-head normalised queries"},
};

/* y's dtype for QNORM_MODE value v */
static int qnorm_out_dtype(int v)
{
	return v == ALIGN_QNORM_MODE_FP32_OUT ? ALIGN_DT_F32 : ALIGN_DT_BF16;
}

int qnorm_cfg_init(struct qnorm_cfg *c, const struct qnorm_params *p, const struct align_modes *m,
		   const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		   struct align_err *err)
{
	ALIGN_TRY(err, op_cfg_counts(err, "qnorm", m, in, n_in, out, n_out, 1, 1));
	int v = m->v[MODE_QNORM_MODE];
	switch ((enum align_QNORM_MODE_value)v) {
	case ALIGN_QNORM_MODE_BF16_EAGER:
	case ALIGN_QNORM_MODE_FP32_FUSED:
	case ALIGN_QNORM_MODE_FACTOR_BF16:
	case ALIGN_QNORM_MODE_FP32_OUT:
		c->mode = v;
		break;
	default:
		return op_cfg_unhandled(err, "qnorm", MODE_QNORM_MODE, v, "qnorm_cfg_init");
	}
	ALIGN_TRY(err, op_cfg_rank(err, "qnorm", in_specs[0].name, &in[0], 3));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2];
	int64_t qs[3] = {T, H, D};
	ALIGN_TRY(err, op_cfg_tensor(err, "qnorm", "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, "qnorm", "output", out_specs[0].name, &out[0], qnorm_out_dtype(v), 3, qs));
	ALIGN_TRY(err, rmsnorm_factor_cfg_init(&c->f, "qnorm", m, device, -1, 0, err));
	c->T = T;
	c->H = H;
	c->D = D;
	c->R = T * H;
	return ALIGN_OK;
}

/* one head row: x32[n] -> out elements [base, base+n) */
static void qnorm_row(const struct qnorm_cfg *c, const float *x32, float *tmp, int64_t n, struct align_tensor *out,
		      int64_t base)
{
	if (c->mode == ALIGN_QNORM_MODE_BF16_EAGER) {
		for (int64_t j = 0; j < n; j++)
			tmp[j] = align_round_bf16(x32[j] * x32[j]);
		float ss = align_reduce(c->f.order, tmp, n, 1, 0, 0);
		float ms = align_round_bf16(ss / (float)n);
		float a = align_round_bf16(ms + c->f.eps);
		float r = align_round_bf16(rmsnorm_rsqrt(c->f.rsqrt, a));
		for (int64_t j = 0; j < n; j++)
			ops_st(out, base + j, x32[j] * r);
		return;
	}
	float r = rmsnorm_factor(x32, n, 0, &c->f); /* qnorm refuses the torch order: no row index needed */
	if (c->mode == ALIGN_QNORM_MODE_FACTOR_BF16)
		r = align_round_bf16(r);
	for (int64_t j = 0; j < n; j++)
		ops_st(out, base + j, x32[j] * r); /* ops_st rounds for bf16, keeps fp32 for fp32_out */
}

int qnorm_fwd_cpu(const struct qnorm_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		  struct align_tensor *out, int n_out)
{
	struct qnorm_cfg c;
	ALIGN_TRY(NULL, qnorm_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "qnorm", in, n_in, out, n_out));
	const int64_t D = c.D;
	float *x32 = malloc((size_t)D * 2 * sizeof *x32);
	if (!x32)
		return ALIGN_ERR_INTERNAL;
	for (int64_t r = 0; r < c.R; r++) {
		for (int64_t j = 0; j < D; j++)
			x32[j] = ops_ld(&in[0], r * D + j);
		qnorm_row(&c, x32, x32 + D, D, &out[0], r * D);
	}
	free(x32);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct qnorm_params *)params)->unused = 0;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return qnorm_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int out_dtype(const struct align_modes *m, int i)
{
	return qnorm_out_dtype(m->v[MODE_QNORM_MODE]);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[1], out[1];
	struct qnorm_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&qnorm_impl, m, d, in, out, err));
	return qnorm_cfg_init(&c, params, m, in, 1, out, 1, device, err);
}

static const int modes_read[] = {MODE_QNORM_MODE, MODE_RMSNORM_RSQRT, MODE_RMSNORM_REDUCE, MODE_RMSNORM_EPS, -1};

const struct align_op_impl qnorm_impl = {
	1,
	in_specs,
	1,
	out_specs,
	"T=8,H=8,D=512",
	modes_read,
	sizeof(struct qnorm_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
