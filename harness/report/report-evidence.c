/* report-evidence: the element-level detail of reported tensor records (report_load_elements, report.h).
 * Payloads are read by record id only for the records the report shows (the first difference and the
 * listed differences), inflated and compared by report_elements_compare; without payloads on both sides
 * the heads as printed are compared (the picture covers the first elements only); with neither, a note
 * says that element-level detail needs payloads. */
#include "report.h"

#include "dtype.h"
#include "err.h"
#include "store-report.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* shape JSON text -> dimensions; NULL is a scalar (0 dimensions); -1 when it is not a short array. */
static int parse_shape(const char *text, int64_t *shape)
{
	if (!text)
		return 0;
	json_t *j = json_loads(text, 0, NULL);
	int nd = json_is_array(j) && json_array_size(j) <= REPORT_EL_MAX_DIMS ? (int)json_array_size(j) : -1;
	for (int i = 0; i < nd; i++)
		shape[i] = json_integer_value(json_array_get(j, (size_t)i));
	json_decref(j);
	return nd;
}

static uint64_t elements_of(const int64_t *shape, int nd)
{
	uint64_t n = 1;
	for (int i = 0; i < nd; i++)
		n *= shape[i] > 0 ? (uint64_t)shape[i] : 0;
	return n;
}

/* Inflate a stored payload to exactly len bytes: 0, or -1 (message in e). */
static int inflate_payload(const struct store_tensor_row *t, int64_t id, size_t len, unsigned char **out,
			   struct align_err *e)
{
	uLongf got = len;
	*out = malloc(len ? len : 1);
	if (!*out)
		return fail_internal(e, "out of memory");
	if (uncompress(*out, &got, t->payload, t->payload_len) != Z_OK || got != len) {
		free(*out);
		*out = NULL;
		return fail_internal(e, "the payload of record %lld does not inflate to its %zu bytes (shape x dtype)",
				     (long long)id, len);
	}
	return ALIGN_OK;
}

/* A quiet NaN of a float dtype (heads print NaN without its bits; both sides get the same). */
static int nan_bits(const char *dtype, uint64_t *bits)
{
	static const struct {
		const char *name;
		uint64_t bits;
	} nans[] = {{"fp64", 0x7ff8000000000000ull}, {"fp32", 0x7fc00000}, {"bf16", 0x7fc0}, {"fp16", 0x7e00}};
	for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++)
		if (!strcmp(dtype, nans[i].name))
			return *bits = nans[i].bits, 1;
	return 0;
}

/* Head element i as a number: JSON number, or "nan"/"inf"/"-inf" strings (AccProber, json.dumps). */
static int head_number(json_t *v, double *x)
{
	const char *s = json_string_value(v);
	if (json_is_number(v))
		return *x = json_number_value(v), 1;
	if (!s)
		return 0;
	if (!strcasecmp(s, "nan"))
		return *x = NAN, 1;
	if (!strcasecmp(s, "inf") || !strcasecmp(s, "infinity"))
		return *x = INFINITY, 1;
	if (!strcasecmp(s, "-inf") || !strcasecmp(s, "-infinity"))
		return *x = -INFINITY, 1;
	return 0;
}

/* The head's first n numbers as little-endian bytes of dtype; 0, or 1 when one is not a value of it. */
static int head_bytes(json_t *head, size_t n, const char *dtype, unsigned char *out)
{
	size_t size = dtype_size(dtype);
	for (size_t i = 0; i < n; i++) {
		double x;
		uint64_t b;
		if (!head_number(json_array_get(head, i), &x) ||
		    !(isnan(x) ? nan_bits(dtype, &b) : compare_double_to_bits(dtype, x, &b)))
			return 1;
		for (size_t k = 0; k < size; k++)
			out[i * size + k] = (unsigned char)(b >> (8 * k));
	}
	return 0;
}

/* Both heads (as printed) of one dtype compared element by element: 0, 1 (not comparable), -1 (no memory). */
static int compare_heads(const struct store_tensor_row *ta, const struct store_tensor_row *tb, const int64_t *shape,
			 int nd, struct report_elements *el)
{
	json_t *ha = json_loads(ta->head, JSON_DECODE_ANY, NULL), *hb = json_loads(tb->head, JSON_DECODE_ANY, NULL);
	size_t n = json_array_size(ha) < json_array_size(hb) ? json_array_size(ha) : json_array_size(hb);
	const char *dtype = ta->dtype;
	unsigned char *a = calloc(n ? n : 1, 8), *b = calloc(n ? n : 1, 8);
	int rc = a && b ? 0 : -1;
	/* the first of (dtype, fp32, fp64) holding every shown value, as compare-summary.c measures them */
	const char *chain[3] = {ta->dtype, "fp32", "fp64"};
	for (int i = 0; !rc && i < 3; i++) {
		dtype = chain[i];
		if (!head_bytes(ha, n, dtype, a) && !head_bytes(hb, n, dtype, b))
			break;
		rc = i == 2;
	}
	if (!rc && !n)
		rc = 1;
	if (!rc && (rc = report_elements_compare(a, b, n, dtype, shape, nd, el)) == 0) {
		el->source = REPORT_EL_HEAD;
		if (strcmp(dtype, ta->dtype))
			snprintf(el->note, sizeof el->note, "the heads are not all %s values: compared as %s",
				 ta->dtype, dtype);
	}
	free(a), free(b);
	json_decref(ha), json_decref(hb);
	return rc;
}

