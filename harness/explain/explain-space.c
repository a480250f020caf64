/* explain-space: the search space of `align explain` (explain.h): the op's switches (impl->modes) and
 * the values the device can replay (CPU: every value but the GPU-only ones; CUDA: every value but the
 * CPU-only ones), narrowed by --mode KEY=VALUE; assignments as mixed-radix indices; and the op's dtype
 * contract (impl->out_dtype, impl->in_dtype), which excludes an assignment without a replay when the
 * dtypes it gives cannot be those observed. */
#include "ctx.h"
#include "err.h"
#include "explain.h"

#include <string.h>

/* --mode KEY=VALUE: the switch's value, resolved through the registry (its messages) */
static int apply_fix(struct ex_search *s, const char *kv, int *mode, int *value)
{
	struct align_modes m;
	modes_init_default(&m);
	char err[512];
	if (modes_apply_kv(&m, kv, err, sizeof err))
		return fail_input(&s->ctx->err, "option '--mode': %s", err);
	for (int id = 0; id < MODE_COUNT; id++)
		if (m.src[id] == MODE_SRC_CLI) {
			*mode = id, *value = m.v[id];
			return ALIGN_OK;
		}
	return fail_input(&s->ctx->err, "option '--mode': '%s' sets no switch", kv);
}

int ex_space_init(struct ex_search *s, const char *const *fix, int n_fix)
{
	struct ex_space *sp = &s->sp;
	const struct align_op *op = s->c->op;
	memset(sp, 0, sizeof *sp);
	modes_init_default(&sp->base);
	int fm[EX_MAX_FIX], fv[EX_MAX_FIX];
	for (int k = 0; k < n_fix; k++) {
		ALIGN_TRY(&s->ctx->err, apply_fix(s, fix[k], &fm[k], &fv[k]));
		if (!ops_op_reads_mode(op, fm[k]))
			return fail_input(&s->ctx->err,
					  "option '--mode': op '%s' does not read %s (its switches: see "
					  "'align run --list')",
					  op->name, modes_info(fm[k])->env);
	}
	sp->size = 1;
	for (const int *p = op->impl->modes; *p >= 0; p++) {
		if (sp->n_sw == EX_MAX_SW)
			return fail_internal(&s->ctx->err, "op '%s' reads more than %d switches", op->name, EX_MAX_SW);
		int i = sp->n_sw++, id = *p, want = -1;
		sp->sw[i] = id;
		for (int k = 0; k < n_fix; k++)
			if (fm[k] == id)
				want = fv[k], sp->fixed[i] = 1;
		for (int v = 0; v < modes_value_count(id); v++) {
			int keep = (want < 0 || v == want) && !modes_value_refused_on(id, v, s->device);
			if (keep)
				sp->val[i][sp->n_val[i]++] = v;
			else
				sp->left[i][sp->n_left[i]++] = v;
		}
		if (!sp->n_val[i])
			return fail_input(&s->ctx->err, "option '--mode': %s=%s cannot run on the %s",
					  modes_info(id)->env, modes_value_name(id, want),
					  s->device == ALIGN_DEVICE_CUDA ? "GPU" : "CPU");
		sp->size = sp->size > UINT64_MAX / 2 / (uint64_t)sp->n_val[i] ? 0 : sp->size * (uint64_t)sp->n_val[i];
	}
	return ALIGN_OK;
}

int ex_space_digit(const struct ex_space *sp, uint64_t a, int i)
{
	for (int k = 0; k < i; k++)
		a /= (uint64_t)sp->n_val[k];
	return (int)(a % (uint64_t)sp->n_val[i]);
}

uint64_t ex_space_with(const struct ex_space *sp, uint64_t a, int i, int v)
{
	uint64_t w = 1;
	for (int k = 0; k < i; k++)
		w *= (uint64_t)sp->n_val[k];
	int d = ex_space_digit(sp, a, i);
	int nd = 0;
	for (int k = 0; k < sp->n_val[i]; k++)
		if (sp->val[i][k] == v)
			nd = k;
	return a - (uint64_t)d * w + (uint64_t)nd * w;
}

void ex_space_modes(const struct ex_space *sp, uint64_t a, struct align_modes *m)
{
	*m = sp->base;
	for (int i = 0; i < sp->n_sw; i++) {
		uint64_t n = (uint64_t)sp->n_val[i];
		m->v[sp->sw[i]] = sp->val[i][a % n];
		m->src[sp->sw[i]] = MODE_SRC_CLI;
		a /= n;
	}
}

uint64_t ex_space_from_modes(const struct ex_space *sp, const struct align_modes *m, uint32_t *missing)
{
	uint64_t a = 0, w = 1;
	*missing = 0;
	for (int i = 0; i < sp->n_sw; i++) {
		int d = -1;
		for (int k = 0; k < sp->n_val[i]; k++)
			if (sp->val[i][k] == m->v[sp->sw[i]])
				d = k;
		if (d < 0)
			*missing |= 1u << i, d = 0;
		a += (uint64_t)d * w;
		w *= (uint64_t)sp->n_val[i];
	}
	return a;
}

int ex_space_contract(const struct ex_search *s, const struct align_modes *m)
{
	const struct ex_case *c = s->c;
	const struct align_op_impl *im = c->op->impl;
	for (int k = 0; k < im->n_out; k++) {
		int dt = im->out_dtype ? im->out_dtype(m, k) : im->out[k].dtype;
		if (c->obs[k].data && c->obs[k].dtype != dt)
			return 0;
	}
	for (int i = 0; i < im->n_in; i++) {
		int dt = im->in_dtype ? im->in_dtype(m, i) : im->in[i].dtype;
		if (c->in[i].dtype != dt)
			return 0;
	}
	return 1;
}
