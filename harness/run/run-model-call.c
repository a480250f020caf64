/* run-model-call: the activations of one step of `align run model` and the calls of the registered ops
 * (their C twins, or their CUDA twins on copies of the host tensors with --device cuda), each output
 * traced as "<scope>.<op>.<tensor>". */
#include "align-config.h"
#include "err.h"
#include "run-model-impl.h"
#if ALIGN_HAVE_CUDA
#include "run-device.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int keep(struct model *md, void *data)
{
	if (!data)
		return fail_internal(merr(md), "out of memory");
	if (md->ntmp == MODEL_TMP) {
		free(data);
		return fail_internal(merr(md), "model: too many activations in one step");
	}
	md->tmp[md->ntmp++] = data;
	return ALIGN_OK;
}

void release(struct model *md)
{
	for (int i = 0; i < md->ntmp; i++)
		free(md->tmp[i]);
	md->ntmp = 0;
}

/* A new zeroed activation of the step. */
int tnew(struct model *md, struct align_tensor *t, int dtype, const char *name, int ndim, int64_t a, int64_t b,
	 int64_t c)
{
	memset(t, 0, sizeof *t);
	t->dtype = dtype, t->ndim = ndim, t->name = name;
	t->shape[0] = a, t->shape[1] = b, t->shape[2] = c;
	return keep(md, t->data = calloc((size_t)align_tensor_numel(t), align_dtype_size(dtype)));
}

/* src's values as dtype in a new activation of the given shape (same element count). */
int tcast(struct model *md, const struct align_tensor *src, struct align_tensor *t, int dtype, int ndim, int64_t a,
	  int64_t b, int64_t c)
{
	ALIGN_TRY(merr(md), tnew(md, t, dtype, src->name, ndim, a, b, c));
	if (align_tensor_numel(t) != align_tensor_numel(src))
		return fail_internal(merr(md), "model: cast of '%s' changes its size", src->name);
	for (int64_t i = 0; i < align_tensor_numel(t); i++)
		ops_st(t, i, ops_ld(src, i));
	return ALIGN_OK;
}

