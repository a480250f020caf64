/* report-elements: element-level comparison of two tensors' bytes (definitions in report-elements.h). */
#include "report-elements.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An element format: width in bytes; floats: exponent and mantissa bits, e4m3fn's NaN-only encoding;
 * integers: signed or not; digits: significant digits printed (fp32: 9, the shortest that identifies
 * every value; fp64 17; the 16- and 8-bit floats 17, which prints their values exactly). */
struct el_fmt {
	const char *name;
	unsigned size;
	int is_float, ebits, mbits, fn, is_signed, digits;
};

static const struct el_fmt fmts[] = {
	{"fp64", 8, 1, 11, 52, 0, 1, 17}, {"fp32", 4, 1, 8, 23, 0, 1, 9},     {"bf16", 2, 1, 8, 7, 0, 1, 17},
	{"fp16", 2, 1, 5, 10, 0, 1, 17},  {"fp8_e4m3", 1, 1, 4, 3, 1, 1, 17}, {"fp8_e5m2", 1, 1, 5, 2, 0, 1, 17},
	{"int64", 8, 0, 0, 0, 0, 1, 0},	  {"int32", 4, 0, 0, 0, 0, 1, 0},     {"int16", 2, 0, 0, 0, 0, 1, 0},
	{"int8", 1, 0, 0, 0, 0, 1, 0},	  {"uint8", 1, 0, 0, 0, 0, 0, 0},     {"bool", 1, 0, 0, 0, 0, 0, 0},
};

static const struct el_fmt *fmt_of(const char *dtype)
{
	for (size_t i = 0; dtype && i < sizeof fmts / sizeof fmts[0]; i++)
		if (!strcmp(fmts[i].name, dtype))
			return &fmts[i];
	return NULL;
}

static uint64_t load(const unsigned char *p, unsigned size)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < size; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Float classes: 0 finite, 1 NaN, 2 Inf. */
static int fclass(const struct el_fmt *f, uint64_t bits)
{
	uint64_t emax = (1ull << f->ebits) - 1, e = (bits >> f->mbits) & emax, m = bits & ((1ull << f->mbits) - 1);
	if (f->fn) /* e4m3fn: no Inf, NaN is the all-ones exponent and mantissa */
		return e == emax && m == (1ull << f->mbits) - 1 ? 1 : 0;
	return e != emax ? 0 : m ? 1 : 2;
}

static double fvalue(const struct el_fmt *f, uint64_t bits)
{
	int bias = (1 << (f->ebits - 1)) - 1;
	uint64_t e = (bits >> f->mbits) & ((1ull << f->ebits) - 1), m = bits & ((1ull << f->mbits) - 1);
	int neg = (bits >> (8 * f->size - 1)) & 1;
	double v;
	if (f->size == 8) {
		memcpy(&v, &bits, 8);
		return v;
	}
	int c = fclass(f, bits);
	if (c)
		return c == 1 ? NAN : neg ? -INFINITY : INFINITY;
	v = e ? ldexp((double)(m | 1ull << f->mbits), (int)e - bias - f->mbits) : ldexp((double)m, 1 - bias - f->mbits);
	return neg ? -v : v;
}

static int64_t ivalue(const struct el_fmt *f, uint64_t bits)
{
	if (!f->is_signed || f->size == 8)
		return (int64_t)bits;
	uint64_t sign = 1ull << (8 * f->size - 1);
	return (bits & sign) ? (int64_t)(bits | ~((sign << 1) - 1)) : (int64_t)bits;
}

static uint64_t ulp(const struct el_fmt *f, uint64_t a, uint64_t b)
{
	if (!f->is_float) {
		int64_t x = ivalue(f, a), y = ivalue(f, b);
		return x > y ? (uint64_t)x - (uint64_t)y : (uint64_t)y - (uint64_t)x;
	}
	uint64_t sign = 1ull << (8 * f->size - 1), ma = a & ~sign, mb = b & ~sign;
	if ((a & sign) == (b & sign))
		return ma > mb ? ma - mb : mb - ma;
	return ma + mb + 1; /* across zero: -0 and +0 are one apart */
}

