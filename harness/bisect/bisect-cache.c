/* bisect-cache: what identifies a bisect and a trial, and the bisect_trial table that remembers them.
 *
 * bisect key   sha256 of "align-bisect 1", the executable's absolute path, the command, the good environment and
 *              --trace-glob: a rerun of the same bisect finds its trials again.
 * env digest   sha256 of a trial's overrides: the good environment with the subset's switches at their
 *              bad value, as sorted "KEY=VALUE" / "-KEY" (unset) lines. Two subsets that give the same
 *              environment are one trial, whichever side a value came from.
 * A cached verdict is reused when it was compared with the same baseline content and metrics; a
 * usable trial whose run still exists is compared again otherwise (no process); an unusable one is
 * reused (a crash is as reproducible as a result), except with --retry-unusable or for a timeout under a
 * --timeout shorter than the current one. One bisect at a time uses a work directory (flock). */
#include "bisect.h"
#include "err.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double bisect_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void bisect_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int n = 0;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* A growing text buffer for digests. */
struct buf {
	char *p;
	size_t n, cap;
};

static void buf_add(struct buf *b, const char *s, size_t len)
{
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + len + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			abort(); /* digests of a few KB: out of memory here is not recoverable */
		b->p = p, b->cap = cap;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static void env_lines(struct buf *out, const struct bisect_env *e)
{
	for (size_t i = 0; i < e->n; i++) {
		if (e->val[i]) {
			buf_str(out, e->key[i]);
			buf_add(out, "=", 1);
			buf_add(out, e->val[i], strlen(e->val[i]) + 1); /* the NUL ends a value that holds '\n' */
		} else {
			buf_add(out, "-", 1);
			buf_add(out, e->key[i], strlen(e->key[i]) + 1);
		}
	}
}

int bisect_trial_env(const struct bisect *b, const unsigned char *set, struct bisect_env *out)
{
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < b->good.n; i++)
		if (bisect_env_set(out, b->good.key[i], b->good.val[i]))
			return ALIGN_EINTERNAL;
	for (size_t i = 0; i < b->n_sw; i++)
		if (bisect_env_set(out, b->sw[i].key, set[i] ? b->sw[i].bad : b->sw[i].good))
			return ALIGN_EINTERNAL;
	return ALIGN_OK;
}

static int mkdir_p(const char *path)
{
	char *copy = strdup(path);
	for (char *p = copy + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(copy, 0777) && errno != EEXIST) {
			free(copy);
			return -1;
		}
		*p = '/';
	}
	int rc = mkdir(copy, 0777) && errno != EEXIST ? -1 : 0;
	free(copy);
	return rc;
}

int bisect_make_key(struct bisect *b)
{
	struct buf k = {0};
	buf_str(&k, "align-bisect 1\ncommand\n");
	buf_add(&k, b->exe, strlen(b->exe) + 1);
	for (int i = 0; i < b->n_cmd; i++)
		buf_add(&k, b->cmd[i], strlen(b->cmd[i]) + 1);
	buf_str(&k, "\ngood\n");
	env_lines(&k, &b->good);
	buf_str(&k, "\ntrace-glob\n");
	if (b->trace_glob)
		buf_str(&k, b->trace_glob);
	bisect_sha256_hex(k.p, k.n, b->key);
	free(k.p);

	char *dbcopy = strdup(b->db_path), cwd[4096];
	const char *dir = dirname(dbcopy);
	size_t len = strlen(dir) + sizeof cwd + 64;
	b->workdir = malloc(len);
	if (dir[0] == '/')
		snprintf(b->workdir, len, "%s/.align-bisect/%.16s", dir, b->key);
	else if (getcwd(cwd, sizeof cwd))
		snprintf(b->workdir, len, "%s%s%s/.align-bisect/%.16s", cwd, strcmp(dir, ".") ? "/" : "",
		         strcmp(dir, ".") ? dir : "", b->key);
	else {
		free(dbcopy);
		return err_internal("cannot get the working directory: %s", strerror(errno));
	}
	free(dbcopy);
	if (mkdir_p(b->workdir))
		return err_input("cannot create the bisect work directory '%s': %s", b->workdir, strerror(errno));
	char *lock = bisect_path_join(b->workdir, "lock");
	b->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	int rc = ALIGN_OK;
	if (b->lock_fd < 0)
		rc = err_input("cannot open '%s': %s", lock, strerror(errno));
	else if (flock(b->lock_fd, LOCK_EX | LOCK_NB))
		rc = err_input("another 'align bisect' of this command and good environment is running (it holds '%s')",
		               lock);
	free(lock);
	return rc;
}

void bisect_env_digest(const struct bisect *b, const unsigned char *set, char out[65])
{
	struct bisect_env e;
	struct buf t = {0};
	bisect_trial_env(b, set, &e);
	env_lines(&t, &e);
	bisect_sha256_hex(t.p ? t.p : "", t.n, out);
	free(t.p);
	bisect_env_free(&e);
}

void bisect_run_name(const struct bisect *b, const char *env, char *out, size_t len)
{
	char both[140], h[65];
	snprintf(both, sizeof both, "%s:%s", b->key, env);
	bisect_sha256_hex(both, strlen(both), h);
	snprintf(out, len, "bisect:%.16s", h);
}

