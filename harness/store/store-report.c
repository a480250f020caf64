/* store-report: the SQL of 'align report' (contract in store-report.h). Each statement is written once
 * here, with named parameters; the comparison engine (harness/report) sees rows, never SQL. */
#include "store-report.h"

#include "err.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- statement helpers ---- */

int store_sql_rows(sqlite3_stmt *q, const char *what, int (*row)(void *u, sqlite3_stmt *q), void *u, int fin,
		   struct align_err *e)
{
	int step, rc = ALIGN_OK;
	while ((step = sqlite3_step(q)) == SQLITE_ROW)
		if (row && (rc = row(u, q)))
			break;
	if (!rc && step != SQLITE_DONE)
		rc = fail_internal(e, "sqlite: %s: %s", what, sqlite3_errmsg(sqlite3_db_handle(q)));
	if (fin)
		sqlite3_finalize(q);
	else
		sqlite3_reset(q);
	return rc;
}

int store_sql_one(sqlite3_stmt *q, const char *what, int (*row)(void *u, sqlite3_stmt *q), void *u, int *found,
		  struct align_err *e)
{
	int rc = store_sql_rows(q, what, row, u, 1, e);
	*found = rc == 1;
	if (rc == ALIGN_ERR_INTERNAL)
		return fail_internal(e, "out of memory"); /* first message wins: a SQLite one stays */
	return rc == 1 ? ALIGN_OK : rc;
}

char *store_sql_dup(sqlite3_stmt *q, int i, int *oom)
{
	const unsigned char *s = sqlite3_column_text(q, i);
	char *d = s ? strdup((const char *)s) : NULL;
	if (s && !d)
		*oom = 1;
	return d;
}

/* ---- runs ---- */

static int run_row(void *u, sqlite3_stmt *q)
{
	struct store_run_row *r = u;
	int oom = 0;
	r->id = sqlite3_column_int64(q, 0);
	r->name = store_sql_dup(q, 1, &oom), r->framework = store_sql_dup(q, 2, &oom);
	r->format = store_sql_dup(q, 3, &oom), r->header = store_sql_dup(q, 6, &oom);
	r->resumed = sqlite3_column_int(q, 4);
	r->records = sqlite3_column_int64(q, 5);
	if (oom || !r->name || !r->framework || !r->format) {
		store_report_run_free(r);
		return ALIGN_ERR_INTERNAL;
	}
	return 1;
}

int store_report_run(sqlite3 *db, const char *name, int64_t id, struct store_run_row *out, int *found,
		     struct align_err *e)
{
	static const char sql[] = "SELECT id, name, framework, format, resumed, "
				  "(SELECT coalesce(sum(n), 0) FROM stepsum WHERE run_id=run.id), header FROM run "
				  "WHERE CASE WHEN :name IS NULL THEN id=:id ELSE name=:name END";
	sqlite3_stmt *q;
	memset(out, 0, sizeof *out);
	ALIGN_TRY(e, store_prepare(db, "the run lookup", sql, &q, e));
	store_bind_text(q, ":name", name);
	store_bind_int64(q, ":id", id);
	return store_sql_one(q, "the run lookup", run_row, out, found, e);
}

void store_report_run_free(struct store_run_row *r)
{
	free(r->name), free(r->framework), free(r->format), free(r->header);
	memset(r, 0, sizeof *r);
}

void store_report_run_names(sqlite3 *db, char *buf, size_t len)
{
	sqlite3_stmt *q;
	size_t n = 0;
	buf[0] = '\0';
	struct align_err ignored = {0}; /* best effort: a message without the list is still a message */
	if (store_prepare(db, "the run list", "SELECT name FROM run ORDER BY id", &q, &ignored) == ALIGN_OK) {
		while (sqlite3_step(q) == SQLITE_ROW && n + 1 < len)
			n += (size_t)snprintf(buf + n, len - n, "%s'%s'", n ? ", " : "", sqlite3_column_text(q, 0));
		sqlite3_finalize(q);
	}
	if (!n)
		snprintf(buf, len, "none");
}

struct ids {
	int64_t *ids;
	int n;
};

