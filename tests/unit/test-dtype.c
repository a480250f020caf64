/* test-dtype: the dtype table (harness/core/dtype.c) against answers known exactly: framework spellings
 * and their align names, the decoding of every bf16 pattern (as the top half of an fp32), fp16 and fp8
 * patterns with known values (subnormals, the largest finite, inf, NaN), and the rounding rule that
 * decides whether an ATF value names a pattern: every bf16 midpoint goes to the even pattern, a quarter
 * gap to the nearer one, and fp32 agrees with the C cast on a million doubles. Exit status is the verdict. */
#include "dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                                          \
			fprintf(stderr, __VA_ARGS__);                                                                  \
			fputc('\n', stderr);                                                                           \
			fails++;                                                                                       \
		}                                                                                                      \
	} while (0)

static double dec(const char *dtype, uint64_t bits)
{
	double d = -12345;
	CHECK(!dtype_decode(dtype, bits, &d), "decode %s", dtype);
	return d;
}

static void spellings(void)
{
	static const char *const pairs[][2] = {
		{"float32", "fp32"},
		{"torch.float32", "fp32"},
		{"paddle.float32", "fp32"},
		{"VarType.FP32", "fp32"},
		{"torch.bfloat16", "bf16"},
		{"paddle.bfloat16", "bf16"},
		{"bfloat16", "bf16"},
		{"float16", "fp16"},
		{"half", "fp16"},
		{"torch.half", "fp16"},
		{"float64", "fp64"},
		{"double", "fp64"},
		{"float8_e4m3fn", "fp8_e4m3"},
		{"torch.float8_e5m2", "fp8_e5m2"},
		{"int64", "int64"},
		{"torch.int64", "int64"},
		{"torch.long", "int64"},
		{"bool", "bool"},
		{"paddle.bool", "bool"},
		{"fp32", "fp32"},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		const char *c = dtype_canonical(pairs[i][0]);
		CHECK(c && !strcmp(c, pairs[i][1]), "%s -> %s, want %s", pairs[i][0], c ? c : "NULL", pairs[i][1]);
	}
	CHECK(!dtype_canonical("torch.float8_e4m3fnuz") && !dtype_canonical("float") && !dtype_canonical("FP32"),
	      "unknown spellings refused");
	CHECK(dtype_size("torch.bfloat16") == 2 && dtype_size("paddle.float64") == 8 && dtype_size("nope") == 0,
	      "sizes");
	CHECK(dtype_is_float("half") && !dtype_is_float("torch.int64"), "is_float");
}

static void decoding(void)
{
	for (uint32_t b = 0; b < 0x10000; b++) { /* bf16 is the top half of an fp32 */
		uint32_t w = b << 16;
		float f;
		memcpy(&f, &w, 4);
		double d = dec("bf16", b);
		CHECK((isnan(f) && isnan(d)) || (d == (double)f && !signbit(d) == !signbit(f)), "bf16 0x%04x", b);
	}
	CHECK(dec("fp16", 0x3c00) == 1.0 && dec("fp16", 0x0001) == ldexp(1, -24) && dec("fp16", 0xfbff) == -65504.0,
	      "fp16 values");
	CHECK(isinf(dec("fp16", 0x7c00)) && isnan(dec("fp16", 0x7e00)), "fp16 inf, nan");
	CHECK(dec("fp8_e4m3", 0x7e) == 448.0 && isnan(dec("fp8_e4m3", 0x7f)) && dec("fp8_e4m3", 0x78) == 256.0,
	      "e4m3: 0x78 is 256 (no inf), 0x7e the largest, 0x7f NaN");
	CHECK(dec("fp8_e4m3", 0x01) == ldexp(1, -9) && dec("fp8_e4m3", 0x08) == ldexp(1, -6), "e4m3 subnormal, normal");
	CHECK(dec("fp8_e5m2", 0x7b) == 57344.0 && isinf(dec("fp8_e5m2", 0x7c)) &&
		      dec("fp8_e5m2", 0x01) == ldexp(1, -16),
	      "e5m2");
	CHECK(dec("int8", 0xff) == -1 && dec("uint8", 0xff) == 255 && dec("int64", ~0ull) == -1 &&
		      dec("int32", 0x80000000u) == -2147483648.0,
	      "integers");
	double one = 1.0;
	uint64_t b64;
	memcpy(&b64, &one, 8);
	CHECK(dec("fp64", b64) == 1.0, "fp64");
}

