/* report-elements: the element-level picture of two tensors of one dtype, as a pure function over their
 * raw little-endian bytes (row-major in the logical shape): how many elements differ bitwise, the largest
 * and the median ULP distance, the first differing element's multi-dimensional index and both values,
 * NaN and Inf counts per side.
 *
 * The report computes it for the records it reports (first difference, listed differences) whose sides
 * both carry payloads (ATF `payload`), or else both a head (the first elements as printed: the picture
 * then covers those only); with digests only it says that element-level detail needs payloads
 * (report-evidence.c loads and decides; the renderers print it).
 *
 * Definitions (dtypes fp64, fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int64, int32, int16, int8, uint8, bool):
 *   differ       elements whose bit patterns differ (a NaN against a NaN with other bits differs; +0
 *                against -0 differs)
 *   ulp          per differing element: the ordered-integer distance of the two patterns in the dtype
 *                (floats: sign-magnitude, +0 and -0 one apart; integers: |a - b|). Elements where either
 *                side is NaN have no ULP distance and are left out of max and median
 *   max_ulp      the largest ulp of the differing elements
 *   median_ulp   the median ulp of the differing elements (the lower one of the two middle values for an
 *                even count)
 *   first        the lowest flat index whose elements differ, as an index per dimension of the shape
 *   nan / inf    elements that are NaN / +-Inf on each side (floats only). */
#ifndef ALIGN_REPORT_ELEMENTS_H
#define ALIGN_REPORT_ELEMENTS_H

#include <stddef.h>
#include <stdint.h>

#define REPORT_EL_MAX_DIMS 16

enum report_el_source {
	REPORT_EL_PAYLOAD, /* both payloads: every element */
	REPORT_EL_HEAD,	   /* both heads: the first n elements only */
	REPORT_EL_NONE,	   /* no element data on both sides: note says why (digests only) */
};

struct report_elements {
	enum report_el_source source;
	char dtype[16];
	int ndim;			   /* dimensions of shape; -1 when unknown */
	int64_t shape[REPORT_EL_MAX_DIMS]; /* the tensor's logical shape */
	uint64_t n;			   /* elements compared */
	int has_total;			   /* total: elements of the tensor (product of shape) */
	uint64_t total;
	uint64_t n_differ; /* elements whose bits differ */
	int has_ulp;	   /* max_ulp, median_ulp over the differing non-NaN elements */
	uint64_t max_ulp, median_ulp;
	int has_first;				 /* the first differing element: */
	uint64_t first_flat;			 /* its row-major index, */
	int64_t first_index[REPORT_EL_MAX_DIMS]; /* per dimension (ndim of them; ndim -1: flat only) */
	uint64_t first_bits[2];			 /* its bit patterns (a, b) */
	char first_text[2][40];			 /* and values as text ("0.5", "nan", "-3") */
	uint64_t nan[2], inf[2];		 /* per side (a, b) */
	char note[200];				 /* REPORT_EL_NONE: why; else "" */
};

/* Compare n elements of dtype at a and b. shape (ndim >= 0 entries; ndim -1: unknown) is the tensor's:
 * n may be less than its element count (a head). out->source is set to REPORT_EL_PAYLOAD (the caller
 * changes it for heads). Returns 0; 1 when the dtype has no element definition (out->note says so, source
 * NONE); -1 when out of memory (the median needs n_differ words). */
int report_elements_compare(const unsigned char *a, const unsigned char *b, uint64_t n, const char *dtype,
			    const int64_t *shape, int ndim, struct report_elements *out);

#endif
