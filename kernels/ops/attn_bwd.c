/* attn_bwd.c: CPU twin of the attention layer's backward (contract in attn_bwd.h; order in attn_bwd_pipe.h): the
 * forward and the backward ops through their C twins, attn's and attn_bwd's element steps as plain loops; and
 * the configuration both twins read. */
/* the dx sum's NaN in the written operand order (nan_host.h): the three paths' NaNs can carry different signs
 * (extreme fills under ROPE_ARITH=fma_ac / fma_bd), and gcc may commute the + */
#define ALIGN_NAN_WRITTEN_ORDER 1
#include "attn_bwd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_cfg.h"
#include "ops.h"

#include "attn_bwd_pipe.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 8.0f, 0}, "attention-norm output"},
	{"wd", ALIGN_DT_BF16, "K+5*F+4*S+N,D", {ALIGN_FILL_NORMAL, 0.18f, 0, 0}, "attn's rows applied to x"},
	{"wq", ALIGN_DT_BF16, "G*H*F+N*S,K", {ALIGN_FILL_NORMAL, 0.18f, 0, 0}, "wq_b | indexer wq_b"},
	{"ape", ALIGN_DT_F32, "256*F+256*S", {ALIGN_FILL_NORMAL, 0.5f, 0, 0}, "compressor ape | indexer's"},
	{"vec", ALIGN_DT_F32, "K+2*F+S+G*H", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "norm weights | sink"},
	{"wo_a", ALIGN_DT_BF16, "G*E,H*F", {ALIGN_FILL_NORMAL, 0.1f, 0, 0}, "grouped output projection"},
	{"wo_b", ALIGN_DT_BF16, "D,G*E", {ALIGN_FILL_NORMAL, 0.25f, 0, 0}, "output projection"},
	{"dy", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0.05f, 0, 0}, "gradient of y"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dx", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of x (q, kv, compressor paths)"},
	{"dwd", ALIGN_DT_F32, "K+5*F+4*S+N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of wd (indexer rows +0)"},
	{"dwq", ALIGN_DT_F32, "G*H*F+N*S,K", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of wq (indexer wq_b +0)"},
	{"dape", ALIGN_DT_F32, "256*F+256*S", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of ape"},
	{"dvec", ALIGN_DT_F32, "K+2*F+S+G*H", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the norm weights, sink"},
	{"dwo_a", ALIGN_DT_F32, "G*E,H*F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of wo_a"},
	{"dwo_b", ALIGN_DT_F32, "D,G*E", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of wo_b"},
};

/* the sub-ops' configurations on the shapes the pipe gives them (no data) */
static int sub_cfgs(const struct attn_bwd_cfg *c, const struct attn_params *p, const struct align_modes *m, int device,
		    struct align_err *err)
{
	const struct attn_cfg *f = &c->f;
	const int64_t T = f->T, GH = f->G * f->H, F = f->F;
	struct align_tensor mi[4], mo[2], ri[3], ro[2];
	struct matmul_bwd_cfg mc;
	struct matmul_bwd_params mp = {0};
	attnb_mm_views(c->w_dtype, T, f->D, f->K, NULL, NULL, NULL, NULL, NULL, NULL, mi, mo);
	ALIGN_TRY(err, matmul_bwd_cfg_init(&mc, &mp, &c->mm, mi, 4, mo, 2, device, err));
	struct rmsnorm_bwd_cfg rc;
	struct rmsnorm_bwd_params rp = {0};
	for (int k = 0; k < 2; k++) {
		attnb_rms_views(c->dw_dtype, T, k ? F : f->K, NULL, NULL, NULL, NULL, NULL, ri, ro);
		ALIGN_TRY(err, rmsnorm_bwd_cfg_init(&rc, &rp, m, ri, 3, ro, 2, device, err));
	}
	struct qnorm_bwd_cfg qc;
	struct qnorm_bwd_params qp = {0};
	struct align_tensor qi[2] = {attn_view(NULL, ALIGN_DT_BF16, 3, T, GH, F, "q"),
				     attn_view(NULL, ALIGN_DT_BF16, 3, T, GH, F, "dy")};
	struct align_tensor qo = attn_view(NULL, ALIGN_DT_BF16, 3, T, GH, F, "dq");
	ALIGN_TRY(err, qnorm_bwd_cfg_init(&qc, &qp, m, qi, 2, &qo, 1, device, err));
	struct sparse_attn_bwd_cfg sc;
	struct sparse_attn_params sp = {(float)(1.0 / sqrt((double)F)), (int)f->V};
	struct align_tensor si[5] = {attn_view(NULL, ALIGN_DT_BF16, 3, T, GH, F, "q"),
				     attn_view(NULL, ALIGN_DT_BF16, 2, T + f->nc, F, 0, "kv"),
				     attn_view(NULL, ALIGN_DT_I32, 2, T, f->NS, 0, "idx"),
				     attn_view(NULL, ALIGN_DT_F32, 1, GH, 0, 0, "sink"),
				     attn_view(NULL, ALIGN_DT_BF16, 3, T, GH, F, "do")};
	struct align_tensor so[3] = {attn_view(NULL, ALIGN_DT_BF16, 3, T, GH, F, "dq"),
				     attn_view(NULL, ALIGN_DT_F32, 2, T + f->nc, F, 0, "dkv"),
				     attn_view(NULL, ALIGN_DT_F32, 1, GH, 0, 0, "dsink")};
	ALIGN_TRY(err, sparse_attn_bwd_cfg_init(&sc, &sp, m, si, 5, so, 3, device, err));
	if (f->nc == 0)
		return ALIGN_OK;
	const int64_t r = f->ratio, cf = f->coff, D = f->D, nc = f->nc;
	struct compressor_bwd_cfg cc;
	struct compressor_params cp;
	cp.rotate = 0;
	cp.rope = p->rope;
	cp.pos0 = 0;
	struct align_tensor ci[6] = {
		attn_view(NULL, ALIGN_DT_BF16, 2, nc * r, D, 0, "x"),
		attn_view(NULL, ALIGN_DT_BF16, 2, cf * F, D, 0, "wkv"),
		attn_view(NULL, ALIGN_DT_BF16, 2, cf * F, D, 0, "wgate"),
		attn_view(NULL, ALIGN_DT_F32, 2, r, cf * F, 0, "ape"),
		attn_view(NULL, ALIGN_DT_F32, 1, F, 0, 0, "w"),
		attn_view(NULL, ALIGN_DT_BF16, 2, nc, F, 0, "dc"),
	};
	struct align_tensor co[5] = {
		attn_view(NULL, ALIGN_DT_BF16, 2, nc * r, D, 0, "dx"),
		attn_view(NULL, ALIGN_DT_F32, 2, cf * F, D, 0, "dwkv"),
		attn_view(NULL, ALIGN_DT_F32, 2, cf * F, D, 0, "dwgate"),
		attn_view(NULL, ALIGN_DT_F32, 2, r, cf * F, 0, "dape"),
		attn_view(NULL, ALIGN_DT_F32, 1, F, 0, 0, "dw"),
	};
	return compressor_bwd_cfg_init(&cc, &cp, m, ci, 6, co, 5, device, err);
}

int attn_bwd_cfg_init(struct attn_bwd_cfg *c, const struct attn_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err)
{
	const char *op = "attn_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 8, 7));
	for (int i = 0; i < 7; i++)
		ALIGN_TRY(err, op_cfg_rank(err, op, out_specs[i].name, &out[i], i == 3 || i == 4 ? 1 : 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "x", &in[0], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "vec", &in[4], 1));
	ALIGN_TRY(err, op_cfg_rank(err, op, "wo_a", &in[5], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "wq", &in[2], 2));
	/* F and G*H, which attn reads from its outputs, solved from the packed sizes (attn.h): for F | H*F and S a
	 * power of two, G*H = |vec| - K - 2F - S, N = |wd| - K - 5F - 4S and |wq| = G*H*F + N*S; one solution */
	const int64_t K = in[2].shape[1], HF = in[5].shape[1], vl = in[4].shape[0], wdr = in[1].shape[0];
	const int64_t wqr = in[2].shape[0];
	int64_t F = 0, GH = 0, found = 0;
	for (int64_t f = 1; f <= HF; f++)
		for (int64_t s = 1; HF % f == 0 && s <= vl; s *= 2) {
			int64_t gh = vl - K - 2 * f - s, n = wdr - K - 5 * f - 4 * s;
			if (gh >= 1 && n >= 1 && gh * f + n * s == wqr && gh % (HF / f) == 0)
				F = f, GH = gh, found++;
		}
	if (found != 1)
		return align_fail(err, ALIGN_ERR_INPUT,
				  "%s: %s head dim from the packed sizes (wd %lld, wq %lld, vec %lld, wo_a %lld cols)",
				  op, found ? "ambiguous" : "no", (long long)wdr, (long long)wqr, (long long)vl,
				  (long long)HF);
	const int64_t T = in[0].shape[0], D = in[0].shape[1];
	struct align_tensor fout[4] = {
		attn_view(NULL, ALIGN_DT_BF16, 2, T, D, 0, "y"), attn_view(NULL, ALIGN_DT_BF16, 3, T, GH, F, "q"),
		attn_view(NULL, ALIGN_DT_BF16, 2, T, F, 0, "kv"), attn_view(NULL, ALIGN_DT_BF16, 3, T, GH, F, "o")};
	ALIGN_TRY(err, attn_cfg_init(&c->f, p, m, in, 7, fout, 4, device, err));
	int64_t xs[2] = {T, D};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dy", &in[7], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dx", &out[0], ALIGN_DT_BF16, 2, xs));
	for (int i = 1; i < 7; i++)
		ALIGN_TRY(err, op_cfg_tensor(err, op, "output", out_specs[i].name, &out[i], ALIGN_DT_F32, in[i].ndim,
					     in[i].shape));
	c->w_dtype = m->v[MODE_WGRAD_DTYPE] == ALIGN_WGRAD_DTYPE_FP32 ? ALIGN_DT_F32 : ALIGN_DT_BF16;
	c->dw_dtype = m->v[MODE_RMSNORM_BWD_DW_DTYPE] == ALIGN_RMSNORM_BWD_DW_DTYPE_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
	c->mm = *m;
	c->mm.v[MODE_MATMUL_OUT] = ALIGN_MATMUL_OUT_BF16;
	c->mm.v[MODE_MATMUL_OPERAND] = ALIGN_MATMUL_OPERAND_BF16;
	return sub_cfgs(c, p, m, device, err);
}

/* ---- the C backend of attn_bwd_pipe ---- */

#define CPU_BLOCKS 256

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

static int cpu_kern_bwd(void *ctx, int kind, const struct attn_bwd_kargs *a)
{
	(void)ctx;
	for (int64_t i = 0; i < a->rows * a->n; i++)
		attn_bwd_elem(kind, a, i);
	return ALIGN_OK;
}

int attn_bwd_fwd_cpu(const struct attn_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		     struct align_tensor *out, int n_out)
{
	struct attn_bwd_cfg c;
	ALIGN_TRY(NULL, attn_bwd_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "attn_bwd", in, n_in, out, n_out));
	struct cpu_be *b = calloc(1, sizeof *b);
	if (!b)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "attn_bwd: out of memory");
	struct attn_bwd_be be = {{b, cpu_alloc, cpu_op, attn_cpu_kern}, cpu_kern_bwd};
	int rc = attn_bwd_pipe(&c, p, m, in, out, &be);
	int full = b->n == CPU_BLOCKS;
	for (int i = 0; i < b->n; i++)
		free(b->blk[i]);
	free(b);
	if (rc == ALIGN_ERR_INTERNAL && full)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "attn_bwd: out of memory");
	return rc;
}

