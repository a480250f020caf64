/* report-render: a computed report as text (default), Markdown or JSON (HTML: report-render-html.c).
 * One table of formats; the helpers the HTML page shares are declared in report-render.h.
 *
 * JSON (align_report 1, stable; null where a field is unknown or absent: micro -1, rank -1, step -1):
 *   {"align_report": 1, "mode": "full" | "first-diff", "fast_path": bool,
 *    "scope": "numerics" | "all" | "metrics" (report.h), "meta_left_out": [name, ...] (numerics: the
 *             job-metadata names left out; [] otherwise),
 *    "runs": {"a": RUN, "b": RUN},        RUN = {name, framework, format, records, resumed}
 *    "provenance": {"a": {FIELD: value}, "b": {...}, "differs": [FIELD, ...]}: the provenance fields
 *             each run's header records (report.h), and those recorded by both with different values
 *    "totals": {compared, bitwise_equal, equal_as_printed, differ, incomparable, only_in_a,
 *               only_in_b, skipped_units, skipped_records, unread_a, unread_b},
 *    "metrics_cover_skipped": bool,
 *    "metrics": [{name, compared, bitwise_equal, equal_as_printed, differ, incomparable, only_in_a,
 *                 only_in_b, first_diff_step}],
 *    "first_diff": null | ITEM (the first divergent record: differ or incomparable),
 *    "first_only_in": null | ITEM (the first record of a name or key in one run only),
 *    "first_unproven": null | ITEM, "proven_equal_through_step": N | null,
 *    "searched_through_step": N | null (--first-diff without --metric: metrics[].first_diff_step is
 *                             known through step N only; null: searched to the end),
 *    "diffs": [ITEM, ...] (the first `limit` value differences: differ, incomparable),
 *    "diffs_total": N (value differences found), "limit": N, "warnings": ["..."],
 *    "root_cause": null | ITEM + {inputs (its call's input records, all equal), inputs_by_summary (how many
 *                  of them only in their summaries: not proven bitwise), is_first_diff},
 *    "root_cause_reason": null (found) | why none (report.h),
 *    "only_in": [{name, run, count, first_step, last_step}] (records of a name one run lacks, per
 *               (name, run), in execution order of their first record)}
 *   ITEM = {step, micro, rank, name, verdict, reason, ulp, ulp_dtype, rel_diff, digits, a: SIDE, b: SIDE,
 *           elements: null | ELEMENTS (the element-level detail: report-render-elements.c)}
 *   SIDE = null | {name, text, digits (significant digits printed; null: exact or no text),
 *                  bits ("0x" + hex of the dtype's width), dtype, digest, digest_alg, missing, file,
 *                  line, seq, pos (position in its step: report.h), call, io (the input/output link;
 *                  null: none)}
 *   compared = bitwise_equal + equal_as_printed + differ + incomparable (the matched pairs). */
#include "report-render.h"

#include "dtype.h"
#include "err.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <jansson.h>
#include <string.h>

int64_t rr_compared(const struct report_counts *c)
{
	return c->v[VERDICT_BITWISE_EQUAL] + c->v[VERDICT_EQUAL_AS_PRINTED] + c->v[VERDICT_DIFFER] +
	       c->v[VERDICT_INCOMPARABLE];
}

void rr_bits_hex(const char *dtype, uint64_t bits, char out[24])
{
	size_t size = dtype ? dtype_size(dtype) : 0;
	int width = size ? (int)(2 * size) : 1;
	snprintf(out, 24, "0x%0*" PRIx64, width, bits);
}

/* A side's value in one short string: text, else bits, else digest, else why it is missing. */
const char *rr_side_value(const struct report_side *s, char *buf, size_t len)
{
	if (!s->present)
		return "(absent)";
	if (s->missing)
		snprintf(buf, len, "missing (%s)", s->missing);
	else if (s->text)
		snprintf(buf, len, "%s", s->text);
	else if (s->has_bits)
		rr_bits_hex(s->dtype, s->bits, buf);
	else if (s->digest)
		snprintf(buf, len, "%s:%.16s", s->digest_alg ? s->digest_alg : "digest", s->digest);
	else
		snprintf(buf, len, "(no value)");
	return buf;
}

const char *rr_resumed_note(const struct report_run *run, char *buf, size_t len)
{
	snprintf(buf, len, "run '%s' was resumed: later occurrences of repeated steps were used", run->name);
	return buf;
}

const char *rr_scope_name(enum report_scope s)
{
	return s == REPORT_SCOPE_NUMERICS ? "numerics" : s == REPORT_SCOPE_ALL ? "all" : "metrics";
}

/* "left out 12 job-metadata names (timings, memory); --all includes them" */
const char *rr_left_out_note(const struct report *r, char *buf, size_t len)
{
	snprintf(buf, len, "left out %zu job-metadata name%s (timings, memory); --all includes them",
		 r->n_meta_left_out, r->n_meta_left_out == 1 ? "" : "s");
	return buf;
}

