/* bisect-ingest: a finished trial's trace files into the database as the trial's own run.
 *
 * The files are ingested in-process with ingest_files_err() as run bisect:<hash> (bisect_run_name); a
 * run of that name left by an interrupted bisect (its cache row was never written) is removed first.
 * Dedup belongs to a run, so traces byte-identical to another run's (the baseline, an earlier trial)
 * are ingested into this trial's run all the same and compare bitwise-equal to it. Whether a trace is
 * usable is ingest's status; a refused trace makes the trial unusable, its reason ingest's own message
 * from the error record ("FILE:LINE: what"), never text read back. */
#include "bisect.h"
#include "err.h"
#include "ingest.h"
#include "store-bisect.h"

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

/* TODO-LEAD: ingest_files prints its per-file summary ("FILE: FORMAT, N records into run ...") on
 * stdout even with opts.quiet, and bisect's stdout is its report. Until ingest takes an output stream
 * (or honours quiet for that line), that line goes to the trial's ingest.txt: fd 1 points there during
 * the call. Nothing is read back from the file; the verdict comes from ingest_files' status. */
struct stdout_aside {
	int saved;
};

static void stdout_aside_begin(struct stdout_aside *q, const char *path)
{
	fflush(stdout);
	q->saved = dup(1);
	int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (f >= 0) {
		dup2(f, 1);
		close(f);
	}
}

static void stdout_aside_end(struct stdout_aside *q)
{
	fflush(stdout);
	if (q->saved >= 0) {
		dup2(q->saved, 1);
		close(q->saved);
	}
}

/* Ingest the files as run name (a stale run of that name removed first). *bad: ingest refused them,
 * why in why (ingest's own message, "FILE:LINE: what"); else *id = the run's id. */
static int ingest_trial(struct bisect *b, const char *name, const char *log, char **files, int n, int *bad,
			struct align_err *why, int64_t *id)
{
	ALIGN_TRY(b->err, store_bisect_drop_run(b->db, name, b->err));
	struct ingest_opts io = {.micro_batches = 1, .n_order = 1, .order = {"main"}, .quiet = 1};
	struct stdout_aside q;
	stdout_aside_begin(&q, log);
	int rc = ingest_files_err(b->db, b->db_path, name, 0, NULL, &io, files, n, why);
	stdout_aside_end(&q);
	*bad = rc != ALIGN_OK;
	if (*bad)
		return ALIGN_OK;
	return store_bisect_run_id(b->db, name, id, b->err);
}

int bisect_trial_ingest(struct bisect *b, struct bisect_trial *t, const char *dir, char **files, int n)
{
	char name[64];
	bisect_run_name(b, t->env, name, sizeof name);
	char *log = bisect_path_join(dir, "ingest.txt");
	int rc = log ? ALIGN_OK : fail_internal(b->err, "out of memory"), bad = 0;
	struct align_err why = {0}; /* a trace's own failure: the trial's reason, not the command's error */
	int64_t id = 0;
	if (!rc)
		rc = ingest_trial(b, name, log, files, n, &bad, &why, &id);
	if (!rc && bad)
		bisect_unusable(t, "trace rejected: %s", why.msg[0] ? why.msg : "ingest refused it");
	else if (!rc && id == 0)
		bisect_unusable(t, "ingest created no run (see %s)", log);
	else if (!rc) {
		t->run_id = id;
		free(t->run_name);
		if (!(t->run_name = strdup(name)))
			rc = fail_internal(b->err, "out of memory");
	}
	free(log);
	return rc;
}
