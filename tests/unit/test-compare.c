/* test-compare: every branch of the per-pair verdict (harness/report/compare.c) with inputs whose answer is
 * known exactly: bits in fp32/fp64/bf16 with their ULP distances, NaN, +-0, inf, printed intervals,
 * md5 against bits both ways, digests, missing values; unequal values of two dtypes at the coarser
 * precision, inferred bits named, heads and statistics as evidence. Exit status is the verdict. */
#include "compare.h"

#include <math.h>
#include <stdio.h>
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

static struct cmp_value bits(const char *dtype, uint64_t b)
{
	struct cmp_value v = {.dtype = dtype, .has_bits = 1, .bits = b};
	compare_bits_to_double(dtype, b, &v.value);
	v.has_value = !isnan(v.value);
	v.is_nan = isnan(v.value);
	return v;
}

static uint32_t f32(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

static uint64_t f64(double d)
{
	uint64_t b;
	memcpy(&b, &d, 8);
	return b;
}

/* A printed value: text, its significant digits and the interval it stands for. */
static struct cmp_value printed(const char *text, int digits, double lo, double hi)
{
	struct cmp_value v = {.dtype = "fp32", .text = text, .digits = digits, .has_interval = 1, .lo = lo, .hi = hi};
	v.has_value = 1;
	v.value = (lo + hi) / 2;
	return v;
}

static struct cmp_value digest(const char *alg, const char *hex)
{
	struct cmp_value v = {.digest = hex, .digest_alg = alg};
	return v;
}

static struct cmp_result run(struct cmp_value a, struct cmp_value b)
{
	struct cmp_result r;
	compare_values(&a, &b, &r);
	return r;
}

#define VERDICT(r, v)                                                                                                  \
	CHECK((r).verdict == (v), "verdict %s, want %s (%s)", verdict_name((r).verdict), verdict_name(v), (r).reason)
#define ULP(r, n, dt)                                                                                                  \
	CHECK((r).has_ulp && (r).ulp == (n) && !strcmp((r).ulp_dtype, dt), "ulp %d %llu %s, want %llu %s (%s)",        \
	      (r).has_ulp, (unsigned long long)(r).ulp, (r).ulp_dtype ? (r).ulp_dtype : "-", (unsigned long long)(n),  \
	      dt, (r).reason)

static void test_bits_same_dtype(void)
{
	struct cmp_result r = run(bits("fp32", 0x412de666), bits("fp32", 0x412de666));
	VERDICT(r, VERDICT_BITWISE_EQUAL);
	r = run(bits("fp32", 0x412de666), bits("fp32", 0x412de669));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 3, "fp32");
	CHECK(r.has_rel && fabs(r.rel_diff - fabs(0x1.5bccd2p+3 - 0x1.5bcccc0p+3) / 0x1.5bccd2p+3) < 1e-15, "rel %g",
	      r.rel_diff);
	/* across zero: -min subnormal .. +min subnormal is 3 steps (-tiny, -0, +0, +tiny) */
	r = run(bits("fp32", 0x80000001), bits("fp32", 0x00000001));
	ULP(r, 3, "fp32");
	r = run(bits("fp64", f64(1.0)), bits("fp64", f64(1.0) + 2));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 2, "fp64");
	CHECK(r.has_rel && r.rel_diff == 2 * 0x1p-52 / (1 + 2 * 0x1p-52), "rel %a", r.rel_diff);
	r = run(bits("bf16", 0x3f80), bits("bf16", 0x3f80));
	VERDICT(r, VERDICT_BITWISE_EQUAL);
	r = run(bits("bf16", 0x3f80), bits("bf16", 0x3f85));
	ULP(r, 5, "bf16");
	r = run(bits("fp16", 0x3c00), bits("fp16", 0x3c01));
	ULP(r, 1, "fp16");
	/* the result names its dtype by a static string: it outlives the values' buffers */
	char dt[8] = "fp32";
	struct cmp_value x = bits(dt, 0x3f800000), y = bits(dt, 0x3f800001);
	compare_values(&x, &y, &r);
	memcpy(dt, "XXXX", 5);
	ULP(r, 1, "fp32");
	r = run(bits("int64", 1830), bits("int64", 1781));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 49, "int64");
}

