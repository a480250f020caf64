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
#include "store.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void bisect_usage(FILE *out)
{
	fprintf(out,
	        "usage: align bisect [options] --good ENV_SPEC --bad ENV_SPEC -- CMD ARGS...\n"
	        "\n"
	        "Run CMD as a fresh process per trial, under the good environment with some switches (the keys\n"
	        "whose values differ between good and bad) at their bad value, and find a minimal set of switches\n"
	        "that changes the bits (delta debugging); then put it back to good and search the other switches\n"
	        "again, until they change nothing. Each trial's traces are ingested as run bisect:<hash> and\n"
	        "compared with the good run; trials are cached in the database, so a rerun resumes.\n"
	        "\n"
	        "  --db PATH            database (default $ALIGN_DB or ./align.db)\n"
	        "  --good ENV_SPEC      the environment that gives the reference bits (repeatable, later wins)\n"
	        "  --bad ENV_SPEC       the environment that changes them (repeatable, later wins)\n"
	        "                       ENV_SPEC: KEY=VALUE,KEY=VALUE | @FILE (KEY=VALUE lines, # comments)\n"
	        "                       | profile:NAME; a key absent on one side is unset there\n"
	        "  --baseline RUN       compare trials with this ingested run (default: the good trial's run);\n"
	        "                       trials are compared as 'align report --first-diff' does\n"
	        "  --metric M           compare only the records of metric M, a name or alias as 'align report'\n"
	        "                       takes it (repeatable)\n"
	        "  -j, --jobs N         run up to N trials at once (default 1)\n"
	        "  --timeout S          a trial running longer than S seconds is killed: unusable\n"
	        "  --trace-glob PAT     the trial's traces are the files matching PAT in its directory\n"
	        "                       (default: the file CMD writes to $ALIGN_TRACE)\n"
	        "  --retry-unusable     run again the trials the cache holds as unusable (crashed, no trace)\n"
	        "  --first              stop at the first culprit set (do not search the other switches)\n"
	        "  --format F           text (default), json or md\n"
	        "  --out F              write the report to F (atomically) instead of stdout\n"
	        "  -h, --help           this text\n"
	        "\n"
	        "Each trial runs in its own directory (<db dir>/.align-bisect/<key>/t-<env>, exported as\n"
	        "ALIGN_TRIAL_DIR, also its working directory) with ALIGN_TRACE=<that dir>/trace.atf; its stdout and\n"
	        "stderr are kept there. A trial that fails, is killed, times out or writes no trace is unusable:\n"
	        "listed, never taken as same or different.\n"
	        "Exit: 0 culprit found, 1 the bad environment changes nothing, 2 usage or input error (bad spec,\n"
	        "CMD not found, unusable good or bad trial), 3 internal error or interrupted.\n");
}

/* Options as given, before anything is opened or written. */
struct bisect_opts {
	const char *db;
	const char *out;
	enum bisect_format format;
	int have_good, have_bad;
	int first_only; /* --first: stop after one culprit set */
	struct bisect_env bad;
};

static int parse_timeout(const char *text, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (errno || end == text || *end || !isfinite(v) || v <= 0 || v > 1e7)
		return err_input("option '--timeout': expected a positive number of seconds, got '%s'", text);
	*out = v;
	return ALIGN_OK;
}

static int parse_format(const char *text, enum bisect_format *out)
{
	static const char *const names[] = {"text", "json", "md"};
	for (int i = 0; i < 3; i++)
		if (!strcmp(text, names[i])) {
			*out = (enum bisect_format)i;
			return ALIGN_OK;
		}
	return err_input("option '--format': expected text, json or md, got '%s'", text);
}

static int add_metric(struct bisect *b, const char *m)
{
	char **p = realloc(b->metrics, ((size_t)b->n_metrics + 1) * sizeof *p);
	if (!p)
		return err_internal("out of memory");
	b->metrics = p;
	b->metrics[b->n_metrics++] = strdup(m);
	return ALIGN_OK;
}

