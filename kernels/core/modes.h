/* modes.h: the numeric-mode registry (rows in modes.def, profiles in profiles.def) and the
 * resolved set of modes that is read once at start and passed down to every op.
 *
 * Resolution order: default < profile < environment < command line. Each step records where a
 * value came from (src). An unknown ALIGN_* variable, switch or value is an error (return 2 with
 * a message that lists the valid names), never a silent default. ALIGN_* variables that are not
 * numeric modes (ALIGN_TRACE, ALIGN_DB) are ignored by modes_apply_env.
 * Values are indices into the row's "v1|v2|..." list; ops compare against them through
 * modes_is(m, MODE_X, "name")-style checks resolved once per call (see ops).
 */
#ifndef ALIGN_MODES_H
#define ALIGN_MODES_H

#include <stddef.h>

enum align_mode_id {
#define MODE(id, env, def, values, meaning, mimics) MODE_##id,
#include "modes.def"
#undef MODE
	MODE_COUNT
};

enum align_mode_src { MODE_SRC_DEFAULT, MODE_SRC_PROFILE, MODE_SRC_ENV, MODE_SRC_CLI };

struct align_mode_info {
	const char *id;	     /* "RMSNORM_WEIGHT" */
	const char *env;     /* "ALIGN_RMSNORM_WEIGHT" */
	const char *def;     /* default value name */
	const char *values;  /* "fp32|bf16" */
	const char *meaning; /* one line */
	const char *mimics;  /* "fp32=deepseek-ref,bf16=megatron/paddle" */
};

struct align_modes {
	int v[MODE_COUNT];		       /* index into the value list */
	enum align_mode_src src[MODE_COUNT]; /* where each value came from */
	char profile[32];		       /* applied profile name, "" when none */
};

#define MODES_MAX_VALUES 8

const struct align_mode_info *modes_info(int id);	/* NULL when out of range */
int modes_value_count(int id);
const char *modes_value_name(int id, int v);		/* NULL when out of range */
int modes_value_index(int id, const char *name);	/* -1 when not a value of id */
int modes_find(const char *env_or_id);			/* -1 when unknown; id is case-insensitive */
const char *modes_src_name(enum align_mode_src src);	/* "default", "profile", "env", "cli" */
void modes_init_default(struct align_modes *m);
/* 0 ok, 2 unknown profile (message lists valid ones) */
int modes_apply_profile(struct align_modes *m, const char *profile, char *err, size_t errlen);
/* every ALIGN_* var must be a known switch with a valid value, else 2 with a message listing the
 * valid ones; ALIGN_TRACE and ALIGN_DB are not modes and are skipped */
int modes_apply_env(struct align_modes *m, char *const *envp, char *err, size_t errlen);
/* command-line --mode KEY=VALUE; KEY may be the env name or the id; 0 ok, 2 error */
int modes_apply_kv(struct align_modes *m, const char *key_eq_value, char *err, size_t errlen);
/* 1 when value v of switch id exists only in the CUDA twins (GPU_ONLY rows of modes.def) */
int modes_value_gpu_only(int id, int v);
/* the first switch among ids (-1 terminated; NULL = all) whose value in m is GPU-only, else -1 */
int modes_gpu_only_in(const struct align_modes *m, const int *ids);
const char *const *modes_profiles(void); /* NULL-terminated, profiles.def order */
const char *modes_profile_meaning(const char *profile); /* NULL when unknown */
/* "ID=value" pairs separated by ',' in registry order; returns the length snprintf would write */
int modes_format(const struct align_modes *m, char *buf, size_t len);

#endif /* ALIGN_MODES_H */