static void test_special(void)
{
	/* +0 vs -0: different bits, 1 ulp, equal as numbers */
	struct cmp_result r = run(bits("fp32", 0x00000000), bits("fp32", 0x80000000));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 1, "fp32");
	CHECK(r.has_rel && r.rel_diff == 0, "rel of +-0: %g", r.rel_diff);
	r = run(bits("fp64", f64(0.0)), bits("fp64", f64(-0.0)));
	ULP(r, 1, "fp64");
	/* NaN with identical bits is bitwise-equal; different payloads differ; NaN vs number differs */
	r = run(bits("fp32", 0x7fc00000), bits("fp32", 0x7fc00000));
	VERDICT(r, VERDICT_BITWISE_EQUAL);
	CHECK(strstr(r.reason, "NaN") != NULL, "reason %s", r.reason);
	r = run(bits("fp32", 0x7fc00000), bits("fp32", 0x7fc00001));
	VERDICT(r, VERDICT_DIFFER);
	r = run(bits("fp32", 0x7fc00000), bits("fp32", f32(1.0f)));
	VERDICT(r, VERDICT_DIFFER);
	CHECK(!r.has_ulp && strstr(r.reason, "a is NaN"), "reason %s", r.reason);
	/* inf: equal bits equal; inf vs FLT_MAX is one step; no relative difference */
	r = run(bits("fp32", 0x7f800000), bits("fp32", 0x7f800000));
	VERDICT(r, VERDICT_BITWISE_EQUAL);
	r = run(bits("fp32", 0x7f800000), bits("fp32", 0x7f7fffff));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 1, "fp32");
	CHECK(!r.has_rel, "rel with inf");
	r = run(bits("fp32", 0x7f800000), bits("fp32", 0xff800000));
	VERDICT(r, VERDICT_DIFFER);
	/* printed NaN on both sides: equal as printed; against a number: differ */
	struct cmp_value nan_a = {.text = "nan", .is_nan = 1}, nan_b = {.text = "NaN", .is_nan = 1};
	r = run(nan_a, nan_b);
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	r = run(nan_a, printed("10.5", 3, 10.45, 10.55));
	VERDICT(r, VERDICT_DIFFER);
	r = run(nan_a, bits("fp32", 0x7fc00000));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
}

static void test_cross_dtype(void)
{
	/* fp32 1.5 vs fp64 1.5: the fp64 value is exactly the fp32 value */
	struct cmp_result r = run(bits("fp32", f32(1.5f)), bits("fp64", f64(1.5)));
	VERDICT(r, VERDICT_BITWISE_EQUAL);
	CHECK(strstr(r.reason, "exactly") != NULL, "reason %s", r.reason);
	/* bf16 1.0 vs fp32 1.0 equal */
	r = run(bits("bf16", 0x3f80), bits("fp32", 0x3f800000));
	VERDICT(r, VERDICT_BITWISE_EQUAL);
	/* -0 in fp32 vs +0 in fp64: different signs are different bits */
	r = run(bits("fp32", 0x80000000), bits("fp64", f64(0.0)));
	VERDICT(r, VERDICT_DIFFER);
	r = run(bits("fp8_e4m3", 0x38), bits("fp32", 0x3f800000));
	VERDICT(r, VERDICT_INCOMPARABLE);
	/* an integer against a float: differ, never a ULP of some wider dtype */
	r = run(bits("int64", 3), bits("fp32", f32(3.5f)));
	VERDICT(r, VERDICT_DIFFER);
	CHECK(!r.has_ulp, "ulp %llu", (unsigned long long)r.ulp);
}

