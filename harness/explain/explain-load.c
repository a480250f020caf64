/* explain-load: the op invocation of `align explain` from safetensors files (--inputs: the op's input
 * names as `align run --list` gives them; --output: its output names), checked against the op's specs:
 * a missing tensor, an unknown dtype, a wrong dtype or shape is exit 2 with a message naming the file
 * and the tensor. Dims come from the op's defaults, then from the input shapes (a spec extent that is
 * one dim letter), then from --shape. Also the screening slices: for the ops whose rows along T are
 * computed independently of each other (DESIGN rule 4, batch invariance: a row's bits do not depend
 * on the other rows), the first rows of every T-leading tensor, as views into the whole tensors. */
#include "ctx.h"
#include "coll.h"
#include "err.h"
#include "explain.h"
#include "safetensors.h"

#include <stdlib.h>
#include <string.h>

/* Ops whose outputs' row t depends only on the inputs' row t (and the tensors without a T dim). The
 * indexer is not one (its causal mask reads the row's position t); the collectives have no T. */
static const char *const row_ops[] = {"matmul",	  "rmsnorm",  "qnorm",	     "swiglu",	    "router", "mhc_pre",
				      "mhc_post", "mhc_head", "moe_combine", "sparse_attn", "rope",   NULL};

int ex_dtype_of(const char *name)
{
	return !strcmp(name, "fp32")	? ALIGN_DT_F32
	       : !strcmp(name, "bf16")	? ALIGN_DT_BF16
	       : !strcmp(name, "int32") ? ALIGN_DT_I32
	       : !strcmp(name, "fp16")	? ALIGN_DT_F16
					: -1;
}

static const char *dt_name(int dt)
{
	return dt == ALIGN_DT_BF16 ? "bf16" : dt == ALIGN_DT_I32 ? "int32" : dt == ALIGN_DT_F16 ? "fp16" : "fp32";
}

/* a copy of s as tensor t (name from the spec) */
static int take(struct align_err *e, const char *path, const struct st_tensor *s, const char *name,
		struct align_tensor *t)
{
	int dt = ex_dtype_of(s->dtype);
	if (dt < 0)
		return fail_input(e, "%s: tensor '%s' is %s; the ops take fp32, bf16, fp16 or int32", path, s->name,
				  s->dtype);
	if (s->ndim < 1 || s->ndim > 4)
		return fail_input(e, "%s: tensor '%s' has %d dims; the ops' tensors have 1 to 4", path, s->name,
				  s->ndim);
	memset(t, 0, sizeof *t);
	t->dtype = dt, t->ndim = s->ndim, t->name = name;
	memcpy(t->shape, s->shape, sizeof t->shape);
	t->data = malloc(s->bytes ? s->bytes : 1);
	if (!t->data)
		return fail_internal(e, "out of memory");
	memcpy(t->data, s->data, s->bytes);
	return ALIGN_OK;
}

static void list_names(char *buf, size_t len, const struct align_tensor_spec *sp, int n)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", sp[i].name);
}

int ex_load_files(struct align_ctx *ctx, struct ex_case *c, const char *inputs, const char *output, const char *shape,
		  int variant, struct st_file *inf, struct st_file *outf)
{
	struct align_err *e = &ctx->err;
	const struct align_op_impl *im = c->op->impl;
	char names[256];
	ALIGN_TRY(e, safetensors_read_err(inputs, inf, e));
	ALIGN_TRY(e, safetensors_read_err(output, outf, e));
	for (int i = 0; i < im->n_in; i++) {
		const struct st_tensor *s = safetensors_find(inf, im->in[i].name);
		if (!s) {
			list_names(names, sizeof names, im->in, im->n_in);
			return fail_input(e, "%s: no tensor '%s' (op '%s' takes %s)", inputs, im->in[i].name,
					  c->op->name, names);
		}
		ALIGN_TRY(e, take(e, inputs, s, im->in[i].name, &c->in[i]));
	}
	list_names(names, sizeof names, im->out, im->n_out);
	for (size_t j = 0; j < outf->n; j++) {
		int k = 0;
		while (k < im->n_out && strcmp(im->out[k].name, outf->t[j].name))
			k++;
		if (k == im->n_out)
			return fail_input(e, "%s: tensor '%s' is not an output of op '%s' (its outputs: %s)", output,
					  outf->t[j].name, c->op->name, names);
		ALIGN_TRY(e, take(e, output, &outf->t[j], im->out[k].name, &c->obs[k]));
	}
	if (!outf->n)
		return fail_input(e, "%s: no tensors (op '%s' writes %s)", output, c->op->name, names);
	snprintf(c->in_src, sizeof c->in_src, "%s", inputs);
	snprintf(c->out_src, sizeof c->out_src, "%s", output);
	return ex_case_prepare(ctx, c, shape, variant, EX_SCREEN_ROWS);
}

