/* lm_head.c: CPU twin of the LM head (contract in lm_head.h): the matmul C twin under LMHEAD_LOGITS's
 * operand and output modes. */
#include "lm_head.h"

#include "matmul.h"
#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "final norm output"},
	{"w",
	 ALIGN_DT_F32,
	 "V,D",
	 {ALIGN_FILL_SPECIAL, 0.03f, 0.5f, 0},
	 "output matrix (fp32 master, shared with MTP)"},
};
static const struct align_tensor_spec out_specs[] = {
	{"logits", ALIGN_DT_F32, "T,V", {ALIGN_FILL_NORMAL, 0, 0, 0}, "logits (f32 or bf16 per LMHEAD_LOGITS)"},
};

int lm_head_logits_dtype(int v)
{
	return v == ALIGN_LMHEAD_LOGITS_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
}

int lm_head_cfg_init(struct align_modes *mm, const struct lm_head_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
		     struct align_err *err)
{
	ALIGN_TRY(err, op_cfg_counts(err, "lm_head", m, in, n_in, out, n_out, 2, 1));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "lm_head: no params");
	int bf16 = 0;
	ALIGN_TRY(err, op_cfg_flag(err, "lm_head", "lm_head_cfg_init", m, MODE_LMHEAD_LOGITS, ALIGN_LMHEAD_LOGITS_FP32,
				   ALIGN_LMHEAD_LOGITS_BF16, &bf16));
	ALIGN_TRY(err, op_cfg_rank(err, "lm_head", "x", &in[0], 2));
	ALIGN_TRY(err, op_cfg_rank(err, "lm_head", "w", &in[1], 2));
	int64_t T = in[0].shape[0], D = in[0].shape[1], V = in[1].shape[0];
	int64_t xs[2] = {T, D}, ws[2] = {V, D}, ys[2] = {T, V};
	ALIGN_TRY(err, op_cfg_tensor(err, "lm_head", "input", "x", &in[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, "lm_head", "input", "w", &in[1], ALIGN_DT_F32, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, "lm_head", "output", "logits", &out[0],
				     lm_head_logits_dtype(m->v[MODE_LMHEAD_LOGITS]), 2, ys));
	*mm = *m;
	mm->v[MODE_MATMUL_OPERAND] = bf16 ? ALIGN_MATMUL_OPERAND_BF16 : ALIGN_MATMUL_OPERAND_FP32;
	mm->v[MODE_MATMUL_OUT] = bf16 ? ALIGN_MATMUL_OUT_BF16 : ALIGN_MATMUL_OUT_FP32;
	return ALIGN_OK;
}

int lm_head_fwd_cpu(const struct lm_head_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out)
{
	struct align_modes mm;
	struct matmul_params mp = {0};
	ALIGN_TRY(NULL, lm_head_cfg_init(&mm, p, m, in, n_in, out, n_out, NULL));
	return matmul_fwd_cpu(&mp, &mm, in, n_in, out, n_out);
}

static void params_default(void *params, const struct align_dims *d)
{
	(void)d;
	((struct lm_head_params *)params)->unused = 0;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return lm_head_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int out_dtype(const struct align_modes *m, int i)
{
	(void)i;
	return lm_head_logits_dtype(m->v[MODE_LMHEAD_LOGITS]);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[1];
	struct align_modes mm;
	struct matmul_cfg c;
	struct matmul_params mp = {0};
	ALIGN_TRY(err, op_cfg_tensors(&lm_head_impl, m, d, in, out, err));
	ALIGN_TRY(err, lm_head_cfg_init(&mm, params, m, in, 2, out, 1, err));
	return matmul_cfg_init(&c, &mp, &mm, in, 2, out, 1, device, err);
}

static const int modes_read[] = {MODE_LMHEAD_LOGITS, MODE_MATMUL_ACCUM, MODE_MATMUL_FMA, MODE_MATMUL_IMPL, -1};

const struct align_op_impl lm_head_impl = {
	2,
	in_specs,
	1,
	out_specs,
	"T=16,D=256,V=512",
	modes_read,
	sizeof(struct lm_head_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
