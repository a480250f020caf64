/* report-render-html: a computed report as one self-contained HTML page (--format html).
 *
 * The page is the template reports/report.html.in, embedded at build time (reports/embed.py), with
 * each {{name}} replaced by what the table `fills` writes for it (text HTML-escaped; an unknown name
 * is an error, not an empty string). Charts are inline SVG, no script: for each metric with points
 * (report.h: scalar records, opts.series) the relative difference |a-b|/|a| per step on a log scale,
 * equal steps in a lower band, only-in records and differences without a finite ratio in an upper
 * band; a step's marks carry a <title> (shown on hover) with its verdicts. Dense charts merge the steps
 * that fall on one pixel column (verdicts united, the largest ratio kept). */
#include "report-render.h"

#include "align-config.h"
#include "err.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

extern const char report_html_template[];
extern const size_t report_html_template_len;

/* Charts drawn at most (the per-metric table lists every metric). */
#define HTML_MAX_CHARTS 200

/* SVG geometry (px): plot area [X0, X1] x [Y0, Y1]; upper band above the log scale, lower band
 * below it. */
enum { SVG_W = 760, SVG_H = 214, X0 = 70, X1 = SVG_W - 14, Y0 = 8, Y1 = SVG_H - 30 };
enum { BAND = 14, GAP = 8 };
#define LOG_TOP (Y0 + BAND + GAP)
#define LOG_BOT (Y1 - BAND - GAP)

static void esc(FILE *out, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default:
			fputc(*s, out);
		}
	}
}

/* A table cell with escaped text; cls may be NULL. */
static void td(FILE *out, const char *cls, const char *s)
{
	if (cls)
		fprintf(out, "<td class=\"%s\">", cls);
	else
		fputs("<td>", out);
	esc(out, s);
	fputs("</td>", out);
}

static void td_int(FILE *out, int64_t v)
{
	fprintf(out, "<td class=\"num\">%lld</td>", (long long)v);
}

static void td_verdict(FILE *out, enum verdict v)
{
	fprintf(out, "<td class=\"v-%s\">%s</td>", verdict_name(v), verdict_name(v));
}

/* "-" for a key that is absent (-1). */
static const char *key_str(int64_t v, char buf[24])
{
	if (v < 0)
		return "-";
	snprintf(buf, 24, "%lld", (long long)v);
	return buf;
}

/* ---- header, notes, tables ---- */

static void fill_generator(const struct report *r, FILE *out)
{
	(void)r, fputs("align " ALIGN_VERSION, out);
}

static void fill_title(const struct report *r, FILE *out)
{
	fputs("align report: ", out);
	esc(out, r->a.name);
	fputs(" vs ", out);
	esc(out, r->b.name);
}

static void fill_runs(const struct report *r, FILE *out)
{
	const struct report_run *runs[2] = {&r->a, &r->b};
	for (int i = 0; i < 2; i++) {
		fputs("<tr>", out);
		td(out, "mono", runs[i]->name);
		td(out, NULL, runs[i]->framework);
		td(out, NULL, runs[i]->format);
		td_int(out, runs[i]->records);
		td(out, NULL, runs[i]->resumed ? "yes" : "no");
		fputs("</tr>\n", out);
	}
}

static void fill_verdict_class(const struct report *r, FILE *out)
{
	fputs(report_exit_code(r) == ALIGN_DIFF ? "differ" : "equal", out);
}

static void fill_summary(const struct report *r, FILE *out)
{
	char buf[1024];
	rr_summary(r, buf, sizeof buf);
	esc(out, buf);
}

static void note(FILE *out, const char *text)
{
	fputs("<p class=\"note\">", out);
	esc(out, text);
	fputs("</p>\n", out);
}