void rr_root_cause_inputs_text(const struct report *r, char *buf, size_t len)
{
	long long n = r->root_cause_inputs, m = r->root_cause_inputs_summary;
	if (!m)
		snprintf(buf, len, "%lld input%s bitwise-equal", n, n == 1 ? "" : "s");
	else
		snprintf(buf, len, "%lld input%s equal (%lld only in the summaries shown, not proven bitwise)", n,
			 n == 1 ? "" : "s", m);
}

int rr_root_cause_text(const struct report *r, char *buf, size_t len)
{
	const struct report_item *it = r->root_cause;
	buf[0] = '\0';
	if (!it) {
		if (!r->first_diff || !r->has_links)
			return 0;
		snprintf(buf, len, "none (%s)", r->root_cause_none);
		return 1;
	}
	char key[96];
	rr_key_text(it, key, sizeof key);
	const char *call = it->a.call ? it->a.call : "?", *call_b = it->b.call ? it->b.call : "?";
	int same_call = !strcmp(call, call_b);
	char inputs[128];
	rr_root_cause_inputs_text(r, inputs, sizeof inputs);
	snprintf(buf, len, "%s (inputs equal, output differs) at %s: call '%s'%s%s%s, %s%s", it->canon, key, call,
		 same_call ? "" : " ('", same_call ? "" : call_b, same_call ? "" : "' in b)", inputs,
		 rr_root_cause_is_first_diff(r) ? "; it is the first difference" : "");
	return 1;
}

const char *rr_only_in_run(const struct report *r, const struct report_only_in *o)
{
	return o->side ? r->b.name : r->a.name;
}

/* ---- JSON ---- */

static json_t *jstr(const char *s)
{
	return s ? json_string(s) : json_null();
}
static json_t *jkey(int64_t v)
{
	return v < 0 ? json_null() : json_integer(v);
}

static json_t *json_side_link(const struct report_side *s, json_t *o)
{
	if (o) {
		json_object_set_new(o, "pos", json_integer(s->pos));
		json_object_set_new(o, "call", jstr(s->call));
		json_object_set_new(o, "io", jstr(s->io));
	}
	return o;
}

static json_t *json_side(const struct report_side *s)
{
	if (!s->present)
		return json_null();
	char hex[24];
	if (s->has_bits)
		rr_bits_hex(s->dtype, s->bits, hex);
	return json_side_link(
		s, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:I}", "name", jstr(s->name), "text",
			     jstr(s->text), "digits", s->digits ? json_integer(s->digits) : json_null(), "bits",
			     s->has_bits ? json_string(hex) : json_null(), "dtype", jstr(s->dtype), "digest",
			     jstr(s->digest), "digest_alg", jstr(s->digest_alg), "missing", jstr(s->missing), "file",
			     jstr(s->file), "line", (json_int_t)s->line, "seq", (json_int_t)s->seq));
}

json_t *report_item_json(const struct report_item *it)
{
	if (!it)
		return json_null();
	const struct cmp_result *c = &it->cmp;
	json_t *ulp = !c->has_ulp	    ? json_null()
		      : c->ulp <= INT64_MAX ? json_integer((json_int_t)c->ulp)
					    : json_real((double)c->ulp);
	return json_pack("{s:o,s:o,s:o,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "step", jkey(it->step), "micro",
			 jkey(it->micro), "rank", jkey(it->rank), "name", it->canon, "verdict",
			 verdict_name(c->verdict), "reason", c->reason, "ulp", ulp, "ulp_dtype",
			 jstr(c->has_ulp ? c->ulp_dtype : NULL), "rel_diff",
			 c->has_rel ? json_real(c->rel_diff) : json_null(), "digits",
			 c->digits ? json_integer(c->digits) : json_null(), "a", json_side(&it->a), "b",
			 json_side(&it->b), "elements", rr_elements_json(it->elements));
}

static json_t *json_counts(const struct report_counts *c)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "compared", (json_int_t)rr_compared(c), "bitwise_equal",
			 (json_int_t)c->v[VERDICT_BITWISE_EQUAL], "equal_as_printed",
			 (json_int_t)c->v[VERDICT_EQUAL_AS_PRINTED], "differ", (json_int_t)c->v[VERDICT_DIFFER],
			 "incomparable", (json_int_t)c->v[VERDICT_INCOMPARABLE], "only_in_a",
			 (json_int_t)c->v[VERDICT_ONLY_A], "only_in_b", (json_int_t)c->v[VERDICT_ONLY_B]);
}

static json_t *json_run(const struct report_run *run)
{
	return json_pack("{s:s,s:s,s:s,s:I,s:b}", "name", run->name, "framework", run->framework, "format", run->format,
			 "records", (json_int_t)run->records, "resumed", run->resumed);
}

