/* ops.h: the common calling convention of every kernel op and the op registry (ops.def).
 *
 * A generic driver (tests, `align run`, later the CUDA twins' checks) does, for any op:
 *   op = ops_find("swiglu");
 *   ops_dims_default(op, &dims);            // or its own dims
 *   op->impl->params_default(params, &dims); // params buffer of op->impl->params_size bytes
 *   for each input i:  ops_tensor_alloc(op, 0, i, &dims, modes, &in[i]); ops_fill_input(op, i, &in[i], seed, step);
 *   for each output i: ops_tensor_alloc(op, 1, i, &dims, modes, &out[i]);
 *   rc = ops_fwd_cpu(op, params, modes, in, n_in, out, n_out);   // the C twin
 * ops_fwd_cpu refuses (ALIGN_ERR_UNSUPPORTED) a mode set in which a switch the op reads has a
 * GPU-only value (modes.def GPU_ONLY); the C twins never see those values. A driver that holds the dims
 * checks the inputs against the specs first (ops_check_inputs: one message naming op, input, expected
 * and got).
 * Tensors are dense row-major. Ops never allocate outputs; they check every shape and dtype and
 * return ALIGN_ERR_INPUT on a mismatch. Output dtypes may depend on the modes
 * (impl->out_dtype), which ops_tensor_alloc applies.
 */
#ifndef ALIGN_OPS_H
#define ALIGN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "modes.h"
#include "f16.h"
#include "numerics.h"

#include "status.h"

enum align_dtype {
	ALIGN_DT_F32,
	ALIGN_DT_BF16,
	ALIGN_DT_I32,
	ALIGN_DT_F16,
	ALIGN_DT_COUNT
}; /* F16: collectives only */

struct align_tensor {
	void *data;	  /* dense row-major elements */
	int dtype;	  /* enum align_dtype */
	int ndim;	  /* 1..4 */
	int64_t shape[4]; /* extents, outermost first */
	const char *name; /* "swiglu.g": also names the RNG stream */
};

/* Named dims; letters in ALIGN_DIM_LETTERS order. */
enum align_dim {
	ALIGN_DIM_T,
	ALIGN_DIM_D,
	ALIGN_DIM_E,
	ALIGN_DIM_K,
	ALIGN_DIM_F,
	ALIGN_DIM_N,
	ALIGN_DIM_G,
	ALIGN_DIM_H,
	ALIGN_DIM_V,
	ALIGN_DIM_S, /* key/value rows (sparse attention) */
	ALIGN_DIM_COUNT
};
#define ALIGN_DIM_LETTERS "TDEKFNGHVS"

struct align_dims {
	int64_t v[ALIGN_DIM_COUNT]; /* 0 = unused by the op */
};

enum align_fill_kind {
	ALIGN_FILL_NORMAL,     /* normal-ish * scale */
	ALIGN_FILL_SPECIAL,    /* normal-ish * scale with zeros, ties, bf16 halfway cases, +-limit, tiny */
	ALIGN_FILL_EXTREME,    /* SPECIAL plus huge magnitudes and subnormals */
	ALIGN_FILL_POSITIVE,   /* uniform in [2^-24, 1] * scale */
	ALIGN_FILL_CONST,      /* every element = scale */
	ALIGN_FILL_EXPERT_IDS, /* each row (last dim K) holds K distinct ids in [0, limit) */
	ALIGN_FILL_TOKEN_IDS,  /* ids in [0, limit) */
	ALIGN_FILL_KV_IDX,     /* sparse-attention index rows: ids in [0, limit) with ~1/9 -1 slots, 1/16 rows all -1 */
};

struct align_fill {
	enum align_fill_kind kind;
	float scale;
	float limit; /* SPECIAL: the +-limit value (e.g. swiglu clamp); ids: the id range */
	char dim;    /* ids: the dim (letter) whose value is the id range when the dims give it ('V': labels
		      * of a vocabulary of V), so that ids fit a --shape other than the default; 0: limit */
};

struct align_tensor_spec {
	const char *name;	/* "g" */
	int dtype;		/* enum align_dtype (outputs: the dtype when out_dtype is NULL) */
	const char *shape;	/* comma-separated dim expressions: "T,F", "(2+N)*N,N*D" */
	struct align_fill fill; /* inputs: how ops_fill_input builds values */
	const char *meaning;	/* one line */
};

