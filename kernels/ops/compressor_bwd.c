/* compressor_bwd.c: CPU twin of the DSv4 KV compressor's backward (contract in compressor_bwd.h). */
/* NaN picks in the written operand order, as the CUDA twin makes them (nan_host.h): in attn_bwd under
 * ROPE_ARITH=fma_ac / fma_bd with the extreme fill, NaNs of both signs meet in this op's sums (a sign-flipped
 * default NaN from RoPE's backward against the default NaN), and gcc 12 -O2 commuted operands here (H100 and
 * emulator, 2026-12-07: dwd, dvec, dx NaN signs) */
#define ALIGN_NAN_WRITTEN_ORDER 1

#include "compressor_bwd.h"

#include <stdlib.h>
#include <string.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x",
	 ALIGN_DT_BF16,
	 "T*K,D",
	 {ALIGN_FILL_SPECIAL, 1.0f, 8.0f, 0},
	 "normed attention input, T whole groups of K tokens (forward's)"},
	{"wkv", ALIGN_DT_BF16, "N*F,D", {ALIGN_FILL_NORMAL, 0.125f, 0, 0}, "kv projection (forward's)"},
	{"wgate", ALIGN_DT_BF16, "N*F,D", {ALIGN_FILL_NORMAL, 0.25f, 0, 0}, "gate (score) projection (forward's)"},
	{"ape", ALIGN_DT_F32, "K,N*F", {ALIGN_FILL_NORMAL, 0.5f, 0, 0}, "positional bias of the gate (forward's)"},
	{"w", ALIGN_DT_F32, "F", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "RMSNorm weight (forward's)"},
	{"dc", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_SPECIAL, 0.5f, 4.0f, 0}, "gradient of the compressed entries c"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dx", ALIGN_DT_BF16, "T*K,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of x"},
	{"dwkv", ALIGN_DT_F32, "N*F,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of wkv (token order)"},
	{"dwgate", ALIGN_DT_F32, "N*F,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of wgate (token order)"},
	{"dape", ALIGN_DT_F32, "K,N*F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of ape (group order)"},
	{"dw", ALIGN_DT_F32, "F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the norm weight (group order)"},
};

int compressor_bwd_cfg_init(struct compressor_bwd_cfg *c, const struct compressor_params *p,
			    const struct align_modes *m, const struct align_tensor *in, int n_in,
			    const struct align_tensor *out, int n_out, int device, struct align_err *err)
{
	const char *op = "compressor_bwd", *fn = "compressor_bwd_cfg_init";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 6, 5));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, "dc", &in[5], 2));
	/* the forward's checks on its five inputs and an output of dc's shape (no data read) */
	struct align_tensor fo = in[5];
	fo.data = NULL;
	struct align_modes mm = *m; /* the QAT-off form whatever CSA_QAT says (not read: no backward) */
	mm.v[MODE_CSA_QAT] = ALIGN_CSA_QAT_OFF;
	ALIGN_TRY(err, compressor_cfg_init(&c->o, p, &mm, in, 5, &fo, 1, device, err));
	if (c->o.c.f.order == ALIGN_REDUCE_TORCH) /* the norm backward's sum (step 3) has no torch model here */
		return align_fail(err, ALIGN_ERR_UNSUPPORTED,
				  "%s: ALIGN_RMSNORM_REDUCE=torch is modelled for the compressor forward only", op);
	const int64_t TK = c->o.T * c->o.K, NF = c->o.N * c->o.F, D = c->o.D, F = c->o.F;
	int64_t xs[2] = {TK, D}, ws[2] = {NF, D}, as[2] = {c->o.K, NF}, ns[1] = {F};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dx", &out[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dwkv", &out[1], ALIGN_DT_F32, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dwgate", &out[2], ALIGN_DT_F32, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dape", &out[3], ALIGN_DT_F32, 2, as));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dw", &out[4], ALIGN_DT_F32, 1, ns));
	memset(&c->nb, 0, sizeof c->nb);
	c->nb.D = F;
	c->nb.T = c->o.T;
	c->nb.f = c->o.c.f;
	c->nb.wbf16 = c->o.c.wbf16;
	c->nb.dw_torch = -1;
	int v;
	switch ((enum align_RMSNORM_BWD_FORM_value)(v = m->v[MODE_RMSNORM_BWD_FORM])) {
	case ALIGN_RMSNORM_BWD_FORM_AUTOGRAD:
	case ALIGN_RMSNORM_BWD_FORM_TE:
	case ALIGN_RMSNORM_BWD_FORM_APEX:
		c->nb.form = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_RMSNORM_BWD_FORM, v, fn);
	}
	struct rope_params q = rope_bwd_params(&p->rope);
	return rope_cfg_modes(&c->rinv, &q, F, m, device, err);
}

