/* cmd-run: align run OP [--profile P] [--mode K=V]... [--shape T=16,D=64] [--seed S] [--steps N]
 *                       [--variant K] [--inputs F.safetensors] [--outputs F.safetensors] [--trace F.atf]
 *                       [--device cpu|cuda]
 *          align run allreduce|reduce_scatter|all_gather --ranks N | --nccl-id FILE [...]   (run-ranks.c)
 *          align run allreduce|reduce_scatter --inputs X --explain Y                      (run-explain.c)
 *          align run model [--profile P] [--mode K=V]... [--steps N] [--seed S] [--trace F] [--log F]
 *                          [--log-format megatron|paddle] [--device cpu|cuda]          (run-model.c)
 *          align run --list
 * Runs one DSv4 reference block (its params_default, or params_variant K) under the modes resolved once
 * into ctx->modes (default < profile < environment < --mode), on inputs drawn from the counter-based RNG
 * (seed, tensor, step) or read from safetensors, and writes the outputs (safetensors) and an ATF trace
 * (a header with the provenance, then one record per input and output per step). The trace goes to
 * --trace, else to $ALIGN_TRACE when set (align bisect sets it). With --device cuda the device context
 * is opened once (run-device.h), used by every op and step, and closed at the end. Modes the chosen
 * device cannot run (modes_refused_on) are refused before anything runs or is written. */
#include "align-config.h"
#include "coll.h"
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "ops.h"
#include "opts.h"
#include "run-model.h"
#include "run-trace.h"
#include "run.h"
#if ALIGN_HAVE_CUDA
#include "run-device.h"
#endif
#include "safetensors.h"

#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_MAX_SAVED 64  /* tensors in --outputs */
#define RUN_MAX_TENSORS 8 /* inputs or outputs of one op */

#if ALIGN_HAVE_CUDA
#define RUN_DEVICE_HELP "cpu (default) or cuda"
#else
#define RUN_DEVICE_HELP "cpu (default); this build has no CUDA"
#endif

static const struct cmd_opt run_opt_table[] = {
	{"profile", 'p', "P", "a bundle of switches (listed below; see 'align modes')", 0},
	{"mode", 'm', "KEY=VALUE", "set one switch (repeatable; beats the environment and the profile)", 0},
	{"shape", 's', "T=16,D=64", "dims (letters " ALIGN_DIM_LETTERS "; see --list for each op's defaults)", 0},
	{"seed", 'S', "S", "RNG seed of the generated inputs (default 1)", 0},
	{"steps", 'n', "N", "run N steps, new inputs each step (default 1)", 0},
	{"variant", 'V', "K",
	 "the op's parameter variant K (default 0, the DSv4 parameters; router:\n"
	 "1 = sigmoid scores, 8 groups keep 4, scale 2.5; 2 = hash layer; 3 = softmax),\n"
	 "or its name (attn: csa, hca, swa)",
	 0},
	{"inputs", 'i', "F", "read the inputs from a safetensors file (names as in --list)", 0},
	{"outputs", 'o', "F", "write the outputs to a safetensors file (step<k>.<name> when N > 1)", 0},
	{"save-inputs", 'W', "F",
	 "write the inputs to a safetensors file, named as --outputs names them\n"
	 "(for 'align explain --inputs')",
	 0},
	{"trace", 't', "F", "write the ATF trace to F (default $ALIGN_TRACE if set)", 0},
	{"device", 'd', "D", RUN_DEVICE_HELP, 0},
	{"ranks", 'R', "N",
	 "collectives: N processes on this host, one per GPU (CUDA device = rank), each\n"
	 "with an NCCL communicator and its own trace (README \"Collectives\")",
	 0},
	{"nccl-id", 'I', "FILE",
	 "collectives: this process is rank $RANK of $WORLD_SIZE (mpirun); rank 0\n"
	 "writes NCCL's unique id to FILE, the others read it",
	 0},
	{"explain", 'X', "Y",
	 "allreduce/reduce_scatter: which order (fixed, NCCL Ring or Tree model with its\n"
	 "channels and protocol) reproduces the observed 'y' in Y from --inputs, bitwise",
	 0},
	{"log-format", 'F', "F",
	 "model: print the losses as 'megatron' (Megatron-LM stdout) or 'paddle'\n"
	 "(PaddleFleet trainer); default: paddle for the paddle* profiles, else megatron",
	 0},
	{"log", 'l', "F", "model: write the log to F (atomically) instead of stdout", 0},
	{"list", 'L', NULL, "list the ops, their inputs, default dims and switches", 0},
	{NULL, 0, NULL, NULL, 0},
};

