/* cmd-report: align report [--db PATH] [--runs A,B] [--first-diff] [--metric M]... [--all] [--map FILE]
 *                          [--format text|json|md|html] [--out F] [--limit N] [--no-stepsum]
 * Exit: 0 nothing differs, 1 something differs (differ, incomparable, only in one run), 2 usage or
 * input error, 3 internal error. --out writes through a temporary file renamed into place. */
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "report.h"
#include "store.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void report_usage(FILE *out)
{
	fprintf(out,
	        "usage: align report [options]\n"
	        "\n"
	        "Compare two runs record by record: bitwise-equal, equal as printed (bits unknown), differ, or only\n"
	        "in one run; and where the first difference is, in execution order (step, micro, seq, rank).\n"
	        "\n"
	        "  --db PATH            database (default $ALIGN_DB or ./align.db)\n"
	        "  --runs A,B           the runs to compare (default: the two runs of the database)\n"
	        "  --first-diff         stop reading after the step of the first differing value (a name in one\n"
	        "                       run only does not stop it); the --metric names, or by default every name\n"
	        "                       but job metadata, are followed to their own first difference\n"
	        "  --metric M           compare only M (any alias: 'lm loss' = loss); repeatable\n"
	        "  --all                compare job metadata too: timings, throughput, memory, consumed samples,\n"
	        "                       batch size, progress (phase 'meta'), left out by default\n"
	        "  --map FILE           name rules, one a line: REGEX -> NAME (POSIX ERE on the printed name,\n"
	        "                       first match wins, '#' comments); reads every record; implies --all\n"
	        "  --format F           text (default), md, json or html: one self-contained page with a chart\n"
	        "                       of each scalar metric's |a-b|/|a| per step (no step is skipped by its\n"
	        "                       summary: the charts need every step's values)\n"
	        "  --out F              write the report to F (atomically) instead of stdout\n"
	        "  --limit N            differing records listed (default 20)\n"
	        "  --no-stepsum         read every record instead of skipping steps with equal summaries\n"
	        "  -h, --help           this text\n"
	        "\n"
	        "Exit status: 0 nothing differs, 1 differences (values, or names in one run only), 2 usage or\n"
	        "input error, 3 internal error.\n");
}

static int parse_runs(const char *text, char *buf, size_t len, struct report_opts *o)
{
	snprintf(buf, len, "%s", text);
	char *comma = strchr(buf, ',');
	if (!comma || comma == buf || !comma[1] || strchr(comma + 1, ','))
		return err_input("option '--runs': expected two run names 'A,B', got '%s'", text);
	*comma = '\0';
	o->run_a = buf;
	o->run_b = comma + 1;
	return ALIGN_OK;
}

static int parse_format(const char *text, enum report_format *f)
{
	static const struct { const char *name; enum report_format f; } formats[] = {
		{"text", REPORT_TEXT}, {"json", REPORT_JSON}, {"md", REPORT_MD}, {"html", REPORT_HTML},
	};
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (!strcmp(text, formats[i].name)) {
			*f = formats[i].f;
			return ALIGN_OK;
		}
	return err_input("option '--format': unknown format '%s' (expected text, json, md or html)", text);
}

/* --out: a temporary file beside the target, renamed over it once complete. */
struct out_file {
	const char *path;
	char tmp[4096];
	FILE *f;
};

static int out_open(struct out_file *o)
{
	if (snprintf(o->tmp, sizeof o->tmp, "%s.tmp.XXXXXX", o->path) >= (int)sizeof o->tmp)
		return err_input("option '--out': path too long");
	int fd = mkstemp(o->tmp);
	if (fd < 0)
		return err_input("cannot write '%s': %s", o->path, strerror(errno));
	mode_t mask = umask(0); /* mkstemp makes 0600; the report gets the usual 0666 & ~umask */
	umask(mask);
	fchmod(fd, 0666 & ~mask);
	if (!(o->f = fdopen(fd, "w"))) {
		close(fd);
		unlink(o->tmp);
		return err_internal("cannot write '%s': %s", o->tmp, strerror(errno));
	}
	return ALIGN_OK;
}