static void rounding(void)
{
	for (uint32_t b = 0; b < 0x7f7f; b++) { /* every positive finite bf16 and its upper neighbour */
		double d = dec("bf16", b), n = dec("bf16", b + 1), mid = d + (n - d) / 2, q = d + (n - d) / 4;
		CHECK(dtype_value_matches("bf16", b, d) && !dtype_value_matches("bf16", b + 1, d), "bf16 0x%04x exact",
		      b);
		CHECK(dtype_value_matches("bf16", b, mid) == !(b & 1) &&
			      dtype_value_matches("bf16", b + 1, mid) == (int)(b & 1),
		      "bf16 0x%04x tie to even", b);
		CHECK(dtype_value_matches("bf16", b, q) && !dtype_value_matches("bf16", b + 1, q),
		      "bf16 0x%04x quarter", b);
		CHECK(dtype_value_matches("bf16", b | 0x8000, -q) && !dtype_value_matches("bf16", (b + 1) | 0x8000, -q),
		      "bf16 -0x%04x quarter", b);
	}
	srand(7);
	for (int i = 0; i < 1000000; i++) { /* fp32: the pattern the C cast (round to nearest even) gives */
		uint64_t r = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 11) ^ (uint64_t)rand();
		double v;
		r = (r & 0x800fffffffffffffull) | ((uint64_t)(896 + r % 256) << 52); /* exponents around fp32's */
		memcpy(&v, &r, 8);
		float f = (float)v;
		uint32_t fb;
		memcpy(&fb, &f, 4);
		if (isinf(f))
			continue;
		CHECK(dtype_value_matches("fp32", fb, v) && !dtype_value_matches("fp32", fb + 1, v) &&
			      (fb & 0x7fffffff) != 0 && !dtype_value_matches("fp32", fb - 1, v),
		      "fp32 %.17g -> 0x%08x", v, fb);
	}
	CHECK(!dtype_value_matches("fp32", 0x7f7fffff, 3.5e38), "beyond the largest fp32 (rounds to inf)");
	CHECK(dtype_value_matches("fp32", 0x7fc00000, NAN) && !dtype_value_matches("fp32", 0x7fc00000, INFINITY) &&
		      dtype_value_matches("fp32", 0xff800000, -INFINITY),
	      "nan, inf");
	CHECK(dtype_value_matches("fp32", 0, 0.0) && !dtype_value_matches("fp32", 0x80000000, 0.0) &&
		      dtype_value_matches("fp32", 0x80000000, -0.0),
	      "signed zeros");
	CHECK(dtype_value_matches("fp64", 0x3ff0000000000000ull, 1.0) &&
		      !dtype_value_matches("fp64", 0x3ff0000000000001ull, 1.0),
	      "fp64 exact");
	CHECK(dtype_value_matches("int8", 0xff, -1) && !dtype_value_matches("int8", 0xff, -1.5) &&
		      !dtype_value_matches("int8", 0xfe, -1),
	      "integers exact");
	CHECK(dtype_value_matches("fp8_e4m3", 0x7e, 450) && !dtype_value_matches("fp8_e4m3", 0x7e, 470),
	      "e4m3 near its largest: within half a gap (32) of 448");
}

int main(void)
{
	spellings();
	decoding();
	rounding();
	if (fails)
		fprintf(stderr, "%d check(s) failed\n", fails);
	else
		printf("all dtype checks passed\n");
	return fails != 0;
}
