/* cmd-bisect: align bisect [--db PATH] --good ENV_SPEC --bad ENV_SPEC [--baseline RUN] [--metric M]...
 *                          [-j N] [--timeout S] [--trace-glob PATTERN] [--format text|json|md] [--out F]
 *                          -- CMD ARGS...
 * Find the environment switches whose bad values change the bits: delta debugging over fresh processes,
 * each trial's traces ingested and compared with the good run. Exit 0 culprit found, 1 the bad
 * environment changes nothing, 2 usage or input error (nothing written), 3 internal error. */
#include "bisect.h"
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "opts.h"
#include "store.h"
#include "store-bisect.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct cmd_opt bisect_opts_table[] = {
	{"db", 'd', "PATH", "database (default $ALIGN_DB or ./align.db)", 0},
	{"good", 'g', "ENV_SPEC", "the environment that gives the reference bits (repeatable, later wins)", 0},
	{"bad", 'b', "ENV_SPEC",
	 "the environment that changes them (repeatable, later wins)\n"
	 "ENV_SPEC: KEY=VALUE,KEY=VALUE | @FILE (KEY=VALUE lines, # comments)\n"
	 "| profile:NAME; a key absent on one side is unset there",
	 0},
	{"baseline", 'B', "RUN",
	 "compare trials with this ingested run (default: the good trial's run);\n"
	 "trials are compared as 'align report --first-diff' does",
	 0},
	{"metric", 'm', "M",
	 "compare only the records of metric M, a name or alias as 'align report'\n"
	 "takes it (repeatable)",
	 0},
	{"jobs", 'j', "N", "run up to N trials at once (default 1)", 1},
	{"timeout", 't', "S", "a trial running longer than S seconds is killed: unusable", 0},
	{"trace-glob", 'G', "PAT",
	 "the trial's traces are the files matching PAT in its directory\n"
	 "(default: the file CMD writes to $ALIGN_TRACE)",
	 0},
	{"retry-unusable", 'R', NULL, "run again the trials the cache holds as unusable (crashed, no trace)", 0},
	{"first", '1', NULL, "stop at the first culprit set (do not search the other switches)", 0},
	{"format", 'f', "F", "text (default), json or md", 0},
	{"out", 'o', "F", "write the report to F (atomically) instead of stdout", 0},
	{0},
};

static const struct cmd_spec bisect_spec = {
	"usage: align bisect [options] --good ENV_SPEC --bad ENV_SPEC -- CMD ARGS...",
	"Run CMD as a fresh process per trial, under the good environment with some switches (the keys\n"
	"whose values differ between good and bad) at their bad value, and find a minimal set of switches\n"
	"that changes the bits (delta debugging); then put it back to good and search the other switches\n"
	"again, until they change nothing. Each trial's traces are ingested as run bisect:<hash> and\n"
	"compared with the good run; trials are cached in the database, so a rerun resumes.",
	bisect_opts_table,
	"Each trial runs in its own directory (<db dir>/.align-bisect/<key>/t-<env>, exported as\n"
	"ALIGN_TRIAL_DIR, also its working directory) with ALIGN_TRACE=<that dir>/trace.atf; its stdout and\n"
	"stderr are kept there. A trial that fails, is killed, times out or writes no trace is unusable:\n"
	"listed, never taken as same or different.\n"
	"Exit: 0 culprit found, 1 the bad environment changes nothing, 2 usage or input error (bad spec,\n"
	"CMD not found, unusable good or bad trial), 3 internal error or interrupted.",
};

/* Options as given, before anything is opened or written. */
struct bisect_opts {
	struct bisect *b;
	const char *db;
	const char *out;
	enum bisect_format format;
	int have_good, have_bad;
	int first_only; /* --first: stop after one culprit set */
	struct bisect_env bad;
};

static int parse_timeout(struct align_err *e, const char *text, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (errno || end == text || *end || !isfinite(v) || v <= 0 || v > 1e7)
		return fail_input(e, "option '--timeout': expected a positive number of seconds, got '%s'", text);
	*out = v;
	return ALIGN_OK;
}

static int parse_format(struct align_err *e, const char *text, enum bisect_format *out)
{
	static const char *const names[] = {"text", "json", "md"};
	for (int i = 0; i < 3; i++)
		if (!strcmp(text, names[i])) {
			*out = (enum bisect_format)i;
			return ALIGN_OK;
		}
	return fail_input(e, "option '--format': expected text, json or md, got '%s'", text);
}

static int add_metric(struct bisect *b, const char *m)
{
	char **p = realloc(b->metrics, ((size_t)b->n_metrics + 1) * sizeof *p);
	if (!p)
		return fail_internal(b->err, "out of memory");
	b->metrics = p;
	if (!(b->metrics[b->n_metrics] = strdup(m)))
		return fail_internal(b->err, "out of memory");
	b->n_metrics++;
	return ALIGN_OK;
}

