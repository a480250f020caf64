/* router.c: CPU twin of the DSv4 MoE gate (contract in router.h) and the op's configuration
 * (router_cfg_init), which the CUDA twin (router.cu) calls too. */
#include "router.h"

#include <stdlib.h>

#include "matmul.h"
#include "op_cfg.h"
#include "ops.h"
#include "torch_order.h"

/* step 5: K largest of b[0..E) by strict '>' from e = 0, skipping taken ones */
static void topk(const float *b, int64_t E, int64_t K, int32_t *sel, unsigned char *taken)
{
	for (int64_t e = 0; e < E; e++)
		taken[e] = 0;
	for (int64_t j = 0; j < K; j++) {
		int64_t best = -1;
		for (int64_t e = 0; e < E; e++)
			if (!taken[e] && (best < 0 || b[e] > b[best] || (align_isnanf(b[best]) && !align_isnanf(b[e]))))
				best = e;
		taken[best] = 1;
		sel[j] = (int32_t)best;
	}
}

/* step 4: group-limited masking of b in place */
static void group_mask(const struct router_cfg *c, float *b, unsigned char *taken)
{
	const struct router_params *p = &c->p;
	float gscore[ROUTER_MAX_K] = {0};
	int64_t E = c->E, K = c->K, G = p->n_groups, gs = E / G, per = K / p->topk_groups > 0 ? K / p->topk_groups : 1;
	int32_t sel[ROUTER_MAX_K];
	int torch = c->topk_order == ALIGN_ROUTER_TOPK_ORDER_TORCH;
	for (int64_t g = 0; g < G; g++) {
		if (torch) { /* b.view(G, -1).topk(per).values.sum(-1) */
			float v[ROUTER_MAX_K];
			torch_topk(b + g * gs, 1, gs, per, sel, taken, 1);
			for (int64_t j = 0; j < per; j++)
				v[j] = b[g * gs + sel[j]];
			gscore[g] = torch_sum_lastdim(v, 1, per);
			continue;
		}
		topk(b + g * gs, gs, per, sel, taken);
		float s = b[g * gs + sel[0]];
		for (int64_t j = 1; j < per; j++)
			s = s + b[g * gs + sel[j]];
		gscore[g] = s;
	}
	int32_t keep[ROUTER_MAX_K];
	if (torch)
		torch_topk(gscore, 1, G, p->topk_groups, keep, taken, 1);
	else
		topk(gscore, G, p->topk_groups, keep, taken);
	for (int64_t g = 0; g < G; g++) {
		int kept = 0;
		for (int j = 0; j < p->topk_groups; j++)
			kept |= keep[j] == g;
		if (kept)
			continue;
		for (int64_t e = g * gs; e < (g + 1) * gs; e++)
			b[e] = c->mask_zero ? b[e] * 0.0f : -1.0f / 0.0f;
	}
}

static void scores(const struct router_cfg *c, const float *l, float *s)
{
	const int64_t E = c->E;
	if (c->p.score == ROUTER_SCORE_SOFTMAX) {
		float mx = l[0];
		for (int64_t e = 1; e < E; e++)
			mx = l[e] > mx ? l[e] : mx;
		float z = 0.0f;
		for (int64_t e = 0; e < E; e++) {
			s[e] = ops_math_expf(c->math, l[e] - mx);
			z = e ? z + s[e] : s[e];
		}
		for (int64_t e = 0; e < E; e++)
			s[e] = s[e] / z;
		return;
	}
	for (int64_t e = 0; e < E; e++) {
		if (c->p.score == ROUTER_SCORE_SIGMOID) {
			s[e] = ops_math_sigmoidf(c->math, l[e]);
		} else {
			float sp = ops_math_softplusf(c->math, l[e]);
			if (c->sp_eps)
				sp = sp + 1e-20f;
			s[e] = align_sqrtf(sp);
		}
	}
}