static void note(struct report_elements *el, const char *dtype, const char *text)
{
	memset(el, 0, sizeof *el);
	el->source = REPORT_EL_NONE;
	el->ndim = -1;
	snprintf(el->dtype, sizeof el->dtype, "%s", dtype ? dtype : "?");
	snprintf(el->note, sizeof el->note, "%s", text);
}

/* The detail of one pair of tensor rows into el: ALIGN_OK (el->source says what it holds), 1 when the
 * pair is no tensor (a scalar: no shape, payload or head; nothing to say), or an error status (>= 2). */
static int detail(const struct report_item *it, const struct store_tensor_row *ta, const struct store_tensor_row *tb,
		  struct report_elements *el, struct align_err *e)
{
	int64_t sa[REPORT_EL_MAX_DIMS], sb[REPORT_EL_MAX_DIMS];
	int na = parse_shape(ta->shape, sa), nb = parse_shape(tb->shape, sb);
	int same = ta->dtype && tb->dtype && !strcmp(ta->dtype, tb->dtype) && na == nb &&
		   (na <= 0 || !memcmp(sa, sb, (size_t)na * sizeof *sa));
	int tensor = ta->payload || tb->payload || ta->head || tb->head || ta->shape || tb->shape;
	if (!tensor)
		return 1;
	if (!same) {
		note(el, ta->dtype, "the two records differ in dtype or shape: no element-level comparison");
		return ALIGN_OK;
	}
	size_t size = dtype_size(ta->dtype);
	uint64_t n = elements_of(sa, na);
	if (ta->payload && tb->payload && size && na >= 0) {
		unsigned char *a = NULL, *b = NULL;
		int rc = inflate_payload(ta, it->a.id, (size_t)(n * size), &a, e);
		if (!rc)
			rc = inflate_payload(tb, it->b.id, (size_t)(n * size), &b, e);
		if (!rc && report_elements_compare(a, b, n, ta->dtype, sa, na, el) < 0)
			rc = fail_internal(e, "out of memory");
		free(a), free(b);
		return rc;
	}
	if (ta->head && tb->head && size) {
		int rc = compare_heads(ta, tb, sa, na, el);
		if (rc < 0)
			return fail_internal(e, "out of memory");
		if (rc == 0)
			return ALIGN_OK;
	}
	note(el, ta->dtype,
	     ta->payload || tb->payload
		     ? "payload on one side only: element-level detail needs payloads on both sides (ATF payload)"
		     : "digests differ; no payload: element-level detail needs payloads (ATF payload)");
	return ALIGN_OK;
}

static int load_item(sqlite3 *db, struct report_item *it, struct align_err *e)
{
	if (!it || !it->a.present || !it->b.present || !verdict_is_difference(it->cmp.verdict) || it->elements)
		return ALIGN_OK;
	struct store_tensor_row ta, tb;
	int found_a = 0, found_b = 0, rc;
	if ((rc = store_report_tensor(db, it->a.id, &ta, &found_a, e)))
		return rc;
	if ((rc = store_report_tensor(db, it->b.id, &tb, &found_b, e))) {
		store_report_tensor_free(&ta);
		return rc;
	}
	struct report_elements *el = calloc(1, sizeof *el);
	if (!el)
		rc = fail_internal(e, "out of memory");
	else if (found_a && found_b && (rc = detail(it, &ta, &tb, el, e)) == ALIGN_OK)
		it->elements = el, el = NULL;
	else if (rc == 1)
		rc = ALIGN_OK;
	free(el);
	store_report_tensor_free(&ta);
	store_report_tensor_free(&tb);
	return rc;
}

int report_load_elements(sqlite3 *db, struct report *r, struct align_err *e)
{
	int rc = load_item(db, r->first_diff, e);
	for (size_t i = 0; rc == ALIGN_OK && i < r->n_diffs; i++)
		rc = load_item(db, &r->diffs[i], e);
	return rc;
}