static int id_row(void *u, sqlite3_stmt *q)
{
	struct ids *s = u;
	s->ids[s->n++] = sqlite3_column_int64(q, 0);
	return ALIGN_OK;
}

int store_report_first_runs(sqlite3 *db, int64_t ids[3], int *n, struct align_err *e)
{
	sqlite3_stmt *q;
	struct ids s = {ids, 0};
	ALIGN_TRY(e, store_prepare(db, "the first runs", "SELECT id FROM run ORDER BY id LIMIT 3", &q, e));
	int rc = store_sql_rows(q, "the first runs", id_row, &s, 1, e);
	*n = s.n;
	return rc;
}

/* The caller's callback and its argument, for the row adapters below (one member of fn is set). */
struct row_cb {
	union {
		store_text_fn text;
		store_source_fn source;
		store_stepsum_fn stepsum;
		store_count_fn count;
		store_record_fn record;
	} fn;
	void *u;
	int flag; /* stepsum: the side (0 run A, 1 run B); counts: the table path gives n_exact */
};

/* ---- names ---- */

int store_report_canons(sqlite3 *db, int64_t run, store_text_fn fn, void *u, struct align_err *e)
{
	static const char sql[] =
		"SELECT canon FROM record WHERE run_id=:run AND canon > :after ORDER BY canon LIMIT 1";
	sqlite3_stmt *q;
	ALIGN_TRY(e, store_prepare(db, "the canon seek", sql, &q, e));
	char *last = strdup("");
	int rc = last ? ALIGN_OK : fail_internal(e, "out of memory");
	store_bind_int64(q, ":run", run);
	while (rc == ALIGN_OK) {
		store_bind_text(q, ":after", last);
		int step = sqlite3_step(q);
		if (step != SQLITE_ROW) {
			if (step != SQLITE_DONE)
				rc = fail_internal(e, "sqlite: the canon seek: %s", sqlite3_errmsg(db));
			break;
		}
		int oom = 0;
		free(last);
		last = store_sql_dup(q, 0, &oom);
		sqlite3_reset(q);
		rc = !last ? fail_internal(e, "out of memory") : fn(u, last);
	}
	free(last);
	sqlite3_finalize(q);
	return rc;
}

static int text_row(void *u, sqlite3_stmt *q)
{
	struct row_cb *t = u;
	return t->fn.text(t->u, (const char *)sqlite3_column_text(q, 0));
}

/* Run sql over the two runs (:a, :b), each row to row(cb, q). */
static int pair_rows(sqlite3 *db, const char *what, const char *sql, int64_t run_a, int64_t run_b,
		     int (*row)(void *u, sqlite3_stmt *q), void *cb, struct align_err *e)
{
	sqlite3_stmt *q;
	ALIGN_TRY(e, store_prepare(db, what, sql, &q, e));
	store_bind_int64(q, ":a", run_a);
	store_bind_int64(q, ":b", run_b);
	return store_sql_rows(q, what, row, cb, 1, e);
}

int store_report_meta_canons(sqlite3 *db, int64_t run_a, int64_t run_b, store_text_fn fn, void *u, struct align_err *e)
{
	static const char sql[] = "SELECT DISTINCT canon FROM meta_canon WHERE run_id IN (:a, :b) ORDER BY canon";
	struct row_cb t = {.fn.text = fn, .u = u};
	return pair_rows(db, "the job-metadata names", sql, run_a, run_b, text_row, &t, e);
}

static int source_row(void *u, sqlite3_stmt *q)
{
	struct row_cb *s = u;
	const unsigned char *path = sqlite3_column_text(q, 1);
	return s->fn.source(s->u, sqlite3_column_int64(q, 0), path ? (const char *)path : "");
}

int store_report_sources(sqlite3 *db, int64_t run_a, int64_t run_b, store_source_fn fn, void *u, struct align_err *e)
{
	static const char sql[] = "SELECT id, path FROM source WHERE run_id IN (:a, :b) ORDER BY id";
	struct row_cb s = {.fn.source = fn, .u = u};
	return pair_rows(db, "the sources", sql, run_a, run_b, source_row, &s, e);
}

/* ---- step summaries and counts ---- */

