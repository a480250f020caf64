/* cmd-modes: align modes [--profile P] [--mode K=V]... [--format text|json|md] [--diff P1 P2]
 * Prints every numeric switch of kernels/core/modes.def with its resolved value and where the value came
 * from (default < profile < environment < --mode, resolved once into ctx->modes), or the switches on
 * which two profiles differ. `--format md` is the README's modes table (a test keeps the README equal
 * to it). Options: one table (opts.h) that also prints --help; the profiles come from profiles.def. */
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "modes.h"
#include "opts.h"

#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define MODES_MAX_KV 64 /* --mode options */

static const struct cmd_opt modes_opt_table[] = {
	{"profile", 'p', "P", "apply profile P (listed below) on top of the defaults", 0},
	{"mode", 'm', "KEY=VALUE", "set one switch (repeatable; beats the environment and the profile)", 0},
	{"diff", 'D', NULL, "only the switches on which two profiles (the operands P1 P2) differ", 0},
	{"format", 'f', "F", "text (default), json, or md (the README table)", 0},
	{NULL, 0, NULL, NULL, 0},
};

/* The profiles of profiles.def with what each reproduces, under the options of --help. */
static void modes_help_outro(char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "profiles:");
	for (const char *const *p = modes_profiles(); *p && used < len; p++)
		used += (size_t)snprintf(buf + used, len - used, "\n  %-20s %s", *p, modes_profile_meaning(*p));
}
/* the value list with GPU-only values starred ("portable|libm|cuda*|cuda_fast*") */
static void values_marked(int id, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int v = 0; v < modes_value_count(id) && used < len; v++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s%s", v ? "|" : "", modes_value_name(id, v),
					 modes_value_gpu_only(id, v) ? "*" : "");
}

static void print_text(const struct align_modes *m)
{
	printf("%-34s %-14s %-8s %s\n", "SWITCH", "VALUE", "FROM", "VALUES (* GPU only): MEANING");
	for (int id = 0; id < MODE_COUNT; id++) {
		const struct align_mode_info *in = modes_info(id);
		char vals[256];
		values_marked(id, vals, sizeof vals);
		printf("%-34s %-14s %-8s %s: %s\n", in->env, modes_value_name(id, m->v[id]), modes_src_name(m->src[id]),
		       vals, in->meaning);
	}
}

static void print_md(void)
{
	printf("| switch | values (* GPU only) | default | meaning | mimics |\n| --- | --- | --- | --- | --- |\n");
	for (int id = 0; id < MODE_COUNT; id++) {
		const struct align_mode_info *in = modes_info(id);
		char vals[256], mimics[1024];
		values_marked(id, vals, sizeof vals);
		printf("| `%s` | %s | `%s` | %s | %s |\n", in->env, vals, modes_default_name(id), in->meaning,
		       modes_mimics_text(id, mimics, sizeof mimics));
	}
}

static void print_json(const struct align_modes *m)
{
	json_t *arr = json_array();
	for (int id = 0; id < MODE_COUNT; id++) {
		const struct align_mode_info *in = modes_info(id);
		char vals[256];
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", in->id, "env",
						     in->env, "value", modes_value_name(id, m->v[id]), "from",
						     modes_src_name(m->src[id]), "values",
						     modes_values_text(id, vals, sizeof vals), "default",
						     modes_default_name(id), "meaning", in->meaning));
	}
	json_t *root = json_pack("{s:s?, s:o}", "profile", m->profile[0] ? m->profile : NULL, "modes", arr);
	char *s = json_dumps(root, JSON_INDENT(2));
	puts(s);
	free(s);
	json_decref(root);
}

static int print_diff(struct align_ctx *ctx, const char *p1, const char *p2, const char *format)
{
	struct align_modes a, b;
	ALIGN_TRY(&ctx->err, ctx_resolve_modes(ctx, &a, p1, 0, NULL, 0));
	ALIGN_TRY(&ctx->err, ctx_resolve_modes(ctx, &b, p2, 0, NULL, 0));
	int n = 0;
	json_t *arr = json_array();
	for (int id = 0; id < MODE_COUNT; id++) {
		if (a.v[id] == b.v[id])
			continue;
		const struct align_mode_info *in = modes_info(id);
		if (!strcmp(format, "json"))
			json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "env", in->env, p1,
							     modes_value_name(id, a.v[id]), p2,
							     modes_value_name(id, b.v[id])));
		else
			printf("%-34s %-14s %-14s %s\n", in->env, modes_value_name(id, a.v[id]),
			       modes_value_name(id, b.v[id]), in->meaning);
		n++;
	}
	if (!strcmp(format, "json")) {
		char *s = json_dumps(arr, JSON_INDENT(2));
		puts(s);
		free(s);
	} else {
		printf("%d switch%s differ between '%s' and '%s'\n", n, n == 1 ? "" : "es", p1, p2);
	}
	json_decref(arr);
	return ALIGN_OK;
}

struct modes_parse {
	struct align_ctx *ctx;
	const char *profile, *format;
	const char *kv[MODES_MAX_KV]; /* --mode KEY=VALUE, in command-line order */
	int n_kv;
	int diff; /* --diff */
};

static int modes_on_opt(void *u, int key, const char *arg)
{
	struct modes_parse *p = u;
	switch (key) {
	case 'p':
		p->profile = arg;
		return ALIGN_OK;
	case 'm':
		if (p->n_kv == MODES_MAX_KV)
			return fail_input(&p->ctx->err, "too many --mode options (at most 64)");
		p->kv[p->n_kv++] = arg;
		return ALIGN_OK;
	case 'f':
		p->format = arg;
		return ALIGN_OK;
	case 'D':
		p->diff = 1;
		return ALIGN_OK;
	default:
		return fail_internal(&p->ctx->err, "option key %d has no handler", key);
	}
}

int cmd_modes(struct align_ctx *ctx, int argc, char **argv)
{
	char outro[2048];
	modes_help_outro(outro, sizeof outro);
	const struct cmd_spec spec = {
		"usage: align modes [--profile P] [--mode KEY=VALUE]... [--format text|json|md]\n"
		"       align modes --diff P1 P2",
		"List every numeric switch (ALIGN_* variable) with its value and where the value came from:\n"
		"built-in default < --profile < environment < --mode.",
		modes_opt_table, outro};
	struct modes_parse p = {.ctx = ctx, .format = "text"};
	int first;
	int rc = opts_parse(&spec, argc, argv, modes_on_opt, &p, &first, &ctx->err);
	if (rc == OPTS_HELP)
		return ALIGN_OK;
	if (rc)
		return rc;
	const char *format = p.format;
	if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "md"))
		return fail_input(&ctx->err, "option '--format': '%s' is not text, json or md", format);
	if (p.diff) {
		if (argc - first != 2)
			return fail_input(&ctx->err, "--diff needs two profile names");
		return print_diff(ctx, argv[first], argv[first + 1], format);
	}
	if (first != argc)
		return fail_input(&ctx->err, "unexpected argument '%s'", argv[first]);
	if (!strcmp(format, "md")) {
		print_md();
		return ALIGN_OK;
	}
	ALIGN_TRY(&ctx->err, ctx_resolve_modes(ctx, &ctx->modes, p.profile, 1, p.kv, p.n_kv));
	if (!strcmp(format, "json"))
		print_json(&ctx->modes);
	else
		print_text(&ctx->modes);
	return ALIGN_OK;
}
