/* cmd-report: align report [--db PATH] [--runs A,B] [--first-diff] [--metric M]... [--all] [--map FILE]
 *                          [--format text|json|md|html] [--out F] [--limit N] [--no-stepsum]
 * Exit: 0 nothing differs, 1 something differs (differ, incomparable, only in one run), 2 usage or
 * input error, 3 internal error. --out writes through a temporary file renamed into place. */
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "opts.h"
#include "report.h"
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct cmd_opt report_opts_table[] = {
	{"db", 'd', "PATH", "database (default $ALIGN_DB or ./align.db)", 0},
	{"runs", 'r', "A,B", "the runs to compare (default: the two runs of the database)", 0},
	{"first-diff", 'F', NULL,
	 "stop reading after the step of the first differing value (a name in one\n"
	 "run only does not stop it); the --metric names, or by default every name\n"
	 "but job metadata, are followed to their own first difference",
	 0},
	{"metric", 'm', "M", "compare only M (any alias: 'lm loss' = loss); repeatable", 0},
	{"all", 'A', NULL,
	 "compare job metadata too: timings, throughput, memory, consumed samples,\n"
	 "batch size, progress (phase 'meta'), left out by default",
	 0},
	{"map", 'M', "FILE",
	 "name rules, one a line: REGEX -> NAME (POSIX ERE on the printed name,\n"
	 "first match wins, '#' comments); reads every record; implies --all",
	 0},
	{"format", 'f', "F",
	 "text (default), md, json or html: one self-contained page with a chart\n"
	 "of each scalar metric's |a-b|/|a| per step (no step is skipped by its\n"
	 "summary: the charts need every step's values)",
	 0},
	{"out", 'o', "F", "write the report to F (atomically) instead of stdout", 0},
	{"limit", 'l', "N", "differing records listed (default 20)", 0},
	{"no-stepsum", 'S', NULL, "read every record instead of skipping steps with equal summaries", 0},
	{0},
};

static const struct cmd_spec report_spec = {
	"usage: align report [options]",
	"Compare two runs record by record: bitwise-equal, equal as printed (bits unknown), differ, or only\n"
	"in one run; and where the first difference is, in execution order (step, micro, seq, rank).",
	report_opts_table,
	"Exit status: 0 nothing differs, 1 differences (values, or names in one run only), 2 usage or\n"
	"input error, 3 internal error.",
};

/* The options as given. */
struct report_args {
	struct align_ctx *ctx;
	struct report_opts o;
	enum report_format fmt;
	const char *db_opt, *out_path;
	const char **metrics; /* argc slots: every --metric fits */
	char runs_buf[512];   /* --runs A,B split in two */
};

static int parse_runs(struct report_args *a, const char *text)
{
	snprintf(a->runs_buf, sizeof a->runs_buf, "%s", text);
	char *comma = strchr(a->runs_buf, ',');
	if (!comma || comma == a->runs_buf || !comma[1] || strchr(comma + 1, ','))
		return fail_input(&a->ctx->err, "option '--runs': expected two run names 'A,B', got '%s'", text);
	*comma = '\0';
	a->o.run_a = a->runs_buf;
	a->o.run_b = comma + 1;
	return ALIGN_OK;
}

static int parse_format(struct report_args *a, const char *text)
{
	static const struct {
		const char *name;
		enum report_format f;
	} formats[] = {
		{"text", REPORT_TEXT},
		{"json", REPORT_JSON},
		{"md", REPORT_MD},
		{"html", REPORT_HTML},
	};
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (!strcmp(text, formats[i].name)) {
			a->fmt = formats[i].f;
			return ALIGN_OK;
		}
	return fail_input(&a->ctx->err, "option '--format': unknown format '%s' (expected text, json, md or html)",
			  text);
}

/* One option of report_opts_table (opts.h). */
static int on_opt(void *u, int key, const char *arg)
{
	struct report_args *a = u;
	long long n;
	switch (key) {
	case 'd':
		a->db_opt = arg;
		return ALIGN_OK;
	case 'r':
		return parse_runs(a, arg);
	case 'F':
		a->o.first_diff = 1;
		return ALIGN_OK;
	case 'm':
		a->metrics[a->o.n_metrics++] = arg;
		return ALIGN_OK;
	case 'M':
		a->o.map_path = arg;
		return ALIGN_OK;
	case 'f':
		return parse_format(a, arg);
	case 'o':
		a->out_path = arg;
		return ALIGN_OK;
	case 'l':
		ALIGN_TRY(&a->ctx->err, cmd_parse_int_err("--limit", arg, 0, 1000000, &n, &a->ctx->err));
		a->o.limit = (long)n;
		return ALIGN_OK;
	case 'S':
		a->o.no_stepsum = 1;
		return ALIGN_OK;
	case 'A':
		a->o.all = 1;
		return ALIGN_OK;
	}
	return fail_internal(&a->ctx->err, "option key %d has no handler", key);
}

