/* run.h: what `align run` (cmd-run.c) shares with its multi-process form (run-ranks.c): the parsed
 * options, the dims of an op from --shape, and one input read from a safetensors file. */
#ifndef ALIGN_RUN_H
#define ALIGN_RUN_H

#include "ops.h"
#include "status.h"

#define RUN_MAX_KV 64 /* --mode options */

struct st_file;
struct align_ctx;

struct run_opts {
	const char *op, *profile, *shape, *inputs, *outputs, *trace, *device;
	const char *kv[RUN_MAX_KV]; /* --mode KEY=VALUE, in command-line order */
	int n_kv;
	unsigned long long seed;
	long long steps;
	long long variant;	  /* params_variant index (0 = the op's defaults) */
	const char *variant_name; /* --variant NAME (ops_variant_index resolves it into variant) */
	int list;		  /* --list */
	int cuda;		  /* --device cuda */
	long long ranks;	  /* --ranks N: launch N processes, one per GPU (run-ranks.c); 0 = not given */
	const char *nccl_id;	  /* --nccl-id FILE: this process is one rank (RANK, WORLD_SIZE in the environment) */
	const char *explain;	  /* --explain Y: which summation order reproduces Y (run-explain.c) */

	const char *save_inputs; /* --save-inputs F: the inputs as safetensors (for align explain --inputs) */
	const char *log;	 /* --log F: align run model's log file, NULL: stdout */
	const char *log_format;	 /* --log-format megatron|paddle (align run model), NULL: from the profile */
};

/* The dims of op: its defaults, then what --shape names (a block's --shape may name dims of other ops:
 * grouped != 0 skips those). */
int run_resolve_dims(struct align_err *e, const struct align_op *op, const char *shape, int grouped,
		     struct align_dims *d);
/* Copy tensor t->name from the safetensors file f (read from path): dtype and shape must match t. */
int run_load_input(struct align_err *e, const struct st_file *f, const char *path, struct align_tensor *t);

/* `align run OP --inputs X --explain Y`: the orders (fixed, NCCL ring/tree models) that reproduce Y. */
int run_explain(struct align_ctx *ctx, struct run_opts *o);
/* `align run OP --ranks N` (launch) or `align run OP --nccl-id FILE` (one rank): run-ranks.c. */
int run_ranks(struct align_ctx *ctx, struct run_opts *o);

#endif
