/* test-math.c: accuracy and edge cases of the portable binary32 transcendentals in numerics.h
 * against long double references (glibc, 64-bit mantissa). For every function the inputs are:
 * every 131st binary32 bit pattern over all 2^32 (32.8 M inputs, both signs, all binades), every
 * 3rd float of the function's interesting range, +-256 floats around each edge (0, subnormals,
 * FLT_MIN, FLT_MAX, overflow/underflow thresholds, the softplus threshold 20, the polynomial
 * switch points, ...), infinities and NaNs. Verdict per input: the result is the correctly
 * rounded value or one of its two binary32 neighbours (<= 1 ulp), specials exact, NaN payloads
 * quieted. sin and cos are judged inside their exact-reduction domain |x| <= ALIGN_TRIG_MAX_ARG (beyond it only
 * NaN/inf handling is checked); align_powf_pos over RoPE bases and exponents in [0, 1). Prints, per function: inputs tested, results not correctly rounded, max error in
 * ulps (vs the long double value). Mimic variants are measured and held to their own bounds.
 * Exit status 0 = pass. Usage: test-math [stride] (default 131; 1 = exhaustive). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "numerics.h"

#define DENSE_N 4000000 /* dense-sweep points per function */

typedef float (*f32_fn)(float);
typedef long double (*ref_fn)(long double);

static long double ref_exp(long double x)
{
	return expl(x);
}
static long double ref_exp2(long double x)
{
	return exp2l(x);
}
static long double ref_expm1(long double x)
{
	return expm1l(x);
}
static long double ref_log(long double x)
{
	return logl(x);
}
static long double ref_log1p(long double x)
{
	return log1pl(x);
}
static long double ref_sqrt(long double x)
{
	return sqrtl(x);
}
static long double ref_rsqrt(long double x)
{
	return x == 0 ? 1.0L / x : 1.0L / sqrtl(x);
}
static long double ref_sigmoid(long double x)
{
	/* written as e^x / (1 + e^x) on the negative side to differ from the implementation */
	if (x < 0) {
		long double e = expl(x);
		return e / (1.0L + e);
	}
	return 1.0L / (1.0L + expl(-x));
}
static long double ref_softplus(long double x)
{
	if (isnan(x))
		return x;
	return (x > 0 ? x : 0.0L) + log1pl(expl(-fabsl(x)));
}
static long double ref_silu(long double x)
{
	if (isinf(x))
		return x > 0 ? x : -0.0L;
	return x * ref_sigmoid(x);
}

static long double ref_sin(long double x)
{
	return sinl(x);
}
static long double ref_cos(long double x)
{
	return cosl(x);
}

static float mimic_libm_exp(float x)
{
	return mimic_libm_expf(x);
}

struct fn_case {
	const char *name;
	f32_fn f;
	ref_fn ref;
	float lo, hi;	   /* dense-sweep range */
	double max_ulps;   /* bound on the error vs the long double value */
	int need_cr_or_nb; /* 1: result must be the correctly rounded value or a neighbour */
	float dom;	   /* > 0: finite |x| above it is outside the accuracy domain (not judged) */
};

