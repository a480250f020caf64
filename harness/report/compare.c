/* compare: the per-pair verdict (rules in compare.h), exact dtype widening and the md5 of a float32. */
#include "compare.h"

#include "compare-impl.h"
#include "numtext.h"

#include <float.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const verdict_names[VERDICT_COUNT] = {
	"bitwise-equal", "equal-as-printed", "differ", "incomparable", "only-in-a", "only-in-b",
};

const char *verdict_name(enum verdict v)
{
	return v < VERDICT_COUNT ? verdict_names[v] : "?";
}

int verdict_is_difference(enum verdict v)
{
	return v >= VERDICT_DIFFER && v < VERDICT_COUNT;
}

static int is(const char *dtype, const char *name)
{
	return dtype && !strcmp(dtype, name);
}

/* The result outlives the values: name dtypes by static strings. */
static const char *static_dtype(const char *dtype)
{
	static const char *const known[] = {"fp64",  "fp32",  "bf16", "fp16",  "int64",
					    "int32", "int16", "int8", "uint8", "bool"};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (is(dtype, known[i]))
			return known[i];
	return "unknown";
}

static double half_to_double(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
	return (h & 0x8000) ? -v : v;
}

static double float_of(uint32_t b)
{
	float f;
	memcpy(&f, &b, 4);
	return f;
}

/* Integer dtypes: bits hold the two's complement value in the dtype's width. */
static int int_width(const char *dtype)
{
	static const struct {
		const char *name;
		int width;
	} ints[] = {
		{"int64", 64}, {"int32", 32}, {"int16", 16}, {"int8", 8}, {"uint8", -8}, {"bool", -8},
	};
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
		if (is(dtype, ints[i].name))
			return ints[i].width;
	return 0;
}

static int64_t int_value(uint64_t bits, int width)
{
	if (width < 0)
		return (int64_t)(bits & ((1ull << -width) - 1));
	if (width == 64)
		return (int64_t)bits;
	uint64_t sign = 1ull << (width - 1), mask = (sign << 1) - 1;
	bits &= mask;
	return (bits & sign) ? (int64_t)(bits | ~mask) : (int64_t)bits;
}

int compare_bits_to_double(const char *dtype, uint64_t bits, double *out)
{
	if (is(dtype, "fp64")) {
		memcpy(out, &bits, 8);
	} else if (is(dtype, "fp32")) {
		*out = float_of((uint32_t)bits);
	} else if (is(dtype, "bf16")) {
		*out = float_of((uint32_t)(bits & 0xffff) << 16);
	} else if (is(dtype, "fp16")) {
		*out = half_to_double((uint16_t)bits);
	} else if (int_width(dtype)) {
		int64_t v = int_value(bits, int_width(dtype));
		if (v > (1ll << 53) || v < -(1ll << 53))
			return 0;
		*out = (double)v;
	} else {
		return 0;
	}
	return 1;
}

/* fp16 bits of a double that is exactly an fp16 (finite or inf): 1, else 0. */
static int half_bits(double v, uint64_t *out)
{
	uint64_t sign = signbit(v) ? 0x8000 : 0;
	double a = fabs(v);
	int e;
	if (isinf(a) || a == 0) {
		*out = sign | (isinf(a) ? 0x7c00 : 0);
		return 1;
	}
	frexp(a, &e); /* a in [2^(e-1), 2^e) */
	if (e - 1 < -14) {
		double k = ldexp(a, 24); /* subnormal: a = k 2^-24 */
		if (k != floor(k))
			return 0;
		*out = sign | (uint64_t)k;
		return 1;
	}
	double m = ldexp(a, 11 - e); /* in [1024, 2048) */
	if (e - 1 > 15 || m != floor(m))
		return 0;
	*out = sign | (uint64_t)(e - 1 + 15) << 10 | ((uint64_t)m - 1024);
	return 1;
}

