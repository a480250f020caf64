/* report: compare two runs of the database record by record and find the first difference.
 *
 * Matching: non-superseded records are paired by (canon, rank, step, micro, occ). canon is the built-in
 * canonical name (record.canon), or, with a map, the first rule whose POSIX extended regex matches
 * record.name (occ is then recounted per (canon, rank, step, micro) in seq order). Each pair gets one
 * verdict from compare_values (compare.h); a key on one side only is only-in-a / only-in-b.
 *
 * Execution order (what "first" means), the same whichever run is named first:
 *   position   a record's ordinal among its own run's records in scope of the same (step, rank, micro),
 *              in seq order (0 = recorded first). A (rank, step) is read whole or not at all, so a
 *              position does not depend on which steps the fast path skipped.
 *   order      pairs by (step, micro, the larger of the two runs' positions, the smaller, the larger
 *              seq, the smaller seq, rank, canonical name, occ). A record in one run only has one
 *              position (and seq): it is both the larger and the smaller. When the runs record in
 *              different orders, the earliest divergent record is the one both runs have reached
 *              soonest: the maximum of its two positions is the smallest. Both positions (and seqs)
 *              are reported (side pos / seq).
 * Step comes before position because some formats (Megatron golden JSON) emit all steps of one metric
 * before the next metric, so their seq is print order, not execution order. Step -1 (no step) sorts
 * first, micro -1 (step-level) before micro 0. seq before rank: rank 1's record at seq 0 ran before
 * rank 0's at seq 4 even when both are at position 0 of their rank.
 *
 * Scope (which canonical names are compared):
 *   numerics (default)  every name of both runs except job metadata: the names that either run holds
 *                       records of phase "meta" for (table meta_canon: timings, throughput, memory,
 *                       consumed samples, batch size, progress). They differ between frameworks and
 *                       from run to run. The other names are followed exactly as if each had been
 *                       given with --metric (per-metric first differences are found, see below).
 *                       When neither run has meta names this is every name, read as without --metric.
 *   all                 --all, or --map (a map renames records, so the meta names no longer apply)
 *   metrics             --metric names given (with or without --all)
 *
 * Results:
 *   first_diff      the earliest record whose verdict is differ or incomparable (a value missing on
 *                   one side is differ): the first divergent record. It may be a downstream
 *                   consequence (a step-level loss sorts before the step's tensors): see root_cause
 *   root_cause      the root-cause candidate (DESIGN: inputs matched, output differs): the earliest
 *                   record that is the output of a call (record.io 'out', record.call set) whose verdict
 *                   is differ or incomparable, and whose call's input records (io 'in', the same rank,
 *                   step, micro and call; the call's name on each side) are present in both runs, matched
 *                   to each other and all equal (at least one): bitwise-equal, or, for an input both
 *                   sides know only by its summaries (head, stats: AccProber, msprobe statistics), equal
 *                   in every element and statistic shown (counted in root_cause_inputs_summary: not
 *                   proven bitwise). NULL, with root_cause_none saying
 *                   why: no value differs; no record read carries a link; none qualifies; or, with
 *                   --first-diff, "not found through step S" (searched through the first differing
 *                   step). With --metric (or the numerics scope) only records in scope are inputs.
 *   first_only_in   the earliest only-in-a / only-in-b record: a name (or key) one run does not have,
 *                   such as a framework-specific metric. A difference (exit 1, counted in totals and
 *                   metrics), but not a divergence of values: it never is first_diff
 *   first_unproven  the earliest equal-as-printed record (bits unknown), when it comes before
 *                   first_diff (or there is no first_diff)
 *   proven_equal_through_step
 *                   the last step S >= 0 such that every record at steps <= S is bitwise-equal
 *                   (none: the first step already holds a record that is not)
 *   metrics[]       per canonical name: counts by verdict and the step of its own first difference.
 *   diffs[]         the first `limit` value differences (differ, incomparable) in execution order;
 *                   n_value_diffs counts them all (n_diff_total: with the only-in records)
 *   only_in[]       only-in records grouped per (canonical name, run): count, first and last step, in
 *                   execution order of each group's first record (listed after the values: one name
 *                   present in one run only must not bury the value differences)
 *
 * Speed: the stepsum table summarises each (run, rank, step). A (rank, step) whose (n, n_exact, h)
 * are equal in both runs holds the same keys with identical value representations, so its records are
 * not read: its n_exact records count as bitwise-equal, the others as equal as printed (identical
 * prints). Only (rank, step) units whose summaries differ, or that exist in one run, are read, step
 * by step in execution order.
 *   full report (default): every unit is accounted for; per-metric counts of skipped units come from
 *     one sequential scan of run A's key columns (or, with --metric, an index lookup of those names).
 *   --first-diff: reading stops after the step holding first_diff (searched_through); an only-in
 *     record does not stop it, and first_only_in is looked for through that step only (null: none
 *     through it).
 *     With --metric it goes on through the later differing units, reading only the named metrics
 *     that have not differed yet, until each has its first difference (each named metric's
 *     first_diff_step is then exact; without --metric a metric's first_diff_step is known through
 *     searched_through only). Totals count skipped units (from the summaries) and what was read;
 *     records of differing units left unread are counted in unread_a / unread_b. Without --metric,
 *     metrics[] counts cover only records read (skipped units are in the totals only;
 *     metrics_cover_skipped = 0).
 *   --map, --no-stepsum and series (the charts of --format html) read every record (a map rewrites
 *     names that the summaries do not see; a chart needs every step's values);
 *     --first-diff still stops after the first differing step when no --metric is given.
 */
