/* indexer_bwd.c: CPU twin of the lightning indexer's score backward (contract in indexer_bwd.h). */
#include "indexer_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "indexer queries (the forward's)"},
	{"k", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "indexer compressed keys"},
	{"w", ALIGN_DT_BF16, "T,H", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "head weights (unscaled)"},
	{"dscore", ALIGN_DT_F32, "T,S", {ALIGN_FILL_SPECIAL, 0.1f, 4.0f, 0}, "gradient of the index scores"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dq", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of q"},
	{"dk", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of k"},
	{"dw", ALIGN_DT_BF16, "T,H", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of w"},
};

/* indexer's config with dscore standing for its score output and a [T,1] idx placeholder */
int indexer_bwd_cfg_init(struct indexer_cfg *c, const struct indexer_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err)
{
	const char *op = "indexer_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 4, 3));
	ALIGN_TRY(err, op_cfg_rank(err, op, "q", &in[0], 3));
	ALIGN_TRY(err, op_cfg_rank(err, op, "k", &in[1], 2));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], S = in[1].shape[0];
	int64_t qs[3] = {T, H, D}, ks[2] = {S, D}, ws[2] = {T, H}, ss[2] = {T, S};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dscore", &in[3], ALIGN_DT_F32, 2, ss));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dq", &out[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dk", &out[1], ALIGN_DT_BF16, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dw", &out[2], ALIGN_DT_BF16, 2, ws));
	struct align_tensor fo[2] = {in[3], in[3]};
	fo[0].dtype = ALIGN_DT_I32;
	fo[0].shape[1] = 1;
	fo[0].data = fo[1].data = NULL;
	return indexer_cfg_init(c, p, m, in, 3, fo, 2, device, err);
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	struct indexer_cfg c;
	ALIGN_TRY(NULL, indexer_bwd_cfg_init(&c, params, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "indexer_bwd", in, n_in, out, n_out));
	const align_bf16 *q = in[0].data, *k = in[1].data, *w = in[2].data;
	const float *ds = in[3].data;
	int64_t T = c.T, H = c.H, D = c.D, S = c.S, n = T * H * S;
	float *ddot = malloc((size_t)(n > 0 ? n : 1) * sizeof *ddot);
	if (!ddot)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "indexer_bwd: out of memory");
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			float wb = indexer_weight(&c, w[t * H + h]), acc = 0.0f;
			for (int64_t e = 0; e < S; e++) {
				float dd = 0.0f, term = 0.0f;
				if (indexer_bwd_visible(&c, t, e)) {
					indexer_bwd_terms(&c, indexer_bwd_dot(&c, q + t * H * D, k + e * D, h),
							  ds[t * S + e], wb, &dd, &term);
					acc = hn_add(acc, term);
				}
				ddot[(t * H + h) * S + e] = dd;
			}
			ops_st(&out[2], t * H + h, indexer_bwd_dw(&c, align_round_bf16(acc)));
		}
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++)
			for (int64_t d = 0; d < D; d++) {
				float acc = 0.0f;
				for (int64_t e = 0; e < S; e++)
					if (indexer_bwd_visible(&c, t, e))
						acc = hn_add(acc, hn_mul(ddot[(t * H + h) * S + e],
									 align_bf16_to_f32(k[e * D + d])));
				ops_st(&out[0], (t * H + h) * D + d, acc);
			}
	for (int64_t e = 0; e < S; e++)
		for (int64_t d = 0; d < D; d++) {
			float acc = 0.0f;
			for (int64_t t = 0; t < T; t++)
				if (indexer_bwd_visible(&c, t, e))
					for (int64_t h = 0; h < H; h++)
						acc = hn_add(acc, hn_mul(ddot[(t * H + h) * S + e],
									 align_bf16_to_f32(q[(t * H + h) * D + d])));
			ops_st(&out[1], e * D + d, acc);
		}
	free(ddot);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	indexer_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return indexer_impl.params_variant(params, d, k);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[3];
	struct indexer_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&indexer_bwd_impl, m, d, in, out, err));
	return indexer_bwd_cfg_init(&c, params, m, in, 4, out, 3, device, err);
}

static const int modes_read[] = {MODE_INDEXER_SCORE, MODE_INDEXER_WEIGHT_SCALE, -1};

const struct align_op_impl indexer_bwd_impl = {
	4,
	in_specs,
	3,
	out_specs,
	"T=32,H=8,D=32,S=8",
	modes_read,
	sizeof(struct indexer_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
