/* modes.c: lookups over the modes.def / profiles.def tables and the resolution of a mode set
 * (default < profile < environment < command line). Pure functions over constant tables generated
 * from modes.def (one row per value): the only state is the caller's struct align_modes. */
#include "modes.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* the value table: every VALUE row of modes.def in order */
static const struct align_mode_value value_rows[] = {
#define MODE_BEGIN(id, env, def, meaning)
#define VALUE(mode, tok, name, where, mimics) {MODE_##mode, ALIGN_##mode##_##tok, name, MODE_WHERE_##where, mimics},
#define MODE_END(id)
#include "modes.def"
#undef MODE_BEGIN
#undef VALUE
#undef MODE_END
};

/* each switch's first row: the sum of the value counts of the switches before it */
enum mode_first_row {
#define MODE_BEGIN(id, env, def, meaning) FIRST_##id, FIRST_##id##_END = FIRST_##id + ALIGN_##id##__COUNT - 1,
#define VALUE(mode, tok, name, where, mimics)
#define MODE_END(id)
#include "modes.def"
#undef MODE_BEGIN
#undef VALUE
#undef MODE_END
	VALUE_ROWS_TOTAL
};

static const struct align_mode_info mode_rows[MODE_COUNT] = {
#define MODE_BEGIN(id, env, def, meaning) {#id, env, ALIGN_##id##_##def, meaning, FIRST_##id, ALIGN_##id##__COUNT},
#define VALUE(mode, tok, name, where, mimics)
#define MODE_END(id)
#include "modes.def"
#undef MODE_BEGIN
#undef VALUE
#undef MODE_END
};

