/* store: the SQLite database (align.db): open, migrate, transactions.
 * Contract: store_open applies every embedded migration in one transaction, sets PRAGMA user_version,
 * turns foreign keys on and waits up to busy_ms for another writer before failing with a clear message.
 * A database whose tables are not align's (user_version 0 with foreign tables, or a newer version) is
 * refused, never modified. */
#ifndef ALIGN_STORE_H
#define ALIGN_STORE_H

#include <sqlite3.h>

enum store_mode { STORE_READ, STORE_WRITE };

/* Open (creating for STORE_WRITE) the database at path; returns an exit-code class, message printed. */
int store_open(const char *path, enum store_mode mode, int busy_ms, sqlite3 **out);
void store_close(sqlite3 *db);
/* BEGIN IMMEDIATE (takes the write lock, waiting busy_ms), COMMIT, ROLLBACK. */
int store_begin(sqlite3 *db, const char *path);
int store_commit(sqlite3 *db, const char *path);
void store_rollback(sqlite3 *db);
/* Run SQL with no result rows; prints the SQLite message on failure and returns ALIGN_EINTERNAL. */
int store_exec(sqlite3 *db, const char *sql);
/* Number of migrations embedded in this binary (the user_version a current database has). */
int store_schema_version(void);

#endif