/* One option of bisect_opts_table (opts.h). */
static int on_opt(void *u, int key, const char *arg)
{
	struct bisect_opts *o = u;
	struct bisect *b = o->b;
	long long jobs;
	switch (key) {
	case 'd':
		o->db = arg;
		return ALIGN_OK;
	case 'g':
		o->have_good = 1;
		return bisect_spec_parse("--good", arg, &b->good, b->err);
	case 'b':
		o->have_bad = 1;
		return bisect_spec_parse("--bad", arg, &o->bad, b->err);
	case 'B':
		b->baseline_opt = arg;
		return ALIGN_OK;
	case 'm':
		return add_metric(b, arg);
	case 'j':
		ALIGN_TRY(b->err, cmd_parse_int_err("--jobs", arg, 1, 64, &jobs, b->err));
		b->jobs = (int)jobs;
		return ALIGN_OK;
	case 't':
		return parse_timeout(b->err, arg, &b->timeout);
	case 'G':
		b->trace_glob = arg;
		if (!*arg || arg[0] == '/')
			return fail_input(
				b->err, "option '--trace-glob': '%s' must be a pattern relative to the trial directory",
				arg);
		return ALIGN_OK;
	case 'f':
		return parse_format(b->err, arg, &o->format);
	case 'o':
		o->out = arg;
		return ALIGN_OK;
	case 'R':
		b->retry_unusable = 1;
		return ALIGN_OK;
	case '1':
		o->first_only = 1;
		return ALIGN_OK;
	}
	return fail_internal(b->err, "option key %d has no handler", key);
}

/* The row of the option a (after "--" or "-"; a long name may be abbreviated to a unique prefix), or
 * NULL when there is none (opts_parse then names it). */
static const struct cmd_opt *find_opt(const char *a)
{
	const struct cmd_opt *hit = NULL;
	if (a[1] != '-') {
		for (const struct cmd_opt *o = bisect_opts_table; o->name; o++)
			if (o->short_ok && o->key == a[1])
				return o;
		return NULL;
	}
	size_t n = strcspn(a + 2, "=");
	for (const struct cmd_opt *o = bisect_opts_table; o->name; o++) {
		if (!strncmp(o->name, a + 2, n) && !o->name[n])
			return o;
		if (!strncmp(o->name, a + 2, n))
			hit = hit ? NULL : o;
	}
	return hit;
}

/* Where our options end: at "--" (included) or at the first operand, CMD, so that CMD's own options are
 * never taken for ours even without "--" (getopt would move them forward). */
static int options_end(int argc, char **argv)
{
	int i = 1;
	while (i < argc) {
		const char *a = argv[i];
		if (!strcmp(a, "--"))
			return i + 1;
		if (a[0] != '-' || !a[1])
			return i;
		const struct cmd_opt *o = find_opt(a);
		int inline_arg = a[1] == '-' ? strchr(a, '=') != NULL : a[2] != '\0';
		i += o && o->arg && !inline_arg ? 2 : 1;
	}
	return argc;
}

static int parse_options(int argc, char **argv, struct bisect *b, struct bisect_opts *o)
{
	int first, end = options_end(argc, argv);
	if (end > argc)
		end = argc;
	o->b = b;
	int rc = opts_parse(&bisect_spec, end, argv, on_opt, o, &first, b->err);
	if (rc)
		return rc;
	if (!o->have_good || !o->have_bad)
		return fail_input(b->err, "%s is required (see 'align bisect --help')",
				  o->have_good ? "--bad" : "--good");
	if (first >= argc)
		return fail_input(b->err, "no command to bisect: give it after '--' (see 'align bisect --help')");
	b->cmd = argv + first;
	b->n_cmd = argc - first;
	return ALIGN_OK;
}

/* PATH of the trials: the good environment's, else ours. */
static const char *trial_path(const struct bisect *b)
{
	int present;
	const char *p = bisect_env_get(&b->good, "PATH", &present);
	if (present)
		return p;
	p = getenv("PATH");
	return p ? p : "/usr/local/bin:/usr/bin:/bin";
}

static int executable(const char *path)
{
	struct stat st;
	return !stat(path, &st) && S_ISREG(st.st_mode) && !access(path, X_OK);
}

/* The absolute path cmd[0] runs (trials run in their own directory); symlinks are kept, so argv[0]-
 * dispatching programs still see the name they were called by. */
static int resolve_command(struct bisect *b)
{
	const char *name = b->cmd[0];
	char buf[2 * PATH_MAX + 2], cwd[PATH_MAX];
	if (strchr(name, '/')) {
		if (name[0] != '/' && !getcwd(cwd, sizeof cwd))
			return fail_internal(b->err, "cannot get the working directory: %s", strerror(errno));
		snprintf(buf, sizeof buf, "%s%s%s", name[0] == '/' ? "" : cwd, name[0] == '/' ? "" : "/", name);
		errno = 0;
		if (!executable(buf))
			return fail_input(b->err, "cannot run '%s': %s", name,
					  errno ? strerror(errno) : "not an executable file");
		b->exe = strdup(buf);
		return ALIGN_OK;
	}
	char *path = strdup(trial_path(b));
	for (char *save, *dir = strtok_r(path, ":", &save); dir && !b->exe; dir = strtok_r(NULL, ":", &save)) {
		if (dir[0] != '/')
			continue; /* a relative PATH entry would mean something else in the trial directory */
		snprintf(buf, sizeof buf, "%s/%s", dir, name);
		if (executable(buf))
			b->exe = strdup(buf);
	}
	free(path);
	return b->exe ? ALIGN_OK : fail_input(b->err, "cannot run '%s': command not found in PATH", name);
}

