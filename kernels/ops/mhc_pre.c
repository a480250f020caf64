/* mhc_pre.c: CPU twin of mHC hc_pre with the three Sinkhorn contracts (contract in mhc_pre.h), the
 * op's configuration (mhc_pre_cfg_init) and the decoding shared with hc_head (mhc_modes_init); the CUDA
 * twins (mhc_pre.cu, mhc_head.cu) call them too. */
#include "mhc_pre.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"
#include "torch_order.h"

int mhc_modes_init(struct mhc_modes *c, const char *op, const struct align_modes *m, int device, struct align_err *err)
{
	int v;
	ALIGN_TRY(err, op_cfg_math(err, op, "mhc_modes_init", m, device, &c->math));
	ALIGN_TRY(err, op_cfg_flag(err, op, "mhc_modes_init", m, MODE_MHC_EXP, ALIGN_MHC_EXP_EXP, ALIGN_MHC_EXP_EXP2,
				   &c->exp2));
	ALIGN_TRY(err, op_cfg_flag(err, op, "mhc_modes_init", m, MODE_MHC_RMS_FORM, ALIGN_MHC_RMS_FORM_RSQRT,
				   ALIGN_MHC_RMS_FORM_INV_RMS, &c->inv_rms));
	ALIGN_TRY(err, op_cfg_flag(err, op, "mhc_modes_init", m, MODE_MHC_PARAM, ALIGN_MHC_PARAM_FP32,
				   ALIGN_MHC_PARAM_BF16, &c->param_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, "mhc_modes_init", m, MODE_MHC_COEF, ALIGN_MHC_COEF_FP32,
				   ALIGN_MHC_COEF_BF16, &c->coef_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, "mhc_modes_init", m, MODE_MHC_COMPUTEH_FMA, ALIGN_MHC_COMPUTEH_FMA_OFF,
				   ALIGN_MHC_COMPUTEH_FMA_ON, &c->computeh_fma));
	switch ((enum align_MHC_PROJ_GEMM_value)(v = m->v[MODE_MHC_PROJ_GEMM])) {
	case ALIGN_MHC_PROJ_GEMM_FP32:
		c->accum = ALIGN_MATMUL_ACCUM_SEQ;
		c->opd_x = ALIGN_MATMUL_OPERAND_FP32;
		break;
	case ALIGN_MHC_PROJ_GEMM_SPLIT16:
		c->accum = ALIGN_MATMUL_ACCUM_SPLIT16;
		c->opd_x = ALIGN_MATMUL_OPERAND_FP32;
		break;
	case ALIGN_MHC_PROJ_GEMM_TF32:
		c->accum = ALIGN_MATMUL_ACCUM_SPLIT16;
		c->opd_x = ALIGN_MATMUL_OPERAND_TF32;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MHC_PROJ_GEMM, v, "mhc_modes_init");
	}
	c->opd_fn = c->param_bf16 ? ALIGN_MATMUL_OPERAND_BF16 : c->opd_x;
	return ALIGN_OK;
}

int mhc_check_x(const char *op, const struct align_tensor *x, int device, struct align_err *err)
{
	if (x->ndim != 3 || x->dtype != ALIGN_DT_BF16)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: tensor 'x' must be bf16 [T,N,D], got %s %d-d", op,
				  align_dtype_name(x->dtype), x->ndim);
	int64_t T = x->shape[0], N = x->shape[1], D = x->shape[2];
	if (N < 1 || N > MHC_MAX_N)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: N = %lld streams, must be 1..%d", op, (long long)N,
				  MHC_MAX_N);
	if (device != ALIGN_DEVICE_CPU && (T > 0x7fffffff || D > 0x7fffffff || N * D > 0x7fffffff))
		return align_fail(err, ALIGN_ERR_INPUT, "%s: T, D or N*D too large for the GPU twin (2^31 - 1)", op);
	return ALIGN_OK;
}

