/* attn.c: CPU twin of the composed DSv4 attention layer (contract in attn.h; order in attn_pipe.h): the
 * other ops run through their C twins, attn's own steps through attn.h's element code. */
#include "attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_cfg.h"
#include "ops.h"

#include "attn_pipe.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 8.0f, 0}, "attention-norm output"},
	{"wd",
	 ALIGN_DT_BF16,
	 "K+5*F+4*S+N,D",
	 {ALIGN_FILL_NORMAL, 0.18f, 0, 0},
	 "wq_a | wkv | compressor wkv, wgate | indexer compressor wkv, wgate | indexer head weights"},
	{"wq", ALIGN_DT_BF16, "G*H*F+N*S,K", {ALIGN_FILL_NORMAL, 0.18f, 0, 0}, "wq_b | indexer wq_b"},
	{"ape",
	 ALIGN_DT_F32,
	 "256*F+256*S",
	 {ALIGN_FILL_NORMAL, 0.5f, 0, 0},
	 "compressor ape [r,coff*F] | indexer's at 256*F"},
	{"vec",
	 ALIGN_DT_F32,
	 "K+2*F+S+G*H",
	 {ALIGN_FILL_NORMAL, 1.0f, 0, 0},
	 "q_norm w | kv_norm w | compressor norm w | indexer compressor norm w | sink"},
	{"wo_a", ALIGN_DT_BF16, "G*E,H*F", {ALIGN_FILL_NORMAL, 0.1f, 0, 0}, "grouped output projection (per group)"},
	{"wo_b", ALIGN_DT_BF16, "D,G*E", {ALIGN_FILL_NORMAL, 0.25f, 0, 0}, "output projection"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "layer output"},
	{"q", ALIGN_DT_BF16, "T,G*H,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "queries after norm and RoPE (saved)"},
	{"kv", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "raw kv after norm, RoPE, QAT (saved)"},
	{"o", ALIGN_DT_BF16, "T,G*H,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "sparse attention output (saved)"},
};

int attn_cfg_init(struct attn_cfg *c, const struct attn_params *p, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		  struct align_err *err)
{
	const char *op = "attn";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 7, 4));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	if (p->variant < ATTN_CSA || p->variant > ATTN_SWA || p->topk < 1)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: variant %d unknown or topk %d < 1", op, p->variant,
				  p->topk);
	for (int i = 0; i < 7; i++)
		ALIGN_TRY(err, op_cfg_rank(err, op, in_specs[i].name, &in[i], i == 3 || i == 4 ? 1 : 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, out_specs[1].name, &out[1], 3));
	int64_t T = in[0].shape[0], D = in[0].shape[1], F = out[2].shape[1], K = in[2].shape[1];
	int64_t GH = out[1].shape[1], GE = in[5].shape[0], HF = in[5].shape[1];
	int64_t H = F > 0 ? HF / F : 0, G = H > 0 ? GH / H : 0, E = G > 0 ? GE / G : 0;
	int64_t vl = in[4].shape[0], S = vl - K - 2 * F - GH, N = in[1].shape[0] - K - 5 * F - 4 * S;
	if (F < 1 || H < 1 || G < 1 || E < 1 || S < 1 || N < 1 || H * F != HF || G * H != GH || G * E != GE)
		return align_fail(
			err, ALIGN_ERR_INPUT,
			"%s: inconsistent dims (F %lld, H %lld, G %lld, E %lld, S %lld, N %lld from the tensors)", op,
			(long long)F, (long long)H, (long long)G, (long long)E, (long long)S, (long long)N);
	int64_t V = p->window;
	int64_t xs[2] = {T, D}, wds[2] = {K + 5 * F + 4 * S + N, D}, wqs[2] = {GH * F + N * S, K},
		as[1] = {256 * F + 256 * S};
	int64_t vs[1] = {K + 2 * F + S + GH}, oas[2] = {GE, HF}, obs[2] = {D, GE}, qs[3] = {T, GH, F}, ks[2] = {T, F};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "x", &in[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "wd", &in[1], ALIGN_DT_BF16, 2, wds));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "wq", &in[2], ALIGN_DT_BF16, 2, wqs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "ape", &in[3], ALIGN_DT_F32, 1, as));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "vec", &in[4], ALIGN_DT_F32, 1, vs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "wo_a", &in[5], ALIGN_DT_BF16, 2, oas));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "wo_b", &in[6], ALIGN_DT_BF16, 2, obs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "y", &out[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "q", &out[1], ALIGN_DT_BF16, 3, qs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "kv", &out[2], ALIGN_DT_BF16, 2, ks));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "o", &out[3], ALIGN_DT_BF16, 3, qs));
	if (V < 1 || S & (S - 1) || T > INT32_MAX / 2)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: window %lld must be >= 1, S = %lld a power of two", op,
				  (long long)V, (long long)S);
	struct compressor_params ip = {1, p->rope, 0};
	ALIGN_TRY(err, compressor_cfg_modes(&c->cc, &ip, S, -1, m, device, err));
	c->T = T, c->D = D, c->G = G, c->H = H, c->F = F, c->K = K, c->E = E, c->N = N, c->S = S, c->V = V;
	c->variant = p->variant;
	c->ratio = p->variant == ATTN_CSA ? 4 : p->variant == ATTN_HCA ? 128 : 0;
	c->coff = c->ratio == 4 ? 2 : 1;
	c->nc = c->ratio ? T / c->ratio : 0;
	c->topk = p->topk;
	c->C = p->variant == ATTN_CSA ? p->topk : p->variant == ATTN_HCA ? c->nc : 0;
	c->NS = V + c->C;
	c->qnorm_f32 = m->v[MODE_QNORM_MODE] == ALIGN_QNORM_MODE_FP32_OUT;
	c->rope_dim = p->rope.rope_dim;
	if (c->ratio * c->coff > 256)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: ratio %lld x coff %lld above the 256 ape rows", op,
				  (long long)c->ratio, (long long)c->coff);
	return ALIGN_OK;
}

