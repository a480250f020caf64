/* rope.c: CPU twin of RoPE / inverse RoPE (contract in rope.h). */
#include "rope.h"

#include <math.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 4.0f, 60000.0f, 0}, "q / kv / compressed kv rows, per head"},
	{"pos", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 1048576.0f, 0}, "position of each row"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "rotated rows (non-rope dims copied)"},
};

void rope_params_default(struct rope_params *p)
{
	p->rope_dim = 64;
	p->rope_first = 0;
	p->pairs = ROPE_PAIRS_INTERLEAVED;
	p->inverse = 0;
	p->base = 160000.0f;
	p->factor = 16.0f;
	p->original_seq_len = 65536;
	p->beta_fast = 32.0f;
	p->beta_slow = 1.0f;
}

/* DS-ref find_correction_dim (Python floats = binary64; libm log: its floor/ceil is what counts) */
static double correction_dim(double rotations, int dim, double base, double max_seq_len)
{
	return dim * log(max_seq_len / (rotations * 2.0 * 3.14159265358979323846)) / (2.0 * log(base));
}

int rope_cfg_modes(struct rope_cfg *c, const struct rope_params *p, int64_t D, const struct align_modes *m, int device,
		   struct align_err *err)
{
	const char *fn = "rope_cfg_modes";
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "rope: no params");
	if (p->rope_dim <= 0 || p->rope_dim % 2 || p->rope_dim > ROPE_MAX_DIM || (D > 0 && p->rope_dim > D))
		return align_fail(err, ALIGN_ERR_INPUT, "rope: rope_dim %d must be even, in [2, %d] and <= D = %lld",
				  p->rope_dim, ROPE_MAX_DIM, (long long)D);
	if (!(p->base > 1.0f && p->base <= 1e30f))
		return align_fail(err, ALIGN_ERR_INPUT, "rope: base %g must be a finite value above 1",
				  (double)p->base);
	if (p->pairs != ROPE_PAIRS_INTERLEAVED && p->pairs != ROPE_PAIRS_HALF)
		return align_fail(err, ALIGN_ERR_INPUT, "rope: pairs %d is neither interleaved (0) nor half (1)",
				  p->pairs);
	if (p->original_seq_len < 0 ||
	    (p->original_seq_len > 0 && !(p->factor > 0.0f && p->factor <= 1e30f && p->beta_fast > 0.0f &&
					  p->beta_slow > 0.0f && p->beta_fast <= 1e30f && p->beta_slow <= 1e30f)))
		return align_fail(err, ALIGN_ERR_INPUT,
				  "rope: YaRN needs original_seq_len >= 0 and finite factor, beta_fast, beta_slow > 0");
	ALIGN_TRY(err, op_cfg_math(err, "rope", fn, m, device, &c->math));
	switch ((enum align_ROPE_YARN_FREQ_value)m->v[MODE_ROPE_YARN_FREQ]) {
	case ALIGN_ROPE_YARN_FREQ_DIV:
		c->freq_mul = 0, c->freq_recip = 0;
		break;
	case ALIGN_ROPE_YARN_FREQ_MUL:
		c->freq_mul = 1, c->freq_recip = 0;
		break;
	case ALIGN_ROPE_YARN_FREQ_DIV_RECIP:
		c->freq_mul = 0, c->freq_recip = 1;
		break;
	default:
		return op_cfg_unhandled(err, "rope", MODE_ROPE_YARN_FREQ, m->v[MODE_ROPE_YARN_FREQ], fn);
	}
	ALIGN_TRY(err, op_cfg_flag(err, "rope", fn, m, MODE_ROPE_COSSIN, ALIGN_ROPE_COSSIN_FP32, ALIGN_ROPE_COSSIN_BF16,
				   &c->cs_bf16));
	switch ((enum align_ROPE_ARITH_value)m->v[MODE_ROPE_ARITH]) {
	case ALIGN_ROPE_ARITH_FP32:
		c->arith_bf16 = 0, c->arith_fma = 0;
		break;
	case ALIGN_ROPE_ARITH_BF16:
		c->arith_bf16 = 1, c->arith_fma = 0;
		break;
	case ALIGN_ROPE_ARITH_FMA_AC:
		c->arith_bf16 = 0, c->arith_fma = 1;
		break;
	case ALIGN_ROPE_ARITH_FMA_BD:
		c->arith_bf16 = 0, c->arith_fma = 2;
		break;
	default:
		return op_cfg_unhandled(err, "rope", MODE_ROPE_ARITH, m->v[MODE_ROPE_ARITH], fn);
	}
	c->rd = p->rope_dim;
	c->first = p->rope_first != 0;
	c->half = p->pairs == ROPE_PAIRS_HALF;
	c->inverse = p->inverse != 0;
	c->yarn = p->original_seq_len > 0;
	c->base = p->base;
	c->factor = p->factor;
	c->low = 0;
	c->high = 0;
	c->den = 1.0f;
	c->inv_den = 1.0f;
	c->inv_factor = 1.0f / c->factor;
	if (c->yarn) {
		double lo = floor(correction_dim(p->beta_fast, p->rope_dim, p->base, p->original_seq_len));
		double hi = ceil(correction_dim(p->beta_slow, p->rope_dim, p->base, p->original_seq_len));
		lo = lo < 0 ? 0 : lo > p->rope_dim - 1 ? p->rope_dim - 1 : lo;
		hi = hi > p->rope_dim - 1 ? p->rope_dim - 1 : hi < 0 ? 0 : hi;
		c->low = (int)lo;
		c->high = (int)hi;
		c->den = (float)(hi == lo ? hi + 0.001 - lo : hi - lo);
		c->inv_den = 1.0f / c->den;
	}
	return ALIGN_OK;
}

