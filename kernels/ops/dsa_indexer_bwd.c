/* dsa_indexer_bwd.c: CPU twin of the DSA indexer's score backward (contract in dsa_indexer_bwd.h). */
#include "dsa_indexer_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "indexer queries (before the rotation)"},
	{"k", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "indexer keys (before the rotation)"},
	{"w", ALIGN_DT_BF16, "T,H", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "head weights (unscaled)"},
	{"dscore", ALIGN_DT_F32, "T,S", {ALIGN_FILL_SPECIAL, 0.1f, 4.0f, 0}, "gradient of the index scores"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dq", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of q"},
	{"dk", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of k"},
	{"dw", ALIGN_DT_BF16, "T,H", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of w"},
};

int dsa_indexer_bwd_cfg_init(struct dsa_indexer_cfg *c, const struct dsa_indexer_params *p, const struct align_modes *m,
			     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			     int device, struct align_err *err)
{
	const char *op = "dsa_indexer_bwd";
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
	struct align_modes mm = *m; /* the fp32 score form whatever DSA_INDEXER_SCORE says (not read) */
	mm.v[MODE_DSA_INDEXER_SCORE] = ALIGN_DSA_INDEXER_SCORE_FP32;
	return dsa_indexer_cfg_init(c, p, &mm, in, 3, fo, 2, device, err);
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	struct dsa_indexer_cfg c;
	ALIGN_TRY(NULL, dsa_indexer_bwd_cfg_init(&c, params, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "dsa_indexer_bwd", in, n_in, out, n_out));
	const align_bf16 *q = in[0].data, *k = in[1].data, *w = in[2].data;
	const float *ds = in[3].data;
	int64_t T = c.T, H = c.H, D = c.D, S = c.S;
	align_bf16 *rq = malloc((size_t)(T * H * D + S * D + 1) * sizeof *rq);
	float *ddot = malloc((size_t)(T * H * S + 1) * sizeof *ddot), *g = malloc((size_t)(3 * D + 1) * sizeof *g);
	if (!rq || !ddot || !g) {
		free(rq), free(ddot), free(g);
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "dsa_indexer_bwd: out of memory");
	}
	align_bf16 *rk = rq + T * H * D;
	for (int64_t i = 0; i < T * H; i++)
		dsa_indexer_prep_row(&c, q + i * D, rq + i * D, g);
	for (int64_t j = 0; j < S; j++)
		dsa_indexer_prep_row(&c, k + j * D, rk + j * D, g);
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			float wb = dsa_indexer_weight(&c, w[t * H + h], 1.0f), acc = 0.0f;
			for (int64_t j = 0; j < S; j++) {
				float dd = 0.0f, term = 0.0f;
				if (dsa_indexer_bwd_visible(&c, t, j)) {
					indexer_bwd_terms(&c.ix, indexer_bwd_dot(&c.ix, rq + t * H * D, rk + j * D, h),
							  ds[t * S + j], wb, &dd, &term);
					acc = hn_add(acc, term);
				}
				ddot[(t * H + h) * S + j] = dd;
			}
			ops_st(&out[2], t * H + h, indexer_bwd_dw(&c.ix, align_round_bf16(acc)));
		}
	align_bf16 *dq = out[0].data, *dk = out[1].data;
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			for (int64_t d = 0; d < D; d++) {
				float a = 0.0f;
				for (int64_t j = 0; j < S; j++)
					if (dsa_indexer_bwd_visible(&c, t, j))
						a = hn_add(a, hn_mul(ddot[(t * H + h) * S + j],
								     align_bf16_to_f32(rk[j * D + d])));
				g[2 * D + d] = a;
			}
			dsa_indexer_bwd_rotate(&c, g + 2 * D, dq + (t * H + h) * D, g);
		}
	for (int64_t j = 0; j < S; j++) {
		for (int64_t d = 0; d < D; d++) {
			float a = 0.0f;
			for (int64_t t = 0; t < T; t++)
				if (dsa_indexer_bwd_visible(&c, t, j))
					for (int64_t h = 0; h < H; h++)
						a = hn_add(a, hn_mul(ddot[(t * H + h) * S + j],
								     align_bf16_to_f32(rq[(t * H + h) * D + d])));
			g[2 * D + d] = a;
		}
		dsa_indexer_bwd_rotate(&c, g + 2 * D, dk + j * D, g);
	}
	free(rq), free(ddot), free(g);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	dsa_indexer_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return dsa_indexer_impl.params_variant(params, d, k);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[3];
	struct dsa_indexer_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&dsa_indexer_bwd_impl, m, d, in, out, err));
	return dsa_indexer_bwd_cfg_init(&c, params, m, in, 4, out, 3, device, err);
}

static const int modes_read[] = {MODE_DSA_HADAMARD, -1};

const struct align_op_impl dsa_indexer_bwd_impl = {
	4,
	in_specs,
	3,
	out_specs,
	"T=16,H=8,D=32,S=16",
	modes_read,
	sizeof(struct dsa_indexer_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
