/* ctx.c: making and closing the command context (ctx.h). */
#include "ctx.h"

#include <sqlite3.h>
#include <string.h>

void ctx_init(struct align_ctx *ctx, char **envp)
{
	memset(ctx, 0, sizeof *ctx);
	ctx->out = stdout;
	ctx->envp = envp;
	modes_init_default(&ctx->modes);
}

void ctx_close(struct align_ctx *ctx)
{
	if (ctx->db) {
		sqlite3_close(ctx->db);
		ctx->db = NULL;
	}
	if (ctx->out && ctx->out != stdout) {
		fclose(ctx->out);
		ctx->out = stdout;
	}
}
