/* explain-describe: from the search's results to what `align explain` says (explain.h).
 *
 * Descriptions: the matches are covered by "cubes", one set of values per switch, every assignment of
 * which reproduces the output (each was replayed whole: a cube point the search had not replayed is
 * replayed here before it is admitted). A cube grows from an uncovered match, switch by switch in the
 * op's order, by every value of that switch for which the whole grown cube still reproduces; a switch
 * whose set is its whole domain is "any" (its value does not matter on these inputs given the rest).
 * Closest profiles: the profiles (profiles.def) whose assignments, restricted to the op's switches,
 * lie in a description, or differ from one in the fewest switches (with no match: from the closest
 * assignments); every profile tied at that count is named. Closest assignments (no match): the whole replays that differ, fewest differing elements
 * first, then smallest max ULP; the screening rows pick up to EX_RANK_WHOLE more candidates to replay
 * whole first (the closest are chosen among the assignments replayed whole, and the output says so). */
#include "ctx.h"
#include "err.h"
#include "explain.h"

#include <stdlib.h>
#include <string.h>

#define EX_RANK_WHOLE 8 /* screened-out candidates replayed whole to rank the closest */
#define EX_CUBE_MAX (1u << 20)

static uint64_t cube_count(const struct ex_space *sp, const uint32_t *set)
{
	uint64_t n = 1;
	for (int i = 0; i < sp->n_sw; i++)
		n *= (uint64_t)__builtin_popcount(set[i]);
	return n;
}

/* the assignments of the cube into as (at most cap); returns how many */
static uint64_t cube_points(const struct ex_space *sp, const uint32_t *set, uint64_t *as, uint64_t cap)
{
	int dig[EX_MAX_SW] = {0};
	uint64_t n = 0;
	for (;;) {
		uint64_t a = 0, w = 1;
		for (int i = 0; i < sp->n_sw; i++) {
			int left = dig[i], d = 0;
			for (int k = 0; k < sp->n_val[i]; k++)
				if (set[i] >> sp->val[i][k] & 1) {
					if (!left--) {
						d = k;
						break;
					}
				}
			a += (uint64_t)d * w;
			w *= (uint64_t)sp->n_val[i];
		}
		if (n < cap)
			as[n] = a;
		n++;
		int i = 0;
		while (i < sp->n_sw && ++dig[i] == __builtin_popcount(set[i]))
			dig[i++] = 0;
		if (i == sp->n_sw)
			return n;
	}
}

/* every point of the cube is a match (points not yet replayed are replayed whole now) */
static int cube_matches(struct ex_search *s, const uint32_t *set, uint64_t *buf, int *yes)
{
	uint64_t n = cube_points(&s->sp, set, buf, EX_CUBE_MAX);
	*yes = 0;
	if (n > EX_CUBE_MAX)
		return ALIGN_OK;
	ALIGN_TRY(&s->ctx->err, ex_eval(s, buf, n, 1));
	for (uint64_t i = 0; i < n; i++) {
		const struct ex_result *r = ex_cache_get(&s->cache, buf[i]);
		if (!r || r->state != EX_MATCH)
			return ALIGN_OK;
	}
	*yes = 1;
	return ALIGN_OK;
}

static int grow(struct ex_search *s, uint64_t a, struct ex_desc *d, uint64_t *buf)
{
	const struct ex_space *sp = &s->sp;
	for (int i = 0; i < sp->n_sw; i++)
		d->set[i] = 1u << sp->val[i][ex_space_digit(sp, a, i)];
	for (int i = 0; i < sp->n_sw; i++) {
		uint32_t keep = 0, base = d->set[i];
		for (int k = 0; k < sp->n_val[i]; k++) {
			int v = sp->val[i][k], yes = 1;
			d->set[i] = 1u << v;
			if (!(base >> v & 1))
				ALIGN_TRY(&s->ctx->err, cube_matches(s, d->set, buf, &yes));
			if (yes)
				keep |= 1u << v;
		}
		d->set[i] = keep;
	}
	d->count = cube_count(sp, d->set);
	return ALIGN_OK;
}

