/* explain-runs: `align explain --op OP --runs A,B`: the op invocation of each run at the first place
 * where the two runs' outputs differ, read from the store's payloads (ATF `payload`, the probes' payload
 * option). The records are named PREFIX.<tensor> (PREFIX: --record, default the op's name; <tensor>: the
 * op's input and output names as `align run --list` gives them, as `align run` traces name them). An
 * invocation is one (rank, step, micro-batch, occurrence) key; the first in A's execution order whose key
 * B also has and at which some output's bytes differ is explained on both sides (with no difference, the
 * first common one: both sides are explained and no switch differs). */
#include "cmd.h"
#include "ctx.h"
#include "err.h"
#include "explain.h"
#include "store-explain.h"
#include "store-report.h"
#include "store.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct ex_rec {
	char *tensor, *dtype, *shape; /* tensor: the name after "PREFIX." */
	unsigned char *z;	      /* compressed payload */
	size_t zlen;
	int64_t rank, step, micro, occ;
};

struct ex_recs {
	struct ex_rec *r;
	size_t n, cap;
	size_t prefix_len;
	int oom;
};

static int collect(void *u, const struct store_explain_row *row)
{
	struct ex_recs *s = u;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct ex_rec *r = realloc(s->r, cap * sizeof *r);
		if (!r)
			return ALIGN_ERR_INTERNAL;
		s->r = r, s->cap = cap;
	}
	struct ex_rec *x = &s->r[s->n];
	memset(x, 0, sizeof *x);
	x->tensor = strdup(row->name + s->prefix_len + 1);
	x->dtype = strdup(row->dtype ? row->dtype : "");
	x->shape = strdup(row->shape ? row->shape : "[]");
	x->z = malloc(row->payload_len ? row->payload_len : 1);
	if (!x->tensor || !x->dtype || !x->shape || !x->z) {
		free(x->tensor), free(x->dtype), free(x->shape), free(x->z);
		return ALIGN_ERR_INTERNAL;
	}
	memcpy(x->z, row->payload, row->payload_len);
	x->zlen = row->payload_len;
	x->rank = row->rank, x->step = row->step, x->micro = row->micro, x->occ = row->occ;
	s->n++;
	return ALIGN_OK;
}

static void recs_free(struct ex_recs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->r[i].tensor), free(s->r[i].dtype), free(s->r[i].shape), free(s->r[i].z);
	free(s->r);
	memset(s, 0, sizeof *s);
}

static int same_key(const struct ex_rec *a, const struct ex_rec *b)
{
	return a->rank == b->rank && a->step == b->step && a->micro == b->micro && a->occ == b->occ;
}

static const struct ex_rec *find(const struct ex_recs *s, const struct ex_rec *key, const char *tensor)
{
	for (size_t i = 0; i < s->n; i++)
		if (same_key(&s->r[i], key) && !strcmp(s->r[i].tensor, tensor))
			return &s->r[i];
	return NULL;
}

/* the record's tensor: dtype, shape (JSON), inflated payload */
static int to_tensor(struct align_err *e, const char *run, const char *prefix, const struct ex_rec *x, const char *name,
		     struct align_tensor *t)
{
	int dt = ex_dtype_of(x->dtype);
	if (dt < 0)
		return fail_input(e, "run '%s': record '%s.%s' is %s; the ops take fp32, bf16, fp16 or int32", run,
				  prefix, name, x->dtype);
	json_error_t je;
	json_t *sh = json_loads(x->shape, 0, &je);
	size_t nd = json_is_array(sh) ? json_array_size(sh) : 0;
	memset(t, 0, sizeof *t);
	t->dtype = dt, t->name = name, t->ndim = (int)nd;
	int64_t numel = 1;
	for (size_t i = 0; i < nd && i < 4; i++)
		t->shape[i] = json_integer_value(json_array_get(sh, i)), numel *= t->shape[i];
	json_decref(sh);
	if (nd < 1 || nd > 4)
		return fail_input(e, "run '%s': record '%s.%s' has shape %s; the ops' tensors have 1 to 4 dims", run,
				  prefix, name, x->shape);
	uLongf len = (uLongf)((size_t)numel * align_dtype_size(dt));
	t->data = malloc(len ? len : 1);
	if (!t->data)
		return fail_internal(e, "out of memory");
	uLongf got = len;
	if (uncompress(t->data, &got, x->z, (uLong)x->zlen) != Z_OK || got != len)
		return fail_input(e, "run '%s': the payload of record '%s.%s' does not inflate to its %lu bytes", run,
				  prefix, name, (unsigned long)len);
	return ALIGN_OK;
}