/* The weight named "<prefix>.<name>" ("<name>" when prefix is NULL); it exists (model_weights). */
const struct align_tensor *W(struct model *md, const char *prefix, const char *name)
{
	char full[64];
	snprintf(full, sizeof full, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", name);
	for (int i = 0; i < md->np; i++)
		if (!strcmp(md->p[i].name, full))
			return &md->p[i].t;
	return NULL;
}

/* Rows [row0, row0 + rows) of the fp32 weight w, a view. */
struct align_tensor wrows(const struct align_tensor *w, int64_t row0, int64_t rows)
{
	struct align_tensor v = *w;
	v.data = (float *)w->data + row0 * w->shape[1];
	v.shape[0] = rows;
	return v;
}

/* Op `name` on in[] with dims text; out[] allocated as the step's activations. Outputs traced as
 * "<scope>.<name>.<tensor>" unless scope is NULL. tweak (may be NULL) edits the default params. */
int op(struct model *md, const char *scope, const char *name, const char *dims, struct align_tensor *in,
       struct align_tensor *out, void (*tweak)(void *params))
{
	struct align_err *e = merr(md);
	const struct align_op *o = ops_find(name);
	struct align_dims d = {0};
	char err[256];
	if (!o || ops_dims_parse(dims, &d, err, sizeof err))
		return fail_internal(e, "model: op '%s' dims '%s'", name, dims);
	const struct align_op_impl *im = o->impl;
	void *params = calloc(1, im->params_size + 1);
	ALIGN_TRY(e, keep(md, params));
	im->params_default(params, &d);
	if (tweak)
		tweak(params);
	for (int k = 0; k < im->n_out; k++) {
		if (ops_tensor_alloc(o, 1, k, &d, md->m, &out[k]))
			return fail_internal(e, "model: op '%s': output %d", name, k);
		ALIGN_TRY(e, keep(md, out[k].data));
	}
	ALIGN_TRY(e, ops_check_inputs(o, &d, in, im->n_in, e));
	int rc;
#if ALIGN_HAVE_CUDA
	if (md->dev)
		rc = run_device_op(md->dev, o, params, md->m, in, im->n_in, out, im->n_out);
	else
#endif
		rc = ops_fwd_cpu(o, params, md->m, in, im->n_in, out, im->n_out);
	if (rc == ALIGN_ERR_UNSUPPORTED)
		return align_fail(e, rc, "model: op '%s': these modes are not supported on the %s", name,
				  md->dev ? "GPU" : "CPU");
	if (rc == ALIGN_ERR_INTERNAL && md->dev)
		return rc; /* the device message is in e or printed */
	if (rc)
		return fail_internal(e, "model: op '%s' failed (%d)", name, rc);
	if (!scope || !md->tr->f)
		return ALIGN_OK;
	char full[160];
	snprintf(full, sizeof full, "%s.%s", scope, name);
	for (int k = 0; k < im->n_out; k++)
		ALIGN_TRY(e, run_trace_tensor(md->tr, full, md->step, "fwd", &out[k]));
	return ALIGN_OK;
}

/* y = x @ w^T on the matmul op (operands as the modes say), stored as dtype [rows, ...]. */
int linear(struct model *md, const char *scope, const char *name, const struct align_tensor *x,
	   const struct align_tensor *w, int dtype, struct align_tensor *y)
{
	struct align_tensor in[2], out[1];
	int64_t T = x->shape[0], Din = align_tensor_numel(x) / T;
	ALIGN_TRY(merr(md), tcast(md, x, &in[0], ALIGN_DT_F32, 2, T, Din, 0));
	in[0].name = "a";
	in[1] = *w;
	in[1].name = "b";
	char dims[96];
	snprintf(dims, sizeof dims, "T=%lld,D=%lld,F=%lld", (long long)T, (long long)Din, (long long)w->shape[0]);
	ALIGN_TRY(merr(md), op(md, NULL, "matmul", dims, in, out, NULL));
	ALIGN_TRY(merr(md), tcast(md, &out[0], y, dtype, 2, T, w->shape[0], 0));
	y->name = "y";
	if (scope && md->tr->f) {
		char full[160];
		snprintf(full, sizeof full, "%s.%s", scope, name);
		ALIGN_TRY(merr(md), run_trace_tensor(md->tr, full, md->step, "fwd", y));
	}
	return ALIGN_OK;
}

int rmsnorm(struct model *md, const char *scope, const struct align_tensor *x, const struct align_tensor *w,
	    struct align_tensor *y)
{
	struct align_tensor in[2] = {*x, *w};
	in[0].name = "x", in[1].name = "w";
	char dims[64];
	snprintf(dims, sizeof dims, "T=%lld,D=%lld", (long long)x->shape[0], (long long)x->shape[1]);
	return op(md, scope, "rmsnorm", dims, in, y, NULL);
}

/* mhc_pre of the streams x: y (the sublayer input), post and comb for mhc_post. */
int hc_pre(struct model *md, const char *scope, const char *pre, const struct align_tensor *x,
	   struct align_tensor out[4])
{
	struct align_tensor in[4] = {*x, *W(md, pre, "hc_fn"), *W(md, pre, "hc_base"), *W(md, pre, "hc_scale")};
	in[0].name = "x", in[1].name = "fn", in[2].name = "base", in[3].name = "scale";
	char dims[64];
	snprintf(dims, sizeof dims, "T=%d,N=%d,D=%d", MODEL_T, MODEL_N, MODEL_D);
	return op(md, scope, "mhc_pre", dims, in, out, NULL);
}

int hc_post(struct model *md, const char *scope, struct align_tensor *x, const struct align_tensor *f,
	    const struct align_tensor pre[4])
{
	struct align_tensor in[4] = {*x, *f, pre[2], pre[3]}, out[1];
	in[0].name = "x", in[1].name = "f", in[2].name = "post", in[3].name = "comb";
	char dims[64];
	snprintf(dims, sizeof dims, "T=%d,N=%d,D=%d", MODEL_T, MODEL_N, MODEL_D);
	ALIGN_TRY(merr(md), op(md, scope, "mhc_post", dims, in, out, NULL));
	*x = out[0];
	return ALIGN_OK;
}
