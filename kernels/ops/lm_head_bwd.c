/* lm_head_bwd.c: CPU twin of the LM head backward (contract in lm_head_bwd.h): matmul_bwd's C twin on x
 * and dlogits widened to binary32, under LMHEAD_LOGITS's operand mode and a bf16 dx. */
#include "lm_head_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"x", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "final norm output (the forward's)"},
	{"w", ALIGN_DT_F32, "V,D", {ALIGN_FILL_SPECIAL, 0.03f, 0.5f, 0}, "output matrix (fp32 master)"},
	{"dlogits", ALIGN_DT_F32, "T,V", {ALIGN_FILL_SPECIAL, 0.01f, 1.0f, 0}, "gradient of the logits"},
	{"main_grad", ALIGN_DT_F32, "V,D", {ALIGN_FILL_NORMAL, 0.01f, 0, 0}, "existing gradient buffer"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dx", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of x"},
	{"dw", ALIGN_DT_F32, "V,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of w (WGRAD_DTYPE)"},
};

static int wgrad_dtype(const struct align_modes *m)
{
	return m->v[MODE_WGRAD_DTYPE] == ALIGN_WGRAD_DTYPE_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
}

int lm_head_bwd_cfg_init(struct align_modes *mm, const struct matmul_bwd_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			 struct align_err *err)
{
	const char *op = "lm_head_bwd";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 4, 2));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	int bf16 = 0;
	ALIGN_TRY(err, op_cfg_flag(err, op, "lm_head_bwd_cfg_init", m, MODE_LMHEAD_LOGITS, ALIGN_LMHEAD_LOGITS_FP32,
				   ALIGN_LMHEAD_LOGITS_BF16, &bf16));
	ALIGN_TRY(err, op_cfg_rank(err, op, "x", &in[0], 2));
	ALIGN_TRY(err, op_cfg_rank(err, op, "w", &in[1], 2));
	int64_t T = in[0].shape[0], D = in[0].shape[1], V = in[1].shape[0];
	int64_t xs[2] = {T, D}, ws[2] = {V, D}, ys[2] = {T, V};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "x", &in[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "w", &in[1], ALIGN_DT_F32, 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dlogits", &in[2],
				     lm_head_logits_dtype(m->v[MODE_LMHEAD_LOGITS]), 2, ys));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "main_grad", &in[3], wgrad_dtype(m), 2, ws));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dx", &out[0], ALIGN_DT_BF16, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dw", &out[1], wgrad_dtype(m), 2, ws));
	*mm = *m;
	mm->v[MODE_MATMUL_OPERAND] = bf16 ? ALIGN_MATMUL_OPERAND_BF16 : ALIGN_MATMUL_OPERAND_FP32;
	mm->v[MODE_MATMUL_OUT] = ALIGN_MATMUL_OUT_BF16;
	return ALIGN_OK;
}

void lm_head_bwd_mm_inputs(const struct align_tensor *in, struct align_tensor *mm_in, float *xf, float *df)
{
	for (int i = 0; i < 4; i++)
		mm_in[i] = in[i];
	mm_in[0].dtype = ALIGN_DT_F32;
	mm_in[0].data = xf;
	mm_in[2].dtype = ALIGN_DT_F32;
	mm_in[2].data = df;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	struct align_modes mm;
	ALIGN_TRY(NULL, lm_head_bwd_cfg_init(&mm, params, m, in, n_in, out, n_out, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "lm_head_bwd", in, n_in, out, n_out));
	int64_t nx = align_tensor_numel(&in[0]), nd = align_tensor_numel(&in[2]);
	float *xf = malloc((size_t)(nx > 0 ? nx : 1) * sizeof *xf),
	      *df = malloc((size_t)(nd > 0 ? nd : 1) * sizeof *df);
	int rc = xf && df ? ALIGN_OK : align_fail(NULL, ALIGN_ERR_INTERNAL, "lm_head_bwd: out of memory");
	for (int64_t i = 0; rc == ALIGN_OK && i < nx; i++)
		xf[i] = ops_ld(&in[0], i);
	for (int64_t i = 0; rc == ALIGN_OK && i < nd; i++)
		df[i] = ops_ld(&in[2], i);
	struct align_tensor mi[4];
	if (rc == ALIGN_OK) {
		lm_head_bwd_mm_inputs(in, mi, xf, df);
		rc = matmul_bwd_fwd_cpu(params, &mm, mi, 4, out, n_out);
	}
	free(xf);
	free(df);
	return rc;
}

static void params_default(void *params, const struct align_dims *d)
{
	matmul_bwd_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return matmul_bwd_impl.params_variant(params, d, k);
}

static int in_dtype(const struct align_modes *m, int i)
{
	return i == 2 ? lm_head_logits_dtype(m->v[MODE_LMHEAD_LOGITS]) : i == 3 ? wgrad_dtype(m) : in_specs[i].dtype;
}

static int out_dtype(const struct align_modes *m, int i)
{
	return i == 1 ? wgrad_dtype(m) : ALIGN_DT_BF16;
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[4], out[2], mi[4];
	struct align_modes mm;
	struct matmul_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&lm_head_bwd_impl, m, d, in, out, err));
	ALIGN_TRY(err, lm_head_bwd_cfg_init(&mm, params, m, in, 4, out, 2, err));
	lm_head_bwd_mm_inputs(in, mi, NULL, NULL);
	return matmul_bwd_cfg_init(&c, params, &mm, mi, 4, out, 2, device, err);
}

static const int modes_read[] = {MODE_LMHEAD_LOGITS,
				 MODE_MATMUL_ACCUM,
				 MODE_MATMUL_FMA,
				 MODE_WGRAD_ORDER,
				 MODE_WGRAD_ACCUM,
				 MODE_WGRAD_DTYPE,
				 -1};

const struct align_op_impl lm_head_bwd_impl = {
	4,
	in_specs,
	2,
	out_specs,
	"T=16,D=64,V=128,S=8",
	modes_read,
	sizeof(struct matmul_bwd_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	in_dtype,
};
