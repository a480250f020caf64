/* ctx.c: making and closing the command context (ctx.h). */
#include "ctx.h"

#include "err.h"

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

int ctx_resolve_modes(struct align_ctx *ctx, struct align_modes *m, const char *profile, int use_env,
		      const char *const *kv, int n_kv)
{
	char err[ALIGN_ERR_MSG];
	modes_init_default(m);
	if (profile && modes_apply_profile(m, profile, err, sizeof err))
		return fail_input(&ctx->err, "%s", err);
	if (use_env && modes_apply_env(m, ctx->envp, err, sizeof err))
		return fail_input(&ctx->err, "%s", err);
	for (int i = 0; i < n_kv; i++)
		if (modes_apply_kv(m, kv[i], err, sizeof err))
			return fail_input(&ctx->err, "%s", err);
	return ALIGN_OK;
}