/* dims named by the inputs' shapes: a spec extent that is a single dim letter takes the tensor's */
static int infer_dims(struct align_err *e, struct ex_case *c, struct align_dims *d)
{
	const struct align_op_impl *im = c->op->impl;
	int64_t got[ALIGN_DIM_COUNT] = {0};
	const char *from[ALIGN_DIM_COUNT] = {0};
	for (int i = 0; i < im->n_in; i++) {
		const char *p = im->in[i].shape;
		for (int ax = 0; *p && ax < c->in[i].ndim; ax++) {
			const char *end = strchr(p, ',');
			size_t len = end ? (size_t)(end - p) : strlen(p);
			const char *at = len == 1 ? strchr(ALIGN_DIM_LETTERS, *p) : NULL;
			if (at && *at) {
				int k = (int)(at - ALIGN_DIM_LETTERS);
				if (got[k] && got[k] != c->in[i].shape[ax])
					return fail_input(
						e, "%s: tensors '%s' and '%s' disagree on dim %c (%lld and %lld)",
						c->in_src, from[k], im->in[i].name, *p, (long long)got[k],
						(long long)c->in[i].shape[ax]);
				got[k] = c->in[i].shape[ax], from[k] = im->in[i].name;
			}
			p += len + (end != NULL);
		}
	}
	for (int k = 0; k < ALIGN_DIM_COUNT; k++)
		if (got[k] && d->v[k])
			d->v[k] = got[k];
	return ALIGN_OK;
}

static int same_shape(const struct align_tensor *t, const int64_t *shape, int ndim)
{
	if (t->ndim != ndim)
		return 0;
	for (int i = 0; i < ndim; i++)
		if (t->shape[i] != shape[i])
			return 0;
	return 1;
}

static void shape_text(char *buf, size_t len, const int64_t *shape, int ndim)
{
	size_t used = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < ndim && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "", (long long)shape[i]);
	if (used < len)
		snprintf(buf + used, len - used, "]");
}

/* every tensor against the op's spec for dims d (dtypes: inputs exactly, unless the modes decide it) */
static int check_shapes(struct align_err *e, struct ex_case *c)
{
	const struct align_op_impl *im = c->op->impl;
	for (int i = 0; i < im->n_in + im->n_out; i++) {
		int is_out = i >= im->n_in, k = is_out ? i - im->n_in : i;
		const struct align_tensor_spec *sp = is_out ? &im->out[k] : &im->in[k];
		const struct align_tensor *t = is_out ? &c->obs[k] : &c->in[k];
		if (!t->data)
			continue;
		int64_t shape[4];
		int ndim;
		if (ops_shape_eval(sp->shape, &c->d, shape, &ndim))
			return fail_input(e, "op '%s': shape \"%s\" of '%s' does not evaluate for these dims",
					  c->op->name, sp->shape, sp->name);
		char want[96], got[96];
		shape_text(want, sizeof want, shape, ndim);
		shape_text(got, sizeof got, t->shape, t->ndim);
		if (!same_shape(t, shape, ndim))
			return fail_input(e,
					  "%s: tensor '%s' has shape %s, op '%s' needs %s (%s) for these dims (pass "
					  "--shape)",
					  is_out ? c->out_src : c->in_src, sp->name, got, c->op->name, want, sp->shape);
		int float_in = !is_out && im->in_dtype && t->dtype != ALIGN_DT_I32;
		if (!is_out && !float_in && t->dtype != sp->dtype)
			return fail_input(e, "%s: tensor '%s' is %s, op '%s' takes %s", c->in_src, sp->name,
					  dt_name(t->dtype), c->op->name, dt_name(sp->dtype));
	}
	return ALIGN_OK;
}