/* only_in: [{name, run, count, first_step, last_step}] */
static json_t *json_only_in(const struct report *r)
{
	json_t *a = json_array();
	for (size_t i = 0; i < r->n_only_in; i++) {
		const struct report_only_in *o = &r->only_in[i];
		json_array_append_new(a, json_pack("{s:s,s:s,s:I,s:o,s:o}", "name", o->canon, "run",
						   rr_only_in_run(r, o), "count", (json_int_t)o->count, "first_step",
						   jkey(o->first_step), "last_step", jkey(o->last_step)));
	}
	return a;
}

/* root_cause: null | ITEM + {inputs, is_first_diff}; root_cause_reason: why null (null when found). */
static void json_root_cause(const struct report *r, json_t *doc)
{
	json_t *rc = report_item_json(r->root_cause);
	if (r->root_cause) {
		json_object_set_new(rc, "inputs", json_integer(r->root_cause_inputs));
		json_object_set_new(rc, "inputs_by_summary", json_integer(r->root_cause_inputs_summary));
		json_object_set_new(rc, "is_first_diff", json_boolean(rr_root_cause_is_first_diff(r)));
	}
	json_object_set_new(doc, "root_cause", rc);
	json_object_set_new(doc, "root_cause_reason", r->root_cause ? json_null() : json_string(r->root_cause_none));
	json_object_set_new(doc, "only_in", json_only_in(r));
}

int rr_root_cause_is_first_diff(const struct report *r)
{
	const struct report_item *a = r->root_cause, *b = r->first_diff;
	return a && b && a->step == b->step && a->micro == b->micro && a->rank == b->rank &&
	       !strcmp(a->canon, b->canon) && a->a.seq == b->a.seq && a->b.seq == b->b.seq;
}

