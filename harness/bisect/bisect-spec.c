/* bisect-spec: the environments of 'align bisect'.
 *
 * ENV_SPEC is one of
 *   KEY=VALUE,KEY=VALUE    a comma-separated list (a value cannot hold a comma: use @FILE)
 *   @FILE                  one KEY=VALUE per line; blank lines and lines starting with '#' skipped
 *   profile:NAME           the environment of an align numeric-mode profile (kernels/core/modes.h)
 *   (empty)                no keys
 * Specs given by repeating --good or --bad are merged in order; a later value wins per key. A key absent
 * on one side counts as unset there: the trial removes it from the inherited environment. */
#include "bisect.h"
#include "err.h"
#include "modes.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keys bisect sets itself in every trial. */
static const char *const reserved[] = {"ALIGN_TRACE", "ALIGN_TRIAL_DIR", NULL};

static size_t env_find(const struct bisect_env *e, const char *key, int *found)
{
	size_t lo = 0, hi = e->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(e->key[mid], key);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

int bisect_env_set(struct bisect_env *e, const char *key, const char *val)
{
	int found;
	size_t i = env_find(e, key, &found);
	char *v = val ? strdup(val) : NULL;
	if (found) {
		free(e->val[i]);
		e->val[i] = v;
		return 0;
	}
	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 16;
		char **k = realloc(e->key, cap * sizeof *k), **w = k ? realloc(e->val, cap * sizeof *w) : NULL;
		if (!k || !w) {
			if (k)
				e->key = k;
			free(v);
			return -1;
		}
		e->key = k, e->val = w, e->cap = cap;
	}
	memmove(e->key + i + 1, e->key + i, (e->n - i) * sizeof *e->key);
	memmove(e->val + i + 1, e->val + i, (e->n - i) * sizeof *e->val);
	e->key[i] = strdup(key);
	e->val[i] = v;
	e->n++;
	return 0;
}

const char *bisect_env_get(const struct bisect_env *e, const char *key, int *present)
{
	int found;
	size_t i = env_find(e, key, &found);
	*present = found && e->val[i];
	return *present ? e->val[i] : NULL;
}

void bisect_env_free(struct bisect_env *e)
{
	for (size_t i = 0; i < e->n; i++)
		free(e->key[i]), free(e->val[i]);
	free(e->key);
	free(e->val);
	memset(e, 0, sizeof *e);
}

/* Where an item came from, for messages: "option '--good'" or "FILE:LINE". */
struct spec_where {
	const char *opt;
	const char *file;
	int line;
	struct align_err *err; /* where a failure leaves its message */
};

static int where_error(const struct spec_where *w, const char *what, const char *item)
{
	if (w->file)
		return fail_input(w->err, "%s:%d: %s: '%s'", w->file, w->line, what, item);
	return fail_input(w->err, "option '%s': %s: '%s'", w->opt, what, item);
}

static int valid_key(const char *k, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char)k[0]) || k[0] == '_'))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)k[i]) || k[i] == '_'))
			return 0;
	return 1;
}

/* One KEY=VALUE item (not NUL-terminated: len bytes). */
static int parse_item(const struct spec_where *w, const char *item, size_t len, struct bisect_env *e)
{
	char *copy = strndup(item, len);
	char *eq = strchr(copy, '=');
	int rc = ALIGN_OK;
	if (!eq) {
		rc = where_error(w, "expected KEY=VALUE", copy);
		goto out;
	}
	*eq = '\0';
	if (!valid_key(copy, strlen(copy))) {
		*eq = '=';
		rc = where_error(w, "not a valid environment variable name", copy);
		goto out;
	}
	for (int i = 0; reserved[i]; i++)
		if (!strcmp(copy, reserved[i])) {
			rc = where_error(w, "bisect sets this variable in every trial", copy);
			goto out;
		}
	if (bisect_env_set(e, copy, eq + 1))
		rc = fail_internal(w->err, "out of memory");
out:
	free(copy);
	return rc;
}

