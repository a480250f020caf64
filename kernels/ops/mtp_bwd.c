/* mtp_bwd.c: CPU twin of the MTP pre-layer's backward (contract in mtp_bwd.h; order in mtp_bwd_pipe.h): the
 * forward's steps 1-3 and the backward ops through their C twins, mtp's and mtp_bwd's element steps as plain
 * loops; and the configuration both twins read. */
#include "mtp_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

#include "mtp_bwd_pipe.h"

static const struct align_tensor_spec in_specs[] = {
	{"ids", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 16.0f, 'V'}, "main model token ids (the forward's)"},
	{"table", ALIGN_DT_F32, "V,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "shared embedding table (fp32 master)"},
	{"h", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "main model final mHC streams"},
	{"norm", ALIGN_DT_F32, "2,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "enorm (row 0) and hnorm (row 1) weights"},
	{"proj",
	 ALIGN_DT_F32,
	 "2*D,D",
	 {ALIGN_FILL_SPECIAL, 0.0625f, 0.5f, 0},
	 "e_proj (rows 0..D-1), h_proj (D..2D-1)"},
	{"dx", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_SPECIAL, 0.01f, 0.1f, 0}, "gradient of X0"},
	{"main_grad",
	 ALIGN_DT_F32,
	 "2*D,D",
	 {ALIGN_FILL_NORMAL, 0.05f, 0, 0},
	 "the projections' gradient buffers (WGRAD_DTYPE; read by WGRAD_ACCUM=main_grad and add)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dtable", ALIGN_DT_F32, "V,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the table (EMBED_BWD_DTYPE)"},
	{"dh", ALIGN_DT_BF16, "T,N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of h"},
	{"dnorm", ALIGN_DT_F32, "2,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of norm (RMSNORM_BWD_DW_DTYPE)"},
	{"dproj", ALIGN_DT_F32, "2*D,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of proj (WGRAD_DTYPE)"},
};

static int tab_dtype(const struct align_modes *m)
{
	return m->v[MODE_EMBED_BWD_DTYPE] == ALIGN_EMBED_BWD_DTYPE_FP32 ? ALIGN_DT_F32 : ALIGN_DT_BF16;
}

static int dw_dtype(const struct align_modes *m)
{
	return m->v[MODE_RMSNORM_BWD_DW_DTYPE] == ALIGN_RMSNORM_BWD_DW_DTYPE_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
}

static int w_dtype(const struct align_modes *m)
{
	return m->v[MODE_WGRAD_DTYPE] == ALIGN_WGRAD_DTYPE_FP32 ? ALIGN_DT_F32 : ALIGN_DT_BF16;
}

/* the sub-ops' configurations on the shapes the pipe gives them (no data) */
static int sub_cfgs(const struct mtp_bwd_cfg *c, const struct mtp_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int device, struct align_err *err)
{
	const int64_t T = c->f.T, N = c->f.N, D = c->f.D;
	struct align_tensor fin[6], fout[7], ri[3], ro[2], mi[4], mo[2];
	struct mtp_cfg fc;
	mtpb_fwd_views(T, N, D, in, fin, fout, NULL, NULL, NULL, NULL);
	ALIGN_TRY(err, mtp_cfg_init(&fc, p, m, fin, 6, fout, 7, device, err));
	struct rmsnorm_cfg rfc;
	struct rmsnorm_params rfp = {0};
	struct rmsnorm_bwd_cfg rbc;
	struct rmsnorm_bwd_params rbp = {0};
	for (int k = 0; k < 2; k++) { /* e's T rows, the streams' T*N */
		int64_t rows = k ? T * N : T;
		mtpb_rms_views(c->dw_dtype, rows, D, NULL, NULL, NULL, NULL, NULL, ri, ro);
		ALIGN_TRY(err, rmsnorm_cfg_init(&rfc, &rfp, m, ri, 2, &ri[2], 1, device, err));
		ALIGN_TRY(err, rmsnorm_bwd_cfg_init(&rbc, &rbp, m, ri, 3, ro, 2, device, err));
	}
	struct matmul_bwd_cfg mc;
	struct matmul_bwd_params pe = {c->f.S}, ph = {c->f.S * N};
	if (c->f.combine == MTP_ADD) {
		mtpb_mm_views(c->w_dtype, T, D, D, NULL, NULL, NULL, NULL, NULL, NULL, mi, mo);
		ALIGN_TRY(err, matmul_bwd_cfg_init(&mc, &pe, &c->mm, mi, 4, mo, 2, device, err));
		mtpb_mm_views(c->w_dtype, T * N, D, D, NULL, NULL, NULL, NULL, NULL, NULL, mi, mo);
	} else {
		mtpb_mm_views(c->w_dtype, T * N, 2 * D, D, NULL, NULL, NULL, NULL, NULL, NULL, mi, mo);
	}
	ALIGN_TRY(err, matmul_bwd_cfg_init(&mc, &ph, &c->mm, mi, 4, mo, 2, device, err));
	struct embedding_bwd_cfg ec;
	struct embedding_params ep = {0.0f};
	struct align_tensor ei[3] = {mtp_view(NULL, ALIGN_DT_I32, 1, T, 0, 0, "ids"), in[1],
				     mtp_view(NULL, ALIGN_DT_BF16, 2, T, D, 0, "dy")};
	struct align_tensor eo = mtp_view(NULL, c->tab_dtype, 2, c->f.V, D, 0, "dtable");
	return embedding_bwd_cfg_init(&ec, &ep, m, ei, 3, &eo, 1, device, err);
}