static void params_default(void *params, const struct align_dims *d)
{
	attn_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return attn_impl.params_variant(params, d, k);
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return attn_bwd_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[8], out[7];
	struct attn_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&attn_bwd_impl, m, d, in, out, err));
	return attn_bwd_cfg_init(&c, params, m, in, 8, out, 7, device, err);
}

/* attn's switches, then the backward ops' (MATMUL_OPERAND and MATMUL_OUT are fixed: attn_bwd.h) */
static const int modes_read[] = {MODE_MATH_IMPL,
				 MODE_RMSNORM_WEIGHT,
				 MODE_RMSNORM_CAST,
				 MODE_RMSNORM_RSQRT,
				 MODE_RMSNORM_REDUCE,
				 MODE_RMSNORM_EPS,
				 MODE_QNORM_MODE,
				 MODE_ROPE_YARN_FREQ,
				 MODE_ROPE_COSSIN,
				 MODE_ROPE_ARITH,
				 MODE_CSA_COMP_GEMM,
				 MODE_CSA_COMP_APE,
				 MODE_CSA_COMP_POOL,
				 MODE_CSA_COMP_SUM,
				 MODE_CSA_COMP_SUM_ORDER,
				 MODE_CSA_COMP_NORM,
				 MODE_CSA_HADAMARD,
				 MODE_CSA_QAT,
				 MODE_INDEXER_SCORE,
				 MODE_INDEXER_WEIGHT_SCALE,
				 MODE_INDEXER_TOPK_ORDER,
				 MODE_CSA_SINK_IN_MAX,
				 MODE_CSA_SOFTMAX,
				 MODE_CSA_P,
				 MODE_CSA_EXP,
				 MODE_CSA_QK,
				 MODE_CSA_SUM_ORDER,
				 MODE_CSA_SINK,
				 MODE_CSA_INDEX_ORDER,
				 MODE_CSA_EMPTY_ROW,
				 MODE_MATMUL_ACCUM,
				 MODE_MATMUL_FMA,
				 MODE_WGRAD_ORDER,
				 MODE_WGRAD_ACCUM,
				 MODE_WGRAD_DTYPE,
				 MODE_RMSNORM_BWD_FORM,
				 MODE_RMSNORM_BWD_DW_ORDER,
				 MODE_RMSNORM_BWD_DW_DTYPE,
				 MODE_QNORM_BWD_PREC,
				 MODE_CSA_BWD_SOFTMAX,
				 MODE_CSA_BWD_P,
				 MODE_CSA_BWD_DELTA,
				 -1};

const struct align_op_impl attn_bwd_impl = {
	8,
	in_specs,
	7,
	out_specs,
	"T=64,D=16,G=2,H=2,F=64,K=16,E=8,N=2,S=64,V=16",
	modes_read,
	sizeof(struct attn_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
