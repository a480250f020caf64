/* cmd-run: align run OP [--profile P] [--mode K=V]... [--shape T=16,D=64] [--seed S] [--steps N]
 *                       [--variant K] [--inputs F.safetensors] [--outputs F.safetensors] [--trace F.atf]
 *                       [--device cpu|cuda]
 *          align run --list
 * Runs one DSv4 reference block (its params_default, or params_variant K) under the resolved numeric
 * modes (default < profile < environment < --mode), on inputs drawn from the counter-based RNG (seed, tensor, step) or read from safetensors,
 * and writes the outputs (safetensors) and an ATF trace (one record per input and output per step).
 * The trace goes to --trace, else to $ALIGN_TRACE when set (align bisect sets it). */
#include "align-config.h"
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "ops.h"
#include "run-trace.h"
#if ALIGN_HAVE_CUDA
#include "run-device.h"
#endif
#include "safetensors.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

struct run_opts {
	const char *op, *profile, *shape, *inputs, *outputs, *trace, *device;
	char *kv[64];
	int n_kv;
	unsigned long long seed;
	long long steps;
	long long variant; /* params_variant index (0 = the op's defaults) */
};

static void run_usage(FILE *out)
{
	fprintf(out, "usage: align run OP [options]\n"
	             "       align run --list\n"
	             "\n"
	             "Run a DSv4 reference block (C twin) under numeric modes and write its outputs and trace.\n"
	             "\n"
	             "  --profile P        megatron, paddle, paddle-accuracy, deepseek-ref; megatron-cuda,\n"
	             "                     deepseek-ref-cuda (GPU only: PyTorch eager CUDA numerics; see 'align modes')\n"
	             "  --mode KEY=VALUE   set one switch (repeatable; beats the environment and the profile)\n"
	             "  --shape T=16,D=64  dims (letters T D E K F N G H V; see --list for each op's defaults)\n"
	             "  --seed S           RNG seed of the generated inputs (default 1)\n"
	             "  --steps N          run N steps, new inputs each step (default 1)\n"
	             "  --variant K        the op's parameter variant K (default 0, the DSv4 parameters; router:\n"
	             "                     1 = sigmoid scores, 8 groups keep 4, scale 2.5; 2 = hash layer; 3 = softmax)\n"
	             "  --inputs F         read the inputs from a safetensors file (names as in --list)\n"
	             "  --outputs F        write the outputs to a safetensors file (step<k>.<name> when N > 1)\n"
	             "  --trace F          write the ATF trace to F (default $ALIGN_TRACE if set)\n"
	             "  --device D         cpu (default)%s\n"
	             "  --list             list the ops, their inputs, default dims and switches\n"
	             "  -h, --help         this text\n",
	        ALIGN_HAVE_CUDA ? " or cuda" : "; this build has no CUDA");
}

/* Block names that run several registered ops in order into one trace (DSv4's mHC is three ops). */
static const struct {
	const char *name;
	const char *ops[4];
} groups[] = {
	{"mhc", {"mhc_pre", "mhc_post", "mhc_head", NULL}},
};

static int list_ops(void)
{
	for (int i = 0; i < ALIGN_OP_COUNT; i++) {
		const struct align_op *op = ops_at(i);
		printf("%s: %s\n  inputs: %s\n  default dims: %s\n  switches:", op->name, op->desc, op->inputs,
		       op->impl->dims);
		for (const int *p = op->impl->modes; *p >= 0; p++)
			printf(" %s", modes_info(*p)->env);
		printf("\n  outputs:");
		for (int k = 0; k < op->impl->n_out; k++)
			printf(" %s[%s]", op->impl->out[k].name, op->impl->out[k].shape);
		printf("\n");
	}
	for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
		printf("%s: block of", groups[g].name);
		for (int i = 0; groups[g].ops[i]; i++)
			printf(" %s", groups[g].ops[i]);
		printf(" (run in that order into one trace; --shape applies to each where the dim exists)\n");
	}
	return ALIGN_OK;
}

static int resolve_modes(const struct run_opts *o, struct align_modes *m)
{
	char err[1024];
	modes_init_default(m);
	if (o->profile && modes_apply_profile(m, o->profile, err, sizeof err))
		return err_input("%s", err);
	if (modes_apply_env(m, environ, err, sizeof err))
		return err_input("%s", err);
	for (int i = 0; i < o->n_kv; i++)
		if (modes_apply_kv(m, o->kv[i], err, sizeof err))
			return err_input("%s", err);
	return ALIGN_OK;
}

