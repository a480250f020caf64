/* compare-summary: rule 6 of compare.h, two records judged by the heads (first elements) and the
 * statistics they show. The JSON texts (record.head: a flat array, record.stats: a flat object) are
 * scanned in place, numbers and strings ("nan", "inf") only, nested values skipped: no allocation. Each
 * shown number pair is judged as exact bits by rule 2 (cmp_bits) in the narrowest dtype of the chain
 * (record dtype, fp32, fp64) holding both. */
#include "compare-impl.h"

#include "numtext.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A JSON value in the text: a string's content (str), a scalar token, or a nested value (p NULL). */
struct tok {
	const char *p;
	size_t n;
	int str;
};

static const char *ws(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return s;
}

/* The value at s into t; returns the position after it, or NULL when the text is malformed. */
static const char *value_tok(const char *s, struct tok *t)
{
	s = ws(s);
	*t = (struct tok){s, 0, 0};
	if (*s == '"') {
		const char *q = ++s;
		while (*q && *q != '"')
			q += (*q == '\\' && q[1]) ? 2 : 1;
		if (!*q)
			return NULL;
		*t = (struct tok){s, (size_t)(q - s), 1};
		return q + 1;
	}
	if (*s == '[' || *s == '{') {
		int depth = 0, in_str = 0;
		const char *q = s;
		for (; *q; q++) {
			if (in_str) {
				if (*q == '\\' && q[1])
					q++;
				else if (*q == '"')
					in_str = 0;
			} else if (*q == '"')
				in_str = 1;
			else if (*q == '[' || *q == '{')
				depth++;
			else if ((*q == ']' || *q == '}') && !--depth)
				break;
		}
		if (!*q)
			return NULL;
		t->p = NULL;
		return q + 1;
	}
	const char *q = s;
	while (*q && *q != ',' && *q != ']' && *q != '}' && *q != ' ' && *q != '\t' && *q != '\n' && *q != '\r')
		q++;
	if (q == s)
		return NULL;
	t->n = (size_t)(q - s);
	return q;
}

/* Walks the members of a flat JSON array (obj 0) or object (obj 1). */
struct iter {
	const char *s;
	int obj, done;
};

static void iter_open(struct iter *it, const char *text, int obj)
{
	it->obj = obj;
	it->done = 1;
	if (!text)
		return;
	const char *s = ws(text);
	if (*s != (obj ? '{' : '['))
		return;
	it->s = ws(s + 1);
	it->done = *it->s == (obj ? '}' : ']');
}

/* The next member: its key (objects) and value. 0 at the end (or at malformed text). */
static int iter_next(struct iter *it, struct tok *key, struct tok *val)
{
	if (it->done)
		return 0;
	const char *s = it->s;
	if (it->obj && (!(s = value_tok(s, key)) || !key->str || *(s = ws(s)) != ':'))
		return it->done = 1, 0;
	if (it->obj)
		s++;
	if (!(s = value_tok(s, val)))
		return it->done = 1, 0;
	s = ws(s);
	if (*s == ',')
		it->s = s + 1;
	else
		it->done = 1; /* the closing bracket, or malformed: this member is still read */
	return 1;
}

/* A shown number (a JSON number, NaN/Infinity token or a "nan"/"inf" string): 1, else 0. */
static int num(const struct tok *t, struct numtext *out)
{
	return t->p && t->n && !numtext_parse(t->p, t->n, PREC_EXACT, 0, out);
}

static int exact_in(const char *dtype, const struct numtext *x, struct cmp_value *v)
{
	uint64_t b;
	if (!dtype || !compare_double_to_bits(dtype, x->value, &b))
		return 0;
	*v = (struct cmp_value){.dtype = dtype, .has_bits = 1, .bits = b, .has_value = 1, .value = x->value};
	return 1;
}

/* Judge one pair of shown numbers of records stating da and db; 1 when they differ (res says how). */
static int judge_pair(const char *da, const char *db, const struct numtext *x, const struct numtext *y,
		      struct cmp_result *res)
{
	memset(res, 0, sizeof *res);
	if (x->special == 1 || y->special == 1) {
		if (x->special == 1 && y->special == 1)
			return 0; /* both NaN as printed */
		cmp_set(res, VERDICT_DIFFER, "NaN against a number");
		return 1;
	}
	const char *ca[3] = {da, "fp32", "fp64"}, *cb[3] = {db, "fp32", "fp64"};
	struct cmp_value va = {0}, vb = {0};
	if ((!da && !db) || (da && db && !strcmp(da, db))) {
		for (int i = 0; i < 3; i++)
			if (exact_in(ca[i], x, &va) && exact_in(ca[i], y, &vb))
				break;
	} else {
		for (int i = 0; i < 3 && !exact_in(ca[i], x, &va); i++)
			;
		for (int i = 0; i < 3 && !exact_in(cb[i], y, &vb); i++)
			;
	}
	cmp_bits(&va, &vb, res);
	return verdict_is_difference(res->verdict);
}

/* The first differing pair of a kind (head element or statistic). */
struct first {
	long n, n_diff;	      /* pairs shown on both sides, and how many differ */
	struct tok key, x, y; /* of the first that differs (key: the statistic) */
	long index;	      /* head: its element index */
	struct cmp_result res;
};

