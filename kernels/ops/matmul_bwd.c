/* matmul_bwd.c: CPU twin of the matmul backward (contract in matmul_bwd.h) and its configuration
 * (matmul_bwd_cfg_init), which the CUDA twin (matmul_bwd.cu) calls too. */
/* NaN picks in the written operand order, as the CUDA twin makes them (nan_host.h): in attn_bwd under
 * ROPE_ARITH=fma_ac / fma_bd with the extreme fill, NaNs of both signs meet in this op's sums (a sign-flipped
 * default NaN from RoPE's backward against the default NaN), and gcc 12 -O2 commuted operands here (H100 and
 * emulator, 2026-12-07: dwd, dvec, dx NaN signs) */
#define ALIGN_NAN_WRITTEN_ORDER 1

#include "matmul_bwd.h"

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"a", ALIGN_DT_F32, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "forward input (activations)"},
	{"b", ALIGN_DT_F32, "F,D", {ALIGN_FILL_SPECIAL, 0.03f, 0.5f, 0}, "forward weight, torch Linear layout"},
	{"dy", ALIGN_DT_F32, "T,F", {ALIGN_FILL_SPECIAL, 0.01f, 0.1f, 0}, "gradient of the forward output y"},
	{"main_grad",
	 ALIGN_DT_F32,
	 "F,D",
	 {ALIGN_FILL_NORMAL, 0.05f, 0, 0},
	 "existing weight-gradient buffer (WGRAD_DTYPE; read by WGRAD_ACCUM=main_grad and add)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"da", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "dy @ b (bf16 or f32 per MATMUL_OUT)"},
	{"db",
	 ALIGN_DT_BF16,
	 "F,D",
	 {ALIGN_FILL_NORMAL, 0, 0, 0},
	 "dy^T @ a, accumulated per WGRAD_ACCUM (WGRAD_DTYPE)"},
};

static int wgrad_dtype(const struct align_modes *m)
{
	return m->v[MODE_WGRAD_DTYPE] == ALIGN_WGRAD_DTYPE_FP32 ? ALIGN_DT_F32 : ALIGN_DT_BF16;
}

static int modes_init(struct matmul_bwd_cfg *c, const struct align_modes *m, int device, struct align_err *err)
{
	const char *op = "matmul_bwd", *fn = "matmul_bwd_cfg_init";
	int v = m->v[MODE_MATMUL_OPERAND];
	switch ((enum align_MATMUL_OPERAND_value)v) {
	case ALIGN_MATMUL_OPERAND_BF16:
	case ALIGN_MATMUL_OPERAND_FP32:
	case ALIGN_MATMUL_OPERAND_TF32:
		c->operand = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MATMUL_OPERAND, v, fn);
	}
	switch ((enum align_MATMUL_ACCUM_value)(v = m->v[MODE_MATMUL_ACCUM])) {
	case ALIGN_MATMUL_ACCUM_SEQ:
	case ALIGN_MATMUL_ACCUM_SPLIT16:
	case ALIGN_MATMUL_ACCUM_FP64:
		c->accum = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MATMUL_ACCUM, v, fn);
	}
	ALIGN_TRY(err,
		  op_cfg_flag(err, op, fn, m, MODE_MATMUL_FMA, ALIGN_MATMUL_FMA_OFF, ALIGN_MATMUL_FMA_ON, &c->fma));
	switch ((enum align_MATMUL_OUT_value)(v = m->v[MODE_MATMUL_OUT])) {
	case ALIGN_MATMUL_OUT_BF16:
		c->da_dtype = ALIGN_DT_BF16;
		break;
	case ALIGN_MATMUL_OUT_FP32:
		c->da_dtype = ALIGN_DT_F32;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MATMUL_OUT, v, fn);
	}
	switch ((enum align_WGRAD_ORDER_value)(v = m->v[MODE_WGRAD_ORDER])) {
	case ALIGN_WGRAD_ORDER_BS:
	case ALIGN_WGRAD_ORDER_SB:
	case ALIGN_WGRAD_ORDER_SPLIT16:
		c->order = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_WGRAD_ORDER, v, fn);
	}
	switch ((enum align_WGRAD_ACCUM_value)(v = m->v[MODE_WGRAD_ACCUM])) {
	case ALIGN_WGRAD_ACCUM_FRESH:
	case ALIGN_WGRAD_ACCUM_MAIN_GRAD:
	case ALIGN_WGRAD_ACCUM_ADD:
		c->wacc = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_WGRAD_ACCUM, v, fn);
	}
	switch ((enum align_WGRAD_DTYPE_value)(v = m->v[MODE_WGRAD_DTYPE])) {
	case ALIGN_WGRAD_DTYPE_BF16:
	case ALIGN_WGRAD_DTYPE_FP32:
		c->w_dtype = wgrad_dtype(m);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_WGRAD_DTYPE, v, fn);
	}
	(void)device; /* every value runs on both twins */
	return ALIGN_OK;
}

