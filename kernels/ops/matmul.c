/* matmul.c: CPU twin of the matmul op (contract in matmul.h) and the op's configuration
 * (matmul_cfg_init), which the CUDA twin (matmul.cu) calls too. */
#include "matmul.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

/* rows x cols of tensor t converted to binary32 operands per MATMUL_OPERAND */
static float *load_operands(const struct align_tensor *t, int operand)
{
	int64_t n = align_tensor_numel(t);
	float *p = malloc((size_t)n * sizeof *p);
	if (p)
		for (int64_t i = 0; i < n; i++)
			p[i] = matmul_operand(ops_ld(t, i), operand);
	return p;
}

/* status 4 with one message: the value v of mode_id cannot run with engine impl (matmul.h "Engines") */
static int engine_refuse(int mode_id, int v, int impl, const char *why, struct align_err *err)
{
	const char *name = modes_value_name(mode_id, v), *iname = modes_value_name(MODE_MATMUL_IMPL, impl);
	return align_fail(err, ALIGN_ERR_UNSUPPORTED, "matmul: %s=%s is not supported with %s=%s (%s)",
			  modes_info(mode_id)->env, name ? name : "?", modes_info(MODE_MATMUL_IMPL)->env,
			  iname ? iname : "?", why);
}

/* the refusals of matmul.h ("Engines") for the GPU-only engine impl on the decoded modes */
static int engine_check(const struct matmul_cfg *c, int impl, struct align_err *err)
{
	if (c->accum != ALIGN_MATMUL_ACCUM_SEQ)
		return engine_refuse(MODE_MATMUL_ACCUM, c->accum, impl,
				     "the engine sums in its own order; only the default is accepted", err);
	if (c->fma)
		return engine_refuse(MODE_MATMUL_FMA, ALIGN_MATMUL_FMA_ON, impl,
				     "the engine sums in its own order; only the default is accepted", err);
	if (impl == ALIGN_MATMUL_IMPL_TC && c->operand != ALIGN_MATMUL_OPERAND_BF16)
		return engine_refuse(MODE_MATMUL_OPERAND, c->operand, impl,
				     "the tensor-core kernel takes bf16 operands", err);
	if (impl == ALIGN_MATMUL_IMPL_CUBLAS_PINNED && c->operand != ALIGN_MATMUL_OPERAND_BF16)
		return engine_refuse(MODE_MATMUL_OPERAND, c->operand, impl,
				     "the pinned algorithm is chosen for bf16 operands", err);
	return ALIGN_OK;
}