static int by_a(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

static int in_desc(const struct ex_space *sp, const struct ex_desc *d, uint64_t a)
{
	for (int i = 0; i < sp->n_sw; i++)
		if (!(d->set[i] >> sp->val[i][ex_space_digit(sp, a, i)] & 1))
			return 0;
	return 1;
}

static int describe_matches(struct ex_search *s, struct ex_answer *ans)
{
	uint64_t cap = s->n_match, n = 0;
	uint64_t *m = malloc((size_t)(cap + 1) * sizeof *m);
	uint64_t *buf = malloc((size_t)EX_CUBE_MAX * sizeof *buf);
	if (!m || !buf) {
		free(m), free(buf);
		return fail_internal(&s->ctx->err, "out of memory");
	}
	for (uint64_t j = 0; j < s->cache.cap; j++)
		if (s->cache.slot[j].state == EX_MATCH && n < cap)
			m[n++] = s->cache.slot[j].a;
	qsort(m, (size_t)n, sizeof *m, by_a);
	int rc = ALIGN_OK;
	for (uint64_t j = 0; !rc && j < n; j++) {
		int covered = 0;
		for (int k = 0; k < ans->n_desc && !covered; k++)
			covered = in_desc(&s->sp, &ans->desc[k], m[j]);
		if (covered)
			continue;
		if (ans->n_desc == EX_MAX_DESC) {
			ans->more_desc++;
			continue;
		}
		rc = grow(s, m[j], &ans->desc[ans->n_desc], buf);
		ans->n_desc++;
	}
	free(m), free(buf);
	return rc;
}

/* switches where assignment modes p differ from description d (bit i) */
static uint32_t differ_desc(const struct ex_space *sp, const struct align_modes *p, const struct ex_desc *d)
{
	uint32_t bits = 0;
	for (int i = 0; i < sp->n_sw; i++)
		if (!(d->set[i] >> p->v[sp->sw[i]] & 1))
			bits |= 1u << i;
	return bits;
}

static void closest_profile(struct ex_search *s, struct ex_answer *ans)
{
	struct ex_desc one[EX_MAX_CLOSE];
	const struct ex_desc *ds = ans->desc;
	int nd = ans->n_desc;
	if (!nd && ans->n_close) { /* no match: the closest assignments (those tied with the first), as points */
		for (int j = 0; j < ans->n_close; j++) {
			if (ans->close[j].n_differ != ans->close[0].n_differ ||
			    ans->close[j].max_ulp != ans->close[0].max_ulp)
				break;
			struct align_modes m;
			ex_space_modes(&s->sp, ans->close[j].a, &m);
			for (int i = 0; i < s->sp.n_sw; i++)
				one[j].set[i] = 1u << m.v[s->sp.sw[i]];
			nd = j + 1;
		}
		ds = one;
	}
	ans->n_profile = 0;
	for (const char *const *p = modes_profiles(); *p && nd; p++) {
		struct align_modes m;
		char err[256];
		modes_init_default(&m);
		if (modes_apply_profile(&m, *p, err, sizeof err))
			continue;
		uint32_t best = 0;
		int nb = -1;
		for (int k = 0; k < nd; k++) {
			uint32_t bits = differ_desc(&s->sp, &m, &ds[k]);
			if (nb < 0 || __builtin_popcount(bits) < nb)
				best = bits, nb = __builtin_popcount(bits);
		}
		if (ans->n_profile && nb > ans->profile_diff)
			continue;
		if (ans->n_profile && nb < ans->profile_diff)
			ans->n_profile = 0;
		if (ans->n_profile < EX_MAX_PROFILES) {
			ans->profile[ans->n_profile] = *p, ans->profile_sw[ans->n_profile++] = best;
			ans->profile_diff = nb;
		}
	}
}

static int by_close(const void *x, const void *y)
{
	const struct ex_result *a = x, *b = y;
	if (a->n_differ != b->n_differ)
		return a->n_differ < b->n_differ ? -1 : 1;
	if (a->max_ulp != b->max_ulp)
		return a->max_ulp < b->max_ulp ? -1 : 1;
	return a->a < b->a ? -1 : a->a > b->a;
}

/* the closest whole replays: first the best screened-out candidates replayed whole */
static int closest(struct ex_search *s, struct ex_answer *ans)
{
	uint64_t n = 0;
	struct ex_result *r = malloc((size_t)(s->cache.n + 1) * sizeof *r);
	if (!r)
		return fail_internal(&s->ctx->err, "out of memory");
	for (uint64_t j = 0; j < s->cache.cap; j++)
		if (s->cache.slot[j].state == EX_SCREENED)
			r[n++] = s->cache.slot[j];
	qsort(r, (size_t)n, sizeof *r, by_close);
	uint64_t as[EX_RANK_WHOLE];
	int k = 0;
	for (; k < EX_RANK_WHOLE && (uint64_t)k < n; k++) {
		as[k] = r[k].a;
		ex_cache_get(&s->cache, as[k])->state = EX_PASSED; /* screened out: ask ex_eval for the whole */
	}
	int rc = ex_eval(s, as, (uint64_t)k, 1);
	n = 0;
	for (uint64_t j = 0; !rc && j < s->cache.cap; j++)
		if (s->cache.slot[j].state == EX_DIFFER)
			r[n++] = s->cache.slot[j];
	qsort(r, (size_t)n, sizeof *r, by_close);
	ans->close_rank = (int)n;
	for (uint64_t j = 0; !rc && j < n && ans->n_close < EX_MAX_CLOSE; j++)
		ans->close[ans->n_close++] = (struct ex_closest){r[j].a, r[j].n_differ, r[j].max_ulp};
	free(r);
	return rc;
}

int ex_describe(struct ex_search *s, struct ex_answer *ans)
{
	memset(ans, 0, sizeof *ans);
	if (s->n_match)
		ALIGN_TRY(&s->ctx->err, describe_matches(s, ans));
	else
		ALIGN_TRY(&s->ctx->err, closest(s, ans));
	closest_profile(s, ans);
	return ALIGN_OK;
}