int rope_cfg_init(struct rope_op_cfg *c, const struct rope_params *p, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		  struct align_err *err)
{
	ALIGN_TRY(err, op_cfg_counts(err, "rope", m, in, n_in, out, n_out, 2, 1));
	ALIGN_TRY(err, op_cfg_rank(err, "rope", in_specs[0].name, &in[0], 3));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2];
	int64_t xs[3] = {T, H, D}, ps[1] = {T};
	ALIGN_TRY(err, op_cfg_tensor(err, "rope", "input", in_specs[0].name, &in[0], ALIGN_DT_BF16, 3, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, "rope", "input", in_specs[1].name, &in[1], ALIGN_DT_I32, 1, ps));
	ALIGN_TRY(err, op_cfg_tensor(err, "rope", "output", out_specs[0].name, &out[0], ALIGN_DT_BF16, 3, xs));
	ALIGN_TRY(err, rope_cfg_modes(&c->r, p, D, m, device, err));
	c->T = T;
	c->H = H;
	c->D = D;
	return ALIGN_OK;
}

int rope_fwd_cpu(const struct rope_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		 struct align_tensor *out, int n_out)
{
	struct rope_op_cfg c;
	ALIGN_TRY(NULL, rope_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "rope", in, n_in, out, n_out));
	float freq[ROPE_MAX_DIM / 2];
	for (int j = 0; j < c.r.rd / 2; j++)
		freq[j] = rope_freq(&c.r, j);
	const align_bf16 *x = in[0].data;
	const int32_t *pos = in[1].data;
	align_bf16 *y = out[0].data;
	for (int64_t t = 0; t < c.T; t++)
		for (int64_t h = 0; h < c.H; h++)
			rope_row(&c.r, freq, pos[t], c.D, x + (t * c.H + h) * c.D, y + (t * c.H + h) * c.D);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	rope_params_default(params);
}

/* 0 DSv4 compressed layer (YaRN, last 64 dims, interleaved); 1 its inverse (attention output, spec 3.8);
 * 2 window-only layer (plain RoPE, base 10000); 3 DS-V3.2 indexer (first 64 dims, rotate-half pairs,
 * YaRN 10000/40/4096) */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct rope_params *p = params;
	params_default(params, d);
	if (k == 1)
		p->inverse = 1;
	if (k == 2) {
		p->base = 10000.0f;
		p->original_seq_len = 0;
	}
	if (k == 3) {
		p->rope_first = 1;
		p->pairs = ROPE_PAIRS_HALF;
		p->base = 10000.0f;
		p->factor = 40.0f;
		p->original_seq_len = 4096;
	}
	return k >= 0 && k <= 3;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return rope_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[1];
	struct rope_op_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&rope_impl, m, d, in, out, err));
	return rope_cfg_init(&c, params, m, in, 2, out, 1, device, err);
}

static const int modes_read[] = {MODE_MATH_IMPL, MODE_ROPE_YARN_FREQ, MODE_ROPE_COSSIN, MODE_ROPE_ARITH, -1};

const struct align_op_impl rope_impl = {
	2,
	in_specs,
	1,
	out_specs,
	"T=16,H=4,D=512",
	modes_read,
	sizeof(struct rope_params),
	params_default,
	params_variant,
	fwd,
	NULL,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
