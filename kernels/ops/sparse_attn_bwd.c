/* sparse_attn_bwd.c: CPU twin of the sparse MQA attention backward (contract in sparse_attn_bwd.h) and its
 * configuration, which the CUDA twin (sparse_attn_bwd.cu) calls too. */
/* NaN picks in the written operand order, as the CUDA twin makes them (nan_host.h): in attn_bwd, dq meets NaNs
 * of both signs (RoPE's fma_ac / fma_bd flip the default NaN's sign), and gcc 12 -O2 commuted an operand
 * here, so the C twin's dx NaN signs were the other operand's (16 of 1024 elements, extreme fill) */
#define ALIGN_NAN_WRITTEN_ORDER 1

#include "sparse_attn_bwd.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 8.0f, 0}, "queries (forward input)"},
	{"kv", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "keys = values (forward input)"},
	{"idx",
	 ALIGN_DT_I32,
	 "T,N",
	 {ALIGN_FILL_KV_IDX, 0, 96.0f, 'S'},
	 "kv rows per query, [window | compressed], -1 invalid"},
	{"sink", ALIGN_DT_F32, "H", {ALIGN_FILL_NORMAL, 2.0f, 0, 0}, "attention sink logit per head"},
	{"do", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of o"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dq", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of q"},
	{"dkv", ALIGN_DT_F32, "S,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of kv (fp32, fixed scatter order)"},
	{"dsink", ALIGN_DT_F32, "H", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of sink (summed over queries)"},
};

/* CSA_BWD_SOFTMAX=autograd: the unfused fp32 graph's forward switches and its plans (sparse_attn_bwd_ag.h) */
static int sab_ag_cfg(struct sparse_attn_bwd_cfg *b, const char *op, struct align_err *err)
{
	const struct sparse_attn_cfg *c = &b->f;
	if (c->H > SAB_AG_MAX_H)
		return align_fail(err, ALIGN_ERR_UNSUPPORTED,
				  "%s: ALIGN_CSA_BWD_SOFTMAX=autograd: H = %" PRId64 " is above %d", op, c->H,
				  SAB_AG_MAX_H);
	struct sab_ag_plan *pl = &b->ag;
	pl->g = *c; /* the torch graph: natural exp, fp32 products and P, the physical slot order */
	pl->g.exp2 = pl->g.qk_tc = pl->g.p_bf16 = pl->g.comp_first = pl->g.online = pl->g.empty_zero = 0;
	pl->g.c = b->scale;
	pl->dp = torch_rowsum_plan(c->T * c->H * c->N, c->D);
	pl->nr = torch_rowsum_plan(c->T * c->H, c->N);
	pl->dq_step = torch_sum_cols_step_v(c->N, c->T * c->H * c->D, c->D);
	pl->kv_step = torch_sum_cols_step_v(c->H, c->T * c->N * c->D, c->N * c->D);
	pl->sink_step = c->H == 1 ? 1 : torch_sum_cols_step(c->T, c->H);
	pl->sink1 = torch_rowsum_plan(1, c->T);
	const int64_t steps[3] = {pl->dq_step, pl->kv_step, pl->sink_step};
	int ok = pl->dp.ok && pl->nr.ok && (c->H != 1 || pl->sink1.ok);
	for (int i = 0; i < 3; i++)
		ok = ok && steps[i] >= 0 && steps[i] <= TORCH_COLS_MAX_STEP;
	if (!ok && c->T * c->H * c->N * c->D > 0)
		return align_fail(err, ALIGN_ERR_UNSUPPORTED,
				  "%s: ALIGN_CSA_BWD_SOFTMAX=autograd: ATen's reductions at T=%" PRId64 ", H=%" PRId64
				  ", N=%" PRId64 ", D=%" PRId64
				  " are not modelled (a row split over CTAs, or a tensor past 2^31 bytes)",
				  op, c->T, c->H, c->N, c->D);
	return ALIGN_OK;
}

int sparse_attn_bwd_cfg_init(struct sparse_attn_bwd_cfg *c, const struct sparse_attn_params *p,
			     const struct align_modes *m, const struct align_tensor *in, int n_in,
			     const struct align_tensor *out, int n_out, int device, struct align_err *err)
{
	const char *op = "sparse_attn_bwd", *fn = "sparse_attn_bwd_cfg_init";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 5, 3));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, "q", &in[0], 3));
	ALIGN_TRY(err, op_cfg_rank(err, op, "kv", &in[1], 2));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], S = in[1].shape[0];
	int64_t qs[3] = {T, H, D}, ks[2] = {S, D}, hs[1] = {H};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "do", &in[4], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dq", &out[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dkv", &out[1], ALIGN_DT_F32, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dsink", &out[2], ALIGN_DT_F32, 1, hs));
	/* the forward's checks and switches, against a descriptor of its output o (= dq's shape, bf16) */
	struct align_tensor o = out[0];
	o.data = NULL;
	ALIGN_TRY(err, sparse_attn_cfg_init(&c->f, p, m, in, 4, &o, 1, device, err));
	c->scale = p->scale;
	int v;
	c->online = c->autograd = 0;
	switch ((enum align_CSA_BWD_SOFTMAX_value)(v = m->v[MODE_CSA_BWD_SOFTMAX])) {
	case ALIGN_CSA_BWD_SOFTMAX_ONLINE64:
		c->online = 1;
		break;
	case ALIGN_CSA_BWD_SOFTMAX_FULL:
		break;
	case ALIGN_CSA_BWD_SOFTMAX_AUTOGRAD:
		c->autograd = 1;
		ALIGN_TRY(err, sab_ag_cfg(c, op, err));
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_CSA_BWD_SOFTMAX, v, fn);
	}
	ALIGN_TRY(err,
		  op_cfg_flag(err, op, fn, m, MODE_CSA_BWD_P, ALIGN_CSA_BWD_P_FP32, ALIGN_CSA_BWD_P_BF16, &c->p_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_CSA_BWD_DELTA, ALIGN_CSA_BWD_DELTA_P, ALIGN_CSA_BWD_DELTA_O,
				   &c->delta_o));
	return ALIGN_OK;
}