int mhc_pre_cfg_init(struct mhc_pre_cfg *c, const struct mhc_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err)
{
	const char *op = "mhc_pre";
	if (!c || !p || !m || !in || !out || n_in != 4 || n_out != 4)
		return align_fail(err, ALIGN_ERR_INPUT,
				  "mhc_pre: expects x[T,N,D], fn, base, scale -> y, pre, post, comb");
	ALIGN_TRY(err, mhc_check_x(op, &in[0], device, err));
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2], K = N * D, R = (2 + N) * N;
	int64_t fs[2] = {R, K}, bs[1] = {R}, ss[1] = {3}, ys[2] = {T, D}, ns[2] = {T, N}, cs[3] = {T, N, N};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "fn", &in[1], ALIGN_DT_F32, 2, fs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "base", &in[2], ALIGN_DT_F32, 1, bs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "scale", &in[3], ALIGN_DT_F32, 1, ss));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "y", &out[0], ALIGN_DT_BF16, 2, ys));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "pre", &out[1], ALIGN_DT_F32, 2, ns));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "post", &out[2], ALIGN_DT_F32, 2, ns));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "comb", &out[3], ALIGN_DT_F32, 3, cs));
	c->T = T, c->N = N, c->D = D, c->K = K, c->R = R;
	c->p = *p;
	ALIGN_TRY(err, mhc_modes_init(&c->mm, op, m, device, err));
	int v;
	switch ((enum align_MHC_SINKHORN_value)(v = m->v[MODE_MHC_SINKHORN])) {
	case ALIGN_MHC_SINKHORN_C1:
	case ALIGN_MHC_SINKHORN_C0:
	case ALIGN_MHC_SINKHORN_C0P:
		c->sinkhorn = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MHC_SINKHORN, v, "mhc_pre_cfg_init");
	}
	ALIGN_TRY(err, op_cfg_flag(err, op, "mhc_pre_cfg_init", m, MODE_MHC_SUM_ORDER, ALIGN_MHC_SUM_ORDER_SEQ,
				   ALIGN_MHC_SUM_ORDER_TORCH, &c->torch_sums));
	ALIGN_TRY(err, op_cfg_flag(err, op, "mhc_pre_cfg_init", m, MODE_MHC_HPRE_EPS, ALIGN_MHC_HPRE_EPS_OFF,
				   ALIGN_MHC_HPRE_EPS_ON, &c->hpre_eps));
	ALIGN_TRY(err, op_cfg_flag(err, op, "mhc_pre_cfg_init", m, MODE_MHC_HPOST_EPS, ALIGN_MHC_HPOST_EPS_OFF,
				   ALIGN_MHC_HPOST_EPS_ON, &c->hpost_eps));
	return ALIGN_OK;
}

float mhc_exp(const struct mhc_modes *c, float x)
{
	return c->exp2 ? mimic_exp_via_exp2f(x) : ops_math_expf(c->math, x);
}

float mhc_sigmoid(const struct mhc_modes *c, float z)
{
	return 1.0f / (1.0f + mhc_exp(c, -z));
}

void mhc_project(const struct mhc_modes *c, const float *x32, const float *fn, int64_t rows, int64_t k, float *xq,
		 float *mix)
{
	float *row = xq + k; /* caller gives 2k floats of scratch */
	for (int64_t i = 0; i < k; i++)
		xq[i] = matmul_operand(x32[i], c->opd_x);
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t i = 0; i < k; i++)
			row[i] = matmul_operand(fn[r * k + i], c->opd_x);
		mix[r] = matmul_dot(xq, row, k, c->accum, 0);
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

static void sinkhorn(const struct mhc_pre_cfg *c, float *M, int n)
{
	const int contract = c->sinkhorn, torch = c->torch_sums;
	const float eps = c->p.hc_eps;
	for (int j = 0; j < n; j++) {
		float mx = M[j * n];
		for (int k = 1; k < n; k++)
			mx = M[j * n + k] > mx ? M[j * n + k] : mx;
		for (int k = 0; k < n; k++)
			M[j * n + k] = mhc_exp(&c->mm, M[j * n + k] - mx);
	}
	int rounds = c->p.sinkhorn_iters;
	if (contract == ALIGN_MHC_SINKHORN_C1) { /* c1: softmax + eps, column step, then iters-1 full rounds */
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
			float d = contract == ALIGN_MHC_SINKHORN_C0 ? (s > eps ? s : eps) : s + eps;
			for (int k = 0; k < n; k++)
				M[j * n + k] = M[j * n + k] / d;
		}
		for (int k = 0; k < n; k++) {
			float s = col_sum(M, n, k, torch);
			float d = contract == ALIGN_MHC_SINKHORN_C0 ? (s > eps ? s : eps) : s + eps;
			for (int j = 0; j < n; j++)
				M[j * n + k] = M[j * n + k] / d;
		}
	}
}