/* mode decoders of router_cfg_init: one switch per mode, every value handled or refused */
static int cfg_modes(struct router_cfg *c, const struct align_modes *m, int device, struct align_err *err)
{
	const char *op = "router";
	ALIGN_TRY(err, op_cfg_math(err, op, "router_cfg_init", m, device, &c->math));
	int v = m->v[MODE_ROUTER_GEMM];
	switch ((enum align_ROUTER_GEMM_value)v) {
	case ALIGN_ROUTER_GEMM_FP32:
		c->x_opd = c->w_opd = ALIGN_MATMUL_OPERAND_FP32;
		break;
	case ALIGN_ROUTER_GEMM_BF16W:
		c->x_opd = ALIGN_MATMUL_OPERAND_FP32;
		c->w_opd = ALIGN_MATMUL_OPERAND_BF16;
		break;
	case ALIGN_ROUTER_GEMM_TF32:
		c->x_opd = c->w_opd = ALIGN_MATMUL_OPERAND_TF32;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_ROUTER_GEMM, v, "router_cfg_init");
	}
	ALIGN_TRY(err,
		  op_cfg_flag(err, op, "router_cfg_init", m, MODE_ROUTER_SQRTSOFTPLUS_EPS,
			      ALIGN_ROUTER_SQRTSOFTPLUS_EPS_NONE, ALIGN_ROUTER_SQRTSOFTPLUS_EPS_1E_20, &c->sp_eps));
	ALIGN_TRY(err, op_cfg_flag(err, op, "router_cfg_init", m, MODE_ROUTER_NORM_EPS, ALIGN_ROUTER_NORM_EPS_NONE,
				   ALIGN_ROUTER_NORM_EPS_1E_20, &c->norm_eps));
	switch ((enum align_ROUTER_SUM_value)(v = m->v[MODE_ROUTER_SUM])) {
	case ALIGN_ROUTER_SUM_FP32:
	case ALIGN_ROUTER_SUM_FP64:
	case ALIGN_ROUTER_SUM_TORCH:
		c->sum = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_ROUTER_SUM, v, "router_cfg_init");
	}
	switch ((enum align_ROUTER_TOPK_ORDER_value)(v = m->v[MODE_ROUTER_TOPK_ORDER])) {
	case ALIGN_ROUTER_TOPK_ORDER_SORTED:
	case ALIGN_ROUTER_TOPK_ORDER_INDEX:
	case ALIGN_ROUTER_TOPK_ORDER_TORCH:
		c->topk_order = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_ROUTER_TOPK_ORDER, v, "router_cfg_init");
	}
	ALIGN_TRY(err, op_cfg_flag(err, op, "router_cfg_init", m, MODE_ROUTER_GROUP_MASK,
				   ALIGN_ROUTER_GROUP_MASK_NEGINF, ALIGN_ROUTER_GROUP_MASK_ZERO, &c->mask_zero));
	ALIGN_TRY(err, op_cfg_flag(err, op, "router_cfg_init", m, MODE_ROUTER_HASH_TABLE, ALIGN_ROUTER_HASH_TABLE_TABLE,
				   ALIGN_ROUTER_HASH_TABLE_PLACEHOLDER, &c->placeholder));
	return ALIGN_OK;
}