/* CSA_BWD_SOFTMAX=autograd on the CPU: buf holds G, P [T*H*N], gse, gb [T*H] and 3 N floats; frees buf */
static int sab_ag_cpu(const struct sparse_attn_bwd_cfg *b, const struct align_tensor *in, struct align_tensor *out,
		      float *buf)
{
	const struct sparse_attn_cfg *c = &b->f;
	const int64_t T = c->T, H = c->H, D = c->D, S = c->S, N = c->N, rows = T * H;
	float *G = buf, *P = G + rows * N, *gse = P + rows * N, *gb = gse + rows, *wk = gb + rows;
	const align_bf16 *q = in[0].data, *kv = in[1].data, *dO = in[4].data;
	const int32_t *idx = in[2].data;
	const float *sink = in[3].data;
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			int64_t r = t * H + h;
			sab_ag_row(&b->ag, q + r * D, kv, idx + t * N, sink[h], dO + r * D, t, h,
				   (align_bf16 *)out[0].data + r * D, G + r * N, P + r * N, gse + r, gb + r, wk);
		}
	float *dkv = out[1].data, *dsink = out[2].data;
	for (int64_t i = 0; i < S * D; i++)
		dkv[i] = sab_ag_dkv(&b->ag, q, idx, dO, G, P, i / D, i % D);
	for (int64_t h = 0; h < H; h++)
		dsink[h] = sab_ag_dsink(&b->ag, gse, gb, h);
	free(buf);
	return ALIGN_OK;
}