static int render_json(const struct report *r, FILE *out, struct align_err *e)
{
	(void)e;
	json_t *totals = json_counts(&r->totals);
	json_object_set_new(totals, "skipped_units", json_integer(r->skipped_units));
	json_object_set_new(totals, "skipped_records", json_integer(r->skipped_records));
	json_object_set_new(totals, "unread_a", json_integer(r->unread_a));
	json_object_set_new(totals, "unread_b", json_integer(r->unread_b));
	json_t *metrics = json_array(), *diffs = json_array(), *warnings = json_array();
	for (size_t i = 0; i < r->n_metrics; i++) {
		const struct report_metric *m = &r->metrics[i];
		json_t *o = json_pack("{s:s}", "name", m->name), *counts = json_counts(&m->c);
		json_object_update(o, counts);
		json_decref(counts);
		json_object_set_new(o, "first_diff_step", m->has_first_diff ? jkey(m->first_diff_step) : json_null());
		json_array_append_new(metrics, o);
	}
	for (size_t i = 0; i < r->n_diffs; i++)
		json_array_append_new(diffs, report_item_json(&r->diffs[i]));
	char note[300];
	if (r->a.resumed)
		json_array_append_new(warnings, json_string(rr_resumed_note(&r->a, note, sizeof note)));
	if (r->b.resumed)
		json_array_append_new(warnings, json_string(rr_resumed_note(&r->b, note, sizeof note)));
	json_t *left_out = json_array();
	for (size_t i = 0; i < r->n_meta_left_out; i++)
		json_array_append_new(left_out, json_string(r->meta_left_out[i]));
	json_t *doc = json_pack("{s:i,s:s,s:b,s:s,s:o,s:{s:o,s:o},s:o,s:o,s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:I,s:o}",
				"align_report", 1, "mode", r->first_diff_mode ? "first-diff" : "full", "fast_path",
				r->fast_path, "scope", rr_scope_name(r->scope), "meta_left_out", left_out, "runs", "a",
				json_run(&r->a), "b", json_run(&r->b), "provenance", rr_prov_json(r), "totals", totals,
				"metrics_cover_skipped", r->metrics_cover_skipped, "metrics", metrics, "first_diff",
				report_item_json(r->first_diff), "first_only_in", report_item_json(r->first_only_in),
				"first_unproven", report_item_json(r->first_unproven), "proven_equal_through_step",
				r->has_proven ? json_integer(r->proven_through) : json_null(), "searched_through_step",
				r->has_searched_through ? json_integer(r->searched_through) : json_null(), "diffs",
				diffs, "diffs_total", (json_int_t)r->n_value_diffs, "limit", (json_int_t)r->limit,
				"warnings", warnings);
	if (!doc)
		return -1;
	json_root_cause(r, doc);
	int rc = json_dumpf(doc, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
	json_decref(doc);
	fputc('\n', out);
	return rc;
}

/* ---- text and Markdown ---- */

void rr_key_text(const struct report_item *it, char *buf, size_t len)
{
	char step[24] = "-", micro[24] = "-", rank[24] = "-";
	if (it->step >= 0)
		snprintf(step, sizeof step, "%lld", (long long)it->step);
	if (it->micro >= 0)
		snprintf(micro, sizeof micro, "%lld", (long long)it->micro);
	if (it->rank >= 0)
		snprintf(rank, sizeof rank, "%lld", (long long)it->rank);
	snprintf(buf, len, "step %s, micro %s, rank %s", step, micro, rank);
}

/* The text of the side that printed fewer significant digits (the one that limits the verdict; a's on
 * a tie). */
static const char *coarser_text(const struct report_item *it)
{
	const char *a = it->a.text, *b = it->b.text;
	if (!a || !b)
		return a ? a : b ? b : "?";
	int da = it->a.digits ? it->a.digits : INT_MAX, db = it->b.digits ? it->b.digits : INT_MAX;
	return db < da ? b : a;
}

/* "5 decimals, " when the coarser print is fixed-point ("10.88426"), else "". */
static const char *decimals(const struct report_item *it, char *buf, size_t len)
{
	const char *t = coarser_text(it), *dot = strchr(t, '.');
	buf[0] = '\0';
	if (dot && !strpbrk(t, "eE"))
		snprintf(buf, len, "%zu decimals, ", strlen(dot + 1));
	return buf;
}

/* The one-line answer: where bits stop being known, and the first provable difference. */
void rr_summary(const struct report *r, char *buf, size_t len)
{
	char va[96], vb[96], dec[48];
	size_t n = 0;
	const struct report_item *u = r->first_unproven, *d = r->first_diff;
	int64_t total = rr_compared(&r->totals) + r->totals.v[VERDICT_ONLY_A] + r->totals.v[VERDICT_ONLY_B];
	if (!total) {
		snprintf(buf, len, "nothing to compare: no record in scope in either run");
		return;
	}
	if (u && u->cmp.digits)
		n += (size_t)snprintf(
			buf + n, len - n, "bits unknown from step %lld (%s printed with %s%d significant digits: '%s')",
			(long long)u->step, u->canon, decimals(u, dec, sizeof dec), u->cmp.digits, coarser_text(u));
	else if (u)
		n += (size_t)snprintf(buf + n, len - n, "bits unknown from step %lld (%s: %s)", (long long)u->step,
				      u->canon, u->cmp.reason);
	else if (r->has_proven)
		n += (size_t)snprintf(buf + n, len - n, "bitwise-equal through step %lld",
				      (long long)r->proven_through);
	else
		n += (size_t)snprintf(buf + n, len - n, "no step is proven bitwise-equal");
	const struct report_item *o = r->first_only_in;
	if (d)
		n += (size_t)snprintf(buf + n, len - n, "; first %sdifference: %s at step %lld (%s vs %s)",
				      u ? "provable " : "", d->canon, (long long)d->step,
				      rr_side_value(&d->a, va, sizeof va), rr_side_value(&d->b, vb, sizeof vb));
	else
		n += (size_t)snprintf(buf + n, len - n, "; %s%s", u ? "no provable difference" : "no difference",
				      o ? " in values" : "");
	if (o && n < len)
		snprintf(buf + n, len - n, "; first name in one run only: %s at step %lld (only in '%s')", o->canon,
			 (long long)o->step, o->a.present ? r->a.name : r->b.name);
}

void rr_counts_text(const struct report_counts *c, char *buf, size_t len)
{
	int64_t n = rr_compared(c);
	size_t k = (size_t)snprintf(buf, len, "%lld/%lld bitwise-equal", (long long)c->v[VERDICT_BITWISE_EQUAL],
				    (long long)n);
	static const struct {
		enum verdict v;
		const char *what;
	} more[] = {
		{VERDICT_EQUAL_AS_PRINTED, "equal as printed"},
		{VERDICT_DIFFER, "differ"},
		{VERDICT_INCOMPARABLE, "incomparable"},
		{VERDICT_ONLY_A, "only in a"},
		{VERDICT_ONLY_B, "only in b"},
	};
	for (size_t i = 0; i < sizeof more / sizeof more[0] && k < len; i++)
		if (c->v[more[i].v])
			k += (size_t)snprintf(buf + k, len - k, ", %lld %s", (long long)c->v[more[i].v], more[i].what);
}

static void side_text(FILE *out, const char *label, const struct report_side *s)
{
	char v[96], hex[24];
	fprintf(out, "  %s: %s", label, rr_side_value(s, v, sizeof v));
	if (s->present) {
		int shown_bits = !s->missing && !s->text && s->has_bits,
		    shown_digest = !s->missing && !s->text && !s->has_bits;
		if (s->has_bits && !shown_bits) {
			rr_bits_hex(s->dtype, s->bits, hex);
			fprintf(out, "  bits %s", hex);
		}
		if (s->dtype)
			fprintf(out, " (%s)", s->dtype);
		if (s->digest && !shown_digest)
			fprintf(out, "  %s %s", s->digest_alg ? s->digest_alg : "digest", s->digest);
		fprintf(out, "  '%s' at %s:%lld", s->name ? s->name : "?", s->file ? s->file : "?", (long long)s->line);
	}
	fputc('\n', out);
}

/* "  position in its step: a 0 (seq 12), b 1 (seq 40)": where each run recorded it (report.h) */
static void position_text(FILE *out, const struct report_item *it, const struct report *r)
{
	const struct report_side *s[2] = {&it->a, &it->b};
	const char *names[2] = {r->a.name, r->b.name};
	int n = 0;
	fputs("  position in its step (rank, micro):", out);
	for (int i = 0; i < 2; i++)
		if (s[i]->present)
			fprintf(out, "%s %s %lld (seq %lld)", n++ ? "," : "", names[i], (long long)s[i]->pos,
				(long long)s[i]->seq);
	fputc('\n', out);
}

static void item_text(FILE *out, const char *title, const struct report_item *it, const struct report *r)
{
	char key[96];
	rr_key_text(it, key, sizeof key);
	fprintf(out, "%s: %s at %s: %s: %s\n", title, it->canon, key, verdict_name(it->cmp.verdict), it->cmp.reason);
	side_text(out, r->a.name, &it->a);
	side_text(out, r->b.name, &it->b);
	position_text(out, it, r);
	if (it->cmp.has_ulp || it->cmp.has_rel) {
		fprintf(out, "  ");
		if (it->cmp.has_ulp)
			fprintf(out, "ulp distance %llu (%s)%s", (unsigned long long)it->cmp.ulp, it->cmp.ulp_dtype,
				it->cmp.has_rel ? ", " : "");
		if (it->cmp.has_rel)
			fprintf(out, "relative difference %.3g", it->cmp.rel_diff);
		fputc('\n', out);
	}
	rr_elements_text(out, it, "  ");
}

/* ---- text tables: columns sized from the data ---- */

#define NAME_COL_MIN 24 /* the name column: as wide as the longest name within [NAME_COL_MIN, NAME_COL_MAX]; */
#define NAME_COL_MAX 48 /* a longer name takes its own line and the row goes on below, in its columns */

static int fit(int w, size_t n)
{
	return n > (size_t)w ? (int)n : w;
}

/* The name column's width with one more name: names past NAME_COL_MAX get lines of their own. */
static int fit_name(int w, const char *name)
{
	size_t n = strlen(name);
	return n <= NAME_COL_MAX ? fit(w, n) : w;
}

static int name_width(const struct report *r)
{
	int w = NAME_COL_MIN;
	for (size_t i = 0; i < r->n_metrics; i++)
		w = fit_name(w, r->metrics[i].name);
	for (size_t i = 0; i < r->n_diffs; i++)
		w = fit_name(w, r->diffs[i].canon);
	for (size_t i = 0; i < r->n_only_in && (long)i < r->limit; i++)
		w = fit_name(w, r->only_in[i].canon);
	return w;
}

/* A name cell of width w starting at column col; a longer name is written whole and the row goes on
 * at the next column on the line below. */
static void name_cell(FILE *out, const char *name, int w, int col)
{
	if (strlen(name) <= (size_t)w)
		fprintf(out, "%-*s", w, name);
	else
		fprintf(out, "%s\n%*s", name, col + w, "");
}

static const char *key_cell(int64_t v, char buf[24])
{
	if (v < 0)
		return "-";
	snprintf(buf, 24, "%lld", (long long)v);
	return buf;
}

/* Widths of the step, micro and rank columns of the differing values and the only-in groups. */
struct key_widths {
	int step, micro, rank;
};

static void key_widths(const struct report *r, struct key_widths *k)
{
	char b[24];
	*k = (struct key_widths){4, 5, 4};
	for (size_t i = 0; i < r->n_diffs; i++) {
		k->step = fit(k->step, strlen(key_cell(r->diffs[i].step, b)));
		k->micro = fit(k->micro, strlen(key_cell(r->diffs[i].micro, b)));
		k->rank = fit(k->rank, strlen(key_cell(r->diffs[i].rank, b)));
	}
}

static void text_metrics(const struct report *r, FILE *out, int nw)
{
	char buf[1024];
	fprintf(out, "metrics%s:\n",
		r->metrics_cover_skipped ? "" : " (counts cover the steps read; skipped steps are in the totals)");
	for (size_t i = 0; i < r->n_metrics; i++) {
		const struct report_metric *m = &r->metrics[i];
		rr_counts_text(&m->c, buf, sizeof buf);
		fputs("  ", out);
		name_cell(out, m->name, nw, 2);
		fprintf(out, " %s", buf);
		if (m->has_first_diff)
			fprintf(out, " (first difference at step %lld)", (long long)m->first_diff_step);
		fputc('\n', out);
	}
}

/* The differing values first (in execution order), then the names in one run only, one line each. */
static void text_diffs(const struct report *r, FILE *out, int nw)
{
	const char *through =
		r->first_diff_mode && !r->metrics_cover_skipped ? " through the first differing step" : "";
	struct key_widths k;
	key_widths(r, &k);
	if (r->n_diffs) {
		fprintf(out, "differing values (first %zu of %lld%s):\n", r->n_diffs, (long long)r->n_value_diffs,
			through);
		fprintf(out, "  %-*s %-*s %-*s %-*s verdict\n", k.step, "step", k.micro, "micro", k.rank, "rank", nw,
			"name");
	}
	int col = 2 + k.step + 1 + k.micro + 1 + k.rank + 1;
	for (size_t i = 0; i < r->n_diffs; i++) {
		const struct report_item *it = &r->diffs[i];
		char s[24], m[24], rk[24], va[96], vb[96];
		fprintf(out, "  %-*s %-*s %-*s ", k.step, key_cell(it->step, s), k.micro, key_cell(it->micro, m),
			k.rank, key_cell(it->rank, rk));
		name_cell(out, it->canon, nw, col);
		fprintf(out, " %s: %s vs %s", verdict_name(it->cmp.verdict), rr_side_value(&it->a, va, sizeof va),
			rr_side_value(&it->b, vb, sizeof vb));
		if (it->cmp.has_ulp)
			fprintf(out, ", %llu ulp", (unsigned long long)it->cmp.ulp);
		if (it->cmp.has_rel)
			fprintf(out, ", rel %.3g", it->cmp.rel_diff);
		fputc('\n', out);
		rr_elements_text(out, it, "    ");
	}
	if (!r->n_only_in)
		return;
	int64_t records = 0;
	int rw = 3, cw = 7;
	for (size_t i = 0; i < r->n_only_in; i++) {
		char n[24];
		records += r->only_in[i].count;
		rw = fit(rw, strlen(rr_only_in_run(r, &r->only_in[i])) + 2);
		cw = fit(cw, (size_t)snprintf(n, sizeof n, "%lld", (long long)r->only_in[i].count));
	}
	size_t shown = (long)r->n_only_in > r->limit ? (size_t)(r->limit > 0 ? r->limit : 0) : r->n_only_in;
	fprintf(out, "only in one run (%zu name%s, %lld records%s):\n", r->n_only_in, r->n_only_in == 1 ? "" : "s",
		(long long)records, through);
	if (shown)
		fprintf(out, "  %-*s %-*s %-*s steps\n", nw, "name", rw, "run", cw, "records");
	for (size_t i = 0; i < shown; i++) {
		const struct report_only_in *o = &r->only_in[i];
		char run[300], a[24], b[24];
		snprintf(run, sizeof run, "'%s'", rr_only_in_run(r, o));
		fputs("  ", out);
		name_cell(out, o->canon, nw, 2);
		fprintf(out, " %-*s %-*lld ", rw, run, cw, (long long)o->count);
		if (o->first_step == o->last_step)
			fprintf(out, "%s\n", key_cell(o->first_step, a));
		else
			fprintf(out, "%s..%s\n", key_cell(o->first_step, a), key_cell(o->last_step, b));
	}
	if (shown < r->n_only_in)
		fprintf(out, "  ... %zu more (--limit)\n", r->n_only_in - shown);
}

static int render_text(const struct report *r, FILE *out, struct align_err *e)
{
	char buf[1024];
	(void)e;
	fprintf(out, "runs: '%s' (%s, %s, %lld records) vs '%s' (%s, %s, %lld records)\n", r->a.name, r->a.framework,
		r->a.format, (long long)r->a.records, r->b.name, r->b.framework, r->b.format, (long long)r->b.records);
	if (rr_prov_text(r, buf, sizeof buf))
		fprintf(out, "provenance differs: %s\n", buf);
	const struct report_run *runs[2] = {&r->a, &r->b};
	for (int i = 0; i < 2; i++)
		if (runs[i]->resumed)
			fprintf(out, "note: %s\n", rr_resumed_note(runs[i], buf, sizeof buf));
	rr_counts_text(&r->totals, buf, sizeof buf);
	fprintf(out, "totals: %s\n", buf);
	if (r->n_meta_left_out)
		fprintf(out, "  %s\n", rr_left_out_note(r, buf, sizeof buf));
	if (r->skipped_units)
		fprintf(out,
			"  %lld records in %lld (rank, step) units with equal summaries were counted without reading "
			"them\n",
			(long long)r->skipped_records, (long long)r->skipped_units);
	if (r->unread_a || r->unread_b)
		fprintf(out,
			"  --first-diff: %lld records of '%s' and %lld of '%s' in later differing steps were not "
			"compared\n",
			(long long)r->unread_a, r->a.name, (long long)r->unread_b, r->b.name);
	if (r->has_searched_through)
		fprintf(out,
			"  --first-diff stopped after step %lld: later first differences per metric need --metric or a "
			"full report\n",
			(long long)r->searched_through);
	int nw = name_width(r);
	text_metrics(r, out, nw);
	rr_summary(r, buf, sizeof buf);
	fprintf(out, "%s\n", buf);
	if (r->first_unproven)
		item_text(out, "first unproven", r->first_unproven, r);
	if (r->first_diff)
		item_text(out, "first difference", r->first_diff, r);
	if (rr_root_cause_text(r, buf, sizeof buf)) {
		fprintf(out, "root cause candidate: %s\n", buf);
		if (r->root_cause && !rr_root_cause_is_first_diff(r)) {
			side_text(out, r->a.name, &r->root_cause->a);
			side_text(out, r->b.name, &r->root_cause->b);
			position_text(out, r->root_cause, r);
		}
	}
	if (r->first_only_in)
		item_text(out, "first only in one run", r->first_only_in, r);
	text_diffs(r, out, nw);
	return ferror(out) ? -1 : 0;
}

/* Markdown cell text: '|' and newlines would break the table. */
static void md_cell(FILE *out, const char *s)
{
	fputc(' ', out);
	for (; s && *s; s++)
		fputs(*s == '|' ? "\\|" : *s == '\n' ? " " : (char[2]){*s, 0}, out);
	fputs(" |", out);
}

/* One row of a record table; label (or NULL) is a first cell saying which record it is. */
static void md_item_row(FILE *out, const char *label, const struct report_item *it)
{
	char step[24] = "-", micro[24] = "-", rank[24] = "-", va[96], vb[96], ulp[32] = "", rel[32] = "";
	if (it->step >= 0)
		snprintf(step, sizeof step, "%lld", (long long)it->step);
	if (it->micro >= 0)
		snprintf(micro, sizeof micro, "%lld", (long long)it->micro);
	if (it->rank >= 0)
		snprintf(rank, sizeof rank, "%lld", (long long)it->rank);
	if (it->cmp.has_ulp)
		snprintf(ulp, sizeof ulp, "%llu", (unsigned long long)it->cmp.ulp);
	if (it->cmp.has_rel)
		snprintf(rel, sizeof rel, "%.3g", it->cmp.rel_diff);
	fputs("|", out);
	if (label)
		md_cell(out, label);
	const char *cells[] = {step,
			       micro,
			       rank,
			       it->canon,
			       verdict_name(it->cmp.verdict),
			       rr_side_value(&it->a, va, sizeof va),
			       rr_side_value(&it->b, vb, sizeof vb),
			       ulp,
			       rel,
			       it->cmp.reason};
	for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++)
		md_cell(out, cells[i]);
	fputc('\n', out);
}

