/* report-map: the --map rules file (regex -> canonical name), interned names and the metrics array
 * that parallels them.
 *
 * Map file: one rule a line, `REGEX -> NAME`: REGEX is a POSIX extended regular expression matched
 * against record.name (as printed, unanchored unless written with ^ $), NAME the canonical name the
 * record takes (normalised like any name: "lm loss" -> "loss"). The last "->" of a line separates the
 * two. The first matching rule wins; records no rule matches keep their built-in canonical name.
 * Blank lines and lines starting with '#' are ignored.
 * A pattern is bounded before regcomp sees it (map_bound says what is refused and why): at most
 * MAP_MAX_PATTERN bytes, no back-references, no two quantifiers in a row, quantifiers nested at most
 * MAP_MAX_NESTING deep, at most MAP_MAX_EXPANDED nodes once its repetitions are written out. A refused
 * pattern is exit 2 naming file:line. */
#include "report-impl.h"

#include "err.h"
#include "names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static int strtab_grow(struct rp_strtab *t)
{
	size_t cap = t->slot_cap ? 2 * t->slot_cap : 256;
	int32_t *slot = calloc(cap, sizeof *slot);
	if (!slot)
		return -1;
	for (size_t i = 0; i < t->n; i++) {
		size_t j = XXH3_64bits(t->s[i], strlen(t->s[i])) & (cap - 1);
		while (slot[j])
			j = (j + 1) & (cap - 1);
		slot[j] = (int32_t)i + 1;
	}
	free(t->slot);
	t->slot = slot;
	t->slot_cap = cap;
	return 0;
}

int32_t rp_intern(struct rp_ctx *c, const char *s)
{
	struct rp_strtab *t = &c->names;
	if (2 * (t->n + 1) > t->slot_cap && strtab_grow(t))
		return -1;
	size_t len = strlen(s), j = XXH3_64bits(s, len) & (t->slot_cap - 1);
	while (t->slot[j]) {
		if (!strcmp(t->s[t->slot[j] - 1], s))
			return t->slot[j] - 1;
		j = (j + 1) & (t->slot_cap - 1);
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		char **grown = realloc(t->s, cap * sizeof *grown);
		if (!grown)
			return -1;
		t->s = grown;
		t->cap = cap;
	}
	if (!(t->s[t->n] = strdup(s)))
		return -1;
	t->slot[j] = (int32_t)t->n + 1;
	return (int32_t)t->n++;
}

int rp_metrics_sync(struct rp_ctx *c)
{
	struct report *r = c->r;
	if (c->names.n > c->metrics_cap) {
		size_t cap = c->metrics_cap ? 2 * c->metrics_cap : 64;
		while (cap < c->names.n)
			cap *= 2;
		struct report_metric *m = realloc(r->metrics, cap * sizeof *m);
		unsigned char *w = realloc(c->want, cap);
		if (!m || !w) {
			free(m ? NULL : w);
			r->metrics = m ? m : r->metrics;
			c->want = w ? w : c->want;
			return fail_internal(c->e, "out of memory");
		}
		r->metrics = m, c->want = w;
		c->metrics_cap = cap;
	}
	for (size_t i = r->n_metrics; i < c->names.n; i++) {
		memset(&r->metrics[i], 0, sizeof r->metrics[i]);
		r->metrics[i].name = c->names.s[i]; /* borrowed from the table until report_compute ends */
		c->want[i] = !c->filtering;
		for (int k = 0; k < c->n_filter; k++)
			if (!strcmp(c->filter[k], c->names.s[i]))
				c->want[i] = 1;
	}
	r->n_metrics = c->names.n;
	return ALIGN_OK;
}

#define MAP_STR_(x) #x
#define MAP_STR(x) MAP_STR_(x)
#define MAP_MAX_PATTERN 1024
#define MAP_MAX_EXPANDED 2000
#define MAP_MAX_NESTING 2

/* The end of the bracket expression starting at p ('['): the byte after its ']', or NULL if unclosed. */
static const char *bracket_end(const char *p)
{
	p++;
	if (*p == '^')
		p++;
	if (*p == ']')
		p++; /* a leading ']' is a member */
	for (; *p && *p != ']'; p++)
		if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
			const char *close = strchr(p + 2, p[1]);
			while (close && close[1] != ']')
				close = strchr(close + 1, p[1]);
			if (!close)
				return NULL;
			p = close + 1;
		}
	return *p ? p + 1 : NULL;
}

