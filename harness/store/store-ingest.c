/* store-ingest: the SQL of the ingest path (contracts in store-ingest.h). */
#include "store-ingest.h"

#include "err.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLUMN_NAME(c) ", " #c
#define COLUMN_PARAM(c) ", :" #c
static const char record_sql[] = "INSERT INTO record(run_id" STORE_RECORD_COLUMNS(
	COLUMN_NAME) ") VALUES (:run_id" STORE_RECORD_COLUMNS(COLUMN_PARAM) ")";
static const char *const record_params[STORE_REC_N] = {":run_id",
#define X(c) ":" #c,
						       STORE_RECORD_COLUMNS(X)
#undef X
};

/* Step st to its end: ALIGN_OK at SQLITE_DONE, else the SQLite message. Resets it for the next use. */
static int step_done(sqlite3 *db, sqlite3_stmt *st, struct align_err *e)
{
	int rc = sqlite3_step(st);
	int ret = rc == SQLITE_DONE ? ALIGN_OK : store_fail_sqlite(db, NULL, NULL, e);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

/* Step st for one integer: *v = column 0 of the first row, or dflt when there is none. Resets it. */
static int step_int64(sqlite3 *db, sqlite3_stmt *st, int64_t dflt, int64_t *v, struct align_err *e)
{
	int rc = sqlite3_step(st);
	*v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : dflt;
	int ret = rc == SQLITE_ROW || rc == SQLITE_DONE ? ALIGN_OK : store_fail_sqlite(db, NULL, NULL, e);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

/* Step st for one text: *out = a malloc'd copy of column 0 of the first row, or NULL (no row, or
 * NULL there). Resets it. */
static int step_text(sqlite3 *db, sqlite3_stmt *st, char **out, struct align_err *e)
{
	int rc = sqlite3_step(st), ret = ALIGN_OK;
	*out = NULL;
	if (rc == SQLITE_ROW && sqlite3_column_text(st, 0) &&
	    !(*out = strdup((const char *)sqlite3_column_text(st, 0))))
		ret = fail_internal(e, "out of memory");
	else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		ret = store_fail_sqlite(db, NULL, NULL, e);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

int store_ingest_open(struct store_ingest *s, sqlite3 *db, struct align_err *e)
{
	memset(s, 0, sizeof *s);
	s->db = db, s->e = e;
	int rc;
	if ((rc = store_prepare(db, "insert record", record_sql, &s->record, e)) ||
	    (rc = store_prepare(db, "count key",
				"SELECT occ, missing, dtype, digest, text, bits, NULL, NULL, stats, head FROM record "
				"WHERE run_id=:run_id AND canon=:canon AND rank=:rank AND step=:step AND micro=:micro "
				"AND superseded=0 ORDER BY occ",
				&s->count_key, e)) ||
	    (rc = store_prepare(
		     db, "key record",
		     "SELECT r.occ, r.missing, r.dtype, r.digest, r.text, r.bits, s.path, r.line, r.stats, r.head "
		     "FROM record r JOIN source s ON s.id=r.source_id WHERE r.run_id=:run_id "
		     "AND r.canon=:canon AND r.rank=:rank AND r.step=:step AND r.micro=:micro AND r.occ=:occ "
		     "AND r.superseded=0 LIMIT 1",
		     &s->key_record, e)) ||
	    (rc = store_prepare(db, "next seq",
				"SELECT coalesce(max(seq)+1, 0) FROM record WHERE run_id=:run_id AND rank=:rank",
				&s->next_seq, e)) ||
	    (rc = store_prepare(db, "add stepsum",
				"INSERT INTO stepsum(run_id, rank, step, n, n_exact, h) "
				"VALUES (:run_id, :rank, :step, :n, :n_exact, :h) ON CONFLICT(run_id, rank, step) "
				"DO UPDATE SET n=n+excluded.n, n_exact=n_exact+excluded.n_exact, "
				"h=(h+excluded.h) & 4611686018427387903",
				&s->stepsum, e)) ||
	    (rc = store_prepare(db, "note meta canon",
				"INSERT OR IGNORE INTO meta_canon(run_id, canon) VALUES (:run_id, :canon)", &s->meta,
				e))) {
		store_ingest_close(s);
		return rc;
	}
	if (sqlite3_bind_parameter_index(s->stepsum, ":h") != 6) { /* store_add_stepsum binds by position */
		store_ingest_close(s);
		return fail_internal(e, "add stepsum: unexpected parameter order");
	}
	for (int c = 0; c < STORE_REC_N; c++)
		s->rec_param[c] = sqlite3_bind_parameter_index(s->record, record_params[c]);
	return ALIGN_OK;
}

void store_ingest_close(struct store_ingest *s)
{
	sqlite3_finalize(s->record);
	sqlite3_finalize(s->count_key);
	sqlite3_finalize(s->key_record);
	sqlite3_finalize(s->next_seq);
	sqlite3_finalize(s->stepsum);
	sqlite3_finalize(s->meta);
	s->record = s->count_key = s->key_record = s->next_seq = s->stepsum = s->meta = NULL;
}

void store_rec_int64(struct store_ingest *s, enum store_rec_col c, int64_t v)
{
	sqlite3_bind_int64(s->record, s->rec_param[c], v);
}

void store_rec_double(struct store_ingest *s, enum store_rec_col c, double v)
{
	sqlite3_bind_double(s->record, s->rec_param[c], v);
}

void store_rec_text(struct store_ingest *s, enum store_rec_col c, const char *text, size_t len)
{
	if (text)
		sqlite3_bind_text(s->record, s->rec_param[c], text, len ? (int)len : -1, SQLITE_STATIC);
}

void store_rec_blob_owned(struct store_ingest *s, enum store_rec_col c, void *data, size_t len)
{
	sqlite3_bind_blob(s->record, s->rec_param[c], data, (int)len, free);
}

int store_rec_insert(struct store_ingest *s, int *duplicate)
{
	int rc = sqlite3_step(s->record), ret = ALIGN_OK;
	*duplicate = 0;
	if (rc != SQLITE_DONE) {
		if ((rc & 0xff) == SQLITE_CONSTRAINT)
			*duplicate = 1;
		else
			ret = store_fail_sqlite(s->db, NULL, NULL, s->e);
	}
	sqlite3_reset(s->record);
	sqlite3_clear_bindings(s->record); /* unset columns of the next row are NULL */
	return ret;
}

/* Column i as text (NULL when SQL NULL). */
static const char *column_text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* The value of the row st is on (columns: occ, missing, dtype, digest, text, bits, path, line, stats,
 * head). */
static void row_value(sqlite3_stmt *st, struct store_value *v)
{
	v->occ = sqlite3_column_int64(st, 0);
	v->missing = column_text(st, 1);
	v->dtype = column_text(st, 2);
	v->digest = column_text(st, 3);
	v->text = column_text(st, 4);
	v->text_len = (size_t)sqlite3_column_bytes(st, 4);
	v->has_bits = sqlite3_column_type(st, 5) != SQLITE_NULL;
	v->bits = sqlite3_column_int64(st, 5);
	v->path = column_text(st, 6);
	v->line = sqlite3_column_int64(st, 7);
	v->stats = column_text(st, 8);
	v->head = column_text(st, 9);
}

/* Bind the key of a record (canon, rank, step, micro) in the run. */
static void bind_key(sqlite3_stmt *st, int64_t run_id, const char *canon, int64_t rank, int64_t step, int64_t micro)
{
	store_bind_int64(st, ":run_id", run_id);
	store_bind_text(st, ":canon", canon);
	store_bind_int64(st, ":rank", rank);
	store_bind_int64(st, ":step", step);
	store_bind_int64(st, ":micro", micro);
}

/* Step st through its rows: *n = how many; fn gets the row of occurrence `want` (when it has one). */
static int value_rows(struct store_ingest *s, sqlite3_stmt *st, int64_t want, int64_t *n, store_value_fn fn, void *u)
{
	int rc;
	*n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_value v;
		row_value(st, &v);
		if (v.occ == want)
			fn(u, &v);
		++*n;
	}
	int ret = rc == SQLITE_DONE ? ALIGN_OK : store_fail_sqlite(s->db, NULL, NULL, s->e);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

int store_count_key(struct store_ingest *s, int64_t run_id, const char *canon, int64_t rank, int64_t step,
		    int64_t micro, int64_t *n, store_value_fn fn, void *u)
{
	bind_key(s->count_key, run_id, canon, rank, step, micro);
	return value_rows(s, s->count_key, 0, n, fn, u);
}

int store_key_record(struct store_ingest *s, int64_t run_id, const char *canon, int64_t rank, int64_t step,
		     int64_t micro, int64_t occ, store_value_fn fn, void *u, int *found)
{
	int64_t n;
	bind_key(s->key_record, run_id, canon, rank, step, micro);
	store_bind_int64(s->key_record, ":occ", occ);
	int rc = value_rows(s, s->key_record, occ, &n, fn, u);
	*found = n > 0;
	return rc;
}

int store_next_seq(struct store_ingest *s, int64_t run_id, int64_t rank, int64_t *seq)
{
	store_bind_int64(s->next_seq, ":run_id", run_id);
	store_bind_int64(s->next_seq, ":rank", rank);
	return step_int64(s->db, s->next_seq, 0, seq, s->e);
}

int store_describe_seq(sqlite3 *db, int64_t run_id, int64_t rank, int64_t seq, char **where, struct align_err *e)
{
	sqlite3_stmt *st;
	ALIGN_TRY(e,
		  store_prepare(
			  db, "describe seq",
			  "SELECT '''' || r.name || ''' at ' || s.path || ':' || r.line FROM record r "
			  "JOIN source s ON s.id = r.source_id WHERE r.run_id=:run_id AND r.rank=:rank AND r.seq=:seq",
			  &st, e));
	store_bind_int64(st, ":run_id", run_id);
	store_bind_int64(st, ":rank", rank);
	store_bind_int64(st, ":seq", seq);
	int rc = step_text(db, st, where, e);
	sqlite3_finalize(st);
	return rc;
}

int store_add_stepsum(struct store_ingest *s, int64_t run_id, int64_t rank, int64_t step, int64_t n, int64_t n_exact,
		      int64_t h)
{
	/* one row per step of a line format: bind by position (named parameters are numbered in order of
	 * first appearance) and step without clearing (every parameter is bound each time) */
	sqlite3_bind_int64(s->stepsum, 1, run_id);
	sqlite3_bind_int64(s->stepsum, 2, rank);
	sqlite3_bind_int64(s->stepsum, 3, step);
	sqlite3_bind_int64(s->stepsum, 4, n);
	sqlite3_bind_int64(s->stepsum, 5, n_exact);
	sqlite3_bind_int64(s->stepsum, 6, h);
	int ret = sqlite3_step(s->stepsum) == SQLITE_DONE ? ALIGN_OK
							  : fail_internal(s->e, "sqlite: %s", sqlite3_errmsg(s->db));
	sqlite3_reset(s->stepsum);
	return ret;
}

/* The upsert of STORE_STEPSUM_BATCH summaries in one statement (parameters ?1.. by row), prepared. */
static int prepare_stepsum_batch(struct store_ingest *s, sqlite3_stmt **st)
{
	static const char head[] = "INSERT INTO stepsum(run_id, rank, step, n, n_exact, h) VALUES ",
			  row[] = "(?,?,?,?,?,?),",
			  tail[] = " ON CONFLICT(run_id, rank, step) DO UPDATE SET n=n+excluded.n, "
				   "n_exact=n_exact+excluded.n_exact, h=(h+excluded.h) & 4611686018427387903";
	char sql[sizeof head + STORE_STEPSUM_BATCH * (sizeof row - 1) + sizeof tail];
	size_t o = 0;
	memcpy(sql, head, sizeof head - 1), o += sizeof head - 1;
	for (int i = 0; i < STORE_STEPSUM_BATCH; i++)
		memcpy(sql + o, row, sizeof row - 1), o += sizeof row - 1;
	o--; /* the last row's ',' */
	memcpy(sql + o, tail, sizeof tail);
	return store_prepare(s->db, "add stepsums", sql, st, s->e);
}

int store_add_stepsums(struct store_ingest *s, int64_t run_id, const struct store_stepsum *rows, size_t n)
{
	size_t i = 0;
	if (n >= STORE_STEPSUM_BATCH) {
		sqlite3_stmt *st;
		ALIGN_TRY(s->e, prepare_stepsum_batch(s, &st));
		int ret = ALIGN_OK;
		for (; i + STORE_STEPSUM_BATCH <= n && !ret; i += STORE_STEPSUM_BATCH) {
			for (int k = 0; k < STORE_STEPSUM_BATCH; k++) {
				const struct store_stepsum *r = &rows[i + (size_t)k];
				sqlite3_bind_int64(st, 6 * k + 1, run_id);
				sqlite3_bind_int64(st, 6 * k + 2, r->rank);
				sqlite3_bind_int64(st, 6 * k + 3, r->step);
				sqlite3_bind_int64(st, 6 * k + 4, r->n);
				sqlite3_bind_int64(st, 6 * k + 5, r->n_exact);
				sqlite3_bind_int64(st, 6 * k + 6, r->h);
			}
			if (sqlite3_step(st) != SQLITE_DONE)
				ret = fail_internal(s->e, "sqlite: %s", sqlite3_errmsg(s->db));
			sqlite3_reset(st);
		}
		sqlite3_finalize(st);
		ALIGN_TRY(s->e, ret);
	}
	for (; i < n; i++)
		ALIGN_TRY(s->e, store_add_stepsum(s, run_id, rows[i].rank, rows[i].step, rows[i].n, rows[i].n_exact,
						  rows[i].h));
	return ALIGN_OK;
}

int store_mask_stepsum(sqlite3 *db, struct align_err *e)
{
	return store_exec_err(db, "UPDATE stepsum SET h = h & 4611686018427387903 WHERE h > 4611686018427387903", e);
}

int store_note_meta_canon(struct store_ingest *s, int64_t run_id, const char *canon)
{
	store_bind_int64(s->meta, ":run_id", run_id);
	store_bind_text(s->meta, ":canon", canon);
	return step_done(s->db, s->meta, s->e);
}

/* Finalize a statement used once (prepared with store_prepare) and pass rc on. */
static int done_once(sqlite3_stmt *st, int rc)
{
	sqlite3_finalize(st);
	return rc;
}

/* Step an INSERT used once and finalize it: *id = the new row's id, or on failure
 * "cannot <what> '<subject>': <why>". */
static int insert_once(sqlite3 *db, sqlite3_stmt *st, const char *what, const char *subject, int64_t *id,
		       struct align_err *e)
{
	int ret = ALIGN_OK;
	if (sqlite3_step(st) == SQLITE_DONE)
		*id = sqlite3_last_insert_rowid(db);
	else {
		char doing[320];
		snprintf(doing, sizeof doing, "%s '%s'", what, subject);
		ret = store_fail_sqlite(db, NULL, doing, e);
	}
	return done_once(st, ret);
}

int store_find_run(sqlite3 *db, const char *name, int64_t *id, struct align_err *e)
{
	sqlite3_stmt *st;
	*id = 0;
	ALIGN_TRY(e, store_prepare(db, "find run by name", "SELECT id FROM run WHERE name=:name", &st, e));
	store_bind_text(st, ":name", name);
	return done_once(st, step_int64(db, st, 0, id, e));
}

int store_find_sha_in_run(sqlite3 *db, int64_t run_id, const char *sha, char **path, struct align_err *e)
{
	sqlite3_stmt *st;
	*path = NULL;
	ALIGN_TRY(e, store_prepare(db, "find content in run",
				   "SELECT path FROM source WHERE run_id=:run_id AND sha256=:sha256", &st, e));
	store_bind_int64(st, ":run_id", run_id);
	store_bind_text(st, ":sha256", sha);
	return done_once(st, step_text(db, st, path, e));
}

int store_insert_run(sqlite3 *db, const char *name, const char *framework, const char *format, const char *created,
		     int64_t *id, struct align_err *e)
{
	sqlite3_stmt *st;
	ALIGN_TRY(e, store_prepare(db, "insert run",
				   "INSERT INTO run(name, framework, format, created) "
				   "VALUES (:name, :framework, :format, :created)",
				   &st, e));
	store_bind_text(st, ":name", name);
	store_bind_text(st, ":framework", framework);
	store_bind_text(st, ":format", format);
	store_bind_text(st, ":created", created);
	return insert_once(db, st, "create run", name, id, e);
}

int store_insert_source(sqlite3 *db, int64_t run_id, const char *path, const char *format, const char *created,
			int64_t *id, struct align_err *e)
{
	sqlite3_stmt *st;
	ALIGN_TRY(e, store_prepare(db, "insert source",
				   "INSERT INTO source(run_id, path, sha256, format, bytes, records, ingested) "
				   "VALUES (:run_id, :path, 'pending:'||:run_id||':'||:path, :format, 0, 0, :created)",
				   &st, e));
	store_bind_int64(st, ":run_id", run_id);
	store_bind_text(st, ":path", path);
	store_bind_text(st, ":format", format);
	store_bind_text(st, ":created", created);
	return insert_once(db, st, "record source", path, id, e);
}

int store_finish_source(sqlite3 *db, int64_t source_id, const char *sha, int64_t bytes, int64_t records,
			const char *warnings, struct align_err *e)
{
	sqlite3_stmt *st;
	ALIGN_TRY(e, store_prepare(db, "finish source",
				   "UPDATE source SET sha256=:sha256, bytes=:bytes, records=:records, "
				   "warnings=:warnings WHERE id=:id",
				   &st, e));
	store_bind_text(st, ":sha256", sha);
	store_bind_int64(st, ":bytes", bytes);
	store_bind_int64(st, ":records", records);
	store_bind_text(st, ":warnings", warnings);
	store_bind_int64(st, ":id", source_id);
	return done_once(st, step_done(db, st, e));
}

int store_supersede(sqlite3 *db, int64_t run_id, int64_t rank, int64_t from_step, struct align_err *e)
{
	static const struct {
		const char *what, *sql;
	} steps[] = {
		{"drop superseded stepsums", "DELETE FROM stepsum WHERE run_id=:run_id AND rank=:rank AND step>=:step"},
		{"supersede records", "UPDATE record SET superseded=1 WHERE run_id=:run_id AND rank=:rank "
				      "AND step>=:step AND superseded=0"},
		{"mark run resumed", "UPDATE run SET resumed=1 WHERE id=:run_id"},
	};
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		sqlite3_stmt *st;
		ALIGN_TRY(e, store_prepare(db, steps[i].what, steps[i].sql, &st, e));
		store_bind_int64(st, ":run_id", run_id);
		if (sqlite3_bind_parameter_count(st) > 1) {
			store_bind_int64(st, ":rank", rank);
			store_bind_int64(st, ":step", from_step);
		}
		ALIGN_TRY(e, done_once(st, step_done(db, st, e)));
	}
	return ALIGN_OK;
}

int store_get_run_header(sqlite3 *db, int64_t run_id, char **json, struct align_err *e)
{
	sqlite3_stmt *st;
	*json = NULL;
	ALIGN_TRY(e, store_prepare(db, "get run header", "SELECT header FROM run WHERE id=:id", &st, e));
	store_bind_int64(st, ":id", run_id);
	return done_once(st, step_text(db, st, json, e));
}

int store_set_run_header(sqlite3 *db, int64_t run_id, const char *json, struct align_err *e)
{
	sqlite3_stmt *st;
	ALIGN_TRY(e, store_prepare(db, "set run header", "UPDATE run SET header=:header WHERE id=:id", &st, e));
	store_bind_text(st, ":header", json);
	store_bind_int64(st, ":id", run_id);
	return done_once(st, step_done(db, st, e));
}
