/* store: opening align.db, applying the embedded migrations, transactions with a busy wait. */
#include "store.h"

#include "err.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern const char *const schema_migrations[];
extern const int schema_migration_count;

int store_schema_version(void)
{
	return schema_migration_count;
}

int store_fail_sqlite(sqlite3 *db, const char *path, const char *what, struct align_err *e)
{
	int code = sqlite3_extended_errcode(db) & 0xff;
	const char *file = path ? path : sqlite3_db_filename(db, "main");
	if (code == SQLITE_READONLY || code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_CANTOPEN ||
	    code == SQLITE_PERM)
		return fail_input(e, "cannot write database '%s'%s%s: %s%s", file && *file ? file : "(memory)",
				  what ? " to " : "", what ? what : "", sqlite3_errmsg(db),
				  code == SQLITE_READONLY ? " (the file or its directory is read-only)" : "");
	return fail_internal(e, "%s%s: %s", what ? "cannot " : "sqlite", what ? what : "", sqlite3_errmsg(db));
}

int store_exec_err(sqlite3 *db, const char *sql, struct align_err *e)
{
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return store_fail_sqlite(db, NULL, NULL, e);
	return ALIGN_OK;
}

static int query_int(sqlite3 *db, const char *sql, int *out)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : -1;
}

static int is_busy(int code)
{
	return code == SQLITE_BUSY || code == SQLITE_LOCKED;
}

/* The schema version and the table counts in one statement, so from one snapshot: read one by one, a
 * process that created the schema between the reads made a fresh database look foreign ("6 tables and no
 * align schema": two ingests creating one database at once, 4 of 150 trials). 0, or -1 (sqlite3_errcode). */
static int read_header(sqlite3 *db, int *version, int *tables, int *ours)
{
	sqlite3_stmt *st;
	const char *sql =
		"SELECT (SELECT user_version FROM pragma_user_version), "
		"(SELECT count(*) FROM sqlite_schema WHERE type='table'), "
		"(SELECT count(*) FROM sqlite_schema WHERE type='table' AND name IN ('run','source','record'))";
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*version = sqlite3_column_int(st, 0);
		*tables = sqlite3_column_int(st, 1);
		*ours = sqlite3_column_int(st, 2);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : -1;
}

static int check_foreign(const char *path, int version, int tables, int ours, struct align_err *e)
{
	if (version == 0 && tables > 0)
		return fail_input(e, "'%s' is not an align database (it has %d tables and no align schema)", path,
				  tables);
	if (version > 0 && ours < 3)
		return fail_input(e, "'%s' is not an align database (user_version %d without align tables)", path,
				  version);
	if (version > schema_migration_count)
		return fail_input(e, "'%s' has schema version %d, newer than this align (%d): upgrade align", path,
				  version, schema_migration_count);
	return ALIGN_OK;
}

static int migrate(sqlite3 *db, const char *path, int version, struct align_err *e)
{
	if (version == schema_migration_count)
		return ALIGN_OK;
	int rc = store_begin_err(db, path, e);
	if (rc)
		return rc;
	/* re-read under the write lock: another process may have migrated meanwhile */
	if (query_int(db, "PRAGMA user_version", &version)) {
		store_rollback(db);
		return fail_internal(e, "sqlite: %s", sqlite3_errmsg(db));
	}
	for (int i = version; i < schema_migration_count; i++) {
		if ((rc = store_exec_err(db, schema_migrations[i], e))) {
			store_rollback(db);
			return rc;
		}
	}
	int broken = 0;
	if (query_int(db, "SELECT count(*) FROM pragma_foreign_key_check", &broken) || broken) {
		store_rollback(db);
		return fail_internal(e, "migrating '%s' broke %d foreign keys", path, broken);
	}
	char sql[64];
	snprintf(sql, sizeof sql, "PRAGMA user_version=%d", schema_migration_count);
	if ((rc = store_exec_err(db, sql, e)) || (rc = store_commit_err(db, path, e))) {
		store_rollback(db);
		return rc;
	}
	return ALIGN_OK;
}