static int resolve_dims(const struct align_op *op, const char *shape, int grouped, struct align_dims *d)
{
	char err[256];
	ops_dims_default(op, d);
	if (!shape)
		return ALIGN_OK;
	struct align_dims over = {0}; /* ops_dims_parse sets only the dims it names */
	if (ops_dims_parse(shape, &over, err, sizeof err))
		return err_input("option '--shape': %s", err);
	for (int k = 0; k < ALIGN_DIM_COUNT; k++) {
		if (!over.v[k])
			continue;
		if (!d->v[k] && grouped)
			continue; /* a block's --shape names the dims of all its ops */
		if (!d->v[k])
			return err_input("option '--shape': op '%s' has no dim '%c' (its dims: %s)", op->name,
			                 ALIGN_DIM_LETTERS[k], op->impl->dims);
		d->v[k] = over.v[k];
	}
	return ALIGN_OK;
}

/* Copy input idx from a safetensors file: name, dtype and shape must match the op's spec. */
static int load_input(const struct st_file *f, const char *path, struct align_tensor *t)
{
	const struct st_tensor *s = safetensors_find(f, t->name);
	if (!s)
		return err_input("%s: no tensor '%s' (the op's inputs are listed by 'align run --list')", path, t->name);
	if (strcmp(s->dtype, run_trace_dtype(t->dtype)))
		return err_input("%s: tensor '%s' is %s, the op needs %s", path, t->name, s->dtype, run_trace_dtype(t->dtype));
	int same = s->ndim == t->ndim;
	for (int i = 0; same && i < t->ndim; i++)
		same = s->shape[i] == t->shape[i];
	if (!same)
		return err_input("%s: tensor '%s' has the wrong shape for these dims (pass --shape to match it)", path,
		                 t->name);
	memcpy(t->data, s->data, s->bytes);
	return ALIGN_OK;
}

struct run_state {
	const struct align_op *op;
	struct align_tensor in[8], out[8];
	void *params;
	int grouped;                 /* part of a block group: output names carry the op name */
	struct st_tensor *saved;     /* shared by the ops of a group */
	void **saved_data;
	int *n_saved_p;
};