static int stepsum_row(void *u, sqlite3_stmt *q)
{
	struct row_cb *s = u;
	struct store_stepsum_row row = {sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1),
					sqlite3_column_int64(q, 2), sqlite3_column_int64(q, 3),
					sqlite3_column_int64(q, 4)};
	return s->fn.stepsum(s->u, s->flag, &row);
}

int store_report_stepsums(sqlite3 *db, int64_t run_a, int64_t run_b, store_stepsum_fn fn, void *u, struct align_err *e)
{
	static const char sql[] = "SELECT rank, step, n, n_exact, h FROM stepsum WHERE run_id=:run ORDER BY step, rank";
	sqlite3_stmt *q;
	struct row_cb s = {.fn.stepsum = fn, .u = u};
	ALIGN_TRY(e, store_prepare(db, "the step summaries", sql, &q, e));
	int rc = ALIGN_OK;
	for (s.flag = 0; s.flag < 2 && rc == ALIGN_OK; s.flag++) {
		store_bind_int64(q, ":run", s.flag ? run_b : run_a);
		rc = store_sql_rows(q, "the step summaries", stepsum_row, &s, 0, e);
	}
	sqlite3_finalize(q);
	return rc;
}

static int count_row(void *u, sqlite3_stmt *q)
{
	struct row_cb *s = u;
	struct store_canon_count row = {(const char *)sqlite3_column_text(q, 0),
					sqlite3_column_int64(q, 1),
					sqlite3_column_int64(q, 2),
					sqlite3_column_int64(q, 3),
					sqlite3_column_int64(q, 4),
					s->flag};
	return s->fn.count(s->u, &row);
}

int store_report_canon_counts(sqlite3 *db, int64_t run, int resumed, const char *canons_json, store_count_fn fn,
			      void *u, struct align_err *e)
{
	/* [resumed][filtered]: a run that was not resumed is counted from the index (record_key) alone; a
	 * resumed one needs the table (superseded rows), which also gives the exact count */
	static const char *const sql[2][2] = {
		{"SELECT canon, rank, step, count(*), NULL FROM record WHERE run_id=:run GROUP BY canon, rank, step",
		 "SELECT canon, rank, step, count(*), NULL FROM record WHERE run_id=:run "
		 "AND canon IN (SELECT value FROM json_each(:canons)) GROUP BY canon, rank, step"},
		{"SELECT canon, rank, step, count(*), sum(bits IS NOT NULL OR digest IS NOT NULL) FROM record "
		 "WHERE run_id=:run AND superseded=0 GROUP BY canon, rank, step",
		 "SELECT canon, rank, step, count(*), sum(bits IS NOT NULL OR digest IS NOT NULL) FROM record "
		 "WHERE run_id=:run AND superseded=0 AND canon IN (SELECT value FROM json_each(:canons)) "
		 "GROUP BY canon, rank, step"},
	};
	sqlite3_stmt *q;
	struct row_cb s = {.fn.count = fn, .u = u, .flag = resumed != 0};
	ALIGN_TRY(e, store_prepare(db, "the per-name counts", sql[resumed != 0][canons_json != NULL], &q, e));
	store_bind_int64(q, ":run", run);
	if (canons_json)
		store_bind_text(q, ":canons", canons_json);
	return store_sql_rows(q, "the per-name counts", count_row, &s, 1, e);
}

/* ---- reading a step ---- */

struct store_step_reader {
	sqlite3_stmt *q;
};

