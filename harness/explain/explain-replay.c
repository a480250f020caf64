/* explain-replay: the replays of `align explain` and their cache.
 *
 * One replay of assignment a: its modes (explain-space.c), the op's dtype contract (no replay when the
 * dtypes cannot be the observed ones), the op's own config check (impl->cfg_check: a combination the twin
 * refuses is recorded, never substituted), then the C twin on the screening rows (when the op has them)
 * and, for an assignment whose screening rows agree, on the whole input; the observed outputs are
 * compared element by element (bit patterns; ULP distance in the output's dtype).
 * Results are cached by the assignment index (the op's switches only: the effective assignment), so a
 * phase that asks again costs nothing. ex_eval runs a list of assignments on s->jobs threads (the C twins
 * keep no mutable state; each thread has its own output buffers); results are merged into the cache by
 * the calling thread. */
#include "align-config.h"
#include "ctx.h"
#include "err.h"
#include "explain.h"
#if ALIGN_HAVE_CUDA
#include "run-device.h"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int ex_cache_init(struct ex_cache *c, uint64_t cap)
{
	uint64_t n = 1024;
	while (n < cap * 2 && n < (1ull << 40))
		n <<= 1;
	c->slot = calloc((size_t)n, sizeof *c->slot);
	c->cap = c->slot ? n : 0, c->n = 0;
	return c->slot ? ALIGN_OK : ALIGN_ERR_INTERNAL;
}

void ex_cache_free(struct ex_cache *c)
{
	free(c->slot);
	c->slot = NULL, c->cap = c->n = 0;
}

static uint64_t mix(uint64_t a)
{
	a ^= a >> 33, a *= 0xff51afd7ed558ccdull, a ^= a >> 33;
	return a;
}

struct ex_result *ex_cache_get(struct ex_cache *c, uint64_t a)
{
	for (uint64_t h = mix(a) & (c->cap - 1);; h = (h + 1) & (c->cap - 1)) {
		if (c->slot[h].state == EX_UNTRIED)
			return NULL;
		if (c->slot[h].a == a)
			return &c->slot[h];
	}
}

static int cache_put(struct ex_cache *c, const struct ex_result *r)
{
	if ((c->n + 1) * 2 > c->cap) {
		struct ex_cache g;
		if (ex_cache_init(&g, c->cap))
			return ALIGN_ERR_INTERNAL;
		for (uint64_t i = 0; i < c->cap; i++)
			if (c->slot[i].state != EX_UNTRIED)
				cache_put(&g, &c->slot[i]);
		free(c->slot);
		*c = g;
	}
	uint64_t h = mix(r->a) & (c->cap - 1);
	while (c->slot[h].state != EX_UNTRIED && c->slot[h].a != r->a)
		h = (h + 1) & (c->cap - 1);
	if (c->slot[h].state == EX_UNTRIED)
		c->n++;
	c->slot[h] = *r;
	return ALIGN_OK;
}

/* ordered-integer position of a float pattern (sign-magnitude -> monotone), for ULP distances */
static int64_t ordered(uint64_t bits, int nbits)
{
	uint64_t sign = 1ull << (nbits - 1);
	return bits & sign ? -(int64_t)(bits & (sign - 1)) : (int64_t)bits;
}

static int is_nan(uint64_t bits, int dt)
{
	if (dt == ALIGN_DT_F32)
		return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu);
	if (dt == ALIGN_DT_BF16)
		return (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu);
	if (dt == ALIGN_DT_F16)
		return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu);
	return 0;
}

/* differing elements of a against the observed o (same dtype and element count), and the largest ULP */
static void compare(const struct align_tensor *a, const struct align_tensor *o, uint64_t *n_differ, uint64_t *max_ulp)
{
	size_t es = align_dtype_size(o->dtype);
	int64_t n = align_tensor_numel(o);
	const unsigned char *p = a->data, *q = o->data;
	for (int64_t i = 0; i < n; i++, p += es, q += es) {
		if (!memcmp(p, q, es))
			continue;
		(*n_differ)++;
		uint64_t x = 0, y = 0;
		memcpy(&x, p, es), memcpy(&y, q, es);
		if (is_nan(x, o->dtype) || is_nan(y, o->dtype))
			continue;
		int64_t d = o->dtype == ALIGN_DT_I32 ? (int64_t)(int32_t)x - (int64_t)(int32_t)y
						     : ordered(x, (int)es * 8) - ordered(y, (int)es * 8);
		uint64_t u = d < 0 ? (uint64_t)-d : (uint64_t)d;
		if (u > *max_ulp)
			*max_ulp = u;
	}
}

