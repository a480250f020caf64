/* numtext: printed numbers in every dialect the formats use, and what the print proves.
 * Dialects: Megatron "1.086875E+01", "INF", "NAN"; Python repr "2.999e-05", "0.0001499", "nan",
 * "-inf"; JSON "NaN", "Infinity", "-Infinity"; fixed "10.86875057220458984375".
 * A print with its precision class gives the interval of reals it may stand for; the interval decides
 * whether the float32 (or float64) bits are recoverable (exactly one value of the dtype inside). */
#ifndef ALIGN_NUMTEXT_H
#define ALIGN_NUMTEXT_H

#include <stddef.h>
#include <stdint.h>

enum prec_kind {
	PREC_NONE = 0, /* no printed value */
	PREC_EXACT,    /* shortest round-trip repr of a double (Python repr, JSON dumps): value is exact */
	PREC_TEXT,     /* the last printed digit is the precision ({:.6E}, {:.20f}, {:.3f}) */
	PREC_DEC,      /* rounded to prec_n decimals, trailing zeros dropped (round(x, n) then repr) */
};

struct numtext {
	double value;	    /* nearest double to the text */
	long double lo, hi; /* reals the print may stand for (closed interval) */
	int digits;	    /* significant digits printed (0 for nan/inf) */
	int special;	    /* 1 nan, 2 +inf, 3 -inf, 0 finite */
};

/* Parse text[0..n) as a number; returns 0, or -1 when it is not a number in any dialect. */
int numtext_parse(const char *text, size_t n, enum prec_kind prec, int prec_n, struct numtext *out);
/* Whether numtext_parse would take text[0..n) (0: a number, -1: not), without converting it: for a
 * parser's check of a field whose value ingest_emit then reads. */
int numtext_valid(const char *text, size_t n);

/* Decimals a print shows: fraction digits minus the exponent ("8.0481" 4, "1e-05" 5, "2.5e-06" 7,
 * "10.86875057" 8). The exponent is clamped to +-100000 (no double has one near; strtol saturates at
 * LONG_MIN/MAX, and the difference overflowed: fuzzer findings in two parsers, 2026-11-25 and 11-28). */
long numtext_shown_decimals(const char *v, size_t n);

/* Bits of the unique float32 in [lo, hi], if exactly one: returns 1 and sets *bits. */
int numtext_unique_f32(long double lo, long double hi, uint32_t *bits);

/* Distance in units in the last place between two values of a dtype (ordered-integer distance). */
uint64_t ulp_distance_f32(uint32_t a, uint32_t b);
uint64_t ulp_distance_f64(uint64_t a, uint64_t b);
uint64_t ulp_distance_bf16(uint16_t a, uint16_t b);

#endif