static const char *env_get(const char *name)
{
	return getenv(name);
}

static int is_row_op(const char *name)
{
	for (int i = 0; row_ops[i]; i++)
		if (!strcmp(row_ops[i], name))
			return 1;
	return 0;
}

/* views of the first rows of every T-leading tensor */
static void make_slices(struct ex_case *c, int rows)
{
	const struct align_op_impl *im = c->op->impl;
	int64_t T = c->d.v[ALIGN_DIM_T];
	c->rows = 0;
	if (rows <= 0 || !T || rows >= T || !is_row_op(c->op->name))
		return;
	c->rows = rows;
	c->sd = c->d;
	c->sd.v[ALIGN_DIM_T] = rows;
	for (int i = 0; i < im->n_in + im->n_out; i++) {
		int is_out = i >= im->n_in, k = is_out ? i - im->n_in : i;
		const struct align_tensor_spec *sp = is_out ? &im->out[k] : &im->in[k];
		const struct align_tensor *t = is_out ? &c->obs[k] : &c->in[k];
		struct align_tensor *v = is_out ? &c->sobs[k] : &c->sin[k];
		*v = *t;
		if (t->data && sp->shape[0] == 'T' && (sp->shape[1] == ',' || !sp->shape[1]))
			v->shape[0] = rows;
	}
}

int ex_case_prepare(struct align_ctx *ctx, struct ex_case *c, const char *shape, int variant, int screen_rows)
{
	struct align_err *e = &ctx->err;
	const struct align_op_impl *im = c->op->impl;
	ops_dims_default(c->op, &c->d);
	ALIGN_TRY(e, infer_dims(e, c, &c->d));
	if (shape) {
		struct align_dims over = {0};
		char err[256];
		if (ops_dims_parse(shape, &over, err, sizeof err))
			return fail_input(e, "option '--shape': %s", err);
		for (int k = 0; k < ALIGN_DIM_COUNT; k++) {
			if (over.v[k] && !c->d.v[k])
				return fail_input(e, "option '--shape': op '%s' has no dim '%c' (its dims: %s)",
						  c->op->name, ALIGN_DIM_LETTERS[k], im->dims);
			if (over.v[k])
				c->d.v[k] = over.v[k];
		}
	}
	ALIGN_TRY(e, check_shapes(e, c));
	c->n_obs = 0, c->obs_elems = 0;
	for (int k = 0; k < im->n_out; k++)
		if (c->obs[k].data)
			c->n_obs++, c->obs_elems += align_tensor_numel(&c->obs[k]);
	c->params = calloc(1, im->params_size + 1);
	if (!c->params)
		return fail_internal(e, "out of memory");
	im->params_default(c->params, &c->d);
	if (ops_op_reads_mode(c->op, MODE_COLL_IMPL))
		ALIGN_TRY(e, coll_params_from_env(c->params, (int)c->d.v[ALIGN_DIM_N], env_get, e));
	c->variant = variant;
	if (variant && (!im->params_variant || !im->params_variant(c->params, &c->d, variant)))
		return fail_input(e, "--variant %d: op '%s' has no such parameter variant", variant, c->op->name);
	make_slices(c, screen_rows);
	return ALIGN_OK;
}

void ex_case_free(struct ex_case *c)
{
	for (int i = 0; i < EX_MAX_T; i++) {
		ops_tensor_free(&c->in[i]);
		ops_tensor_free(&c->obs[i]);
	}
	free(c->params);
	c->params = NULL;
}