/* Block names that run several registered ops in order into one trace (DSv4's mHC is three ops). */
static const struct {
	const char *name;
	const char *ops[4];
} groups[] = {
	{"mhc", {"mhc_pre", "mhc_post", "mhc_head", NULL}},
};

/* The ops (ops.def), the blocks and the profiles (profiles.def) under the options of --help. */
static void run_help_outro(char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "ops:");
	for (int i = 0; i < ALIGN_OP_COUNT && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, " %s", ops_at(i)->name);
	for (size_t g = 0; g < sizeof groups / sizeof groups[0] && used < len; g++) {
		used += (size_t)snprintf(buf + used, len - used, "\nblock %s:", groups[g].name);
		for (int i = 0; groups[g].ops[i] && used < len; i++)
			used += (size_t)snprintf(buf + used, len - used, " %s", groups[g].ops[i]);
	}
	if (used < len)
		used += (size_t)snprintf(buf + used, len - used, "\nprofiles:");
	for (const char *const *p = modes_profiles(); *p && used < len; p++)
		used += (size_t)snprintf(buf + used, len - used, "\n  %-20s %s", *p, modes_profile_meaning(*p));
}

static int list_ops(FILE *out)
{
	for (int i = 0; i < ALIGN_OP_COUNT; i++) {
		const struct align_op *op = ops_at(i);
		fprintf(out, "%s: %s\n  inputs: %s\n  default dims: %s\n  switches:", op->name, op->desc, op->inputs,
			op->impl->dims);
		for (const int *p = op->impl->modes; *p >= 0; p++)
			fprintf(out, " %s", modes_info(*p)->env);
		int refusals = 0; /* values of its switches the op refuses by design (ops_op_refuses) */
		for (const int *p = op->impl->modes; *p >= 0; p++)
			for (int v = 0; v < modes_value_count(*p); v++)
				if (ops_op_refuses(op, *p, v))
					fprintf(out, "%s %s=%s", refusals++ ? "" : "\n  refuses:", modes_info(*p)->env,
						modes_value_name(*p, v));
		fprintf(out, "\n  outputs:");
		for (int k = 0; k < op->impl->n_out; k++)
			fprintf(out, " %s[%s]", op->impl->out[k].name, op->impl->out[k].shape);
		fprintf(out, "\n");
	}
	for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
		fprintf(out, "%s: block of", groups[g].name);
		for (int i = 0; groups[g].ops[i]; i++)
			fprintf(out, " %s", groups[g].ops[i]);
		fprintf(out, " (run in that order into one trace; --shape applies to each where the dim exists)\n");
	}
	fprintf(out, "model: block of");
	for (const char *const *n = run_model_ops(); *n; n++)
		fprintf(out, " %s", *n);
	fprintf(out,
		"\n  the tiny DSv4 of 'align run model': embedding, mHC, 2 layers of sliding-window attention + MoE,\n"
		"  head, lm_head, xent, MTP depth 1 (C twins; per-step lm and mtp_1 losses as a Megatron or Paddle\n"
		"  log; a trace record per block output)\n  switches: ALIGN_MTP_SHIFT and those of the ops above");
	fprintf(out, "\n");
	return ALIGN_OK;
}