static const struct fn_case cases[] = {
	{"align_expf", align_expf, ref_exp, -104.0f, 89.0f, 1.0, 1, 0},
	{"align_exp2f", align_exp2f, ref_exp2, -150.0f, 128.0f, 1.0, 1, 0},
	{"align_expm1f", align_expm1f, ref_expm1, -20.0f, 89.0f, 1.0, 1, 0},
	{"align_logf", align_logf, ref_log, 0.0f, 16.0f, 1.0, 1, 0},
	{"align_log1pf", align_log1pf, ref_log1p, -1.0f, 16.0f, 1.0, 1, 0},
	{"align_sigmoidf", align_sigmoidf, ref_sigmoid, -110.0f, 20.0f, 1.0, 1, 0},
	{"align_softplusf", align_softplusf, ref_softplus, -110.0f, 30.0f, 1.0, 1, 0},
	{"align_sqrtf", align_sqrtf, ref_sqrt, 0.0f, 16.0f, 0.5, 1, 0},
	{"align_rsqrtf", align_rsqrtf, ref_rsqrt, 0.0f, 16.0f, 1.0, 1, 0},
	{"align_siluf", align_siluf, ref_silu, -110.0f, 30.0f, 1.0, 1, 0},
	{"align_rsqrtf_div", align_rsqrtf_div, ref_rsqrt, 0.0f, 16.0f, 1.5, 0, 0},
	{"mimic_rsqrtf_approx", mimic_rsqrtf_approx, ref_rsqrt, 0.0f, 16.0f, 4.0, 0, 0},
	{"mimic_exp_via_exp2f", mimic_exp_via_exp2f, ref_exp, -104.0f, 89.0f, 160.0, 0, 0},
	{"mimic_libm_expf", mimic_libm_exp, ref_exp, -104.0f, 89.0f, 1.0, 1, 0},
	{"align_sinf", align_sinf, ref_sin, -4096.0f, 4096.0f, 1.0, 1, ALIGN_TRIG_MAX_ARG},
	{"align_cosf", align_cosf, ref_cos, -4096.0f, 4096.0f, 1.0, 1, ALIGN_TRIG_MAX_ARG},
};

struct stats {
	uint64_t n, not_cr, fail;
	double max_ulps;
	float worst_x;
};

/* ordered integer of a binary32 so that neighbours differ by 1 (-0 and +0 both map to 0) */
static int64_t ord(float f)
{
	int32_t i = (int32_t)align_f32_bits(f);
	return i < 0 ? -(int64_t)(i & 0x7fffffff) : i;
}

static float from_ord(int64_t o)
{
	return o < 0 ? align_bits_f32((uint32_t)(-o) | 0x80000000u) : align_bits_f32((uint32_t)o);
}

/* size of one ulp at the binary32 value nearest to v (|v| finite) */
static long double ulp_at(long double v)
{
	long double a = fabsl(v);
	if (a < 0x1p-126L)
		return 0x1p-149L;
	int e;
	frexpl(a, &e); /* a = m 2^e, m in [0.5,1) */
	if (e > 128)
		e = 128;
	return ldexpl(1.0L, e - 24);
}

static void check(const struct fn_case *c, float x, struct stats *st)
{
	if (c->dom > 0 && fabsf(x) > c->dom && !isinf(x))
		return;
	float got = c->f(x);
	long double r = c->ref((long double)x);
	st->n++;
	if (align_isnanf(x)) {
		if (align_f32_bits(got) != (align_f32_bits(x) | 0x00400000u) && st->fail++ < 5)
			printf("  %s(nan 0x%08" PRIx32 ") = 0x%08" PRIx32 ": NaN not quieted in place\n", c->name,
			       align_f32_bits(x), align_f32_bits(got));
		return;
	}
	if (isnan(r)) {
		if (!align_isnanf(got) && st->fail++ < 5)
			printf("  %s(%a) = %a, want NaN\n", c->name, x, got);
		return;
	}
	float cr = (float)r;
	if (align_f32_bits(got) != align_f32_bits(cr))
		st->not_cr++;
	double err;
	if (isinf(cr) || isinf(got))
		err = align_f32_bits(got) == align_f32_bits(cr) ? 0.0 : (double)llabs(ord(got) - ord(cr));
	else
		err = (double)(fabsl((long double)got - r) / ulp_at(r));
	if (err > st->max_ulps) {
		st->max_ulps = err;
		st->worst_x = x;
	}
	int bad = err > c->max_ulps;
	if (c->need_cr_or_nb && llabs(ord(got) - ord(cr)) > 1)
		bad = 1;
	if (got == 0.0f && cr == 0.0f && signbit(got) != signbit(cr))
		bad = 1; /* zeros must carry the right sign */
	if (bad && st->fail++ < 5)
		printf("  %s(%a) = %a, correctly rounded %a (%.3g ulp)\n", c->name, x, got, cr, err);
}

