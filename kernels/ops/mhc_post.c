/* mhc_post.c: CPU twin of mHC hc_post (contract in mhc_post.h). */
#include "mhc_post.h"

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "residual streams"},
	{"f", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "sublayer output"},
	{"post", ALIGN_DT_F32, "T,N", {ALIGN_FILL_POSITIVE, 2.0f, 0, 0}, "H_post"},
	{"comb", ALIGN_DT_F32, "T,N,N", {ALIGN_FILL_POSITIVE, 0.5f, 0, 0}, "H_res, rows = source stream"},
};
static const struct align_tensor_spec out_specs[] = {
	{"x_new", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "updated residual streams"},
};

/* the MHC_* switches hc_post reads (every value runs on both twins) */
static int mhc_post_cfg_modes(struct mhc_post_cfg *c, const struct align_modes *m, struct align_err *err)
{
	const char *fn = "mhc_post_cfg_init";
	int coef_bf16 = 0;
	ALIGN_TRY(err, op_cfg_flag(err, "mhc_post", fn, m, MODE_MHC_HRES_TRANSPOSE, ALIGN_MHC_HRES_TRANSPOSE_OFF,
				   ALIGN_MHC_HRES_TRANSPOSE_ON, &c->transpose));
	ALIGN_TRY(err, op_cfg_flag(err, "mhc_post", fn, m, MODE_MHC_POST_ROUND, ALIGN_MHC_POST_ROUND_SINGLE,
				   ALIGN_MHC_POST_ROUND_DOUBLE, &c->dbl));
	ALIGN_TRY(err, op_cfg_flag(err, "mhc_post", fn, m, MODE_MHC_COEF, ALIGN_MHC_COEF_FP32, ALIGN_MHC_COEF_BF16,
				   &coef_bf16));
	ALIGN_TRY(err, op_cfg_flag(err, "mhc_post", fn, m, MODE_MHC_POST_ORDER, ALIGN_MHC_POST_ORDER_COMB_FIRST,
				   ALIGN_MHC_POST_ORDER_POST_FIRST, &c->post_first));
	c->coef_bf16 = c->dbl || coef_bf16;
	return ALIGN_OK;
}

int mhc_post_cfg_init(struct mhc_post_cfg *c, const struct mhc_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err)
{
	const char *op = "mhc_post";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 4, 1));
	ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[0].name, &in[0], 3));
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2];
	int64_t xs[3] = {T, N, D}, fs[2] = {T, D}, ns[2] = {T, N}, cs[3] = {T, N, N};
	if (N > MHC_MAX_N)
		return align_fail(err, ALIGN_ERR_INPUT, "mhc_post: input 'x' has N = %lld streams, at most %d",
				  (long long)N, MHC_MAX_N);
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 3, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[1].name, &in[1], ALIGN_DT_BF16, 2, fs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[2].name, &in[2], ALIGN_DT_F32, 2, ns));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", in_specs[3].name, &in[3], ALIGN_DT_F32, 3, cs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 3, xs));
	ALIGN_TRY(err, mhc_post_cfg_modes(c, m, err));
	c->T = T;
	c->N = (int)N;
	c->D = D;
	return ALIGN_OK;
}

int mhc_post_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		     struct align_tensor *out, int n_out)
{
	struct mhc_post_cfg c;
	ALIGN_TRY(NULL, mhc_post_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "mhc_post", in, n_in, out, n_out));
	const int64_t T = c.T, N = c.N, D = c.D;
	const int transpose = c.transpose, dbl = c.dbl, coef_bf16 = c.coef_bf16, post_first = c.post_first;
	const float *post = in[2].data, *comb = in[3].data;
	for (int64_t t = 0; t < T; t++) {
		float H[MHC_MAX_N * MHC_MAX_N], P[MHC_MAX_N];
		for (int64_t j = 0; j < N; j++)
			for (int64_t k = 0; k < N; k++) {
				float h = transpose ? comb[t * N * N + j * N + k] : comb[t * N * N + k * N + j];
				H[j * N + k] = coef_bf16 ? align_round_bf16(h) : h; /* H[j][k]: source j -> dest k */
			}
		for (int64_t k = 0; k < N; k++)
			P[k] = coef_bf16 ? align_round_bf16(post[t * N + k]) : post[t * N + k];
		for (int64_t k = 0; k < N; k++)
			for (int64_t d = 0; d < D; d++) {
				float fo = ops_ld(&in[1], t * D + d), o;
				if (dbl || !post_first) {
					float a = H[k] * ops_ld(&in[0], (t * N) * D + d);
					for (int64_t j = 1; j < N; j++)
						a = a + H[j * N + k] * ops_ld(&in[0], (t * N + j) * D + d);
					o = dbl ? align_round_bf16(P[k] * fo) + align_round_bf16(a) : a + P[k] * fo;
				} else {
					o = P[k] * fo;
					for (int64_t j = 0; j < N; j++)
						o = o + H[j * N + k] * ops_ld(&in[0], (t * N + j) * D + d);
				}
				ops_st(&out[0], (t * N + k) * D + d, o);
			}
	}
	return ALIGN_OK;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mhc_post_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[1];
	struct mhc_post_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mhc_post_impl, m, d, in, out, err));
	return mhc_post_cfg_init(&c, params, m, in, 4, out, 1, device, err);
}

static const int modes_read[] = {MODE_MHC_HRES_TRANSPOSE, MODE_MHC_COEF, MODE_MHC_POST_ROUND, MODE_MHC_POST_ORDER, -1};

const struct align_op_impl mhc_post_impl = {
	4,
	in_specs,
	1,
	out_specs,
	"T=8,N=4,D=1024",
	modes_read,
	sizeof(struct mhc_params),
	mhc_params_default,
	mhc_params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
