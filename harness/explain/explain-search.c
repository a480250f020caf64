/* explain-search: the phases of `align explain`'s search (explain.h).
 *
 *   0. the op's dtype contract: an observed output dtype (or an input dtype) that no assignment of the
 *      space gives is bad input (exit 2), found without a replay;
 *   1. the profiles' assignments (profiles.def, restricted to the op's switches), the defaults and every
 *      --mode narrowing: the frameworks' known choices first;
 *   2. every assignment one switch away from those of phase 1 and from each match found so far;
 *   3. every assignment of the space, when the space holds at most --max-replays assignments (the
 *      search is then exhaustive); else the search stops after phase 2 and says so.
 * Each assignment is screened on the first rows (the ops whose rows are independent: explain-load.c)
 * and replayed whole only when those rows agree; a whole replay that agrees bitwise is a match. The
 * screening is a refutation only (rows that differ cannot belong to a reproduction); before it is used
 * the default assignment's screened rows are checked against its whole replay's, and screening is turned
 * off when they disagree. */
#include "ctx.h"
#include "err.h"
#include "explain.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EX_CHUNK 65536 /* assignments per ex_eval call in phase 3 */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* phase 0: some assignment's dtypes are the observed ones (enumerated when the space is small enough,
 * else the switches that decide dtypes are few and phase 1-3 find it) */
static int check_dtypes(struct ex_search *s)
{
	if (!s->sp.size || s->sp.size > (1u << 22))
		return ALIGN_OK;
	struct align_modes m;
	for (uint64_t a = 0; a < s->sp.size; a++) {
		ex_space_modes(&s->sp, a, &m);
		if (ex_space_contract(s, &m))
			return ALIGN_OK;
	}
	const struct align_op_impl *im = s->c->op->impl;
	for (int k = 0; k < im->n_out; k++) {
		const struct align_tensor *o = &s->c->obs[k];
		if (!o->data)
			continue;
		char got[16];
		snprintf(got, sizeof got, "%s",
			 o->dtype == ALIGN_DT_BF16  ? "bf16"
			 : o->dtype == ALIGN_DT_F16 ? "fp16"
			 : o->dtype == ALIGN_DT_I32 ? "int32"
						    : "fp32");
		int can = 0;
		for (uint64_t a = 0; a < s->sp.size && !can; a++) {
			ex_space_modes(&s->sp, a, &m);
			can = (im->out_dtype ? im->out_dtype(&m, k) : im->out[k].dtype) == o->dtype;
		}
		if (!can)
			return fail_input(&s->ctx->err,
					  "%s: tensor '%s' is %s, which op '%s' never writes under the "
					  "switches searched",
					  s->c->out_src, im->out[k].name, got, s->c->op->name);
	}
	return fail_input(&s->ctx->err,
			  "%s: the input dtypes are not those op '%s' takes under any assignment of "
			  "its switches",
			  s->c->in_src, s->c->op->name);
}

/* the screening rows of the default assignment agree with its whole replay's first rows */
static int check_screen(struct ex_search *s)
{
	if (!s->screen || !s->c->rows)
		return s->screen = 0, ALIGN_OK;
	struct align_modes m;
	uint64_t a = 0;
	ex_space_modes(&s->sp, a, &m);
	if (!ex_space_contract(s, &m))
		return ALIGN_OK; /* a different dtype: the first phase's replays decide */
	const struct ex_case *c = s->c;
	const struct align_op_impl *im = c->op->impl;
	struct align_tensor whole[EX_MAX_T] = {{0}}, part[EX_MAX_T] = {{0}};
	int rc = ALIGN_OK, ok = 1;
	for (int k = 0; k < im->n_out && !rc; k++)
		if (ops_tensor_alloc(c->op, 1, k, &c->d, &m, &whole[k]) ||
		    ops_tensor_alloc(c->op, 1, k, &c->sd, &m, &part[k]))
			rc = fail_internal(&s->ctx->err, "out of memory");
	struct align_err err = {0};
	if (!rc && (im->cfg_check && (im->cfg_check(c->params, &m, &c->d, s->device, &err) ||
				      im->cfg_check(c->params, &m, &c->sd, s->device, &err))))
		ok = 0;
	if (!rc && ok)
		ok = !ops_fwd_cpu(c->op, c->params, &m, c->in, im->n_in, whole, im->n_out) &&
		     !ops_fwd_cpu(c->op, c->params, &m, c->sin, im->n_in, part, im->n_out);
	for (int k = 0; !rc && ok && k < im->n_out; k++)
		ok = !memcmp(whole[k].data, part[k].data,
			     (size_t)align_tensor_numel(&part[k]) * align_dtype_size(part[k].dtype));
	for (int k = 0; k < EX_MAX_T; k++)
		ops_tensor_free(&whole[k]), ops_tensor_free(&part[k]);
	if (!ok)
		s->screen = 0;
	return rc;
}

