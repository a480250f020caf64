/* cmd-explain: align explain --op OP --inputs IN.safetensors --output OUT.safetensors [--shape ..]
 *                            [--variant K] [--mode KEY=VALUE]... [-j N] [--format text|json|md]
 *                            [--max-replays N] [--no-screen] [--device cpu]
 *              align explain --op OP --runs A,B [--record NAME] [--db PATH] [...]
 * Which numeric choice made these bits: the op's C twin is replayed over the op's own switches and every
 * assignment that reproduces the observed outputs bitwise is reported (explain.h says how, and what
 * "exact" means here). Exit 0 when an assignment reproduces the output, 1 when none does, 2 on bad
 * input (the message names the file and the tensor or field). */
#include "align-config.h"
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "explain.h"
#include "opts.h"
#include "safetensors.h"
#if ALIGN_HAVE_CUDA
#include "run-device.h"
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EX_DEFAULT_MAX 200000 /* assignments: the exhaustive phase runs when the space is at most this */

struct ex_opts {
	const char *op, *inputs, *output, *shape, *format, *device, *runs, *record;
	const char *fix[EX_MAX_FIX];
	int n_fix;
	long long variant, jobs, max_replays;
	int no_screen;
};

static const struct cmd_opt ex_opt_table[] = {
	{"op", 'O', "OP", "the op (see 'align run --list'; its switches are the ones searched)", 0},
	{"inputs", 'i', "F", "safetensors with the op's inputs, named as 'align run --list' gives them", 0},
	{"output", 'o', "F", "safetensors with the observed outputs (the op's output names; a subset is fine)", 0},
	{"shape", 's', "T=16,D=64", "dims; by default the op's, then what the input shapes name", 0},
	{"variant", 'V', "K", "the op's parameter variant (as 'align run --variant')", 0},
	{"mode", 'm', "KEY=VALUE", "fix one switch: the search tries only this value (repeatable)", 0},
	{"jobs", 'j', "N", "replay on N threads (default 1)", 1},
	{"format", 'f', "F", "text (default), json (README \"Explain\" documents it) or md", 0},
	{"max-replays", 'M', "N",
	 "search every assignment when the space holds at most N (default 200000);\n"
	 "else only the profiles and their one-switch neighbours (the output says so)",
	 0},
	{"no-screen", 'N', NULL, "replay every assignment whole (no screening on the first rows)", 0},
	{"device", 'd', "D",
	 "cpu (default): the C twins, every value but the GPU-only ones; cuda: the CUDA\n"
	 "twins, every value but the CPU-only ones (one stream: -j 1, no screening;\n"
	 "builds with CUDA only)",
	 0},
	{"runs", 'R', "A,B", "two ingested runs: explain the op's record where they first differ", 0},
	{"record", 'r', "NAME", "with --runs: the records' name prefix (default the op: OP.<tensor>)", 0},
	{"db", 'D', "PATH", "database for --runs (default $ALIGN_DB or ./align.db)", 0},
	{NULL, 0, NULL, NULL, 0},
};

static int parse_int(struct align_err *e, const char *opt, const char *text, long long min, long long max,
		     long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		return fail_input(e, "option '%s': expected an integer in [%lld, %lld], got '%s'", opt, min, max, text);
	*out = v;
	return ALIGN_OK;
}

struct ex_parse {
	struct align_ctx *ctx;
	struct ex_opts *o;
};