static void text_of(const struct el_fmt *f, uint64_t bits, char *buf, size_t len)
{
	if (!f->is_float) {
		snprintf(buf, len, "%lld", (long long)ivalue(f, bits));
		return;
	}
	double v = fvalue(f, bits);
	if (isnan(v))
		snprintf(buf, len, "nan");
	else if (isinf(v))
		snprintf(buf, len, "%sinf", v < 0 ? "-" : "");
	else
		snprintf(buf, len, "%.*g", f->digits, v);
}

static int by_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* The flat index as one index per dimension (row-major). */
static void unravel(struct report_elements *o, uint64_t flat)
{
	for (int d = o->ndim - 1; d >= 0; d--) {
		uint64_t dim = o->shape[d] > 0 ? (uint64_t)o->shape[d] : 1;
		o->first_index[d] = (int64_t)(flat % dim);
		flat /= dim;
	}
}

int report_elements_compare(const unsigned char *a, const unsigned char *b, uint64_t n, const char *dtype,
			    const int64_t *shape, int ndim, struct report_elements *out)
{
	memset(out, 0, sizeof *out);
	snprintf(out->dtype, sizeof out->dtype, "%s", dtype ? dtype : "?");
	out->ndim = ndim > REPORT_EL_MAX_DIMS ? -1 : ndim;
	out->has_total = out->ndim >= 0;
	out->total = 1;
	for (int d = 0; d < out->ndim; d++) {
		out->shape[d] = shape[d];
		out->total = shape[d] > 0 ? out->total * (uint64_t)shape[d] : 0;
	}
	const struct el_fmt *f = fmt_of(dtype);
	if (!f) {
		out->source = REPORT_EL_NONE;
		snprintf(out->note, sizeof out->note, "dtype '%s' has no element-level comparison", out->dtype);
		return 1;
	}
	out->source = REPORT_EL_PAYLOAD;
	out->n = n;
	uint64_t *ulps = NULL, n_ulps = 0;
	for (int pass = 0; pass < 2; pass++) { /* count, then collect the ulps for the median */
		out->n_differ = 0, n_ulps = 0;
		for (uint64_t i = 0; i < n; i++) {
			uint64_t x = load(a + i * f->size, f->size), y = load(b + i * f->size, f->size);
			int cx = f->is_float ? fclass(f, x) : 0, cy = f->is_float ? fclass(f, y) : 0;
			if (!pass) {
				out->nan[0] += cx == 1, out->nan[1] += cy == 1;
				out->inf[0] += cx == 2, out->inf[1] += cy == 2;
			}
			if (x == y)
				continue;
			if (!out->n_differ++ && !pass) {
				out->has_first = 1, out->first_flat = i;
				out->first_bits[0] = x, out->first_bits[1] = y;
				text_of(f, x, out->first_text[0], sizeof out->first_text[0]);
				text_of(f, y, out->first_text[1], sizeof out->first_text[1]);
			}
			if (cx == 1 || cy == 1)
				continue;
			uint64_t u = ulp(f, x, y);
			if (pass)
				ulps[n_ulps] = u;
			n_ulps++;
			if (!pass && u > out->max_ulp)
				out->max_ulp = u;
		}
		if (pass || !n_ulps)
			break;
		if (!(ulps = malloc(n_ulps * sizeof *ulps)))
			return -1;
	}
	if (n_ulps) {
		qsort(ulps, n_ulps, sizeof *ulps, by_u64);
		out->has_ulp = 1;
		out->median_ulp = ulps[(n_ulps - 1) / 2];
	}
	free(ulps);
	if (out->has_first && out->ndim >= 0)
		unravel(out, out->first_flat);
	return 0;
}
