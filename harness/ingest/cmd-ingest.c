/* cmd-ingest: align ingest [--db PATH] [--as NAME] [--append] [--occurrences] [--format F]
 *                          [--micro-batches N] [--order main,mtp] [--quiet] [--list-formats] FILE...
 * The options are the table below (opts.h), which also prints --help. */
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "ingest.h"
#include "ingest-walk.h"
#include "opts.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

enum {
	OPT_DB = 'd',
	OPT_AS = 'a',
	OPT_APPEND = 'A',
	OPT_FORMAT = 'f',
	OPT_MB = 'm',
	OPT_ORDER = 'o',
	OPT_QUIET = 'q',
	OPT_LIST = 'L',
	OPT_OCC = 'O'
};

static const struct cmd_opt ingest_opts_table[] = {
	{"db", OPT_DB, "PATH", "database (default $ALIGN_DB or ./align.db)", 0},
	{"as", OPT_AS, "NAME", "ingest every FILE into one run NAME (per-rank files of one job)", 0},
	{"append", OPT_APPEND, NULL, "add FILEs to an existing run NAME", 0},
	{"occurrences", OPT_OCC, NULL,
	 "files of one run that hold the same key (name, rank, step, micro) are\n"
	 "further occurrences of it (default: the same record, kept once when\n"
	 "equal, an error when the values differ)",
	 0},
	{"format", OPT_FORMAT, "F", "skip detection (see --list-formats)", 0},
	{"micro-batches", OPT_MB, "N", "anchors without step numbers: N micro-batches per step (default 1)", 0},
	{"order", OPT_ORDER, "A,B",
	 "anchors: print order of the losses of one micro-batch (default main;\n"
	 "PaddleFleet prints main,mtp, Megatron mtp,main)",
	 0},
	{"quiet", OPT_QUIET, NULL, "no warnings or progress on stderr", 0},
	{"list-formats", OPT_LIST, NULL, "list the formats and exit", 0},
	{NULL, 0, NULL, NULL, 0},
};

static const struct cmd_spec ingest_spec = {
	"usage: align ingest [options] FILE...",
	"Read logs and traces (plain or gzip, detected by content) into the database, one transaction\n"
	"per file. Content a run already holds is not ingested into it again (the same bytes into\n"
	"another run are ingested there). A file that yields no record is an error.",
	ingest_opts_table,
	NULL,
};

/* What the options set. */
struct ingest_args {
	struct align_ctx *ctx;
	const char *db, *as, *format; /* --db, --as, --format (NULL: not given) */
	int append;		      /* --append */
	struct ingest_opts io;	      /* --micro-batches, --order, --quiet, --occurrences */
};

/* --order A,B: up to 8 names, each main or mtp[K] (ingest-anchor checks K and repeats). */
static int parse_order(const char *text, struct ingest_opts *o, struct align_err *e)
{
	o->n_order = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", text);
	for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->n_order == 8)
			return fail_input(e, "option '--order': at most 8 names");
		if (strcmp(tok, "main") && strncmp(tok, "mtp", 3))
			return fail_input(e, "option '--order': '%s' is not 'main' or 'mtp[K]'", tok);
		snprintf(o->order[o->n_order++], sizeof o->order[0], "%s", tok);
	}
	return o->n_order ? ALIGN_OK : fail_input(e, "option '--order': empty list");
}

/* One option (cmd_opt_fn). --list-formats prints the list and stops the parse (like --help). */
static int on_opt(void *u, int key, const char *arg)
{
	struct ingest_args *a = u;
	struct align_err *e = &a->ctx->err;
	long long mb;
	switch (key) {
	case OPT_DB:
		a->db = arg;
		break;
	case OPT_AS:
		a->as = arg;
		break;
	case OPT_APPEND:
		a->append = 1;
		break;
	case OPT_OCC:
		a->io.occurrences = 1;
		break;
	case OPT_FORMAT:
		a->format = arg;
		break;
	case OPT_MB:
		ALIGN_TRY(e, cmd_parse_int_err("--micro-batches", arg, 1, 1 << 20, &mb, e));
		a->io.micro_batches = (int)mb;
		break;
	case OPT_ORDER:
		return parse_order(arg, &a->io, e);
	case OPT_QUIET:
		a->io.quiet = a->ctx->quiet = 1;
		break;
	case OPT_LIST:
		ingest_formats_print(stdout);
		return OPTS_HELP;
	default:
		return fail_internal(e, "option key %d has no handler", key);
	}
	return ALIGN_OK;
}

int cmd_ingest(struct align_ctx *ctx, int argc, char **argv)
{
	struct ingest_args a = {.ctx = ctx, .io = {.micro_batches = 1, .n_order = 1, .order = {"main"}}};
	struct align_err *e = &ctx->err;
	int first = argc;
	int rc = opts_parse(&ingest_spec, argc, argv, on_opt, &a, &first, e);
	if (rc == OPTS_HELP)
		return ALIGN_OK;
	if (rc)
		return rc; /* the message names the option and points at --help */
	if (first >= argc) {
		opts_usage(&ingest_spec, stderr);
		return fail_input(e, "no input files");
	}
	if (a.append && !a.as)
		return fail_input(e, "--append needs --as NAME");
	if (a.format && !ingest_format_find(a.format))
		return fail_input(e, "unknown format '%s' (see 'align ingest --list-formats')", a.format);
	ctx->db_path = cmd_db_path(a.db);
	/* another ingest into the database holds its write lock for a whole file: wait for it, however long */
	ALIGN_TRY(e, store_open_err(ctx->db_path, STORE_WRITE,
				    a.io.quiet ? STORE_WAIT_UNBOUNDED_QUIET : STORE_WAIT_UNBOUNDED, &ctx->db, e));
	/* the database is closed by ctx_close in main */
	return ingest_paths_err(ctx->db, ctx->db_path, a.as, a.append, a.format, &a.io, argv + first, argc - first, e);
}