static int ex_on_opt(void *u, int key, const char *arg)
{
	struct ex_parse *p = u;
	struct ex_opts *o = p->o;
	struct align_err *e = &p->ctx->err;
	switch (key) {
	case 'O':
		return o->op = arg, ALIGN_OK;
	case 'i':
		return o->inputs = arg, ALIGN_OK;
	case 'o':
		return o->output = arg, ALIGN_OK;
	case 's':
		return o->shape = arg, ALIGN_OK;
	case 'V':
		return parse_int(e, "--variant", arg, 0, 1000, &o->variant);
	case 'm':
		if (o->n_fix == EX_MAX_FIX)
			return fail_input(e, "too many --mode options (at most %d)", EX_MAX_FIX);
		return o->fix[o->n_fix++] = arg, ALIGN_OK;
	case 'j':
		return parse_int(e, "--jobs", arg, 1, 64, &o->jobs);
	case 'f':
		return o->format = arg, ALIGN_OK;
	case 'M':
		return parse_int(e, "--max-replays", arg, 1, 1LL << 40, &o->max_replays);
	case 'N':
		return o->no_screen = 1, ALIGN_OK;
	case 'd':
		return o->device = arg, ALIGN_OK;
	case 'R':
		return o->runs = arg, ALIGN_OK;
	case 'r':
		return o->record = arg, ALIGN_OK;
	case 'D':
		return p->ctx->db_path = arg, ALIGN_OK;
	default:
		return fail_internal(e, "option key %d has no handler", key);
	}
}

static int check_opts(struct align_ctx *ctx, const struct ex_opts *o)
{
	struct align_err *e = &ctx->err;
	if (strcmp(o->format, "text") && strcmp(o->format, "json") && strcmp(o->format, "md"))
		return fail_input(e, "option '--format': '%s' is not text, json or md", o->format);
	if (!strcmp(o->device, "cuda") && !ALIGN_HAVE_CUDA)
		return fail_input(e, "--device 'cuda': this build has no CUDA (explain replays the C twins; GPU-only "
				     "values are listed as not searched)");
	if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda"))
		return fail_input(e, "--device '%s': not a device (cpu or cuda)", o->device);
	if (!o->op)
		return fail_input(e, "no op given: --op OP (see 'align run --list')");
	if (!ops_find(o->op))
		return fail_input(e, "unknown op '%s' (see 'align run --list')", o->op);
	if (o->runs && (o->inputs || o->output))
		return fail_input(e,
				  "--runs reads the inputs and outputs from the database: drop --inputs and --output");
	if (!o->runs && (!o->inputs || !o->output))
		return fail_input(e, "give --inputs and --output (safetensors), or --runs A,B");
	if (o->record && !o->runs)
		return fail_input(e, "--record needs --runs");
	return ALIGN_OK;
}

/* search and describe one case; *found = assignments that reproduce it */
static int explain_case(struct align_ctx *ctx, const struct ex_opts *o, struct ex_case *c, struct ex_search *s,
			struct ex_answer *ans)
{
	memset(s, 0, sizeof *s);
	int cuda = !strcmp(o->device, "cuda");
	s->ctx = ctx, s->c = c, s->jobs = cuda ? 1 : (int)o->jobs,
	s->device = cuda ? ALIGN_DEVICE_CUDA : ALIGN_DEVICE_CPU;
	s->dev = ctx->dev;
	/* on the GPU the rows of a 2-row replay need not be those of the whole (vendor GEMMs choose their
	 * algorithm by the row count): every assignment is replayed whole */
	s->max_replays = (uint64_t)o->max_replays, s->screen = !o->no_screen && !cuda;
	ALIGN_TRY(&ctx->err, ex_space_init(s, o->fix, o->n_fix));
	ALIGN_TRY(&ctx->err, ex_search_run(s));
	return ex_describe(s, ans);
}

static int explain_files(struct align_ctx *ctx, const struct ex_opts *o)
{
	struct ex_case c = {.op = ops_find(o->op)};
	struct st_file inf = {0}, outf = {0};
	struct ex_search s;
	memset(&s, 0, sizeof s);
	struct ex_answer *ans = calloc(1, sizeof *ans);
	int rc = ans ? ex_load_files(ctx, &c, o->inputs, o->output, o->shape, (int)o->variant, &inf, &outf)
		     : fail_internal(&ctx->err, "out of memory");
	if (!rc)
		rc = explain_case(ctx, o, &c, &s, ans);
	if (!rc)
		rc = ex_render(&s, ans, o->format, ctx->out);
	if (!rc && !s.n_match)
		rc = ALIGN_DIFF;
	ex_search_free(&s);
	ex_case_free(&c);
	safetensors_free(&inf);
	safetensors_free(&outf);
	free(ans);
	return rc;
}