static int parse_list(const char *opt, const char *spec, struct bisect_env *e, struct align_err *err)
{
	struct spec_where w = {.opt = opt, .err = err};
	if (!*spec)
		return ALIGN_OK;
	for (const char *p = spec;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == 0)
			return fail_input(err, "option '%s': empty item in '%s'", opt, spec);
		int rc = parse_item(&w, p, len, e);
		if (rc)
			return rc;
		if (!comma)
			return ALIGN_OK;
		p = comma + 1;
	}
}

static int parse_file(const char *opt, const char *path, struct bisect_env *e, struct align_err *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return fail_input(err, "option '%s': cannot read '%s': %s", opt, path, strerror(errno));
	struct spec_where w = {.opt = opt, .file = path, .err = err};
	char *line = NULL;
	size_t cap = 0;
	ssize_t got;
	int rc = ALIGN_OK;
	while (!rc && (got = getline(&line, &cap, f)) >= 0) {
		w.line++;
		while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
			line[--got] = '\0';
		char *p = line + strspn(line, " \t");
		if (!*p || *p == '#')
			continue;
		rc = parse_item(&w, p, strlen(p), e);
	}
	if (!rc && ferror(f))
		rc = fail_input(err, "option '%s': cannot read '%s': %s", opt, path, strerror(errno));
	free(line);
	fclose(f);
	return rc;
}

/* The environment of profile NAME: every numeric mode of the registry (kernels/core/modes.def) at the value
 * the profile resolves it to (default < profile), as ALIGN_<BLOCK>_<CHOICE>=value. All modes are set,
 * not only those the profile names, so that two profiles differ exactly where their resolved modes do. */
static int profile_env(const char *opt, const char *name, struct bisect_env *e, struct align_err *err)
{
	struct align_modes m;
	char why[512];
	modes_init_default(&m);
	if (modes_apply_profile(&m, name, why, sizeof why))
		return fail_input(err, "option '%s': %s", opt, why);
	for (int id = 0; id < MODE_COUNT; id++)
		if (bisect_env_set(e, modes_info(id)->env, modes_value_name(id, m.v[id])))
			return fail_internal(err, "out of memory");
	return ALIGN_OK;
}

int bisect_spec_parse(const char *opt, const char *spec, struct bisect_env *e, struct align_err *err)
{
	if (!strncmp(spec, "profile:", 8)) {
		if (!spec[8])
			return fail_input(err, "option '%s': 'profile:' needs a profile name", opt);
		return profile_env(opt, spec + 8, e, err);
	}
	if (spec[0] == '@') {
		if (!spec[1])
			return fail_input(err, "option '%s': '@' needs a file name", opt);
		return parse_file(opt, spec + 1, e, err);
	}
	return parse_list(opt, spec, e, err);
}

static int same_value(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int bisect_switches(struct bisect *b, const struct bisect_env *bad)
{
	const struct bisect_env *g = &b->good;
	size_t i = 0, j = 0, n = 0;
	b->sw = calloc(g->n + bad->n + 1, sizeof *b->sw);
	if (!b->sw)
		return fail_internal(b->err, "out of memory");
	while (i < g->n || j < bad->n) {
		int c = i == g->n ? 1 : j == bad->n ? -1 : strcmp(g->key[i], bad->key[j]);
		const char *key = c <= 0 ? g->key[i] : bad->key[j];
		const char *gv = c <= 0 ? g->val[i] : NULL, *bv = c >= 0 ? bad->val[j] : NULL;
		if (!same_value(gv, bv)) {
			b->sw[n].key = strdup(key);
			b->sw[n].good = gv ? strdup(gv) : NULL;
			b->sw[n].bad = bv ? strdup(bv) : NULL;
			n++;
		}
		i += c <= 0;
		j += c >= 0;
	}
	b->n_sw = n;
	return ALIGN_OK;
}

void bisect_switch_text(const struct bisect_switch *s, int bad, char *buf, size_t len)
{
	const char *v = bad ? s->bad : s->good;
	if (v)
		snprintf(buf, len, "%s=%s", s->key, v);
	else
		snprintf(buf, len, "%s unset", s->key);
}
