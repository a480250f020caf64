/* moe_combine.c: CPU twin of the MoE combine (contract in moe_combine.h). */
#include "moe_combine.h"

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"eo", ALIGN_DT_BF16, "T,K,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "expert outputs per top-k slot"},
	{"idx", ALIGN_DT_I32, "T,K", {ALIGN_FILL_EXPERT_IDS, 0, 256.0f, 'E'}, "expert id of each slot (distinct)"},
	{"w", ALIGN_DT_F32, "T,K", {ALIGN_FILL_POSITIVE, 1.0f, 0, 0}, "routing weights"},
	{"shared", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "shared expert output"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "combined MoE output"},
};

/* the MOE_COMBINE_* and SWIGLU_PROBS switches (every value runs on both twins) */
static int moe_combine_cfg_modes(struct moe_combine_cfg *c, const struct align_modes *m, struct align_err *err)
{
	const char *fn = "moe_combine_cfg_init";
	ALIGN_TRY(err, op_cfg_flag(err, "moe_combine", fn, m, MODE_MOE_COMBINE_ACC, ALIGN_MOE_COMBINE_ACC_FP32,
				   ALIGN_MOE_COMBINE_ACC_BF16, &c->bf16));
	ALIGN_TRY(err, op_cfg_flag(err, "moe_combine", fn, m, MODE_MOE_COMBINE_ORDER, ALIGN_MOE_COMBINE_ORDER_SLOT,
				   ALIGN_MOE_COMBINE_ORDER_EXPERT, &c->by_expert));
	ALIGN_TRY(err, op_cfg_flag(err, "moe_combine", fn, m, MODE_SWIGLU_PROBS, ALIGN_SWIGLU_PROBS_BEFORE_W2,
				   ALIGN_SWIGLU_PROBS_AFTER_W2, &c->after));
	return ALIGN_OK;
}

int moe_combine_cfg_init(struct moe_combine_cfg *c, const struct moe_combine_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err)
{
	const char *op = "moe_combine";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 4, 1));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[0].name, &in[0], 3));
	int64_t T = in[0].shape[0], K = in[0].shape[1], D = in[0].shape[2];
	int64_t es[3] = {T, K, D}, ks[2] = {T, K}, ys[2] = {T, D};
	if (K > MOE_MAX_K)
		return align_fail(err, ALIGN_ERR_INPUT, "moe_combine: input 'eo' has K = %lld slots, at most %d",
				  (long long)K, MOE_MAX_K);
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 3, es));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[1].name, &in[1], ALIGN_DT_I32, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[2].name, &in[2], ALIGN_DT_F32, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[3].name, &in[3], ALIGN_DT_BF16, 2, ys));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 2, ys));
	ALIGN_TRY(err, moe_combine_cfg_modes(c, m, err));
	c->T = T;
	c->K = K;
	c->D = D;
	return ALIGN_OK;
}

int moe_combine_fwd_cpu(const struct moe_combine_params *p, const struct align_modes *m, const struct align_tensor *in,
			int n_in, struct align_tensor *out, int n_out)
{
	struct moe_combine_cfg c;
	ALIGN_TRY(NULL, moe_combine_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "moe_combine", in, n_in, out, n_out));
	const int64_t T = c.T, K = c.K, D = c.D;
	const int32_t *idx = in[1].data;
	const float *w = in[2].data;
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
		for (int64_t d = 0; d < D; d++) {
			float acc = 0.0f;
			for (int s = 0; s < K; s++) {
				int64_t slot = t * K + order[s];
				float e = ops_ld(&in[0], slot * D + d);
				if (c.after)
					e = e * w[slot];
				acc = c.bf16 ? align_round_bf16(acc + e) : acc + e;
			}
			ops_st(&out[0], t * D + d, acc + ops_ld(&in[3], t * D + d));
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
	return moe_combine_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[1];
	struct moe_combine_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&moe_combine_impl, m, d, in, out, err));
	return moe_combine_cfg_init(&c, params, m, in, 4, out, 1, device, err);
}

static const int modes_read[] = {MODE_MOE_COMBINE_ACC, MODE_MOE_COMBINE_ORDER, MODE_SWIGLU_PROBS, -1};

const struct align_op_impl moe_combine_impl = {
	4,
	in_specs,
	1,
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
