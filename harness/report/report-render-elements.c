/* report-render-elements: the element-level detail of a reported record (report_item.elements,
 * report-elements.h) in every format. The renderers call these with one line each.
 *
 * Text / Markdown / HTML, one line:
 *   elements: 3 of 24 differ (bitwise); ulp (fp32) max 9, median 4; first at [0, 1, 1] (flat 5): -0.75
 *   (0xbf400000) vs -0.75000006 (0xbf400001); NaN 1 vs 2; Inf 1 vs 1
 *   elements (the first 10 of 4096 only, from the printed heads): ...
 *   elements: digests differ; no payload: element-level detail needs payloads (ATF payload)
 * JSON (ITEM.elements; null when the record has no detail: a scalar or no difference):
 *   {"source": "payload" | "head" | "none", "dtype": str, "shape": [int, ...] | null,
 *    "compared": N, "total": N | null, "differ": N, "max_ulp": N | null, "median_ulp": N | null,
 *    "first_index": [int, ...] | null, "first_flat": N | null, "first_a": str | null, "first_b": str | null,
 *    "first_a_bits": "0x.." | null, "first_b_bits": "0x.." | null, "nan_a": N, "nan_b": N, "inf_a": N,
 *    "inf_b": N, "note": str | null}
 *   (source "none": only source, dtype and note are set, the rest null). ulp: ordered-integer distance in
 *   the dtype over the differing elements that are NaN on neither side; median: the lower middle one. */
#include "report-render.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

