/* dtype: align's dtype names, their framework spellings, and the decoding of one element's bits. */
#include "dtype.h"

#include <math.h>
#include <string.h>

enum dtype_kind {
	KIND_INT,  /* two's complement */
	KIND_UINT, /* unsigned (bool: 0 or 1) */
	KIND_IEEE, /* IEEE 754 binary: all-ones exponent is inf (mantissa 0) or NaN */
	KIND_FN,   /* OCP fp8 e4m3fn: no inf; only S.1111.111 is NaN */
};

struct dtype_row {
	const char *name;
	size_t size;
	enum dtype_kind kind;
	int ebits, mbits; /* floats: exponent and mantissa widths */
};

static const struct dtype_row rows[] = {
	{"fp64", 8, KIND_IEEE, 11, 52}, {"fp32", 4, KIND_IEEE, 8, 23},	{"bf16", 2, KIND_IEEE, 8, 7},
	{"fp16", 2, KIND_IEEE, 5, 10},	{"fp8_e4m3", 1, KIND_FN, 4, 3}, {"fp8_e5m2", 1, KIND_IEEE, 5, 2},
	{"int64", 8, KIND_INT, 0, 0},	{"int32", 4, KIND_INT, 0, 0},	{"int16", 2, KIND_INT, 0, 0},
	{"int8", 1, KIND_INT, 0, 0},	{"uint8", 1, KIND_UINT, 0, 0},	{"bool", 1, KIND_UINT, 0, 0},
};
#define N_ROWS (sizeof rows / sizeof rows[0])

/* Framework spellings: str(torch.<t>), torch's attribute aliases, str(paddle.<t>) (Paddle 2.x and PIR),
 * Paddle's legacy VarType names, numpy/ml_dtypes names (which JAX shares). */
static const struct {
	const char *alias, *name;
} aliases[] = {
	{"float64", "fp64"},
	{"double", "fp64"},
	{"torch.float64", "fp64"},
	{"torch.double", "fp64"},
	{"paddle.float64", "fp64"},
	{"VarType.FP64", "fp64"},
	{"float32", "fp32"},
	{"torch.float32", "fp32"},
	{"torch.float", "fp32"},
	{"paddle.float32", "fp32"},
	{"VarType.FP32", "fp32"},
	{"bfloat16", "bf16"},
	{"torch.bfloat16", "bf16"},
	{"paddle.bfloat16", "bf16"},
	{"VarType.BF16", "bf16"},
	{"float16", "fp16"},
	{"half", "fp16"},
	{"torch.float16", "fp16"},
	{"torch.half", "fp16"},
	{"paddle.float16", "fp16"},
	{"VarType.FP16", "fp16"},
	{"float8_e4m3fn", "fp8_e4m3"},
	{"torch.float8_e4m3fn", "fp8_e4m3"},
	{"paddle.float8_e4m3fn", "fp8_e4m3"},
	{"float8_e5m2", "fp8_e5m2"},
	{"torch.float8_e5m2", "fp8_e5m2"},
	{"paddle.float8_e5m2", "fp8_e5m2"},
	{"torch.int64", "int64"},
	{"torch.long", "int64"},
	{"paddle.int64", "int64"},
	{"VarType.INT64", "int64"},
	{"torch.int32", "int32"},
	{"torch.int", "int32"},
	{"paddle.int32", "int32"},
	{"VarType.INT32", "int32"},
	{"torch.int16", "int16"},
	{"torch.short", "int16"},
	{"paddle.int16", "int16"},
	{"VarType.INT16", "int16"},
	{"torch.int8", "int8"},
	{"paddle.int8", "int8"},
	{"VarType.INT8", "int8"},
	{"torch.uint8", "uint8"},
	{"paddle.uint8", "uint8"},
	{"VarType.UINT8", "uint8"},
	{"torch.bool", "bool"},
	{"paddle.bool", "bool"},
	{"VarType.BOOL", "bool"},
};

static const struct dtype_row *find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < N_ROWS; i++)
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
		if (!strcmp(aliases[i].alias, name))
			return find(aliases[i].name);
	return NULL;
}