typedef int (*align_fwd_fn)(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			    struct align_tensor *out, int n_out);

struct align_op_impl {
	int n_in;
	const struct align_tensor_spec *in;
	int n_out;
	const struct align_tensor_spec *out;
	const char *dims;   /* default dims, "T=16,D=4096" */
	const int *modes;   /* switches the op reads, terminated by -1 */
	size_t params_size; /* bytes of the op's params struct */
	void (*params_default)(void *params, const struct align_dims *d);
	/* parameter variants for tests (0 = default); returns 0 when k is past the last variant */
	int (*params_variant)(void *params, const struct align_dims *d, int k);
	align_fwd_fn fwd_cpu;					      /* the CPU twin */
	int (*out_dtype)(const struct align_modes *m, int out_index); /* NULL: spec dtype */
	/* builds the op's config for device from modes and dims (tests: every mode value handled) */
	int (*cfg_check)(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
			 struct align_err *err);
	/* input dtypes that follow the modes (the collectives' COLL_DTYPE), NULL: the spec dtype; ops_tensor_alloc
	 * applies it and ops_check_inputs then accepts any float dtype (the op's config checks the exact one) */
	int (*in_dtype)(const struct align_modes *m, int in_index);
};

struct align_op {
	const char *name;
	const char *desc;
	const char *inputs; /* description from ops.def */
	const struct align_op_impl *impl;
};

enum align_op_id {
#define OP(name, desc, inputs) ALIGN_OP_##name,
#include "ops.def"
#undef OP
	ALIGN_OP_COUNT
};

#define OP(name, desc, inputs) extern const struct align_op_impl name##_impl;
#include "ops.def"
#undef OP

const struct align_op *ops_find(const char *name); /* NULL when unknown */
/* parameter variants by name (`align run attn --variant csa`): the params_variant index, -1 when op names
 * none of that name; ops_variant_names: "csa, hca, swa" or NULL */
int ops_variant_index(const struct align_op *op, const char *name);
const char *ops_variant_names(const struct align_op *op);
const struct align_op *ops_at(int i); /* 0 <= i < ALIGN_OP_COUNT */
int ops_op_reads_mode(const struct align_op *op, int mode_id);
/* 1 when op refuses value `value` of switch mode_id on both twins, by design (ALIGN_ERR_UNSUPPORTED with a
 * message from its config builder; the table in ops.c): RMSNORM_REDUCE=torch, ATen's row order planned from
 * the [T, D] tensor a norm reduces, outside the ops whose norms are such tensors (rmsnorm, rmsnorm_bwd, mtp) */
int ops_op_refuses(const struct align_op *op, int mode_id, int value);
/* 1 when output out_index of op has shape [T, ...] but is not a row output by the op's contract, so batch
 * invariance is not claimed for it (the table in ops.c): the input gradient of a causal layer, whose row t
 * sums the contributions of the later queries that read token t (attn_bwd's dx) */
int ops_out_not_rows(const struct align_op *op, int out_index);
/* 1 when a switch op reads holds a value ops_op_refuses lists for op */
int ops_refused_in(const struct align_op *op, const struct align_modes *m);
/* the C twin, or ALIGN_ERR_UNSUPPORTED when a switch the op reads holds a value the CPU cannot run
 * (modes_refused_on ALIGN_DEVICE_CPU: the GPU-only values) */
int ops_fwd_cpu(const struct align_op *op, const void *params, const struct align_modes *m,
		const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);

/* Every input's dtype and shape against the op's input specs (shape expressions evaluated with d):
 * ALIGN_OK, or ALIGN_ERR_INPUT with "op 'rmsnorm': input 'w' is bf16[8], expected f32[8]" in err. */
int ops_check_inputs(const struct align_op *op, const struct align_dims *d, const struct align_tensor *in, int n_in,
		     struct align_err *err);

size_t align_dtype_size(int dtype);
const char *align_dtype_name(int dtype);
int64_t align_tensor_numel(const struct align_tensor *t);

