/* mtp.c: CPU twin of the MTP pre-layer (contract in mtp.h; order in mtp_pipe.h): the embedding, rmsnorm and
 * matmul C twins and mtp's element steps as plain loops. */
#include "mtp.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

#include "mtp_pipe.h"

static const struct align_tensor_spec in_specs[] = {
	{"ids", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 512.0f, 'V'}, "main model token ids (B sequences of S)"},
	{"pos", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 16.0f, 'S'}, "their RoPE positions"},
	{"table", ALIGN_DT_F32, "V,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "shared embedding table (fp32 master)"},
	{"h", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "main model final mHC streams"},
	{"norm", ALIGN_DT_F32, "2,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "enorm (row 0) and hnorm (row 1) weights"},
	{"proj",
	 ALIGN_DT_F32,
	 "2*D,D",
	 {ALIGN_FILL_SPECIAL, 0.0625f, 0.5f, 0},
	 "e_proj (rows 0..D-1), h_proj (D..2D-1)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"tok", ALIGN_DT_I32, "3,T", {ALIGN_FILL_NORMAL, 0, 0, 0}, "MTP ids, labels (-1 ignored), positions"},
	{"e", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "embedding of the MTP ids"},
	{"en", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "enorm(e)"},
	{"hn", ALIGN_DT_BF16, "T*N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "hnorm(h) per stream"},
	{"ep", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "e_proj(en)"},
	{"hp", ALIGN_DT_BF16, "T*N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "h_proj(hn)"},
	{"x", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "X0, the MTP layer's input streams"},
};

int mtp_cfg_init(struct mtp_cfg *c, const struct mtp_params *p, const struct align_modes *m,
		 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		 struct align_err *err)
{
	(void)device;
	ALIGN_TRY(err, op_cfg_counts(err, "mtp", m, in, n_in, out, n_out, 6, 7));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "mtp: no params");
	ALIGN_TRY(err, op_cfg_rank(err, "mtp", "ids", &in[0], 1));
	ALIGN_TRY(err, op_cfg_rank(err, "mtp", "table", &in[2], 2));
	ALIGN_TRY(err, op_cfg_rank(err, "mtp", "h", &in[3], 3));
	int64_t T = in[0].shape[0], V = in[2].shape[0], D = in[2].shape[1], N = in[3].shape[1], S = p->S;
	if (S < 1 || T % S)
		return align_fail(err, ALIGN_ERR_INPUT, "mtp: S = %lld tokens per sequence does not divide T = %lld",
				  (long long)S, (long long)T);
	int64_t t1[1] = {T}, tab[2] = {V, D}, h3[3] = {T, N, D}, n2[2] = {2, D}, p2[2] = {2 * D, D};
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "input", "ids", &in[0], ALIGN_DT_I32, 1, t1));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "input", "pos", &in[1], ALIGN_DT_I32, 1, t1));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "input", "table", &in[2], ALIGN_DT_F32, 2, tab));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "input", "h", &in[3], ALIGN_DT_BF16, 3, h3));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "input", "norm", &in[4], ALIGN_DT_F32, 2, n2));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "input", "proj", &in[5], ALIGN_DT_F32, 2, p2));
	int64_t tok[2] = {3, T}, td[2] = {T, D}, rd[2] = {T * N, D};
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "output", "tok", &out[0], ALIGN_DT_I32, 2, tok));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "output", "e", &out[1], ALIGN_DT_BF16, 2, td));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "output", "en", &out[2], ALIGN_DT_BF16, 2, td));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "output", "hn", &out[3], ALIGN_DT_BF16, 2, rd));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "output", "ep", &out[4], ALIGN_DT_BF16, 2, td));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "output", "hp", &out[5], ALIGN_DT_BF16, 2, rd));
	ALIGN_TRY(err, op_cfg_tensor(err, "mtp", "output", "x", &out[6], ALIGN_DT_BF16, 3, h3));
	int shift_pos = 0;
	ALIGN_TRY(err, op_cfg_flag(err, "mtp", "mtp_cfg_init", m, MODE_MTP_SHIFT, ALIGN_MTP_SHIFT_ROLL,
				   ALIGN_MTP_SHIFT_ROLL_POS, &shift_pos));
	int combine;
	switch ((enum align_MTP_COMBINE_value)m->v[MODE_MTP_COMBINE]) {
	case ALIGN_MTP_COMBINE_ADD:
		combine = MTP_ADD;
		break;
	case ALIGN_MTP_COMBINE_CONCAT_EH:
		combine = MTP_CONCAT_EH;
		break;
	case ALIGN_MTP_COMBINE_CONCAT_HE:
		combine = MTP_CONCAT_HE;
		break;
	default:
		return op_cfg_unhandled(err, "mtp", MODE_MTP_COMBINE, m->v[MODE_MTP_COMBINE], "mtp_cfg_init");
	}
	c->T = T, c->S = S, c->V = V, c->N = N, c->D = D;
	c->shift_pos = shift_pos;
	c->combine = combine;
	c->mm_dtype = m->v[MODE_MATMUL_OUT] == ALIGN_MATMUL_OUT_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
	return ALIGN_OK;
}