static void fill_notes(const struct report *r, FILE *out)
{
	char buf[1024], prov[900];
	const struct report_run *runs[2] = {&r->a, &r->b};
	if (rr_prov_text(r, prov, sizeof prov)) {
		snprintf(buf, sizeof buf, "provenance differs: %s", prov);
		note(out, buf);
	}
	for (int i = 0; i < 2; i++)
		if (runs[i]->resumed)
			note(out, rr_resumed_note(runs[i], buf, sizeof buf));
	if (r->n_meta_left_out) {
		fputs("<p class=\"note\">Scope: ", out);
		esc(out, rr_left_out_note(r, buf, sizeof buf));
		fputs(":", out);
		for (size_t i = 0; i < r->n_meta_left_out; i++) {
			fputs(i ? ", <code>" : " <code>", out);
			esc(out, r->meta_left_out[i]);
			fputs("</code>", out);
		}
		fputs(".</p>\n", out);
	}
	if (r->unread_a || r->unread_b) {
		snprintf(buf, sizeof buf,
			 "--first-diff: %lld records of '%s' and %lld of '%s' in later differing steps were "
			 "not compared; the charts stop where reading stopped.",
			 (long long)r->unread_a, r->a.name, (long long)r->unread_b, r->b.name);
		note(out, buf);
	}
	if (r->has_searched_through) {
		snprintf(buf, sizeof buf,
			 "--first-diff stopped after step %lld: per-metric first differences and the charts "
			 "are known through that step.",
			 (long long)r->searched_through);
		note(out, buf);
	}
}

static void counts_cells(FILE *out, const struct report_counts *c)
{
	td_int(out, rr_compared(c));
	static const enum verdict order[] = {VERDICT_BITWISE_EQUAL, VERDICT_EQUAL_AS_PRINTED, VERDICT_DIFFER,
					     VERDICT_INCOMPARABLE,  VERDICT_ONLY_A,	      VERDICT_ONLY_B};
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		if (c->v[order[i]])
			fprintf(out, "<td class=\"num v-%s\">%lld</td>", verdict_name(order[i]),
				(long long)c->v[order[i]]);
		else
			td_int(out, 0);
	}
}

static const char counts_head[] = "<th class=\"num\">compared</th><th class=\"num\">bitwise-equal</th>"
				  "<th class=\"num\">equal as printed</th><th class=\"num\">differ</th>"
				  "<th class=\"num\">incomparable</th><th class=\"num\">only in a</th>"
				  "<th class=\"num\">only in b</th>";

static void fill_totals(const struct report *r, FILE *out)
{
	fprintf(out, "<table>\n<tr>%s</tr>\n<tr>", counts_head);
	counts_cells(out, &r->totals);
	fputs("</tr>\n</table>\n", out);
}

