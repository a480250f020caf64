/* bisect-trial: one trial of 'align bisect' and the pool that runs up to -j of them at once.
 *
 * A trial is a fresh process (several switches are latched at process start): fork, then in the child
 * only: a new process group, the trial directory <workdir>/t-<env digest> as working directory (emptied
 * first), stdin from /dev/null, stdout and stderr into stdout.txt and stderr.txt there, the overrides
 * applied with setenv/unsetenv, ALIGN_TRACE=<dir>/trace.atf and ALIGN_TRIAL_DIR=<dir> exported, exec.
 * The parent polls its children with waitpid(WNOHANG), kills the process group of one that runs past
 * --timeout, and kills what a finished command left behind in its group before reaping it.
 *
 * Then, in the parent, one trial at a time: its traces (the $ALIGN_TRACE file, or the files matching
 * --trace-glob in its directory) are ingested in-process as run bisect:<hash> and compared with the
 * baseline; traces identical to another run's still land in the trial's own run (dedup belongs to a
 * run). A command that fails, is killed, times out or writes no usable trace makes the
 * trial unusable, with the reason. */
#include "bisect.h"
#include "err.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRACE_NAME "trace.atf"

struct bisect_trial *bisect_known(const struct bisect *b, const unsigned char *set)
{
	for (size_t i = 0; i < b->n_trials; i++)
		if (!memcmp(b->trials[i]->set, set, b->n_sw))
			return b->trials[i];
	return NULL;
}

static struct bisect_trial *new_trial(struct bisect *b, const unsigned char *set)
{
	if (b->n_trials == b->cap_trials) {
		size_t cap = b->cap_trials ? 2 * b->cap_trials : 64;
		struct bisect_trial **p = realloc(b->trials, cap * sizeof *p);
		if (!p)
			return NULL;
		b->trials = p, b->cap_trials = cap;
	}
	struct bisect_trial *t = calloc(1, sizeof *t);
	if (!t || !(t->set = malloc(b->n_sw ? b->n_sw : 1))) {
		free(t);
		return NULL;
	}
	memcpy(t->set, set, b->n_sw);
	bisect_env_digest(b, set, t->env);
	t->index = (int)b->n_trials + 1;
	t->proc.errfd = -1;
	b->trials[b->n_trials++] = t;
	return t;
}

static char *trial_dir(const struct bisect *b, const struct bisect_trial *t)
{
	size_t len = strlen(b->workdir) + 32;
	char *d = malloc(len);
	snprintf(d, len, "%s/t-%.16s", b->workdir, t->env);
	return d;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* An empty trial directory: what an earlier attempt left is removed. */
static int fresh_dir(const struct bisect *b, const char *dir)
{
	if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
		return fail_internal(b->err, "cannot empty the trial directory '%s': %s", dir, strerror(errno));
	if (mkdir(dir, 0777))
		return fail_internal(b->err, "cannot create the trial directory '%s': %s", dir, strerror(errno));
	return ALIGN_OK;
}

/* In the child: report why it could not exec through the pipe, and leave. */
static void child_fail(int errfd, int stage)
{
	int msg[2] = {stage, errno};
	if (write(errfd, msg, sizeof msg) < 0)
		_exit(126);
	_exit(127);
}

static void child_redirect(int fd, const char *dir, const char *name, int flags)
{
	char *p = bisect_path_join(dir, name);
	int f = open(p, flags, 0666);
	if (f < 0 || dup2(f, fd) < 0)
		_exit(126);
	close(f);
	free(p);
}

/* The child: its own process group and directory, the trial's environment, exec. Never returns. */
static void child_exec(const struct bisect *b, const struct bisect_trial *t, const char *dir, int errfd)
{
	struct bisect_env e;
	setpgid(0, 0);
	if (chdir(dir))
		child_fail(errfd, 1);
	child_redirect(0, "/", "dev/null", O_RDONLY);
	child_redirect(1, dir, "stdout.txt", O_WRONLY | O_CREAT | O_TRUNC);
	child_redirect(2, dir, "stderr.txt", O_WRONLY | O_CREAT | O_TRUNC);
	if (bisect_trial_env(b, t->set, &e))
		_exit(126);
	for (size_t i = 0; i < e.n; i++)
		if (e.val[i] ? setenv(e.key[i], e.val[i], 1) : unsetenv(e.key[i]))
			child_fail(errfd, 3);
	char *trace = bisect_path_join(dir, TRACE_NAME);
	if (setenv("ALIGN_TRACE", trace, 1) || setenv("ALIGN_TRIAL_DIR", dir, 1) || setenv("PWD", dir, 1))
		child_fail(errfd, 3);
	execv(b->exe, b->cmd);
	child_fail(errfd, 2);
}

/* One line, cut to the terminal's width so that "\r" can overwrite it. */
static void progress(const struct bisect *b, const struct bisect_trial *t, const char *what)
{
	if (!b->progress)
		return;
	char line[1024], item[256];
	struct winsize ws;
	size_t width = ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20 ? ws.ws_col - 1 : 79;
	if (width >= sizeof line)
		width = sizeof line - 1;
	size_t used = (size_t)snprintf(line, sizeof line, "bisect: trial %d of at most %d, %.1fs, %s {", t->index,
				       b->max_trials, bisect_now() - b->t0, what);
	int any = 0;
	for (size_t i = 0; i < b->n_sw && used < sizeof line; i++) {
		if (!t->set[i])
			continue;
		bisect_switch_text(&b->sw[i], 1, item, sizeof item);
		used += (size_t)snprintf(line + used, sizeof line - used, "%s%s", any++ ? "," : "", item);
	}
	if (used < sizeof line)
		used += (size_t)snprintf(line + used, sizeof line - used, "%s}", any ? "" : "good");
	if (used > width)
		memcpy(line + width - 4, "...}", 5);
	fprintf(stderr, "\r\033[K%s", line);
	fflush(stderr);
}

static int spawn(struct bisect *b, struct bisect_trial *t)
{
	char *dir = trial_dir(b, t);
	int fds[2], rc = fresh_dir(b, dir);
	if (rc) {
		free(dir);
		return rc;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		free(dir);
		return fail_internal(b->err, "cannot create a pipe: %s", strerror(errno));
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]), close(fds[1]), free(dir);
		return fail_internal(b->err, "cannot fork: %s", strerror(errno));
	}
	if (pid == 0)
		child_exec(b, t, dir, fds[1]);
	setpgid(pid, pid); /* also here: kill(-pid) must work before the child got to it */
	close(fds[1]);
	free(dir);
	t->proc = (struct trial_proc){.pid = pid, .errfd = fds[0], .started = bisect_now()};
	b->n_run++;
	progress(b, t, "running");
	return ALIGN_OK;
}