/* --out: a temporary file beside the target, renamed over it once complete. */
struct out_file {
	const char *path;
	char tmp[4096];
	FILE *f;
};

static int out_open(struct out_file *o, struct align_err *e)
{
	if (snprintf(o->tmp, sizeof o->tmp, "%s.tmp.XXXXXX", o->path) >= (int)sizeof o->tmp)
		return fail_input(e, "option '--out': path too long");
	int fd = mkstemp(o->tmp);
	if (fd < 0)
		return fail_input(e, "cannot write '%s': %s", o->path, strerror(errno));
	mode_t mask = umask(0); /* mkstemp makes 0600; the report gets the usual 0666 & ~umask */
	umask(mask);
	fchmod(fd, 0666 & ~mask);
	if (!(o->f = fdopen(fd, "w"))) {
		close(fd);
		unlink(o->tmp);
		return fail_internal(e, "cannot write '%s': %s", o->tmp, strerror(errno));
	}
	return ALIGN_OK;
}

static int out_commit(struct out_file *o, struct align_err *e)
{
	int bad = fflush(o->f) != 0 || fsync(fileno(o->f)) != 0;
	bad |= fclose(o->f) != 0;
	o->f = NULL;
	if (bad || rename(o->tmp, o->path) != 0) {
		int saved = errno;
		unlink(o->tmp);
		return fail_input(e, "cannot write '%s': %s", o->path, strerror(saved));
	}
	return ALIGN_OK;
}

static void out_abort(struct out_file *o)
{
	if (o->f) {
		fclose(o->f);
		unlink(o->tmp);
		o->f = NULL;
	}
}

static int report_main(struct report_args *a)
{
	struct align_err *e = &a->ctx->err;
	struct out_file of = {.path = a->out_path};
	if (a->out_path)
		ALIGN_TRY(e, out_open(&of, e));
	a->ctx->db_path = cmd_db_path(a->db_opt);
	a->o.db_path = a->ctx->db_path;
	int rc = store_open_err(a->ctx->db_path, STORE_READ, ALIGN_BUSY_MS, &a->ctx->db, e);
	struct report r;
	if (!rc)
		rc = report_compute(a->ctx->db, &a->o, &r, e);
	if (!rc && (rc = report_load_elements(a->ctx->db, &r, e)))
		report_free(&r);
	if (a->ctx->db)
		store_close(a->ctx->db);
	a->ctx->db = NULL;
	if (rc) {
		out_abort(&of);
		return rc;
	}
	FILE *out = a->out_path ? of.f : stdout;
	rc = report_render(&r, a->fmt, out, a->out_path ? a->out_path : "stdout", e);
	if (rc)
		out_abort(&of);
	else if (a->out_path)
		rc = out_commit(&of, e);
	else if (fflush(stdout))
		rc = fail_internal(e, "cannot write to stdout: %s", strerror(errno));
	if (rc == ALIGN_OK)
		rc = report_exit_code(&r);
	report_free(&r);
	return rc;
}

int cmd_report(struct align_ctx *ctx, int argc, char **argv)
{
	struct report_args a = {.ctx = ctx, .o = {.limit = 20}, .fmt = REPORT_TEXT};
	int first, rc;
	if (!(a.metrics = calloc((size_t)argc + 1, sizeof *a.metrics)))
		return fail_internal(&ctx->err, "out of memory");
	rc = opts_parse(&report_spec, argc, argv, on_opt, &a, &first, &ctx->err);
	if (rc == OPTS_HELP) {
		free(a.metrics);
		return ALIGN_OK;
	}
	a.o.series = a.fmt == REPORT_HTML; /* the page's charts */
	if (rc == ALIGN_OK && first < argc)
		rc = fail_input(&ctx->err, "unexpected argument '%s' (see 'align report --help')", argv[first]);
	if (rc == ALIGN_OK) {
		a.o.metrics = a.metrics;
		rc = report_main(&a);
	}
	free(a.metrics);
	return rc;
}
