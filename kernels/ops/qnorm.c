/* qnorm.c: CPU twin of the weightless per-head Q RMSNorm (contract in qnorm.h). */
#include "qnorm.h"

#include <stdlib.h>

#include "ops.h"

enum { QN_EAGER, QN_FUSED, QN_FACTOR, QN_F32OUT };

/* one head row: x32[n] -> out elements [base, base+n) */
static void qnorm_row(const struct align_modes *m, const float *x32, float *tmp, int64_t n,
		      struct align_tensor *out, int64_t base)
{
	int mode = m->v[MODE_QNORM_MODE];
	float eps = rmsnorm_eps(m->v[MODE_RMSNORM_EPS]);
	int rv = m->v[MODE_RMSNORM_RSQRT];
	if (mode == QN_EAGER) {
		for (int64_t j = 0; j < n; j++)
			tmp[j] = align_round_bf16(x32[j] * x32[j]);
		float ss = align_reduce(rmsnorm_order(m->v[MODE_RMSNORM_REDUCE]), tmp, n, 1, 0, 0);
		float ms = align_round_bf16(ss / (float)n);
		float a = align_round_bf16(ms + eps);
		float r = align_round_bf16(rmsnorm_rsqrt(rv, a));
		for (int64_t j = 0; j < n; j++)
			ops_st(out, base + j, x32[j] * r);
		return;
	}
	float r = rmsnorm_factor(x32, n, m->v[MODE_RMSNORM_REDUCE], rv, eps);
	if (mode == QN_FACTOR)
		r = align_round_bf16(r);
	for (int64_t j = 0; j < n; j++)
		ops_st(out, base + j, x32[j] * r); /* ops_st rounds for bf16, keeps fp32 for fp32_out */
}

int qnorm_fwd_cpu(const struct qnorm_params *p, const struct align_modes *m, const struct align_tensor *in,
		  int n_in, struct align_tensor *out, int n_out)
{
	if (n_in != 1 || n_out != 1 || in[0].ndim != 3)
		return ALIGN_ERR_INPUT;
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2];
	int64_t qs[3] = {T, H, D};
	int odt = m->v[MODE_QNORM_MODE] == QN_F32OUT ? ALIGN_DT_F32 : ALIGN_DT_BF16;
	if (ops_check(&in[0], ALIGN_DT_BF16, 3, qs) || ops_check(&out[0], odt, 3, qs))
		return ALIGN_ERR_INPUT;
	float *x32 = malloc((size_t)D * 2 * sizeof *x32);
	if (!x32)
		return ALIGN_ERR_INTERNAL;
	for (int64_t r = 0; r < T * H; r++) {
		for (int64_t j = 0; j < D; j++)
			x32[j] = ops_ld(&in[0], r * D + j);
		qnorm_row(m, x32, x32 + D, D, &out[0], r * D);
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
	return m->v[MODE_QNORM_MODE] == QN_F32OUT ? ALIGN_DT_F32 : ALIGN_DT_BF16;
}

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f}, "queries after wq_b"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0}, "per-head normalised queries"},
};
static const int modes_read[] = {MODE_QNORM_MODE, MODE_RMSNORM_RSQRT, MODE_RMSNORM_REDUCE, MODE_RMSNORM_EPS, -1};

const struct align_op_impl qnorm_impl = {
	1, in_specs, 1, out_specs, "T=8,H=8,D=512", modes_read, sizeof(struct qnorm_params),
	params_default, params_variant, fwd, out_dtype, NULL,
};