int mtp_bwd_cfg_init(struct mtp_bwd_cfg *c, const struct mtp_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err)
{
	const char *op = "mtp_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 7, 4));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, "ids", &in[0], 1));
	ALIGN_TRY(err, op_cfg_rank(err, op, "table", &in[1], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "h", &in[2], 3));
	int64_t T = in[0].shape[0], V = in[1].shape[0], D = in[1].shape[1], N = in[2].shape[1];
	struct align_tensor fin[6], fout[7];
	mtpb_fwd_views(T, N, D, in, fin, fout, NULL, NULL, NULL, NULL);
	ALIGN_TRY(err, mtp_cfg_init(&c->f, p, m, fin, 6, fout, 7, device, err));
	c->tab_dtype = tab_dtype(m);
	c->dw_dtype = dw_dtype(m);
	c->w_dtype = w_dtype(m);
	int64_t x3[3] = {T, N, D}, pd[2] = {2 * D, D}, vd[2] = {V, D}, nd[2] = {2, D};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dx", &in[5], ALIGN_DT_BF16, 3, x3));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "main_grad", &in[6], c->w_dtype, 2, pd));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dtable", &out[0], c->tab_dtype, 2, vd));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dh", &out[1], ALIGN_DT_BF16, 3, x3));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dnorm", &out[2], c->dw_dtype, 2, nd));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dproj", &out[3], c->w_dtype, 2, pd));
	c->mm = *m;
	c->mm.v[MODE_MATMUL_OUT] = ALIGN_MATMUL_OUT_BF16;
	return sub_cfgs(c, p, m, in, device, err);
}

/* ---- the C backend of mtp_bwd_pipe ---- */

#define CPU_BLOCKS 32

struct cpu_be {
	void *blk[CPU_BLOCKS];
	int n;
};

static void *cpu_alloc(void *ctx, size_t bytes)
{
	struct cpu_be *b = ctx;
	if (b->n == CPU_BLOCKS)
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

static int cpu_kern_bwd(void *ctx, int kind, const struct mtp_bwd_kargs *a)
{
	(void)ctx;
	for (int64_t i = 0; i < a->rows * a->n; i++)
		mtp_bwd_elem(kind, a, i);
	return ALIGN_OK;
}

int mtp_bwd_fwd_cpu(const struct mtp_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		    struct align_tensor *out, int n_out)
{
	struct mtp_bwd_cfg c;
	ALIGN_TRY(NULL, mtp_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "mtp_bwd", in, n_in, out, n_out));
	struct cpu_be b;
	b.n = 0;
	struct mtp_bwd_be be = {{&b, cpu_alloc, cpu_op, cpu_kern}, cpu_kern_bwd};
	int rc = mtp_bwd_pipe(&c, m, in, out, &be);
	for (int i = 0; i < b.n; i++)
		free(b.blk[i]);
	if (rc == ALIGN_ERR_INTERNAL && b.n == CPU_BLOCKS)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "mtp_bwd: out of memory");
	return rc;
}

static void params_default(void *params, const struct align_dims *d)
{
	mtp_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return mtp_impl.params_variant(params, d, k);
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return mtp_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int in_dtype(const struct align_modes *m, int i)
{
	return i == 6 ? w_dtype(m) : in_specs[i].dtype;
}

static int out_dtype(const struct align_modes *m, int i)
{
	return i == 0 ? tab_dtype(m) : i == 1 ? ALIGN_DT_BF16 : i == 2 ? dw_dtype(m) : w_dtype(m);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[7], out[4];
	struct mtp_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&mtp_bwd_impl, m, d, in, out, err));
	return mtp_bwd_cfg_init(&c, params, m, in, 7, out, 4, device, err);
}

static const int modes_read[] = {MODE_MTP_COMBINE,	MODE_RMSNORM_WEIGHT,	   MODE_RMSNORM_CAST,
				 MODE_RMSNORM_RSQRT,	MODE_RMSNORM_REDUCE,	   MODE_RMSNORM_EPS,
				 MODE_RMSNORM_BWD_FORM, MODE_RMSNORM_BWD_DW_ORDER, MODE_RMSNORM_BWD_DW_DTYPE,
				 MODE_MATMUL_OPERAND,	MODE_MATMUL_ACCUM,	   MODE_MATMUL_FMA,
				 MODE_WGRAD_ORDER,	MODE_WGRAD_ACCUM,	   MODE_WGRAD_DTYPE,
				 MODE_EMBED_BWD_ORDER,	MODE_EMBED_BWD_DTYPE,	   -1};

const struct align_op_impl mtp_bwd_impl = {
	7,
	in_specs,
	4,
	out_specs,
	"T=16,S=8,V=64,N=2,D=32",
	modes_read,
	sizeof(struct mtp_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	in_dtype,
};