/* "{m}", "{m,}", "{m,n}", "{,n}" (glibc: {0,n}) at p: the largest count it allows a piece to be
 * written out ({m,} counts m+1), *end past it; -1 when p does not start a bound (an ordinary '{', or
 * regcomp's error). */
static long repeat_count(const char *p, const char **end)
{
	char *q = (char *)p + 1;
	long m = 0, n;
	if (*q >= '0' && *q <= '9')
		m = strtol(q, &q, 10);
	else if (*q != ',')
		return -1;
	/* strtol saturates at LONG_MAX: clamp (regcomp refuses counts over RE_DUP_MAX anyway) */
	m = m > 1000000 ? 1000000 : m;
	n = m;
	if (*q == ',') {
		if (q[1] >= '0' && q[1] <= '9')
			n = strtol(q + 1, &q, 10);
		else if (q == p + 1)
			return -1; /* "{,}" */
		else
			n = m + 1, q++; /* {m,}: counted as m + 1 */
		n = n > 1000000 ? 1000000 : n;
	}
	if (*q != '}')
		return -1;
	*end = q + 1;
	return n > m ? n : m;
}

/* A quantifier on the last piece (size *last, its group's size *total): the piece becomes copies
 * copies of itself plus one node per copy (the repetition's own nodes). */
static void grow(double *total, double *last, double copies)
{
	double piece = *last * copies + copies;
	*total += piece - *last;
	*last = piece;
}

/* NULL when regcomp may see re, else why not. glibc's regcomp (a DFA, no backtracking) is polynomial in
 * the size of the pattern once its repetitions are written out, except for what is refused here:
 *   - a back-reference (\\1-\\9): matching is exponential;
 *   - two quantifiers in a row ("a??", "a+*", "a{2}{3}": POSIX leaves them undefined; glibc's closure
 *     computation for "e??{50}*" runs for minutes);
 *   - quantifiers nested more than MAP_MAX_NESTING deep ("((e?)?){20}*": exponential as above);
 *   - more than MAP_MAX_EXPANDED nodes: an atom 1, a group the sum of its alternatives plus one, a
 *     quantified piece its copies (max(m, n) for {m,n}, 2 for '+', 1 for '*' '?') plus a node per copy
 *     ("a{1000}{1000}" is a million nodes: gigabytes). */
static const char *map_bound(const char *re)
{
	if (strlen(re) > MAP_MAX_PATTERN)
		return "longer than " MAP_STR(MAP_MAX_PATTERN) " bytes";
	static const char too_large[] =
		"too large once its repetitions are expanded (at most " MAP_STR(MAP_MAX_EXPANDED) " nodes)";
	enum { DEPTH = 64 };
	/* per open group: its size and its last piece's, the deepest quantifier nesting in it and its last
	 * piece's, and whether the last piece carries a quantifier already */
	double total[DEPTH] = {0}, last[DEPTH] = {0};
	int nest[DEPTH] = {0}, last_nest[DEPTH] = {0}, quantified[DEPTH] = {0};
	int depth = 0;
	for (const char *p = re; *p;) {
		double atom = 1;
		int atom_nest = 0;
		const char *end;
		long count = -1;
		switch (*p) {
		case '\\':
			if (p[1] >= '1' && p[1] <= '9')
				return "back-references are not supported (matching them takes exponential time)";
			p += p[1] ? 2 : 1;
			break;
		case '[':
			if (!(end = bracket_end(p)))
				return NULL; /* unclosed: regcomp says so */
			p = end;
			break;
		case '(':
			if (++depth == DEPTH)
				return "groups nested deeper than 63";
			total[depth] = last[depth] = 0;
			nest[depth] = last_nest[depth] = quantified[depth] = 0;
			p++;
			continue;
		case ')':
			if (depth == 0) {
				p++; /* a lone ')' is an ordinary character in ERE */
				break;
			}
			atom_nest = nest[depth];
			atom = total[depth--] + 1;
			p++;
			break;
		case '|':
			last[depth] = 0;
			last_nest[depth] = quantified[depth] = 0;
			p++;
			continue;
		case '{':
			if ((count = repeat_count(p, &end)) < 0) {
				p++; /* not a bound: an ordinary '{' (or regcomp's error) */
				break;
			}
			/* fall through */
		case '*':
		case '?':
		case '+':
			if (quantified[depth])
				return "two quantifiers in a row (POSIX leaves them undefined; group the first)";
			if (++last_nest[depth] > MAP_MAX_NESTING)
				return "quantifiers nested more than " MAP_STR(MAP_MAX_NESTING) " deep";
			if (last_nest[depth] > nest[depth])
				nest[depth] = last_nest[depth];
			quantified[depth] = 1;
			/* '+' is the piece then the piece starred (a copy); {m,n} count copies */
			grow(&total[depth], &last[depth],
			     count >= 0	 ? (double)(count > 1 ? count : 1)
			     : *p == '+' ? 2
					 : 1);
			p = count >= 0 ? end : p + 1;
			if (total[depth] > MAP_MAX_EXPANDED)
				return too_large;
			continue;
		default:
			p++;
			break;
		}
		total[depth] += atom;
		last[depth] = atom;
		last_nest[depth] = atom_nest;
		quantified[depth] = 0;
		if (total[depth] > MAP_MAX_EXPANDED)
			return too_large;
	}
	return NULL;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = '\0';
	return s;
}