static void record_pair(struct first *f, const char *da, const char *db, const struct tok *key, long index,
			const struct tok *x, const struct tok *y)
{
	struct numtext nx, ny;
	struct cmp_result res;
	if (!num(x, &nx) || !num(y, &ny))
		return;
	f->n++;
	if (judge_pair(da, db, &nx, &ny, &res) && !f->n_diff++) {
		f->x = *x, f->y = *y, f->index = index, f->res = res;
		if (key)
			f->key = *key;
	}
}

/* "2 ulp of bf16", else the pair's own reason. */
static void how(const struct first *f, char *buf, size_t len)
{
	if (f->res.has_ulp)
		snprintf(buf, len, "%llu ulp of %s", (unsigned long long)f->res.ulp, f->res.ulp_dtype);
	else
		snprintf(buf, len, "%.100s", f->res.reason);
}

/* The statistic named key in an object text: its value, 1; else 0. */
static int stat_of(const char *stats, const struct tok *key, struct tok *val)
{
	struct iter it;
	struct tok k;
	iter_open(&it, stats, 1);
	while (iter_next(&it, &k, val))
		if (k.n == key->n && !memcmp(k.p, key->p, k.n))
			return 1;
	return 0;
}

/* Append ", name" for each statistic shown on both sides (the equal verdict's list). */
static void stat_names(const char *sa, const char *sb, char *buf, size_t len)
{
	struct iter it;
	struct tok k, x, y;
	struct numtext nx, ny;
	iter_open(&it, sa, 1);
	while (iter_next(&it, &k, &x))
		if (stat_of(sb, &k, &y) && num(&x, &nx) && num(&y, &ny)) {
			size_t n = strlen(buf);
			snprintf(buf + n, len - n, "%s%.*s", n ? ", " : "", (int)(k.n > 32 ? 32 : k.n), k.p);
		}
}

static void take_ulp(struct cmp_result *r, const struct first *f)
{
	r->has_ulp = f->res.has_ulp, r->ulp = f->res.ulp, r->ulp_dtype = f->res.ulp_dtype;
	r->has_rel = f->res.has_rel, r->rel_diff = f->res.rel_diff;
}

void cmp_summaries(const struct cmp_value *a, const struct cmp_value *b, struct cmp_result *r)
{
	struct first h = {0}, s = {0};
	struct iter ia, ib;
	struct tok k, x, y;
	iter_open(&ia, a->head, 0);
	iter_open(&ib, b->head, 0);
	for (long i = 0; iter_next(&ia, &k, &x) && iter_next(&ib, &k, &y); i++)
		record_pair(&h, a->dtype, b->dtype, NULL, i, &x, &y);
	iter_open(&ia, a->stats, 1);
	while (iter_next(&ia, &k, &x))
		if (stat_of(b->stats, &k, &y))
			record_pair(&s, a->dtype, b->dtype, &k, 0, &x, &y);
	char shown[200] = "";
	if (h.n)
		snprintf(shown, sizeof shown, "first %ld element%s", h.n, h.n == 1 ? "" : "s");
	stat_names(a->stats, b->stats, shown, sizeof shown);
	if (!h.n && !s.n) {
		cmp_set(r, VERDICT_INCOMPARABLE, "no element or statistic shown on both sides (a: %s%s%s, b: %s%s%s)",
			a->head ? "head" : "", a->head && a->stats ? " and " : "", a->stats ? "statistics" : "",
			b->head ? "head" : "", b->head && b->stats ? " and " : "", b->stats ? "statistics" : "");
		return;
	}
	if (!h.n_diff && !s.n_diff) {
		cmp_set(r, VERDICT_EQUAL_AS_PRINTED, "equal in the summaries shown (%s); not bitwise", shown);
		return;
	}
	char hh[128] = "", hs[128] = "", eh[200] = "", es[200] = "";
	if (h.n_diff) {
		how(&h, hh, sizeof hh);
		snprintf(eh, sizeof eh,
			 "%ld of the first %ld elements differ, first element %ld (flat index): %.*s vs %.*s, %s",
			 h.n_diff, h.n, h.index, (int)(h.x.n > 24 ? 24 : h.x.n), h.x.p, (int)(h.y.n > 24 ? 24 : h.y.n),
			 h.y.p, hh);
		take_ulp(r, &h);
	}
	if (s.n_diff) {
		how(&s, hs, sizeof hs);
		snprintf(es, sizeof es, "%s%.*s: %.*s vs %.*s, %s", h.n_diff ? "; " : "",
			 (int)(s.key.n > 24 ? 24 : s.key.n), s.key.p, (int)(s.x.n > 24 ? 24 : s.x.n), s.x.p,
			 (int)(s.y.n > 24 ? 24 : s.y.n), s.y.p, hs);
		if (s.n_diff > 1) {
			size_t n = strlen(es);
			snprintf(es + n, sizeof es - n, " (%ld statistics differ)", s.n_diff);
		}
		if (!h.n_diff)
			take_ulp(r, &s);
	}
	cmp_set(r, VERDICT_DIFFER, "summaries differ: %s%s", eh, es);
}