/* the counts agree: every VALUE row was counted once, and each switch fits struct align_modes users */
_Static_assert(sizeof value_rows / sizeof value_rows[0] == VALUE_ROWS_TOTAL, "modes.def: value rows miscounted");
#define MODE_BEGIN(id, env, def, meaning)
#define VALUE(mode, tok, name, where, mimics)
#define MODE_END(id)                                                                                                   \
	_Static_assert(ALIGN_##id##__COUNT >= 1 && ALIGN_##id##__COUNT <= MODES_MAX_VALUES, #id ": 1 to 8 values");
#include "modes.def"
#undef MODE_BEGIN
#undef VALUE
#undef MODE_END

struct profile_row {
	const char *profile;
	int id; /* -1: a PROFILE_BASE row, base names the base profile */
	int v;	/* the value (ALIGN_<ID>_<TOKEN>) */
	const char *base;
};

static const struct profile_row profile_rows[] = {
#define PROFILE_NAME(name, meaning)
#define PROFILE_BASE(name, base) {name, -1, 0, base},
#define PROFILE(name, id, tok) {name, MODE_##id, ALIGN_##id##_##tok, NULL},
#include "profiles.def"
#undef PROFILE
#undef PROFILE_BASE
#undef PROFILE_NAME
};

static const char *const profile_names[] = {
#define PROFILE_NAME(name, meaning) name,
#define PROFILE(name, id, value)
#define PROFILE_BASE(name, base)
#include "profiles.def"
#undef PROFILE
#undef PROFILE_BASE
#undef PROFILE_NAME
	NULL};

static const char *const profile_meanings[] = {
#define PROFILE_NAME(name, meaning) meaning,
#define PROFILE(name, id, value)
#define PROFILE_BASE(name, base)
#include "profiles.def"
#undef PROFILE
#undef PROFILE_BASE
#undef PROFILE_NAME
	NULL};

static const char *const non_mode_env[] = {"ALIGN_TRACE", "ALIGN_DB", "ALIGN_TRIAL_DIR", NULL};

const struct align_mode_info *modes_info(int id)
{
	return id >= 0 && id < MODE_COUNT ? &mode_rows[id] : NULL;
}

const struct align_mode_value *modes_value(int id, int v)
{
	if (id < 0 || id >= MODE_COUNT || v < 0 || v >= mode_rows[id].count)
		return NULL;
	return &value_rows[mode_rows[id].first + v];
}

int modes_value_count(int id)
{
	return id >= 0 && id < MODE_COUNT ? mode_rows[id].count : 0;
}

const char *modes_value_name(int id, int v)
{
	const struct align_mode_value *r = modes_value(id, v);
	return r ? r->name : NULL;
}

const char *modes_default_name(int id)
{
	return id >= 0 && id < MODE_COUNT ? modes_value_name(id, mode_rows[id].def) : NULL;
}

int modes_value_index(int id, const char *name)
{
	for (int v = 0; v < modes_value_count(id); v++)
		if (strcmp(modes_value_name(id, v), name) == 0)
			return v;
	return -1;
}

/* append s to buf (truncating, always NUL-terminated) */
static void buf_cat(char *buf, size_t len, const char *s)
{
	size_t used = strlen(buf);
	if (used + 1 >= len)
		return;
	snprintf(buf + used, len - used, "%s", s);
}

const char *modes_values_text(int id, char *buf, size_t len)
{
	if (!len)
		return buf;
	buf[0] = '\0';
	for (int v = 0; v < modes_value_count(id); v++) {
		buf_cat(buf, len, v ? "|" : "");
		buf_cat(buf, len, modes_value_name(id, v));
	}
	return buf;
}

const char *modes_mimics_text(int id, char *buf, size_t len)
{
	if (!len)
		return buf;
	buf[0] = '\0';
	for (int v = 0; v < modes_value_count(id); v++) {
		buf_cat(buf, len, v ? "," : "");
		buf_cat(buf, len, modes_value_name(id, v));
		buf_cat(buf, len, "=");
		buf_cat(buf, len, modes_value(id, v)->mimics);
	}
	return buf;
}

static int streq_nocase(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (tolower((unsigned char)*a) != tolower((unsigned char)*b))
			return 0;
	return *a == *b;
}

int modes_find(const char *env_or_id)
{
	for (int i = 0; i < MODE_COUNT; i++)
		if (strcmp(mode_rows[i].env, env_or_id) == 0 || streq_nocase(mode_rows[i].id, env_or_id))
			return i;
	return -1;
}

const char *modes_src_name(enum align_mode_src src)
{
	switch (src) {
	case MODE_SRC_PROFILE:
		return "profile";
	case MODE_SRC_ENV:
		return "env";
	case MODE_SRC_CLI:
		return "cli";
	case MODE_SRC_DEFAULT:
	default:
		return "default";
	}
}

void modes_init_default(struct align_modes *m)
{
	memset(m, 0, sizeof *m);
	for (int i = 0; i < MODE_COUNT; i++) {
		m->v[i] = mode_rows[i].def;
		m->src[i] = MODE_SRC_DEFAULT;
	}
}

const char *const *modes_profiles(void)
{
	return profile_names;
}

const char *modes_profile_meaning(const char *profile)
{
	for (int i = 0; profile_names[i]; i++)
		if (strcmp(profile_names[i], profile) == 0)
			return profile_meanings[i];
	return NULL;
}

#define err_cat buf_cat

static void list_values(char *err, size_t errlen, int id)
{
	int n = modes_value_count(id);
	for (int v = 0; v < n; v++) {
		err_cat(err, errlen, v ? ", " : "");
		err_cat(err, errlen, modes_value_name(id, v));
	}
}

int modes_value_gpu_only(int id, int v)
{
	const struct align_mode_value *r = modes_value(id, v);
	return r && (r->where == MODE_WHERE_GPU_ONLY || r->where == MODE_WHERE_GPU_NONDET);
}

int modes_value_nondet(int id, int v)
{
	const struct align_mode_value *r = modes_value(id, v);
	return r && r->where == MODE_WHERE_GPU_NONDET;
}

int modes_nondet_in(const struct align_modes *m, const int *ids)
{
	for (int i = 0; ids ? ids[i] >= 0 : i < MODE_COUNT; i++) {
		int id = ids ? ids[i] : i;
		if (modes_value_nondet(id, m->v[id]))
			return id;
	}
	return -1;
}

int modes_value_refused_on(int id, int v, enum align_device dev)
{
	const struct align_mode_value *r = modes_value(id, v);
	if (!r)
		return 0;
	if (dev == ALIGN_DEVICE_CPU)
		return r->where == MODE_WHERE_GPU_ONLY || r->where == MODE_WHERE_GPU_NONDET;
	return r->where == MODE_WHERE_CPU_ONLY;
}

int modes_gpu_only_in(const struct align_modes *m, const int *ids)
{
	return modes_refused_on(m, ids, ALIGN_DEVICE_CPU);
}

int modes_refused_on(const struct align_modes *m, const int *ids, enum align_device dev)
{
	for (int i = 0; ids ? ids[i] >= 0 : i < MODE_COUNT; i++) {
		int id = ids ? ids[i] : i;
		if (modes_value_refused_on(id, m->v[id], dev))
			return id;
	}
	return -1;
}

static int apply_profile_rows(struct align_modes *m, const char *profile, int depth, char *err, size_t errlen);

int modes_apply_profile(struct align_modes *m, const char *profile, char *err, size_t errlen)
{
	if (modes_profile_meaning(profile) == NULL) {
		if (err && errlen) {
			snprintf(err, errlen, "unknown profile '%s' (valid: ", profile);
			for (int i = 0; profile_names[i]; i++) {
				err_cat(err, errlen, i ? ", " : "");
				err_cat(err, errlen, profile_names[i]);
			}
			err_cat(err, errlen, ")");
		}
		return 2;
	}
	int rc = apply_profile_rows(m, profile, 0, err, errlen);
	if (rc)
		return rc;
	snprintf(m->profile, sizeof m->profile, "%s", profile);
	return 0;
}

/* the rows of one profile in table order; a PROFILE_BASE row applies its base first (depth <= 4) */
static int apply_profile_rows(struct align_modes *m, const char *profile, int depth, char *err, size_t errlen)
{
	for (size_t r = 0; r < sizeof profile_rows / sizeof profile_rows[0]; r++) {
		if (strcmp(profile_rows[r].profile, profile) != 0)
			continue;
		if (profile_rows[r].id < 0) {
			if (depth >= 4 || modes_profile_meaning(profile_rows[r].base) == NULL) {
				if (err && errlen)
					snprintf(err, errlen, "profile '%s': bad base profile '%s'", profile,
						 profile_rows[r].base);
				return 2;
			}
			int rc = apply_profile_rows(m, profile_rows[r].base, depth + 1, err, errlen);
			if (rc)
				return rc;
			continue;
		}
		m->v[profile_rows[r].id] = profile_rows[r].v;
		m->src[profile_rows[r].id] = MODE_SRC_PROFILE;
	}
	return 0;
}

/* set switch id from value text [val, val+vlen); 0 or 2 with a message naming `what` */
static int set_value(struct align_modes *m, int id, const char *val, enum align_mode_src src, const char *what,
		     char *err, size_t errlen)
{
	int v = modes_value_index(id, val);
	if (v < 0) {
		if (err && errlen) {
			snprintf(err, errlen, "invalid value '%s' for %s (valid: ", val, what);
			list_values(err, errlen, id);
			err_cat(err, errlen, ")");
		}
		return 2;
	}
	m->v[id] = v;
	m->src[id] = src;
	return 0;
}

static void list_envs(char *err, size_t errlen)
{
	for (int i = 0; i < MODE_COUNT; i++) {
		err_cat(err, errlen, i ? ", " : "");
		err_cat(err, errlen, mode_rows[i].env);
	}
}

int modes_apply_env(struct align_modes *m, char *const *envp, char *err, size_t errlen)
{
	if (!envp)
		return 0;
	for (; *envp; envp++) {
		const char *e = *envp;
		if (strncmp(e, "ALIGN_", 6) != 0)
			continue;
		const char *eq = strchr(e, '=');
		size_t klen = eq ? (size_t)(eq - e) : strlen(e);
		char key[128];
		if (klen >= sizeof key)
			klen = sizeof key - 1;
		memcpy(key, e, klen);
		key[klen] = '\0';
		int skip = 0;
		for (int i = 0; non_mode_env[i]; i++)
			skip |= strcmp(key, non_mode_env[i]) == 0;
		if (skip)
			continue;
		int id = -1;
		for (int i = 0; i < MODE_COUNT; i++)
			if (strcmp(mode_rows[i].env, key) == 0)
				id = i;
		if (id < 0) {
			if (err && errlen) {
				snprintf(err, errlen, "unknown numeric mode variable '%s' (known: ", key);
				list_envs(err, errlen);
				err_cat(err, errlen, "; not modes: ALIGN_TRACE, ALIGN_DB, ALIGN_TRIAL_DIR)");
			}
			return 2;
		}
		if (set_value(m, id, eq ? eq + 1 : "", MODE_SRC_ENV, key, err, errlen))
			return 2;
	}
	return 0;
}

int modes_apply_kv(struct align_modes *m, const char *key_eq_value, char *err, size_t errlen)
{
	const char *eq = strchr(key_eq_value, '=');
	if (!eq) {
		if (err && errlen)
			snprintf(err, errlen, "mode '%s' is not KEY=VALUE", key_eq_value);
		return 2;
	}
	char key[128];
	size_t klen = (size_t)(eq - key_eq_value);
	if (klen >= sizeof key)
		klen = sizeof key - 1;
	memcpy(key, key_eq_value, klen);
	key[klen] = '\0';
	int id = modes_find(key);
	if (id < 0) {
		if (err && errlen) {
			snprintf(err, errlen, "unknown numeric mode '%s' (known: ", key);
			list_envs(err, errlen);
			err_cat(err, errlen, ")");
		}
		return 2;
	}
	return set_value(m, id, eq + 1, MODE_SRC_CLI, mode_rows[id].env, err, errlen);
}

int modes_format(const struct align_modes *m, char *buf, size_t len)
{
	int total = 0;
	for (int i = 0; i < MODE_COUNT; i++) {
		int n = snprintf(buf && (size_t)total < len ? buf + total : NULL,
				 buf && (size_t)total < len ? len - (size_t)total : 0, "%s%s=%s", i ? "," : "",
				 mode_rows[i].id, modes_value_name(i, m->v[i]));
		if (n < 0)
			return -1;
		total += n;
	}
	return total;
}