static size_t add(char *buf, size_t len, size_t n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static size_t add(char *buf, size_t len, size_t n, const char *fmt, ...)
{
	if (n >= len)
		return n;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
	return k < 0 ? n : n + (size_t)k;
}

static size_t index_text(const struct report_elements *el, char *buf, size_t len, size_t n)
{
	if (el->ndim < 0)
		return add(buf, len, n, "flat %" PRIu64, el->first_flat);
	n = add(buf, len, n, "[");
	for (int d = 0; d < el->ndim; d++)
		n = add(buf, len, n, "%s%" PRId64, d ? ", " : "", el->first_index[d]);
	return add(buf, len, n, "] (flat %" PRIu64 ")", el->first_flat);
}

const char *rr_elements_line(const struct report_elements *el, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	if (el->source == REPORT_EL_NONE) {
		add(buf, len, n, "elements: %s", el->note);
		return buf;
	}
	if (el->source == REPORT_EL_HEAD && el->has_total)
		n = add(buf, len, n,
			"elements (the first %" PRIu64 " of %" PRIu64 " only, from the printed heads): ", el->n,
			el->total);
	else if (el->source == REPORT_EL_HEAD)
		n = add(buf, len, n, "elements (the first %" PRIu64 " only, from the printed heads): ", el->n);
	else
		n = add(buf, len, n, "elements: ");
	n = add(buf, len, n, "%" PRIu64 " of %" PRIu64 " differ (bitwise)", el->n_differ, el->n);
	if (el->has_ulp)
		n = add(buf, len, n, "; ulp (%s) max %" PRIu64 ", median %" PRIu64, el->dtype, el->max_ulp,
			el->median_ulp);
	if (el->has_first) {
		char ha[24], hb[24];
		rr_bits_hex(el->dtype, el->first_bits[0], ha);
		rr_bits_hex(el->dtype, el->first_bits[1], hb);
		n = add(buf, len, n, "; first at ");
		n = index_text(el, buf, len, n);
		n = add(buf, len, n, ": %s (%s) vs %s (%s)", el->first_text[0], ha, el->first_text[1], hb);
	}
	n = add(buf, len, n, "; NaN %" PRIu64 " vs %" PRIu64 "; Inf %" PRIu64 " vs %" PRIu64, el->nan[0], el->nan[1],
		el->inf[0], el->inf[1]);
	if (el->note[0])
		add(buf, len, n, " (%s)", el->note);
	return buf;
}

void rr_elements_text(FILE *out, const struct report_item *it, const char *indent)
{
	char buf[1024];
	if (it->elements)
		fprintf(out, "%s%s\n", indent, rr_elements_line(it->elements, buf, sizeof buf));
}

void rr_elements_md(FILE *out, const struct report *r)
{
	char buf[1024], key[96];
	int any = 0;
	for (size_t i = 0; i <= r->n_diffs; i++) {
		const struct report_item *it = i ? &r->diffs[i - 1] : r->first_diff;
		if (!it || !it->elements ||
		    (i && r->first_diff && it->a.id == r->first_diff->a.id && it->b.id == r->first_diff->b.id))
			continue;
		if (!any++)
			fprintf(out, "\n## Element-level detail\n\n");
		rr_key_text(it, key, sizeof key);
		fprintf(out, "- %s`%s` at %s: %s\n", i ? "" : "**first difference** ", it->canon, key,
			rr_elements_line(it->elements, buf, sizeof buf));
	}
}

static json_t *jarr(const int64_t *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

static json_t *ju(int has, uint64_t v)
{
	return has ? json_integer((json_int_t)v) : json_null();
}

json_t *rr_elements_json(const struct report_elements *el)
{
	if (!el)
		return json_null();
	int none = el->source == REPORT_EL_NONE, first = !none && el->has_first;
	char ha[24] = "", hb[24] = "";
	if (first)
		rr_bits_hex(el->dtype, el->first_bits[0], ha), rr_bits_hex(el->dtype, el->first_bits[1], hb);
	static const char *const sources[] = {"payload", "head", "none"};
	return json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "source",
			 sources[el->source], "dtype", el->dtype, "shape",
			 !none && el->ndim >= 0 ? jarr(el->shape, el->ndim) : json_null(), "compared", ju(!none, el->n),
			 "total", ju(!none && el->has_total, el->total), "differ", ju(!none, el->n_differ), "max_ulp",
			 ju(!none && el->has_ulp, el->max_ulp), "median_ulp", ju(!none && el->has_ulp, el->median_ulp),
			 "first_index", first && el->ndim >= 0 ? jarr(el->first_index, el->ndim) : json_null(),
			 "first_flat", ju(first, el->first_flat), "first_a",
			 first ? json_string(el->first_text[0]) : json_null(), "first_b",
			 first ? json_string(el->first_text[1]) : json_null(), "first_a_bits",
			 first ? json_string(ha) : json_null(), "first_b_bits", first ? json_string(hb) : json_null(),
			 "nan_a", ju(!none, el->nan[0]), "nan_b", ju(!none, el->nan[1]), "inf_a", ju(!none, el->inf[0]),
			 "inf_b", ju(!none, el->inf[1]), "note", el->note[0] ? json_string(el->note) : json_null());
}

static void html_text(FILE *out, const char *s)
{
	for (; *s; s++)
		fputs(*s == '<'	  ? "&lt;"
		      : *s == '>' ? "&gt;"
		      : *s == '&' ? "&amp;"
		      : *s == '"' ? "&quot;"
				  : (char[2]){*s, 0},
		      out);
}

void rr_elements_html(FILE *out, const struct report_item *it)
{
	char buf[1024];
	if (!it->elements)
		return;
	fputs("<p class=\"note elements\">", out);
	html_text(out, rr_elements_line(it->elements, buf, sizeof buf));
	fputs("</p>\n", out);
}

void rr_elements_html_list(FILE *out, const struct report *r)
{
	char buf[1024], key[96];
	int any = 0;
	for (size_t i = 0; i < r->n_diffs; i++) {
		const struct report_item *it = &r->diffs[i];
		if (!it->elements)
			continue;
		if (!any++)
			fputs("<ul class=\"elements\">\n", out);
		rr_key_text(it, key, sizeof key);
		fputs("<li><code>", out);
		html_text(out, it->canon);
		fputs("</code> at ", out);
		html_text(out, key);
		fputs(": ", out);
		html_text(out, rr_elements_line(it->elements, buf, sizeof buf));
		fputs("</li>\n", out);
	}
	if (any)
		fputs("</ul>\n", out);
}
