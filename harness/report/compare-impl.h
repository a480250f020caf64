/* compare-impl: what compare.c shares with compare-summary.c (the summaries rule, 6 in compare.h). Not
 * a public interface: see compare.h. */
#ifndef ALIGN_COMPARE_IMPL_H
#define ALIGN_COMPARE_IMPL_H

#include "compare.h"

/* Set the verdict and the reason (printf format). */
void cmp_set(struct cmp_result *r, enum verdict v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Rule 2: exact bits on both sides (same dtype or across dtypes). *r must be zeroed. */
void cmp_bits(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *r);
/* Rule 6: both sides show a head and/or statistics. *r must be zeroed. */
void cmp_summaries(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *r);

#endif