/* The last non-empty line of a file, at most len-1 bytes of it. */
static void last_line(const char *path, char *out, size_t len)
{
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[strspn(line, " \t")])
			snprintf(out, len, "%s", line);
	}
	fclose(f);
}

void bisect_unusable(struct bisect_trial *t, const char *fmt, ...)
{
	char buf[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	t->verdict = TRIAL_UNUSABLE;
	free(t->reason);
	t->reason = strdup(buf);
}

/* The process is gone: why it is unusable, or 0 when it exited 0. Negative: the exec failed. */
static int exit_reason(const struct bisect *b, struct bisect_trial *t, int status, const char *dir)
{
	int msg[2];
	char tail[512];
	ssize_t got = read(t->proc.errfd, msg, sizeof msg);
	close(t->proc.errfd);
	t->proc.errfd = -1;
	if (got == (ssize_t)sizeof msg) {
		static const char *const stage[] = {"", "enter the trial directory for", "run",
						    "set the environment of"};
		return -fail_input(b->err, "cannot %s '%s': %s", stage[msg[0] & 3], b->cmd[0], strerror(msg[1]));
	}
	if (t->proc.timed_out) {
		bisect_unusable(t, "timed out after %gs (process group killed)", b->timeout);
		return 1;
	}
	if (WIFSIGNALED(status)) {
		bisect_unusable(t, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
		return 1;
	}
	if (WEXITSTATUS(status)) {
		char *err = bisect_path_join(dir, "stderr.txt");
		last_line(err, tail, sizeof tail);
		free(err);
		bisect_unusable(t, "exit status %d%s%s%s", WEXITSTATUS(status), tail[0] ? ": \"" : "", tail,
				tail[0] ? "\"" : "");
		return 1;
	}
	return 0;
}

static int escape_glob(const char *in, char *out, size_t len)
{
	size_t n = 0;
	for (; *in && n + 2 < len; in++) {
		if (strchr("*?[\\", *in))
			out[n++] = '\\';
		out[n++] = *in;
	}
	out[n] = '\0';
	return *in ? -1 : 0;
}

/* The trace files of a finished trial (sorted); 0 and a reason when there are none. */
static int collect(const struct bisect *b, struct bisect_trial *t, const char *dir, glob_t *g)
{
	char pat[8192];
	memset(g, 0, sizeof *g);
	if (!b->trace_glob) {
		char *p = bisect_path_join(dir, TRACE_NAME);
		struct stat st;
		int ok = !stat(p, &st) && S_ISREG(st.st_mode) && st.st_size > 0;
		if (ok && escape_glob(p, pat, sizeof pat) == 0)
			glob(pat, 0, NULL, g);
		free(p);
		if (!ok)
			bisect_unusable(t, "wrote no trace ($ALIGN_TRACE is missing or empty)");
		return ok ? (int)g->gl_pathc : 0;
	}
	if (escape_glob(dir, pat, sizeof pat - strlen(b->trace_glob) - 2))
		return 0;
	strcat(pat, "/");
	strcat(pat, b->trace_glob);
	int rc = glob(pat, 0, NULL, g);
	if (rc || g->gl_pathc == 0) {
		bisect_unusable(t, "wrote no trace (no file matches --trace-glob '%s')", b->trace_glob);
		globfree(g);
		memset(g, 0, sizeof *g);
		return 0;
	}
	return (int)g->gl_pathc;
}

/* A trial whose process is gone: reason, traces, ingest, comparison, cache row. */
static int finish(struct bisect *b, struct bisect_trial *t, int status)
{
	char *dir = trial_dir(b, t);
	t->duration = bisect_now() - t->proc.started;
	t->proc.pid = 0;
	int rc = exit_reason(b, t, status, dir);
	if (rc < 0) {
		free(dir);
		return -rc;
	}
	glob_t g;
	rc = ALIGN_OK;
	if (t->verdict != TRIAL_UNUSABLE && collect(b, t, dir, &g) > 0) {
		rc = bisect_trial_ingest(b, t, dir, g.gl_pathv, (int)g.gl_pathc);
		globfree(&g);
		if (!rc && t->verdict != TRIAL_UNUSABLE)
			rc = b->baseline_run ? bisect_compare(b, t) : (t->verdict = TRIAL_SAME, ALIGN_OK);
	}
	free(dir);
	if (!rc)
		rc = bisect_cache_store(b, t);
	progress(b, t, t->verdict == TRIAL_DIVERGES ? "diverges" : t->verdict == TRIAL_SAME ? "same" : "unusable");
	return rc;
}

static void kill_all(struct bisect_trial **run, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (run[i]->proc.pid) {
			kill(-run[i]->proc.pid, SIGKILL);
			waitpid(run[i]->proc.pid, NULL, 0);
			close(run[i]->proc.errfd);
			run[i]->proc.pid = 0;
		}
}

/* Wait until one of the running trials ends; finish it and drop it from run[]. */
static int wait_one(struct bisect *b, struct bisect_trial **run, size_t *n)
{
	for (;;) {
		if (*b->stop)
			return fail_internal(b->err, "interrupted: %zu running trial(s) killed", *n);
		double now = bisect_now();
		for (size_t i = 0; i < *n; i++) {
			struct bisect_trial *t = run[i];
			siginfo_t si = {0};
			/* WNOWAIT: the exited leader keeps its pid, so its group id cannot be reused yet */
			if (waitid(P_PID, (id_t)t->proc.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) {
				int status;
				kill(-t->proc.pid, SIGKILL); /* what the command left running in its group */
				waitpid(t->proc.pid, &status, 0);
				run[i] = run[--*n];
				return finish(b, t, status);
			}
			if (b->timeout > 0 && !t->proc.timed_out && now - t->proc.started >= b->timeout) {
				t->proc.timed_out = 1;
				kill(-t->proc.pid, SIGKILL);
			}
		}
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

int bisect_eval(struct bisect *b, unsigned char *const *sets, size_t n, struct bisect_trial **out)
{
	struct bisect_trial **todo = calloc(n + 1, sizeof *todo), **run = calloc((size_t)b->jobs + 1, sizeof *run);
	size_t n_todo = 0, n_run = 0, next = 0;
	int rc = ALIGN_OK;
	if (!todo || !run) {
		free(todo), free(run);
		return fail_internal(b->err, "out of memory");
	}
	if (*b->stop) {
		free(todo), free(run);
		return fail_internal(b->err, "interrupted");
	}
	for (size_t i = 0; i < n && !rc; i++) {
		struct bisect_trial *t = bisect_known(b, sets[i]);
		if (!t) {
			if (!(t = new_trial(b, sets[i]))) {
				rc = fail_internal(b->err, "out of memory");
				break;
			}
			int found = bisect_cache_load(b, t);
			if (found < 0)
				rc = -found;
			else if (!found)
				todo[n_todo++] = t;
		}
		out[i] = t;
	}
	while (!rc && (next < n_todo || n_run)) {
		while (!rc && n_run < (size_t)b->jobs && next < n_todo) {
			rc = spawn(b, todo[next]);
			if (!rc)
				run[n_run++] = todo[next++];
		}
		if (!rc && n_run)
			rc = wait_one(b, run, &n_run);
	}
	kill_all(run, n_run);
	free(todo);
	free(run);
	return rc;
}