/* The first unproven record, the first difference, the first record in one run only (as in text). */
static void md_firsts(FILE *out, const struct report *r)
{
	const struct {
		const char *label;
		const struct report_item *it;
	} rows[] = {
		{"first unproven", r->first_unproven},
		{"first difference", r->first_diff},
		{"first only in one run", r->first_only_in},
		{"root cause candidate", rr_root_cause_is_first_diff(r) ? NULL : r->root_cause},
	};
	int any = 0;
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		if (!rows[i].it)
			continue;
		if (!any++)
			fprintf(out,
				"| | step | micro | rank | name | verdict | %s | %s | ulp | rel. diff | reason |\n"
				"|---|---:|---:|---:|---|---|---|---|---:|---:|---|\n",
				r->a.name, r->b.name);
		md_item_row(out, rows[i].label, rows[i].it);
	}
	if (any)
		fputc('\n', out);
	char buf[600];
	if (rr_root_cause_text(r, buf, sizeof buf)) {
		fputs("**Root cause candidate:** ", out);
		for (const char *p = buf; *p; p++) /* names and calls are code: keep '*' and '_' literal */
			fputs(*p == '*' || *p == '_' ? (char[3]){'\\', *p, 0} : (char[2]){*p, 0}, out);
		fputs("\n\n", out);
	}
}

