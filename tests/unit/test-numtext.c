/* test-numtext: numtext_valid takes exactly the texts numtext_parse takes (parsers check a field with
 * the one and ingest_emit reads it with the other), and numtext_parse's intervals are those of
 * powl(10, last) for every exponent a print can show (the remembered powers are powl's own values),
 * in every precision class; the remembered last conversion never answers another text or class. Exit status
 * is the verdict. */
#include "numtext.h"

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

static const char *const texts[] = {
	"0",
	"1",
	"-1",
	"+1",
	"10.87",
	"10.869999885559082",
	"1.086875E+01",
	"1e-05",
	"2.5e-06",
	"1E5",
	"-0.0",
	".5",
	"5.",
	"007",
	"nan",
	"NaN",
	"-nan",
	"inf",
	"-inf",
	"+Infinity",
	"INFINITY",
	"1e",
	"1e+",
	"e5",
	"-",
	"+",
	".",
	"",
	" 1",
	"1 ",
	"1,000",
	"0x10",
	"1.2.3",
	"1e5.0",
	"--1",
	"1e-400",
	"1e400",
	"infinit",
	"nana",
	"12345678901234567890123456789",
	"1e99999999",
	"0.00000000000000000000000000001",
};

/* lo/hi as numtext_parse defined them before the powers were remembered: strtold +- 0.5 * powl(10, last) */
static void interval(const char *t, enum prec_kind prec, int prec_n, long double *lo, long double *hi)
{
	const char *dot = strchr(t, '.'), *e = strpbrk(t, "eE");
	const char *mant_end = e ? e : t + strlen(t);
	long frac = dot && dot < mant_end ? (long)(mant_end - dot - 1) : 0;
	long last = (e ? strtol(e + 1, NULL, 10) : 0) - frac;
	if (prec == PREC_DEC)
		last = -prec_n;
	long double v = strtold(t, NULL), half = 0.5L * powl(10.0L, (long double)last);
	*lo = v - half, *hi = v + half;
}

int main(void)
{
	char buf[1024];
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		struct numtext nt;
		int p = numtext_parse(texts[i], strlen(texts[i]), PREC_TEXT, 0, &nt);
		CHECK(numtext_valid(texts[i], strlen(texts[i])) == p, "'%s': numtext_valid %d, numtext_parse %d",
		      texts[i], numtext_valid(texts[i], strlen(texts[i])), p);
	}
	/* a text longer than numtext_parse's copy is refused by both */
	memset(buf, '1', 600);
	CHECK(numtext_valid(buf, 600) == -1, "600 digits: valid");
	CHECK(numtext_valid(buf, 500) == 0, "500 digits: not valid");
	/* every exponent of the last printed digit from -80 to 80, each precision class */
	for (int k = -80; k <= 80; k++) {
		snprintf(buf, sizeof buf, "1.2345e%d", k);
		struct numtext nt;
		long double lo, hi;
		CHECK(!numtext_parse(buf, strlen(buf), PREC_TEXT, 0, &nt), "%s: not parsed", buf);
		interval(buf, PREC_TEXT, 0, &lo, &hi);
		CHECK(nt.lo == lo && nt.hi == hi, "%s: interval [%Lg, %Lg], powl gives [%Lg, %Lg]", buf, nt.lo, nt.hi,
		      lo, hi);
		CHECK(nt.value == strtod(buf, NULL), "%s: value", buf);
		CHECK(!numtext_parse(buf, strlen(buf), PREC_DEC, k < 0 ? -k : k, &nt), "%s: not parsed (dec)", buf);
		interval(buf, PREC_DEC, k < 0 ? -k : k, &lo, &hi);
		CHECK(nt.lo == lo && nt.hi == hi, "%s dec %d: interval differs from powl's", buf, k < 0 ? -k : k);
		CHECK(!numtext_parse(buf, strlen(buf), PREC_EXACT, 0, &nt), "%s: not parsed (exact)", buf);
		CHECK(nt.lo == nt.value && nt.hi == nt.value && nt.value == strtod(buf, NULL), "%s: exact interval",
		      buf);
	}
	/* the remembered last conversion answers only the same text in the same precision class: each
	 * (text, class) after every other equals it after an unrelated text */
	static const char *const mix[] = {"1.5", "1.50", "1.5e0", "15", "1.25", "1.2"};
	static const struct {
		enum prec_kind prec;
		int n;
	} cls[] = {{PREC_TEXT, 0}, {PREC_EXACT, 0}, {PREC_DEC, 1}, {PREC_DEC, 3}};
	for (size_t a = 0; a < 6; a++)
		for (size_t ca = 0; ca < 4; ca++)
			for (size_t b = 0; b < 6; b++)
				for (size_t cb = 0; cb < 4; cb++) {
					struct numtext x, y;
					numtext_parse("7", 1, PREC_TEXT, 0, &x);
					numtext_parse(mix[a], strlen(mix[a]), cls[ca].prec, cls[ca].n, &x);
					numtext_parse(mix[b], strlen(mix[b]), cls[cb].prec, cls[cb].n, &y);
					numtext_parse("7", 1, PREC_TEXT, 0, &x);
					numtext_parse(mix[b], strlen(mix[b]), cls[cb].prec, cls[cb].n, &x);
					CHECK(x.value == y.value && x.lo == y.lo && x.hi == y.hi &&
						      x.digits == y.digits && x.special == y.special,
					      "'%s' class %zu after '%s' class %zu differs", mix[b], cb, mix[a], ca);
				}
	if (fails)
		fprintf(stderr, "test-numtext: %d failures\n", fails);
	return fails != 0;
}
