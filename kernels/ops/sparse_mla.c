/* sparse_mla.c: CPU twin of the DeepSeek-V3.2 sparse MLA attention (contract in sparse_mla.h). */
#include "sparse_mla.h"

#include <math.h>
#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"
#include "sparse_mla_row.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 8.0f, 0}, "absorbed queries [latent F | rope D-F]"},
	{"kv", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "kv cache rows [latent F (= V) | k_pe]"},
	{"idx", ALIGN_DT_I32, "T,N", {ALIGN_FILL_KV_IDX, 0, 96.0f, 'S'}, "selected kv rows per query, -1 invalid"},
};
static const struct align_tensor_spec out_specs[] = {
	{"o", ALIGN_DT_BF16, "T,H,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "attention output over the latent values"},
};

static int sparse_mla_cfg_modes(struct sparse_mla_cfg *c, const struct align_modes *m, int device,
				struct align_err *err)
{
	const char *op = "sparse_mla", *fn = "sparse_mla_cfg_init";
	ALIGN_TRY(err, op_cfg_math(err, op, fn, m, device, &c->sa.math));
	int v = m->v[MODE_DSA_MLA_QK];
	switch ((enum align_DSA_MLA_QK_value)v) {
	case ALIGN_DSA_MLA_QK_SPLIT:
		c->qk = SPARSE_MLA_QK_SPLIT;
		break;
	case ALIGN_DSA_MLA_QK_FP32:
		c->qk = SPARSE_MLA_QK_FP32;
		break;
	case ALIGN_DSA_MLA_QK_BF16_TC:
		c->qk = SPARSE_MLA_QK_BF16_TC;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_DSA_MLA_QK, v, fn);
	}
	v = m->v[MODE_DSA_MLA_SOFTMAX];
	switch ((enum align_DSA_MLA_SOFTMAX_value)v) {
	case ALIGN_DSA_MLA_SOFTMAX_FULL:
		c->block = 0;
		break;
	case ALIGN_DSA_MLA_SOFTMAX_ONLINE64:
		c->block = 64;
		break;
	case ALIGN_DSA_MLA_SOFTMAX_ONLINE1024:
		c->block = 1024;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_DSA_MLA_SOFTMAX, v, fn);
	}
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_DSA_MLA_P, ALIGN_DSA_MLA_P_FP32, ALIGN_DSA_MLA_P_BF16,
				   &c->sa.p_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_DSA_MLA_EXP, ALIGN_DSA_MLA_EXP_EXP, ALIGN_DSA_MLA_EXP_EXP2,
				   &c->sa.exp2));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_DSA_MLA_SLOTS, ALIGN_DSA_MLA_SLOTS_MASK,
				   ALIGN_DSA_MLA_SLOTS_GATHER, &c->gather));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_DSA_MLA_EMPTY_ROW, ALIGN_DSA_MLA_EMPTY_ROW_IEEE,
				   ALIGN_DSA_MLA_EMPTY_ROW_ZERO, &c->empty_zero));
	return ALIGN_OK;
}

int sparse_mla_cfg_init(struct sparse_mla_cfg *c, const struct sparse_mla_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err)
{
	const char *op = "sparse_mla";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 3, 1));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[0].name, &in[0], 3));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[1].name, &in[1], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[2].name, &in[2], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, out_specs[0].name, &out[0], 3));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], S = in[1].shape[0], N = in[2].shape[1],
		F = out[0].shape[2];
	int64_t qs[3] = {T, H, D}, ks[2] = {S, D}, is[2] = {T, N}, os[3] = {T, H, F};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[1].name, &in[1], ALIGN_DT_BF16, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[2].name, &in[2], ALIGN_DT_I32, 2, is));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 3, os));
	if (F < 1 || F > D)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: the value width F = %lld must be in [1, D = %lld]", op,
				  (long long)F, (long long)D);
	if (!(p->scale > 0.0f) || p->scale == INFINITY)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: scale %g is not a positive finite number", op,
				  (double)p->scale);
	ALIGN_TRY(err, sparse_mla_cfg_modes(c, m, device, err));
	c->T = T, c->H = H, c->D = D, c->F = F, c->S = S, c->N = N;
	c->sa.T = T, c->sa.H = H, c->sa.D = D, c->sa.S = S, c->sa.N = N, c->sa.W = 0;
	c->sa.c = c->sa.exp2 ? p->scale * ALIGN_LOG2E_F : p->scale;
	c->sa.qk_tc = c->qk == SPARSE_MLA_QK_BF16_TC;
	c->sa.torch_sums = 0, c->sa.sink_in_max = 0, c->sa.online = c->block > 0, c->sa.sink_bf16 = 0;
	c->sa.comp_first = 0, c->sa.empty_zero = c->empty_zero;
	c->lat = c->sa;
	c->lat.D = F;
	c->pe = c->sa;
	c->pe.D = D - F;
	return ALIGN_OK;
}

int sparse_mla_fwd_cpu(const struct sparse_mla_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out)
{
	struct sparse_mla_cfg c;
	ALIGN_TRY(NULL, sparse_mla_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "sparse_mla", in, n_in, out, n_out));
	int64_t n = c.N > 0 ? c.N : 1;
	float *buf = malloc(sizeof(float) * (size_t)(2 * n + c.F));
	int32_t *list = malloc(sizeof(int32_t) * (size_t)n);
	if (!buf || !list) {
		free(buf);
		free(list);
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "sparse_mla: out of memory");
	}
	const align_bf16 *q = in[0].data, *kv = in[1].data;
	const int32_t *idx = in[2].data;
	align_bf16 *o = out[0].data;
	for (int64_t t = 0; t < c.T; t++)
		for (int64_t h = 0; h < c.H; h++)
			sparse_mla_row(&c, q + (t * c.H + h) * c.D, kv, idx + t * c.N, o + (t * c.H + h) * c.F, buf,
				       buf + n, list, buf + 2 * n);
	free(buf);
	free(list);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	struct sparse_mla_params *p = params;
	p->scale = (float)(1.0 / sqrt(192.0)); /* Python 192 ** -0.5 */
}

/* 1: scale 1/16; 2: scale 0.5 (sharper softmax, more P rounding visible) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct sparse_mla_params *p = params;
	params_default(params, d);
	if (k == 1)
		p->scale = 0.0625f;
	else if (k == 2)
		p->scale = 0.5f;
	return k >= 0 && k <= 2;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return sparse_mla_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[3], out[1];
	struct sparse_mla_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&sparse_mla_impl, m, d, in, out, err));
	return sparse_mla_cfg_init(&c, params, m, in, 3, out, 1, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL,   MODE_DSA_MLA_QK,    MODE_DSA_MLA_SOFTMAX,   MODE_DSA_MLA_P,
				 MODE_DSA_MLA_EXP, MODE_DSA_MLA_SLOTS, MODE_DSA_MLA_EMPTY_ROW, -1};

const struct align_op_impl sparse_mla_impl = {
	3,
	in_specs,
	1,
	out_specs,
	"T=8,H=4,D=80,F=64,S=96,N=48",
	modes_read,
	sizeof(struct sparse_mla_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
