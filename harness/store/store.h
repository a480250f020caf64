/* store: the SQLite database (align.db): open, migrate, transactions, and the statement helpers the
 * store modules share (store-ingest.c holds the statements of the ingest path).
 * Contract: store_open_err applies every embedded migration in one transaction, sets PRAGMA
 * user_version, turns foreign keys on and waits up to busy_ms for another writer before failing with a
 * clear message. A database whose tables are not align's (user_version 0 with foreign tables, or a
 * newer version) is refused, never modified. Every function that can fail returns an exit-code class
 * and sets the one message in e (status.h); a NULL e prints it on stderr at once (the transitional
 * wrappers at the end pass NULL). */
#ifndef ALIGN_STORE_H
#define ALIGN_STORE_H

#include <sqlite3.h>
#include <stdint.h>

struct align_err;

enum store_mode { STORE_READ, STORE_WRITE };

/* busy_ms of store_open_err: wait for another writer without a bound, saying so on stderr every 10 s
 * (STORE_WAIT_UNBOUNDED) or silently (STORE_WAIT_UNBOUNDED_QUIET); store-wait.c. */
#define STORE_WAIT_UNBOUNDED (-1)
#define STORE_WAIT_UNBOUNDED_QUIET (-2)
void store_wait_install(sqlite3 *db, const char *path, int quiet);
/* Open (creating for STORE_WRITE) the database at path. */
int store_open_err(const char *path, enum store_mode mode, int busy_ms, sqlite3 **out, struct align_err *e);
void store_close(sqlite3 *db);
/* BEGIN IMMEDIATE (takes the write lock, waiting busy_ms), COMMIT, ROLLBACK (a no-op outside a
 * transaction). path only names the database in messages. */
int store_begin_err(sqlite3 *db, const char *path, struct align_err *e);
int store_commit_err(sqlite3 *db, const char *path, struct align_err *e);
void store_rollback(sqlite3 *db);
/* The failure of the SQLite call on db that just failed, as the one message in e: what the environment
 * causes (a read-only file or directory, a full disk, an I/O error, a file that cannot be opened) is an
 * input error naming the database file (path, NULL: the file db has open), exit 2; anything else is
 * internal (exit 3). what: what was being done ("create run 'x'"), NULL for nothing to add. */
int store_fail_sqlite(sqlite3 *db, const char *path, const char *what, struct align_err *e);
/* Run SQL with no result rows; on failure the SQLite message (store_fail_sqlite). */
int store_exec_err(sqlite3 *db, const char *sql, struct align_err *e);
/* Number of migrations embedded in this binary (the user_version a current database has). */
int store_schema_version(void);

/* Prepare sql; on failure "sqlite: cannot prepare '<what>': <why>" and *st = NULL. */
int store_prepare(sqlite3 *db, const char *what, const char *sql, sqlite3_stmt **st, struct align_err *e);
/* Bind a named parameter (":name", which the statement must have); text is bound SQLITE_STATIC (it
 * must outlive the step) and NULL text binds SQL NULL. */
void store_bind_int64(sqlite3_stmt *st, const char *name, int64_t v);
void store_bind_text(sqlite3_stmt *st, const char *name, const char *s);

/* TRANSITIONAL (report, bisect): the functions above with e = NULL, printing the message at once. */
int store_open(const char *path, enum store_mode mode, int busy_ms, sqlite3 **out);
int store_begin(sqlite3 *db, const char *path);
int store_commit(sqlite3 *db, const char *path);
int store_exec(sqlite3 *db, const char *sql);

#endif
