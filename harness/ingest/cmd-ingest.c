/* cmd-ingest: align ingest [--db PATH] [--as NAME] [--append] [--format F] [--micro-batches N]
 *                          [--order main,mtp] [--quiet] FILE... */
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "ingest.h"
#include "store.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void ingest_usage(FILE *out)
{
	fprintf(out,
	        "usage: align ingest [options] FILE...\n"
	        "\n"
	        "Read logs and traces (plain or gzip, detected by content) into the database, one transaction\n"
	        "per file. Re-ingesting identical content does nothing.\n"
	        "\n"
	        "  --db PATH            database (default $ALIGN_DB or ./align.db)\n"
	        "  --as NAME            ingest every FILE into one run NAME (per-rank files of one job)\n"
	        "  --append             add FILEs to an existing run NAME\n"
	        "  --format F           skip detection (see --list-formats)\n"
	        "  --micro-batches N    anchors without step numbers: N micro-batches per step (default 1)\n"
	        "  --order A,B          anchors: print order of the losses of one micro-batch (default main;\n"
	        "                       PaddleFleet prints main,mtp, Megatron mtp,main)\n"
	        "  --quiet              no warnings or progress on stderr\n"
	        "  --list-formats       list the formats and exit\n"
	        "  -h, --help           this text\n");
}

static int list_formats(void)
{
	size_t n;
	const struct ingest_format *const *f = ingest_formats(&n);
	for (size_t i = 0; i < n; i++)
		printf("%-16s %-10s %s\n", f[i]->name, f[i]->framework, f[i]->summary);
	return ALIGN_OK;
}

static int parse_order(const char *text, struct ingest_opts *o)
{
	o->n_order = 0;
	char buf[256];
	snprintf(buf, sizeof buf, "%s", text);
	for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->n_order == 8)
			return err_input("option '--order': at most 8 names");
		if (strcmp(tok, "main") && strncmp(tok, "mtp", 3))
			return err_input("option '--order': '%s' is not 'main' or 'mtp[K]'", tok);
		snprintf(o->order[o->n_order++], sizeof o->order[0], "%s", tok);
	}
	return o->n_order ? ALIGN_OK : err_input("option '--order': empty list");
}

int cmd_ingest(struct align_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"db", required_argument, 0, 'd'},     {"as", required_argument, 0, 'a'},
		{"append", no_argument, 0, 'A'},       {"format", required_argument, 0, 'f'},
		{"micro-batches", required_argument, 0, 'm'}, {"order", required_argument, 0, 'o'},
		{"quiet", no_argument, 0, 'q'},        {"list-formats", no_argument, 0, 'L'},
		{"help", no_argument, 0, 'h'},         {0, 0, 0, 0},
	};
	const char *db_opt = NULL, *as = NULL, *format = NULL;
	int append = 0, c, rc;
	long long mb;
	struct ingest_opts io = {.micro_batches = 1, .n_order = 1, .order = {"main"}};
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': db_opt = optarg; break;
		case 'a': as = optarg; break;
		case 'A': append = 1; break;
		case 'f': format = optarg; break;
		case 'm':
			if ((rc = cmd_parse_int("--micro-batches", optarg, 1, 1 << 20, &mb)))
				return rc;
			io.micro_batches = (int)mb;
			break;
		case 'o':
			if ((rc = parse_order(optarg, &io)))
				return rc;
			break;
		case 'q': io.quiet = 1; break;
		case 'L': return list_formats();
		case 'h': ingest_usage(stdout); return ALIGN_OK;
		default: ingest_usage(stderr); return ALIGN_EINPUT;
		}
	}
	if (optind >= argc) {
		ingest_usage(stderr);
		return err_input("no input files");
	}
	if (append && !as)
		return err_input("--append needs --as NAME");
	if (format && !ingest_format_find(format))
		return err_input("unknown format '%s' (see 'align ingest --list-formats')", format);
	const char *path = cmd_db_path(db_opt);
	sqlite3 *db;
	if ((rc = store_open(path, STORE_WRITE, ALIGN_BUSY_MS, &db)))
		return rc;
	rc = ingest_files(db, path, as, append, format, &io, argv + optind, argc - optind);
	store_close(db);
	return rc;
}