/* One thread's output buffers: output k of the whole dims (the largest element size). */
struct ex_work {
	struct align_tensor out[EX_MAX_T];
};

static int work_init(struct ex_search *s, struct ex_work *w)
{
	const struct align_op_impl *im = s->c->op->impl;
	memset(w, 0, sizeof *w);
	for (int k = 0; k < im->n_out; k++) {
		struct align_tensor *t = &w->out[k];
		if (ops_shape_eval(im->out[k].shape, &s->c->d, t->shape, &t->ndim))
			return ALIGN_ERR_INPUT;
		t->name = im->out[k].name;
		t->data = calloc((size_t)align_tensor_numel(t), 4);
		if (!t->data)
			return ALIGN_ERR_INTERNAL;
	}
	return ALIGN_OK;
}

static void work_free(struct ex_work *w)
{
	for (int k = 0; k < EX_MAX_T; k++)
		ops_tensor_free(&w->out[k]);
}

int ex_fwd(struct ex_search *s, const struct align_modes *m, const struct align_tensor *in, struct align_tensor *out)
{
	const struct align_op *op = s->c->op;
	if (s->device != ALIGN_DEVICE_CUDA)
		return ops_fwd_cpu(op, s->c->params, m, in, op->impl->n_in, out, op->impl->n_out);
#if ALIGN_HAVE_CUDA
	return run_device_op(s->dev, op, s->c->params, m, in, op->impl->n_in, out, op->impl->n_out);
#else
	return ALIGN_ERR_UNSUPPORTED;
#endif
}

/* the twin on the case's whole tensors (whole != 0) or its screening rows, into w; compared */
static int replay(struct ex_search *s, struct ex_work *w, const struct align_modes *m, int whole, struct ex_result *r)
{
	const struct ex_case *c = s->c;
	const struct align_op_impl *im = c->op->impl;
	const struct align_dims *d = whole ? &c->d : &c->sd;
	const struct align_tensor *in = whole ? c->in : c->sin;
	struct align_tensor out[EX_MAX_T];
	for (int k = 0; k < im->n_out; k++) {
		out[k] = w->out[k];
		ops_shape_eval(im->out[k].shape, d, out[k].shape, &out[k].ndim);
		out[k].dtype = im->out_dtype ? im->out_dtype(m, k) : im->out[k].dtype;
	}
	struct align_err err = {0};
	if (im->cfg_check && im->cfg_check(c->params, m, d, s->device, &err)) {
		r->state = EX_REFUSED;
		return ALIGN_OK;
	}
	int rc = ex_fwd(s, m, in, out);
	if (rc == ALIGN_ERR_UNSUPPORTED) {
		r->state = EX_REFUSED;
		return ALIGN_OK;
	}
	if (rc)
		return rc;
	r->n_differ = r->max_ulp = 0;
	for (int k = 0; k < im->n_out; k++)
		if (c->obs[k].data)
			compare(&out[k], whole ? &c->obs[k] : &c->sobs[k], &r->n_differ, &r->max_ulp);
	r->state = whole ? (r->n_differ ? EX_DIFFER : EX_MATCH) : (r->n_differ ? EX_SCREENED : EX_PASSED);
	return ALIGN_OK;
}

/* One assignment from its cached state as far as `whole` asks (screen, then whole). */
static int eval_one(struct ex_search *s, struct ex_work *w, struct ex_result *r, int whole, int *screens, int *fulls)
{
	struct align_modes m;
	ex_space_modes(&s->sp, r->a, &m);
	if (r->state == EX_UNTRIED && !ex_space_contract(s, &m)) {
		r->state = EX_CONTRACT;
		return ALIGN_OK;
	}
	if (r->state == EX_UNTRIED && s->screen) {
		(*screens)++;
		ALIGN_TRY(NULL, replay(s, w, &m, 0, r));
	}
	if ((r->state == EX_UNTRIED || r->state == EX_PASSED) && whole) {
		(*fulls)++;
		ALIGN_TRY(NULL, replay(s, w, &m, 1, r));
	}
	return ALIGN_OK;
}

