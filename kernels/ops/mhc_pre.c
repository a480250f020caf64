/* mhc_pre.c: CPU twin of mHC hc_pre with the three Sinkhorn contracts (contract in mhc_pre.h). */
#include "mhc_pre.h"

#include <stdlib.h>

#include "ops.h"
#include "torch_order.h"

float mhc_exp(const struct align_modes *m, float x)
{
	return m->v[MODE_MHC_EXP] == ALIGN_MHC_EXP_EXP2 ? mimic_exp_via_exp2f(x) : ops_expf(m, x);
}

float mhc_sigmoid(const struct align_modes *m, float z)
{
	return 1.0f / (1.0f + mhc_exp(m, -z));
}

void mhc_project(const struct align_modes *m, const float *x32, const float *fn, int64_t rows, int64_t k,
		 float *xq, float *mix)
{
	int g = m->v[MODE_MHC_PROJ_GEMM];
	int acc = g == 0 ? MATMUL_ACC_SEQ : MATMUL_ACC_SPLIT16;
	float *row = xq + k; /* caller gives 2k floats of scratch */
	for (int64_t i = 0; i < k; i++)
		xq[i] = g == 2 ? align_round_tf32(x32[i]) : x32[i];
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t i = 0; i < k; i++)
			row[i] = g == 2 ? align_round_tf32(fn[r * k + i]) : fn[r * k + i];
		mix[r] = matmul_dot(xq, row, k, acc, 0);
	}
}

/* sums of the Sinkhorn (MHC_SUM_ORDER): row j of M, column k of M, the softmax denominator of row j */
static float row_sum(const float *M, int n, int j, int torch)
{
	if (torch)
		return torch_sum_lastdim(M + j * n, 1, n);
	float s = M[j * n];
	for (int k = 1; k < n; k++)
		s = s + M[j * n + k];
	return s;
}

static float col_sum(const float *M, int n, int k, int torch)
{
	if (torch)
		return torch_sum_strided(M + k, n, n);
	float s = M[k];
	for (int j = 1; j < n; j++)
		s = s + M[j * n + k];
	return s;
}

static void sinkhorn(const struct mhc_params *p, const struct align_modes *m, float *M, int n)
{
	int contract = m->v[MODE_MHC_SINKHORN], torch = m->v[MODE_MHC_SUM_ORDER] == ALIGN_MHC_SUM_ORDER_TORCH;
	float eps = p->hc_eps;
	for (int j = 0; j < n; j++) {
		float mx = M[j * n];
		for (int k = 1; k < n; k++)
			mx = M[j * n + k] > mx ? M[j * n + k] : mx;
		for (int k = 0; k < n; k++)
			M[j * n + k] = mhc_exp(m, M[j * n + k] - mx);
	}
	int rounds = p->sinkhorn_iters;
	if (contract == 0) { /* c1: softmax + eps, column step, then iters-1 full rounds */
		for (int j = 0; j < n; j++) {
			float s = torch ? torch_softmax_sum(M + j * n, 1, n) : row_sum(M, n, j, 0);
			for (int k = 0; k < n; k++)
				M[j * n + k] = M[j * n + k] / s + eps;
		}
		for (int k = 0; k < n; k++) {
			float s = col_sum(M, n, k, torch);
			for (int j = 0; j < n; j++)
				M[j * n + k] = M[j * n + k] / (s + eps);
		}
		rounds -= 1;
	}
	for (int it = 0; it < rounds; it++) {
		for (int j = 0; j < n; j++) {
			float s = row_sum(M, n, j, torch);
			float d = contract == 1 ? (s > eps ? s : eps) : s + eps;
			for (int k = 0; k < n; k++)
				M[j * n + k] = M[j * n + k] / d;
		}
		for (int k = 0; k < n; k++) {
			float s = col_sum(M, n, k, torch);
			float d = contract == 1 ? (s > eps ? s : eps) : s + eps;
			for (int j = 0; j < n; j++)
				M[j * n + k] = M[j * n + k] / d;
		}
	}
}