int store_report_reader_open(sqlite3 *db, struct store_step_reader **out, struct align_err *e)
{
	static const char sql[] =
		"SELECT canon, name, rank, micro, seq, occ, line, source_id, dtype, bits, value, text, digits, lo, hi, "
		"digest, digest_alg, missing, id, stats, head, call, io FROM record WHERE run_id=:run AND step=:step "
		"AND superseded=0 "
		"AND rank IN (SELECT value FROM json_each(:ranks)) AND canon IN (SELECT value FROM json_each(:canons))";
	if (!(*out = calloc(1, sizeof **out)))
		return fail_internal(e, "out of memory");
	int rc = store_prepare(db, "the step reader", sql, &(*out)->q, e);
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

static const char *col_text(sqlite3_stmt *q, int i)
{
	return (const char *)sqlite3_column_text(q, i);
}

static int record_row(void *u, sqlite3_stmt *q)
{
	struct row_cb *s = u;
	struct store_record_row w = {
		.canon = col_text(q, 0),
		.name = col_text(q, 1),
		.dtype = col_text(q, 8),
		.text = col_text(q, 11),
		.digest = col_text(q, 15),
		.digest_alg = col_text(q, 16),
		.missing = col_text(q, 17),
		.stats = col_text(q, 19),
		.head = col_text(q, 20),
		.id = sqlite3_column_int64(q, 18),
		.rank = sqlite3_column_int64(q, 2),
		.micro = sqlite3_column_int64(q, 3),
		.seq = sqlite3_column_int64(q, 4),
		.occ = sqlite3_column_int64(q, 5),
		.line = sqlite3_column_int64(q, 6),
		.source_id = sqlite3_column_int64(q, 7),
		.has_bits = sqlite3_column_type(q, 9) != SQLITE_NULL,
		.bits = (uint64_t)sqlite3_column_int64(q, 9),
		.has_value = sqlite3_column_type(q, 10) != SQLITE_NULL,
		.value = sqlite3_column_double(q, 10),
		.digits = sqlite3_column_int(q, 12),
		.has_interval = sqlite3_column_type(q, 13) != SQLITE_NULL && sqlite3_column_type(q, 14) != SQLITE_NULL,
		.lo = sqlite3_column_double(q, 13),
		.hi = sqlite3_column_double(q, 14),
		.call = col_text(q, 21),
		.io = col_text(q, 22),
	};
	return s->fn.record(s->u, &w);
}

int store_report_read_step(struct store_step_reader *r, int64_t run, int64_t step, const char *ranks_json,
			   const char *canons_json, store_record_fn fn, void *u, struct align_err *e)
{
	struct row_cb s = {.fn.record = fn, .u = u};
	store_bind_int64(r->q, ":run", run);
	store_bind_int64(r->q, ":step", step);
	store_bind_text(r->q, ":ranks", ranks_json);
	store_bind_text(r->q, ":canons", canons_json);
	return store_sql_rows(r->q, "the step reader", record_row, &s, 0, e);
}

void store_report_reader_close(struct store_step_reader *r)
{
	if (!r)
		return;
	sqlite3_finalize(r->q);
	free(r);
}

/* ---- one record's tensor ---- */

static int tensor_row(void *u, sqlite3_stmt *q)
{
	struct store_tensor_row *t = u;
	int oom = 0;
	t->shape = store_sql_dup(q, 0, &oom), t->dtype = store_sql_dup(q, 2, &oom), t->head = store_sql_dup(q, 3, &oom);
	const void *blob = sqlite3_column_blob(q, 1);
	int n = sqlite3_column_bytes(q, 1);
	if (blob && n > 0) {
		if (!(t->payload = malloc((size_t)n)))
			oom = 1;
		else
			memcpy(t->payload, blob, (size_t)n), t->payload_len = (size_t)n;
	}
	if (oom) {
		store_report_tensor_free(t);
		return ALIGN_ERR_INTERNAL;
	}
	return 1;
}

int store_report_tensor(sqlite3 *db, int64_t id, struct store_tensor_row *out, int *found, struct align_err *e)
{
	sqlite3_stmt *q;
	memset(out, 0, sizeof *out);
	ALIGN_TRY(e, store_prepare(db, "the payload lookup",
				   "SELECT shape, payload, dtype, head FROM record WHERE id=:id", &q, e));
	store_bind_int64(q, ":id", id);
	return store_sql_one(q, "the payload lookup", tensor_row, out, found, e);
}

void store_report_tensor_free(struct store_tensor_row *t)
{
	free(t->shape), free(t->payload), free(t->dtype), free(t->head);
	memset(t, 0, sizeof *t);
}

int store_report_cache_size(sqlite3 *db, struct align_err *e)
{
	return store_exec_err(db, "PRAGMA cache_size=-65536", e);
}