static char *last_arrow(char *s)
{
	char *found = NULL;
	for (char *p = strstr(s, "->"); p; p = strstr(p + 1, "->"))
		found = p;
	return found;
}

static int map_line(struct rp_ctx *c, const char *path, long lineno, char *line)
{
	char *s = trim(line);
	if (!*s || *s == '#')
		return ALIGN_OK;
	char *arrow = last_arrow(s);
	if (!arrow)
		return fail_input(c->e, "%s:%ld: expected 'REGEX -> NAME'", path, lineno);
	*arrow = '\0';
	char *re = trim(s), *name = trim(arrow + 2);
	if (!*re)
		return fail_input(c->e, "%s:%ld: empty regex before '->'", path, lineno);
	if (!*name)
		return fail_input(c->e, "%s:%ld: empty name after '->'", path, lineno);
	const char *why = map_bound(re);
	if (why)
		return fail_input(c->e, "%s:%ld: regex refused: %s", path, lineno, why);
	struct rp_rule *grown = realloc(c->rules, (c->n_rules + 1) * sizeof *grown);
	if (!grown)
		return fail_internal(c->e, "out of memory");
	c->rules = grown;
	struct rp_rule *rule = &c->rules[c->n_rules];
	int rc = regcomp(&rule->re, re, REG_EXTENDED | REG_NOSUB);
	if (rc) {
		char msg[160];
		regerror(rc, &rule->re, msg, sizeof msg);
		return fail_input(c->e, "%s:%ld: bad regex '%s': %s", path, lineno, re, msg);
	}
	char canon[256];
	names_canonical(name, canon, sizeof canon);
	if (!(rule->canon = strdup(canon))) {
		regfree(&rule->re);
		return fail_internal(c->e, "out of memory");
	}
	c->n_rules++;
	return ALIGN_OK;
}

int rp_map_load(struct rp_ctx *c, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return fail_input(c->e, "cannot open map '%s': %s", path, strerror(errno));
	char *line = NULL;
	size_t cap = 0;
	long lineno = 0;
	int rc = ALIGN_OK;
	while (rc == ALIGN_OK && getline(&line, &cap, f) != -1)
		rc = map_line(c, path, ++lineno, line);
	if (rc == ALIGN_OK && ferror(f))
		rc = fail_input(c->e, "cannot read map '%s': %s", path, strerror(errno));
	free(line);
	fclose(f);
	return rc;
}

const char *rp_map_name(const struct rp_ctx *c, const char *name, const char *canon)
{
	for (size_t i = 0; i < c->n_rules; i++)
		if (!regexec(&c->rules[i].re, name, 0, NULL, 0))
			return c->rules[i].canon;
	return canon;
}

void rp_map_free(struct rp_ctx *c)
{
	for (size_t i = 0; i < c->n_rules; i++) {
		regfree(&c->rules[i].re);
		free(c->rules[i].canon);
	}
	free(c->rules);
	c->rules = NULL;
	c->n_rules = 0;
}