/* The names in one run only, one row per (name, run). */
static void md_only_in(FILE *out, const struct report *r)
{
	if (!r->n_only_in)
		return;
	fprintf(out, "\n## Only in one run\n\n| name | run | records | first step | last step "
		     "|\n|---|---|---:|---:|---:|\n");
	for (size_t i = 0; i < r->n_only_in && (long)i < r->limit; i++) {
		const struct report_only_in *o = &r->only_in[i];
		char a[24], b[24];
		fputs("|", out);
		md_cell(out, o->canon);
		md_cell(out, rr_only_in_run(r, o));
		fprintf(out, " %lld | %s | %s |\n", (long long)o->count, key_cell(o->first_step, a),
			key_cell(o->last_step, b));
	}
	if ((long)r->n_only_in > r->limit)
		fprintf(out, "\n%zu more (`--limit`).\n", r->n_only_in - (size_t)(r->limit > 0 ? r->limit : 0));
}

static int render_md(const struct report *r, FILE *out, struct align_err *e)
{
	char buf[1024];
	(void)e;
	fprintf(out, "# align report: `%s` vs `%s`\n\n", r->a.name, r->b.name);
	fprintf(out, "| run | framework | format | records | resumed |\n|---|---|---|---|---|\n");
	const struct report_run *runs[2] = {&r->a, &r->b};
	for (int i = 0; i < 2; i++)
		fprintf(out, "| %s | %s | %s | %lld | %s |\n", runs[i]->name, runs[i]->framework, runs[i]->format,
			(long long)runs[i]->records, runs[i]->resumed ? "yes" : "no");
	if (rr_prov_text(r, buf, sizeof buf))
		fprintf(out, "\n**Provenance differs:** %s\n", buf);
	for (int i = 0; i < 2; i++)
		if (runs[i]->resumed)
			fprintf(out, "\n> **Note:** %s\n", rr_resumed_note(runs[i], buf, sizeof buf));
	rr_summary(r, buf, sizeof buf);
	fprintf(out, "\n**%s**\n\n", buf);
	md_firsts(out, r);
	fprintf(out, "| metric | compared | bitwise-equal | equal as printed | differ | incomparable | only in a | "
		     "only in b | "
		     "first diff step |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (size_t i = 0; i <= r->n_metrics; i++) {
		const struct report_counts *c = i < r->n_metrics ? &r->metrics[i].c : &r->totals;
		char first[24] = "-";
		if (i < r->n_metrics && r->metrics[i].has_first_diff)
			snprintf(first, sizeof first, "%lld", (long long)r->metrics[i].first_diff_step);
		fprintf(out, "| %s | %lld | %lld | %lld | %lld | %lld | %lld | %lld | %s |\n",
			i < r->n_metrics ? r->metrics[i].name : "**total**", (long long)rr_compared(c),
			(long long)c->v[VERDICT_BITWISE_EQUAL], (long long)c->v[VERDICT_EQUAL_AS_PRINTED],
			(long long)c->v[VERDICT_DIFFER], (long long)c->v[VERDICT_INCOMPARABLE],
			(long long)c->v[VERDICT_ONLY_A], (long long)c->v[VERDICT_ONLY_B], first);
	}
	if (r->n_meta_left_out) {
		fprintf(out, "\nScope: %s (", rr_left_out_note(r, buf, sizeof buf));
		for (size_t i = 0; i < r->n_meta_left_out; i++)
			fprintf(out, "%s`%s`", i ? ", " : "", r->meta_left_out[i]);
		fprintf(out, ").\n");
	}
	if (!r->metrics_cover_skipped)
		fprintf(out,
			"\nPer-metric counts cover the steps read; %lld records of skipped steps are in the total.\n",
			(long long)r->skipped_records);
	if (r->unread_a || r->unread_b)
		fprintf(out,
			"\n`--first-diff`: %lld records of `%s` and %lld of `%s` in later differing steps were not "
			"compared.\n",
			(long long)r->unread_a, r->a.name, (long long)r->unread_b, r->b.name);
	if (r->has_searched_through)
		fprintf(out, "\nPer-metric first differences are known through step %lld.\n",
			(long long)r->searched_through);
	if (r->n_diffs) {
		fprintf(out, "\n## Differing values (first %zu of %lld)\n\n", r->n_diffs, (long long)r->n_value_diffs);
		fprintf(out,
			"| step | micro | rank | name | verdict | %s | %s | ulp | rel. diff | reason |\n"
			"|---:|---:|---:|---|---|---|---|---:|---:|---|\n",
			r->a.name, r->b.name);
		for (size_t i = 0; i < r->n_diffs; i++)
			md_item_row(out, NULL, &r->diffs[i]);
	}
	rr_elements_md(out, r);
	md_only_in(out, r);
	return ferror(out) ? -1 : 0;
}

int report_render(const struct report *r, enum report_format f, FILE *out, const char *where, struct align_err *e)
{
	static int (*const renderers[])(const struct report *, FILE *, struct align_err *) = {
		[REPORT_TEXT] = render_text,
		[REPORT_JSON] = render_json,
		[REPORT_MD] = render_md,
		[REPORT_HTML] = rr_render_html,
	};
	if ((size_t)f >= sizeof renderers / sizeof renderers[0])
		return fail_internal(e, "unknown report format %d", (int)f);
	if (renderers[f](r, out, e) || ferror(out))
		return fail_internal(e, "cannot write the report to %s: %s", where, strerror(errno));
	return ALIGN_OK;
}
