/* report-render: helpers shared by the report's renderers, report-render.c (text, Markdown, JSON) and
 * report-render-html.c (HTML). Not a public interface: see report.h. */
#ifndef ALIGN_REPORT_RENDER_H
#define ALIGN_REPORT_RENDER_H

#include "report.h"

/* The matched pairs: bitwise_equal + equal_as_printed + differ + incomparable. */
int64_t rr_compared(const struct report_counts *c);
/* "0x" and the bits in hex, as wide as the dtype. */
void rr_bits_hex(const char *dtype, uint64_t bits, char out[24]);
/* A side's value in one short string: text, else bits, else digest, else why it is missing. */
const char *rr_side_value(const struct report_side *s, char *buf, size_t len);
/* "run 'X' was resumed: later occurrences of repeated steps were used" */
const char *rr_resumed_note(const struct report_run *run, char *buf, size_t len);
/* "numerics", "all", "metrics" */
const char *rr_scope_name(enum report_scope s);
/* "left out N job-metadata names (timings, memory); --all includes them" */
const char *rr_left_out_note(const struct report *r, char *buf, size_t len);
/* "step S, micro M, rank R" ('-' for none) */
void rr_key_text(const struct report_item *it, char *buf, size_t len);
/* The one-line answer: where bits stop being known, the first provable difference, the first name in
 * one run only. */
void rr_summary(const struct report *r, char *buf, size_t len);
/* "N/M bitwise-equal, K equal as printed, ..." */
void rr_counts_text(const struct report_counts *c, char *buf, size_t len);

/* The root-cause candidate is the first difference itself. */
int rr_root_cause_is_first_diff(const struct report *r);
/* "NAME (inputs equal, output differs) at step S, micro M, rank R: call 'C', N inputs bitwise-equal"
 * (with "; it is the first difference" when it is), or "none (WHY)" when a search found none; returns
 * 0 (and "") when nothing is to be said (no value differs, or no record read has a call link). */
int rr_root_cause_text(const struct report *r, char *buf, size_t len);
/* "N inputs bitwise-equal", or "N inputs equal (M only in the summaries shown, not proven bitwise)". */
void rr_root_cause_inputs_text(const struct report *r, char *buf, size_t len);
/* "only in 'RUN'" of an only-in group */
const char *rr_only_in_run(const struct report *r, const struct report_only_in *o);
/* report-render-elements.c: a reported record's element-level detail (report_item.elements) */
/* The detail as one line of text ("elements: 3 of 24 differ (bitwise); ...") in buf. */
const char *rr_elements_line(const struct report_elements *el, char *buf, size_t len);
/* indent + the line + newline, when the item has a detail. */
void rr_elements_text(FILE *out, const struct report_item *it, const char *indent);
/* "## Element-level detail": the first difference's and the listed differences' details. */
void rr_elements_md(FILE *out, const struct report *r);
/* ITEM.elements (null when el is NULL). New reference. */
json_t *rr_elements_json(const struct report_elements *el);
/* <p class="note elements">the line</p> of an item; a list of the listed differences' details. */
void rr_elements_html(FILE *out, const struct report_item *it);
void rr_elements_html_list(FILE *out, const struct report *r);

/* report-prov.c: "cublas_version 130000 vs 120900; device 'A' vs 'B'" of the provenance fields that
 * differ; returns 0 (and "") when none does. */
int rr_prov_text(const struct report *r, char *buf, size_t len);
/* {"a": {field: value}, "b": {...}, "differs": [field, ...]} */
json_t *rr_prov_json(const struct report *r);

/* report-render-html.c: the page of --format html (reports/report.html.in). 0, or -1 with the message in
 * e (an unknown placeholder in the template). */
int rr_render_html(const struct report *r, FILE *out, struct align_err *e);

#endif
