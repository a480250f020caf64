/* moe_combine.c: CPU twin of the MoE combine (contract in moe_combine.h). */
#include "moe_combine.h"

#include "ops.h"

#define MOE_MAX_K 64

int moe_combine_fwd_cpu(const struct moe_combine_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	if (n_in != 4 || n_out != 1 || in[0].ndim != 3)
		return ALIGN_ERR_INPUT;
	int64_t T = in[0].shape[0], K = in[0].shape[1], D = in[0].shape[2];
	int64_t es[3] = {T, K, D}, ks[2] = {T, K}, ys[2] = {T, D};
	if (K > MOE_MAX_K || ops_check(&in[0], ALIGN_DT_BF16, 3, es) || ops_check(&in[1], ALIGN_DT_I32, 2, ks) ||
	    ops_check(&in[2], ALIGN_DT_F32, 2, ks) || ops_check(&in[3], ALIGN_DT_BF16, 2, ys) ||
	    ops_check(&out[0], ALIGN_DT_BF16, 2, ys))
		return ALIGN_ERR_INPUT;
	const int32_t *idx = in[1].data;
	const float *w = in[2].data;
	int bf16 = m->v[MODE_MOE_COMBINE_ACC] == ALIGN_MOE_COMBINE_ACC_BF16, by_expert = m->v[MODE_MOE_COMBINE_ORDER] == ALIGN_MOE_COMBINE_ORDER_EXPERT;
	int after = m->v[MODE_SWIGLU_PROBS] == ALIGN_SWIGLU_PROBS_AFTER_W2;
	for (int64_t t = 0; t < T; t++) {
		int order[MOE_MAX_K];
		for (int s = 0; s < K; s++)
			order[s] = s;
		if (by_expert) /* insertion sort by expert id; equal ids keep slot order */
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
				float c = ops_ld(&in[0], slot * D + d);
				if (after)
					c = c * w[slot];
				acc = bf16 ? align_round_bf16(acc + c) : acc + c;
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

static const struct align_tensor_spec in_specs[] = {
	{"eo", ALIGN_DT_BF16, "T,K,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f}, "expert outputs per top-k slot"},
	{"idx", ALIGN_DT_I32, "T,K", {ALIGN_FILL_EXPERT_IDS, 0, 256.0f}, "expert id of each slot (distinct)"},
	{"w", ALIGN_DT_F32, "T,K", {ALIGN_FILL_POSITIVE, 1.0f, 0}, "routing weights"},
	{"shared", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 1.0f, 0}, "shared expert output"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0}, "combined MoE output"},
};
static const int modes_read[] = {MODE_MOE_COMBINE_ACC, MODE_MOE_COMBINE_ORDER, MODE_SWIGLU_PROBS, -1};

const struct align_op_impl moe_combine_impl = {
	4, in_specs, 1, out_specs, "T=16,K=6,D=1024,E=256", modes_read, sizeof(struct moe_combine_params),
	params_default, params_variant, fwd, NULL, NULL,
};