/* phase 1: the profiles, the defaults */
static int phase_known(struct ex_search *s, uint64_t *as, uint64_t *n)
{
	uint32_t missing;
	struct align_modes m;
	modes_init_default(&m);
	as[(*n)++] = ex_space_from_modes(&s->sp, &m, &missing);
	for (const char *const *p = modes_profiles(); *p; p++) {
		char err[256];
		modes_init_default(&m);
		if (modes_apply_profile(&m, *p, err, sizeof err))
			return fail_internal(&s->ctx->err, "profile '%s': %s", *p, err);
		as[(*n)++] = ex_space_from_modes(&s->sp, &m, &missing);
	}
	return ex_eval(s, as, *n, 1);
}

/* phase 2: one switch away from the seeds and from every match */
static int phase_neighbours(struct ex_search *s, const uint64_t *seeds, uint64_t n_seeds)
{
	uint64_t cap = (n_seeds + s->cache.n) * EX_MAX_SW * MODES_MAX_VALUES + 1, n = 0;
	uint64_t *as = malloc((size_t)cap * sizeof *as);
	if (!as)
		return fail_internal(&s->ctx->err, "out of memory");
	for (uint64_t j = 0; j < n_seeds + s->cache.cap; j++) {
		uint64_t a;
		if (j < n_seeds)
			a = seeds[j];
		else if (s->cache.slot[j - n_seeds].state == EX_MATCH)
			a = s->cache.slot[j - n_seeds].a;
		else
			continue;
		for (int i = 0; i < s->sp.n_sw; i++)
			for (int k = 0; k < s->sp.n_val[i] && n < cap; k++)
				as[n++] = ex_space_with(&s->sp, a, i, s->sp.val[i][k]);
	}
	int rc = ex_eval(s, as, n, 1);
	free(as);
	return rc;
}

/* phase 3: the whole space, in chunks */
static int phase_all(struct ex_search *s)
{
	uint64_t *as = malloc(EX_CHUNK * sizeof *as);
	if (!as)
		return fail_internal(&s->ctx->err, "out of memory");
	int rc = ALIGN_OK;
	for (uint64_t a0 = 0; !rc && a0 < s->sp.size; a0 += EX_CHUNK) {
		uint64_t n = s->sp.size - a0 < EX_CHUNK ? s->sp.size - a0 : EX_CHUNK;
		for (uint64_t i = 0; i < n; i++)
			as[i] = a0 + i;
		rc = ex_eval(s, as, n, 1);
	}
	free(as);
	return rc;
}

int ex_search_run(struct ex_search *s)
{
	struct align_err *e = &s->ctx->err;
	double t0 = now();
	ALIGN_TRY(e, check_dtypes(s));
	uint64_t cap = s->sp.size && s->sp.size < (1u << 16) ? s->sp.size : (1u << 16);
	if (ex_cache_init(&s->cache, cap))
		return fail_internal(e, "out of memory");
	ALIGN_TRY(e, check_screen(s));
	uint64_t seeds[64], n = 0;
	ALIGN_TRY(e, phase_known(s, seeds, &n));
	ALIGN_TRY(e, phase_neighbours(s, seeds, n));
	s->exhaustive = s->sp.size && s->sp.size <= s->max_replays;
	if (s->exhaustive)
		ALIGN_TRY(e, phase_all(s));
	s->seconds = now() - t0;
	return ALIGN_OK;
}

void ex_search_free(struct ex_search *s)
{
	ex_cache_free(&s->cache);
}
