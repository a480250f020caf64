/* bisect-ingest: a finished trial's trace files into the database as the trial's run.
 *
 * The files are ingested in-process with ingest_files() as run bisect:<hash> (bisect_run_name), with
 * their stdout and stderr sent to the trial's ingest.txt: the bisect report owns the terminal.
 * Ingest keeps one copy of identical content (source.sha256 is unique), so:
 *   - no file known yet: ingest them all (a run of that name left by an interrupted bisect is removed
 *     first: its cache row was never written);
 *   - every file already held by one run, which holds exactly these contents: that run is the trial's
 *     run (identical bytes give identical records);
 *   - anything else (some files known, or known under several runs): the trial cannot be given a run of
 *     its own and is unusable, saying so. */
#include "bisect.h"
#include "err.h"
#include "ingest.h"
#include "reader.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *bisect_path_join(const char *dir, const char *name)
{
	size_t len = strlen(dir) + strlen(name) + 2;
	char *p = malloc(len);
	snprintf(p, len, "%s/%s", dir, name);
	return p;
}

/* While ingesting, fds 1 and 2 point at the trial's ingest.txt. */
struct quiet {
	int out, err;
};

static void quiet_begin(struct quiet *q, const char *path)
{
	fflush(stdout), fflush(stderr);
	q->out = dup(1), q->err = dup(2);
	int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (f >= 0) {
		dup2(f, 1), dup2(f, 2);
		close(f);
	}
}

static void quiet_end(struct quiet *q)
{
	fflush(stdout), fflush(stderr);
	dup2(q->out, 1), dup2(q->err, 2);
	close(q->out), close(q->err);
}

/* The first "error: " line of the ingest log, for the reason of an unusable trial. */
static void first_error(const char *path, char *out, size_t len)
{
	snprintf(out, len, "see %s", path);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[600];
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "error: ", 7)) {
			line[strcspn(line, "\r\n")] = '\0';
			snprintf(out, len, "%s", line + 7);
			break;
		}
	fclose(f);
}

static long long run_id_of(sqlite3 *db, const char *name)
{
	sqlite3_stmt *st;
	long long id = 0;
	sqlite3_prepare_v2(db, "SELECT id FROM run WHERE name=?1", -1, &st, NULL);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return id;
}

/* SHA-256 of the decompressed content, as ingest computes it. */
static int hash_file(const char *path, char sha[65])
{
	struct reader *r;
	char *buf;
	size_t len;
	int rc = reader_open(path, &r);
	if (rc)
		return rc;
	if (!(rc = reader_slurp(r, &buf, &len)))
		reader_sha256(r, sha);
	reader_close(r);
	return rc;
}

static int cmp_sha(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The run holding all these contents and nothing else: its id, 0 when none is, -1 when some are
 * known elsewhere (partly identical traces). sha[] is sorted here. */
static long long owner_of(sqlite3 *db, char (*sha)[65], int n)
{
	sqlite3_stmt *st;
	long long owner = 0;
	int known = 0;
	qsort(sha, (size_t)n, sizeof *sha, cmp_sha);
	sqlite3_prepare_v2(db, "SELECT run_id FROM source WHERE sha256=?1", -1, &st, NULL);
	for (int i = 0; i < n; i++) {
		sqlite3_bind_text(st, 1, sha[i], -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW) {
			long long id = sqlite3_column_int64(st, 0);
			known++;
			owner = !owner || owner == id ? id : -1;
		}
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	if (known == 0)
		return 0;
	if (known < n || owner < 0)
		return -1;
	/* the owner must hold exactly these contents (duplicates within the trial count once) */
	sqlite3_prepare_v2(db, "SELECT sha256 FROM source WHERE run_id=?1 ORDER BY sha256", -1, &st, NULL);
	sqlite3_bind_int64(st, 1, owner);
	int i = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(st, 0);
		while (i + 1 < n && !strcmp(sha[i], sha[i + 1]))
			i++;
		if (i >= n || strcmp(s, sha[i])) {
			owner = -1;
			break;
		}
		i++;
	}
	sqlite3_finalize(st);
	return owner > 0 && i >= n ? owner : -1;
}

static char *run_name_of(sqlite3 *db, long long id)
{
	sqlite3_stmt *st;
	char *name = NULL;
	sqlite3_prepare_v2(db, "SELECT name FROM run WHERE id=?1", -1, &st, NULL);
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW)
		name = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return name;
}

static int drop_stale_run(struct bisect *b, const char *name)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(b->db, "DELETE FROM run WHERE name=?1", -1, &st, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(b->db));
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? ALIGN_OK
	                         : err_internal("cannot remove the stale run '%s': %s", name, sqlite3_errmsg(b->db));
}

int bisect_trial_ingest(struct bisect *b, struct bisect_trial *t, const char *dir, char **files, int n)
{
	char name[64], why[600];
	bisect_run_name(b, t->env, name, sizeof name);
	char *log = bisect_path_join(dir, "ingest.txt");
	char(*sha)[65] = calloc((size_t)n, sizeof *sha);
	struct quiet q;
	int rc = ALIGN_OK, bad = 0;
	quiet_begin(&q, log);
	for (int i = 0; i < n && !bad; i++)
		bad = hash_file(files[i], sha[i]) != ALIGN_OK;
	long long owner = bad ? 0 : owner_of(b->db, sha, n);
	if (!bad && owner == 0 && !(rc = drop_stale_run(b, name))) {
		struct ingest_opts io = {.micro_batches = 1, .n_order = 1, .order = {"main"}};
		bad = ingest_files(b->db, b->db_path, name, 0, NULL, &io, files, n) != ALIGN_OK;
		owner = bad ? 0 : run_id_of(b->db, name);
	}
	quiet_end(&q);
	if (bad) {
		first_error(log, why, sizeof why);
		bisect_unusable(t, "trace rejected: %s", why);
	} else if (owner < 0) {
		bisect_unusable(t, "traces partly identical to another run's files (ingest keeps one copy of identical "
		                   "content, so this trial has no run of its own)");
	} else if (!rc && owner == 0) {
		bisect_unusable(t, "ingest created no run (see %s)", log);
	} else if (!rc) {
		t->run_id = owner;
		t->run_name = run_name_of(b->db, owner);
	}
	free(sha);
	free(log);
	return rc;
}
