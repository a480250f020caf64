/* main: dispatch to the subcommand named by argv[1]; the only place that calls exit. */
#include "align-config.h"
#include "cmd.h"
#include "ctx.h"
#include "err.h"

#include <stdio.h>
#include <string.h>

struct command {
	const char *name;
	int (*fn)(struct align_ctx *ctx, int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
#define COMMAND(name, fn, summary) {#name, fn, summary},
#include "commands.def"
#undef COMMAND
};

static void usage(FILE *out)
{
	fprintf(out, "usage: align <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'align <command> --help' describes each one. Exit codes: 0 ok or all equal, 1 differences"
		     " found, 2 usage or input error, 3 internal or device error.\n");
}

extern char **environ;

/* Run one command with a fresh context; print its error once; map the status to the exit code. */
static int run_command(const struct command *c, int argc, char **argv)
{
	struct align_ctx ctx;
	ctx_init(&ctx, environ);
	int rc = c->fn(&ctx, argc, argv);
	ctx_close(&ctx);
	err_print(&ctx.err);
	if (rc == ALIGN_ERR_UNSUPPORTED)
		rc = ALIGN_ERR_INPUT; /* the request cannot run here: a usage error for the caller */
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return ALIGN_EINPUT;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return ALIGN_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("align %s\n", ALIGN_VERSION);
		return ALIGN_OK;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return run_command(&commands[i], argc - 1, argv + 1);
	struct align_err e = {0};
	int rc = fail_input(&e, "'%s' is not an align command (see 'align --help')", argv[1]);
	err_print(&e);
	return rc;
}