static int out_commit(struct out_file *o)
{
	int bad = fflush(o->f) != 0 || fsync(fileno(o->f)) != 0;
	bad |= fclose(o->f) != 0;
	o->f = NULL;
	if (bad || rename(o->tmp, o->path) != 0) {
		int e = errno;
		unlink(o->tmp);
		return err_input("cannot write '%s': %s", o->path, strerror(e));
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

static int report_main(const char *db_opt, const struct report_opts *ro, enum report_format fmt, const char *out_path)
{
	struct out_file of = {.path = out_path};
	int rc;
	if (out_path && (rc = out_open(&of)))
		return rc;
	const char *path = cmd_db_path(db_opt);
	struct report_opts o = *ro;
	o.db_path = path;
	sqlite3 *db;
	if ((rc = store_open(path, STORE_READ, ALIGN_BUSY_MS, &db))) {
		out_abort(&of);
		return rc;
	}
	struct report r;
	rc = report_compute(db, &o, &r);
	store_close(db);
	if (rc) {
		out_abort(&of);
		return rc;
	}
	if (report_render(&r, fmt, out_path ? of.f : stdout)) {
		out_abort(&of);
		report_free(&r);
		return err_internal("cannot write the report to %s: %s", out_path ? out_path : "stdout", strerror(errno));
	}
	rc = out_path ? out_commit(&of) : (fflush(stdout) ? err_internal("cannot write to stdout: %s", strerror(errno)) : ALIGN_OK);
	if (rc == ALIGN_OK)
		rc = report_exit_code(&r);
	report_free(&r);
	return rc;
}

int cmd_report(struct align_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"db", required_argument, 0, 'd'},     {"runs", required_argument, 0, 'r'},
		{"first-diff", no_argument, 0, 'F'},   {"metric", required_argument, 0, 'm'},
		{"map", required_argument, 0, 'M'},    {"format", required_argument, 0, 'f'},
		{"out", required_argument, 0, 'o'},    {"limit", required_argument, 0, 'l'},
		{"no-stepsum", no_argument, 0, 'S'},   {"all", no_argument, 0, 'A'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *db_opt = NULL, *out_path = NULL;
	char runs_buf[512];
	struct report_opts o = {.limit = 20};
	enum report_format fmt = REPORT_TEXT;
	const char **metrics = calloc((size_t)argc + 1, sizeof *metrics);
	long long n;
	int c, rc = ALIGN_OK;
	if (!metrics)
		return err_internal("out of memory");
	optind = 1;
	while (rc == ALIGN_OK && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db_opt = optarg; break;
		case 'r': rc = parse_runs(optarg, runs_buf, sizeof runs_buf, &o); break;
		case 'F': o.first_diff = 1; break;
		case 'm': metrics[o.n_metrics++] = optarg; break;
		case 'M': o.map_path = optarg; break;
		case 'f': rc = parse_format(optarg, &fmt); break;
		case 'o': out_path = optarg; break;
		case 'l':
			if (!(rc = cmd_parse_int("--limit", optarg, 0, 1000000, &n)))
				o.limit = (long)n;
			break;
		case 'S': o.no_stepsum = 1; break;
		case 'A': o.all = 1; break;
		case 'h': report_usage(stdout); free(metrics); return ALIGN_OK;
		default: report_usage(stderr); rc = ALIGN_EINPUT; break;
		}
	}
	o.series = fmt == REPORT_HTML; /* the page's charts */
	if (rc == ALIGN_OK && optind < argc)
		rc = err_input("unexpected argument '%s' (see 'align report --help')", argv[optind]);
	if (rc == ALIGN_OK) {
		o.metrics = metrics;
		rc = report_main(db_opt, &o, fmt, out_path);
	}
	free(metrics);
	return rc;
}