int mhc_pre_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		    struct align_tensor *out, int n_out)
{
	struct mhc_pre_cfg c;
	ALIGN_TRY(NULL, mhc_pre_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "mhc_pre", in, n_in, out, n_out));
	const int64_t T = c.T, N = c.N, D = c.D, K = c.K, R = c.R;
	const struct mhc_modes *mm = &c.mm;
	float *buf = malloc(((size_t)R * K + 3 * (size_t)K) * sizeof(float));
	if (!buf)
		return ALIGN_ERR_INTERNAL;
	float *fn = buf, *x32 = fn + R * K, *scratch = x32 + K;
	const int pb = mm->param_bf16;
	const float *fn_in = in[1].data, *base_in = in[2].data, *scale_in = in[3].data;
	for (int64_t i = 0; i < R * K; i++)
		fn[i] = pb ? align_round_bf16(fn_in[i]) : fn_in[i];
	float scale[3], base[(2 + MHC_MAX_N) * MHC_MAX_N], mix[(2 + MHC_MAX_N) * MHC_MAX_N],
		h[(2 + MHC_MAX_N) * MHC_MAX_N];
	for (int i = 0; i < 3; i++)
		scale[i] = pb ? align_round_bf16(scale_in[i]) : scale_in[i];
	for (int64_t r = 0; r < R; r++)
		base[r] = pb ? align_round_bf16(base_in[r]) : base_in[r];
	float *pre = out[1].data, *post = out[2].data, *comb = out[3].data;
	for (int64_t t = 0; t < T; t++) {
		for (int64_t i = 0; i < K; i++)
			x32[i] = ops_ld(&in[0], t * K + i);
		float rs = mhc_rms_factor(x32, K, mm->inv_rms, c.p.norm_eps);
		mhc_project(mm, x32, fn, R, K, scratch, mix);
		for (int64_t r = 0; r < R; r++)
			h[r] = mhc_compute_h(mix[r], rs,
					     scale[r < N       ? 0
						   : r < 2 * N ? 1
							       : 2],
					     base[r], mm->computeh_fma);
		for (int64_t i = 0; i < N; i++) {
			float sp = mhc_sigmoid(mm, h[i]), so = mhc_sigmoid(mm, h[N + i]);
			pre[t * N + i] = c.hpre_eps ? sp + c.p.hc_eps : sp;
			post[t * N + i] = c.hpost_eps ? 2.0f * (so + c.p.hc_eps) : 2.0f * so;
		}
		float *M = comb + t * N * N;
		for (int64_t i = 0; i < N * N; i++)
			M[i] = h[2 * N + i];
		sinkhorn(&c, M, (int)N);
		for (int64_t d = 0; d < D; d++) {
			float acc = 0.0f;
			for (int64_t j = 0; j < N; j++) {
				float cj = pre[t * N + j];
				if (mm->coef_bf16)
					cj = align_round_bf16(cj);
				acc = j ? acc + cj * x32[j * D + d] : cj * x32[j * D + d];
			}
			ops_st(&out[0], t * D + d, acc);
		}
	}
	free(buf);
	return ALIGN_OK;
}

/* the DSv4 mHC parameters (sinkhorn_iters 20, hc_eps 1e-6, norm_eps 1e-6), shared by the three mHC ops */
void mhc_params_default(void *params, const struct align_dims *d)
{
	struct mhc_params *p = params;
	p->sinkhorn_iters = 20;
	p->hc_eps = 1e-6f;
	p->norm_eps = 1e-6f;
}

/* one variant (k = 0): the defaults */
int mhc_params_variant(void *params, const struct align_dims *d, int k)
{
	mhc_params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mhc_pre_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[4];
	struct mhc_pre_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mhc_pre_impl, m, d, in, out, err));
	return mhc_pre_cfg_init(&c, params, m, in, 4, out, 4, device, err);
}

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "residual streams"},
	{"fn", ALIGN_DT_F32, "(2+N)*N,N*D", {ALIGN_FILL_NORMAL, 0.02f, 0, 0}, "mapping weight hc_fn"},
	{"base", ALIGN_DT_F32, "(2+N)*N", {ALIGN_FILL_NORMAL, 0.5f, 0, 0}, "hc_base"},
	{"scale", ALIGN_DT_F32, "3", {ALIGN_FILL_POSITIVE, 1.0f, 0, 0}, "hc_scale (pre, post, comb)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "aggregated sublayer input"},
	{"pre", ALIGN_DT_F32, "T,N", {ALIGN_FILL_NORMAL, 0, 0, 0}, "H_pre"},
	{"post", ALIGN_DT_F32, "T,N", {ALIGN_FILL_NORMAL, 0, 0, 0}, "H_post"},
	{"comb", ALIGN_DT_F32, "T,N,N", {ALIGN_FILL_NORMAL, 0, 0, 0}, "H_res (Sinkhorn), rows = source stream"},
};
static const int modes_read[] = {MODE_MATH_IMPL,     MODE_MHC_SINKHORN, MODE_MHC_SUM_ORDER,    MODE_MHC_HPRE_EPS,
				 MODE_MHC_HPOST_EPS, MODE_MHC_RMS_FORM, MODE_MHC_PROJ_GEMM,    MODE_MHC_PARAM,
				 MODE_MHC_COEF,	     MODE_MHC_EXP,	MODE_MHC_COMPUTEH_FMA, -1};

const struct align_op_impl mhc_pre_impl = {
	4,
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
