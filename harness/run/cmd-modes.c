/* cmd-modes: align modes [--profile P] [--mode K=V]... [--format text|json|md] [--diff P1 P2]
 * Prints every numeric switch of kernels/core/modes.def with its resolved value and where the value came
 * from (default < profile < environment < --mode), or the switches on which two profiles differ.
 * `--format md` is the README's modes table (a test keeps the README equal to it). */
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "modes.h"

#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

extern char **environ;



static void modes_usage(FILE *out)
{
	fprintf(out, "usage: align modes [--profile P] [--mode KEY=VALUE]... [--format text|json|md]\n"
	             "       align modes --diff P1 P2\n"
	             "\n"
	             "List every numeric switch (ALIGN_* variable) with its value and where the value came from:\n"
	             "built-in default < --profile < environment < --mode. Profiles: ");
	for (const char *const *p = modes_profiles(); *p; p++)
		fprintf(out, "%s%s", *p, p[1] ? ", " : "\n");
	fprintf(out, "\n  --diff P1 P2   only the switches on which two profiles differ\n"
	             "  --format F     text (default), json, or md (the README table)\n"
	             "  -h, --help     this text\n");
}

/* Resolve modes: default < profile < environment < command line. */
static int resolve(struct align_modes *m, const char *profile, int use_env, char **kv, int n_kv)
{
	char err[512];
	modes_init_default(m);
	if (profile && modes_apply_profile(m, profile, err, sizeof err))
		return err_input("%s", err);
	if (use_env && modes_apply_env(m, environ, err, sizeof err))
		return err_input("%s", err);
	for (int i = 0; i < n_kv; i++)
		if (modes_apply_kv(m, kv[i], err, sizeof err))
			return err_input("%s", err);
	return ALIGN_OK;
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
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", in->id, "env", in->env,
		                                     "value", modes_value_name(id, m->v[id]), "from", modes_src_name(m->src[id]),
		                                     "values", modes_values_text(id, vals, sizeof vals), "default",
		                                     modes_default_name(id), "meaning", in->meaning));
	}
	json_t *root = json_pack("{s:s?, s:o}", "profile", m->profile[0] ? m->profile : NULL, "modes", arr);
	char *s = json_dumps(root, JSON_INDENT(2));
	puts(s);
	free(s);
	json_decref(root);
}

static int print_diff(const char *p1, const char *p2, const char *format)
{
	struct align_modes a, b;
	int rc;
	if ((rc = resolve(&a, p1, 0, NULL, 0)) || (rc = resolve(&b, p2, 0, NULL, 0)))
		return rc;
	int n = 0;
	json_t *arr = json_array();
	for (int id = 0; id < MODE_COUNT; id++) {
		if (a.v[id] == b.v[id])
			continue;
		const struct align_mode_info *in = modes_info(id);
		if (!strcmp(format, "json"))
			json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "env", in->env, p1, modes_value_name(id, a.v[id]),
			                                     p2, modes_value_name(id, b.v[id])));
		else
			printf("%-34s %-14s %-14s %s\n", in->env, modes_value_name(id, a.v[id]), modes_value_name(id, b.v[id]),
			       in->meaning);
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

int cmd_modes(struct align_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"profile", required_argument, 0, 'p'}, {"mode", required_argument, 0, 'm'},
		{"format", required_argument, 0, 'f'},  {"diff", no_argument, 0, 'D'},
		{"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
	};
	const char *profile = NULL, *format = "text";
	char *kv[64];
	int n_kv = 0, diff = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': profile = optarg; break;
		case 'm':
			if (n_kv == 64)
				return err_input("too many --mode options (at most 64)");
			kv[n_kv++] = optarg;
			break;
		case 'f': format = optarg; break;
		case 'D': diff = 1; break;
		case 'h': modes_usage(stdout); return ALIGN_OK;
		default: modes_usage(stderr); return ALIGN_EINPUT;
		}
	}
	if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "md"))
		return err_input("option '--format': '%s' is not text, json or md", format);
	if (diff) {
		if (argc - optind != 2)
			return err_input("--diff needs two profile names");
		return print_diff(argv[optind], argv[optind + 1], format);
	}
	if (optind != argc)
		return err_input("unexpected argument '%s'", argv[optind]);
	if (!strcmp(format, "md")) {
		print_md();
		return ALIGN_OK;
	}
	struct align_modes m;
	int rc = resolve(&m, profile, 1, kv, n_kv);
	if (rc)
		return rc;
	if (!strcmp(format, "json"))
		print_json(&m);
	else
		print_text(&m);
	return ALIGN_OK;
}