/* Unequal values of different dtypes are compared at the coarser dtype, never in ULP of the wider one. */
static void test_coarser(void)
{
	/* fp32(0.1) vs fp64(0.1): the double rounds to the float32: equal at fp32 precision, not bitwise */
	struct cmp_result r = run(bits("fp32", f32(0.1f)), bits("fp64", f64(0.1)));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(strstr(r.reason, "equal at fp32 precision") && !strstr(r.reason, "ulp of fp64") && !r.has_ulp,
	      "reason %s", r.reason);
	/* 3 fp32 ulps above 0.1f plus a little: rounds 3 ulps away; the reason gives 0.1f's rounding interval */
	double off = (double)0.1f + 3 * 0x1p-27 + 0x1p-40;
	r = run(bits("fp32", f32(0.1f)), bits("fp64", f64(off)));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 3, "fp32");
	CHECK(strstr(r.reason, "differ at fp32 precision") && strstr(r.reason, "outside [0.099999997764825821, "
									       "0.10000000521540642]"),
	      "reason %s", r.reason);
	CHECK(!strstr(r.reason, "fp64 ulp") && !strstr(r.reason, "ulp of fp64"), "reason %s", r.reason);
	/* the other order names the sides the other way round */
	r = run(bits("fp64", f64(off)), bits("fp32", f32(0.1f)));
	ULP(r, 3, "fp32");
	CHECK(strstr(r.reason, "a's fp64 value") && strstr(r.reason, "b's fp32 value"), "reason %s", r.reason);
	/* ties to even: 1 + 2^-24 is halfway between 1 and 1 + 2^-23 and rounds to 1 (even) */
	VERDICT(run(bits("fp32", f32(1.0f)), bits("fp64", f64(1 + 0x1p-24))), VERDICT_EQUAL_AS_PRINTED);
	r = run(bits("fp32", f32(1.0f)), bits("fp64", f64(1 + 3 * 0x1p-24))); /* rounds up to 1 + 2^-22 */
	ULP(r, 2, "fp32");
	/* past the largest float32 by more than half an ulp: rounds to +inf, one step from FLT_MAX */
	r = run(bits("fp32", 0x7f7fffff), bits("fp64", f64(1e39)));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 1, "fp32");
	/* 16-bit against fp32 the same way: bf16 one step above 1.0 is 1 bf16 ulp, not 65536 fp32 ulps */
	r = run(bits("bf16", 0x3f81), bits("fp32", 0x3f800000));
	ULP(r, 1, "bf16");
	CHECK(strstr(r.reason, "[1.00390625, 1.01171875]") != NULL, "reason %s", r.reason);
	r = run(bits("bf16", 0x3f80), bits("fp32", f32(1.001f)));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(strstr(r.reason, "equal at bf16 precision") != NULL, "reason %s", r.reason);
	r = run(bits("fp16", 0x3c00), bits("fp32", f32(1 + 0x1p-12f)));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(strstr(r.reason, "equal at fp16 precision") != NULL, "reason %s", r.reason);
	r = run(bits("fp16", 0x3c00), bits("fp32", f32(1 + 0x1p-9f)));
	ULP(r, 2, "fp16");
	/* bf16 (8 bits) is coarser than fp16 (11 bits): fp16 1 + 2^-10 rounds to bf16 1.0 */
	r = run(bits("fp16", 0x3c01), bits("bf16", 0x3f80));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(strstr(r.reason, "equal at bf16 precision") != NULL, "reason %s", r.reason);
	/* +0 against -0 across dtypes: 1 ulp */
	r = run(bits("fp32", 0x80000000), bits("fp64", f64(0.0)));
	VERDICT(r, VERDICT_DIFFER);
	CHECK(r.has_ulp && r.ulp == 1, "ulp %llu", (unsigned long long)r.ulp);
}

static void test_exact_bits(void)
{
	uint64_t b = 0;
	CHECK(compare_double_to_bits("fp16", 65504, &b) && b == 0x7bff, "fp16 max %llx", (unsigned long long)b);
	CHECK(compare_double_to_bits("fp16", 0x1p-24, &b) && b == 1, "fp16 tiny %llx", (unsigned long long)b);
	CHECK(compare_double_to_bits("fp16", -1.5, &b) && b == 0xbe00, "fp16 -1.5 %llx", (unsigned long long)b);
	CHECK(!compare_double_to_bits("fp16", 1.0 / 3, &b) && !compare_double_to_bits("fp16", 65520, &b), "fp16");
	CHECK(compare_double_to_bits("bf16", 1.0, &b) && b == 0x3f80, "bf16 %llx", (unsigned long long)b);
	CHECK(!compare_double_to_bits("bf16", 1.001, &b) && !compare_double_to_bits("fp32", 0.1, &b), "bf16/fp32");
	CHECK(compare_double_to_bits("int8", -1, &b) && b == 0xff && !compare_double_to_bits("int8", 128, &b), "int8");
	CHECK(compare_double_to_bits("uint8", 255, &b) && b == 0xff && !compare_double_to_bits("uint8", -1, &b),
	      "uint8");
	CHECK(compare_double_to_bits("bool", 1, &b) && b == 1 && !compare_double_to_bits("bool", 2, &b), "bool");
	CHECK(!compare_double_to_bits("fp64", NAN, &b) && !compare_double_to_bits("int32", 0.5, &b), "nan/int");
}