/* the whole backward in the contract's order; ws: every scratch array, see the layout below */
static void bwd_run(const struct compressor_bwd_cfg *c, const struct align_tensor *in, struct align_tensor *out,
		    float *ws, align_bf16 *gy)
{
	const struct compressor_cfg *cc = &c->o.c;
	const align_bf16 *x = in[0].data, *wk = in[1].data, *wz = in[2].data, *dc = in[5].data;
	const float *ape = in[3].data, *w = in[4].data;
	const int64_t T = c->o.T, K = c->o.K, N = c->o.N, D = c->o.D, F = c->o.F, NF = N * F, TK = T * K;
	float *Kv = ws, *Zv = Kv + TK * NF, *dK = Zv + TK * NF, *dZ = dK + TK * NF, *nb = dZ + TK * NF;
	float *C = nb + T * F, *dC = C + F, *tmp = dC + F;
	for (int64_t t = 0; t < TK; t++)
		for (int64_t j = 0; j < NF; j++)
			compressor_proj(cc, x + t * D, wk + j * D, wz + j * D, D, ape[(t % K) * NF + j],
					&Kv[t * NF + j], &Zv[t * NF + j]);
	for (int64_t i = 0; i < TK * NF; i++)
		dK[i] = dZ[i] = 0.0f;
	for (int64_t g = 0; g < T; g++) {
		for (int64_t ch = 0; ch < F; ch++) {
			struct compressor_win win = compressor_window(Kv, Zv, g, ch, K, N, F);
			C[ch] = compressor_pool(cc, &win);
		}
		compressor_norm_row(cc, C, w, F, g, gy); /* C: the norm input x; gy: scratch */
		float r = compressor_norm_factor(cc, C, F, g);
		compressor_bwd_grad_row(c, dc + g * F, (int32_t)(c->o.pos0 + g * K), gy, tmp);
		compressor_bwd_norm_row(c, C, r, w, gy, tmp, dC, nb + g * F);
		for (int64_t ch = 0; ch < F; ch++)
			compressor_bwd_pool(cc, Kv, Zv, dK, dZ, g, ch, K, N, F, dC[ch]);
	}
	align_bf16 *dx = out[0].data;
	float *dwk = out[1].data, *dwz = out[2].data, *dape = out[3].data, *dw = out[4].data;
	for (int64_t t = 0; t < TK; t++)
		for (int64_t d = 0; d < D; d++)
			dx[t * D + d] = compressor_bwd_dx(cc, dK + t * NF, dZ + t * NF, wk, wz, NF, D, d);
	for (int64_t j = 0; j < NF; j++)
		for (int64_t d = 0; d < D; d++) {
			dwk[j * D + d] = compressor_bwd_dwproj(cc, dK, dZ, x, TK, NF, D, j, d, 0);
			dwz[j * D + d] = compressor_bwd_dwproj(cc, dK, dZ, x, TK, NF, D, j, d, 1);
		}
	for (int64_t i = 0; i < K * NF; i++)
		dape[i] = compressor_bwd_gsum(dZ + i, T, K * NF);
	for (int64_t ch = 0; ch < F; ch++)
		dw[ch] = compressor_bwd_gsum(nb + ch, T, F);
}

int compressor_bwd_fwd_cpu(const struct compressor_params *p, const struct align_modes *m,
			   const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct compressor_bwd_cfg c;
	ALIGN_TRY(NULL, compressor_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "compressor_bwd", in, n_in, out, n_out));
	const int64_t T = c.o.T, F = c.o.F, TKNF = T * c.o.K * c.o.N * F;
	/* Kv, Zv, dK, dZ [T*K][N*F]; n [T][F]; C, dC, tmp [F] */
	float *ws = malloc(sizeof(float) * (size_t)(4 * TKNF + T * F + 3 * F + 1));
	align_bf16 *gy = malloc(sizeof(align_bf16) * (size_t)(F + 1));
	if (!ws || !gy) {
		free(ws);
		free(gy);
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "compressor_bwd: out of memory");
	}
	bwd_run(&c, in, out, ws, gy);
	free(ws);
	free(gy);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	compressor_impl.params_default(params, d);
}

/* the forward's variants (0 main, 1 indexer with the Hadamard rotation, 2 YaRN chunk at pos0 = 98304):
 * compressor_bwd under variant k is the backward of compressor under variant k */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	return compressor_impl.params_variant(params, d, k);
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return compressor_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[6], out[5];
	struct compressor_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&compressor_bwd_impl, m, d, in, out, err));
	return compressor_bwd_cfg_init(&c, params, m, in, 6, out, 5, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL,
				 MODE_CSA_COMP_GEMM,
				 MODE_CSA_COMP_APE,
				 MODE_CSA_COMP_POOL,
				 MODE_CSA_COMP_SUM,
				 MODE_CSA_COMP_SUM_ORDER,
				 MODE_CSA_COMP_NORM,
				 MODE_CSA_HADAMARD,
				 MODE_RMSNORM_WEIGHT,
				 MODE_RMSNORM_REDUCE,
				 MODE_RMSNORM_RSQRT,
				 MODE_RMSNORM_EPS,
				 MODE_RMSNORM_BWD_FORM,
				 MODE_ROPE_YARN_FREQ,
				 MODE_ROPE_COSSIN,
				 MODE_ROPE_ARITH,
				 -1};

const struct align_op_impl compressor_bwd_impl = {
	6,
	in_specs,
	5,
	out_specs,
	"T=4,K=4,N=2,D=32,F=128",
	modes_read,
	sizeof(struct compressor_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
