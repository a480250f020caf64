/* matmul.c: CPU twin of the matmul op (contract in matmul.h). */
#include "matmul.h"

#include <stdlib.h>

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

int matmul_fwd_cpu(const struct matmul_params *p, const struct align_modes *m, const struct align_tensor *in,
		   int n_in, struct align_tensor *out, int n_out)
{
	if (n_in != 2 || n_out != 1)
		return ALIGN_ERR_INPUT;
	const struct align_tensor *a = &in[0], *b = &in[1];
	if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[1] || a->dtype == ALIGN_DT_I32 ||
	    b->dtype == ALIGN_DT_I32)
		return ALIGN_ERR_INPUT;
	int64_t T = a->shape[0], D = a->shape[1], F = b->shape[0];
	int64_t oshape[2] = {T, F};
	int odt = m->v[MODE_MATMUL_OUT] == ALIGN_MATMUL_OUT_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
	if (ops_check(&out[0], odt, 2, oshape))
		return ALIGN_ERR_INPUT;
	int operand = m->v[MODE_MATMUL_OPERAND], accum = m->v[MODE_MATMUL_ACCUM], fma = m->v[MODE_MATMUL_FMA];
	float *pa = load_operands(a, operand), *pb = load_operands(b, operand);
	if (!pa || !pb) {
		free(pa);
		free(pb);
		return ALIGN_ERR_INTERNAL;
	}
	for (int64_t t = 0; t < T; t++)
		for (int64_t f = 0; f < F; f++)
			ops_st(&out[0], t * F + f, matmul_dot(pa + t * D, pb + f * D, D, accum, fma));
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

static const struct align_tensor_spec in_specs[] = {
	{"a", ALIGN_DT_F32, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 10.0f}, "activations"},
	{"b", ALIGN_DT_F32, "F,D", {ALIGN_FILL_SPECIAL, 0.03f, 0.5f}, "weight, torch Linear layout"},
};
static const struct align_tensor_spec out_specs[] = {
	{"y", ALIGN_DT_BF16, "T,F", {ALIGN_FILL_NORMAL, 0, 0}, "a @ b^T (bf16 or f32 per MATMUL_OUT)"},
};
static const int modes_read[] = {MODE_MATMUL_OPERAND, MODE_MATMUL_ACCUM, MODE_MATMUL_FMA, MODE_MATMUL_OUT,
				 MODE_MATMUL_IMPL, -1}; /* IMPL: portable here; tc and cublas are GPU only */

const struct align_op_impl matmul_impl = {
	2, in_specs, 1, out_specs, "T=16,D=4096,F=64", modes_read, sizeof(struct matmul_params),
	params_default, params_variant, fwd, out_dtype, NULL,
};
