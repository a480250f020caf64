/* sparse_mla_bwd.c: CPU twin of the sparse MLA attention backward (contract in sparse_mla_bwd.h) and its
 * configuration, which the CUDA twin (sparse_mla_bwd.cu) calls too. */
#include "sparse_mla_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"q", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 1.0f, 8.0f, 0}, "absorbed queries (forward input)"},
	{"kv", ALIGN_DT_BF16, "S,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "kv cache rows (forward input)"},
	{"idx", ALIGN_DT_I32, "T,N", {ALIGN_FILL_KV_IDX, 0, 96.0f, 'S'}, "selected kv rows per query, -1 invalid"},
	{"do", ALIGN_DT_BF16, "T,H,F", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "gradient of o"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dq", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of q"},
	{"dkv", ALIGN_DT_F32, "S,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of kv (fp32, fixed scatter order)"},
};

int sparse_mla_bwd_cfg_init(struct sparse_mla_bwd_cfg *c, const struct sparse_mla_params *p,
			    const struct align_modes *m, const struct align_tensor *in, int n_in,
			    const struct align_tensor *out, int n_out, int device, struct align_err *err)
{
	const char *op = "sparse_mla_bwd", *fn = "sparse_mla_bwd_cfg_init";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 4, 2));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, "q", &in[0], 3));
	ALIGN_TRY(err, op_cfg_rank(err, op, "kv", &in[1], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "do", &in[3], 3));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], S = in[1].shape[0], F = in[3].shape[2];
	int64_t qs[3] = {T, H, D}, os[3] = {T, H, F}, ks[2] = {S, D};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "do", &in[3], ALIGN_DT_BF16, 3, os));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dq", &out[0], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dkv", &out[1], ALIGN_DT_F32, 2, ks));
	/* the forward's checks and switches, against a descriptor of its output o (= do's shape, bf16) */
	struct align_tensor o = in[3];
	o.data = NULL;
	ALIGN_TRY(err, sparse_mla_cfg_init(&c->f, p, m, in, 3, &o, 1, device, err));
	c->scale = p->scale;
	return op_cfg_flag(err, op, fn, m, MODE_CSA_BWD_DELTA, ALIGN_CSA_BWD_DELTA_P, ALIGN_CSA_BWD_DELTA_O,
			   &c->delta_o);
}

int sparse_mla_bwd_fwd_cpu(const struct sparse_mla_params *p, const struct align_modes *m,
			   const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct sparse_mla_bwd_cfg b;
	ALIGN_TRY(NULL, sparse_mla_bwd_cfg_init(&b, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "sparse_mla_bwd", in, n_in, out, n_out));
	const struct sparse_mla_cfg *c = &b.f;
	const int64_t D = c->D, F = c->F, S = c->S, N = c->N, rows = c->T * c->H;
	/* dS, P, list [rows, N], the rows' slot counts, O [rows, F] (delta_o) */
	float *dS = malloc(sizeof(float) * (size_t)(2 * rows * N + 1));
	int32_t *list = malloc(sizeof(int32_t) * (size_t)(rows * N + 1));
	int64_t *cnt = malloc(sizeof(int64_t) * (size_t)(rows + 1));
	align_bf16 *o = malloc(sizeof(align_bf16) * (size_t)(b.delta_o ? rows * F + 1 : 1));
	int rc = !dS || !list || !cnt || !o ? align_fail(NULL, ALIGN_ERR_INTERNAL, "sparse_mla_bwd: out of memory")
					    : ALIGN_OK;
	if (rc == ALIGN_OK && b.delta_o) {
		struct align_tensor ot = in[3];
		ot.data = o;
		rc = sparse_mla_fwd_cpu(p, m, in, 3, &ot, 1); /* O as the forward stores it */
	}
	if (rc != ALIGN_OK) {
		free(dS);
		free(list);
		free(cnt);
		free(o);
		return rc;
	}
	float *P = dS + rows * N;
	const align_bf16 *q = in[0].data, *kv = in[1].data, *dO = in[3].data;
	const int32_t *idx = in[2].data;
	for (int64_t r = 0; r < rows; r++)
		cnt[r] = smb_row(&b, q + r * D, kv, idx + (r / c->H) * N, o + (b.delta_o ? r * F : 0), dO + r * F,
				 (align_bf16 *)out[0].data + r * D, list + r * N, dS + r * N, P + r * N);
	/* smb_dkv's order as a scatter: (r, k) ascending adds into row j = list[r, k] (each dkv element sees its
	 * terms in the order of smb_dkv's scan, which the CUDA twin runs) */
	float *dkv = out[1].data;
	for (int64_t i = 0; i < S * D; i++)
		dkv[i] = 0.0f;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t k = 0; k < cnt[r]; k++) {
			int32_t j = list[r * N + k];
			if (!sa_valid(&c->sa, j))
				continue;
			const float ds = dS[r * N + k], pk = P[r * N + k];
			for (int64_t d = 0; d < D; d++) {
				float acc =
					hn_add(dkv[(int64_t)j * D + d], hn_mul(ds, align_bf16_to_f32(q[r * D + d])));
				if (d < F)
					acc = hn_add(acc, hn_mul(pk, align_bf16_to_f32(dO[r * F + d])));
				dkv[(int64_t)j * D + d] = acc;
			}
		}
	free(dS);
	free(list);
	free(cnt);
	free(o);
	return ALIGN_OK;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return sparse_mla_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[2];
	struct sparse_mla_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&sparse_mla_bwd_impl, m, d, in, out, err));
	return sparse_mla_bwd_cfg_init(&c, params, m, in, 4, out, 2, device, err);
}

/* the forward's parameters and variants (scale) */
static void params_default(void *params, const struct align_dims *d)
{
	sparse_mla_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return sparse_mla_impl.params_variant(params, d, k);
}

/* DSA_MLA_EMPTY_ROW, CSA_BWD_SOFTMAX and CSA_BWD_P are not read (sparse_mla_bwd.h says why) */
static const int modes_read[] = {MODE_MATH_IMPL,   MODE_DSA_MLA_QK,    MODE_DSA_MLA_SOFTMAX, MODE_DSA_MLA_P,
				 MODE_DSA_MLA_EXP, MODE_DSA_MLA_SLOTS, MODE_CSA_BWD_DELTA,   -1};

/* N = 80 > 64: two online64 blocks in gather rows */
const struct align_op_impl sparse_mla_bwd_impl = {
	4,
	in_specs,
	2,
	out_specs,
	"T=8,H=4,D=48,F=32,S=96,N=80",
	modes_read,
	sizeof(struct sparse_mla_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
