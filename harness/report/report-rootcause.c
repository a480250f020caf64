/* report-rootcause: the root-cause candidate (report.h): the first record in execution order that is
 * an output of a call (io 'out') whose value differs while every input record of that call (io 'in',
 * same rank, step, micro and call on each side) is present in both runs and equal: bitwise-equal, or,
 * for a tensor known on both sides only by its summaries (head and/or stats, as XTuner AccProber and
 * msprobe's statistics task record them), equal in every element and statistic shown (compare.h rule
 * 6). Such inputs are counted apart (report.h root_cause_inputs_summary): the match is not proven
 * bitwise. Searched step by step, in the steps whose records are read, until one is found. */
#include "report-impl.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_call(const void *pa, const void *pb)
{
	const struct rp_input *a = pa, *b = pb;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->micro != b->micro)
		return a->micro < b->micro ? -1 : 1;
	return strcmp(a->call, b->call);
}

static int is_io(const struct rp_ctx *c, const struct rp_row *w, const char *io)
{
	return w->call && w->io && !strcmp(rp_str(c, w->io), io);
}

/* Append the input records of one side to c->inputs (*n of them so far). */
static int collect_inputs(struct rp_ctx *c, int side, size_t *n)
{
	for (size_t i = 0; i < c->n_rows[side]; i++) {
		const struct rp_row *w = &c->rows[side][i];
		if (!is_io(c, w, "in"))
			continue;
		if (*n == c->cap_inputs) {
			size_t cap = c->cap_inputs ? 2 * c->cap_inputs : 1024;
			struct rp_input *grown = realloc(c->inputs, cap * sizeof *grown);
			if (!grown)
				return fail_internal(c->e, "out of memory");
			c->inputs = grown, c->cap_inputs = cap;
		}
		c->inputs[(*n)++] = (struct rp_input){w->rank, w->micro, rp_str(c, w->call), (int32_t)i};
	}
	return ALIGN_OK;
}

/* The range [*lo, *hi) of in[0, n) with the key (rank, micro, call). */
static void inputs_of(const struct rp_input *in, size_t n, const struct rp_input *key, size_t *lo, size_t *hi)
{
	size_t l = 0, h = n;
	while (l < h) {
		size_t m = (l + h) / 2;
		if (by_call(&in[m], key) < 0)
			l = m + 1;
		else
			h = m;
	}
	*lo = *hi = l;
	while (*hi < n && !by_call(&in[*hi], key))
		(*hi)++;
}

/* A record known only by its summaries: a head or stats, and no value, bits, digest or missing reason. */
static int summary_only(const struct rp_row *w)
{
	return (w->stats || w->head) && !w->has_bits && !w->has_value && !w->has_interval && !w->digest &&
	       !w->missing && !w->text;
}

/* Input records of the output pair p: how many run A has for its call, or -1 when one of them is not
 * matched in run B by an equal input of p's call in B (or B has inputs A lacks); *by_summary: how many
 * of them are equal only in their summaries. */
static int64_t equal_inputs(const struct rp_ctx *c, const struct rp_pair *p, const struct rp_input *in_a, size_t n_a,
			    const struct rp_input *in_b, size_t n_b, int64_t *by_summary)
{
	const struct rp_row *oa = &c->rows[0][p->ia], *ob = &c->rows[1][p->ib];
	struct rp_input ka = {oa->rank, oa->micro, rp_str(c, oa->call), -1},
			kb = {ob->rank, ob->micro, rp_str(c, ob->call), -1};
	size_t a0, a1, b0, b1;
	inputs_of(in_a, n_a, &ka, &a0, &a1);
	inputs_of(in_b, n_b, &kb, &b0, &b1);
	*by_summary = 0;
	if (a1 - a0 != b1 - b0)
		return -1;
	for (size_t k = a0; k < a1; k++) {
		const struct rp_row *wa = &c->rows[0][in_a[k].row];
		const struct rp_pair *q = &c->pairs[wa->pair];
		if (q->ib < 0)
			return -1;
		const struct rp_row *wb = &c->rows[1][q->ib];
		if (q->verdict == VERDICT_EQUAL_AS_PRINTED && summary_only(wa) && summary_only(wb))
			(*by_summary)++;
		else if (q->verdict != VERDICT_BITWISE_EQUAL)
			return -1;
		if (!is_io(c, wb, "in") || strcmp(rp_str(c, wb->call), kb.call))
			return -1;
	}
	return (int64_t)(a1 - a0); /* A's inputs map one-to-one into B's, and both have as many */
}

int rp_root_cause_step(struct rp_ctx *c, int64_t step)
{
	for (size_t i = 0; i < c->n_pairs; i++) {
		const struct rp_pair *p = &c->pairs[i];
		if (p->ia >= 0)
			c->rows[0][p->ia].pair = (int32_t)i;
		if (p->ib >= 0)
			c->rows[1][p->ib].pair = (int32_t)i;
	}
	size_t n = 0, n_a, n_b;
	ALIGN_TRY(c->e, collect_inputs(c, 0, &n));
	n_a = n;
	ALIGN_TRY(c->e, collect_inputs(c, 1, &n));
	n_b = n - n_a;
	struct rp_input *in_a = c->inputs, *in_b = c->inputs + n_a;
	if (n_a > 1) /* inputs is NULL when no record is an input: never NULL to qsort */
		qsort(in_a, n_a, sizeof *in_a, by_call);
	if (n_b > 1)
		qsort(in_b, n_b, sizeof *in_b, by_call);
	for (size_t i = 0; i < c->n_pairs; i++) {
		const struct rp_pair *p = &c->pairs[i];
		if ((p->verdict != VERDICT_DIFFER && p->verdict != VERDICT_INCOMPARABLE) || p->ia < 0 || p->ib < 0 ||
		    !is_io(c, &c->rows[0][p->ia], "out") || !is_io(c, &c->rows[1][p->ib], "out"))
			continue;
		int64_t by_summary;
		int64_t k = equal_inputs(c, p, in_a, n_a, in_b, n_b, &by_summary);
		if (k <= 0)
			continue;
		if (!(c->r->root_cause = rp_pair_item(c, p, step)))
			return fail_internal(c->e, "out of memory");
		c->r->root_cause_inputs = k;
		c->r->root_cause_inputs_summary = by_summary;
		return ALIGN_OK;
	}
	return ALIGN_OK;
}

void rp_root_cause_finish(struct rp_ctx *c)
{
	struct report *r = c->r;
	if (r->root_cause)
		return;
	if (!r->first_diff)
		snprintf(r->root_cause_none, sizeof r->root_cause_none, "no value differs");
	else if (!r->has_links)
		snprintf(r->root_cause_none, sizeof r->root_cause_none,
			 "no input/output links (call, io) in the records read");
	else if (c->phase2) /* --first-diff stopped searching after the first differing step */
		snprintf(r->root_cause_none, sizeof r->root_cause_none, "not found through step %lld",
			 (long long)c->first_diff_step);
	else
		snprintf(r->root_cause_none, sizeof r->root_cause_none,
			 "no differing output whose inputs are all equal (bitwise or in their summaries)");
}
