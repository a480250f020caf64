/* fuzz-numtext: number-text parsing (numtext.c) in every precision class. The input is the text
 * (not NUL-terminated: numtext_parse must stay inside text[0..n)); each class that parses must give an
 * interval that holds its value (lo <= value <= hi as doubles, within one double, for finite values), and the float32 it proves, if
 * any, must lie inside the interval. */
#include "fuzz.h"
#include "numtext.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(const char *text, size_t n, enum prec_kind prec, int prec_n)
{
	struct numtext t;
	if (numtext_parse(text, n, prec, prec_n, &t))
		return;
	/* value is the double nearest the text: inside the interval rounded to doubles, give or take the one
	 * double a text of more digits than long double holds may round to twice (text -> lo -> double) */
	if (!t.special && isfinite(t.value) &&
	    !(t.value >= nextafter((double)t.lo, -INFINITY) && t.value <= nextafter((double)t.hi, INFINITY))) {
		fprintf(stderr, "fuzz-numtext: '%.*s' (prec %d/%d): value %.17g outside [%.21Lg, %.21Lg]\n", (int)n,
			text, (int)prec, prec_n, t.value, t.lo, t.hi);
		abort();
	}
	uint32_t bits;
	if (!t.special && t.lo <= t.hi && numtext_unique_f32(t.lo, t.hi, &bits)) {
		float f;
		memcpy(&f, &bits, sizeof f);
		if (!((long double)f >= t.lo && (long double)f <= t.hi)) {
			fprintf(stderr, "fuzz-numtext: '%.*s': float32 %a outside [%La, %La]\n", (int)n, text,
				(double)f, t.lo, t.hi);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0; /* printed numbers are short; longer texts only slow the search */
	/* an exact-size copy: a read past n is an overflow ASan sees */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	check(text, size, PREC_EXACT, 0);
	check(text, size, PREC_TEXT, 0);
	check(text, size, PREC_NONE, 0);
	for (int d = 0; d <= 8; d += 4)
		check(text, size, PREC_DEC, d);
	free(text);
	return 0;
}
