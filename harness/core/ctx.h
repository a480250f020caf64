/* ctx.h: the one context of a command, made by main and passed down to every function that needs
 * the database, the output, the modes, the device or a place for its error message.
 *
 * Errors: a function that fails calls fail_input(&ctx->err, ...) / fail_internal(...) (err.h) at the
 * point of failure and returns the status; main prints ctx->err once ("error: <msg>"). A module that
 * keeps its own state struct holds a pointer to this context (or to its err) rather than a copy.
 *
 * The device: the command that needs one owns the struct align_dev (align run: cmd-run.c, opened once
 * per process through run-device.h), points dev at it while it is open and closes it itself, so that
 * ctx_close needs no CUDA header.
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
	struct align_dev *dev;	  /* the open device context (kernels/cuda/dev.h) of the command; NULL on CPU */
	char **envp;		  /* the environment the modes and bisect trials read */
	int quiet;		  /* --quiet: no warnings or progress on stderr */
};

/* A context for a command: no database, stdout, default modes, no device, no error. */
void ctx_init(struct align_ctx *ctx, char **envp);
/* Close what the command opened (database, output file; the device is closed by its owner). Keeps err. */
void ctx_close(struct align_ctx *ctx);
/* Resolve modes into m: default < profile (when not NULL) < environment (ctx->envp, when use_env) <
 * the n_kv "KEY=VALUE" of --mode. ALIGN_ERR_INPUT with the registry's message (it lists the valid
 * names) in ctx->err. */
int ctx_resolve_modes(struct align_ctx *ctx, struct align_modes *m, const char *profile, int use_env,
		      const char *const *kv, int n_kv);

#endif