/* ---- the C backend of mtp_pipe ---- */

struct cpu_be {
	void *blk[16];
	int n;
};

static void *cpu_alloc(void *ctx, size_t bytes)
{
	struct cpu_be *b = ctx;
	if (b->n == 16)
		return NULL;
	void *p = calloc(1, bytes);
	if (p)
		b->blk[b->n++] = p;
	return p;
}

static int cpu_op(void *ctx, int op_id, const void *params, const struct align_modes *m, const struct align_tensor *in,
		  int n_in, struct align_tensor *out, int n_out)
{
	(void)ctx;
	return ops_at(op_id)->impl->fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cpu_kern(void *ctx, int kind, const struct mtp_kargs *a)
{
	(void)ctx;
	int64_t n = mtp_elems(kind, a);
	for (int64_t i = 0; i < n; i++)
		mtp_elem(kind, a, i);
	return ALIGN_OK;
}

int mtp_fwd_cpu(const struct mtp_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		struct align_tensor *out, int n_out)
{
	struct mtp_cfg c;
	ALIGN_TRY(NULL, mtp_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "mtp", in, n_in, out, n_out));
	struct cpu_be b;
	b.n = 0;
	struct mtp_be be = {&b, cpu_alloc, cpu_op, cpu_kern};
	int rc = mtp_pipe(&c, m, in, out, &be);
	for (int i = 0; i < b.n; i++)
		free(b.blk[i]);
	if (rc == ALIGN_ERR_INTERNAL && b.n == 16)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "mtp: out of memory");
	return rc;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct mtp_params *)params)->S = d && d->v[ALIGN_DIM_S] > 0 ? d->v[ALIGN_DIM_S] : 1;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mtp_fwd_cpu(params, m, in, n_in, out, n_out);
}

/* mtp's own config, then the sub-ops' (the values a device cannot run are refused before anything runs) */
static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[6], out[7];
	struct mtp_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mtp_impl, m, d, in, out, err));
	ALIGN_TRY(err, mtp_cfg_init(&c, params, m, in, 6, out, 7, device, err));
	struct rmsnorm_cfg rc;
	struct rmsnorm_params rp = {0};
	struct align_tensor ri[2] = {out[1], mtp_view(NULL, ALIGN_DT_F32, 1, c.D, 0, 0, "w")};
	ALIGN_TRY(err, rmsnorm_cfg_init(&rc, &rp, m, ri, 2, &out[2], 1, device, err));
	struct matmul_cfg mc;
	struct matmul_params mp = {0};
	struct align_tensor mi[2] = {mtp_view(NULL, ALIGN_DT_F32, 2, c.T, c.D, 0, "a"),
				     mtp_view(NULL, ALIGN_DT_F32, 2, c.D, c.D, 0, "b")};
	struct align_tensor mo = mtp_view(NULL, c.mm_dtype, 2, c.T, c.D, 0, "y");
	return matmul_cfg_init(&mc, &mp, m, mi, 2, &mo, 1, device, err);
}

static const int modes_read[] = {MODE_MTP_SHIFT,
				 MODE_MTP_COMBINE,
				 MODE_RMSNORM_WEIGHT,
				 MODE_RMSNORM_CAST,
				 MODE_RMSNORM_RSQRT,
				 MODE_RMSNORM_REDUCE,
				 MODE_RMSNORM_EPS,
				 MODE_MATMUL_OPERAND,
				 MODE_MATMUL_ACCUM,
				 MODE_MATMUL_FMA,
				 MODE_MATMUL_OUT,
				 MODE_MATMUL_IMPL,
				 -1};

const struct align_op_impl mtp_impl = {
	6,
	in_specs,
	7,
	out_specs,
	"T=32,S=16,V=512,N=4,D=256",
	modes_read,
	sizeof(struct mtp_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