static void fill_metrics(const struct report *r, FILE *out)
{
	if (!r->n_metrics) {
		note(out, "No metric in scope.");
		return;
	}
	fprintf(out, "<table>\n<tr><th>metric</th>%s<th class=\"num\">first difference at step</th></tr>\n",
		counts_head);
	for (size_t i = 0; i < r->n_metrics; i++) {
		const struct report_metric *m = &r->metrics[i];
		char step[24];
		fputs("<tr><td class=\"mono\">", out);
		if (m->n_points && i < HTML_MAX_CHARTS)
			fprintf(out, "<a href=\"#chart-%zu\">", i);
		esc(out, m->name);
		fputs(m->n_points && i < HTML_MAX_CHARTS ? "</a></td>" : "</td>", out);
		counts_cells(out, &m->c);
		td(out, "num", m->has_first_diff ? key_str(m->first_diff_step, step) : "-");
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
	if (!r->metrics_cover_skipped)
		note(out, "Per-metric counts cover the steps read; the totals count the others too.");
}

/* ---- the first records, both sides in full ---- */

static void side_row(FILE *out, const char *field, const char *a, const char *b)
{
	if (!a && !b)
		return;
	fputs("<tr>", out);
	td(out, NULL, field);
	td(out, "val", a ? a : "");
	td(out, "val", b ? b : "");
	fputs("</tr>\n", out);
}

static void first_item(FILE *out, const char *label, const struct report_item *it, const struct report *r)
{
	char key[96], va[96], vb[96], ba[24] = "", bb[24] = "", da[16] = "", db[16] = "", fa[4200] = "", fb[4200] = "";
	rr_key_text(it, key, sizeof key);
	fputs("<h3>", out);
	esc(out, label);
	fputs(": <code>", out);
	esc(out, it->canon);
	fputs("</code> at ", out);
	esc(out, key);
	fprintf(out, " <span class=\"v-%s\">%s</span></h3>\n<p class=\"note\">", verdict_name(it->cmp.verdict),
		verdict_name(it->cmp.verdict));
	esc(out, it->cmp.reason);
	if (it->cmp.has_ulp)
		fprintf(out, "; ulp distance %" PRIu64 " (%s)", it->cmp.ulp, it->cmp.ulp_dtype);
	if (it->cmp.has_rel)
		fprintf(out, "; relative difference %.3g", it->cmp.rel_diff);
	fputs("</p>\n<table class=\"first\">\n<tr><th></th><th>", out);
	esc(out, r->a.name);
	fputs("</th><th>", out);
	esc(out, r->b.name);
	fputs("</th></tr>\n", out);
	const struct report_side *a = &it->a, *b = &it->b;
	if (a->has_bits)
		rr_bits_hex(a->dtype, a->bits, ba);
	if (b->has_bits)
		rr_bits_hex(b->dtype, b->bits, bb);
	if (a->digits)
		snprintf(da, sizeof da, "%d", a->digits);
	if (b->digits)
		snprintf(db, sizeof db, "%d", b->digits);
	if (a->present)
		snprintf(fa, sizeof fa, "%s:%lld (seq %lld)", a->file ? a->file : "?", (long long)a->line,
			 (long long)a->seq);
	if (b->present)
		snprintf(fb, sizeof fb, "%s:%lld (seq %lld)", b->file ? b->file : "?", (long long)b->line,
			 (long long)b->seq);
	side_row(out, "value", rr_side_value(a, va, sizeof va), rr_side_value(b, vb, sizeof vb));
	side_row(out, "name as printed", a->name, b->name);
	side_row(out, "significant digits", *da ? da : NULL, *db ? db : NULL);
	side_row(out, "bits", *ba ? ba : NULL, *bb ? bb : NULL);
	side_row(out, "dtype", a->dtype, b->dtype);
	side_row(out, "digest", a->digest, b->digest);
	side_row(out, "digest algorithm", a->digest_alg, b->digest_alg);
	side_row(out, "missing", a->missing, b->missing);
	side_row(out, "source", *fa ? fa : NULL, *fb ? fb : NULL);
	fputs("</table>\n", out);
	rr_elements_html(out, it);
}

/* The root-cause candidate (report.h): its record unless it is the first difference, and why. */
static void root_cause(const struct report *r, FILE *out)
{
	const struct report_item *it = r->root_cause;
	char buf[600];
	if (!rr_root_cause_text(r, buf, sizeof buf))
		return;
	if (!it) {
		fputs("<p class=\"note\">Root cause candidate: ", out);
		esc(out, buf);
		fputs("</p>\n", out);
		return;
	}
	int first = rr_root_cause_is_first_diff(r);
	if (!first)
		first_item(out, "Root cause candidate", it, r);
	fputs("<p class=\"note\">", out);
	if (first) {
		fputs("Root cause candidate: the first difference, <code>", out);
		esc(out, it->canon);
		fputs("</code>: ", out);
	}
	fputs("inputs equal, output differs: call <code>", out);
	esc(out, it->a.call ? it->a.call : "?");
	char inputs[128];
	rr_root_cause_inputs_text(r, inputs, sizeof inputs);
	fputs("</code>, ", out);
	esc(out, inputs);
	if (!first)
		fputs("; the first difference may be its downstream consequence", out);
	fputs(".</p>\n", out);
}

static void fill_firsts(const struct report *r, FILE *out)
{
	if (r->first_unproven)
		first_item(out, "First unproven", r->first_unproven, r);
	if (r->first_diff)
		first_item(out, "First difference", r->first_diff, r);
	else
		note(out, "No value differs in the records compared.");
	root_cause(r, out);
	if (r->first_only_in)
		first_item(out, "First only in one run", r->first_only_in, r);
}

/* The names in one run only: one row per (name, run). */
static void only_in_table(const struct report *r, FILE *out)
{
	if (!r->n_only_in)
		return;
	fputs("<h3>Only in one run</h3>\n<table>\n<tr><th>name</th><th>run</th><th class=\"num\">records</th>"
	      "<th class=\"num\">first step</th><th class=\"num\">last step</th></tr>\n",
	      out);
	for (size_t i = 0; i < r->n_only_in && (long)i < r->limit; i++) {
		const struct report_only_in *o = &r->only_in[i];
		char n[24], a[24], b[24];
		snprintf(n, sizeof n, "%lld", (long long)o->count);
		fputs("<tr>", out);
		td(out, "mono", o->canon);
		td(out, NULL, rr_only_in_run(r, o));
		td(out, "num", n);
		td(out, "num", key_str(o->first_step, a));
		td(out, "num", key_str(o->last_step, b));
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
	if ((long)r->n_only_in > r->limit) {
		char buf[96];
		snprintf(buf, sizeof buf, "%zu more (--limit).", r->n_only_in - (size_t)(r->limit > 0 ? r->limit : 0));
		note(out, buf);
	}
}

static void fill_diffs(const struct report *r, FILE *out)
{
	if (!r->n_diffs) {
		note(out, r->n_only_in ? "No value differs." : "None.");
		only_in_table(r, out);
		return;
	}
	char buf[160];
	snprintf(buf, sizeof buf, "Differing values: the first %zu of %lld%s, in execution order.", r->n_diffs,
		 (long long)r->n_value_diffs,
		 r->first_diff_mode && !r->metrics_cover_skipped ? " through the first differing step" : "");
	note(out, buf);
	fputs("<table>\n<tr><th class=\"num\">step</th><th class=\"num\">micro</th><th "
	      "class=\"num\">rank</th><th>name</th>"
	      "<th>verdict</th><th>",
	      out);
	esc(out, r->a.name);
	fputs("</th><th>", out);
	esc(out, r->b.name);
	fputs("</th><th class=\"num\">ulp</th><th class=\"num\">rel. diff</th><th>reason</th></tr>\n", out);
	for (size_t i = 0; i < r->n_diffs; i++) {
		const struct report_item *it = &r->diffs[i];
		char k[3][24], va[96], vb[96], ulp[32] = "", rel[32] = "";
		if (it->cmp.has_ulp)
			snprintf(ulp, sizeof ulp, "%" PRIu64, it->cmp.ulp);
		if (it->cmp.has_rel)
			snprintf(rel, sizeof rel, "%.3g", it->cmp.rel_diff);
		fputs("<tr>", out);
		td(out, "num", key_str(it->step, k[0]));
		td(out, "num", key_str(it->micro, k[1]));
		td(out, "num", key_str(it->rank, k[2]));
		td(out, "mono", it->canon);
		td_verdict(out, it->cmp.verdict);
		td(out, "val", rr_side_value(&it->a, va, sizeof va));
		td(out, "val", rr_side_value(&it->b, vb, sizeof vb));
		td(out, "num", ulp);
		td(out, "num", rel);
		td(out, NULL, it->cmp.reason);
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
	rr_elements_html_list(out, r);
	only_in_table(r, out);
}

/* ---- charts ---- */

/* The scales of one chart: steps on x, log10 of the ratio on y. */
struct chart {
	int64_t s0, s1; /* step range */
	double l0, l1;	/* decades shown (l0 < l1); none when no ratio */
	int has_rel;
	unsigned verdicts; /* of every step */
	double mark_w;	   /* width of a step's mark */
};

/* Half a step of margin on either side keeps the first and last marks inside the plot. */
static double chart_x(const struct chart *ch, int64_t step)
{
	return X0 + ((double)(step - ch->s0) + 0.5) / ((double)(ch->s1 - ch->s0) + 1.0) * (X1 - X0);
}

static double chart_y(const struct chart *ch, double rel)
{
	double l = log10(rel);
	l = l < ch->l0 ? ch->l0 : l > ch->l1 ? ch->l1 : l;
	return LOG_BOT - (l - ch->l0) / (ch->l1 - ch->l0) * (LOG_BOT - LOG_TOP);
}

static void chart_scale(const struct report_metric *m, struct chart *ch)
{
	double lo = INFINITY, hi = -INFINITY;
	ch->s0 = m->points[0].step, ch->s1 = m->points[m->n_points - 1].step;
	ch->verdicts = 0;
	for (size_t i = 0; i < m->n_points; i++)
		ch->verdicts |= m->points[i].verdicts;
	for (size_t i = 0; i < m->n_points; i++)
		if (m->points[i].has_rel && m->points[i].rel > 0) {
			double l = log10(m->points[i].rel);
			lo = l < lo ? l : lo, hi = l > hi ? l : hi;
		}
	ch->has_rel = lo <= hi;
	ch->l0 = ch->has_rel ? floor(lo) : -8, ch->l1 = ch->has_rel ? ceil(hi) : 0;
	if (ch->l1 <= ch->l0)
		ch->l1 = ch->l0 + 1;
	if (ch->l1 - ch->l0 > 24) /* smaller ratios sit on the bottom line */
		ch->l0 = ch->l1 - 24;
	double per_step = (X1 - X0) / (double)(ch->s1 - ch->s0 + 1);
	ch->mark_w = per_step < 1 ? 1 : per_step > 7 ? 7 : per_step;
}

/* A tick spacing of 1, 2 or 5 times a power of ten giving at most 8 intervals. */
static int64_t nice_step(int64_t range)
{
	static const int64_t mult[] = {1, 2, 5};
	for (int64_t p = 1;; p *= 10)
		for (int i = 0; i < 3; i++)
			if (range / (mult[i] * p) <= 8)
				return mult[i] * p;
}

static void chart_axes(FILE *out, const struct chart *ch, const struct report_metric *m)
{
	fprintf(out, "<rect class=\"band\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", X0, Y0, X1 - X0, BAND);
	fprintf(out, "<rect class=\"band\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", X0, Y1 - BAND, X1 - X0,
		BAND);
	fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">one run</text>\n", X0 - 6, Y0 + 11);
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", X0, Y0, X0, Y1);
	fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">equal</text>\n", X0 - 6, Y1 - 3);
	int every = (int)ceil((ch->l1 - ch->l0) / 6.0);
	for (int d = (int)ch->l0; ch->has_rel && d <= (int)ch->l1; d++) {
		double y = LOG_BOT - (d - ch->l0) / (ch->l1 - ch->l0) * (LOG_BOT - LOG_TOP);
		fprintf(out, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", X0, y, X1, y);
		if ((d - (int)ch->l0) % every == 0)
			fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n", X0 - 6, y + 4, d);
	}
	unsigned compared = (1u << VERDICT_BITWISE_EQUAL) | (1u << VERDICT_EQUAL_AS_PRINTED) | (1u << VERDICT_DIFFER) |
			    (1u << VERDICT_INCOMPARABLE);
	const char *why = ch->has_rel					? NULL
			  : ch->verdicts & (1u << VERDICT_DIFFER)	? "no difference with a finite ratio"
			  : ch->verdicts & (1u << VERDICT_INCOMPARABLE) ? "no value comparable"
			  : ch->verdicts & compared			? "no value differs"
									: "no value in both runs";
	if (why)
		fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", (X0 + X1) / 2,
			(LOG_TOP + LOG_BOT) / 2, why);
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", X0, Y1, X1, Y1);
	int64_t t = nice_step(ch->s1 - ch->s0);
	for (int64_t s = (ch->s0 + t - 1) / t * t; s <= ch->s1; s += t) {
		double x = chart_x(ch, s);
		fprintf(out, "<line class=\"axis\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>", x, Y1, x, Y1 + 4);
		fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%lld</text>\n", x, Y1 + 16,
			(long long)s);
	}
	fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">step</text>\n", X0 - 6, Y1 + 16);
	if (m->has_first_diff && m->first_diff_step >= ch->s0 && m->first_diff_step <= ch->s1) {
		double x = chart_x(ch, m->first_diff_step);
		fprintf(out,
			"<line class=\"firstdiff\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"><title>first "
			"difference: step "
			"%lld</title></line>\n",
			x, Y0, x, Y1, (long long)m->first_diff_step);
	}
}

