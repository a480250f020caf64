/* run-explain: `align run allreduce|reduce_scatter --inputs X --explain Y`: which summation order
 * reproduces an observed result bitwise (the "these per-rank inputs and this output are
 * consistent with Ring over 4 channels, not with Tree").
 *
 * X holds the ranks' contributions x[N,cols] as `align run OP` reads them (--shape N=..,D=.. must match);
 * Y holds the observed "y": the op's whole y[N,out_cols] (the ranks' results stacked in rank order), or
 * for allreduce one rank's y[1,D] (every rank holds the same sum under each order here). The C twin is run
 * under every candidate, in this order, and its bytes compared with Y:
 *   fixed                                   (coll.h: rank order, one rounding)
 *   ring, protocol P in Simple, LL, LL128, channels C in 1..16, 24, 32
 *   tree, nodes M dividing N, protocol P, channels C as above
 * with the ring orders, nodes and buffer sizes of NCCL's variables otherwise (coll_params_from_env:
 * NCCL_RINGS, NCCL_BUFFSIZE, ...; the protocol's default buffer unless its variable is set).
 * Prints every candidate that reproduces Y and, when none does, the three closest (fewest elements
 * differing). Exit 0 when one reproduces Y, 1 when none does, 2 on bad input. */
#include "coll.h"
#include "coll_model.h"
#include "ctx.h"
#include "err.h"
#include "ops.h"
#include "run-trace.h"
#include "run.h"
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const proto_names[] = {"Simple", "LL", "LL128"};
static const int channel_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32};
#define N_CHANNELS ((int)(sizeof channel_list / sizeof channel_list[0]))

struct explain {
	struct align_ctx *ctx;
	const struct align_op *op;
	struct align_tensor x, y;
	const struct st_tensor *obs; /* the observed y */
	int64_t obs_elems;	     /* elements compared (a row or the whole y) */
	int n_match;
	struct {
		char what[96];
		int64_t diff;
	} close[3]; /* the closest misses, fewest differences first */
};

static const char *env_get(const char *name)
{
	return getenv(name);
}

/* differing elements between the twin's y and the observed bytes */
static int64_t count_diff(const struct explain *ex)
{
	size_t es = align_dtype_size(ex->y.dtype);
	const char *a = ex->y.data, *b = ex->obs->data;
	int64_t n = 0;
	for (int64_t i = 0; i < ex->obs_elems; i++)
		n += memcmp(a + (size_t)i * es, b + (size_t)i * es, es) != 0;
	return n;
}

static int try_one(struct explain *ex, int impl, const struct coll_params *p, const char *what)
{
	struct align_modes m = ex->ctx->modes;
	m.v[MODE_COLL_IMPL] = impl;
	int rc = ops_fwd_cpu(ex->op, p, &m, &ex->x, 1, &ex->y, 1);
	if (rc)
		return fail_input(&ex->ctx->err, "--explain: the C twin refused candidate '%s' (%d)", what, rc);
	int64_t d = count_diff(ex);
	if (!d) {
		fprintf(ex->ctx->out, "  reproduces it bitwise: %s\n", what);
		ex->n_match++;
		return ALIGN_OK;
	}
	for (int k = 0; k < 3; k++)
		if (!ex->close[k].what[0] || d < ex->close[k].diff) {
			for (int j = 2; j > k; j--)
				ex->close[j] = ex->close[j - 1];
			snprintf(ex->close[k].what, sizeof ex->close[k].what, "%s", what);
			ex->close[k].diff = d;
			break;
		}
	return ALIGN_OK;
}

/* ring (nodes 0) or tree over M nodes: every protocol and channel count */
static int try_model(struct explain *ex, const struct coll_params *base, int impl, int nodes)
{
	for (int proto = COLL_PROTO_SIMPLE; proto <= COLL_PROTO_LL128; proto++)
		for (int c = 0; c < N_CHANNELS; c++) {
			struct coll_params p = *base;
			if (p.proto != proto) /* the protocol's default buffer (NCCL's own) */
				p.buffsize = proto == COLL_PROTO_SIMPLE ? 4 << 20
					     : proto == COLL_PROTO_LL	? 256 << 10
									: 4800 << 10;
			p.proto = proto;
			p.nchannels = channel_list[c];
			p.nnodes = nodes ? nodes : 1;
			char what[96];
			if (nodes)
				snprintf(what, sizeof what, "tree, %d node%s, %s, %d channel%s", nodes,
					 nodes == 1 ? "" : "s", proto_names[proto], p.nchannels,
					 p.nchannels == 1 ? "" : "s");
			else
				snprintf(what, sizeof what, "ring, %s, %d channel%s", proto_names[proto], p.nchannels,
					 p.nchannels == 1 ? "" : "s");
			ALIGN_TRY(&ex->ctx->err, try_one(ex, impl, &p, what));
		}
	return ALIGN_OK;
}

