/* ops.c: the op registry built from ops.def, dims and shape expressions, tensor allocation and
 * input filling (ops_fill_input) shared by every op and driver. */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static const struct align_op ops_table[ALIGN_OP_COUNT] = {
#define OP(name, desc, inputs) {#name, desc, inputs, &name##_impl},
#include "ops.def"
#undef OP
};

const struct align_op *ops_find(const char *name)
{
	for (int i = 0; i < ALIGN_OP_COUNT; i++)
		if (strcmp(ops_table[i].name, name) == 0)
			return &ops_table[i];
	return NULL;
}

/* ops whose parameter variants have names, in params_variant order (append rows) */
static const struct {
	const char *op, *joined;
	const char *names[4];
} variant_names[] = {
	{"attn", "csa, hca, swa", {"csa", "hca", "swa", NULL}},
	{"attn_bwd", "csa, hca, swa", {"csa", "hca", "swa", NULL}},
};

int ops_variant_index(const struct align_op *op, const char *name)
{
	for (size_t i = 0; op && name && i < sizeof variant_names / sizeof variant_names[0]; i++)
		if (!strcmp(variant_names[i].op, op->name))
			for (int k = 0; k < 4 && variant_names[i].names[k]; k++)
				if (!strcmp(variant_names[i].names[k], name))
					return k;
	return -1;
}

const char *ops_variant_names(const struct align_op *op)
{
	for (size_t i = 0; op && i < sizeof variant_names / sizeof variant_names[0]; i++)
		if (!strcmp(variant_names[i].op, op->name))
			return variant_names[i].joined;
	return NULL;
}

const struct align_op *ops_at(int i)
{
	return i >= 0 && i < ALIGN_OP_COUNT ? &ops_table[i] : NULL;
}

int ops_op_reads_mode(const struct align_op *op, int mode_id)
{
	for (const int *p = op->impl->modes; *p >= 0; p++)
		if (*p == mode_id)
			return 1;
	return 0;
}

static const struct {
	const char *op;
	int mode, value;
} refusals[] = {
	{"qnorm", MODE_RMSNORM_REDUCE, ALIGN_RMSNORM_REDUCE_TORCH},
	{"qnorm_bwd", MODE_RMSNORM_REDUCE, ALIGN_RMSNORM_REDUCE_TORCH},
	{"compressor_bwd", MODE_RMSNORM_REDUCE, ALIGN_RMSNORM_REDUCE_TORCH},
	{"attn", MODE_RMSNORM_REDUCE, ALIGN_RMSNORM_REDUCE_TORCH},
	{"attn_bwd", MODE_RMSNORM_REDUCE, ALIGN_RMSNORM_REDUCE_TORCH},
};

int ops_op_refuses(const struct align_op *op, int mode_id, int value)
{
	for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
		if (refusals[i].mode == mode_id && refusals[i].value == value && !strcmp(refusals[i].op, op->name))
			return 1;
	return 0;
}

static const struct {
	const char *op, *out;
} not_rows[] = {
	{"attn_bwd", "dx"},
};

int ops_out_not_rows(const struct align_op *op, int out_index)
{
	for (size_t i = 0; i < sizeof not_rows / sizeof not_rows[0]; i++)
		if (!strcmp(not_rows[i].op, op->name) && !strcmp(not_rows[i].out, op->impl->out[out_index].name))
			return 1;
	return 0;
}

int ops_refused_in(const struct align_op *op, const struct align_modes *m)
{
	for (const int *p = op->impl->modes; *p >= 0; p++)
		if (ops_op_refuses(op, *p, m->v[*p]))
			return 1;
	return 0;
}

int ops_fwd_cpu(const struct align_op *op, const void *params, const struct align_modes *m,
		const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	if (modes_refused_on(m, op->impl->modes, ALIGN_DEVICE_CPU) >= 0)
		return ALIGN_ERR_UNSUPPORTED; /* a GPU-only mimic value: never substituted on the CPU */
	return op->impl->fwd_cpu(params, m, in, n_in, out, n_out);
}

