/* report-map: the --map rules file (regex -> canonical name), interned names and the metrics array
 * that parallels them.
 *
 * Map file: one rule a line, `REGEX -> NAME`: REGEX is a POSIX extended regular expression matched
 * against record.name (as printed, unanchored unless written with ^ $), NAME the canonical name the
 * record takes (normalised like any name: "lm loss" -> "loss"). The last "->" of a line separates the
 * two. The first matching rule wins; records no rule matches keep their built-in canonical name.
 * Blank lines and lines starting with '#' are ignored. */
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