int store_open_err(const char *path, enum store_mode mode, int busy_ms, sqlite3 **out, struct align_err *e)
{
	sqlite3 *db = NULL;
	*out = NULL;
	if (mode == STORE_READ && access(path, F_OK) != 0)
		return fail_input(e, "no database '%s' (run 'align ingest' first, or pass --db)", path);
	int flags = SQLITE_OPEN_NOMUTEX |
		    (mode == STORE_WRITE ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY);
	if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
		int rc =
			fail_input(e, "cannot open database '%s': %s", path, db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return rc;
	}
	if (busy_ms < 0)
		store_wait_install(db, path, busy_ms == STORE_WAIT_UNBOUNDED_QUIET);
	else
		sqlite3_busy_timeout(db, busy_ms);
	sqlite3_extended_result_codes(db, 1);
	/* SQLite opens a file it may not write read-only without a word: say so before any work */
	if (mode == STORE_WRITE && sqlite3_db_readonly(db, "main") == 1) {
		sqlite3_close(db);
		return fail_input(e, "cannot write database '%s': the file is read-only", path);
	}
	int version = 0, tables = 0, ours = 0, rc;
	if (read_header(db, &version, &tables, &ours)) {
		int code = sqlite3_errcode(db);
		rc = is_busy(code) ? fail_input(e, "database '%s' is locked by another process (waited %d ms)", path,
						busy_ms < 0 ? 0 : busy_ms)
				   : fail_input(e, "'%s' is not an align database: %s", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return rc;
	}
	if ((rc = check_foreign(path, version, tables, ours, e))) {
		sqlite3_close(db);
		return rc;
	}
	/* a large page cache keeps the two record indexes in memory during bulk inserts */
	if (mode == STORE_WRITE && (rc = store_exec_err(db, "PRAGMA cache_size=-262144", e))) {
		sqlite3_close(db);
		return rc;
	}
	/* migrations run with foreign keys off (a table rebuild must not cascade), then they are enforced */
	if ((mode == STORE_WRITE && (rc = migrate(db, path, version, e))) ||
	    (rc = store_exec_err(db, "PRAGMA foreign_keys=ON", e))) {
		sqlite3_close(db);
		return rc;
	}
	if (mode == STORE_READ && version != schema_migration_count) {
		sqlite3_close(db);
		return fail_input(e, "'%s' has schema version %d, expected %d: run 'align ingest' once to migrate",
				  path, version, schema_migration_count);
	}
	*out = db;
	return ALIGN_OK;
}

void store_close(sqlite3 *db)
{
	sqlite3_close(db);
}

int store_begin_err(sqlite3 *db, const char *path, struct align_err *e)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		return ALIGN_OK;
	sqlite3_free(msg);
	if (is_busy(rc & 0xff))
		return fail_input(e, "database '%s' is locked by another writer (gave up waiting)", path);
	return store_fail_sqlite(db, path, "start a transaction", e);
}

int store_commit_err(sqlite3 *db, const char *path, struct align_err *e)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, "COMMIT", NULL, NULL, &msg);
	if (rc == SQLITE_OK)
		return ALIGN_OK;
	sqlite3_free(msg);
	if (is_busy(rc & 0xff))
		return fail_input(e, "database '%s' is locked by another process (commit gave up waiting)", path);
	return store_fail_sqlite(db, path, "commit", e);
}

void store_rollback(sqlite3 *db)
{
	if (!sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

int store_prepare(sqlite3 *db, const char *what, const char *sql, sqlite3_stmt **st, struct align_err *e)
{
	if (sqlite3_prepare_v2(db, sql, -1, st, NULL) == SQLITE_OK)
		return ALIGN_OK;
	*st = NULL;
	return fail_internal(e, "sqlite: cannot prepare '%s': %s", what, sqlite3_errmsg(db));
}

/* The index of a named parameter; a name the statement lacks is a bug (index 0: SQLite ignores the
 * bind and returns SQLITE_RANGE, which the step's result does not show, hence the assert). */
static int param(sqlite3_stmt *st, const char *name)
{
	int i = sqlite3_bind_parameter_index(st, name);
	assert(i > 0 && "the statement has no such parameter");
	return i;
}

void store_bind_int64(sqlite3_stmt *st, const char *name, int64_t v)
{
	sqlite3_bind_int64(st, param(st, name), v);
}

void store_bind_text(sqlite3_stmt *st, const char *name, const char *s)
{
	if (s)
		sqlite3_bind_text(st, param(st, name), s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, param(st, name));
}

/* TRANSITIONAL print-at-once wrappers, for callers not yet on struct align_err (report, bisect). */
int store_open(const char *path, enum store_mode mode, int busy_ms, sqlite3 **out)
{
	return store_open_err(path, mode, busy_ms, out, NULL);
}
int store_begin(sqlite3 *db, const char *path)
{
	return store_begin_err(db, path, NULL);
}
int store_commit(sqlite3 *db, const char *path)
{
	return store_commit_err(db, path, NULL);
}
int store_exec(sqlite3 *db, const char *sql)
{
	return store_exec_err(db, sql, NULL);
}