const char *dtype_canonical(const char *name)
{
	const struct dtype_row *r = find(name);
	return r ? r->name : NULL;
}

size_t dtype_size(const char *name)
{
	const struct dtype_row *r = find(name);
	return r ? r->size : 0;
}

int dtype_is_float(const char *name)
{
	const struct dtype_row *r = find(name);
	return r && (r->kind == KIND_IEEE || r->kind == KIND_FN);
}

const char *dtype_names(void)
{
	return "fp64, fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int64, int32, int16, int8, uint8, bool, or their "
	       "torch/paddle/numpy spellings such as torch.bfloat16, paddle.float32, float8_e4m3fn";
}

static uint64_t low_mask(size_t bytes)
{
	return bytes >= 8 ? ~0ull : (1ull << (8 * bytes)) - 1;
}

/* Value of a float pattern of row r (r->size < 8: fp64 is read by memcpy). */
static double decode_small_float(const struct dtype_row *r, uint64_t bits)
{
	int m = r->mbits, e = r->ebits, bias = (1 << (e - 1)) - 1;
	uint64_t mant = bits & ((1ull << m) - 1), exp = (bits >> m) & ((1ull << e) - 1);
	int neg = (int)((bits >> (m + e)) & 1);
	double v;
	if (exp == (1ull << e) - 1 && r->kind == KIND_IEEE)
		v = mant ? NAN : INFINITY;
	else if (exp == (1ull << e) - 1 && mant == (1ull << m) - 1) /* KIND_FN: the one NaN */
		v = NAN;
	else if (exp == 0)
		v = ldexp((double)mant, 1 - bias - m);
	else
		v = ldexp((double)((1ull << m) | mant), (int)exp - bias - m);
	return neg ? -v : v;
}

static double decode_row(const struct dtype_row *r, uint64_t bits)
{
	bits &= low_mask(r->size);
	if (r->kind == KIND_UINT)
		return (double)bits;
	if (r->kind == KIND_INT) {
		int sh = 64 - 8 * (int)r->size;
		return (double)((int64_t)(bits << sh) >> sh);
	}
	if (r->size == 8) {
		double d;
		memcpy(&d, &bits, 8);
		return d;
	}
	return decode_small_float(r, bits);
}

int dtype_decode(const char *name, uint64_t bits, double *out)
{
	const struct dtype_row *r = find(name);
	if (!r)
		return -1;
	*out = decode_row(r, bits);
	return 0;
}

/* The pattern next to bits in the direction of up (1) or down (0) on the real line, in row r. */
static uint64_t neighbour(const struct dtype_row *r, uint64_t bits, int up)
{
	uint64_t sign = 1ull << (8 * r->size - 1), mag = bits & (sign - 1);
	int neg = (bits & sign) != 0;
	if (mag == 0) /* +-0: up is the smallest positive, down the smallest negative */
		return up ? 1 : sign | 1;
	return (up != neg) ? bits + 1 : bits - 1;
}

int dtype_value_matches(const char *name, uint64_t bits, double v)
{
	const struct dtype_row *r = find(name);
	if (!r)
		return 0;
	bits &= low_mask(r->size);
	double d = decode_row(r, bits);
	if (isnan(d) || isnan(v))
		return isnan(d) && isnan(v);
	if (d == v)
		return d != 0 || !signbit(d) == !signbit(v);
	if (r->kind == KIND_INT || r->kind == KIND_UINT || r->size == 8 || isinf(d))
		return 0;
	/* a narrower float: v must lie within half the gap to the pattern's neighbour on v's side (a tie
	 * rounds to the even pattern); the gaps of these formats are exact in double */
	double n = decode_row(r, neighbour(r, bits, v > d));
	if (isnan(n) || isinf(n)) /* past the largest finite value: the gap on the other side */
		n = d - (decode_row(r, neighbour(r, bits, v < d)) - d);
	double half = fabs(n - d) / 2, dist = fabs(v - d);
	return dist < half || (dist == half && !(bits & 1));
}