static const float edges[] = {
	0.0f,
	0x1p-149f,
	0x1p-126f,
	0x1.fffffcp-127f,
	1.0f,
	2.0f,
	0.5f,
	FLT_MAX,
	20.0f,
	10.0f,
	88.72283935546875f,
	88.7228317f,
	89.0f,
	87.33654f,
	103.972076f,
	103.278929f,
	104.0f,
	110.0f,
	149.0f,
	150.0f,
	126.0f,
	128.0f,
	127.99999f,
	0.34f,
	0.3466f,
	0.2928f,
	0.4142f,
	0.7071068f,
	1.4142135f,
	17.0f,
	17.32868f,
	36.0f,
	0x1p-24f,
	0x1p-25f,
	0x1p-12f,
	0x1p23f,
	0x1p24f,
	1e30f,
	0.78539819f,
	1.57079637f,
	3.14159274f,
	6.28318548f,
	355.0f,
	1e6f,
	ALIGN_TRIG_MAX_ARG,
};

/* align_powf_pos(b, e): RoPE bases, e = 2j/d for d in {64, 128} and a dense sweep of e in [0, 1) */
static int check_pow(void)
{
	const float bases[] = {2.0f, 10000.0f, 40000.0f, 160000.0f, 1e6f, 3.5f, 123456.7f};
	uint64_t n = 0, not_cr = 0, fail = 0;
	for (size_t k = 0; k < sizeof bases / sizeof bases[0]; k++)
		for (int i = 0; i <= 1 << 18; i++) {
			float b = bases[k], e = i < 128 ? (float)(2 * (i % 64)) / (i < 64 ? 64.0f : 128.0f)
							: (float)i / (float)(1 << 18);
			float got = align_powf_pos(b, e);
			long double r = powl((long double)b, (long double)e);
			float cr = (float)r;
			n++;
			not_cr += got != cr;
			if (llabs(ord(got) - ord(cr)) > 1 && fail++ < 5)
				printf("  align_powf_pos(%a, %a) = %a, correctly rounded %a\n", b, e, got, cr);
		}
	if (!align_isnanf(align_powf_pos(-2.0f, 0.5f)) || !align_isnanf(align_powf_pos(2.0f, INFINITY)) ||
	    align_powf_pos(7.0f, 0.0f) != 1.0f) {
		printf("  align_powf_pos: special operands\n");
		fail++;
	}
	printf("%-20s inputs %10" PRIu64 "  not correctly rounded %8" PRIu64 "%s\n", "align_powf_pos", n, not_cr,
	       fail ? "  FAIL" : "");
	return fail != 0;
}

int main(int argc, char **argv)
{
	uint64_t stride = argc > 1 ? strtoull(argv[1], NULL, 10) : 131;
	int failed = 0;
	if (stride == 0)
		stride = 131;
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		const struct fn_case *c = &cases[k];
		struct stats st = {0};
		for (uint64_t i = 0; i <= 0xffffffffull; i += stride)
			check(c, align_bits_f32((uint32_t)i), &st);
		/* dense sweep of the interesting range: DENSE_N floats evenly spaced in ulp space */
		int64_t o0 = ord(c->lo), o1 = ord(c->hi), step = (o1 - o0) / DENSE_N + 1;
		for (int64_t o = o0; o <= o1; o += step)
			check(c, from_ord(o), &st);
		for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
			for (int sgn = 0; sgn < 2; sgn++) {
				float x = sgn ? -edges[e] : edges[e];
				float y = x;
				for (int s = 0; s < 256; s++) {
					check(c, x, &st);
					check(c, y, &st);
					x = nextafterf(x, INFINITY);
					y = nextafterf(y, -INFINITY);
				}
			}
		}
		const float specials[] = {INFINITY,
					  -INFINITY,
					  align_bits_f32(0x7fc00000u),
					  align_bits_f32(0xffc00001u),
					  align_bits_f32(0x7f800001u),
					  align_bits_f32(0xff812345u)};
		for (size_t e = 0; e < sizeof specials / sizeof specials[0]; e++)
			check(c, specials[e], &st);
		printf("%-20s inputs %10" PRIu64 "  not correctly rounded %8" PRIu64 "  max %.4f ulp at %a%s\n",
		       c->name, st.n, st.not_cr, st.max_ulps, st.worst_x, st.fail ? "  FAIL" : "");
		if (st.fail)
			failed = 1;
	}
	failed |= check_pow();
	return failed;
}