static int explain_runs(struct align_ctx *ctx, const struct ex_opts *o)
{
	struct ex_case c[2] = {{.op = ops_find(o->op)}, {.op = ops_find(o->op)}};
	struct ex_search s[2];
	memset(s, 0, sizeof s);
	struct ex_answer *ans = calloc(2, sizeof *ans);
	const char *names[2] = {0};
	int rc = ans ? ex_load_runs(ctx, o->runs, o->record, c, names) : fail_internal(&ctx->err, "out of memory");
	for (int k = 0; k < 2 && !rc; k++)
		rc = ex_case_prepare(ctx, &c[k], o->shape, (int)o->variant, o->no_screen ? 0 : EX_SCREEN_ROWS);
	for (int k = 0; k < 2 && !rc; k++)
		rc = explain_case(ctx, o, &c[k], &s[k], &ans[k]);
	if (!rc) {
		struct ex_search *sp[2] = {&s[0], &s[1]};
		const struct ex_answer *ap[2] = {&ans[0], &ans[1]};
		rc = ex_render_pair(sp, ap, names, o->format, ctx->out);
	}
	if (!rc && (!s[0].n_match || !s[1].n_match))
		rc = ALIGN_DIFF;
	for (int k = 0; k < 2; k++) {
		ex_search_free(&s[k]);
		ex_case_free(&c[k]);
		free((char *)names[k]);
	}
	free(ans);
	return rc;
}

int cmd_explain(struct align_ctx *ctx, int argc, char **argv)
{
	const struct cmd_spec spec = {
		"usage: align explain --op OP --inputs IN.safetensors --output OUT.safetensors [options]\n"
		"       align explain --op OP --runs A,B [--record NAME] [options]",
		"Which numeric choice made these bits: replay the op's C twin over its switches (the ALIGN_*\n"
		"modes it reads) and report every assignment that reproduces the observed outputs bitwise, as\n"
		"the fewest descriptions (switches that matter, the rest \"any\"), with the closest profile; when\n"
		"none does, the closest assignments with their element-level comparison. Exit 0 when one\n"
		"reproduces the output, 1 when none does, 2 on bad input.",
		ex_opt_table,
		"Every reported assignment was replayed on the whole input and compared bit for bit. The search\n"
		"screens each assignment on the first rows (ops whose rows are independent), replays whole the\n"
		"ones that agree, caches replays by assignment, and is exhaustive when the space fits in\n"
		"--max-replays; 'no assignment reproduces' is only claimed then (README \"Explain\")."};
	struct ex_opts o = {.format = "text", .device = "cpu", .jobs = 1, .max_replays = EX_DEFAULT_MAX};
	struct ex_parse p = {ctx, &o};
	int first;
	int rc = opts_parse(&spec, argc, argv, ex_on_opt, &p, &first, &ctx->err);
	if (rc == OPTS_HELP)
		return ALIGN_OK;
	if (rc)
		return rc;
	if (first != argc)
		return fail_input(&ctx->err, "unexpected argument '%s' (the op is given with --op)", argv[first]);
	ALIGN_TRY(&ctx->err, check_opts(ctx, &o));
	struct align_modes env; /* ALIGN_* variables are checked (an unknown one is an error) but not used */
	ALIGN_TRY(&ctx->err, ctx_resolve_modes(ctx, &env, NULL, 1, NULL, 0));
#if ALIGN_HAVE_CUDA
	struct align_dev dev;
	memset(&dev, 0, sizeof dev);
	if (!strcmp(o.device, "cuda")) {
		ALIGN_TRY(&ctx->err, run_device_open(&dev, &ctx->err));
		ctx->dev = &dev;
	}
#endif
	rc = o.runs ? explain_runs(ctx, &o) : explain_files(ctx, &o);
#if ALIGN_HAVE_CUDA
	if (ctx->dev)
		run_device_close(ctx->dev);
	ctx->dev = NULL;
#endif
	return rc;
}
