/* ctx.h: the one context of a command, made by main and passed down to every function that needs
 * the database, the output, the modes, the device or a place for its error message.
 *
 * Errors: a function that fails calls err_input(&ctx->err, ...) / err_internal(...) (err.h) at the
 * point of failure and returns the status; main prints ctx->err once ("error: <msg>"). A module that
 * keeps its own state struct holds a pointer to this context (or to its err) rather than a copy.
 */
#ifndef ALIGN_CTX_H
#define ALIGN_CTX_H

#include <stdio.h>

#include "modes.h"
#include "status.h"

struct sqlite3;
struct align_dev;

struct align_ctx {
	struct align_err err;	  /* the one error message of this command; main prints it */
	const char *db_path;	  /* --db, else $ALIGN_DB, else ./align.db (cmd_db_path) */
	struct sqlite3 *db;	  /* the store once a command opened it (store_open), else NULL */
	FILE *out;		  /* where the command writes its result: stdout, or the file of --out */
	struct align_modes modes; /* resolved once: defaults < profile < environment < --mode */
	struct align_dev *dev;	  /* the device context (kernels/cuda/dev.h), opened on first use; NULL on CPU */
	char **envp;		  /* the environment the modes and bisect trials read */
	int quiet;		  /* --quiet: no warnings or progress on stderr */
};

/* A context for a command: no database, stdout, default modes, no device, no error. */
void ctx_init(struct align_ctx *ctx, char **envp);
/* Close what the command opened (database, device). Keeps err. */
void ctx_close(struct align_ctx *ctx);

#endif
