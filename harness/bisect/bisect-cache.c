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
#include "store-bisect.h"

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
		return fail_internal(b->err, "cannot get the working directory: %s", strerror(errno));
	}
	free(dbcopy);
	if (mkdir_p(b->workdir))
		return fail_input(b->err, "cannot create the bisect work directory '%s': %s", b->workdir,
				  strerror(errno));
	char *lock = bisect_path_join(b->workdir, "lock");
	b->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	int rc = ALIGN_OK;
	if (b->lock_fd < 0)
		rc = fail_input(b->err, "cannot open '%s': %s", lock, strerror(errno));
	else if (flock(b->lock_fd, LOCK_EX | LOCK_NB))
		rc = fail_input(
			b->err,
			"another 'align bisect' of this command and good environment is running (it holds '%s')", lock);
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

json_t *bisect_cmd_json(const struct bisect *b)
{
	json_t *a = json_array();
	for (int i = 0; a && i < b->n_cmd; i++)
		json_array_append_new(a, json_string(b->cmd[i]));
	return a;
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

/* A cached usable trial compared with the same baseline and metrics: its verdict and first difference
 * (the persisted JSON ITEM, read back from the cache table). */
static void fill_usable(struct bisect_trial *t, const struct store_bisect_row *row)
{
	t->verdict = strcmp(row->verdict, "diverges") ? TRIAL_SAME : TRIAL_DIVERGES;
	t->first_diff = row->first_diff ? json_loads(row->first_diff, 0, NULL) : NULL;
	t->n_diff = row->n_diff;
}

/* What the cached row says: 1 found and valid, 2 its run must be compared again, 0 it must run. */
static int cache_decide(struct bisect *b, struct bisect_trial *t, const struct store_bisect_row *row)
{
	t->duration = row->duration;
	if (!strcmp(row->verdict, "unusable")) {
		if (b->retry_unusable || (row->has_timeout && (b->timeout == 0 || b->timeout > row->timeout_s)))
			return 0; /* asked to, or a longer --timeout now: try again */
		t->verdict = TRIAL_UNUSABLE;
		t->reason = row->reason ? strdup(row->reason) : NULL;
		return 1;
	}
	if (row->has_run) {
		t->run_id = row->run_id;
		t->run_name = row->run_name ? strdup(row->run_name) : NULL;
	}
	if (!b->compared) { /* the good trial, which is the baseline: only its run matters */
		t->verdict = TRIAL_SAME;
		return row->has_run;
	}
	if (row->compared && !strcmp(row->compared, b->compared)) {
		fill_usable(t, row);
		return 1;
	}
	return row->has_run ? 2 : 0; /* compared with another baseline: again, without a process */
}

int bisect_cache_load(struct bisect *b, struct bisect_trial *t)
{
	struct store_bisect_row row;
	int found, rc = store_bisect_trial_load(b->db, b->key, t->env, &row, &found, b->err);
	if (rc)
		return -rc;
	if (found)
		found = cache_decide(b, t, &row);
	store_bisect_row_free(&row);
	if (found == 2) {
		if ((rc = bisect_compare(b, t)) || (rc = bisect_cache_store(b, t)))
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
	json_t *sw = bisect_set_json(b, t->set);
	char now[32];
	utc_now(now);
	int usable = t->verdict != TRIAL_UNUSABLE;
	struct store_bisect_row row = {
		.bisect = b->key,
		.env = (char *)t->env,
		.command = b->cmd_json,
		.switches = json_dumps(sw, JSON_COMPACT),
		.verdict = (char *)names[t->verdict],
		.reason = usable ? NULL : t->reason,
		.has_timeout = t->proc.timed_out,
		.timeout_s = b->timeout,
		.first_diff = t->first_diff ? json_dumps(t->first_diff, JSON_COMPACT | JSON_SORT_KEYS) : NULL,
		.has_n_diff = usable,
		.n_diff = t->n_diff,
		.compared = usable ? b->compared : NULL,
		.has_run = usable,
		.run_id = t->run_id,
		.run_name = t->run_name,
		.duration = t->duration,
		.created = now,
	};
	int rc = row.switches ? store_bisect_trial_save(b->db, b->db_path, &row, b->err)
			      : fail_internal(b->err, "out of memory");
	free(row.switches);
	free(row.first_diff);
	json_decref(sw);
	return rc;
}
