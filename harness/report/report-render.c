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
 *    "diffs": [ITEM, ...], "diffs_total": N, "limit": N, "warnings": ["..."]}
 *   ITEM = {step, micro, rank, name, verdict, reason, ulp, ulp_dtype, rel_diff, digits, a: SIDE, b: SIDE,
 *           elements: null | ELEMENTS (the element-level detail: report-render-elements.c)}
 *   SIDE = null | {name, text, digits (significant digits printed; null: exact or no text),
 *                  bits ("0x" + hex of the dtype's width), dtype, digest, digest_alg, missing, file,
 *                  line, seq}
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

/* ---- JSON ---- */

static json_t *jstr(const char *s)
{
	return s ? json_string(s) : json_null();
}
static json_t *jkey(int64_t v)
{
	return v < 0 ? json_null() : json_integer(v);
}

static json_t *json_side(const struct report_side *s)
{
	if (!s->present)
		return json_null();
	char hex[24];
	if (s->has_bits)
		rr_bits_hex(s->dtype, s->bits, hex);
	return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:I}", "name", jstr(s->name), "text", jstr(s->text),
			 "digits", s->digits ? json_integer(s->digits) : json_null(), "bits",
			 s->has_bits ? json_string(hex) : json_null(), "dtype", jstr(s->dtype), "digest",
			 jstr(s->digest), "digest_alg", jstr(s->digest_alg), "missing", jstr(s->missing), "file",
			 jstr(s->file), "line", (json_int_t)s->line, "seq", (json_int_t)s->seq);
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
				diffs, "diffs_total", (json_int_t)r->n_diff_total, "limit", (json_int_t)r->limit,
				"warnings", warnings);
	if (!doc)
		return -1;
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

static void item_text(FILE *out, const char *title, const struct report_item *it, const struct report *r)
{
	char key[96];
	rr_key_text(it, key, sizeof key);
	fprintf(out, "%s: %s at %s: %s: %s\n", title, it->canon, key, verdict_name(it->cmp.verdict), it->cmp.reason);
	side_text(out, r->a.name, &it->a);
	side_text(out, r->b.name, &it->b);
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
	fprintf(out, "metrics%s:\n",
		r->metrics_cover_skipped ? "" : " (counts cover the steps read; skipped steps are in the totals)");
	for (size_t i = 0; i < r->n_metrics; i++) {
		const struct report_metric *m = &r->metrics[i];
		rr_counts_text(&m->c, buf, sizeof buf);
		fprintf(out, "  %-24s %s", m->name, buf);
		if (m->has_first_diff)
			fprintf(out, " (first difference at step %lld)", (long long)m->first_diff_step);
		fputc('\n', out);
	}
	rr_summary(r, buf, sizeof buf);
	fprintf(out, "%s\n", buf);
	if (r->first_unproven)
		item_text(out, "first unproven", r->first_unproven, r);
	if (r->first_diff)
		item_text(out, "first difference", r->first_diff, r);
	if (r->first_only_in)
		item_text(out, "first only in one run", r->first_only_in, r);
	if (r->n_diffs) {
		fprintf(out, "differing records (first %zu of %lld%s):\n", r->n_diffs, (long long)r->n_diff_total,
			r->first_diff_mode && !r->metrics_cover_skipped ? " through the first differing step" : "");
		for (size_t i = 0; i < r->n_diffs; i++) {
			const struct report_item *it = &r->diffs[i];
			char key[96], va[96], vb[96];
			rr_key_text(it, key, sizeof key);
			fprintf(out, "  %s %s: %s: %s vs %s", key, it->canon, verdict_name(it->cmp.verdict),
				rr_side_value(&it->a, va, sizeof va), rr_side_value(&it->b, vb, sizeof vb));
			if (it->cmp.has_ulp)
				fprintf(out, ", %llu ulp", (unsigned long long)it->cmp.ulp);
			if (it->cmp.has_rel)
				fprintf(out, ", rel %.3g", it->cmp.rel_diff);
			fputc('\n', out);
			rr_elements_text(out, it, "    ");
		}
	}
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
		fprintf(out, "\n## Differing records (first %zu of %lld)\n\n", r->n_diffs, (long long)r->n_diff_total);
		fprintf(out,
			"| step | micro | rank | name | verdict | %s | %s | ulp | rel. diff | reason |\n"
			"|---:|---:|---:|---|---|---|---|---:|---:|---|\n",
			r->a.name, r->b.name);
		for (size_t i = 0; i < r->n_diffs; i++)
			md_item_row(out, NULL, &r->diffs[i]);
	}
	rr_elements_md(out, r);
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