/* Bits ingest inferred from a print (bits and an interval) are named when they decide. */
static void test_inferred(void)
{
	struct cmp_value inf = bits("fp32", 0x412d3800);
	inf.has_interval = 1, inf.lo = 10.826125, inf.hi = 10.826135, inf.digits = 7;
	struct cmp_result r = run(inf, bits("fp32", 0x412d3800));
	VERDICT(r, VERDICT_BITWISE_EQUAL);
	CHECK(strstr(r.reason, "a's bits inferred: the only fp32 in [10.826125, 10.826135]") != NULL, "reason %s",
	      r.reason);
	r = run(bits("fp32", 0x412d3801), inf);
	VERDICT(r, VERDICT_DIFFER);
	CHECK(strstr(r.reason, "b's bits inferred") && !strstr(r.reason, "a's bits inferred"), "reason %s", r.reason);
	r = run(bits("fp32", 0x412d3800), bits("fp32", 0x412d3800));
	CHECK(!strstr(r.reason, "inferred"), "reason %s", r.reason);
}

static struct cmp_value summary(const char *dtype, const char *head, const char *stats)
{
	struct cmp_value v = {.dtype = dtype, .head = head, .stats = stats};
	return v;
}

/* Rule 6: heads and statistics as evidence (AccProber first_10 and tensor_sum, msprobe Max/Min). */
static void test_summaries(void)
{
	const char *h = "[0.0213623046875, -0.1103515625, 0.046875, 0.0]", *st = "{\"sum\":-3127.84521484375}";
	struct cmp_result r = run(summary("bf16", h, st), summary("bf16", h, st));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(strstr(r.reason, "equal in the summaries shown (first 4 elements, sum)") != NULL, "reason %s", r.reason);
	/* element 2 two bf16 steps apart (ulp 2^-12 at 0.046875) */
	r = run(summary("bf16", h, st), summary("bf16", "[0.0213623046875, -0.1103515625, 0.04736328125, 0.0]", st));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 2, "bf16");
	CHECK(strstr(r.reason, "1 of the first 4 elements differ, first element 2") != NULL, "reason %s", r.reason);
	/* the sum one fp32 ulp apart (2^-12 at 3127): an fp32 statistic of a bf16 tensor */
	r = run(summary("bf16", h, st), summary("bf16", h, "{\"sum\": -3127.845458984375}"));
	VERDICT(r, VERDICT_DIFFER);
	ULP(r, 1, "fp32");
	CHECK(strstr(r.reason, "sum: -3127.84521484375 vs -3127.845458984375") != NULL, "reason %s", r.reason);
	/* both: the element gives the ulp, the statistic is named too */
	r = run(summary("bf16", "[1.0, 2.0]", "{\"sum\": 3.0, \"mean\": 1.5}"),
		summary("bf16", "[1.0, 2.015625]", "{\"mean\": 1.50390625, \"sum\": 3.0078125}"));
	ULP(r, 1, "bf16");
	CHECK(strstr(r.reason, "element 1") && strstr(r.reason, "sum:") && strstr(r.reason, "2 statistics differ"),
	      "reason %s", r.reason);
	/* NaN as json.dumps and AccProber strings write it */
	VERDICT(run(summary("fp32", "[\"nan\", 1.0]", NULL), summary("fp32", "[NaN, 1.0]", NULL)),
		VERDICT_EQUAL_AS_PRINTED);
	r = run(summary("fp32", "[\"nan\", 1.0]", NULL), summary("fp32", "[1.0, 1.0]", NULL));
	VERDICT(r, VERDICT_DIFFER);
	CHECK(strstr(r.reason, "element 0") != NULL, "reason %s", r.reason);
	/* integers: the distance is the difference */
	r = run(summary("int64", "[17.0, 92.0]", NULL), summary("int64", "[17.0, 95.0]", NULL));
	ULP(r, 3, "int64");
	/* msprobe statistics, nested values skipped */
	r = run(summary("fp32", NULL, "{\"Max\": 4.6875, \"Min\": -5.03125, \"x\": {\"y\": [1]}}"),
		summary("fp32", NULL, "{\"Min\": -5.03125, \"Max\": 4.6875}"));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(strstr(r.reason, "(Max, Min)") != NULL, "reason %s", r.reason);
	/* nothing in common: incomparable; a different-dtype pair compared at the coarser dtype */
	VERDICT(run(summary("fp32", "[1.0]", NULL), summary("fp32", NULL, "{\"sum\": 1.0}")), VERDICT_INCOMPARABLE);
	VERDICT(run(summary("fp32", "[1.5, 2.5]", NULL), summary("bf16", "[1.5, 2.5]", NULL)),
		VERDICT_EQUAL_AS_PRINTED);
	/* a digest of another algorithm does not stop the summaries; one of the same algorithm decides */
	struct cmp_value da = summary("fp32", "[1.0]", NULL), db = summary("fp32", "[1.0]", NULL);
	da.digest = "01234567", da.digest_alg = "crc32", db.digest = "0123456789abcdef", db.digest_alg = "xxh3t64";
	VERDICT(run(da, db), VERDICT_EQUAL_AS_PRINTED);
	db.digest = "89abcdef", db.digest_alg = "crc32";
	VERDICT(run(da, db), VERDICT_DIFFER);
	/* never bitwise: equal summaries are only as printed */
	CHECK(run(summary("fp32", "[1.0]", NULL), summary("fp32", "[1.0]", NULL)).verdict != VERDICT_BITWISE_EQUAL,
	      "bitwise from a head");
}

