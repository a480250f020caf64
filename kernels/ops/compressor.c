/* compressor.c: CPU twin of the DSv4 KV compressor (contract in compressor.h). */
#include "compressor.h"

#include <math.h>
#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x",
	 ALIGN_DT_BF16,
	 "T*K,D",
	 {ALIGN_FILL_SPECIAL, 1.0f, 8.0f, 0},
	 "normed attention input, T whole groups of K tokens"},
	{"wkv", ALIGN_DT_BF16, "N*F,D", {ALIGN_FILL_NORMAL, 0.125f, 0, 0}, "kv projection"},
	{"wgate", ALIGN_DT_BF16, "N*F,D", {ALIGN_FILL_NORMAL, 0.25f, 0, 0}, "gate (score) projection"},
	{"ape",
	 ALIGN_DT_F32,
	 "K,N*F",
	 {ALIGN_FILL_NORMAL, 0.5f, 0, 0},
	 "positional bias of the gate, per token in group"},
	{"w", ALIGN_DT_F32, "F", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "RMSNorm weight"},
};
static const struct align_tensor_spec out_specs[] = {
	{"c", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "compressed entries (position g*K)"},
};

void compressor_params_default(struct compressor_params *p)
{
	p->rotate = 0;
	p->pos0 = 0;
	rope_params_default(&p->rope);
}

int compressor_cfg_modes(struct compressor_cfg *c, const struct compressor_params *p, int64_t F, int64_t rows,
			 const struct align_modes *m, int device, struct align_err *err)
{
	/* rows < 0: attn's pipe (attn, attn_bwd) sets up its compressors; its messages say so */
	const char *op = rows < 0 ? "attn's compressor" : "compressor", *fn = "compressor_cfg_modes";
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	if (F < 1 || F > COMPRESSOR_MAX_F)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: F = %lld outside [1, %d]", op, (long long)F,
				  COMPRESSOR_MAX_F);
	if (p->rotate && (F & (F - 1)))
		return align_fail(err, ALIGN_ERR_INPUT, "%s: the Hadamard rotation needs F a power of two, got %lld",
				  op, (long long)F);
	ALIGN_TRY(err, op_cfg_math(err, op, fn, m, device, &c->math));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_COMP_GEMM, ALIGN_CSA_COMP_GEMM_FP32,
				   ALIGN_CSA_COMP_GEMM_BF16, &c->gemm_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_COMP_APE, ALIGN_CSA_COMP_APE_FP32, ALIGN_CSA_COMP_APE_BF16,
				   &c->ape_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_COMP_POOL, ALIGN_CSA_COMP_POOL_FP32,
				   ALIGN_CSA_COMP_POOL_BF16, &c->pool_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_COMP_SUM, ALIGN_CSA_COMP_SUM_FP32, ALIGN_CSA_COMP_SUM_BF16,
				   &c->sum_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_COMP_SUM_ORDER, ALIGN_CSA_COMP_SUM_ORDER_SEQ,
				   ALIGN_CSA_COMP_SUM_ORDER_TORCH, &c->sum_torch));
	c->sum_step = 1;
	c->sm_threads = 1;
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_COMP_NORM, ALIGN_CSA_COMP_NORM_BF16_INPUT,
				   ALIGN_CSA_COMP_NORM_FP32, &c->norm_fp32));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_HADAMARD, ALIGN_CSA_HADAMARD_LIBRARY,
				   ALIGN_CSA_HADAMARD_BUTTERFLY, &c->butterfly));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_QAT, ALIGN_CSA_QAT_OFF, ALIGN_CSA_QAT_ON, &c->qat));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_RMSNORM_WEIGHT, ALIGN_RMSNORM_WEIGHT_FP32,
				   ALIGN_RMSNORM_WEIGHT_BF16, &c->wbf16));
	ALIGN_TRY(err, rmsnorm_factor_cfg_init(&c->f, op, m, device, rows, F, err));
	ALIGN_TRY(err, rope_cfg_modes(&c->r, &p->rope, F, m, device, err));
	c->rotate = p->rotate != 0;
	c->hscale = (float)(1.0 / sqrt((double)F));
	return ALIGN_OK;
}

int compressor_cfg_dims(struct compressor_cfg *c, int64_t groups, int64_t n, int64_t F, struct align_err *err)
{
	if (!c->sum_torch)
		return ALIGN_OK;
	int64_t st = groups > 0 && n > 0 ? torch_sum_cols_step_v(n, groups * F, F) : 1;
	if (st < 1 || st > TORCH_COLS_MAX_STEP)
		return align_fail(err, ALIGN_ERR_UNSUPPORTED,
				  "compressor: ALIGN_CSA_COMP_SUM_ORDER=torch: the window sum of %lld groups x %lld "
				  "positions x %lld channels is not modelled (ATen splits it over CTAs or drops a dim; "
				  "torch_order.h)",
				  (long long)groups, (long long)n, (long long)F);
	c->sum_step = st;
	/* SpatialSoftMax_getBlockSize: inner_threads = min(F, 1024); dim threads only for F <= 64, n >= 64 */
	int64_t inner = F < COMPRESSOR_SM_MAX_THREADS ? F : COMPRESSOR_SM_MAX_THREADS, t = 1;
	if (inner <= 64 && n >= 64) {
		while (inner * t <= COMPRESSOR_SM_MAX_THREADS && t <= n)
			t *= 2;
		t /= 2;
	}
	c->sm_threads = (int)t;
	return ALIGN_OK;
}