struct ex_pool {
	struct ex_search *s;
	struct ex_result *r;
	uint64_t n;
	int whole;
	atomic_ullong next;
	atomic_ullong screens, fulls;
	atomic_int rc;
};

static void *worker(void *u)
{
	struct ex_pool *p = u;
	struct ex_work w;
	if (work_init(p->s, &w)) {
		atomic_store(&p->rc, ALIGN_ERR_INTERNAL);
		work_free(&w);
		return NULL;
	}
	int screens = 0, fulls = 0;
	for (;;) {
		uint64_t i = atomic_fetch_add(&p->next, 1);
		if (i >= p->n || atomic_load(&p->rc))
			break;
		int rc = eval_one(p->s, &w, &p->r[i], p->whole, &screens, &fulls);
		if (rc)
			atomic_store(&p->rc, rc);
	}
	atomic_fetch_add(&p->screens, (unsigned long long)screens);
	atomic_fetch_add(&p->fulls, (unsigned long long)fulls);
	work_free(&w);
	return NULL;
}

static int by_a(const void *x, const void *y)
{
	uint64_t a = ((const struct ex_result *)x)->a, b = ((const struct ex_result *)y)->a;
	return a < b ? -1 : a > b;
}

int ex_eval(struct ex_search *s, const uint64_t *as, uint64_t n, int whole)
{
	struct align_err *e = &s->ctx->err;
	struct ex_result *r = calloc((size_t)n + 1, sizeof *r);
	if (!r)
		return fail_internal(e, "out of memory");
	uint64_t m = 0;
	for (uint64_t i = 0; i < n; i++) { /* only what the cache does not answer yet, each once */
		const struct ex_result *c = ex_cache_get(&s->cache, as[i]);
		if (!c || (whole && c->state == EX_PASSED))
			r[m++] = c ? *c : (struct ex_result){.a = as[i]};
	}
	qsort(r, (size_t)m, sizeof *r, by_a);
	uint64_t u = 0;
	for (uint64_t i = 0; i < m; i++)
		if (!u || r[u - 1].a != r[i].a)
			r[u++] = r[i];
	m = u;
	struct ex_pool p = {.s = s, .r = r, .n = m, .whole = whole};
	atomic_init(&p.next, 0), atomic_init(&p.screens, 0), atomic_init(&p.fulls, 0), atomic_init(&p.rc, 0);
	int jobs = s->jobs < 1 ? 1 : s->jobs;
	if ((uint64_t)jobs > m)
		jobs = m ? (int)m : 1;
	pthread_t th[64];
	int started = 0;
	for (int t = 1; t < jobs && t < 64; t++)
		if (!pthread_create(&th[started], NULL, worker, &p))
			started++;
	worker(&p);
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	int rc = atomic_load(&p.rc);
	for (uint64_t i = 0; !rc && i < m; i++) {
		if (r[i].state == EX_CONTRACT)
			s->n.contract++;
		if (r[i].state == EX_REFUSED)
			s->n.refused++;
		if (r[i].state == EX_MATCH)
			s->n_match++;
		if (cache_put(&s->cache, &r[i]))
			rc = ALIGN_ERR_INTERNAL;
	}
	s->n.screen += atomic_load(&p.screens);
	s->n.full += atomic_load(&p.fulls);
	free(r);
	if (rc)
		return rc == ALIGN_ERR_INTERNAL ? fail_internal(e, "a replay of op '%s' failed", s->c->op->name)
						: fail_input(e, "op '%s' refused the inputs (%s): a replay failed (%d)",
							     s->c->op->name, s->c->in_src, rc);
	return ALIGN_OK;
}

int ex_replay_whole(struct ex_search *s, uint64_t a, struct align_tensor *out)
{
	const struct ex_case *c = s->c;
	const struct align_op_impl *im = c->op->impl;
	struct align_modes m;
	ex_space_modes(&s->sp, a, &m);
	for (int k = 0; k < im->n_out; k++)
		if (ops_tensor_alloc(c->op, 1, k, &c->d, &m, &out[k]))
			return fail_internal(&s->ctx->err, "out of memory");
	int rc = ex_fwd(s, &m, c->in, out);
	return rc ? fail_internal(&s->ctx->err, "op '%s': a replay that ran before failed now (%d)", c->op->name, rc)
		  : ALIGN_OK;
}