int run_resolve_dims(struct align_err *e, const struct align_op *op, const char *shape, int grouped,
		     struct align_dims *d)
{
	char err[256];
	ops_dims_default(op, d);
	if (!shape)
		return ALIGN_OK;
	struct align_dims over = {0}; /* ops_dims_parse sets only the dims it names */
	if (ops_dims_parse(shape, &over, err, sizeof err))
		return fail_input(e, "option '--shape': %s", err);
	for (int k = 0; k < ALIGN_DIM_COUNT; k++) {
		if (!over.v[k])
			continue;
		if (!d->v[k] && grouped)
			continue; /* a block's --shape names the dims of all its ops */
		if (!d->v[k])
			return fail_input(e, "option '--shape': op '%s' has no dim '%c' (its dims: %s)", op->name,
					  ALIGN_DIM_LETTERS[k], op->impl->dims);
		d->v[k] = over.v[k];
	}
	return ALIGN_OK;
}

/* Copy input idx from a safetensors file: name, dtype and shape must match the op's spec. */
int run_load_input(struct align_err *e, const struct st_file *f, const char *path, struct align_tensor *t)
{
	const struct st_tensor *s = safetensors_find(f, t->name);
	if (!s)
		return fail_input(e, "%s: no tensor '%s' (the op's inputs are listed by 'align run --list')", path,
				  t->name);
	if (strcmp(s->dtype, run_trace_dtype(t->dtype)))
		return fail_input(e, "%s: tensor '%s' is %s, the op needs %s", path, t->name, s->dtype,
				  run_trace_dtype(t->dtype));
	int same = s->ndim == t->ndim;
	for (int i = 0; same && i < t->ndim; i++)
		same = s->shape[i] == t->shape[i];
	if (!same)
		return fail_input(e, "%s: tensor '%s' has the wrong shape for these dims (pass --shape to match it)",
				  path, t->name);
	memcpy(t->data, s->data, s->bytes);
	return ALIGN_OK;
}

/* The outputs of all ops and steps, written to --outputs at the end. */
struct run_saved {
	struct st_tensor t[RUN_MAX_SAVED];
	void *data[RUN_MAX_SAVED]; /* owned copies */
	int n;
};

/* One op of the run: its tensors and parameters, and where its results go. */
struct run_state {
	struct align_ctx *ctx;
	const struct run_opts *o;
	const struct align_op *op;
	struct align_dims d;
	struct align_tensor in[RUN_MAX_TENSORS], out[RUN_MAX_TENSORS];
	void *params;
	int grouped;		      /* part of a block group: output names carry the op name */
	struct run_trace *tr;	      /* shared by the ops of a group */
	const struct st_file *inputs; /* --inputs, else NULL */
	struct run_saved *saved;      /* shared by the ops of a group */
	struct run_saved *saved_in;   /* --save-inputs: the inputs, as saved is the outputs */
};