/* 1 when some output payload at key differs between the runs (compared inflated) */
static int outputs_differ(const struct align_op *op, const struct ex_recs *a, const struct ex_recs *b,
			  const struct ex_rec *key)
{
	for (int k = 0; k < op->impl->n_out; k++) {
		const char *name = op->impl->out[k].name;
		const struct ex_rec *x = find(a, key, name), *y = find(b, key, name);
		if (!x || !y || (x->zlen == y->zlen && !memcmp(x->z, y->z, x->zlen)))
			continue;
		struct align_err ignored = {0}; /* a payload that does not inflate is reported when it is loaded */
		struct align_tensor tx = {0}, ty = {0};
		int differ = to_tensor(&ignored, "a", "", x, name, &tx) || to_tensor(&ignored, "b", "", y, name, &ty) ||
			     tx.dtype != ty.dtype || align_tensor_numel(&tx) != align_tensor_numel(&ty) ||
			     memcmp(tx.data, ty.data, (size_t)align_tensor_numel(&tx) * align_dtype_size(tx.dtype));
		ops_tensor_free(&tx), ops_tensor_free(&ty);
		if (differ)
			return 1;
	}
	return 0;
}

static int build_case(struct align_ctx *ctx, const char *run, const char *prefix, const struct ex_recs *s,
		      const struct ex_rec *key, struct ex_case *c)
{
	struct align_err *e = &ctx->err;
	const struct align_op_impl *im = c->op->impl;
	snprintf(c->in_src, sizeof c->in_src, "run '%s' rank %lld step %lld micro %lld", run, (long long)key->rank,
		 (long long)key->step, (long long)key->micro);
	snprintf(c->out_src, sizeof c->out_src, "%s", c->in_src);
	for (int i = 0; i < im->n_in; i++) {
		const struct ex_rec *x = find(s, key, im->in[i].name);
		if (!x)
			return fail_input(e,
					  "%s: no record '%s.%s' with a payload (explain needs the op's inputs and "
					  "outputs as payloads)",
					  c->in_src, prefix, im->in[i].name);
		ALIGN_TRY(e, to_tensor(e, run, prefix, x, im->in[i].name, &c->in[i]));
	}
	int any = 0;
	for (int k = 0; k < im->n_out; k++) {
		const struct ex_rec *x = find(s, key, im->out[k].name);
		if (!x)
			continue;
		ALIGN_TRY(e, to_tensor(e, run, prefix, x, im->out[k].name, &c->obs[k]));
		any = 1;
	}
	if (!any)
		return fail_input(e, "%s: no output record of '%s' with a payload", c->in_src, prefix);
	return ALIGN_OK;
}

/* the first key of a (execution order) with an output record that b has too, preferring one that differs */
static const struct ex_rec *pick(const struct align_op *op, const struct ex_recs *a, const struct ex_recs *b)
{
	const struct ex_rec *first = NULL;
	for (size_t i = 0; i < a->n; i++) {
		const struct ex_rec *x = &a->r[i];
		int is_out = 0;
		for (int k = 0; k < op->impl->n_out; k++)
			is_out |= !strcmp(x->tensor, op->impl->out[k].name);
		if (!is_out || !find(b, x, x->tensor))
			continue;
		if (outputs_differ(op, a, b, x))
			return x;
		if (!first)
			first = x;
	}
	return first;
}

int ex_load_runs(struct align_ctx *ctx, const char *runs, const char *record, struct ex_case c[2], const char *names[2])
{
	struct align_err *e = &ctx->err;
	const char *comma = strchr(runs, ',');
	if (!comma || comma == runs || !comma[1] || strchr(comma + 1, ','))
		return fail_input(e, "option '--runs': expected two run names A,B, got '%s'", runs);
	names[0] = strndup(runs, (size_t)(comma - runs));
	names[1] = strdup(comma + 1);
	if (!names[0] || !names[1])
		return fail_internal(e, "out of memory");
	const char *prefix = record ? record : c[0].op->name;
	const char *path = cmd_db_path(ctx->db_path);
	ALIGN_TRY(e, store_open_err(path, STORE_READ, ALIGN_BUSY_MS, &ctx->db, e));
	struct ex_recs s[2] = {{.prefix_len = strlen(prefix)}, {.prefix_len = strlen(prefix)}};
	int rc = ALIGN_OK;
	for (int k = 0; k < 2 && !rc; k++) {
		int found = 0;
		rc = store_explain_tensors(ctx->db, names[k], prefix, collect, &s[k], &found, e);
		if (rc == ALIGN_ERR_INTERNAL && !e->msg[0])
			rc = fail_internal(e, "out of memory");
		if (!rc && !found) {
			char list[1024];
			store_report_run_names(ctx->db, list, sizeof list);
			rc = fail_input(e, "%s: no run '%s' (runs: %s)", path, names[k], list);
		}
		if (!rc && !s[k].n)
			rc = fail_input(e, "%s: run '%s' has no record '%s.<tensor>' with a payload (ATF 'payload')",
					path, names[k], prefix);
	}
	const struct ex_rec *key = rc ? NULL : pick(c[0].op, &s[0], &s[1]);
	if (!rc && !key)
		rc = fail_input(e,
				"%s: runs '%s' and '%s' have no output record of '%s' at a common rank, step, "
				"micro-batch and occurrence",
				path, names[0], names[1], prefix);
	for (int k = 0; k < 2 && !rc; k++)
		rc = build_case(ctx, names[k], prefix, &s[k], key, &c[k]);
	recs_free(&s[0]);
	recs_free(&s[1]);
	return rc;
}