int mhc_pre_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out)
{
	if (n_in != 4 || n_out != 4 || in[0].ndim != 3)
		return ALIGN_ERR_INPUT;
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2], K = N * D, R = (2 + N) * N;
	int64_t xs[3] = {T, N, D}, fs[2] = {R, K}, bs[1] = {R}, ss[1] = {3}, ys[2] = {T, D}, ns[2] = {T, N},
		cs[3] = {T, N, N};
	if (N > MHC_MAX_N || ops_check(&in[0], ALIGN_DT_BF16, 3, xs) || ops_check(&in[1], ALIGN_DT_F32, 2, fs) ||
	    ops_check(&in[2], ALIGN_DT_F32, 1, bs) || ops_check(&in[3], ALIGN_DT_F32, 1, ss) ||
	    ops_check(&out[0], ALIGN_DT_BF16, 2, ys) || ops_check(&out[1], ALIGN_DT_F32, 2, ns) ||
	    ops_check(&out[2], ALIGN_DT_F32, 2, ns) || ops_check(&out[3], ALIGN_DT_F32, 3, cs))
		return ALIGN_ERR_INPUT;
	float *buf = malloc(((size_t)R * K + 3 * (size_t)K) * sizeof(float));
	if (!buf)
		return ALIGN_ERR_INTERNAL;
	float *fn = buf, *x32 = fn + R * K, *scratch = x32 + K;
	int pb = m->v[MODE_MHC_PARAM] == ALIGN_MHC_PARAM_BF16, fma = m->v[MODE_MHC_COMPUTEH_FMA] == ALIGN_MHC_COMPUTEH_FMA_ON;
	const float *fn_in = in[1].data, *base_in = in[2].data, *scale_in = in[3].data;
	for (int64_t i = 0; i < R * K; i++)
		fn[i] = pb ? align_round_bf16(fn_in[i]) : fn_in[i];
	float scale[3], base[(2 + MHC_MAX_N) * MHC_MAX_N], mix[(2 + MHC_MAX_N) * MHC_MAX_N], h[(2 + MHC_MAX_N) * MHC_MAX_N];
	for (int c = 0; c < 3; c++)
		scale[c] = pb ? align_round_bf16(scale_in[c]) : scale_in[c];
	for (int64_t r = 0; r < R; r++)
		base[r] = pb ? align_round_bf16(base_in[r]) : base_in[r];
	float *pre = out[1].data, *post = out[2].data, *comb = out[3].data;
	for (int64_t t = 0; t < T; t++) {
		for (int64_t i = 0; i < K; i++)
			x32[i] = ops_ld(&in[0], t * K + i);
		float rs = mhc_rms_factor(x32, K, m->v[MODE_MHC_RMS_FORM] == ALIGN_MHC_RMS_FORM_INV_RMS, p->norm_eps);
		mhc_project(m, x32, fn, R, K, scratch, mix);
		for (int64_t r = 0; r < R; r++)
			h[r] = mhc_compute_h(mix[r], rs, scale[r < N ? 0 : r < 2 * N ? 1 : 2], base[r], fma);
		for (int64_t i = 0; i < N; i++) {
			float sp = mhc_sigmoid(m, h[i]), so = mhc_sigmoid(m, h[N + i]);
			pre[t * N + i] = m->v[MODE_MHC_HPRE_EPS] == ALIGN_MHC_HPRE_EPS_ON ? sp + p->hc_eps : sp;
			post[t * N + i] = m->v[MODE_MHC_HPOST_EPS] == ALIGN_MHC_HPOST_EPS_OFF ? 2.0f * so : 2.0f * (so + p->hc_eps);
		}
		float *M = comb + t * N * N;
		for (int64_t i = 0; i < N * N; i++)
			M[i] = h[2 * N + i];
		sinkhorn(p, m, M, (int)N);
		for (int64_t d = 0; d < D; d++) {
			float acc = 0.0f;
			for (int64_t j = 0; j < N; j++) {
				float c = pre[t * N + j];
				if (m->v[MODE_MHC_COEF] == ALIGN_MHC_COEF_BF16)
					c = align_round_bf16(c);
				acc = j ? acc + c * x32[j * D + d] : c * x32[j * D + d];
			}
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
	return mhc_pre_fwd_cpu(params, m, in, n_in, out, n_out);
}

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f}, "residual streams"},
	{"fn", ALIGN_DT_F32, "(2+N)*N,N*D", {ALIGN_FILL_NORMAL, 0.02f, 0}, "mapping weight hc_fn"},
	{"base", ALIGN_DT_F32, "(2+N)*N", {ALIGN_FILL_NORMAL, 0.5f, 0}, "hc_base"},
	{"scale", ALIGN_DT_F32, "3", {ALIGN_FILL_POSITIVE, 1.0f, 0}, "hc_scale (pre, post, comb)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0}, "aggregated sublayer input"},
	{"pre", ALIGN_DT_F32, "T,N", {ALIGN_FILL_NORMAL, 0, 0}, "H_pre"},
	{"post", ALIGN_DT_F32, "T,N", {ALIGN_FILL_NORMAL, 0, 0}, "H_post"},
	{"comb", ALIGN_DT_F32, "T,N,N", {ALIGN_FILL_NORMAL, 0, 0}, "H_res (Sinkhorn), rows = source stream"},
};
static const int modes_read[] = {MODE_MATH_IMPL, MODE_MHC_SINKHORN, MODE_MHC_SUM_ORDER, MODE_MHC_HPRE_EPS, MODE_MHC_HPOST_EPS,
				 MODE_MHC_RMS_FORM, MODE_MHC_PROJ_GEMM, MODE_MHC_PARAM, MODE_MHC_COEF, MODE_MHC_EXP,
				 MODE_MHC_COMPUTEH_FMA, -1};

const struct align_op_impl mhc_pre_impl = {
	4, in_specs, 4, out_specs, "T=8,N=4,D=1024", modes_read, sizeof(struct mhc_params),
	params_default, params_variant, fwd, NULL, NULL,
};