static void test_intervals(void)
{
	/* Megatron golden round(x, 5): 10.82613 vs 10.82611 are disjoint, 10.82613 vs itself overlaps */
	struct cmp_value a = printed("10.82613", 7, 10.826125, 10.826135),
			 b = printed("10.82611", 7, 10.826105, 10.826115);
	struct cmp_result r = run(a, b);
	VERDICT(r, VERDICT_DIFFER);
	CHECK(r.has_rel && fabs(r.rel_diff - 0.00002 / 10.82613) < 1e-9, "rel %g", r.rel_diff);
	CHECK(!r.has_ulp, "ulp without bits");
	r = run(a, a);
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(r.digits == 7 && strstr(r.reason, "7 digits"), "digits %d (%s)", r.digits, r.reason);
	/* coarser side decides the digits: 1.0869E+01 (5 digits) vs 10.86875 (7 digits), overlapping */
	r = run(printed("1.0869E+01", 5, 10.8685, 10.8695), printed("10.86875", 7, 10.868745, 10.868755));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(r.digits == 5, "digits %d", r.digits);
	/* prints one unit apart only touch at the rounding boundary: 10.826125 is no float32, so they differ */
	r = run(a, printed("10.82612", 7, 10.826115, 10.826125));
	VERDICT(r, VERDICT_DIFFER);
	r = run(printed("1.5", 2, 1.45, 1.55), printed("1.6", 2, 1.55, 1.65));
	VERDICT(r, VERDICT_DIFFER);
	/* ... unless the boundary is a value of the dtype: 1.25 may print as 1.2 (half-even) or 1.3 */
	r = run(printed("1.2", 2, 1.15, 1.25), printed("1.3", 2, 1.25, 1.35));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	struct cmp_value p64 = printed("1.5", 2, 1.45, 1.55), q64 = printed("1.6", 2, 1.55, 1.65);
	p64.dtype = q64.dtype = "fp64"; /* a double boundary cannot be told from its rounding: kept as a tie */
	VERDICT(run(p64, q64), VERDICT_EQUAL_AS_PRINTED);
	/* an exact value on the boundary of a print: consistent with it */
	r = run(bits("fp32", f32(1.25f)), printed("1.3", 2, 1.25, 1.35));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	/* exact bits inside / outside a printed interval */
	r = run(bits("fp32", f32(10.8125f)), printed("10.81", 4, 10.805, 10.815));
	VERDICT(r, VERDICT_EQUAL_AS_PRINTED);
	CHECK(r.digits == 4, "digits %d", r.digits);
	r = run(printed("10.80", 4, 10.795, 10.805), bits("fp32", f32(10.8125f)));
	VERDICT(r, VERDICT_DIFFER);
	/* exact value without bits on both sides (an fp64 mean): equal and different */
	struct cmp_value x = {.has_value = 1, .value = 0.25}, y = {.has_value = 1, .value = 0.25 + 0x1p-50};
	VERDICT(run(x, x), VERDICT_EQUAL_AS_PRINTED);
	VERDICT(run(x, y), VERDICT_DIFFER);
}