int router_cfg_init(struct router_cfg *c, const struct router_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		    struct align_err *err)
{
	if (!c || !p || !m || !in || !out || n_in != 5 || n_out != 2 || in[0].ndim != 2 || in[1].ndim != 2 ||
	    in[4].ndim != 2)
		return align_fail(err, ALIGN_ERR_INPUT,
				  "router: expects x[T,D], w[E,D], bias[E], ids[T], tid2eid[V,K] -> idx[T,K], wt[T,K]");
	int64_t T = in[0].shape[0], D = in[0].shape[1], E = in[1].shape[0], V = in[4].shape[0], K = in[4].shape[1];
	int64_t xs[2] = {T, D}, ws[2] = {E, D}, es[1] = {E}, ts[1] = {T}, hs[2] = {V, K}, ks[2] = {T, K};
	ALIGN_TRY(err, op_cfg_tensor(err, "router", "input", "x", &in[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, "router", "input", "w", &in[1], ALIGN_DT_F32, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, "router", "input", "bias", &in[2], ALIGN_DT_F32, 1, es));
	ALIGN_TRY(err, op_cfg_tensor(err, "router", "input", "ids", &in[3], ALIGN_DT_I32, 1, ts));
	ALIGN_TRY(err, op_cfg_tensor(err, "router", "input", "tid2eid", &in[4], ALIGN_DT_I32, 2, hs));
	ALIGN_TRY(err, op_cfg_tensor(err, "router", "output", "idx", &out[0], ALIGN_DT_I32, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, "router", "output", "wt", &out[1], ALIGN_DT_F32, 2, ks));
	if (K > E || K > ROUTER_MAX_K)
		return align_fail(err, ALIGN_ERR_INPUT, "router: K = %lld must lie in 0..min(E = %lld, %d)",
				  (long long)K, (long long)E, ROUTER_MAX_K);
	if (p->n_groups > 1 && (E % p->n_groups || p->topk_groups < 1 || p->topk_groups > p->n_groups ||
				p->n_groups > ROUTER_MAX_K || K > (int64_t)p->topk_groups * (E / p->n_groups)))
		return align_fail(err, ALIGN_ERR_INPUT,
				  "router: groups %d (keep %d) do not fit E = %lld, K = %lld (E %% groups == 0, "
				  "1 <= keep <= groups <= %d, K <= keep * E / groups)",
				  p->n_groups, p->topk_groups, (long long)E, (long long)K, ROUTER_MAX_K);
	c->T = T, c->D = D, c->E = E, c->V = V, c->K = K;
	c->p = *p;
	return cfg_modes(c, m, device, err);
}

/* steps 3-8 for one token */
static int route_token(const struct router_cfg *c, const struct align_tensor *in, int64_t t, float *s, float *b,
		       unsigned char *taken, int32_t *sel, float *wt)
{
	const struct router_params *p = &c->p;
	int64_t E = c->E, V = c->V, K = c->K;
	if (p->hash) {
		int32_t id = ((const int32_t *)in[3].data)[t];
		if (id < 0 || id >= V)
			return ALIGN_ERR_INPUT;
		for (int64_t j = 0; j < K; j++) {
			int32_t e =
				c->placeholder ? (int32_t)((id + j) % E) : ((const int32_t *)in[4].data)[id * K + j];
			if (e < 0 || e >= E)
				return ALIGN_ERR_INPUT;
			sel[j] = e;
		}
	} else {
		const float *bias = in[2].data;
		for (int64_t e = 0; e < E; e++)
			b[e] = s[e] + bias[e];
		if (p->n_groups > 1)
			group_mask(c, b, taken);
		if (c->topk_order == ALIGN_ROUTER_TOPK_ORDER_TORCH)
			torch_topk(b, 1, E, K, sel, taken, 1);
		else
			topk(b, E, K, sel, taken);
	}
	if (c->topk_order == ALIGN_ROUTER_TOPK_ORDER_INDEX) /* ascending expert id */
		for (int64_t j = 1; j < K; j++)
			for (int64_t i = j; i > 0 && sel[i] < sel[i - 1]; i--) {
				int32_t tmp = sel[i];
				sel[i] = sel[i - 1];
				sel[i - 1] = tmp;
			}
	for (int64_t j = 0; j < K; j++)
		wt[j] = s[sel[j]];
	if (p->score != ROUTER_SCORE_SOFTMAX) {
		float sum;
		if (c->sum == ALIGN_ROUTER_SUM_TORCH) {
			sum = torch_sum_lastdim(wt, 1, K);
		} else if (c->sum == ALIGN_ROUTER_SUM_FP64) {
			double d = 0.0;
			for (int64_t j = 0; j < K; j++)
				d += (double)wt[j];
			sum = (float)d;
		} else {
			sum = wt[0];
			for (int64_t j = 1; j < K; j++)
				sum = sum + wt[j];
		}
		if (c->norm_eps)
			sum = sum + 1e-20f;
		for (int64_t j = 0; j < K; j++)
			wt[j] = wt[j] / sum;
	}
	for (int64_t j = 0; j < K; j++)
		wt[j] = wt[j] * p->route_scale;
	return ALIGN_OK;
}

int router_fwd_cpu(const struct router_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		   struct align_tensor *out, int n_out)
{
	struct router_cfg c;
	ALIGN_TRY(NULL, router_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "router", in, n_in, out, n_out));
	const int64_t T = c.T, D = c.D, E = c.E, K = c.K;
	float *buf = malloc(((size_t)E * D + (size_t)D + 3 * (size_t)E) * sizeof(float) + (size_t)E);
	if (!buf)
		return ALIGN_ERR_INTERNAL;
	float *wq = buf, *xq = wq + E * D, *l = xq + D, *s = l + E, *b = s + E;
	unsigned char *taken = (unsigned char *)(b + E);
	const float *w = in[1].data;
	for (int64_t i = 0; i < E * D; i++)
		wq[i] = matmul_operand(w[i], c.w_opd);
	int rc = ALIGN_OK;
	for (int64_t t = 0; t < T && rc == ALIGN_OK; t++) {
		for (int64_t j = 0; j < D; j++)
			xq[j] = matmul_operand(ops_ld(&in[0], t * D + j), c.x_opd);
		for (int64_t e = 0; e < E; e++)
			l[e] = matmul_dot(xq, wq + e * D, D, ALIGN_MATMUL_ACCUM_SEQ, 0);
		scores(&c, l, s);
		rc = route_token(&c, in, t, s, b, taken, (int32_t *)out[0].data + t * K, (float *)out[1].data + t * K);
	}
	free(buf);
	return rc;
}