json_t *bisect_set_json(const struct bisect *b, const unsigned char *set)
{
	json_t *a = json_array();
	char text[1024];
	for (size_t i = 0; i < b->n_sw; i++)
		if (set[i]) {
			bisect_switch_text(&b->sw[i], 1, text, sizeof text);
			json_array_append_new(a, json_string(text));
		}
	return a;
}

static char *col_dup(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);
	return s ? strdup((const char *)s) : NULL;
}

/* Is the cached usable trial's run still there? (run_id is set NULL when the run is deleted) */
static void fill_usable(struct bisect_trial *t, sqlite3_stmt *st)
{
	t->verdict = strcmp((const char *)sqlite3_column_text(st, 0), "diverges") ? TRIAL_SAME : TRIAL_DIVERGES;
	json_error_t e;
	const char *fd = (const char *)sqlite3_column_text(st, 3);
	t->first_diff = fd ? json_loads(fd, 0, &e) : NULL;
	t->n_diff = sqlite3_column_int64(st, 4);
}

int bisect_cache_load(struct bisect *b, struct bisect_trial *t)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(b->db,
	                       "SELECT verdict, reason, timeout_s, first_diff, n_diff, compared, run_id, "
	                       "run_name, duration FROM bisect_trial WHERE bisect=?1 AND env=?2",
	                       -1, &st, NULL) != SQLITE_OK)
		return -err_internal("sqlite: %s", sqlite3_errmsg(b->db));
	sqlite3_bind_text(st, 1, b->key, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, t->env, -1, SQLITE_STATIC);
	int found = 0;
	if (sqlite3_step(st) != SQLITE_ROW)
		goto out;
	const char *verdict = (const char *)sqlite3_column_text(st, 0);
	int has_run = sqlite3_column_type(st, 6) != SQLITE_NULL;
	const char *compared = (const char *)sqlite3_column_text(st, 5);
	t->duration = sqlite3_column_double(st, 8);
	if (!strcmp(verdict, "unusable")) {
		int timed_out = sqlite3_column_type(st, 2) != SQLITE_NULL;
		if (b->retry_unusable || (timed_out && (b->timeout == 0 || b->timeout > sqlite3_column_double(st, 2))))
			goto out; /* asked to, or a longer --timeout now: try again */
		t->verdict = TRIAL_UNUSABLE;
		t->reason = col_dup(st, 1);
		found = 1;
		goto out;
	}
	if (has_run) {
		t->run_id = sqlite3_column_int64(st, 6);
		t->run_name = col_dup(st, 7);
	}
	if (!b->compared) { /* the good trial, which is the baseline: only its run matters */
		found = has_run;
		t->verdict = TRIAL_SAME;
	} else if (compared && !strcmp(compared, b->compared)) {
		fill_usable(t, st);
		found = 1;
	} else if (has_run) {
		found = 2; /* compare again below, without a process */
	}
out:
	sqlite3_finalize(st);
	if (found == 2) {
		int rc = bisect_compare(b, t);
		if (rc)
			return -rc;
		if ((rc = bisect_cache_store(b, t)))
			return -rc;
		found = 1;
	}
	if (!found) {
		free(t->run_name), t->run_name = NULL, t->run_id = 0;
		free(t->reason), t->reason = NULL;
		t->verdict = TRIAL_PENDING;
	}
	t->cached = found;
	return found;
}

static void utc_now(char buf[32])
{
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int bisect_cache_store(struct bisect *b, const struct bisect_trial *t)
{
	static const char *const names[] = {"unusable", "same", "diverges", "unusable"};
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(b->db,
	                       "INSERT OR REPLACE INTO bisect_trial(bisect, env, command, switches, verdict, "
	                       "reason, timeout_s, first_diff, n_diff, compared, run_id, run_name, duration, "
	                       "created) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)",
	                       -1, &st, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(b->db));
	json_t *sw = bisect_set_json(b, t->set);
	char now[32];
	utc_now(now);
	sqlite3_bind_text(st, 1, b->key, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, t->env, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, b->cmd_json, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, json_dumps(sw, JSON_COMPACT), -1, free);
	sqlite3_bind_text(st, 5, names[t->verdict], -1, SQLITE_STATIC);
	if (t->verdict == TRIAL_UNUSABLE)
		sqlite3_bind_text(st, 6, t->reason, -1, SQLITE_STATIC);
	if (t->proc.timed_out)
		sqlite3_bind_double(st, 7, b->timeout);
	if (t->first_diff)
		sqlite3_bind_text(st, 8, json_dumps(t->first_diff, JSON_COMPACT | JSON_SORT_KEYS), -1, free);
	if (t->verdict != TRIAL_UNUSABLE) {
		sqlite3_bind_int64(st, 9, t->n_diff);
		if (b->compared)
			sqlite3_bind_text(st, 10, b->compared, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 11, t->run_id);
		sqlite3_bind_text(st, 12, t->run_name, -1, SQLITE_STATIC);
	}
	sqlite3_bind_double(st, 13, t->duration);
	sqlite3_bind_text(st, 14, now, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	json_decref(sw);
	if (rc != SQLITE_DONE)
		return err_internal("cannot record the trial in '%s': %s", b->db_path, sqlite3_errmsg(b->db));
	return ALIGN_OK;
}