static int explain_load(struct explain *ex, const struct run_opts *o, struct st_file *xf, struct st_file *yf)
{
	struct align_err *e = &ex->ctx->err;
	ALIGN_TRY(e, safetensors_read_err(o->inputs, xf, e));
	ALIGN_TRY(e, run_load_input(e, xf, o->inputs, &ex->x));
	ALIGN_TRY(e, safetensors_read_err(o->explain, yf, e));
	ex->obs = safetensors_find(yf, "y");
	if (!ex->obs)
		return fail_input(e, "%s: no tensor 'y' (the observed result)", o->explain);
	if (strcmp(ex->obs->dtype, run_trace_dtype(ex->y.dtype)))
		return fail_input(e, "%s: tensor 'y' is %s, the run's is %s (ALIGN_COLL_DTYPE)", o->explain,
				  ex->obs->dtype, run_trace_dtype(ex->y.dtype));
	int64_t rows = ex->y.shape[0], cols = ex->y.shape[1];
	int whole = ex->obs->ndim == 2 && ex->obs->shape[0] == rows && ex->obs->shape[1] == cols;
	int one = ex->obs->ndim == 2 && ex->obs->shape[0] == 1 && ex->obs->shape[1] == cols &&
		  !strcmp(ex->op->name, "allreduce");
	if (!whole && !one)
		return fail_input(e, "%s: tensor 'y' must be [%lld,%lld]%s", o->explain, (long long)rows,
				  (long long)cols, strcmp(ex->op->name, "allreduce") ? "" : " or one rank's [1,D]");
	ex->obs_elems = whole ? rows * cols : cols;
	return ALIGN_OK;
}

int run_explain(struct align_ctx *ctx, struct run_opts *o)
{
	struct align_err *e = &ctx->err;
	struct explain ex = {.ctx = ctx, .op = ops_find(o->op)};
	if (!ex.op || !ops_op_reads_mode(ex.op, MODE_COLL_IMPL))
		return fail_input(e, "--explain: '%s' has no summation order to find (allreduce or reduce_scatter)",
				  o->op);
	if (!o->inputs)
		return fail_input(e, "--explain needs --inputs (the ranks' contributions x[N,cols])");
	if (o->ranks || o->nccl_id || strcmp(o->device, "cpu") || o->trace || o->outputs || o->steps > 1 || o->variant)
		return fail_input(e, "--explain runs the C twin once: drop --ranks, --nccl-id, --device cuda, --trace, "
				     "--outputs, --steps, --variant");
	ALIGN_TRY(e, ctx_resolve_modes(ctx, &ctx->modes, o->profile, 1, o->kv, o->n_kv));
	struct align_dims d;
	ALIGN_TRY(e, run_resolve_dims(e, ex.op, o->shape, 0, &d));
	int N = (int)d.v[ALIGN_DIM_N];
	struct coll_params base;
	ex.op->impl->params_default(&base, &d);
	ALIGN_TRY(e, coll_params_from_env(&base, N, env_get, e));
	struct st_file xf = {0}, yf = {0};
	int rc = ops_tensor_alloc(ex.op, 0, 0, &d, &ctx->modes, &ex.x) ||
				 ops_tensor_alloc(ex.op, 1, 0, &d, &ctx->modes, &ex.y)
			 ? fail_input(e, "op '%s': bad dims", o->op)
			 : explain_load(&ex, o, &xf, &yf);
	if (!rc) {
		fprintf(ctx->out, "%s: %d ranks x %lld, %s; observed %s\n", o->op, N, (long long)ex.x.shape[1],
			run_trace_dtype(ex.y.dtype), o->explain);
		rc = try_one(&ex, ALIGN_COLL_IMPL_FIXED, &base, "fixed (rank order, one rounding)");
	}
	if (!rc)
		rc = try_model(&ex, &base, ALIGN_COLL_IMPL_NCCL_MODEL_RING, 0);
	for (int m = 1; !rc && m <= N; m++)
		if (N % m == 0)
			rc = try_model(&ex, &base, ALIGN_COLL_IMPL_NCCL_MODEL_TREE, m);
	if (!rc && !ex.n_match) {
		fprintf(ctx->out, "  no candidate reproduces it; closest:\n");
		for (int k = 0; k < 3 && ex.close[k].what[0]; k++)
			fprintf(ctx->out, "    %s: %lld of %lld elements differ\n", ex.close[k].what,
				(long long)ex.close[k].diff, (long long)ex.obs_elems);
		rc = ALIGN_DIFF;
	}
	ops_tensor_free(&ex.x);
	ops_tensor_free(&ex.y);
	safetensors_free(&xf);
	safetensors_free(&yf);
	return rc;
}
