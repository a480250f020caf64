/* op_cfg.h: pieces of the ops' config builders (X_cfg_init in kernels/ops/X.c, compiled as C and called
 * by both twins): tensor checks whose message names the op, the tensor and expected vs got, the two mode
 * refusals worded once, and the tensor descriptors an op's cfg_check (ops.h) builds from dims.
 * Include from the ops' .c files (and .cu files, for op_cfg_data, after ops_cuda.h).
 */
#ifndef ALIGN_OP_CFG_H
#define ALIGN_OP_CFG_H

#include <stdio.h>
#include <string.h>

#include "ops.h"

/* "bf16 [32,2048]" into buf */
static inline void op_cfg_desc(char *buf, size_t len, int dtype, int ndim, const int64_t *shape)
{
	int n = snprintf(buf, len, "%s [", align_dtype_name(dtype));
	ndim = ndim < 0 ? 0 : ndim > 4 ? 4 : ndim;
	for (int i = 0; i < ndim && n > 0 && (size_t)n < len; i++)
		n += snprintf(buf + n, len - (size_t)n, i ? ",%lld" : "%lld", (long long)shape[i]);
	if (n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "]");
}

/* ALIGN_OK when t is dtype [shape]; else ALIGN_ERR_INPUT with "<op>: input 'u' must be bf16 [32,2048], got
 * f32 [32,2048]" (role: "input" or "output"). t->data is not looked at (cfg_check passes descriptors). */
static inline int op_cfg_tensor(struct align_err *err, const char *op, const char *role, const char *name,
				const struct align_tensor *t, int dtype, int ndim, const int64_t *shape)
{
	int ok = t->dtype == dtype && t->ndim == ndim;
	for (int i = 0; ok && i < ndim; i++)
		ok = t->shape[i] == shape[i];
	if (ok)
		return ALIGN_OK;
	char want[96], got[96];
	op_cfg_desc(want, sizeof want, dtype, ndim, shape);
	op_cfg_desc(got, sizeof got, t->dtype, t->ndim, t->shape);
	return align_fail(err, ALIGN_ERR_INPUT, "%s: %s '%s' must be %s, got %s", op, role, name, want, got);
}

/* the argument counts (and the pointers) before any tensor is read */
static inline int op_cfg_counts(struct align_err *err, const char *op, const struct align_modes *m,
				const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
				int want_in, int want_out)
{
	if (m && in && out && n_in == want_in && n_out == want_out)
		return ALIGN_OK;
	return align_fail(err, ALIGN_ERR_INPUT, "%s: want modes, %d inputs and %d outputs, got %s, %d and %d", op,
			  want_in, want_out, m ? "modes" : "none", in ? n_in : 0, out ? n_out : 0);
}

/* every tensor has its data (the twins run this after X_cfg_init, which accepts descriptors without) */
static inline int op_cfg_data(struct align_err *err, const char *op, const struct align_tensor *in, int n_in,
			      const struct align_tensor *out, int n_out)
{
	for (int i = 0; i < n_in + n_out; i++) {
		const struct align_tensor *t = i < n_in ? &in[i] : &out[i - n_in];
		if (!t->data)
			return align_fail(err, ALIGN_ERR_INPUT, "%s: %s %d has no data", op,
					  i < n_in ? "input" : "output", i < n_in ? i : i - n_in);
	}
	return ALIGN_OK;
}

/* value v of switch mode exists, but the twin on device has no code for it (never substituted) */
static inline int op_cfg_refuse(struct align_err *err, const char *op, int mode, int v, int device)
{
	const char *name = modes_value_name(mode, v);
	return align_fail(err, ALIGN_ERR_UNSUPPORTED, "%s: %s=%s is not supported on the %s", op, modes_info(mode)->env,
			  name ? name : "?", device == ALIGN_DEVICE_CUDA ? "GPU" : "CPU");
}

/* value v of switch mode reached the default of fn's switch: a modes.def row without its case */
static inline int op_cfg_unhandled(struct align_err *err, const char *op, int mode, int v, const char *fn)
{
	return align_fail(err, ALIGN_ERR_INTERNAL, "%s: %s value %d not handled by %s", op, modes_info(mode)->env, v,
			  fn);
}

/* A two-valued switch (off, on: its ALIGN_<ID>_<TOKEN> values, both run on either twin): *flag = value is
 * on; any other value is a modes.def row that fn does not handle (ALIGN_ERR_INTERNAL). */
static inline int op_cfg_flag(struct align_err *err, const char *op, const char *fn, const struct align_modes *m,
			      int mode, int off, int on, int *flag)
{
	int v = m->v[mode];
	if (v != off && v != on)
		return op_cfg_unhandled(err, op, mode, v, fn);
	*flag = v == on;
	return ALIGN_OK;
}

/* "<op>: input 'g' must have 2 dims, got 3" unless t has ndim dims (before its extents are read) */
static inline int op_cfg_rank(struct align_err *err, const char *op, const char *name, const struct align_tensor *t,
			      int ndim)
{
	if (t->ndim == ndim)
		return ALIGN_OK;
	return align_fail(err, ALIGN_ERR_INPUT, "%s: input '%s' must have %d dims, got %d", op, name, ndim, t->ndim);
}

/* MATH_IMPL for device into *math (the value): portable on both twins, libm on the CPU only, cuda and
 * cuda_fast on the GPU only */
static inline int op_cfg_math(struct align_err *err, const char *op, const char *fn, const struct align_modes *m,
			      int device, int *math)
{
	int v = m->v[MODE_MATH_IMPL];
	switch ((enum align_MATH_IMPL_value)v) {
	case ALIGN_MATH_IMPL_PORTABLE:
		break;
	case ALIGN_MATH_IMPL_LIBM: /* glibc: no GPU twin */
		if (device != ALIGN_DEVICE_CPU)
			return op_cfg_refuse(err, op, MODE_MATH_IMPL, v, device);
		break;
	case ALIGN_MATH_IMPL_CUDA: /* CUDA's own functions: no C twin */
	case ALIGN_MATH_IMPL_CUDA_FAST:
		if (device != ALIGN_DEVICE_CUDA)
			return op_cfg_refuse(err, op, MODE_MATH_IMPL, v, device);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_MATH_IMPL, v, fn);
	}
	*math = v;
	return ALIGN_OK;
}

/* descriptors (data NULL) of im's inputs and outputs for dims d and modes m (output dtypes per out_dtype),
 * for an op's cfg_check; at most 8 of each */
static inline int op_cfg_tensors(const struct align_op_impl *im, const struct align_modes *m,
				 const struct align_dims *d, struct align_tensor *in, struct align_tensor *out,
				 struct align_err *err)
{
	for (int i = 0; i < im->n_in + im->n_out; i++) {
		int is_out = i >= im->n_in, k = is_out ? i - im->n_in : i;
		const struct align_tensor_spec *sp = is_out ? &im->out[k] : &im->in[k];
		struct align_tensor *t = is_out ? &out[k] : &in[k];
		memset(t, 0, sizeof *t);
		t->dtype = sp->dtype;
		t->name = sp->name;
		if (ops_shape_eval(sp->shape, d, t->shape, &t->ndim))
			return align_fail(err, ALIGN_ERR_INPUT,
					  "%s '%s': shape \"%s\" does not evaluate for these dims",
					  is_out ? "output" : "input", sp->name, sp->shape);
		if (is_out && im->out_dtype)
			t->dtype = im->out_dtype(m, k);
		if (!is_out && im->in_dtype)
			t->dtype = im->in_dtype(m, k);
	}
	return ALIGN_OK;
}

#endif /* ALIGN_OP_CFG_H */
