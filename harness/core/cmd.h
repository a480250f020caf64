/* cmd: the subcommand entry points (one cmd-<name>.c each) and shared option helpers. */
#ifndef ALIGN_CMD_H
#define ALIGN_CMD_H

#define ALIGN_DEFAULT_DB "align.db"
#define ALIGN_BUSY_MS 5000

struct align_ctx;

#define COMMAND(name, fn, summary) int fn(struct align_ctx *ctx, int argc, char **argv);
#include "commands.def"
#undef COMMAND

/* Resolve the database path: --db wins, then $ALIGN_DB, then align.db in the working directory. */
const char *cmd_db_path(const char *opt);
struct align_err;

/* Parse an integer option value in [min, max]; returns 0, or sets the message in e and returns
 * ALIGN_EINPUT. */
int cmd_parse_int_err(const char *opt, const char *text, long long min, long long max, long long *out,
		      struct align_err *e);
/* TRANSITIONAL: cmd_parse_int_err(..., NULL) (prints the message at once). */
int cmd_parse_int(const char *opt, const char *text, long long min, long long max, long long *out);

#endif
