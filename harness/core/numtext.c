/* numtext: strict float syntax, precision intervals and ULP distances. */
#include "numtext.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int special_word(const char *s, size_t n, int *neg)
{
	*neg = 0;
	if (n && (*s == '-' || *s == '+')) {
		*neg = *s == '-';
		s++, n--;
	}
	if ((n == 3 && !strncasecmp(s, "nan", 3)))
		return 1;
	if ((n == 3 && !strncasecmp(s, "inf", 3)) || (n == 8 && !strncasecmp(s, "infinity", 8)))
		return *neg ? 3 : 2;
	return 0;
}

/* powl(10, k), remembered for the exponents prints use: the very value powl gives (computed by it on
 * first use), without its cost on every value of a log. */
#define POW10_MEMO 64
static long double pow10l_of(long k)
{
	static long double memo[2 * POW10_MEMO + 1];
	static unsigned char known[2 * POW10_MEMO + 1];
	if (k < -POW10_MEMO || k > POW10_MEMO)
		return powl(10.0L, (long double)k);
	size_t i = (size_t)(k + POW10_MEMO);
	if (!known[i])
		memo[i] = powl(10.0L, (long double)k), known[i] = 1;
	return memo[i];
}

/* The syntax numtext_parse takes: [sign] digits [. digits] [e|E [sign] digits], at least one mantissa
 * digit, or a special word. Returns 0 and the scan's counts, or -1. *sp: the special word (0: none). */
struct scan {
	int sp, neg, int_digits, frac_digits, sig;
	long exp10;
};

static int scan_number(const char *text, size_t n, struct scan *sc)
{
	memset(sc, 0, sizeof *sc);
	sc->sp = special_word(text, n, &sc->neg);
	if (sc->sp)
		return 0;
	size_t i = 0;
	if (i < n && (text[i] == '-' || text[i] == '+'))
		i++;
	int leading = 1;
	for (; i < n && text[i] >= '0' && text[i] <= '9'; i++, sc->int_digits++)
		if (text[i] != '0' || !leading)
			leading = 0, sc->sig++;
	if (i < n && text[i] == '.') {
		for (i++; i < n && text[i] >= '0' && text[i] <= '9'; i++, sc->frac_digits++)
			if (text[i] != '0' || !leading)
				leading = 0, sc->sig++;
	}
	if (sc->int_digits + sc->frac_digits == 0)
		return -1;
	if (i < n && (text[i] == 'e' || text[i] == 'E')) {
		size_t j = i + 1;
		int eneg = 0;
		if (j < n && (text[j] == '-' || text[j] == '+'))
			eneg = text[j++] == '-';
		if (j >= n || text[j] < '0' || text[j] > '9')
			return -1;
		for (; j < n && text[j] >= '0' && text[j] <= '9'; j++)
			if (sc->exp10 < 100000)
				sc->exp10 = sc->exp10 * 10 + (text[j] - '0');
		sc->exp10 = eneg ? -sc->exp10 : sc->exp10;
		i = j;
	}
	return i == n && n < 512 ? 0 : -1; /* 512: numtext_parse's copy */
}

int numtext_valid(const char *text, size_t n)
{
	struct scan sc;
	return scan_number(text, n, &sc);
}

/* The last number numtext_parse converted (per thread): a parser that checks a value and then emits it
 * has it parsed two or three times (the md5 check of an anchor, the unique-float32 test, classify). */
static _Thread_local struct {
	char text[512];
	size_t n;
	enum prec_kind prec;
	int prec_n;
	struct numtext nt;
} last_parse;

static int numtext_convert(const char *text, size_t n, enum prec_kind prec, int prec_n, struct numtext *out);

int numtext_parse(const char *text, size_t n, enum prec_kind prec, int prec_n, struct numtext *out)
{
	if (n && n == last_parse.n && prec == last_parse.prec && prec_n == last_parse.prec_n &&
	    !memcmp(text, last_parse.text, n)) {
		*out = last_parse.nt;
		return 0;
	}
	int rc = numtext_convert(text, n, prec, prec_n, out);
	if (!rc) { /* n < 512: scan_number took it */
		memcpy(last_parse.text, text, n);
		last_parse.n = n, last_parse.prec = prec, last_parse.prec_n = prec_n, last_parse.nt = *out;
	}
	return rc;
}

static int numtext_convert(const char *text, size_t n, enum prec_kind prec, int prec_n, struct numtext *out)
{
	memset(out, 0, sizeof *out);
	struct scan sc;
	if (scan_number(text, n, &sc))
		return -1;
	if (sc.sp) {
		out->special = sc.sp;
		out->value = sc.sp == 1 ? NAN : (sc.sp == 2 ? INFINITY : -INFINITY);
		out->lo = out->hi = out->value;
		return 0;
	}
	int frac_digits = sc.frac_digits, sig = sc.sig;
	long exp10 = sc.exp10;
	char tmp[512];
	memcpy(tmp, text, n);
	tmp[n] = '\0';
	out->value = strtod(tmp, NULL);
	out->digits = sig ? sig : 1;
	long last = exp10 - frac_digits; /* decimal exponent of the last printed digit */
	if (prec == PREC_DEC)
		last = -prec_n;
	if (prec == PREC_EXACT) {
		out->lo = out->hi = out->value;
	} else {
		long double v = strtold(tmp, NULL);
		long double half = 0.5L * pow10l_of(last);
		out->lo = v - half;
		out->hi = v + half;
	}
	return 0;
}

int numtext_unique_f32(long double lo, long double hi, uint32_t *bits)
{
	if (isnan(lo) || isnan(hi) || lo > hi)
		return 0;
	float a = (float)lo;
	if ((long double)a < lo)
		a = nextafterf(a, INFINITY);
	float b = (float)hi;
	if ((long double)b > hi)
		b = nextafterf(b, -INFINITY);
	if (a != b || (a == 0.0f && lo < 0 && hi > 0)) /* +0 and -0 both inside: not unique */
		return 0;
	if (a == 0.0f && hi <= 0 && lo < 0)
		a = -0.0f;
	memcpy(bits, &a, 4);
	return 1;
}

static uint64_t ordered(uint64_t bits, int width)
{
	uint64_t sign = 1ull << (width - 1);
	return (bits & sign) ? ~bits & ((sign << 1) - 1) : bits | sign;
}

static uint64_t dist(uint64_t a, uint64_t b, int width)
{
	uint64_t x = ordered(a, width), y = ordered(b, width);
	/* +0 and -0 are adjacent in this order (distance 1), as in the usual ULP convention */
	return x > y ? x - y : y - x;
}

uint64_t ulp_distance_f32(uint32_t a, uint32_t b)
{
	return dist(a, b, 32);
}
uint64_t ulp_distance_f64(uint64_t a, uint64_t b)
{
	return dist(a, b, 64);
}
uint64_t ulp_distance_bf16(uint16_t a, uint16_t b)
{
	return dist(a, b, 16);
}

long numtext_shown_decimals(const char *v, size_t n)
{
	const char *dot = memchr(v, '.', n), *e = memchr(v, 'e', n);
	if (!e)
		e = memchr(v, 'E', n);
	const char *mant_end = e ? e : v + n;
	long frac = dot && dot < mant_end ? (long)(mant_end - dot - 1) : 0;
	long ex = e ? strtol(e + 1, NULL, 10) : 0;
	ex = ex > 100000 ? 100000 : ex < -100000 ? -100000 : ex;
	return frac - ex;
}