/* --out is written at the end, after the trials: find out now that it cannot be. */
static int check_out_dir(struct align_err *e, const char *out)
{
	char *copy = strdup(out);
	if (!copy)
		return fail_internal(e, "out of memory");
	const char *dir = dirname(copy);
	int ok = access(dir, W_OK | X_OK) == 0;
	int rc = ok ? ALIGN_OK : fail_input(e, "option '--out': cannot write in '%s': %s", dir, strerror(errno));
	free(copy);
	return rc;
}

static int baseline_exists(struct bisect *b)
{
	int64_t id;
	ALIGN_TRY(b->err, store_bisect_run_id(b->db, b->baseline_opt, &id, b->err));
	if (!id)
		return fail_input(b->err, "option '--baseline': no run '%s' in '%s' (see 'align ingest')",
				  b->baseline_opt, b->db_path);
	if (!(b->baseline_run = strdup(b->baseline_opt)))
		return fail_internal(b->err, "out of memory");
	return bisect_set_compared(b);
}

/* SIGINT/SIGTERM: trials run in their own process groups, out of reach of the terminal's ^C, so bisect
 * must kill them itself. A handler can only reach a static flag: the one piece of global state here. */
static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void catch_stop(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static int prepare(struct bisect *b, struct bisect_opts *o)
{
	int rc = bisect_switches(b, &o->bad);
	if (rc)
		return rc;
	if (b->n_sw == 0)
		return fail_input(b->err, "the good and bad environments do not differ: no switch to bisect");
	json_t *cmd = bisect_cmd_json(b);
	b->cmd_json = cmd ? json_dumps(cmd, JSON_COMPACT) : NULL;
	json_decref(cmd);
	if (!b->cmd_json)
		return fail_internal(b->err, "out of memory");
	if ((rc = resolve_command(b)) || (o->out && (rc = check_out_dir(b->err, o->out))))
		return rc;
	b->db_path = cmd_db_path(o->db);
	if (b->baseline_opt && access(b->db_path, F_OK))
		return fail_input(b->err,
				  "no database '%s' to take --baseline '%s' from (see 'align ingest', or pass --db)",
				  b->db_path, b->baseline_opt);
	if ((rc = store_open_err(b->db_path, STORE_WRITE, ALIGN_BUSY_MS, &b->db, b->err)))
		return rc;
	if (b->baseline_opt && (rc = baseline_exists(b)))
		return rc;
	if ((rc = bisect_make_key(b)))
		return rc;
	long long n = (long long)b->n_sw;
	b->max_trials = n > 40000 ? INT_MAX : (int)(2 + n * n + 3 * n);
	b->progress = isatty(2);
	b->t0 = bisect_now();
	b->stop = &stop_requested;
	catch_stop();
	return ALIGN_OK;
}

int cmd_bisect(struct align_ctx *ctx, int argc, char **argv)
{
	struct bisect b = {.err = &ctx->err, .jobs = 1, .lock_fd = -1};
	struct bisect_opts o = {.format = BISECT_TEXT};
	struct bisect_result res = {0};
	int rc = parse_options(argc, argv, &b, &o);
	if (rc == OPTS_HELP) {
		rc = ALIGN_OK;
		goto out;
	}
	if (rc || (rc = prepare(&b, &o)))
		goto out;
	rc = bisect_search(&b, o.first_only, &res);
	if (b.progress)
		fputs("\r\033[K", stderr);
	if (!rc)
		rc = bisect_write_report(&b, &res, o.format, o.out);
	if (!rc)
		rc = res.n_culprits ? ALIGN_OK : ALIGN_DIFF;
out:
	bisect_result_free(&res);
	bisect_env_free(&o.bad);
	bisect_free(&b);
	return rc;
}

void bisect_free(struct bisect *b)
{
	for (size_t i = 0; i < b->n_trials; i++) {
		struct bisect_trial *t = b->trials[i];
		free(t->set), free(t->run_name), free(t->reason);
		json_decref(t->first_diff);
		free(t);
	}
	free(b->trials);
	for (size_t i = 0; i < b->n_sw; i++)
		free(b->sw[i].key), free(b->sw[i].good), free(b->sw[i].bad);
	free(b->sw);
	for (int i = 0; i < b->n_metrics; i++)
		free(b->metrics[i]);
	free(b->metrics);
	bisect_env_free(&b->good);
	free(b->exe), free(b->cmd_json), free(b->baseline_run), free(b->compared), free(b->workdir);
	if (b->db)
		store_close(b->db);
	if (b->lock_fd >= 0)
		close(b->lock_fd); /* releases the flock */
}