int compressor_cfg_init(struct compressor_op_cfg *c, const struct compressor_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err)
{
	const char *op = "compressor";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 5, 1));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[0].name, &in[0], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[1].name, &in[1], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[3].name, &in[3], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, out_specs[0].name, &out[0], 2));
	int64_t T = out[0].shape[0], F = out[0].shape[1], K = in[3].shape[0], D = in[0].shape[1];
	int64_t NF = in[1].shape[0], N = F > 0 ? NF / F : 0;
	if (N != 1 && N != 2)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: wkv has %lld rows; want N*F with N = 1 or 2 and F = %lld",
				  op, (long long)NF, (long long)F);
	if (K < 1 || T < 0)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: ratio K = %lld must be >= 1", op, (long long)K);
	int64_t xs[2] = {T * K, D}, ws[2] = {N * F, D}, as[2] = {K, N * F}, ns[1] = {F}, cs[2] = {T, F};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[1].name, &in[1], ALIGN_DT_BF16, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[2].name, &in[2], ALIGN_DT_BF16, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[3].name, &in[3], ALIGN_DT_F32, 2, as));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[4].name, &in[4], ALIGN_DT_F32, 1, ns));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 2, cs));
	if (p->pos0 < 0 || (T > 0 && (T - 1) * K > INT32_MAX - (int64_t)p->pos0))
		return align_fail(err, ALIGN_ERR_INPUT, "%s: pos0 %d negative or positions past 2^31", op,
				  (int)p->pos0);
	ALIGN_TRY(err, compressor_cfg_modes(&c->c, p, F, T > 0 ? T : 1, m, device, err));
	ALIGN_TRY(err, compressor_cfg_dims(&c->c, T, N * K, F, err));
	c->T = T, c->K = K, c->N = N, c->D = D, c->F = F;
	c->pos0 = p->pos0;
	return ALIGN_OK;
}

int compressor_fwd_cpu(const struct compressor_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out)
{
	struct compressor_op_cfg c;
	ALIGN_TRY(NULL, compressor_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "compressor", in, n_in, out, n_out));
	const align_bf16 *x = in[0].data, *wk = in[1].data, *wz = in[2].data;
	const float *ape = in[3].data, *w = in[4].data;
	align_bf16 *y = out[0].data;
	const int64_t T = c.T, K = c.K, N = c.N, D = c.D, F = c.F, NF = N * F;
	/* kz[2][(T*K) x NF]: K and Z after steps 1-2 */
	float *kz = malloc(sizeof(float) * (size_t)(2 * T * K * NF + 1));
	float *wk_ = malloc(sizeof(float) * (size_t)F);
	if (!kz || !wk_) {
		free(kz);
		free(wk_);
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "compressor: out of memory");
	}
	float *Kv = kz, *Zv = kz + T * K * NF;
	for (int64_t t = 0; t < T * K; t++)
		for (int64_t j = 0; j < NF; j++)
			compressor_proj(&c.c, x + t * D, wk + j * D, wz + j * D, D, ape[(t % K) * NF + j],
					&Kv[t * NF + j], &Zv[t * NF + j]);
	float *C = wk_; /* one row */
	for (int64_t g = 0; g < T; g++) {
		for (int64_t ch = 0; ch < F; ch++) {
			struct compressor_win win = compressor_window(Kv, Zv, g, ch, K, N, F);
			C[ch] = compressor_pool(&c.c, &win);
		}
		compressor_finish_row(&c.c, C, w, F, g, (int32_t)(c.pos0 + g * K), y + g * F);
	}
	free(kz);
	free(wk_);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	compressor_params_default(params);
}

/* 0 main compressor (FP8 QDQ of the nope dims); 1 indexer compressor (Hadamard rotation, FP4 QDQ);
 * 2 main compressor of a chunk starting at token 98304 with YaRN factor 40 (MCore-lite's
 * rotary_scaling_factor; with a power-of-two factor the two YaRN frequency forms agree bit for bit) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct compressor_params *p = params;
	params_default(params, d);
	if (k == 1)
		p->rotate = 1;
	if (k == 2) {
		p->pos0 = 98304;
		p->rope.factor = 40.0f;
	}
	return k >= 0 && k <= 2;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return compressor_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[5], out[1];
	struct compressor_op_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&compressor_impl, m, d, in, out, err));
	return compressor_cfg_init(&c, params, m, in, 5, out, 1, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL,
				 MODE_CSA_COMP_GEMM,
				 MODE_CSA_COMP_APE,
				 MODE_CSA_COMP_POOL,
				 MODE_CSA_COMP_SUM,
				 MODE_CSA_COMP_SUM_ORDER,
				 MODE_CSA_COMP_NORM,
				 MODE_CSA_HADAMARD,
				 MODE_CSA_QAT,
				 MODE_RMSNORM_WEIGHT,
				 MODE_RMSNORM_REDUCE,
				 MODE_RMSNORM_RSQRT,
				 MODE_RMSNORM_EPS,
				 MODE_ROPE_YARN_FREQ,
				 MODE_ROPE_COSSIN,
				 MODE_ROPE_ARITH,
				 -1};

const struct align_op_impl compressor_impl = {
	5,
	in_specs,
	1,
	out_specs,
	"T=8,K=4,N=2,D=64,F=128",
	modes_read,
	sizeof(struct compressor_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
