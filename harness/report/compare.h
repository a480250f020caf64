/* compare: the verdict on one matched pair of records, as a pure function of what each side knows.
 *
 * Evidence, strongest first (the first kind both sides share decides):
 *   1. missing: a side whose value is absent (record.missing). One side missing: differ. Both: equal
 *      as printed (nothing is known on either side, and neither side disagrees with the other).
 *   2. exact bits on both sides: equal bits in the same dtype are bitwise-equal (a NaN with identical
 *      bits too); different bits differ, with the ULP distance in that dtype and the relative
 *      difference |a-b| / max(|a|,|b|); +0 vs -0 differ by 1 ULP.
 *      Across dtypes (fp32 vs fp64, bf16 vs fp32, ...) both values are widened exactly; equal values
 *      with the same sign are bitwise-equal ("the fp64 value is exactly the fp32 value"). Unequal
 *      values are never measured in ULP of the wider dtype: they are compared at the coarser dtype
 *      (fp64 > fp32 > fp16 > bf16 in precision): the finer value is rounded to it (round to nearest
 *      even); equal there -> equal-as-printed, the reason naming that precision; else differ, with the
 *      ULP distance in the coarser dtype and the interval of reals that round to the coarser value
 *      (which the finer value lies outside). An integer against a float that differ: differ, no ULP.
 *      Bits that ingest inferred from a print (a side with bits and an interval [lo, hi]: the only
 *      value of the dtype in it) are named in the reason when they decide the verdict:
 *      "a's bits inferred: the only fp32 in [lo, hi]".
 *   3. digests of the same algorithm on both sides: equal or differ.
 *   4. an md5 digest (md5 of the 4 little-endian bytes of the float32, as frameworks print it) on one
 *      side and exact bits on the other: the md5 of those bits is computed and compared. bf16/fp16
 *      bits are widened to fp32 first; fp64 bits are used when the value is exactly a float32, else
 *      the float32 nearest to it is hashed and a match is only equal as printed.
 *   5. values: exact values (interval [v, v]) or printed intervals [lo, hi]. One side NaN and the other
 *      not: differ; both NaN: equal as printed. Intervals that share no value of the dtype: differ
 *      (two prints at one precision that only touch at a rounding boundary differ, unless the
 *      boundary is itself a value of the dtype: a tie); overlapping: equal as printed, with the
 *      significant digits of the coarser printed side.
 *   6. summaries (compare-summary.c): both sides show a head (the first elements, record.head) and/or
 *      statistics (record.stats: AccProber sum/mean/std, msprobe Max/Min/Mean/Norm), and no rule above
 *      decided. Each element and each statistic both sides show is a printed number read as an exact
 *      repr (Python repr, JSON dumps) of a value of the stated dtype, judged as a pair of exact bits
 *      by rule 2 in the narrowest of (the record's dtype, fp32, fp64) that holds both values (a head
 *      element of a bf16 tensor is a bf16; AccProber's sum of it is an fp32); when the two records
 *      state different dtypes each value takes its own record's chain. Any element or
 *      statistic that differs -> differ, the reason naming the element index (flat, from 0) or the
 *      statistic and its ULP distance (the first differing element, else statistic, gives ulp and
 *      rel_diff); all shown equal -> equal-as-printed, "equal in the summaries shown (first N
 *      elements, sum, ...)": never bitwise-equal (a sample and statistics do not prove the tensor).
 *      Summaries with no element or statistic in common: incomparable.
 *   7. neither side has any value nor summary (a key with nothing printed): equal as printed.
 *   8. anything else (digests of different algorithms, a digest against a value): incomparable.
 */
#ifndef ALIGN_COMPARE_H
#define ALIGN_COMPARE_H

#include <stdint.h>

enum verdict {
	VERDICT_BITWISE_EQUAL,
	VERDICT_EQUAL_AS_PRINTED,
	VERDICT_DIFFER,
	VERDICT_INCOMPARABLE, /* no common evidence: neither proven equal nor proven different */
	VERDICT_ONLY_A,
	VERDICT_ONLY_B,
	VERDICT_COUNT
};

/* What one side knows of a value. Strings are borrowed; NULL means absent. */
struct cmp_value {
	const char *dtype; /* fp32, fp64, bf16, fp16, int64, ... (NULL: unknown) */
	int has_bits;	   /* bits are exact in dtype */
	uint64_t bits;
	int has_value; /* value is the parsed (or exact) number */
	double value;
	int has_interval; /* [lo, hi]: the reals the print may stand for */
	double lo, hi;
	int digits;	  /* significant digits printed (0: exact or not printed) */
	int is_nan;	  /* printed (or stored) as NaN */
	const char *text; /* as printed */
	const char *digest, *digest_alg;
	const char *missing; /* why the value is absent */
	const char *stats;   /* JSON object text: statistics as printed ({"sum": -3127.84521484375}), or NULL */
	const char *head;    /* JSON array text: the first elements (row-major) as printed, or NULL */
};

struct cmp_result {
	enum verdict verdict;
	int has_ulp; /* ulp is the distance in units of ulp_dtype */
	uint64_t ulp;
	const char *ulp_dtype; /* static string */
	int has_rel;	       /* rel_diff = |a-b| / max(|a|,|b|), both finite */
	double rel_diff;
	int digits;	  /* equal as printed: significant digits of the coarser printed side (0: none) */
	char reason[384]; /* one line, lower case, says why */
};

/* Decide the verdict for a matched pair (never ONLY_A / ONLY_B). Pure: no I/O, no allocation. */
void compare_values(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *out);

/* "bitwise-equal", "equal-as-printed", "differ", "incomparable", "only-in-a", "only-in-b". */
const char *verdict_name(enum verdict v);
/* 1 for the verdicts that make a report exit 1 and may be a first difference. */
int verdict_is_difference(enum verdict v);

/* Exact value of bits in dtype as a double (floats of at most 64 bits, integers up to 2^53 in
 * magnitude): returns 1, or 0 when the dtype is unknown or the value is not exact in a double. */
int compare_bits_to_double(const char *dtype, uint64_t bits, double *out);
/* The bits of v in dtype when v is exactly a value of it (floats: fp64, fp32, bf16, fp16; integers:
 * two's complement in the dtype's width): returns 1, or 0 (NaN, not representable, unknown dtype). */
int compare_double_to_bits(const char *dtype, double v, uint64_t *bits);
/* md5 of the 4 little-endian bytes of a float32 bit pattern, as 32 lower-case hex digits. 0 or -1. */
int compare_md5_fp32(uint32_t bits, char hex[33]);

#endif