int matmul_cfg_init(struct matmul_cfg *c, const struct matmul_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		    struct align_err *err)
{
	const char *op = "matmul";
	(void)p; /* struct matmul_params has no field that matters */
	if (!c || !m || !in || !out || n_in != 2 || n_out != 1)
		return align_fail(err, ALIGN_ERR_INPUT,
				  "matmul: expects a[T,D], b[F,D] -> y[T,F] (2 inputs, 1 output)");
	const struct align_tensor *a = &in[0], *b = &in[1];
	if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[1] || a->dtype == ALIGN_DT_I32 ||
	    b->dtype == ALIGN_DT_I32)
		return align_fail(
			err, ALIGN_ERR_INPUT,
			"matmul: a and b must be 2-d f32/bf16 with the same number of columns, got %s %d-d and "
			"%s %d-d",
			align_dtype_name(a->dtype), a->ndim, align_dtype_name(b->dtype), b->ndim);
	c->T = a->shape[0];
	c->D = a->shape[1];
	c->F = b->shape[0];
	int v = m->v[MODE_MATMUL_OPERAND];
	switch ((enum align_MATMUL_OPERAND_value)v) {
	case ALIGN_MATMUL_OPERAND_BF16:
	case ALIGN_MATMUL_OPERAND_FP32:
	case ALIGN_MATMUL_OPERAND_TF32:
		c->operand = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MATMUL_OPERAND, v, "matmul_cfg_init");
	}
	switch ((enum align_MATMUL_ACCUM_value)(v = m->v[MODE_MATMUL_ACCUM])) {
	case ALIGN_MATMUL_ACCUM_SEQ:
	case ALIGN_MATMUL_ACCUM_SPLIT16:
	case ALIGN_MATMUL_ACCUM_FP64:
		c->accum = v;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MATMUL_ACCUM, v, "matmul_cfg_init");
	}
	ALIGN_TRY(err, op_cfg_flag(err, op, "matmul_cfg_init", m, MODE_MATMUL_FMA, ALIGN_MATMUL_FMA_OFF,
				   ALIGN_MATMUL_FMA_ON, &c->fma));
	switch ((enum align_MATMUL_OUT_value)(v = m->v[MODE_MATMUL_OUT])) {
	case ALIGN_MATMUL_OUT_BF16:
		c->y_dtype = ALIGN_DT_BF16;
		break;
	case ALIGN_MATMUL_OUT_FP32:
		c->y_dtype = ALIGN_DT_F32;
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MATMUL_OUT, v, "matmul_cfg_init");
	}
	int64_t oshape[2] = {c->T, c->F};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "y", &out[0], c->y_dtype, 2, oshape));
	switch ((enum align_MATMUL_IMPL_value)(v = m->v[MODE_MATMUL_IMPL])) {
	case ALIGN_MATMUL_IMPL_PORTABLE:
		break;
	case ALIGN_MATMUL_IMPL_TC:
	case ALIGN_MATMUL_IMPL_CUBLAS:
	case ALIGN_MATMUL_IMPL_CUBLAS_PINNED:
		if (device == ALIGN_DEVICE_CPU)
			return op_cfg_refuse(err, op, MODE_MATMUL_IMPL, v, device);
		ALIGN_TRY(err, engine_check(c, v, err));
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MATMUL_IMPL, v, "matmul_cfg_init");
	}
	c->impl = v;
	return ALIGN_OK;
}

int matmul_fwd_cpu(const struct matmul_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		   struct align_tensor *out, int n_out)
{
	struct matmul_cfg c;
	ALIGN_TRY(NULL, matmul_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "matmul", in, n_in, out, n_out));
	const int64_t T = c.T, D = c.D, F = c.F;
	float *pa = load_operands(&in[0], c.operand), *pb = load_operands(&in[1], c.operand);
	if (!pa || !pb) {
		free(pa);
		free(pb);
		return ALIGN_ERR_INTERNAL;
	}
	for (int64_t t = 0; t < T; t++)
		for (int64_t f = 0; f < F; f++)
			ops_st(&out[0], t * F + f, matmul_dot(pa + t * D, pb + f * D, D, c.accum, c.fma));
	free(pa);
	free(pb);
	return ALIGN_OK;
}

static void params_default(void *params, const struct align_dims *d)
{
	((struct matmul_params *)params)->unused = 0;
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	params_default(params, d);
	return k == 0;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	return matmul_fwd_cpu(params, m, in, n_in, out, n_out);
}

static int out_dtype(const struct align_modes *m, int i)
{
	return m->v[MODE_MATMUL_OUT] == ALIGN_MATMUL_OUT_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[2], out[1];
	struct matmul_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&matmul_impl, m, d, in, out, err));
	return matmul_cfg_init(&c, params, m, in, 2, out, 1, device, err);
}

static const struct align_tensor_spec in_specs[] = {
	{"a", ALIGN_DT_F32, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f, 0}, "activations"},
	{"b", ALIGN_DT_F32, "F,D", {ALIGN_FILL_SPECIAL, 0.03f, 0.5f, 0}, "weight, torch Linear layout"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 0, 0, 0}, "a @ b^T (bf16 or f32 per MATMUL_OUT)"},
};
static const int modes_read[] = {MODE_MATMUL_OPERAND, MODE_MATMUL_ACCUM,
				 MODE_MATMUL_FMA,     MODE_MATMUL_OUT,
				 MODE_MATMUL_IMPL,    -1}; /* IMPL: portable here; the engines are GPU only */

const struct align_op_impl matmul_impl = {
	2,
	in_specs,
	1,
	out_specs,
	"T=16,D=4096,F=64",
	modes_read,
	sizeof(struct matmul_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
