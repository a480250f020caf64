/* store-report: every SQL statement that 'align report' runs, in one place (schema/0001 and later: run, source,
 * record, stepsum, meta_canon). Statements take named parameters (:run, :step, ...) bound by name; a
 * statement that cannot be prepared fails with a message naming it (store_prepare, store.h).
 *
 * Errors: each function returns ALIGN_OK or a status and leaves the one message in e (err.h). A
 * callback that returns non-zero stops the iteration; its value is returned unchanged (its message, if
 * any, is the callback's to set).
 *
 * The statement helpers at the end (store_sql_*) are shared with store-bisect.c. */
#ifndef ALIGN_STORE_REPORT_H
#define ALIGN_STORE_REPORT_H

#include "status.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* One run as the report shows it. Strings are malloc'd (store_report_run_free). */
struct store_run_row {
	int64_t id;
	char *name, *framework, *format;
	char *header;	 /* run.header: JSON object text, NULL when the run has none */
	int resumed;	 /* a restart repeated steps */
	int64_t records; /* non-superseded records (sum of the stepsum counts) */
};

/* One stepsum row: the summary of a (run, rank, step). */
struct store_stepsum_row {
	int64_t rank, step, n, n_exact, h;
};

/* Records of one (canon, rank, step) of a run. n_exact is known only on the table path (has_exact). */
struct store_canon_count {
	const char *canon;
	int64_t rank, step, n, n_exact;
	int has_exact;
};

/* One record read by store_report_read_step. Strings (NULL when the column is) are valid during the
 * callback only. */
struct store_record_row {
	const char *canon, *name, *dtype, *text, *digest, *digest_alg, *missing;
	const char *stats, *head; /* JSON texts of the shown statistics and first elements */
	int64_t id, rank, micro, seq, occ, line, source_id;
	int has_bits, has_value, has_interval; /* has_interval: lo and hi both set */
	uint64_t bits;
	double value, lo, hi;
	int digits;
	const char *call, *io; /* the input/output link (record.call, record.io); NULL: not linked */
};

typedef int (*store_text_fn)(void *u, const char *text);
typedef int (*store_source_fn)(void *u, int64_t id, const char *path);
typedef int (*store_stepsum_fn)(void *u, int side, const struct store_stepsum_row *row);
typedef int (*store_count_fn)(void *u, const struct store_canon_count *row);
typedef int (*store_record_fn)(void *u, const struct store_record_row *row);

/* The run named name (name NULL: the run of id id). *found = 0 when there is none (not an error). */
int store_report_run(sqlite3 *db, const char *name, int64_t id, struct store_run_row *out, int *found,
		     struct align_err *e);
void store_report_run_free(struct store_run_row *r);
/* "'a', 'b'" of every run in id order, "none" when there is none (for messages; best effort). */
void store_report_run_names(sqlite3 *db, char *buf, size_t len);
/* The ids of the first three runs in id order; *n of them. */
int store_report_first_runs(sqlite3 *db, int64_t ids[3], int *n, struct align_err *e);
/* Every distinct canon of a run in order, by one index seek per name. */
int store_report_canons(sqlite3 *db, int64_t run, store_text_fn fn, void *u, struct align_err *e);
/* The job-metadata canons (meta_canon) of either run, sorted, distinct. */
int store_report_meta_canons(sqlite3 *db, int64_t run_a, int64_t run_b, store_text_fn fn, void *u, struct align_err *e);
/* The source files of both runs, by id. */
int store_report_sources(sqlite3 *db, int64_t run_a, int64_t run_b, store_source_fn fn, void *u, struct align_err *e);
/* The stepsum rows of run_a (side 0), then of run_b (side 1), each sorted by (step, rank). */
int store_report_stepsums(sqlite3 *db, int64_t run_a, int64_t run_b, store_stepsum_fn fn, void *u, struct align_err *e);
/* Per (canon, rank, step) record counts of a run. resumed: read the table (superseded rows left out;
 * gives n_exact), else index-only. canons_json: a JSON array of the canons to count, NULL for all. */
int store_report_canon_counts(sqlite3 *db, int64_t run, int resumed, const char *canons_json, store_count_fn fn,
			      void *u, struct align_err *e);
/* The statement that reads one step; prepared once per report, used step after step. */
struct store_step_reader;
int store_report_reader_open(sqlite3 *db, struct store_step_reader **out, struct align_err *e);
/* The non-superseded records of run at step whose rank is in ranks_json and canon in canons_json
 * (JSON arrays). */
int store_report_read_step(struct store_step_reader *q, int64_t run, int64_t step, const char *ranks_json,
			   const char *canons_json, store_record_fn fn, void *u, struct align_err *e);
void store_report_reader_close(struct store_step_reader *q);
/* The tensor fields of one record, read when the report details a reported record (malloc'd; NULL when
 * the column is): dtype, shape and head (JSON array texts) and payload (zlib-compressed raw bytes, as
 * ingest stores them). */
struct store_tensor_row {
	char *dtype, *shape, *head;
	unsigned char *payload;
	size_t payload_len;
};
/* Record id's tensor fields; *found = 0 when there is no such record. */
int store_report_tensor(sqlite3 *db, int64_t id, struct store_tensor_row *out, int *found, struct align_err *e);
void store_report_tensor_free(struct store_tensor_row *t);
/* A page cache that holds a step's pages (64 MiB): reading a step revisits them once per name. */
int store_report_cache_size(sqlite3 *db, struct align_err *e);

/* ---- statement helpers (also used by store-bisect.c; store.h prepares and binds) ---- */

/* Step q to the end, calling row(u, q) per row; finalize when fin. what names it in the message. */
int store_sql_rows(sqlite3_stmt *q, const char *what, int (*row)(void *u, sqlite3_stmt *q), void *u, int fin,
		   struct align_err *e);
/* Step q (finalized here) for at most one row, which row(u, q) fills, returning 1, or ALIGN_ERR_INTERNAL
 * when out of memory (having freed what it filled). *found: a row came. */
int store_sql_one(sqlite3_stmt *q, const char *what, int (*row)(void *u, sqlite3_stmt *q), void *u, int *found,
		  struct align_err *e);
/* Column i as a malloc'd string (NULL when the column is NULL); *oom set when strdup failed. */
char *store_sql_dup(sqlite3_stmt *q, int i, int *oom);

#endif