static int save_outputs(struct run_state *st, int step, int steps, int grouped)
{
	for (int k = 0; k < st->op->impl->n_out; k++) {
		if (*st->n_saved_p == 64)
			return err_input("--outputs: at most 64 tensors (use fewer --steps)");
		struct st_tensor *s = &st->saved[*st->n_saved_p];
		const struct align_tensor *t = &st->out[k];
		char base[200];
		snprintf(base, sizeof base, "%s%s%s", grouped ? st->op->name : "", grouped ? "." : "", t->name);
		if (steps > 1)
			snprintf(s->name, sizeof s->name, "step%d.%s", step, base);
		else
			snprintf(s->name, sizeof s->name, "%s", base);
		snprintf(s->dtype, sizeof s->dtype, "%s", run_trace_dtype(t->dtype));
		s->ndim = t->ndim;
		memcpy(s->shape, t->shape, sizeof t->shape);
		s->bytes = (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
		s->data = st->saved_data[*st->n_saved_p] = malloc(s->bytes ? s->bytes : 1);
		if (!s->data)
			return err_internal("out of memory");
		memcpy(s->data, t->data, s->bytes);
		(*st->n_saved_p)++;
	}
	return ALIGN_OK;
}

/* The op on the chosen device: the C twin, or the CUDA twin on copies of the host tensors. */
static int run_fwd(const struct run_opts *o, struct run_state *st, const struct align_modes *m)
{
	const struct align_op_impl *im = st->op->impl;
	if (!strcmp(o->device, "cpu"))
		return ops_fwd_cpu(st->op, st->params, m, st->in, im->n_in, st->out, im->n_out);
#if ALIGN_HAVE_CUDA
	char name[256] = "";
	return run_device_op(st->op, st->params, m, st->in, im->n_in, st->out, im->n_out, name, sizeof name);
#else
	return ALIGN_ERR_UNSUPPORTED;
#endif
}

static int run_steps(const struct run_opts *o, struct run_state *st, const struct align_modes *m,
                     const struct align_dims *d, struct run_trace *tr, const struct st_file *inputs)
{
	const struct align_op_impl *im = st->op->impl;
	int rc;
	for (int step = 1; step <= o->steps; step++) {
		for (int i = 0; i < im->n_in; i++) {
			rc = inputs ? load_input(inputs, o->inputs, &st->in[i])
			            : ops_fill_input(st->op, i, &st->in[i], o->seed, step);
			if (rc)
				return inputs ? rc : err_internal("cannot fill input '%s'", st->in[i].name);
			if (tr->f && (rc = run_trace_tensor(tr, st->op->name, step, "input", &st->in[i])))
				return rc;
		}
		rc = run_fwd(o, st, m);
		int gpu_sw = modes_gpu_only_in(m, im->modes);
		if (rc == ALIGN_ERR_UNSUPPORTED && !strcmp(o->device, "cpu") && gpu_sw >= 0)
			return err_input("op '%s': %s=%s exists only in the CUDA twins (use --device cuda; nothing was run)",
			                 st->op->name, modes_info(gpu_sw)->env, modes_value_name(gpu_sw, m->v[gpu_sw]));
		if (rc == ALIGN_ERR_UNSUPPORTED)
			return err_input("op '%s': these modes are not supported on the %s (nothing was run)", st->op->name,
			                 strcmp(o->device, "cuda") ? "CPU" : "GPU");
		if (rc == ALIGN_EINTERNAL && !strcmp(o->device, "cuda"))
			return rc; /* the device message is printed */
		if (rc)
			return rc == ALIGN_ERR_INPUT ? err_input("op '%s' refused its inputs or parameters", st->op->name)
			                             : err_internal("op '%s' failed (%d)", st->op->name, rc);
		for (int k = 0; k < im->n_out; k++)
			if (tr->f && (rc = run_trace_tensor(tr, st->op->name, step, "fwd", &st->out[k])))
				return rc;
		if (o->outputs && (rc = save_outputs(st, step, (int)o->steps, st->grouped)))
			return rc;
	}
	return ALIGN_OK;
}

/* One registered op for every step, into the (possibly shared) trace and output list. */
static int run_one(const struct run_opts *o, const char *name, const struct align_modes *m, struct run_trace *tr,
                   const struct st_file *inputs, struct st_tensor *saved, void **saved_data, int *n_saved, int grouped)
{
	struct run_state st = {.op = ops_find(name), .grouped = grouped, .saved = saved, .saved_data = saved_data,
	                       .n_saved_p = n_saved};
	const struct align_op_impl *im = st.op->impl;
	struct align_dims d;
	int rc = resolve_dims(st.op, o->shape, grouped, &d);
	if (rc)
		return rc;
	if (im->n_in > 8 || im->n_out > 8)
		return err_internal("op '%s' has too many tensors", st.op->name);
	st.params = calloc(1, im->params_size + 1);
	if (!st.params)
		return err_internal("out of memory");
	im->params_default(st.params, &d);
	if (o->variant && (!im->params_variant || !im->params_variant(st.params, &d, (int)o->variant))) {
		free(st.params);
		return err_input("--variant %lld: op '%s' has no such parameter variant", o->variant, name);
	}
	for (int i = 0; i < im->n_in && !rc; i++)
		rc = ops_tensor_alloc(st.op, 0, i, &d, m, &st.in[i]) ? err_input("op '%s': bad dims for input %d", name, i) : 0;
	for (int k = 0; k < im->n_out && !rc; k++)
		rc = ops_tensor_alloc(st.op, 1, k, &d, m, &st.out[k]) ? err_input("op '%s': bad dims for output %d", name, k) : 0;
	if (!rc)
		rc = run_steps(o, &st, m, &d, tr, inputs);
	for (int i = 0; i < im->n_in; i++)
		ops_tensor_free(&st.in[i]);
	for (int k = 0; k < im->n_out; k++)
		ops_tensor_free(&st.out[k]);
	free(st.params);
	return rc;
}

static int run_op(const struct run_opts *o)
{
	const char *single[2] = {o->op, NULL};
	const char *const *names = single;
	for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
		if (!strcmp(groups[g].name, o->op))
			names = groups[g].ops;
	if (names == single && !ops_find(o->op))
		return err_input("unknown op '%s' (see 'align run --list')", o->op);
	if (strcmp(o->device, "cpu") && (strcmp(o->device, "cuda") || !ALIGN_HAVE_CUDA))
		return err_input("--device '%s': %s", o->device,
		                 strcmp(o->device, "cuda") ? "not a device (cpu or cuda)" : "this build has no CUDA");
	if (o->inputs && names != single)
		return err_input("--inputs: give one op of the '%s' block at a time", o->op);
	struct align_modes m;
	int rc = resolve_modes(o, &m);
	if (rc)
		return rc;
	struct align_dims d0;
	if (names == single && (rc = resolve_dims(ops_find(o->op), o->shape, 0, &d0)))
		return rc;
	if (names != single)
		memset(&d0, 0, sizeof d0);
	struct st_file inputs = {0};
	if (o->inputs && (rc = safetensors_read(o->inputs, &inputs)))
		return rc;
	struct st_tensor saved[64];
	void *saved_data[64];
	int n_saved = 0;
	struct run_trace tr = {0};
	const char *trace = o->trace ? o->trace : getenv("ALIGN_TRACE");
	if (trace && *trace)
		rc = run_trace_open(&tr, trace, o->op, o->device, strcmp(o->device, "cuda") ? "c11-twin" : "cuda-twin", &m,
		                    &d0, o->seed, (int)o->steps, (int)o->variant);
	for (int i = 0; !rc && names[i]; i++)
		rc = run_one(o, names[i], &m, &tr, o->inputs ? &inputs : NULL, saved, saved_data, &n_saved, names != single);
	int trc = run_trace_close(&tr, rc == ALIGN_OK);
	if (!rc)
		rc = trc;
	if (!rc && o->outputs)
		rc = safetensors_write(o->outputs, saved, (size_t)n_saved, NULL);
	if (!rc)
		printf("%s: %lld step%s on %s (profile %s)%s%s\n", o->op, o->steps, o->steps == 1 ? "" : "s", o->device,
		       m.profile[0] ? m.profile : "none", trace ? ", trace " : "", trace ? trace : "");
	for (int i = 0; i < n_saved; i++)
		free(saved_data[i]);
	safetensors_free(&inputs);
	return rc;
}

int cmd_run(struct align_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"profile", required_argument, 0, 'p'}, {"mode", required_argument, 0, 'm'},
		{"shape", required_argument, 0, 's'},   {"seed", required_argument, 0, 'S'},
		{"steps", required_argument, 0, 'n'},   {"inputs", required_argument, 0, 'i'},
		{"outputs", required_argument, 0, 'o'}, {"trace", required_argument, 0, 't'},
		{"device", required_argument, 0, 'd'},  {"list", no_argument, 0, 'L'},
		{"variant", required_argument, 0, 'V'},
		{"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
	};
	struct run_opts o = {.seed = 1, .steps = 1, .device = "cpu"};
	long long v;
	int c, rc;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': o.profile = optarg; break;
		case 'm':
			if (o.n_kv == 64)
				return err_input("too many --mode options (at most 64)");
			o.kv[o.n_kv++] = optarg;
			break;
		case 's': o.shape = optarg; break;
		case 'S':
			if ((rc = cmd_parse_int("--seed", optarg, 0, 0x7fffffffffffffffLL, &v)))
				return rc;
			o.seed = (unsigned long long)v;
			break;
		case 'n':
			if ((rc = cmd_parse_int("--steps", optarg, 1, 1000000, &o.steps)))
				return rc;
			break;
		case 'V':
			if ((rc = cmd_parse_int("--variant", optarg, 0, 1000, &o.variant)))
				return rc;
			break;
		case 'i': o.inputs = optarg; break;
		case 'o': o.outputs = optarg; break;
		case 't': o.trace = optarg; break;
		case 'd': o.device = optarg; break;
		case 'L': return list_ops();
		case 'h': run_usage(stdout); return ALIGN_OK;
		default: run_usage(stderr); return ALIGN_EINPUT;
		}
	}
	if (argc - optind != 1) {
		run_usage(stderr);
		return err_input(argc - optind ? "exactly one op expected" : "no op given (see 'align run --list')");
	}
	o.op = argv[optind];
	if (o.inputs && o.steps > 1)
		return err_input("--inputs gives one set of inputs: use --steps 1");
	return run_op(&o);
}
