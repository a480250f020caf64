/* bisect-search: delta debugging over the switches (ddmin, Zeller & Hildebrandt 2002, "Simplifying and
 * isolating failure-inducing input").
 *
 * test(S) = the trial of subset S: FAIL when it diverges from the baseline, PASS when it does not;
 * an unusable trial counts as PASS for minimisation (it is never taken as a verdict, and the report
 * lists it). Preconditions: test({}) is usable and does not diverge, test(all) diverges.
 *
 *   ddmin(c, n):  split c into n parts; part i is c[i*|c|/n, (i+1)*|c|/n) in switch (key) order
 *     the first part that FAILs             -> ddmin(part, 2)
 *     else the first complement that FAILs  -> ddmin(c - part, max(n-1, 2))   (none when n = 2)
 *     else if n < |c|                       -> ddmin(c, min(2n, |c|))
 *     else c is 1-minimal: removing any one switch no longer diverges.
 * Parts, then complements, are tested in that order and the first FAIL is taken, so the result does
 * not depend on -j: with -j N the next N unknown candidates of a round run at once (speculatively).
 * At the last granularity every single switch and every complement of the result has been tried, so
 * the interaction analysis (which members diverge alone; which are needed jointly) costs no trial.
 *
 * Several culprits: after a culprit set is found its switches are put back to their good value and the
 * rest is tried as a whole (one trial); while it still diverges, ddmin runs again on the rest. So every
 * culprit found changes the bits with the earlier ones at their good value (independent causes), and
 * the last "rest" trial shows that the switches left change nothing. --first stops after one. */
#include "bisect.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

/* The byte set of c[lo, hi) (part) or of c without it (complement). */
static unsigned char *make_set(const struct bisect *b, const int *c, int nc, int lo, int hi, int complement)
{
	unsigned char *s = calloc(b->n_sw + 1, 1);
	for (int k = 0; s && k < nc; k++)
		s[c[k]] = (k >= lo && k < hi) != complement;
	return s;
}

static void free_sets(unsigned char **sets, int n)
{
	for (int i = 0; i < n; i++)
		free(sets[i]);
}

/* Index of the first candidate that diverges, or -1. Unknown candidates run up to b->jobs at once. */
static int first_fail(struct bisect *b, unsigned char **cand, int n, int *pick)
{
	struct bisect_trial *t;
	*pick = -1;
	for (int i = 0; i < n; i++) {
		if (!bisect_known(b, cand[i])) {
			unsigned char *batch[64];
			int nb = 0;
			for (int k = i; k < n && nb < b->jobs && nb < 64; k++)
				if (!bisect_known(b, cand[k]))
					batch[nb++] = cand[k];
			struct bisect_trial *out[64];
			int rc = bisect_eval(b, batch, (size_t)nb, out);
			if (rc)
				return rc;
		}
		t = bisect_known(b, cand[i]);
		if (t->verdict == TRIAL_DIVERGES) {
			*pick = i;
			return ALIGN_OK;
		}
	}
	return ALIGN_OK;
}

/* c (indices of switches, nc of them) is reduced in place to a 1-minimal diverging subset. */
static int ddmin(struct bisect *b, int *c, int *nc)
{
	int n = 2, rc = ALIGN_OK;
	unsigned char **cand = calloc(2 * (size_t)*nc + 2, sizeof *cand);
	int *tmp = malloc((size_t)*nc * sizeof *tmp + 1);
	if (!cand || !tmp) {
		free(cand), free(tmp);
		return fail_internal(b->err, "out of memory");
	}
	while (*nc >= 2) {
		if (n > *nc)
			n = *nc;
		int m = n == 2 ? 2 : 2 * n, pick;
		for (int i = 0; i < m; i++)
			cand[i] = make_set(b, c, *nc, i % n * *nc / n, (i % n + 1) * *nc / n, i >= n);
		rc = first_fail(b, cand, m, &pick);
		free_sets(cand, m);
		if (rc)
			break;
		if (pick >= 0) {
			int lo = pick % n * *nc / n, hi = (pick % n + 1) * *nc / n, k = 0;
			for (int j = 0; j < *nc; j++)
				if ((j >= lo && j < hi) == (pick < n))
					tmp[k++] = c[j];
			memcpy(c, tmp, (size_t)k * sizeof *c);
			*nc = k;
			n = pick < n ? 2 : (n - 1 > 2 ? n - 1 : 2);
		} else if (n < *nc) {
			n = 2 * n < *nc ? 2 * n : *nc;
		} else {
			break;
		}
	}
	free(cand);
	free(tmp);
	return rc;
}

static int one(struct bisect *b, unsigned char *set, struct bisect_trial **t)
{
	return bisect_eval(b, &set, 1, t);
}