#ifndef ALIGN_REPORT_H
#define ALIGN_REPORT_H

#include "compare.h"
#include "report-elements.h"
#include "status.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum report_format { REPORT_TEXT, REPORT_JSON, REPORT_MD, REPORT_HTML };

enum report_scope { REPORT_SCOPE_NUMERICS, REPORT_SCOPE_ALL, REPORT_SCOPE_METRICS };

struct report_opts {
	const char *db_path;	    /* for messages (NULL: "the database") */
	const char *run_a, *run_b;  /* NULL: the database must hold exactly two runs (ordered by id) */
	int first_diff;		    /* stop early (see above) */
	const char *const *metrics; /* --metric names as given (any alias), n_metrics of them */
	int n_metrics;
	const char *map_path; /* --map FILE, or NULL (implies all) */
	int all;	      /* --all: job metadata (phase "meta") too */
	int no_stepsum;	      /* read every record (checks the fast path) */
	int series;	      /* collect metrics[].points (--format html); reads every record */
	long limit;	      /* differing records listed (default 20) */
};

/* One side of a reported record. Strings are owned by the report. */
struct report_side {
	int present;
	char *name, *text, *dtype, *digest, *digest_alg, *missing, *file;
	int has_bits;
	uint64_t bits;
	int digits; /* significant digits printed (0: exact or not printed) */
	int64_t line, micro, seq;
	int64_t pos;	 /* position in its run: ordinal among the records in scope of its (step, rank, micro) */
	char *call, *io; /* the input/output link (NULL: not linked) */
	int64_t id;	 /* record.id (report_load_elements reads its payload and head by it) */
};

/* A reported record: first_diff, first_only_in, first_unproven, or one of the listed differences. */
struct report_item {
	int64_t step, micro, rank; /* of the execution-order side (A when present) */
	char *canon;
	struct cmp_result cmp; /* verdict (ONLY_A / ONLY_B too), ulp, rel_diff, digits, reason */
	struct report_side a, b;
	struct report_elements *elements; /* element-level detail (report_load_elements), NULL: none (a
	                                   * scalar, a verdict that is no difference, or not loaded) */
};

struct report_counts {
	int64_t v[VERDICT_COUNT]; /* records per verdict; compared = the matched pairs (first four) */
};

/* One step of a scalar metric (opts.series): what its records of that step were judged. Records
 * known by a digest only (tensors) have no points. */
struct report_point {
	int64_t step;
	unsigned verdicts; /* bit (1 << enum verdict) for each verdict seen at this step */
	int has_rel;	   /* rel: the largest |a-b|/|a| of the step's differing pairs whose */
	double rel;	   /* values are known on both sides (a != 0) */
};

struct report_metric {
	char *name;
	struct report_counts c;
	int has_first_diff;
	int64_t first_diff_step;
	struct report_point *points; /* opts.series: by step, the steps read */
	size_t n_points, cap_points;
};

