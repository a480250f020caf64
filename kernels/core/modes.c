/* modes.c: lookups over the modes.def / profiles.def tables and the resolution of a mode set
 * (default < profile < environment < command line). Pure functions over constant tables: the
 * only state is the caller's struct align_modes. modes_value_name returns NUL-terminated names
 * from name_pool, a constant list of every value token (C cannot split the "a|b|c" literals at
 * compile time, and a lazily built table would be global mutable state); test-modes proves the
 * pool covers every token of modes.def. */
#include "modes.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const struct align_mode_info mode_rows[MODE_COUNT] = {
#define MODE(id, env, def, values, meaning, mimics) {#id, env, def, values, meaning, mimics},
#include "modes.def"
#undef MODE
};

struct profile_row {
	const char *profile;
	int id;		   /* -1: a PROFILE_BASE row, value names the base profile */
	const char *value;
};

static const struct profile_row profile_rows[] = {
#define PROFILE_NAME(name, meaning)
#define PROFILE_BASE(name, base) {name, -1, base},
#define PROFILE(name, id, value) {name, MODE_##id, value},
#include "profiles.def"
#undef PROFILE
#undef PROFILE_BASE
#undef PROFILE_NAME
};

struct gpu_only_row {
	int id;
	const char *value;
};

static const struct gpu_only_row gpu_only_rows[] = {
#define MODE(id, env, def, values, meaning, mimics)
#define GPU_ONLY(id, value) {MODE_##id, value},
#include "modes.def"
#undef GPU_ONLY
#undef MODE
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

/* start offset and length of value v of row id; -1 when out of range */
static int value_span(int id, int v, size_t *len)
{
	if (id < 0 || id >= MODE_COUNT || v < 0)
		return -1;
	const char *s = mode_rows[id].values;
	int start = 0, k = 0;
	for (int i = 0;; i++) {
		if (s[i] == '|' || s[i] == '\0') {
			if (k == v) {
				*len = (size_t)(i - start);
				return start;
			}
			if (s[i] == '\0')
				return -1;
			k++;
			start = i + 1;
		}
	}
}

int modes_value_count(int id)
{
	if (id < 0 || id >= MODE_COUNT)
		return 0;
	int n = 1;
	for (const char *s = mode_rows[id].values; *s; s++)
		n += *s == '|';
	return n;
}

/* Value names must be NUL-terminated strings: they live in name_pool, a constant table of every
 * distinct value token of modes.def (checked complete by test-modes). */
static const char *const name_pool[] = {
	"portable", "libm", "fp32", "bf16", "after_weight", "before_weight", "rn", "div", "approx",
	"seq", "pairwise", "warp32", "fp64", "1e-6", "1e-5", "bf16_eager", "fp32_fused", "factor_bf16",
	"fp32_out", "off", "on", "before_w2", "after_w2", "single", "double", "mul", "bf16w", "tf32",
	"none", "1e-20", "sorted", "index", "neginf", "zero", "table", "placeholder", "c1", "c0", "c0p",
	"rsqrt", "inv_rms", "split16", "comb_first", "post_first", "exp", "exp2", "expert", "slot", "cuda",
	"cuda_fast", "torch", "tc", "cublas", "cublas_pinned", NULL};

const char *modes_value_name(int id, int v)
{
	size_t len;
	int off = value_span(id, v, &len);
	if (off < 0)
		return NULL;
	const char *tok = mode_rows[id].values + off;
	for (int i = 0; name_pool[i]; i++)
		if (strlen(name_pool[i]) == len && memcmp(name_pool[i], tok, len) == 0)
			return name_pool[i];
	return NULL; /* a token missing from name_pool: test-modes fails on it */
}

int modes_value_index(int id, const char *name)
{
	int n = modes_value_count(id);
	for (int v = 0; v < n; v++) {
		size_t len;
		int off = value_span(id, v, &len);
		if (strlen(name) == len && memcmp(mode_rows[id].values + off, name, len) == 0)
			return v;
	}
	return -1;
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
		int v = modes_value_index(i, mode_rows[i].def);
		m->v[i] = v < 0 ? 0 : v; /* test-modes proves every default is a valid value */
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

/* append s to err (truncating, always NUL-terminated) */
static void err_cat(char *err, size_t errlen, const char *s)
{
	size_t used = strlen(err);
	if (used + 1 >= errlen)
		return;
	snprintf(err + used, errlen - used, "%s", s);
}

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
	const char *name = modes_value_name(id, v);
	for (size_t r = 0; name && r < sizeof gpu_only_rows / sizeof gpu_only_rows[0]; r++)
		if (gpu_only_rows[r].id == id && strcmp(gpu_only_rows[r].value, name) == 0)
			return 1;
	return 0;
}

int modes_gpu_only_in(const struct align_modes *m, const int *ids)
{
	for (int i = 0; ids ? ids[i] >= 0 : i < MODE_COUNT; i++) {
		int id = ids ? ids[i] : i;
		if (modes_value_gpu_only(id, m->v[id]))
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
			if (depth >= 4 || modes_profile_meaning(profile_rows[r].value) == NULL) {
				if (err && errlen)
					snprintf(err, errlen, "profile '%s': bad base profile '%s'", profile,
						 profile_rows[r].value);
				return 2;
			}
			int rc = apply_profile_rows(m, profile_rows[r].value, depth + 1, err, errlen);
			if (rc)
				return rc;
			continue;
		}
		int v = modes_value_index(profile_rows[r].id, profile_rows[r].value);
		if (v < 0) {
			if (err && errlen)
				snprintf(err, errlen, "profile '%s': invalid value '%s' for %s", profile,
					 profile_rows[r].value, mode_rows[profile_rows[r].id].env);
			return 2;
		}
		m->v[profile_rows[r].id] = v;
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
