/* moe_combine_bwd.c: CPU twin of the MoE combine backward and gradient fan-in (contract in moe_combine_bwd.h). */
#include "moe_combine_bwd.h"

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"eo",
	 ALIGN_DT_BF16,
	 "T,K,D",
	 {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0},
	 "expert outputs per top-k slot (forward input)"},
	{"idx", ALIGN_DT_I32, "T,K", {ALIGN_FILL_EXPERT_IDS, 0, 256.0f, 'E'}, "expert id of each slot (distinct)"},
	{"w", ALIGN_DT_F32, "T,K", {ALIGN_FILL_POSITIVE, 1.0f, 0, 0}, "routing weights (forward input)"},
	{"shared", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "shared expert output (forward input)"},
	{"dy", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of the combined output"},
	{"dxe", ALIGN_DT_BF16, "T,K,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "gradient of each slot's expert input"},
	{"dxs", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of the shared expert's input"},
};
static const struct align_tensor_spec out_specs[] = {
	{"d_eo", ALIGN_DT_BF16, "T,K,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the expert outputs"},
	{"d_w", ALIGN_DT_F32, "T,K", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the routing weights"},
	{"d_shared", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the shared expert output"},
	{"dx",
	 ALIGN_DT_BF16,
	 "T,D",
	 {ALIGN_FILL_NORMAL, 0, 0, 0},
	 "token gradient: fan-in of the experts' input gradients"},
};

static int moe_combine_bwd_cfg_modes(struct moe_combine_bwd_cfg *c, const struct align_modes *m, int device,
				     struct align_err *err)
{
	const char *fn = "moe_combine_bwd_cfg_init", *op = "moe_combine_bwd";
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_SWIGLU_PROBS, ALIGN_SWIGLU_PROBS_BEFORE_W2,
				   ALIGN_SWIGLU_PROBS_AFTER_W2, &c->after));
	ALIGN_TRY(err, op_cfg_flag(err, op, fn, m, MODE_MOE_COMBINE_ACC, ALIGN_MOE_COMBINE_ACC_FP32,
				   ALIGN_MOE_COMBINE_ACC_BF16, &c->bf16));
	int v = m->v[MODE_MOE_COMBINE_BWD_ORDER];
	c->by_expert = 0;
	c->atomic = 0;
	switch ((enum align_MOE_COMBINE_BWD_ORDER_value)v) {
	case ALIGN_MOE_COMBINE_BWD_ORDER_EXPERT:
		c->by_expert = 1;
		break;
	case ALIGN_MOE_COMBINE_BWD_ORDER_SLOT:
		break;
	case ALIGN_MOE_COMBINE_BWD_ORDER_ATOMIC: /* float atomics: the CUDA twin only, non-deterministic */
		if (device != ALIGN_DEVICE_CUDA)
			return align_fail(
				err, ALIGN_ERR_UNSUPPORTED,
				"%s: %s=atomic is GPU only and non-deterministic (float atomicAdd): the C twin "
				"has no such order; use expert or slot",
				op, modes_info(MODE_MOE_COMBINE_BWD_ORDER)->env);
		c->atomic = 1;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MOE_COMBINE_BWD_ORDER, v, fn);
	}
	return ALIGN_OK;
}

int moe_combine_bwd_cfg_init(struct moe_combine_bwd_cfg *c, const struct moe_combine_params *p,
			     const struct align_modes *m, const struct align_tensor *in, int n_in,
			     const struct align_tensor *out, int n_out, int device, struct align_err *err)
{
	const char *op = "moe_combine_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 7, 4));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[0].name, &in[0], 3));
	int64_t T = in[0].shape[0], K = in[0].shape[1], D = in[0].shape[2];
	int64_t es[3] = {T, K, D}, ks[2] = {T, K}, ys[2] = {T, D};
	if (K > MOE_MAX_K)
		return align_fail(err, ALIGN_ERR_INPUT, "moe_combine_bwd: input 'eo' has K = %lld slots, at most %d",
				  (long long)K, MOE_MAX_K);
	static const int dt_in[7] = {ALIGN_DT_BF16, ALIGN_DT_I32,  ALIGN_DT_F32, ALIGN_DT_BF16,
				     ALIGN_DT_BF16, ALIGN_DT_BF16, ALIGN_DT_BF16};
	const int64_t *sh_in[7] = {es, ks, ks, ys, ys, es, ys};
	const int nd_in[7] = {3, 2, 2, 2, 2, 3, 2};
	for (int i = 0; i < 7; i++)
		ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[i].name, &in[i], dt_in[i], nd_in[i], sh_in[i]));
	static const int dt_out[4] = {ALIGN_DT_BF16, ALIGN_DT_F32, ALIGN_DT_BF16, ALIGN_DT_BF16};
	const int64_t *sh_out[4] = {es, ks, ys, ys};
	const int nd_out[4] = {3, 2, 2, 2};
	for (int i = 0; i < 4; i++)
		ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[i].name, &out[i], dt_out[i], nd_out[i],
					     sh_out[i]));
	ALIGN_TRY(err, moe_combine_bwd_cfg_modes(c, m, device, err));
	c->T = T;
	c->K = K;
	c->D = D;
	return ALIGN_OK;
}