/* "bf16[3,8]" */
static void tensor_text(int dtype, const int64_t *shape, int ndim, char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "%s[", align_dtype_name(dtype));
	for (int i = 0; i < ndim && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "", (long long)shape[i]);
	if (used < len)
		snprintf(buf + used, len - used, "]");
}

int ops_check_inputs(const struct align_op *op, const struct align_dims *d, const struct align_tensor *in, int n_in,
		     struct align_err *err)
{
	const struct align_op_impl *im = op->impl;
	if (n_in != im->n_in)
		return align_fail(err, ALIGN_ERR_INPUT, "op '%s': %d inputs given, it takes %d", op->name, n_in,
				  im->n_in);
	for (int i = 0; i < n_in; i++) {
		const struct align_tensor_spec *sp = &im->in[i];
		int64_t shape[4];
		int ndim;
		if (ops_shape_eval(sp->shape, d, shape, &ndim))
			return align_fail(err, ALIGN_ERR_INPUT,
					  "op '%s': input '%s': shape '%s' has no value for these dims", op->name,
					  sp->name, sp->shape);
		int dt = sp->dtype; /* a mode-dependent input dtype (im->in_dtype): any float dtype here */
		if (im->in_dtype &&
		    (in[i].dtype == ALIGN_DT_F32 || in[i].dtype == ALIGN_DT_BF16 || in[i].dtype == ALIGN_DT_F16))
			dt = in[i].dtype;
		if (in[i].data && ops_check(&in[i], dt, ndim, shape) == ALIGN_OK)
			continue;
		char want[96], got[96];
		tensor_text(sp->dtype, shape, ndim, want, sizeof want);
		tensor_text(in[i].dtype, in[i].shape, in[i].ndim < 0 || in[i].ndim > 4 ? 0 : in[i].ndim, got,
			    sizeof got);
		return align_fail(err, ALIGN_ERR_INPUT, "op '%s': input '%s' is %s, expected %s%s", op->name, sp->name,
				  got, want, in[i].data ? "" : " (no data)");
	}
	return ALIGN_OK;
}

size_t align_dtype_size(int dtype)
{
	return dtype == ALIGN_DT_BF16 || dtype == ALIGN_DT_F16 ? 2 : 4;
}

const char *align_dtype_name(int dtype)
{
	switch (dtype) {
	case ALIGN_DT_F32:
		return "f32";
	case ALIGN_DT_BF16:
		return "bf16";
	case ALIGN_DT_I32:
		return "i32";
	case ALIGN_DT_F16:
		return "f16";
	default:
		return "?";
	}
}