int sparse_attn_bwd_fwd_cpu(const struct sparse_attn_params *p, const struct align_modes *m,
			    const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct sparse_attn_bwd_cfg b;
	ALIGN_TRY(NULL, sparse_attn_bwd_cfg_init(&b, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "sparse_attn_bwd", in, n_in, out, n_out));
	const struct sparse_attn_cfg *c = &b.f;
	const int64_t T = c->T, H = c->H, D = c->D, S = c->S, N = c->N;
	int64_t na = (D > N ? D : N) + 1, rows = T * H;
	/* dS (G), P, ds (autograd: gse, gb) and tmp (autograd: 3 N) */
	float *buf = malloc(sizeof(float) * (size_t)(2 * rows * N + 2 * rows + na + 3 * N + 1));
	align_bf16 *o = malloc(sizeof(align_bf16) * (size_t)(rows * D + 1));
	if (!buf || !o) {
		free(buf);
		free(o);
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "sparse_attn_bwd: out of memory");
	}
	float *dS = buf, *P = dS + rows * N, *ds = P + rows * N, *tmp = ds + rows;
	if (b.autograd) {
		free(o);
		return sab_ag_cpu(&b, in, out, buf);
	}
	struct align_tensor ot = out[0];
	ot.data = o;
	int rc = sparse_attn_fwd_cpu(p, m, in, 4, &ot, 1); /* O as the forward stores it */
	if (rc != ALIGN_OK) {
		free(buf);
		free(o);
		return rc;
	}
	const align_bf16 *q = in[0].data, *kv = in[1].data, *dO = in[4].data;
	const int32_t *idx = in[2].data;
	const float *sink = in[3].data;
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			int64_t r = t * H + h;
			ds[r] = sab_row(&b, q + r * D, kv, idx + t * N, sink[h], o + r * D, dO + r * D,
					(align_bf16 *)out[0].data + r * D, dS + r * N, P + r * N, tmp);
		}
	float *dkv = out[1].data, *dsink = out[2].data;
	/* sab_dkv's order as a scatter: (t, h, k) ascending adds into row j = idx[t, slot k] (each dkv
	 * element sees its terms in the same order as sab_dkv's scan, which the CUDA twin runs) */
	for (int64_t i = 0; i < S * D; i++)
		dkv[i] = 0.0f;
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++)
			for (int64_t k = 0; k < N; k++) {
				int32_t j = idx[t * N + sa_slot(c, k)];
				if (!sa_valid(c, j))
					continue;
				int64_t r = (t * H + h) * N + k;
				for (int64_t d = 0; d < D; d++) {
					int64_t e = (t * H + h) * D + d;
					float acc = dkv[(int64_t)j * D + d];
					acc = hn_add(acc, hn_mul(dS[r], align_bf16_to_f32(q[e])));
					dkv[(int64_t)j * D + d] = hn_add(acc, hn_mul(P[r], align_bf16_to_f32(dO[e])));
				}
			}
	for (int64_t h = 0; h < H; h++)
		dsink[h] = sab_dsink(&b, ds, h);
	free(buf);
	free(o);
	return ALIGN_OK;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return sparse_attn_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[5], out[3];
	struct sparse_attn_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&sparse_attn_bwd_impl, m, d, in, out, err));
	return sparse_attn_bwd_cfg_init(&c, params, m, in, 5, out, 3, device, err);
}

/* the forward's parameters and variants (scale, window) */
static void params_default(void *params, const struct align_dims *d)
{
	sparse_attn_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return sparse_attn_impl.params_variant(params, d, k);
}

static const int modes_read[] = {MODE_MATH_IMPL,       MODE_CSA_SINK_IN_MAX,
				 MODE_CSA_SOFTMAX,     MODE_CSA_P,
				 MODE_CSA_EXP,	       MODE_CSA_QK,
				 MODE_CSA_SUM_ORDER,   MODE_CSA_SINK,
				 MODE_CSA_INDEX_ORDER, MODE_CSA_EMPTY_ROW,
				 MODE_CSA_BWD_SOFTMAX, MODE_CSA_BWD_P,
				 MODE_CSA_BWD_DELTA,   -1};

const struct align_op_impl sparse_attn_bwd_impl = {
	5,
	in_specs,
	3,
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