static int save_tensors(struct run_state *st, int step, struct run_saved *sv, const struct align_tensor *ts, int n)
{
	for (int k = 0; k < n; k++) {
		if (sv->n == RUN_MAX_SAVED)
			return fail_input(&st->ctx->err, "%s: at most 64 tensors (use fewer --steps)",
					  sv == st->saved ? "--outputs" : "--save-inputs");
		struct st_tensor *s = &sv->t[sv->n];
		const struct align_tensor *t = &ts[k];
		char base[200];
		snprintf(base, sizeof base, "%s%s%s", st->grouped ? st->op->name : "", st->grouped ? "." : "", t->name);
		if (st->o->steps > 1)
			snprintf(s->name, sizeof s->name, "step%d.%s", step, base);
		else
			snprintf(s->name, sizeof s->name, "%s", base);
		snprintf(s->dtype, sizeof s->dtype, "%s", run_trace_dtype(t->dtype));
		s->ndim = t->ndim;
		memcpy(s->shape, t->shape, sizeof t->shape);
		s->bytes = (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
		s->data = sv->data[sv->n] = malloc(s->bytes ? s->bytes : 1);
		if (!s->data)
			return fail_internal(&st->ctx->err, "out of memory");
		memcpy(s->data, t->data, s->bytes);
		sv->n++;
	}
	return ALIGN_OK;
}

/* The op on the chosen device: the C twin, or the CUDA twin on copies of the host tensors. */
static int run_fwd(struct run_state *st)
{
	const struct align_op_impl *im = st->op->impl;
	const struct align_modes *m = &st->ctx->modes;
	if (!st->o->cuda)
		return ops_fwd_cpu(st->op, st->params, m, st->in, im->n_in, st->out, im->n_out);
#if ALIGN_HAVE_CUDA
	return run_device_op(st->ctx->dev, st->op, st->params, m, st->in, im->n_in, st->out, im->n_out);
#else
	return ALIGN_ERR_UNSUPPORTED;
#endif
}

/* The message of a failed op (a CUDA twin printed its own; the first message is kept anyway). */
static int fwd_failed(struct run_state *st, int rc)
{
	struct align_err *e = &st->ctx->err;
	if (rc == ALIGN_ERR_UNSUPPORTED)
		return align_fail(e, ALIGN_ERR_UNSUPPORTED,
				  "op '%s': these modes are not supported on the %s (nothing was run)", st->op->name,
				  st->o->cuda ? "GPU" : "CPU");
	if (rc == ALIGN_ERR_INTERNAL && st->o->cuda)
		return rc; /* the device message is printed or in e */
	return rc == ALIGN_ERR_INPUT ? fail_input(e, "op '%s' refused its inputs or parameters", st->op->name)
				     : fail_internal(e, "op '%s' failed (%d)", st->op->name, rc);
}

static int run_steps(struct run_state *st)
{
	const struct align_op_impl *im = st->op->impl;
	struct align_err *e = &st->ctx->err;
	struct run_trace *tr = st->tr;
	int rc;
	for (int step = 1; step <= st->o->steps; step++) {
		for (int i = 0; i < im->n_in; i++) {
			if (st->inputs)
				ALIGN_TRY(e, run_load_input(e, st->inputs, st->o->inputs, &st->in[i]));
			else if (ops_fill_input_dims(st->op, i, &st->in[i], &st->d, st->o->seed, step))
				return fail_input(
					e,
					"cannot fill input '%s' of %s for these dims (distinct ids per row need a "
					"range at least as long as the row)",
					st->in[i].name, st->op->name);
			if (tr->f)
				ALIGN_TRY(e, run_trace_tensor(tr, st->op->name, step, "input", &st->in[i]));
		}
		ALIGN_TRY(e, ops_check_inputs(st->op, &st->d, st->in, im->n_in, e));
		if ((rc = run_fwd(st)))
			return fwd_failed(st, rc);
		for (int k = 0; k < im->n_out; k++)
			if (tr->f)
				ALIGN_TRY(e, run_trace_tensor(tr, st->op->name, step, "fwd", &st->out[k]));
		if (st->o->outputs)
			ALIGN_TRY(e, save_tensors(st, step, st->saved, st->out, im->n_out));
		if (st->o->save_inputs)
			ALIGN_TRY(e, save_tensors(st, step, st->saved_in, st->in, im->n_in));
	}
	return ALIGN_OK;
}

static const char *run_getenv(const char *name)
{
	return getenv(name);
}

/* Parameters and tensors of st->op for its dims, then every step. */
static int run_alloc_and_steps(struct run_state *st)
{
	const struct align_op_impl *im = st->op->impl;
	struct align_err *e = &st->ctx->err;
	const char *name = st->op->name;
	if (im->n_in > RUN_MAX_TENSORS || im->n_out > RUN_MAX_TENSORS)
		return fail_internal(e, "op '%s' has too many tensors", name);
	st->params = calloc(1, im->params_size + 1);
	if (!st->params)
		return fail_internal(e, "out of memory");
	im->params_default(st->params, &st->d);
	if (ops_op_reads_mode(st->op, MODE_COLL_IMPL)) /* the NCCL model: NCCL's own variables (coll.h) */
		ALIGN_TRY(e, coll_params_from_env(st->params, (int)st->d.v[ALIGN_DIM_N], run_getenv, e));
	if (st->o->variant && (!im->params_variant || !im->params_variant(st->params, &st->d, (int)st->o->variant)))
		return fail_input(e, "--variant %lld: op '%s' has no such parameter variant", st->o->variant, name);
	for (int i = 0; i < im->n_in; i++)
		if (ops_tensor_alloc(st->op, 0, i, &st->d, &st->ctx->modes, &st->in[i]))
			return fail_input(e, "op '%s': bad dims for input %d", name, i);
	for (int k = 0; k < im->n_out; k++)
		if (ops_tensor_alloc(st->op, 1, k, &st->d, &st->ctx->modes, &st->out[k]))
			return fail_input(e, "op '%s': bad dims for output %d", name, k);
	return run_steps(st);
}

/* One registered op for every step, into the (possibly shared) trace and output list. */
static int run_one(struct run_state *st, const char *name)
{
	st->op = ops_find(name);
	memset(st->in, 0, sizeof st->in);
	memset(st->out, 0, sizeof st->out);
	st->params = NULL;
	int rc = run_resolve_dims(&st->ctx->err, st->op, st->o->shape, st->grouped, &st->d);
	if (!rc)
		rc = run_alloc_and_steps(st);
	for (int i = 0; i < RUN_MAX_TENSORS; i++) {
		ops_tensor_free(&st->in[i]);
		ops_tensor_free(&st->out[i]);
	}
	free(st->params);
	return rc;
}

/* Refuse, before anything runs or is written, a mode the device cannot run (modes.def GPU_ONLY on the
 * CPU, CPU_ONLY on CUDA) among the switches of the ops of the run; the twins never see those values. */
static int refuse_modes(struct align_ctx *ctx, const struct run_opts *o, const char *const *names)
{
	const struct align_modes *m = &ctx->modes;
	for (int i = 0; names[i]; i++) {
		const struct align_op *op = ops_find(names[i]);
		int sw = modes_refused_on(m, op->impl->modes, o->cuda ? ALIGN_DEVICE_CUDA : ALIGN_DEVICE_CPU);
		if (sw < 0)
			continue;
		const char *env = modes_info(sw)->env, *value = modes_value_name(sw, m->v[sw]);
		if (o->cuda)
			return align_fail(&ctx->err, ALIGN_ERR_UNSUPPORTED,
					  "%s (cuda): %s=%s is not supported on the GPU (no CUDA twin of that choice)",
					  op->name, env, value);
		return align_fail(&ctx->err, ALIGN_ERR_UNSUPPORTED,
				  "op '%s': %s=%s exists only in the CUDA twins (use --device cuda; nothing was run)",
				  op->name, env, value);
	}
	return ALIGN_OK;
}

/* Open the device once (--device cuda) into dev and ctx->dev, with the vendor GEMM handle the modes
 * select when an op of the run reads MATMUL_IMPL (so its version is known for the trace header). */
static int open_device(struct align_ctx *ctx, const char *const *names, struct align_dev *dev)
{
#if ALIGN_HAVE_CUDA
	ALIGN_TRY(&ctx->err, run_device_open(dev, &ctx->err));
	ctx->dev = dev;
	for (int i = 0; names[i]; i++)
		if (ops_op_reads_mode(ops_find(names[i]), MODE_MATMUL_IMPL))
			return run_device_vendor_gemm(dev, &ctx->modes);
	return ALIGN_OK;
#else
	(void)names;
	(void)dev;
	return fail_input(&ctx->err, "--device 'cuda': this build has no CUDA");
#endif
}

static void close_device(struct align_ctx *ctx)
{
#if ALIGN_HAVE_CUDA
	if (ctx->dev)
		run_device_close(ctx->dev);
#endif
	ctx->dev = NULL;
}

/* `align run model`: the composed model (run-model.c) on the CPU or, with --device cuda, each op on its
 * CUDA twin (the glue between the ops: copies, casts and the MTP sum, on the host), its trace and its log lines on stdout
 * (the summary goes to stderr, so that stdout is the log). */
static int run_model(struct align_ctx *ctx, struct run_opts *o)
{
	struct align_err *e = &ctx->err;
	o->cuda = !strcmp(o->device, "cuda");
	if (strcmp(o->device, "cpu") && (!o->cuda || !ALIGN_HAVE_CUDA))
		return fail_input(e, "--device '%s': %s", o->device,
				  o->cuda ? "this build has no CUDA" : "not a device (cpu or cuda)");
	if (o->inputs || o->outputs || o->shape || o->variant)
		return fail_input(e, "model: --inputs, --outputs, --shape and --variant do not apply (fixed sizes, "
				     "weights from --seed)");
	ALIGN_TRY(e, ctx_resolve_modes(ctx, &ctx->modes, o->profile, 1, o->kv, o->n_kv));
	int fmt = !strncmp(ctx->modes.profile, "paddle", 6) ? RUN_LOG_PADDLE : RUN_LOG_MEGATRON;
	if (o->log_format && !strcmp(o->log_format, "megatron"))
		fmt = RUN_LOG_MEGATRON;
	else if (o->log_format && !strcmp(o->log_format, "paddle"))
		fmt = RUN_LOG_PADDLE;
	else if (o->log_format)
		return fail_input(e, "option '--log-format': expected megatron or paddle, got '%s'", o->log_format);
	ALIGN_TRY(e, refuse_modes(ctx, o, run_model_ops()));
	struct run_trace tr = {0};
	struct align_dims d0 = {0};
	struct align_dev dev;
	memset(&dev, 0, sizeof dev);
	if (o->cuda)
		ALIGN_TRY(e, open_device(ctx, run_model_ops(), &dev));
	const char *trace = o->trace ? o->trace : getenv("ALIGN_TRACE");
	if (trace && *trace) {
		struct run_trace_head h = {.op = "model",
					   .impl = o->cuda ? "cuda-twin" : "c11-twin",
					   .m = &ctx->modes,
					   .d = &d0,
					   .seed = o->seed,
					   .steps = (int)o->steps,
					   .dev = ctx->dev};
		int rc = run_trace_open(&tr, trace, &h, e);
		if (rc) {
			close_device(ctx);
			return rc;
		}
	}
	char tmp[4200];
	FILE *out = ctx->out, *log = NULL;
	if (o->log) {
		snprintf(tmp, sizeof tmp, "%s.tmp.%ld", o->log, (long)getpid());
		if (!(log = fopen(tmp, "w"))) {
			run_trace_close(&tr, 0);
			close_device(ctx);
			return fail_input(e, "--log '%s': cannot write '%s': %s", o->log, tmp, strerror(errno));
		}
		ctx->out = log;
	}
	int rc = run_model_steps(ctx, o, &tr, fmt);
	ctx->out = out;
	if (log && fclose(log) && !rc)
		rc = fail_input(e, "--log '%s': cannot write '%s': %s", o->log, tmp, strerror(errno));
	if (log && !rc && rename(tmp, o->log))
		rc = fail_input(e, "--log '%s': cannot rename '%s' into place: %s", o->log, tmp, strerror(errno));
	if (log && rc)
		remove(tmp);
	int trc = run_trace_close(&tr, rc == ALIGN_OK);
	close_device(ctx);
	if (!rc)
		rc = trc;
	if (!rc && !ctx->quiet)
		fprintf(stderr, "model: %lld step%s on %s (profile %s)%s%s\n", o->steps, o->steps == 1 ? "" : "s",
			o->device, ctx->modes.profile[0] ? ctx->modes.profile : "none", trace ? ", trace " : "",
			trace ? trace : "");
	return rc;
}

/* The names of the registered ops of o->op (a block or one op) into *names; validate the request. */
static int run_check_request(struct align_ctx *ctx, struct run_opts *o, const char *const **names)
{
	for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
		if (!strcmp(groups[g].name, o->op))
			*names = groups[g].ops;
	if (!*names && !ops_find(o->op))
		return fail_input(&ctx->err, "unknown op '%s' (see 'align run --list')", o->op);
	o->cuda = !strcmp(o->device, "cuda");
	if (strcmp(o->device, "cpu") && (!o->cuda || !ALIGN_HAVE_CUDA))
		return fail_input(&ctx->err, "--device '%s': %s", o->device,
				  o->cuda ? "this build has no CUDA" : "not a device (cpu or cuda)");
	if (o->inputs && *names)
		return fail_input(&ctx->err, "--inputs: give one op of the '%s' block at a time", o->op);
	return ALIGN_OK;
}

/* Every op of the run (after the device and the trace are open), then the outputs file. */
static int run_ops(struct run_state *st, const char *const *names)
{
	int rc = ALIGN_OK;
	for (int i = 0; !rc && names[i]; i++)
		rc = run_one(st, names[i]);
	int trc = run_trace_close(st->tr, rc == ALIGN_OK);
	if (!rc)
		rc = trc;
	if (!rc && st->o->outputs)
		rc = safetensors_write(st->o->outputs, st->saved->t, (size_t)st->saved->n, NULL);
	if (!rc && st->o->save_inputs)
		rc = safetensors_write(st->o->save_inputs, st->saved_in->t, (size_t)st->saved_in->n, NULL);
	return rc;
}

static int run_op(struct align_ctx *ctx, struct run_opts *o)
{
	const char *const *names = NULL;
	ALIGN_TRY(&ctx->err, run_check_request(ctx, o, &names));
	if (o->variant_name) {
		const struct align_op *vop = ops_find(o->op);
		int k = vop ? ops_variant_index(vop, o->variant_name) : -1;
		if (k < 0)
			return fail_input(&ctx->err, "--variant %s: op '%s' has no variant of that name (named: %s)",
					  o->variant_name, o->op,
					  vop && ops_variant_names(vop) ? ops_variant_names(vop) : "none");
		o->variant = k;
	}
	const char *single[2] = {o->op, NULL};
	int grouped = names != NULL;
	if (!grouped)
		names = single;
	ALIGN_TRY(&ctx->err, ctx_resolve_modes(ctx, &ctx->modes, o->profile, 1, o->kv, o->n_kv));
	struct align_dims d0 = {0};
	if (!grouped)
		ALIGN_TRY(&ctx->err, run_resolve_dims(&ctx->err, ops_find(o->op), o->shape, 0, &d0));
	ALIGN_TRY(&ctx->err, refuse_modes(ctx, o, names));
	struct st_file inputs = {0};
	if (o->inputs)
		ALIGN_TRY(&ctx->err, safetensors_read(o->inputs, &inputs));
	struct run_saved saved = {0}, saved_in = {0};
	struct run_trace tr = {0};
	struct run_state st = {.ctx = ctx,
			       .o = o,
			       .grouped = grouped,
			       .tr = &tr,
			       .inputs = o->inputs ? &inputs : NULL,
			       .saved = &saved,
			       .saved_in = &saved_in};
	struct align_dev dev;
	memset(&dev, 0, sizeof dev);
	int rc = o->cuda ? open_device(ctx, names, &dev) : ALIGN_OK;
	const char *trace = o->trace ? o->trace : getenv("ALIGN_TRACE");
	if (!rc && trace && *trace) {
		struct run_trace_head h = {.op = o->op,
					   .impl = o->cuda ? "cuda-twin" : "c11-twin",
					   .m = &ctx->modes,
					   .d = &d0,
					   .seed = o->seed,
					   .steps = (int)o->steps,
					   .variant = (int)o->variant,
					   .dev = ctx->dev};
		rc = run_trace_open(&tr, trace, &h, &ctx->err);
	}
	if (!rc)
		rc = run_ops(&st, names);
	else
		run_trace_close(&tr, 0);
	close_device(ctx);
	if (!rc)
		fprintf(ctx->out, "%s: %lld step%s on %s (profile %s)%s%s\n", o->op, o->steps, o->steps == 1 ? "" : "s",
			o->device, ctx->modes.profile[0] ? ctx->modes.profile : "none", trace ? ", trace " : "",
			trace ? trace : "");
	for (int i = 0; i < saved.n; i++)
		free(saved.data[i]);
	for (int i = 0; i < saved_in.n; i++)
		free(saved_in.data[i]);
	safetensors_free(&inputs);
	return rc;
}

/* An integer option value in [min, max]. */
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

struct run_parse {
	struct align_ctx *ctx;
	struct run_opts *o;
};

static int run_on_opt(void *u, int key, const char *arg)
{
	struct run_parse *p = u;
	struct run_opts *o = p->o;
	struct align_err *e = &p->ctx->err;
	long long v;
	switch (key) {
	case 'p':
		o->profile = arg;
		return ALIGN_OK;
	case 'm':
		if (o->n_kv == RUN_MAX_KV)
			return fail_input(e, "too many --mode options (at most 64)");
		o->kv[o->n_kv++] = arg;
		return ALIGN_OK;
	case 's':
		o->shape = arg;
		return ALIGN_OK;
	case 'S':
		ALIGN_TRY(e, parse_int(e, "--seed", arg, 0, 0x7fffffffffffffffLL, &v));
		o->seed = (unsigned long long)v;
		return ALIGN_OK;
	case 'n':
		return parse_int(e, "--steps", arg, 1, 1000000, &o->steps);
	case 'V':
		if (arg[0] < '0' || arg[0] > '9') { /* a variant's name (attn: csa, hca, swa) */
			o->variant_name = arg;
			return ALIGN_OK;
		}
		return parse_int(e, "--variant", arg, 0, 1000, &o->variant);
	case 'i':
		o->inputs = arg;
		return ALIGN_OK;
	case 'o':
		o->outputs = arg;
		return ALIGN_OK;
	case 't':
		o->trace = arg;
		return ALIGN_OK;
	case 'd':
		o->device = arg;
		return ALIGN_OK;
	case 'R':
		return parse_int(e, "--ranks", arg, 1, COLL_MAX_RANKS, &o->ranks);
	case 'I':
		o->nccl_id = arg;
		return ALIGN_OK;
	case 'X':
		o->explain = arg;
		return ALIGN_OK;
	case 'F':
		o->log_format = arg;
		return ALIGN_OK;
	case 'l':
		o->log = arg;
		return ALIGN_OK;
	case 'L':
		o->list = 1;
		return ALIGN_OK;
	case 'W':
		o->save_inputs = arg;
		return ALIGN_OK;
	default:
		return fail_internal(e, "option key %d has no handler", key);
	}
}

int cmd_run(struct align_ctx *ctx, int argc, char **argv)
{
	char outro[4096];
	run_help_outro(outro, sizeof outro);
	const struct cmd_spec spec = {
		"usage: align run OP [options]\n       align run --list",
		"Run a DSv4 reference block (C twin, or CUDA twin with --device cuda) under numeric modes and\n"
		"write its outputs and trace.",
		run_opt_table, outro};
	struct run_opts o = {.seed = 1, .steps = 1, .device = "cpu"};
	struct run_parse p = {ctx, &o};
	int first;
	int rc = opts_parse(&spec, argc, argv, run_on_opt, &p, &first, &ctx->err);
	if (rc == OPTS_HELP)
		return ALIGN_OK;
	if (rc)
		return rc;
	if (o.list)
		return list_ops(ctx->out);
	if (argc - first != 1) {
		opts_usage(&spec, stderr);
		return fail_input(&ctx->err,
				  argc - first ? "exactly one op expected" : "no op given (see 'align run --list')");
	}
	o.op = argv[first];
	if (o.inputs && o.steps > 1)
		return fail_input(&ctx->err, "--inputs gives one set of inputs: use --steps 1");
	if (o.explain)
		return run_explain(ctx, &o);
	if (o.ranks || o.nccl_id)
		return run_ranks(ctx, &o);
	if (!strcmp(o.op, "model"))
		return run_model(ctx, &o);
	if (o.log_format || o.log)
		return fail_input(&ctx->err, "options '--log' and '--log-format' apply to 'align run model' only");
	return run_op(ctx, &o);
}
