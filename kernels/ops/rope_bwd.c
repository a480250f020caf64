/* rope_bwd.c: CPU twin of the RoPE backward (contract in rope_bwd.h): rope's C twin under the flipped
 * parameters, after rope_bwd's own tensor checks. */
#include "rope_bwd.h"

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"dy", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_SPECIAL, 4.0f, 60000.0f, 0}, "gradient of the rotated rows"},
	{"pos", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 1048576.0f, 0}, "position of each row (forward's)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dx", ALIGN_DT_BF16, "T,H,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the rows (non-rope dims: dy)"},
};

int rope_bwd_cfg_init(struct rope_op_cfg *c, const struct rope_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err)
{
	const char *op = "rope_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 2, 1));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, "dy", &in[0], 3));
	int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], ts[1] = {T}, ys[3] = {T, H, D};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dy", &in[0], ALIGN_DT_BF16, 3, ys));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "pos", &in[1], ALIGN_DT_I32, 1, ts));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dx", &out[0], ALIGN_DT_BF16, 3, ys));
	struct rope_params q = rope_bwd_params(p);
	return rope_cfg_init(c, &q, m, in, n_in, out, n_out, device, err);
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	struct rope_op_cfg c;
	ALIGN_TRY(NULL, rope_bwd_cfg_init(&c, params, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	struct rope_params q = rope_bwd_params(params);
	return rope_fwd_cpu(&q, m, in, n_in, out, n_out);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[1];
	struct rope_op_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&rope_bwd_impl, m, d, in, out, err));
	return rope_bwd_cfg_init(&c, params, m, in, 2, out, 1, device, err);
}

/* rope's parameters and variants (0 the DSv4 compressed layer's RoPE, 1 its inverse, 2 window-only, 3 the
 * DS-V3.2 indexer's): rope_bwd under variant k is the backward of rope under variant k */
static void params_default(void *params, const struct align_dims *d)
{
	rope_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return rope_impl.params_variant(params, d, k);
}

static const int modes_read[] = {MODE_MATH_IMPL, MODE_ROPE_YARN_FREQ, MODE_ROPE_COSSIN, MODE_ROPE_ARITH, -1};

const struct align_op_impl rope_bwd_impl = {
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