static int parse_options(int argc, char **argv, struct bisect *b, struct bisect_opts *o)
{
	static const struct option opts[] = {
	    {"db", required_argument, 0, 'd'},       {"good", required_argument, 0, 'g'},
	    {"bad", required_argument, 0, 'b'},      {"baseline", required_argument, 0, 'B'},
	    {"metric", required_argument, 0, 'm'},   {"jobs", required_argument, 0, 'j'},
	    {"timeout", required_argument, 0, 't'},  {"trace-glob", required_argument, 0, 'G'},
	    {"format", required_argument, 0, 'f'},   {"out", required_argument, 0, 'o'},
	    {"retry-unusable", no_argument, 0, 'R'}, {"first", no_argument, 0, '1'},
	    {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
	};
	int c, rc = ALIGN_OK;
	long long jobs;
	optind = 1;
	/* '+': stop at CMD even without "--", so CMD's own options are never taken for ours */
	while (!rc && (c = getopt_long(argc, argv, "+hj:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o->db = optarg;
			break;
		case 'g':
			o->have_good = 1, rc = bisect_spec_parse("--good", optarg, &b->good);
			break;
		case 'b':
			o->have_bad = 1, rc = bisect_spec_parse("--bad", optarg, &o->bad);
			break;
		case 'B':
			b->baseline_opt = optarg;
			break;
		case 'm':
			rc = add_metric(b, optarg);
			break;
		case 'j':
			if (!(rc = cmd_parse_int("--jobs", optarg, 1, 64, &jobs)))
				b->jobs = (int)jobs;
			break;
		case 't':
			rc = parse_timeout(optarg, &b->timeout);
			break;
		case 'G':
			b->trace_glob = optarg;
			if (!*optarg || optarg[0] == '/')
				rc = err_input(
				    "option '--trace-glob': '%s' must be a pattern relative to the trial directory",
				    optarg);
			break;
		case 'f':
			rc = parse_format(optarg, &o->format);
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'R':
			b->retry_unusable = 1;
			break;
		case '1':
			o->first_only = 1;
			break;
		case 'h':
			bisect_usage(stdout);
			return -1;
		default:
			bisect_usage(stderr);
			return ALIGN_EINPUT;
		}
	}
	if (rc)
		return rc;
	if (!o->have_good || !o->have_bad)
		return err_input("%s is required (see 'align bisect --help')", o->have_good ? "--bad" : "--good");
	if (optind >= argc)
		return err_input("no command to bisect: give it after '--' (see 'align bisect --help')");
	b->cmd = argv + optind;
	b->n_cmd = argc - optind;
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
			return err_internal("cannot get the working directory: %s", strerror(errno));
		snprintf(buf, sizeof buf, "%s%s%s", name[0] == '/' ? "" : cwd, name[0] == '/' ? "" : "/", name);
		errno = 0;
		if (!executable(buf))
			return err_input("cannot run '%s': %s", name,
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
	return b->exe ? ALIGN_OK : err_input("cannot run '%s': command not found in PATH", name);
}

/* --out is written at the end, after the trials: find out now that it cannot be. */
static int check_out_dir(const char *out)
{
	char *copy = strdup(out);
	const char *dir = dirname(copy);
	int ok = access(dir, W_OK | X_OK) == 0;
	int rc = ok ? ALIGN_OK : err_input("option '--out': cannot write in '%s': %s", dir, strerror(errno));
	free(copy);
	return rc;
}

static int baseline_exists(struct bisect *b)
{
	sqlite3_stmt *st;
	sqlite3_prepare_v2(b->db, "SELECT 1 FROM run WHERE name=?1", -1, &st, NULL);
	sqlite3_bind_text(st, 1, b->baseline_opt, -1, SQLITE_STATIC);
	int found = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	if (!found)
		return err_input("option '--baseline': no run '%s' in '%s' (see 'align ingest')", b->baseline_opt,
		                 b->db_path);
	b->baseline_run = strdup(b->baseline_opt);
	bisect_set_compared(b);
	return ALIGN_OK;
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
		return err_input("the good and bad environments do not differ: no switch to bisect");
	json_t *cmd = json_array();
	for (int i = 0; i < b->n_cmd; i++)
		json_array_append_new(cmd, json_string(b->cmd[i]));
	b->cmd_json = json_dumps(cmd, JSON_COMPACT);
	json_decref(cmd);
	if ((rc = resolve_command(b)) || (o->out && (rc = check_out_dir(o->out))))
		return rc;
	b->db_path = cmd_db_path(o->db);
	if (b->baseline_opt && access(b->db_path, F_OK))
		return err_input("no database '%s' to take --baseline '%s' from (see 'align ingest', or pass --db)",
		                 b->db_path, b->baseline_opt);
	if ((rc = store_open(b->db_path, STORE_WRITE, ALIGN_BUSY_MS, &b->db)))
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
	struct bisect b = {.jobs = 1, .lock_fd = -1};
	struct bisect_opts o = {.format = BISECT_TEXT};
	struct bisect_result res = {0};
	int rc = parse_options(argc, argv, &b, &o);
	if (rc < 0) {
		rc = ALIGN_OK; /* --help */
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