/* The marks of one pixel column: steps s0..s1 merged into *p. */
static void chart_marks(FILE *out, const struct chart *ch, const struct report_point *p, int64_t s0, int64_t s1)
{
	char title[256];
	size_t n = (size_t)snprintf(title, sizeof title, s0 == s1 ? "step %lld:" : "steps %lld-%lld:", (long long)s0,
				    (long long)s1);
	for (int v = 0; v < VERDICT_COUNT && n < sizeof title; v++)
		if (p->verdicts & (1u << v))
			n += (size_t)snprintf(title + n, sizeof title - n, " %s", verdict_name((enum verdict)v));
	if (p->has_rel && n < sizeof title)
		snprintf(title + n, sizeof title - n, ", |a-b|/|a| %.3g", p->rel);
	double x = chart_x(ch, (s0 + s1) / 2), w = ch->mark_w;
	unsigned only = 1u << VERDICT_ONLY_A | 1u << VERDICT_ONLY_B;
	const char *upper = p->verdicts & (1u << VERDICT_DIFFER) && !p->has_rel ? "m-noratio"
			    : p->verdicts & (1u << VERDICT_INCOMPARABLE)	? "m-incomparable"
			    : p->verdicts & only				? "m-only"
										: NULL;
	const char *lower = p->verdicts & (1u << VERDICT_EQUAL_AS_PRINTED) ? "m-printed"
			    : p->verdicts & (1u << VERDICT_BITWISE_EQUAL)  ? "m-equal"
									   : NULL;
	fputs("<g>", out);
	if (p->has_rel)
		fprintf(out, "<circle class=\"m-differ\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>", x, chart_y(ch, p->rel));
	if (upper)
		fprintf(out, "<rect class=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", upper, x - w / 2,
			Y0 + 3, w, BAND - 6);
	if (lower)
		fprintf(out, "<rect class=\"%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", lower, x - w / 2,
			Y1 - BAND + 3, w, BAND - 6);
	fputs("<title>", out);
	esc(out, title);
	fputs("</title></g>\n", out);
}

