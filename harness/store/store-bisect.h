/* store-bisect: every SQL statement that 'align bisect' runs, in one place: run lookups, the
 * baseline's contents, and the bisect_trial cache table
 * (schema/0002-bisect.sql). Statements take named parameters bound by name (store-report.h helpers).
 *
 * Errors: each function returns ALIGN_OK or a status and leaves the one message in e (err.h). */
#ifndef ALIGN_STORE_BISECT_H
#define ALIGN_STORE_BISECT_H

#include "status.h"

#include <sqlite3.h>
#include <stdint.h>

/* One row of bisect_trial. Loaded rows own their strings (store_bisect_row_free); a row to save
 * borrows them. NULL strings are SQL NULL. */
struct store_bisect_row {
	char *bisect, *env;	  /* the key: bisect key, environment digest */
	char *command, *switches; /* JSON arrays (saved, not loaded) */
	char *verdict;		  /* "same", "diverges", "unusable" */
	char *reason;		  /* unusable: why */
	int has_timeout;	  /* the trial timed out under --timeout timeout_s */
	double timeout_s;
	char *first_diff; /* JSON ITEM of the first divergent record (persisted) */
	int has_n_diff;
	int64_t n_diff;
	char *compared; /* what the verdict is relative to (bisect.h) */
	int has_run;	/* run_id and run_name are set (NULL once the run is deleted) */
	int64_t run_id;
	char *run_name;
	double duration;
	char *created; /* UTC ISO-8601 (saved, not loaded) */
};

/* The id of the run named name; 0 when there is none. */
int store_bisect_run_id(sqlite3 *db, const char *name, int64_t *id, struct align_err *e);
/* The name of run id (malloc'd); NULL when there is none. */
int store_bisect_run_name(sqlite3 *db, int64_t id, char **name, struct align_err *e);
/* Delete the run named name and what it holds (cascade). */
int store_bisect_drop_run(sqlite3 *db, const char *name, struct align_err *e);
/* The sorted, comma-joined source digests of run name (malloc'd; NULL when it has none). */
int store_bisect_run_content(sqlite3 *db, const char *name, char **joined, struct align_err *e);
/* The cached trial (bisect, env); *found = 0 when there is none. */
int store_bisect_trial_load(sqlite3 *db, const char *bisect, const char *env, struct store_bisect_row *row, int *found,
			    struct align_err *e);
void store_bisect_row_free(struct store_bisect_row *row);
/* Insert or replace the trial's row; db_path names the database in the message. */
int store_bisect_trial_save(sqlite3 *db, const char *db_path, const struct store_bisect_row *row, struct align_err *e);

#endif