static void test_digests(void)
{
	struct cmp_result r = run(digest("xxh3t64", "0123456789abcdef"), digest("xxh3t64", "0123456789ABCDEF"));
	VERDICT(r, VERDICT_BITWISE_EQUAL);
	r = run(digest("xxh3t64", "0123456789abcdef"), digest("xxh3t64", "0123456789abcdee"));
	VERDICT(r, VERDICT_DIFFER);
	r = run(digest("xxh3t64", "0123456789abcdef"), digest("crc32", "01234567"));
	VERDICT(r, VERDICT_INCOMPARABLE);
	/* a digest on one side, a value on the other: the values decide when both have one */
	struct cmp_value dv = bits("fp32", f32(1.0f));
	dv.digest = "0123456789abcdef", dv.digest_alg = "xxh3t64";
	VERDICT(run(dv, bits("fp32", f32(1.0f))), VERDICT_BITWISE_EQUAL);
	VERDICT(run(digest("xxh3t64", "0123456789abcdef"), bits("fp32", f32(1.0f))), VERDICT_INCOMPARABLE);
}

static void test_md5(void)
{
	char hex[33];
	CHECK(!compare_md5_fp32(0x412d0000, hex) && !strcmp(hex, "5d9e731bd86cd80cea9fb3632051d88b"), "md5 %s", hex);
	/* md5 on a, bits on b and the other way round */
	struct cmp_value m = digest("md5", "5d9e731bd86cd80cea9fb3632051d88b");
	VERDICT(run(m, bits("fp32", 0x412d0000)), VERDICT_BITWISE_EQUAL);
	VERDICT(run(bits("fp32", 0x412d0000), m), VERDICT_BITWISE_EQUAL);
	struct cmp_result r = run(m, bits("fp32", 0x412d0001));
	VERDICT(r, VERDICT_DIFFER);
	CHECK(strstr(r.reason, "0x412d0001") != NULL, "reason %s", r.reason);
	VERDICT(run(bits("fp32", 0x412d0001), m), VERDICT_DIFFER);
	/* an fp64 that is exactly the float32: bitwise; bf16 10.8125 (0x412d) widens exactly */
	VERDICT(run(m, bits("fp64", f64(10.8125))), VERDICT_BITWISE_EQUAL);
	VERDICT(run(m, bits("bf16", 0x412d)), VERDICT_BITWISE_EQUAL);
	/* an fp64 that only rounds to it: equal as printed, not bitwise */
	VERDICT(run(m, bits("fp64", f64(10.8125) + 1)), VERDICT_EQUAL_AS_PRINTED);
	/* md5 on both sides: plain digest comparison */
	VERDICT(run(m, digest("md5", "5d9e731bd86cd80cea9fb3632051d88c")), VERDICT_DIFFER);
}

static void test_missing(void)
{
	struct cmp_value miss = {.missing = "skipped iteration"};
	struct cmp_result r = run(miss, bits("fp32", 0x3f800000));
	VERDICT(r, VERDICT_DIFFER);
	CHECK(strstr(r.reason, "missing in a: skipped iteration") != NULL, "reason %s", r.reason);
	r = run(bits("fp32", 0x3f800000), miss);
	CHECK(strstr(r.reason, "missing in b") != NULL, "reason %s", r.reason);
	VERDICT(run(miss, miss), VERDICT_EQUAL_AS_PRINTED);
	struct cmp_value none = {0};
	VERDICT(run(none, none), VERDICT_EQUAL_AS_PRINTED);
	CHECK(verdict_is_difference(VERDICT_ONLY_A) && verdict_is_difference(VERDICT_INCOMPARABLE) &&
		      !verdict_is_difference(VERDICT_EQUAL_AS_PRINTED),
	      "verdict_is_difference");
	CHECK(!strcmp(verdict_name(VERDICT_ONLY_B), "only-in-b"), "name %s", verdict_name(VERDICT_ONLY_B));
}

int main(void)
{
	test_bits_same_dtype();
	test_special();
	test_cross_dtype();
	test_coarser();
	test_exact_bits();
	test_inferred();
	test_summaries();
	test_intervals();
	test_digests();
	test_md5();
	test_missing();
	if (fails) {
		fprintf(stderr, "%d check(s) failed\n", fails);
		return 1;
	}
	printf("all compare checks passed\n");
	return 0;
}