/* Per member m of the result: the trials of {m} and of result - {m}. */
static int analyse(struct bisect *b, struct bisect_culprit *c, const int *idx, int n)
{
	unsigned char **sets = calloc(2 * (size_t)n, sizeof *sets);
	struct bisect_trial **out = calloc(2 * (size_t)n, sizeof *out);
	c->alone = calloc((size_t)n, sizeof *c->alone);
	c->without = calloc((size_t)n, sizeof *c->without);
	c->n = n;
	int rc = ALIGN_OK;
	if (!sets || !out || !c->alone || !c->without) {
		rc = fail_internal(b->err, "out of memory");
		goto out;
	}
	for (int k = 0; k < n; k++) {
		sets[2 * k] = make_set(b, idx, n, k, k + 1, 0);
		sets[2 * k + 1] = make_set(b, idx, n, k, k + 1, 1);
	}
	if ((rc = bisect_eval(b, sets, 2 * (size_t)n, out)))
		goto out;
	c->interaction = n >= 2;
	for (int k = 0; k < n; k++) {
		c->alone[k] = out[2 * k];
		c->without[k] = out[2 * k + 1];
		if (c->alone[k]->verdict == TRIAL_DIVERGES)
			c->interaction = 0;
	}
out:
	if (sets)
		free_sets(sets, 2 * n);
	free(sets);
	free(out);
	return rc;
}

/* The good trial: usable, and the baseline (or equal to --baseline). */
static int check_good(struct bisect *b, struct bisect_trial *t)
{
	if (t->verdict == TRIAL_UNUSABLE)
		return fail_input(b->err, "the good environment's trial is unusable: %s", t->reason);
	if (!b->baseline_run) {
		if (!(b->baseline_run = strdup(t->run_name)))
			return fail_internal(b->err, "out of memory");
		return bisect_set_compared(b);
	}
	if (t->verdict == TRIAL_DIVERGES) {
		json_t *fd = t->first_diff;
		return fail_input(b->err,
				  "the good environment already differs from baseline '%s' (first at step %lld, "
				  "'%s'): nothing to bisect",
				  b->baseline_run, (long long)json_integer_value(json_object_get(fd, "step")),
				  json_string_value(json_object_get(fd, "name")));
	}
	return ALIGN_OK;
}

/* The first trial of a search: the good environment (the baseline) and the whole bad set. */
static int preconditions(struct bisect *b, unsigned char *none, unsigned char *all, struct bisect_result *r)
{
	struct bisect_trial *t;
	int rc;
	if ((rc = one(b, none, &t)) || (rc = check_good(b, t)) || (rc = one(b, all, &t)))
		return rc;
	if (t->verdict == TRIAL_UNUSABLE)
		return fail_input(b->err, "the bad environment's trial is unusable: %s", t->reason);
	if (t->verdict == TRIAL_SAME)
		r->why_not = "the bad environment gives the same records as the good one: no switch changes the bits";
	return ALIGN_OK;
}

int bisect_search(struct bisect *b, int first_only, struct bisect_result *r)
{
	unsigned char *none = calloc(b->n_sw + 1, 1), *rest = malloc(b->n_sw + 1);
	int *idx = malloc((b->n_sw + 1) * sizeof *idx), n, rc;
	struct bisect_culprit *c = calloc(b->n_sw + 1, sizeof *c);
	memset(r, 0, sizeof *r);
	if (!none || !rest || !idx || !c) {
		free(none), free(rest), free(idx), free(c);
		return fail_internal(b->err, "out of memory");
	}
	r->culprits = c;
	memset(rest, 1, b->n_sw + 1);
	if ((rc = preconditions(b, none, rest, r)) || r->why_not)
		goto out;
	for (;;) {
		n = 0;
		for (size_t i = 0; i < b->n_sw; i++)
			if (rest[i])
				idx[n++] = (int)i;
		if ((rc = ddmin(b, idx, &n)))
			break;
		c = &r->culprits[r->n_culprits++];
		c->set = make_set(b, idx, n, 0, n, 0);
		if ((rc = one(b, c->set, &c->trial)) || (rc = analyse(b, c, idx, n)))
			break;
		for (int k = 0; k < n; k++)
			rest[idx[k]] = 0;
		if (first_only || !memchr(rest, 1, b->n_sw))
			break;
		/* the switches left, the culprits found at their good value: do they still change the bits? */
		if ((rc = one(b, rest, &r->rest)) || r->rest->verdict != TRIAL_DIVERGES)
			break;
	}
out:
	free(none), free(rest), free(idx);
	return rc;
}

void bisect_result_free(struct bisect_result *r)
{
	for (int i = 0; i < r->n_culprits; i++) {
		free(r->culprits[i].set);
		free(r->culprits[i].alone);
		free(r->culprits[i].without);
	}
	free(r->culprits);
	memset(r, 0, sizeof *r);
}