int moe_combine_bwd_fwd_cpu(const struct moe_combine_params *p, const struct align_modes *m,
			    const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct moe_combine_bwd_cfg c;
	ALIGN_TRY(NULL, moe_combine_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "moe_combine_bwd", in, n_in, out, n_out));
	const int64_t T = c.T, K = c.K, D = c.D;
	const int32_t *idx = in[1].data;
	const float *w = in[2].data;
	float *dw = out[1].data;
	for (int64_t t = 0; t < T; t++) {
		int order[MOE_MAX_K];
		for (int s = 0; s < K; s++)
			order[s] = s;
		if (c.by_expert) /* insertion sort by expert id; equal ids keep slot order */
			for (int s = 1; s < K; s++)
				for (int j = s; j > 0 && idx[t * K + order[j]] < idx[t * K + order[j - 1]]; j--) {
					int tmp = order[j];
					order[j] = order[j - 1];
					order[j - 1] = tmp;
				}
		for (int64_t s = 0; s < K; s++) {
			float acc = 0.0f;
			for (int64_t d = 0; d < D; d++) {
				float x = ops_ld(&in[4], t * D + d);
				int64_t i = (t * K + s) * D + d;
				ops_st(&out[0], i, c.after ? x * w[t * K + s] : x);
				if (c.after) {
					float term = x * ops_ld(&in[0], i);
					acc = d == 0 ? term : acc + term;
				}
			}
			dw[t * K + s] = c.after ? acc : 0.0f;
		}
		for (int64_t d = 0; d < D; d++) {
			float acc = 0.0f;
			for (int s = 0; s < K; s++) {
				float v = acc + ops_ld(&in[5], (t * K + order[s]) * D + d);
				acc = c.bf16 ? align_round_bf16(v) : v;
			}
			acc = acc + ops_ld(&in[6], t * D + d);
			ops_st(&out[2], t * D + d, ops_ld(&in[4], t * D + d));
			ops_st(&out[3], t * D + d, acc);
		}
	}
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct moe_combine_params *)params)->unused = 0;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return moe_combine_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[7], out[4];
	struct moe_combine_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&moe_combine_bwd_impl, m, d, in, out, err));
	return moe_combine_bwd_cfg_init(&c, params, m, in, 7, out, 4, device, err);
}

static const int modes_read[] = {MODE_SWIGLU_PROBS, MODE_MOE_COMBINE_ACC, MODE_MOE_COMBINE_BWD_ORDER, -1};

const struct align_op_impl moe_combine_bwd_impl = {
	7,
	in_specs,
	4,
	out_specs,
	"T=16,K=6,D=1024,E=256",
	modes_read,
	sizeof(struct moe_combine_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
