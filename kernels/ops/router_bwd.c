/* router_bwd.c: CPU twin of the router backward (contract in router_bwd.h). */
#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

#include "router_bwd.h" /* after ops.h: its shared code calls ops_math_* */

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "ffn_norm output (forward input)"},
	{"w", ALIGN_DT_F32, "E,D", {ALIGN_FILL_SPECIAL, 0.03f, 0.5f, 0}, "gate weight (fp32 master)"},
	{"bias", ALIGN_DT_F32, "E", {ALIGN_FILL_SPECIAL, -0.01f, 0.0f, 0}, "expert selection bias"},
	{"ids", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 1024.0f, 'V'}, "token ids (hash layers)"},
	{"tid2eid", ALIGN_DT_I32, "V,K", {ALIGN_FILL_EXPERT_IDS, 0, 256.0f, 'E'}, "hash routing table"},
	{"dwt", ALIGN_DT_F32, "T,K", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of the routing weights"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dl", ALIGN_DT_F32, "T,E", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the gate logits"},
	{"dx", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the router input"},
	{"dw", ALIGN_DT_F32, "E,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the gate weight"},
};

int router_bwd_cfg_init(struct router_bwd_cfg *c, const struct router_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err)
{
	const char *op = "router_bwd", *fn = "router_bwd_cfg_init";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 6, 3));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "router_bwd: no params");
	ALIGN_TRY(err, op_cfg_rank(err, op, "x", &in[0], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "w", &in[1], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "tid2eid", &in[4], 2));
	int64_t T = in[0].shape[0], D = in[0].shape[1], E = in[1].shape[0], K = in[4].shape[1];
	struct align_tensor fo[2] = {{NULL, ALIGN_DT_I32, 2, {T, K}, "idx"}, {NULL, ALIGN_DT_F32, 2, {T, K}, "wt"}};
	ALIGN_TRY(err, router_cfg_init(&c->r, p, m, in, 5, fo, 2, device, err));
	if (E > ROUTER_BWD_MAX_E)
		return align_fail(err, ALIGN_ERR_INPUT, "router_bwd: E = %lld experts, at most %d", (long long)E,
				  ROUTER_BWD_MAX_E);
	int64_t ks[2] = {T, K}, ls[2] = {T, E}, xs[2] = {T, D}, ws[2] = {E, D};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dwt", &in[5], ALIGN_DT_F32, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dl", &out[0], ALIGN_DT_F32, 2, ls));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dx", &out[1], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dw", &out[2], ALIGN_DT_F32, 2, ws));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_ROUTER_BWD_NORM, ALIGN_ROUTER_BWD_NORM_AUTOGRAD,
				   ALIGN_ROUTER_BWD_NORM_FUSED, &c->fused));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_ROUTER_BWD_SP, ALIGN_ROUTER_BWD_SP_TORCH,
				   ALIGN_ROUTER_BWD_SP_SIGMOID, &c->sp_sigmoid));
	int v = m->v[MODE_ROUTER_BWD_WGRAD];
	switch ((enum align_ROUTER_BWD_WGRAD_value)v) {
	case ALIGN_ROUTER_BWD_WGRAD_SEQ:
		c->wsum = RB_WSUM_SEQ;
		break;
	case ALIGN_ROUTER_BWD_WGRAD_PAIRWISE:
		c->wsum = RB_WSUM_PAIRWISE;
		break;
	case ALIGN_ROUTER_BWD_WGRAD_WARP32:
		c->wsum = RB_WSUM_WARP32;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_ROUTER_BWD_WGRAD, v, fn);
	}
	return ALIGN_OK;
}

int router_bwd_fwd_cpu(const struct router_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out)
{
	struct router_bwd_cfg b;
	ALIGN_TRY(NULL, router_bwd_cfg_init(&b, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "router_bwd", in, n_in, out, n_out));
	const struct router_cfg *c = &b.r;
	const int64_t T = c->T, D = c->D, E = c->E, K = c->K;
	size_t nf = (size_t)E * D + (size_t)T * D + 2 * (size_t)E + 2 * (size_t)K + 2 * (size_t)T * K + 1;
	float *buf = malloc(nf * sizeof(float));
	if (!buf)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "router_bwd: out of memory");
	float *wq = buf, *xq = wq + E * D, *l = xq + T * D, *s = l + E, *tmp = s + E, *wt = tmp + 2 * K;
	int32_t *idx = (int32_t *)(wt + T * K);
	/* the forward's selection, by the forward twin itself */
	struct align_tensor fo[2] = {{idx, ALIGN_DT_I32, 2, {T, K}, "idx"}, {wt, ALIGN_DT_F32, 2, {T, K}, "wt"}};
	int rc = router_fwd_cpu(p, m, in, 5, fo, 2);
	if (rc) {
		free(buf);
		return rc;
	}
	const float *w = in[1].data, *dwt = in[5].data;
	float *dl = out[0].data, *dw = out[2].data;
	for (int64_t i = 0; i < E * D; i++)
		wq[i] = matmul_operand(w[i], c->w_opd);
	for (int64_t i = 0; i < T * D; i++)
		xq[i] = matmul_operand(ops_ld(&in[0], i), c->x_opd);
	for (int64_t t = 0; t < T; t++) {
		for (int64_t e = 0; e < E; e++)
			l[e] = matmul_dot(xq + t * D, wq + e * D, D, ALIGN_MATMUL_ACCUM_SEQ, 0);
		rb_scores(c, l, s);
		rb_token(&b, l, s, idx + t * K, dwt + t * K, dl + t * E, tmp);
	}
	for (int64_t t = 0; t < T; t++)
		for (int64_t d = 0; d < D; d++)
			ops_st(&out[1], t * D + d, rb_dx(dl, wq, E, D, t, d));
	for (int64_t e = 0; e < E; e++)
		for (int64_t d = 0; d < D; d++)
			dw[e * D + d] = rb_wsum(b.wsum, dl, xq, T, E, D, e, d);
	free(buf);
	return ALIGN_OK;
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

/* as router: 0 DSv4 sqrtsoftplus; 1 V3.2 sigmoid with 8 groups keep 4; 2 hash layer; 3 softmax */
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
	return router_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[6], out[3];
	struct router_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&router_bwd_impl, m, d, in, out, err));
	return router_bwd_cfg_init(&c, params, m, in, 6, out, 3, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL,	 MODE_ROUTER_GEMM,	 MODE_ROUTER_SQRTSOFTPLUS_EPS,
				 MODE_ROUTER_NORM_EPS,	 MODE_ROUTER_SUM,	 MODE_ROUTER_TOPK_ORDER,
				 MODE_ROUTER_GROUP_MASK, MODE_ROUTER_HASH_TABLE, MODE_ROUTER_BWD_NORM,
				 MODE_ROUTER_BWD_SP,	 MODE_ROUTER_BWD_WGRAD,	 -1};

const struct align_op_impl router_bwd_impl = {
	6,
	in_specs,
	3,
	out_specs,
	"T=16,D=256,E=256,K=6,V=1024",
	modes_read,
	sizeof(struct router_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