/* "T=16,D=4096" -> dims; 0 ok, ALIGN_ERR_INPUT with the offending text in err */
int ops_dims_parse(const char *text, struct align_dims *d, char *err, size_t errlen);
int ops_dims_default(const struct align_op *op, struct align_dims *d);
/* evaluate a shape expression ("T,(2+N)*N") */
int ops_shape_eval(const char *expr, const struct align_dims *d, int64_t shape[4], int *ndim);
/* allocate (calloc) input (is_out = 0) or output tensor idx of op for dims and modes */
int ops_tensor_alloc(const struct align_op *op, int is_out, int idx, const struct align_dims *d,
		     const struct align_modes *m, struct align_tensor *t);
void ops_tensor_free(struct align_tensor *t);
/* fill input tensor idx from (seed, tensor name, step) following the spec's fill hint */
int ops_fill_input(const struct align_op *op, int input_index, struct align_tensor *t, uint64_t seed, int step);
/* the same with an explicit fill (tests use SPECIAL/EXTREME fills); stream "<op>.<t->name>" */
int ops_fill_tensor(const struct align_fill *f, const char *op_name, struct align_tensor *t, uint64_t seed, int step);
/* ops_fill_input with the id range of the fill's dim taken from d (the op's dims) */
int ops_fill_input_dims(const struct align_op *op, int input_index, struct align_tensor *t, const struct align_dims *d,
			uint64_t seed, int step);

/* check helpers used by the ops */
int ops_check(const struct align_tensor *t, int dtype, int ndim, const int64_t *shape);

/* element access for f32/bf16 tensors */
static inline float ops_ld(const struct align_tensor *t, int64_t i)
{
	return t->dtype == ALIGN_DT_BF16  ? align_bf16_to_f32(((const align_bf16 *)t->data)[i])
	       : t->dtype == ALIGN_DT_F16 ? align_f16_to_f32(((const align_f16 *)t->data)[i])
					  : ((const float *)t->data)[i];
}

static inline void ops_st(struct align_tensor *t, int64_t i, float v)
{
	if (t->dtype == ALIGN_DT_BF16)
		((align_bf16 *)t->data)[i] = align_f32_to_bf16(v);
	else if (t->dtype == ALIGN_DT_F16)
		((align_f16 *)t->data)[i] = align_f32_to_f16(v);
	else
		((float *)t->data)[i] = v;
}

/* exp / log1p / sigmoid / softplus of MATH_IMPL value `math` (ALIGN_MATH_IMPL_*; a config's decoded
 * value): portable = numerics.h (binary64 inside, one rounding); libm = the C library and the binary32
 * formulas 1/(1+expf(-x)) and (x > 20 ? x : log1pf(expf(x))) (torch CPU style) */
static inline float ops_math_expf(int math, float x)
{
	return math == ALIGN_MATH_IMPL_LIBM ? mimic_libm_expf(x) : align_expf(x);
}

static inline float ops_math_log1pf(int math, float x)
{
	return math == ALIGN_MATH_IMPL_LIBM ? mimic_libm_log1pf(x) : align_log1pf(x);
}

static inline float ops_math_sigmoidf(int math, float x)
{
	return math == ALIGN_MATH_IMPL_LIBM ? 1.0f / (1.0f + mimic_libm_expf(-x)) : align_sigmoidf(x);
}

static inline float ops_math_softplusf(int math, float x)
{
	if (math != ALIGN_MATH_IMPL_LIBM)
		return align_softplusf(x);
	return x > 20.0f ? x : mimic_libm_log1pf(mimic_libm_expf(x));
}

/* the same, reading MATH_IMPL from m */
static inline float ops_expf(const struct align_modes *m, float x)
{
	return ops_math_expf(m->v[MODE_MATH_IMPL], x);
}

static inline float ops_log1pf(const struct align_modes *m, float x)
{
	return ops_math_log1pf(m->v[MODE_MATH_IMPL], x);
}

static inline float ops_sigmoidf(const struct align_modes *m, float x)
{
	return ops_math_sigmoidf(m->v[MODE_MATH_IMPL], x);
}

static inline float ops_softplusf(const struct align_modes *m, float x)
{
	return ops_math_softplusf(m->v[MODE_MATH_IMPL], x);
}

#endif /* ALIGN_OPS_H */