static void chart(FILE *out, const struct report_metric *m, size_t index)
{
	struct chart ch;
	chart_scale(m, &ch);
	fprintf(out, "<div class=\"chart\" id=\"chart-%zu\">\n<h3><code>", index);
	esc(out, m->name);
	fprintf(out,
		"</code></h3>\n<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"relative difference per step of ",
		SVG_W, SVG_H, SVG_W, SVG_H);
	esc(out, m->name);
	fputs("\">\n", out);
	chart_axes(out, &ch, m);
	/* merge the steps of one pixel column */
	struct report_point acc = m->points[0];
	int64_t first = acc.step;
	for (size_t i = 1; i <= m->n_points; i++) {
		const struct report_point *p = i < m->n_points ? &m->points[i] : NULL;
		if (p && (long)chart_x(&ch, p->step) == (long)chart_x(&ch, acc.step)) {
			acc.verdicts |= p->verdicts;
			if (p->has_rel && (!acc.has_rel || p->rel > acc.rel))
				acc.has_rel = 1, acc.rel = p->rel;
			continue;
		}
		chart_marks(out, &ch, &acc, first, m->points[i - 1].step);
		if (p)
			acc = *p, first = p->step;
	}
	fputs("</svg>\n</div>\n", out);
}

static void fill_charts(const struct report *r, FILE *out)
{
	size_t drawn = 0, with_points = 0;
	for (size_t i = 0; i < r->n_metrics; i++) {
		if (!r->metrics[i].n_points)
			continue;
		with_points++;
		if (i < HTML_MAX_CHARTS)
			chart(out, &r->metrics[i], i), drawn++;
	}
	char buf[160];
	if (!with_points)
		note(out, "No scalar metric was read (tensors are compared by digest and have no ratio to chart).");
	else if (drawn < with_points) {
		snprintf(buf, sizeof buf, "%zu more metrics are not charted (the first %d metrics are).",
			 with_points - drawn, HTML_MAX_CHARTS);
		note(out, buf);
	}
}