int64_t align_tensor_numel(const struct align_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

int ops_dims_parse(const char *text, struct align_dims *d, char *err, size_t errlen)
{
	const char *p = text;
	while (*p) {
		const char *letter = strchr(ALIGN_DIM_LETTERS, *p);
		char *end;
		if (!letter || p[1] != '=') {
			if (err && errlen)
				snprintf(err, errlen, "bad dims '%s' at '%s' (want L=n,... with L in %s)", text, p,
					 ALIGN_DIM_LETTERS);
			return ALIGN_ERR_INPUT;
		}
		long long v = strtoll(p + 2, &end, 10);
		if (end == p + 2 || v <= 0 || (*end && *end != ',')) {
			if (err && errlen)
				snprintf(err, errlen, "bad dims '%s': '%c' needs a positive integer", text, *p);
			return ALIGN_ERR_INPUT;
		}
		d->v[letter - ALIGN_DIM_LETTERS] = v;
		p = *end ? end + 1 : end;
	}
	return ALIGN_OK;
}

int ops_dims_default(const struct align_op *op, struct align_dims *d)
{
	memset(d, 0, sizeof *d);
	return ops_dims_parse(op->impl->dims, d, NULL, 0);
}

/* recursive descent: expr := term ('+' term)*; term := factor ('*' factor)*;
 * factor := number | dim letter | '(' expr ')' */
static int64_t shape_expr(const char **s, const struct align_dims *d, int *ok);

static int64_t shape_factor(const char **s, const struct align_dims *d, int *ok)
{
	const char *letter;
	if (**s == '(') {
		(*s)++;
		int64_t v = shape_expr(s, d, ok);
		if (**s != ')')
			*ok = 0;
		else
			(*s)++;
		return v;
	}
	if (**s >= '0' && **s <= '9') {
		int64_t v = 0;
		while (**s >= '0' && **s <= '9')
			v = v * 10 + (*(*s)++ - '0');
		return v;
	}
	if (**s && (letter = strchr(ALIGN_DIM_LETTERS, **s)) != NULL) {
		(*s)++;
		return d->v[letter - ALIGN_DIM_LETTERS];
	}
	*ok = 0;
	return 0;
}

static int64_t shape_term(const char **s, const struct align_dims *d, int *ok)
{
	int64_t v = shape_factor(s, d, ok);
	while (**s == '*') {
		(*s)++;
		v *= shape_factor(s, d, ok);
	}
	return v;
}

static int64_t shape_expr(const char **s, const struct align_dims *d, int *ok)
{
	int64_t v = shape_term(s, d, ok);
	while (**s == '+') {
		(*s)++;
		v += shape_term(s, d, ok);
	}
	return v;
}

int ops_shape_eval(const char *expr, const struct align_dims *d, int64_t shape[4], int *ndim)
{
	const char *s = expr;
	int ok = 1, n = 0;
	while (ok) {
		if (n == 4)
			return ALIGN_ERR_INPUT;
		shape[n] = shape_expr(&s, d, &ok);
		if (shape[n] <= 0)
			ok = 0;
		n++;
		if (*s == ',')
			s++;
		else
			break;
	}
	if (!ok || *s)
		return ALIGN_ERR_INPUT;
	*ndim = n;
	return ALIGN_OK;
}

int ops_tensor_alloc(const struct align_op *op, int is_out, int idx, const struct align_dims *d,
		     const struct align_modes *m, struct align_tensor *t)
{
	const struct align_op_impl *im = op->impl;
	if (idx < 0 || idx >= (is_out ? im->n_out : im->n_in))
		return ALIGN_ERR_INPUT;
	const struct align_tensor_spec *sp = is_out ? &im->out[idx] : &im->in[idx];
	memset(t, 0, sizeof *t);
	if (ops_shape_eval(sp->shape, d, t->shape, &t->ndim))
		return ALIGN_ERR_INPUT;
	t->dtype = sp->dtype;
	if (is_out && im->out_dtype && m)
		t->dtype = im->out_dtype(m, idx);
	if (!is_out && im->in_dtype && m)
		t->dtype = im->in_dtype(m, idx);
	t->name = sp->name;
	t->data = calloc((size_t)align_tensor_numel(t), align_dtype_size(t->dtype));
	return t->data ? ALIGN_OK : ALIGN_ERR_INTERNAL;
}

void ops_tensor_free(struct align_tensor *t)
{
	free(t->data);
	t->data = NULL;
}

int ops_check(const struct align_tensor *t, int dtype, int ndim, const int64_t *shape)
{
	if (!t || !t->data || t->dtype != dtype || t->ndim != ndim)
		return ALIGN_ERR_INPUT;
	for (int i = 0; i < ndim; i++)
		if (t->shape[i] != shape[i])
			return ALIGN_ERR_INPUT;
	return ALIGN_OK;
}

/* K distinct ids in [0, n) for row r: a counter-hash shuffle of the first draws */
static void fill_distinct_row(int32_t *row, int64_t k, int64_t n, uint64_t seed, uint64_t stream, int64_t r)
{
	for (int64_t j = 0; j < k; j++) {
		uint64_t draw = 0;
		for (int tries = 0;; tries++) {
			int32_t cand =
				(int32_t)(align_rng_u64(seed, stream, (uint64_t)(r * k + j) * 64 + (uint64_t)tries) %
					  (uint64_t)n);
			int dup = 0;
			for (int64_t i = 0; i < j; i++)
				dup |= row[i] == cand;
			if (!dup || tries > 60) {
				row[j] = dup ? (int32_t)((j + draw) % (uint64_t)n) : cand;
				break;
			}
			draw++;
		}
	}
}

int ops_fill_input(const struct align_op *op, int input_index, struct align_tensor *t, uint64_t seed, int step)
{
	if (input_index < 0 || input_index >= op->impl->n_in)
		return ALIGN_ERR_INPUT;
	return ops_fill_tensor(&op->impl->in[input_index].fill, op->name, t, seed, step);
}

int ops_fill_input_dims(const struct align_op *op, int input_index, struct align_tensor *t, const struct align_dims *d,
			uint64_t seed, int step)
{
	if (input_index < 0 || input_index >= op->impl->n_in)
		return ALIGN_ERR_INPUT;
	struct align_fill f = op->impl->in[input_index].fill;
	const char *at = f.dim ? strchr(ALIGN_DIM_LETTERS, f.dim) : NULL;
	if (at && d && d->v[at - ALIGN_DIM_LETTERS] > 0)
		f.limit = (float)d->v[at - ALIGN_DIM_LETTERS];
	return ops_fill_tensor(&f, op->name, t, seed, step);
}

int ops_fill_tensor(const struct align_fill *f, const char *op_name, struct align_tensor *t, uint64_t seed, int step)
{
	if (!t->data || !t->name)
		return ALIGN_ERR_INPUT;
	char name[96];
	snprintf(name, sizeof name, "%s.%s", op_name, t->name);
	uint64_t stream = align_rng_stream(name, step);
	int64_t n = align_tensor_numel(t);
	if (t->dtype == ALIGN_DT_I32) {
		int32_t *p = t->data;
		int64_t lim = f->limit > 0 ? (int64_t)f->limit : 1;
		if (f->kind == ALIGN_FILL_EXPERT_IDS) {
			int64_t k = t->shape[t->ndim - 1];
			if (k > lim)
				return ALIGN_ERR_INPUT;
			for (int64_t r = 0; r < n / k; r++)
				fill_distinct_row(p + r * k, k, lim, seed, stream, r);
		} else if (f->kind == ALIGN_FILL_KV_IDX) {
			int64_t k = t->shape[t->ndim - 1];
			for (int64_t i = 0; i < n; i++) {
				int64_t r = i / k; /* a row's draws depend on its index only (batch invariance) */
				int empty = align_rng_u64(seed, stream ^ 0x9e3779b97f4a7c15ull, (uint64_t)r) % 16 == 0;
				uint64_t v = align_rng_u64(seed, stream, (uint64_t)i) % (uint64_t)(lim + (lim + 7) / 8);
				p[i] = empty || v >= (uint64_t)lim ? -1 : (int32_t)v;
			}
		} else {
			for (int64_t i = 0; i < n; i++)
				p[i] = (int32_t)(align_rng_u64(seed, stream, (uint64_t)i) % (uint64_t)lim);
		}
		return ALIGN_OK;
	}
	for (int64_t i = 0; i < n; i++) {
		float v;
		switch (f->kind) {
		case ALIGN_FILL_SPECIAL:
			v = align_rng_special(seed, stream, (uint64_t)i, f->scale, f->limit, 0);
			break;
		case ALIGN_FILL_EXTREME:
			v = align_rng_special(seed, stream, (uint64_t)i, f->scale, f->limit, 1);
			break;
		case ALIGN_FILL_POSITIVE:
			v = (align_rng_uniform(seed, stream, (uint64_t)i) + 0x1p-24f) * f->scale;
			break;
		case ALIGN_FILL_CONST:
			v = f->scale;
			break;
		case ALIGN_FILL_NORMAL:
		default:
			v = align_rng_normalish(seed, stream, (uint64_t)i) * f->scale;
			break;
		}
		ops_st(t, i, v);
	}
	return ALIGN_OK;
}