int matmul_bwd_cfg_init(struct matmul_bwd_cfg *c, const struct matmul_bwd_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err)
{
	const char *op = "matmul_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 4, 2));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "matmul_bwd: no params");
	ALIGN_TRY(err, op_cfg_rank(err, op, "a", &in[0], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "b", &in[1], 2));
	ALIGN_TRY(err, modes_init(c, m, device, err));
	int64_t T = in[0].shape[0], D = in[0].shape[1], F = in[1].shape[0], S = p->S > 0 ? p->S : T;
	int64_t ad[2] = {T, D}, bd[2] = {F, D}, yd[2] = {T, F};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "a", &in[0], ALIGN_DT_F32, 2, ad));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "b", &in[1], ALIGN_DT_F32, 2, bd));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dy", &in[2], ALIGN_DT_F32, 2, yd));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "main_grad", &in[3], c->w_dtype, 2, bd));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "da", &out[0], c->da_dtype, 2, ad));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "db", &out[1], c->w_dtype, 2, bd));
	if (T > 0 && T % S != 0)
		return align_fail(err, ALIGN_ERR_INPUT, "matmul_bwd: %lld tokens are not whole sequences of S = %lld",
				  (long long)T, (long long)S);
	c->T = T;
	c->D = D;
	c->F = F;
	c->S = S;
	c->B = T > 0 ? T / S : 0;
	return ALIGN_OK;
}

int matmul_bwd_fwd_cpu(const struct matmul_bwd_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out)
{
	struct matmul_bwd_cfg c;
	ALIGN_TRY(NULL, matmul_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "matmul_bwd", in, n_in, out, n_out));
	const float *a = in[0].data, *b = in[1].data, *dy = in[2].data;
	for (int64_t t = 0; t < c.T; t++)
		for (int64_t d = 0; d < c.D; d++)
			ops_st(&out[0], t * c.D + d, matmul_bwd_dgrad(&c, dy, b, t, d));
	for (int64_t f = 0; f < c.F; f++)
		for (int64_t d = 0; d < c.D; d++) {
			float mg = c.wacc == ALIGN_WGRAD_ACCUM_FRESH ? 0.0f : ops_ld(&in[3], f * c.D + d);
			ops_st(&out[1], f * c.D + d, matmul_bwd_wgrad(&c, dy, a, f, d, mg));
		}
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct matmul_bwd_params *)params)->S = d->v[ALIGN_DIM_S];
}

/* variant 1: the tokens are one sequence (S = T: sb visits them as bs does), so any T runs, e.g. the ragged
 * row counts of the CUDA-vs-C driver */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	if (k == 1)
		((struct matmul_bwd_params *)params)->S = 0;
	return k == 0 || k == 1;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return matmul_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int out_dtype(const struct align_modes *m, int i)
{
	if (i == 1)
		return wgrad_dtype(m);
	return m->v[MODE_MATMUL_OUT] == ALIGN_MATMUL_OUT_FP32 ? ALIGN_DT_F32 : ALIGN_DT_BF16;
}

static int in_dtype(const struct align_modes *m, int i)
{
	return i == 3 ? wgrad_dtype(m) : ALIGN_DT_F32;
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[2];
	struct matmul_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&matmul_bwd_impl, m, d, in, out, err));
	return matmul_bwd_cfg_init(&c, params, m, in, 4, out, 2, device, err);
}

static const int modes_read[] = {MODE_MATMUL_OPERAND, MODE_MATMUL_ACCUM, MODE_MATMUL_FMA,  MODE_MATMUL_OUT,
				 MODE_WGRAD_ORDER,    MODE_WGRAD_ACCUM,	 MODE_WGRAD_DTYPE, -1};

const struct align_op_impl matmul_bwd_impl = {
	4,
	in_specs,
	2,
	out_specs,
	"T=32,D=64,F=48,S=8",
	modes_read,
	sizeof(struct matmul_bwd_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	in_dtype,
};