/* ---- the template ---- */

static const struct {
	const char *name;
	void (*fill)(const struct report *, FILE *);
} fills[] = {
	{"generator", fill_generator}, {"title", fill_title},
	{"runs", fill_runs},	       {"verdict_class", fill_verdict_class},
	{"summary", fill_summary},     {"notes", fill_notes},
	{"totals", fill_totals},       {"firsts", fill_firsts},
	{"metrics", fill_metrics},     {"charts", fill_charts},
	{"diffs", fill_diffs},
};

int rr_render_html(const struct report *r, FILE *out, struct align_err *e)
{
	const char *t = report_html_template, *end = t + report_html_template_len;
	while (t < end) {
		const char *open = strstr(t, "{{");
		if (!open) {
			fwrite(t, 1, (size_t)(end - t), out);
			break;
		}
		fwrite(t, 1, (size_t)(open - t), out);
		const char *close = strstr(open + 2, "}}");
		size_t k = 0, len = close ? (size_t)(close - open - 2) : 0;
		while (close && k < sizeof fills / sizeof fills[0] &&
		       (strlen(fills[k].name) != len || strncmp(fills[k].name, open + 2, len)))
			k++;
		if (!close || k == sizeof fills / sizeof fills[0]) {
			fail_internal(e, "report template: unknown placeholder '%.40s'", open);
			return -1;
		}
		fills[k].fill(r, out);
		t = close + 2;
	}
	return ferror(out) ? -1 : 0;
}