int compare_double_to_bits(const char *dtype, double v, uint64_t *bits)
{
	if (isnan(v))
		return 0;
	if (is(dtype, "fp64")) {
		memcpy(bits, &v, 8);
		return 1;
	}
	if (is(dtype, "fp32") || is(dtype, "bf16")) {
		float f = (float)v;
		uint32_t b;
		memcpy(&b, &f, 4);
		if ((double)f != v || (is(dtype, "bf16") && (b & 0xffff)))
			return 0;
		*bits = is(dtype, "bf16") ? b >> 16 : b;
		return 1;
	}
	if (is(dtype, "fp16"))
		return half_bits(v, bits);
	int w = int_width(dtype);
	if (!w || v != floor(v))
		return 0;
	double lo = w < 0 ? 0 : -ldexp(1, w - 1), hi = w < 0 ? ldexp(1, -w) : ldexp(1, w - 1);
	if (is(dtype, "bool"))
		hi = 2;
	if (v < lo || v >= hi)
		return 0;
	uint64_t x = (uint64_t)(int64_t)v;
	*bits = w == 64 || w == -64 ? x : x & ((1ull << (w < 0 ? -w : w)) - 1);
	return 1;
}

int compare_md5_fp32(uint32_t bits, char hex[33])
{
	unsigned char le[4] = {bits & 0xff, (bits >> 8) & 0xff, (bits >> 16) & 0xff, bits >> 24};
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (!EVP_Digest(le, 4, md, &n, EVP_md5(), NULL) || n != 16)
		return -1;
	for (unsigned i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

void cmp_set(struct cmp_result *r, enum verdict v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof r->reason, fmt, ap);
	va_end(ap);
	r->verdict = v;
}

static void rel_diff(struct cmp_result *r, double a, double b)
{
	if (!isfinite(a) || !isfinite(b))
		return;
	double m = fmax(fabs(a), fabs(b));
	r->has_rel = 1;
	r->rel_diff = m == 0 ? 0 : fabs(a - b) / m;
}

/* ULP distance of two values of one float dtype; 0 when the dtype has no helper. */
static int ulp_same(const char *dtype, uint64_t a, uint64_t b, uint64_t *out)
{
	if (is(dtype, "fp32"))
		*out = ulp_distance_f32((uint32_t)a, (uint32_t)b);
	else if (is(dtype, "fp64"))
		*out = ulp_distance_f64(a, b);
	else if (is(dtype, "bf16") || is(dtype, "fp16")) /* both are sign-magnitude 16-bit patterns */
		*out = ulp_distance_bf16((uint16_t)a, (uint16_t)b);
	else
		return 0;
	return 1;
}

static void bits_same_dtype(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *r)
{
	const char *dt = a->dtype ? a->dtype : "unknown dtype";
	double va = 0, vb = 0;
	int exact = compare_bits_to_double(a->dtype, a->bits, &va) && compare_bits_to_double(b->dtype, b->bits, &vb);
	if (a->bits == b->bits) {
		if (exact && isnan(va))
			cmp_set(r, VERDICT_BITWISE_EQUAL, "both NaN with identical bits (%s)", dt);
		else
			cmp_set(r, VERDICT_BITWISE_EQUAL, "identical bits (%s)", dt);
		return;
	}
	int w = int_width(a->dtype);
	if (w) {
		int64_t x = int_value(a->bits, w), y = int_value(b->bits, w);
		r->has_ulp = 1, r->ulp_dtype = static_dtype(a->dtype);
		r->ulp = x > y ? (uint64_t)x - (uint64_t)y : (uint64_t)y - (uint64_t)x;
		rel_diff(r, (double)x, (double)y);
		cmp_set(r, VERDICT_DIFFER, "integers differ: %lld vs %lld", (long long)x, (long long)y);
		return;
	}
	if (exact && (isnan(va) || isnan(vb))) {
		if (isnan(va) && isnan(vb))
			cmp_set(r, VERDICT_DIFFER, "both NaN, with different bits (%s)", dt);
		else
			cmp_set(r, VERDICT_DIFFER, "%s is NaN and %s is not (%s)", isnan(va) ? "a" : "b",
				isnan(va) ? "b" : "a", dt);
		return;
	}
	r->has_ulp = ulp_same(a->dtype, a->bits, b->bits, &r->ulp);
	r->ulp_dtype = r->has_ulp ? static_dtype(a->dtype) : NULL;
	if (exact)
		rel_diff(r, va, vb);
	if (exact && va == vb) /* only +0 and -0 */
		cmp_set(r, VERDICT_DIFFER, "+0 and -0: equal as numbers, different bits (%s)", dt);
	else if (r->has_ulp)
		cmp_set(r, VERDICT_DIFFER, "bits differ by %llu ulp (%s)", (unsigned long long)r->ulp, dt);
	else
		cmp_set(r, VERDICT_DIFFER, "bits differ (%s)", dt);
}

/* A float dtype's precision: significant bits, least normal exponent, largest finite value; rank orders
 * them by precision (0: not a float dtype compared across dtypes). bf16 (8 bits) is coarser than fp16
 * (11 bits) although its range is wider: every fp16 value rounds to a bf16 (the reverse may overflow). */
struct fmt {
	const char *name;
	int p, emin;
	double max;
	int rank;
};

static const struct fmt *fmt_of(const char *dtype)
{
	static const struct fmt fmts[] = {
		{"fp64", 53, -1022, DBL_MAX, 4},
		{"fp32", 24, -126, FLT_MAX, 3},
		{"fp16", 11, -14, 65504.0, 2},
		{"bf16", 8, -126, 0x1.fep127, 1},
	};
	for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
		if (is(dtype, fmts[i].name))
			return &fmts[i];
	return NULL;
}

/* v rounded to the format, to nearest, ties to even (one rounding from the exact double); +-inf past the
 * largest finite value as IEEE overflow gives. */
static double round_to(const struct fmt *f, double v)
{
	if (v == 0 || !isfinite(v))
		return v;
	int e;
	frexp(v, &e);
	int E = e - 1 < f->emin ? f->emin : e - 1; /* exponent of the ulp's binade */
	double r = ldexp(nearbyint(ldexp(v, f->p - 1 - E)), E - (f->p - 1));
	return fabs(r) > f->max ? copysign(INFINITY, v) : r;
}

/* The reals that round to the finite value c of the format: [lo, hi] (half the gap to each neighbour). */
static void rounding_interval(const struct fmt *f, double c, double *lo, double *hi)
{
	int e;
	frexp(c, &e);
	int E = c == 0 || e - 1 < f->emin ? f->emin : e - 1;
	double ulp = ldexp(1, E - (f->p - 1)), m = fabs(c);
	double up = ulp, down = (c != 0 && E > f->emin && m == ldexp(1, E)) ? ulp / 2 : ulp;
	*lo = c < 0 ? c - up / 2 : c - down / 2;
	*hi = c < 0 ? c + down / 2 : c + up / 2;
}

static void bits_cross_dtype(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *r)
{
	double va, vb;
	if (!compare_bits_to_double(a->dtype, a->bits, &va) || !compare_bits_to_double(b->dtype, b->bits, &vb)) {
		cmp_set(r, VERDICT_INCOMPARABLE, "bits in %s and %s cannot be compared",
			a->dtype ? a->dtype : "an unknown dtype", b->dtype ? b->dtype : "an unknown dtype");
		return;
	}
	if (isnan(va) || isnan(vb)) {
		if (isnan(va) && isnan(vb))
			cmp_set(r, VERDICT_EQUAL_AS_PRINTED,
				"both NaN (%s and %s: payloads not comparable across dtypes)", a->dtype, b->dtype);
		else
			cmp_set(r, VERDICT_DIFFER, "%s is NaN and %s is not", isnan(va) ? "a" : "b",
				isnan(va) ? "b" : "a");
		return;
	}
	if (va == vb && signbit(va) == signbit(vb)) {
		cmp_set(r, VERDICT_BITWISE_EQUAL, "the %s value is exactly the %s value (%s vs %s)", a->dtype, b->dtype,
			a->dtype, b->dtype);
		return;
	}
	rel_diff(r, va, vb);
	if (va == vb) { /* +0 and -0 */
		r->has_ulp = 1, r->ulp = 1, r->ulp_dtype = static_dtype(signbit(va) ? a->dtype : b->dtype);
		cmp_set(r, VERDICT_DIFFER, "+0 and -0: equal as numbers, different signs (%s vs %s)", a->dtype,
			b->dtype);
		return;
	}
	const struct fmt *fa = fmt_of(a->dtype), *fb = fmt_of(b->dtype);
	if (!fa || !fb) { /* an integer against a float */
		cmp_set(r, VERDICT_DIFFER, "values differ: %.17g (%s) vs %.17g (%s)", va, a->dtype, vb, b->dtype);
		return;
	}
	/* c: the coarser side, kept exact; f: the finer side, rounded to c's dtype */
	int a_coarse = fa->rank < fb->rank;
	const struct fmt *fc = a_coarse ? fa : fb;
	const struct cmp_value *c = a_coarse ? a : b, *f = a_coarse ? b : a;
	double vc = a_coarse ? va : vb, vf = a_coarse ? vb : va, rounded = round_to(fc, vf);
	const char *cn = a_coarse ? "a" : "b", *fname = a_coarse ? "b" : "a";
	uint64_t rb = 0;
	compare_double_to_bits(fc->name, rounded, &rb); /* exact: rounded is a value of the format */
	if (rb == c->bits) {
		cmp_set(r, VERDICT_EQUAL_AS_PRINTED,
			"equal at %s precision (%s vs %s, compared at the coarser dtype): %s's %s value %.17g rounds "
			"(to nearest even) to %s's %s value %.9g; not bitwise",
			fc->name, a->dtype, b->dtype, fname, f->dtype, vf, cn, c->dtype, vc);
		return;
	}
	r->has_ulp = ulp_same(fc->name, c->bits, rb, &r->ulp);
	r->ulp_dtype = fc->name;
	if (!isfinite(vc)) {
		cmp_set(r, VERDICT_DIFFER,
			"differ at %s precision (%s vs %s, compared at the coarser dtype): %s is %g, %s's %s value "
			"%.17g rounds to %.9g",
			fc->name, a->dtype, b->dtype, cn, vc, fname, f->dtype, vf, rounded);
		return;
	}
	double lo, hi;
	rounding_interval(fc, vc, &lo, &hi);
	cmp_set(r, VERDICT_DIFFER,
		"differ at %s precision (%s vs %s, compared at the coarser dtype): %s's %s value %.17g is outside "
		"[%.17g, %.17g], the reals that round to %s's %s value %.9g; it rounds to %.9g, %llu ulp of %s away",
		fc->name, a->dtype, b->dtype, fname, f->dtype, vf, lo, hi, cn, c->dtype, vc, rounded,
		(unsigned long long)r->ulp, fc->name);
}

/* Side x has an md5 digest only, side y exact bits. */
static void md5_vs_bits(const struct cmp_value *x, const struct cmp_value *y, const char *xn, const char *yn,
			struct cmp_result *r)
{
	double v;
	if (!compare_bits_to_double(y->dtype, y->bits, &v) || int_width(y->dtype)) {
		cmp_set(r, VERDICT_INCOMPARABLE, "%s has an md5 digest, %s has %s bits", xn, yn,
			y->dtype ? y->dtype : "untyped");
		return;
	}
	float f = (float)v;
	int exact = isnan(v) ? is(y->dtype, "fp32") : (double)f == v;
	uint32_t fb;
	memcpy(&fb, &f, 4);
	if (is(y->dtype, "fp32"))
		fb = (uint32_t)y->bits;
	char hex[33];
	if (compare_md5_fp32(fb, hex)) {
		cmp_set(r, VERDICT_INCOMPARABLE, "md5 is not available");
		return;
	}
	int same = !strcasecmp(hex, x->digest);
	const char *how = is(y->dtype, "fp32") ? "" : exact ? " (widened exactly to fp32)" : " (rounded to fp32)";
	if (same && exact)
		cmp_set(r, VERDICT_BITWISE_EQUAL, "md5 of %s's fp32 bits 0x%08x%s equals %s's md5 digest", yn, fb, how,
			xn);
	else if (same)
		cmp_set(r, VERDICT_EQUAL_AS_PRINTED,
			"md5 of %s's value%s 0x%08x equals %s's md5 digest; %s is not a float32", yn, how, fb, xn, yn);
	else
		cmp_set(r, VERDICT_DIFFER, "md5 of %s's fp32 bits 0x%08x%s is %s, %s's md5 digest is %.40s", yn, fb,
			how, hex, xn, x->digest);
}

static int has_number(const struct cmp_value *v)
{
	return v->has_bits || v->has_value || v->has_interval || v->is_nan;
}

/* Interval of a side: printed [lo, hi], or the exact value as [v, v]. */
static int interval_of(const struct cmp_value *v, double *lo, double *hi, double *mid)
{
	double x;
	if (v->has_interval) {
		*lo = v->lo, *hi = v->hi;
		*mid = v->has_value ? v->value : (v->lo + v->hi) / 2;
		return 1;
	}
	if (v->has_value)
		x = v->value;
	else if (!(v->has_bits && compare_bits_to_double(v->dtype, v->bits, &x)))
		return 0;
	*lo = *hi = *mid = x;
	return 1;
}

/* A value the dtype of the printed sides can hold (fp32 unless a printed side is fp64). */
static int representable(const struct cmp_value *a, const struct cmp_value *b, double p)
{
	int fp64 = (!a->has_bits && is(a->dtype, "fp64")) || (!b->has_bits && is(b->dtype, "fp64"));
	return fp64 || (double)(float)p == p;
}

/* Do the sets of values consistent with each side meet? Two prints at the same precision whose
 * intervals only touch (10.82613 and 10.82612 share the rounding boundary 10.826125) meet only if the
 * boundary itself is a value of the dtype (a tie such as 1.25 printed as 1.2 or 1.3). The stored
 * bounds are doubles rounded from the decimal, so "touch" allows a few ulps. Exact values on both
 * sides meet only if equal. */
static int overlap(const struct cmp_value *a, const struct cmp_value *b, double la, double ha, double lb, double hb)
{
	if (la == ha && lb == hb)
		return la == lb;
	double lo = fmax(la, lb), hi = fmin(ha, hb), eps = 4 * DBL_EPSILON * fmax(fabs(lo), fabs(hi));
	if (hi - lo > eps)
		return 1;
	if (lo - hi > eps)
		return 0;
	if (la == ha || lb == hb) /* an exact value on a boundary of the other side's print */
		return 1;
	return representable(a, b, (lo + hi) / 2);
}

static void values(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *r)
{
	if (a->is_nan || b->is_nan) {
		if (a->is_nan && b->is_nan)
			cmp_set(r, VERDICT_EQUAL_AS_PRINTED, "both NaN as printed");
		else
			cmp_set(r, VERDICT_DIFFER, "%s is NaN and %s is not", a->is_nan ? "a" : "b",
				a->is_nan ? "b" : "a");
		return;
	}
	double la, ha, ma, lb, hb, mb;
	if (!interval_of(a, &la, &ha, &ma) || !interval_of(b, &lb, &hb, &mb)) {
		cmp_set(r, VERDICT_INCOMPARABLE, "a value of unknown dtype cannot be compared");
		return;
	}
	int da = a->has_bits ? 0 : a->digits, db = b->has_bits ? 0 : b->digits;
	int digits = da && db ? (da < db ? da : db) : (da ? da : db);
	if (overlap(a, b, la, ha, lb, hb)) {
		r->digits = digits;
		if (digits)
			cmp_set(r, VERDICT_EQUAL_AS_PRINTED, "equal as printed (%d digits)", digits);
		else
			cmp_set(r, VERDICT_EQUAL_AS_PRINTED, "equal values, bits not recorded");
		return;
	}
	rel_diff(r, ma, mb);
	if (la == ha && lb == hb)
		cmp_set(r, VERDICT_DIFFER, "values differ: %.17g vs %.17g", ma, mb);
	else
		cmp_set(r, VERDICT_DIFFER, "printed values do not overlap: a in [%.10g, %.10g], b in [%.10g, %.10g]",
			la, ha, lb, hb);
}

static int is_md5(const struct cmp_value *v)
{
	return v->digest && v->digest_alg && !strcasecmp(v->digest_alg, "md5");
}

/* Bits that ingest inferred from a print (bits and an interval [lo, hi]) and that decided the verdict
 * are named: "a's bits inferred: the only fp32 in [lo, hi]". */
static void note_inferred(const struct cmp_value *v, const char *side, struct cmp_result *r)
{
	if (!v->has_bits || !v->has_interval)
		return;
	size_t n = strlen(r->reason);
	snprintf(r->reason + n, sizeof r->reason - n, "; %s's bits inferred: the only %s in [%.12g, %.12g]", side,
		 v->dtype ? v->dtype : "value", v->lo, v->hi);
}

void cmp_bits(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *r)
{
	if ((!a->dtype && !b->dtype) || (a->dtype && b->dtype && !strcmp(a->dtype, b->dtype)))
		bits_same_dtype(a, b, r);
	else
		bits_cross_dtype(a, b, r);
}

static int has_summary(const struct cmp_value *v)
{
	return v->head || v->stats;
}

void compare_values(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *r)
{
	memset(r, 0, sizeof *r);
	if (a->missing || b->missing) {
		if (a->missing && b->missing)
			cmp_set(r, VERDICT_EQUAL_AS_PRINTED, "missing on both sides (a: %.100s; b: %.100s)", a->missing,
				b->missing);
		else
			cmp_set(r, VERDICT_DIFFER, "missing in %s: %.200s", a->missing ? "a" : "b",
				a->missing ? a->missing : b->missing);
		return;
	}
	if (a->has_bits && b->has_bits) {
		cmp_bits(a, b, r);
		note_inferred(a, "a", r);
		note_inferred(b, "b", r);
		return;
	}
	if (a->digest && b->digest && a->digest_alg && b->digest_alg && !strcasecmp(a->digest_alg, b->digest_alg)) {
		if (!strcasecmp(a->digest, b->digest))
			cmp_set(r, VERDICT_BITWISE_EQUAL, "identical %s digests", a->digest_alg);
		else
			cmp_set(r, VERDICT_DIFFER, "%s digests differ", a->digest_alg);
		return;
	}
	if (is_md5(a) && !a->has_bits && b->has_bits) {
		md5_vs_bits(a, b, "a", "b", r);
		note_inferred(b, "b", r);
		return;
	}
	if (is_md5(b) && !b->has_bits && a->has_bits) {
		md5_vs_bits(b, a, "b", "a", r);
		note_inferred(a, "a", r);
		return;
	}
	if (has_number(a) && has_number(b)) {
		values(a, b, r);
		return;
	}
	if (has_summary(a) && has_summary(b)) {
		cmp_summaries(a, b, r);
		return;
	}
	if (!has_number(a) && !has_number(b) && !a->digest && !b->digest) {
		cmp_set(r, VERDICT_EQUAL_AS_PRINTED, "no value on either side");
		return;
	}
	if (a->digest && b->digest)
		cmp_set(r, VERDICT_INCOMPARABLE, "digests of different algorithms (%s vs %s)",
			a->digest_alg ? a->digest_alg : "?", b->digest_alg ? b->digest_alg : "?");
	else
		cmp_set(r, VERDICT_INCOMPARABLE, "%s has %s, %s has %s", "a",
			a->digest	? "only a digest"
			: has_number(a) ? "only a value"
					: "no value",
			"b",
			b->digest	? "only a digest"
			: has_number(b) ? "only a value"
					: "no value");
}
