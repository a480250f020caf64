/* sparse_attn.c: CPU twin of the DSv4 sparse MQA attention with sink (contract in sparse_attn.h). */
#include "sparse_attn.h"

#include <math.h>
#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"
#include "sparse_attn_row.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 8.0f, 0}, "queries (q_norm, RoPE applied)"},
	{"kv", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "keys = values: raw KV then compressed KV"},
	{"idx",
	 ALIGN_DT_I32,
	 "T,N",
	 {ALIGN_FILL_KV_IDX, 0, 96.0f, 'S'},
	 "kv rows per query, [window | compressed], -1 invalid"},
	{"sink", ALIGN_DT_F32, "H", {ALIGN_FILL_NORMAL, 2.0f, 0, 0}, "attention sink logit per head"},
};
static const struct align_tensor_spec out_specs[] = {
	{"o", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "attention output"},
};

static int sparse_attn_cfg_modes(struct sparse_attn_cfg *c, const struct align_modes *m, int device,
				 struct align_err *err)
{
	const char *op = "sparse_attn", *fn = "sparse_attn_cfg_init";
	ALIGN_TRY(err, op_cfg_math(err, op, fn, m, device, &c->math));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_SINK_IN_MAX, ALIGN_CSA_SINK_IN_MAX_OFF,
				   ALIGN_CSA_SINK_IN_MAX_ON, &c->sink_in_max));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_SOFTMAX, ALIGN_CSA_SOFTMAX_FULL, ALIGN_CSA_SOFTMAX_ONLINE64,
				   &c->online));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_P, ALIGN_CSA_P_FP32, ALIGN_CSA_P_BF16, &c->p_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_EXP, ALIGN_CSA_EXP_EXP, ALIGN_CSA_EXP_EXP2, &c->exp2));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_QK, ALIGN_CSA_QK_FP32, ALIGN_CSA_QK_BF16_TC, &c->qk_tc));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_SUM_ORDER, ALIGN_CSA_SUM_ORDER_SEQ,
				   ALIGN_CSA_SUM_ORDER_TORCH, &c->torch_sums));
	ALIGN_TRY(err,
		  op_cfg_flag(err, op, fn, m, MODE_CSA_SINK, ALIGN_CSA_SINK_FP32, ALIGN_CSA_SINK_BF16, &c->sink_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_INDEX_ORDER, ALIGN_CSA_INDEX_ORDER_WINDOW_FIRST,
				   ALIGN_CSA_INDEX_ORDER_COMPRESSED_FIRST, &c->comp_first));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_EMPTY_ROW, ALIGN_CSA_EMPTY_ROW_IEEE,
				   ALIGN_CSA_EMPTY_ROW_ZERO, &c->empty_zero));
	return ALIGN_OK;
}

int sparse_attn_cfg_init(struct sparse_attn_cfg *c, const struct sparse_attn_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err)
{
	const char *op = "sparse_attn";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 4, 1));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[0].name, &in[0], 3));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[1].name, &in[1], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[2].name, &in[2], 2));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], S = in[1].shape[0], N = in[2].shape[1];
	int64_t qs[3] = {T, H, D}, ks[2] = {S, D}, is[2] = {T, N}, hs[1] = {H};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[1].name, &in[1], ALIGN_DT_BF16, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[2].name, &in[2], ALIGN_DT_I32, 2, is));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[3].name, &in[3], ALIGN_DT_F32, 1, hs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, sparse_attn_cfg_modes(c, m, device, err));
	if (p->window < 0 || p->window > N)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: window %d outside [0, N = %lld]", op, p->window,
				  (long long)N);
	if (!(p->scale > 0.0f) || p->scale == INFINITY)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: scale %g is not a positive finite number", op,
				  (double)p->scale);
	if (c->torch_sums && (D > SPARSE_ATTN_TORCH_D || N > SPARSE_ATTN_TORCH_N))
		return align_fail(err, ALIGN_ERR_INPUT,
				  "%s: ALIGN_CSA_SUM_ORDER=torch models D <= %d and N <= %d, got D = %lld, N = %lld",
				  op, SPARSE_ATTN_TORCH_D, SPARSE_ATTN_TORCH_N, (long long)D, (long long)N);
	c->T = T, c->H = H, c->D = D, c->S = S, c->N = N, c->W = p->window;
	c->c = c->exp2 ? p->scale * ALIGN_LOG2E_F : p->scale;
	return ALIGN_OK;
}

