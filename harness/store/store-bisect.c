/* store-bisect: the SQL of 'align bisect' (contract in store-bisect.h). */
#include "store-bisect.h"

#include "err.h"
#include "store-report.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

/* Prepare sql and bind its one text parameter (text must outlive the statement's steps). */
static int prepare_named(sqlite3 *db, const char *what, const char *sql, const char *param, const char *text,
			 sqlite3_stmt **q, struct align_err *e)
{
	ALIGN_TRY(e, store_prepare(db, what, sql, q, e));
	store_bind_text(*q, param, text);
	return ALIGN_OK;
}

/* TODO-LEAD: store.h has no store_bind_double yet; this is its one use (the trial row's seconds). */
static void bind_double(sqlite3_stmt *q, const char *name, double v)
{
	sqlite3_bind_double(q, sqlite3_bind_parameter_index(q, name), v);
}

static int int64_row(void *u, sqlite3_stmt *q)
{
	*(int64_t *)u = sqlite3_column_int64(q, 0);
	return ALIGN_OK;
}

int store_bisect_run_id(sqlite3 *db, const char *name, int64_t *id, struct align_err *e)
{
	sqlite3_stmt *q;
	*id = 0;
	ALIGN_TRY(e,
		  prepare_named(db, "the run id lookup", "SELECT id FROM run WHERE name=:name", ":name", name, &q, e));
	return store_sql_rows(q, "the run id lookup", int64_row, id, 1, e);
}

static int text_row(void *u, sqlite3_stmt *q)
{
	int oom = 0;
	char **out = u;
	free(*out);
	*out = store_sql_dup(q, 0, &oom);
	return oom ? ALIGN_ERR_INTERNAL : ALIGN_OK;
}

/* Run q (finalized here) for its one text column: *out malloc'd, NULL when no row or a NULL value. */
static int text_result(sqlite3_stmt *q, const char *what, char **out, struct align_err *e)
{
	*out = NULL;
	int rc = store_sql_rows(q, what, text_row, out, 1, e);
	return rc == ALIGN_ERR_INTERNAL ? fail_internal(e, "out of memory") : rc; /* first message wins */
}

int store_bisect_run_name(sqlite3 *db, int64_t id, char **name, struct align_err *e)
{
	sqlite3_stmt *q;
	*name = NULL;
	ALIGN_TRY(e, store_prepare(db, "the run name lookup", "SELECT name FROM run WHERE id=:id", &q, e));
	store_bind_int64(q, ":id", id);
	return text_result(q, "the run name lookup", name, e);
}

int store_bisect_drop_run(sqlite3 *db, const char *name, struct align_err *e)
{
	sqlite3_stmt *q;
	ALIGN_TRY(e,
		  prepare_named(db, "the stale run removal", "DELETE FROM run WHERE name=:name", ":name", name, &q, e));
	int rc = sqlite3_step(q);
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE)
		return fail_internal(e, "cannot remove the stale run '%s': %s", name, sqlite3_errmsg(db));
	return ALIGN_OK;
}

int store_bisect_run_content(sqlite3 *db, const char *name, char **joined, struct align_err *e)
{
	static const char sql[] = "SELECT group_concat(sha256, ',') FROM (SELECT sha256 FROM source JOIN run "
				  "ON run.id = source.run_id WHERE run.name = :name ORDER BY sha256)";
	sqlite3_stmt *q;
	*joined = NULL;
	ALIGN_TRY(e, prepare_named(db, "the baseline's contents", sql, ":name", name, &q, e));
	return text_result(q, "the baseline's contents", joined, e);
}

static int trial_row(void *u, sqlite3_stmt *q)
{
	struct store_bisect_row *r = u;
	int oom = 0;
	r->verdict = store_sql_dup(q, 0, &oom);
	r->reason = store_sql_dup(q, 1, &oom);
	r->has_timeout = sqlite3_column_type(q, 2) != SQLITE_NULL;
	r->timeout_s = sqlite3_column_double(q, 2);
	r->first_diff = store_sql_dup(q, 3, &oom);
	r->has_n_diff = sqlite3_column_type(q, 4) != SQLITE_NULL;
	r->n_diff = sqlite3_column_int64(q, 4);
	r->compared = store_sql_dup(q, 5, &oom);
	r->has_run = sqlite3_column_type(q, 6) != SQLITE_NULL;
	r->run_id = sqlite3_column_int64(q, 6);
	r->run_name = store_sql_dup(q, 7, &oom);
	r->duration = sqlite3_column_double(q, 8);
	if (oom || !r->verdict) {
		store_bisect_row_free(r);
		return ALIGN_ERR_INTERNAL;
	}
	return 1;
}

int store_bisect_trial_load(sqlite3 *db, const char *bisect, const char *env, struct store_bisect_row *row, int *found,
			    struct align_err *e)
{
	static const char sql[] = "SELECT verdict, reason, timeout_s, first_diff, n_diff, compared, run_id, run_name, "
				  "duration FROM bisect_trial WHERE bisect=:bisect AND env=:env";
	sqlite3_stmt *q;
	memset(row, 0, sizeof *row);
	*found = 0;
	ALIGN_TRY(e, prepare_named(db, "the trial cache lookup", sql, ":bisect", bisect, &q, e));
	store_bind_text(q, ":env", env);
	return store_sql_one(q, "the trial cache lookup", trial_row, row, found, e);
}

void store_bisect_row_free(struct store_bisect_row *r)
{
	free(r->bisect), free(r->env), free(r->command), free(r->switches), free(r->verdict), free(r->reason);
	free(r->first_diff), free(r->compared), free(r->run_name), free(r->created);
	memset(r, 0, sizeof *r);
}

/* Bind the columns of a row to save (NULL where the row says so). */
static void bind_trial(sqlite3_stmt *q, const struct store_bisect_row *r)
{
	const struct {
		const char *name, *text;
	} texts[] = {
		{":bisect", r->bisect},
		{":env", r->env},
		{":command", r->command},
		{":switches", r->switches},
		{":verdict", r->verdict},
		{":reason", r->reason},
		{":first_diff", r->first_diff},
		{":compared", r->compared},
		{":run_name", r->has_run ? r->run_name : NULL},
		{":created", r->created},
	};
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
		store_bind_text(q, texts[i].name, texts[i].text);
	if (r->has_timeout)
		bind_double(q, ":timeout_s", r->timeout_s);
	if (r->has_n_diff)
		store_bind_int64(q, ":n_diff", r->n_diff);
	if (r->has_run)
		store_bind_int64(q, ":run_id", r->run_id);
	bind_double(q, ":duration", r->duration);
}

int store_bisect_trial_save(sqlite3 *db, const char *db_path, const struct store_bisect_row *row, struct align_err *e)
{
	static const char sql[] =
		"INSERT OR REPLACE INTO bisect_trial(bisect, env, command, switches, verdict, reason, timeout_s, "
		"first_diff, n_diff, compared, run_id, run_name, duration, created) VALUES (:bisect, :env, :command, "
		":switches, :verdict, :reason, :timeout_s, :first_diff, :n_diff, :compared, :run_id, :run_name, "
		":duration, :created)";
	sqlite3_stmt *q;
	ALIGN_TRY(e, store_prepare(db, "the trial cache row", sql, &q, e));
	bind_trial(q, row);
	int rc = ALIGN_OK;
	if (sqlite3_step(q) != SQLITE_DONE)
		rc = fail_internal(e, "cannot record the trial in '%s': %s", db_path, sqlite3_errmsg(db));
	sqlite3_finalize(q);
	return rc;
}