/* ---- the C backend of attn_pipe ---- */

struct cpu_be {
	void *blk[64];
	int n;
};

static void *cpu_alloc(void *ctx, size_t bytes)
{
	struct cpu_be *b = ctx;
	if (b->n == 64)
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

int attn_cpu_kern(void *ctx, int kind, const struct attn_kargs *a)
{
	(void)ctx;
	const struct attn_cfg *c = &a->c;
	switch ((enum attn_kind)kind) {
	case ATTN_K_LINEAR:
		for (int64_t r = 0; r < a->rows; r++)
			for (int64_t g = 0; g < a->groups; g++)
				for (int64_t j = 0; j < a->m; j++)
					((align_bf16 *)a->out)[r * a->ldo + g * a->m + j] =
						attn_linear((const align_bf16 *)a->a + r * a->lda + g * a->ga,
							    (const align_bf16 *)a->w + (g * a->m + j) * a->n, a->n);
		return ALIGN_OK;
	case ATTN_K_CAST:
		for (int64_t i = 0; i < a->rows; i++)
			((align_bf16 *)a->out)[i] = align_f32_to_bf16(((const float *)a->a)[i]);
		return ALIGN_OK;
	case ATTN_K_COPY:
		memcpy(a->out, a->a, sizeof(align_bf16) * (size_t)a->rows);
		return ALIGN_OK;
	case ATTN_K_IOTA:
		for (int64_t i = 0; i < a->rows; i++)
			((int32_t *)a->out)[i] = (int32_t)i;
		return ALIGN_OK;
	case ATTN_K_KVQDQ:
		for (int64_t t = 0; t < a->rows; t++)
			compressor_qdq_row(0, (align_bf16 *)a->out + t * c->F, c->F, c->rope_dim);
		return ALIGN_OK;
	case ATTN_K_QIROT: {
		float *tmp = malloc(sizeof(float) * (size_t)c->S);
		if (!tmp)
			return align_fail(NULL, ALIGN_ERR_INTERNAL, "attn: out of memory");
		for (int64_t r = 0; r < a->rows; r++)
			attn_qi_rotate(c, (align_bf16 *)a->out + r * c->S, tmp);
		free(tmp);
		return ALIGN_OK;
	}
	case ATTN_K_IDX:
		for (int64_t t = 0; t < a->rows; t++)
			for (int64_t j = 0; j < c->NS; j++)
				((int32_t *)a->out)[t * c->NS + j] = attn_slot(c, t, j, a->ci + t * c->topk);
		return ALIGN_OK;
	}
	return align_fail(NULL, ALIGN_ERR_INTERNAL, "attn: step %d not handled", kind);
}

int attn_fwd_cpu(const struct attn_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		 struct align_tensor *out, int n_out)
{
	struct attn_cfg c;
	ALIGN_TRY(NULL, attn_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "attn", in, n_in, out, n_out));
	struct cpu_be b;
	b.n = 0;
	struct attn_be be = {&b, cpu_alloc, cpu_op, attn_cpu_kern};
	int rc = attn_pipe(&c, p, m, in, out, &be);
	for (int i = 0; i < b.n; i++)
		free(b.blk[i]);
	if (rc == ALIGN_ERR_INTERNAL && b.n == 64)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "attn: out of memory");
	return rc;
}

static void params_default(void *params, const struct align_dims *d)
{
	struct attn_params *p = params;
	p->variant = ATTN_CSA;
	p->topk = 8;
	p->window = d && d->v[ALIGN_DIM_V] > 0 ? (int)d->v[ALIGN_DIM_V] : 128;
	rope_params_default(&p->rope);
}

/* 0 csa (ratio 4, indexer), 1 hca (ratio 128), 2 swa (window only: plain RoPE, base 10000) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct attn_params *p = params;
	params_default(params, d);
	p->variant = k;
	if (k == ATTN_SWA) {
		p->rope.base = 10000.0f;
		p->rope.original_seq_len = 0;
	}
	return k >= 0 && k <= 2;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return attn_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[7], out[4];
	struct attn_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&attn_impl, m, d, in, out, err));
	return attn_cfg_init(&c, params, m, in, 7, out, 4, device, err);
}

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
				 -1};

const struct align_op_impl attn_impl = {
	7,
	in_specs,
	4,
	out_specs,
	"T=160,D=32,G=2,H=2,F=96,K=32,E=16,N=2,S=64,V=32",
	modes_read,
	sizeof(struct attn_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