/* one (t, h) row; z, e: N floats; acc, tmp: max(D, N) floats */
static void row(const struct sparse_attn_cfg *c, const align_bf16 *q, const align_bf16 *kv, const int32_t *idx,
		float sink, align_bf16 *o, float *z, float *e, float *acc, float *tmp)
{
	const int64_t N = c->N, D = c->D;
	int any = 0;
	for (int64_t k = 0; k < N; k++) {
		int32_t j = idx[sa_slot(c, k)];
		int v = sa_valid(c, j);
		any |= v;
		z[k] = v ? sa_logit(c, sa_dot(c, q, kv + (int64_t)j * D, tmp), 1) : -INFINITY;
	}
	if (!any && c->empty_zero) {
		for (int64_t d = 0; d < D; d++)
			o[d] = align_f32_to_bf16(0.0f);
		return;
	}
	const float s = sa_sink(c, sink);
	float m = c->sink_in_max ? s : -INFINITY, l = 0.0f;
	if (!c->online) {
		for (int64_t k = 0; k < N; k++)
			m = sa_max(m, z[k]);
		for (int64_t k = 0; k < N; k++)
			e[k] = sa_e(c, hn_sub(z[k], m));
		if (c->torch_sums) {
			l = N > 0 ? torch_sum_lastdim(e, 1, N) : 0.0f;
		} else {
			for (int64_t k = 0; k < N; k++)
				l = hn_add(l, e[k]);
		}
		l = hn_add(l, sa_e(c, hn_sub(s, m)));
		for (int64_t k = 0; k < N; k++)
			e[k] = sa_p(c, hn_div(e[k], l));
		for (int64_t d = 0; d < D; d++) {
			for (int64_t k = 0; k < N; k++) {
				int32_t j = idx[sa_slot(c, k)];
				float v = sa_valid(c, j) ? align_bf16_to_f32(kv[(int64_t)j * D + d]) : 0.0f;
				tmp[k] = hn_mul(e[k], v);
			}
			float a = 0.0f;
			if (c->torch_sums && N > 0)
				a = torch_sum_strided(tmp, 1, N);
			else
				for (int64_t k = 0; k < N; k++)
					a = hn_add(a, tmp[k]);
			o[d] = align_f32_to_bf16(a);
		}
		return;
	}
	for (int64_t d = 0; d < D; d++)
		acc[d] = 0.0f;
	for (int64_t k0 = 0; k0 < N; k0 += SPARSE_ATTN_BLOCK) {
		int64_t k1 = k0 + SPARSE_ATTN_BLOCK < N ? k0 + SPARSE_ATTN_BLOCK : N;
		float m2 = m;
		for (int64_t k = k0; k < k1; k++)
			m2 = sa_max(m2, z[k]);
		float a = sa_e(c, hn_sub(m, m2)), bs = 0.0f;
		for (int64_t k = k0; k < k1; k++) {
			e[k] = sa_e(c, hn_sub(z[k], m2));
			bs = hn_add(bs, e[k]);
		}
		l = hn_add(hn_mul(l, a), bs);
		for (int64_t d = 0; d < D; d++) {
			float x = hn_mul(acc[d], a);
			for (int64_t k = k0; k < k1; k++) {
				int32_t j = idx[sa_slot(c, k)];
				float v = sa_valid(c, j) ? align_bf16_to_f32(kv[(int64_t)j * D + d]) : 0.0f;
				x = hn_add(x, hn_mul(sa_p(c, e[k]), v));
			}
			acc[d] = x;
		}
		m = m2;
	}
	l = hn_add(l, sa_e(c, hn_sub(s, m)));
	for (int64_t d = 0; d < D; d++)
		o[d] = align_f32_to_bf16(hn_div(acc[d], l));
}

int sparse_attn_fwd_cpu(const struct sparse_attn_params *p, const struct align_modes *m, const struct align_tensor *in,
			int n_in, struct align_tensor *out, int n_out)
{
	struct sparse_attn_cfg c;
	ALIGN_TRY(NULL, sparse_attn_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "sparse_attn", in, n_in, out, n_out));
	int64_t nz = c.N > 0 ? c.N : 1, na = (c.D > c.N ? c.D : c.N) + 1;
	float *buf = malloc(sizeof(float) * (size_t)(2 * nz + 2 * na));
	if (!buf)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "sparse_attn: out of memory");
	const align_bf16 *q = in[0].data, *kv = in[1].data;
	const int32_t *idx = in[2].data;
	const float *sink = in[3].data;
	align_bf16 *o = out[0].data;
	for (int64_t t = 0; t < c.T; t++)
		for (int64_t h = 0; h < c.H; h++)
			row(&c, q + (t * c.H + h) * c.D, kv, idx + t * c.N, sink[h], o + (t * c.H + h) * c.D, buf,
			    buf + nz, buf + 2 * nz, buf + 2 * nz + na);
	free(buf);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	struct sparse_attn_params *p = params;
	int64_t D = d->v[ALIGN_DIM_D] > 0 ? d->v[ALIGN_DIM_D] : 1, N = d->v[ALIGN_DIM_N];
	p->scale = (float)(1.0 / sqrt((double)D));
	p->window = (int)(N / 2 < 128 ? N / 2 : 128);
}

/* 1: no window (all slots compressed), scale 1/16; 2: window = N - 3, scale 0.5 */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct sparse_attn_params *p = params;
	params_default(params, d);
	if (k == 1) {
		p->window = 0;
		p->scale = 0.0625f;
	} else if (k == 2) {
		p->window = d->v[ALIGN_DIM_N] > 3 ? (int)d->v[ALIGN_DIM_N] - 3 : 0;
		p->scale = 0.5f;
	}
	return k <= 2;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return sparse_attn_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[1];
	struct sparse_attn_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&sparse_attn_impl, m, d, in, out, err));
	return sparse_attn_cfg_init(&c, params, m, in, 4, out, 1, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL,
				 MODE_CSA_SINK_IN_MAX,
				 MODE_CSA_SOFTMAX,
				 MODE_CSA_P,
				 MODE_CSA_EXP,
				 MODE_CSA_QK,
				 MODE_CSA_SUM_ORDER,
				 MODE_CSA_SINK,
				 MODE_CSA_INDEX_ORDER,
				 MODE_CSA_EMPTY_ROW,
				 -1};

const struct align_op_impl sparse_attn_impl = {
	4,
	in_specs,
	1,
	out_specs,
	"T=16,H=4,D=64,S=96,N=48",
	modes_read,
	sizeof(struct sparse_attn_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