static void params_default(void *params, const struct align_dims *d)
{
	struct router_params *p = params;
	p->score = ROUTER_SCORE_SQRTSOFTPLUS;
	p->route_scale = 1.5f;
	p->n_groups = 0;
	p->topk_groups = 0;
	p->hash = 0;
}

/* 0 DSv4 sqrtsoftplus; 1 V3.2 sigmoid with 8 groups keep 4; 2 hash layer; 3 softmax */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct router_params *p = params;
	params_default(params, d);
	if (k == 1) {
		p->score = ROUTER_SCORE_SIGMOID;
		p->route_scale = 2.5f;
		p->n_groups = 8;
		p->topk_groups = 4;
	} else if (k == 2) {
		p->hash = 1;
	} else if (k == 3) {
		p->score = ROUTER_SCORE_SOFTMAX;
		p->route_scale = 1.0f;
	}
	return k >= 0 && k <= 3;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return router_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[5], out[2];
	struct router_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&router_impl, m, d, in, out, err));
	return router_cfg_init(&c, params, m, in, 5, out, 2, device, err);
}

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "ffn_norm output"},
	{"w", ALIGN_DT_F32, "E,D", {ALIGN_FILL_SPECIAL, 0.03f, 0.5f, 0}, "gate weight (fp32 master)"},
	{"bias", ALIGN_DT_F32, "E", {ALIGN_FILL_SPECIAL, -0.01f, 0.0f, 0}, "expert selection bias"},
	{"ids", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 1024.0f, 'V'}, "token ids (hash layers)"},
	{"tid2eid", ALIGN_DT_I32, "V,K", {ALIGN_FILL_EXPERT_IDS, 0, 256.0f, 'E'}, "hash routing table"},
};
static const struct align_tensor_spec out_specs[] = {
	{"idx", ALIGN_DT_I32, "T,K", {ALIGN_FILL_NORMAL, 0, 0, 0}, "selected experts"},
	{"wt", ALIGN_DT_F32, "T,K", {ALIGN_FILL_NORMAL, 0, 0, 0}, "routing weights"},
};
static const int modes_read[] = {MODE_MATH_IMPL,	 MODE_ROUTER_GEMM,	 MODE_ROUTER_SQRTSOFTPLUS_EPS,
				 MODE_ROUTER_NORM_EPS,	 MODE_ROUTER_SUM,	 MODE_ROUTER_TOPK_ORDER,
				 MODE_ROUTER_GROUP_MASK, MODE_ROUTER_HASH_TABLE, -1};

const struct align_op_impl router_impl = {
	5,
	in_specs,
	2,
	out_specs,
	"T=16,D=4096,E=256,K=6,V=1024",
	modes_read,
	sizeof(struct router_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