/* The records of one canonical name that one run has and the other lacks, grouped (only-in-a or
 * only-in-b), in order of their first record in execution order. */
struct report_only_in {
	char *canon;
	int side; /* 0: only in run a, 1: only in run b */
	int64_t count, first_step, last_step;
};

/* Provenance: the header fields 'align run' writes into its traces (ATF header, kept in run.header),
 * in name order. A field is compared only when both runs record it: two runs differ in provenance
 * when some field recorded by both has different values. */
#define REPORT_PROV_FIELDS 6
extern const char *const report_prov_fields[REPORT_PROV_FIELDS];

struct report_run {
	int64_t id;
	char *name, *framework, *format;
	int64_t records; /* non-superseded */
	int resumed;
	json_t *prov; /* the provenance fields its header records: {field: value} (owned; {} when none) */
};

struct report {
	struct report_run a, b;
	int first_diff_mode, fast_path;
	int metrics_cover_skipped; /* metrics[] counts include skipped (unread) units */
	struct report_counts totals;
	int64_t skipped_units, skipped_records; /* (rank, step) units counted from their summaries */
	int64_t unread_a, unread_b;		/* --first-diff: records of differing units not compared */
	enum report_scope scope;
	char **meta_left_out; /* numerics scope: the job-metadata names left out, sorted */
	size_t n_meta_left_out;
	struct report_metric *metrics; /* sorted by name */
	size_t n_metrics;
	struct report_item *first_diff, *first_only_in, *first_unproven;
	int has_searched_through; /* --first-diff without --metric stopped: metrics' first */
	int64_t searched_through; /* differences are known through this step only */
	int has_proven;
	int64_t proven_through;
	struct report_item *diffs; /* the first `limit` value differences in execution order */
	size_t n_diffs;
	int64_t n_diff_total; /* differing records found (listed or not), only-in records included */
	long limit;
	int64_t n_value_diffs;		   /* differ or incomparable records found (diffs lists the first) */
	struct report_only_in *only_in;	   /* every only-in group found, in execution order of its first */
	size_t n_only_in;		   /* record (with --first-diff: through the first differing step) */
	struct report_item *root_cause;	   /* the root-cause candidate (rule above), or NULL */
	int64_t root_cause_inputs;	   /* its call's input records (all equal) */
	int64_t root_cause_inputs_summary; /* how many of them are equal only in their summaries (heads,
					    * stats: not proven bitwise); the others are bitwise-equal */
	int has_links;			   /* some record read carries a call link */
	char root_cause_none[96];	   /* root_cause NULL: why ("" while not decided) */
};

/* Compare the two runs; fills *out (report_free it). Returns ALIGN_OK or an error status, its message
 * in e. The differences found do not change the return code: see report_exit_code. Sets the
 * connection's page cache to 64 MiB (PRAGMA cache_size). n_diff_total counts the differences found
 * in the steps read (with --first-diff: through the first differing step). */
int report_compute(sqlite3 *db, const struct report_opts *opts, struct report *out, struct align_err *e);
void report_free(struct report *r);
/* report-evidence.c: the element-level detail of the first difference and the listed differences whose
 * sides are tensors: both payloads (loaded by record id, inflated), else both heads, else a note that
 * digests alone give none (report-elements.h). ALIGN_OK, or an error (a payload that does not inflate to
 * its shape x dtype size) with the message in e; r is left as it was on error (report_free it). */
int report_load_elements(sqlite3 *db, struct report *r, struct align_err *e);
/* ALIGN_DIFF when a difference was found (first_diff or first_only_in), else ALIGN_OK. */
int report_exit_code(const struct report *r);

/* Write the report in a format; ALIGN_OK, or ALIGN_ERR_INTERNAL with the message in e (where names the
 * destination in it: "stdout", a path). */
int report_render(const struct report *r, enum report_format f, FILE *out, const char *where, struct align_err *e);
/* A reported record as the JSON renderer writes it (ITEM, report-render.c); json null for NULL. New
 * reference. Callers that keep a record (bisect) take it from here, never by parsing rendered text. */
json_t *report_item_json(const struct report_item *it);
/* Provenance field i differs: recorded by both runs with different values. */
int report_prov_differs(const struct report *r, int i);

#endif
