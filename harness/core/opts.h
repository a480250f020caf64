/* opts.h: each command's options declared once, in one table that drives both the parser
 * (getopt_long) and the --help text.
 *
 *   static const struct cmd_opt opts[] = {
 *       {"db", 'd', "PATH", "database (default $ALIGN_DB or ./align.db)"},
 *       {"quiet", 'q', NULL, "no warnings or progress on stderr"},
 *       {NULL},
 *   };
 *   static const struct cmd_spec spec = {"usage: align ingest [options] FILE...", "Read logs ...", opts, NULL};
 *   rc = opts_parse(&spec, argc, argv, on_opt, &state, &first, &ctx->err);
 *
 * -h / --help is implicit: it prints the text on stdout and opts_parse returns OPTS_HELP (the command
 * returns ALIGN_OK). An unknown option or a missing argument sets a message naming it and returns
 * ALIGN_ERR_INPUT. on_opt is called once per option in command-line order with the row's key and its
 * argument (NULL for a flag); its non-zero return stops the parse and is returned.
 */
#ifndef ALIGN_OPTS_H
#define ALIGN_OPTS_H

#include <stdio.h>

#include "status.h"

struct cmd_opt {
	const char *name; /* long name without "--"; NULL ends the table */
	int key;	  /* what on_opt receives: a letter (also the short option when short_ok) or >= 256 */
	const char *arg;  /* the argument's placeholder ("PATH"), NULL for a flag */
	const char *help; /* its help; '\n' starts a continuation line */
	int short_ok;	  /* 1: also accept -<key> */
};

struct cmd_spec {
	const char *usage;	    /* "usage: align ingest [options] FILE..." (may hold several lines) */
	const char *intro;	    /* the paragraph under the usage, or NULL */
	const struct cmd_opt *opts; /* the table */
	const char *outro;	    /* text after the options (examples, notes), or NULL */
};

#define OPTS_HELP (-1) /* opts_parse printed --help */

typedef int (*cmd_opt_fn)(void *u, int key, const char *arg);

/* the --help text of spec */
void opts_usage(const struct cmd_spec *spec, FILE *out);
/* Parse argv[1..]; *first_arg = index of the first operand. */
int opts_parse(const struct cmd_spec *spec, int argc, char **argv, cmd_opt_fn on_opt, void *u, int *first_arg,
	       struct align_err *e);

#endif
