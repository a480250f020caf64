/* store-explain: SQL of `align explain --runs` (store-explain.h). */
#include "store-explain.h"

#include "err.h"
#include "store-report.h"
#include "store.h"

#include <string.h>

struct ex_rows {
	store_explain_fn fn;
	void *u;
};

static int row(void *u, sqlite3_stmt *q)
{
	struct ex_rows *r = u;
	struct store_explain_row x = {
		.name = (const char *)sqlite3_column_text(q, 0),
		.dtype = (const char *)sqlite3_column_text(q, 1),
		.shape = (const char *)sqlite3_column_text(q, 2),
		.payload = sqlite3_column_blob(q, 3),
		.payload_len = (size_t)sqlite3_column_bytes(q, 3),
		.rank = sqlite3_column_int64(q, 4),
		.step = sqlite3_column_int64(q, 5),
		.micro = sqlite3_column_int64(q, 6),
		.occ = sqlite3_column_int64(q, 7),
		.seq = sqlite3_column_int64(q, 8),
	};
	return r->fn(r->u, &x);
}

static int run_exists(void *u, sqlite3_stmt *q)
{
	(void)q;
	*(int *)u = 1;
	return 1;
}

int store_explain_tensors(sqlite3 *db, const char *run, const char *prefix, store_explain_fn fn, void *u,
			  int *found_run, struct align_err *e)
{
	sqlite3_stmt *q;
	int there = 0;
	ALIGN_TRY(e, store_prepare(db, "the run lookup", "SELECT id FROM run WHERE name=:run", &q, e));
	store_bind_text(q, ":run", run);
	ALIGN_TRY(e, store_sql_one(q, "the run lookup", run_exists, &there, found_run, e));
	if (!*found_run)
		return ALIGN_OK;
	ALIGN_TRY(e, store_prepare(db, "the explain records",
				   "SELECT r.name, r.dtype, r.shape, r.payload, r.rank, r.step, r.micro, r.occ, r.seq "
				   "FROM record r JOIN run ON run.id = r.run_id WHERE run.name = :run AND "
				   "substr(r.name, 1, length(:prefix) + 1) = :prefix || '.' AND r.payload IS NOT NULL "
				   "AND r.superseded = 0 ORDER BY r.rank, r.seq",
				   &q, e));
	store_bind_text(q, ":run", run);
	store_bind_text(q, ":prefix", prefix);
	struct ex_rows r = {fn, u};
	return store_sql_rows(q, "the explain records", row, &r, 1, e);
}
