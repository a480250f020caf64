/* modes.h: the numeric-mode registry (rows in modes.def, profiles in profiles.def) and the
 * resolved set of modes that is read once at start and passed down to every op.
 *
 * Resolution order: default < profile < environment < command line. Each step records where a
 * value came from (src). An unknown ALIGN_* variable, switch or value is an error (return 2 with
 * a message that lists the valid names), never a silent default. ALIGN_* variables that are not
 * numeric modes (ALIGN_TRACE, ALIGN_DB) are ignored by modes_apply_env.
 * Values are the per-switch enums generated from modes.def (ALIGN_SWIGLU_ROUND_DOUBLE); ops compare
 * m->v[MODE_SWIGLU_ROUND] == ALIGN_SWIGLU_ROUND_DOUBLE, never a number.
 */
#ifndef ALIGN_MODES_H
#define ALIGN_MODES_H

#include <stddef.h>

enum align_mode_id {
#define MODE_BEGIN(id, env, def, meaning) MODE_##id,
#define VALUE(mode, tok, name, where, mimics)
#define MODE_END(id)
#include "modes.def"
#undef MODE_BEGIN
#undef VALUE
#undef MODE_END
	MODE_COUNT
};

/* One enum per switch: its values, numbered from 0 in modes.def row order (ALIGN_<ID>_<TOKEN>), and
 * ALIGN_<ID>__COUNT. struct align_modes holds these numbers; compare them only by name. */
#define MODE_BEGIN(id, env, def, meaning)                                                                              \
	enum align_##id##_value                                                                                        \
	{
#define VALUE(mode, tok, name, where, mimics) ALIGN_##mode##_##tok,
#define MODE_END(id)                                                                                                   \
	ALIGN_##id##__COUNT                                                                                            \
	}                                                                                                              \
	;
#include "modes.def"
#undef MODE_BEGIN
#undef VALUE
#undef MODE_END

/* which twins can run a value (modes.def WHERE column) */
/* GPU_NONDET: GPU only and not deterministic (float atomics): refused on the CPU like GPU_ONLY, never in a
 * portable profile, and the GPU checks run it twice and report whether the bits changed instead of asserting
 * that they did not */
enum align_mode_where { MODE_WHERE_ANY, MODE_WHERE_GPU_ONLY, MODE_WHERE_CPU_ONLY, MODE_WHERE_GPU_NONDET };

/* the device a mode set is checked for (modes_refused_on) */
enum align_device { ALIGN_DEVICE_CPU, ALIGN_DEVICE_CUDA };

enum align_mode_src { MODE_SRC_DEFAULT, MODE_SRC_PROFILE, MODE_SRC_ENV, MODE_SRC_CLI };

struct align_mode_info {
	const char *id;	     /* "RMSNORM_WEIGHT" */
	const char *env;     /* "ALIGN_RMSNORM_WEIGHT" */
	int def;	     /* default value (index) */
	const char *meaning; /* one line */
	int first;	     /* index of its first row in the value table */
	int count;	     /* number of values */
};

struct align_mode_value {
	int mode;	    /* enum align_mode_id */
	int v;		    /* its index within the switch (ALIGN_<ID>_<TOKEN>) */
	const char *name;   /* "bf16" */
	int where;	    /* enum align_mode_where */
	const char *mimics; /* who the value mimics */
};

#define MODES_MAX_VALUES 8

struct align_modes {
	int v[MODE_COUNT];		     /* index into the value list */
	enum align_mode_src src[MODE_COUNT]; /* where each value came from */
	char profile[32];		     /* applied profile name, "" when none */
};

const struct align_mode_info *modes_info(int id); /* NULL when out of range */
/* value v of switch id (its row of modes.def), NULL when out of range */
const struct align_mode_value *modes_value(int id, int v);
int modes_value_count(int id);
const char *modes_default_name(int id); /* the default value's name */
/* "v1|v2|..." and "v1=who,v2=who" of switch id into buf (the `align modes` columns); returns buf */
const char *modes_values_text(int id, char *buf, size_t len);
const char *modes_mimics_text(int id, char *buf, size_t len);
const char *modes_value_name(int id, int v);	     /* NULL when out of range */
int modes_value_index(int id, const char *name);     /* -1 when not a value of id */
int modes_find(const char *env_or_id);		     /* -1 when unknown; id is case-insensitive */
const char *modes_src_name(enum align_mode_src src); /* "default", "profile", "env", "cli" */
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
/* 1 when value v of switch id is GPU only and non-deterministic (GPU_NONDET rows: float atomics) */
int modes_value_nondet(int id, int v);
/* the first switch among ids (-1 terminated; NULL = all) whose value in m is non-deterministic, else -1 */
int modes_nondet_in(const struct align_modes *m, const int *ids);
/* 1 when value v of switch id cannot run on device dev (GPU_ONLY on the CPU, CPU_ONLY on CUDA) */
int modes_value_refused_on(int id, int v, enum align_device dev);
/* the first switch among ids (-1 terminated; NULL = all) whose value in m is GPU-only, else -1 */
int modes_gpu_only_in(const struct align_modes *m, const int *ids);
/* the first switch among ids (-1 terminated; NULL = all) whose value cannot run on dev, else -1 */
int modes_refused_on(const struct align_modes *m, const int *ids, enum align_device dev);
const char *const *modes_profiles(void);		/* NULL-terminated, profiles.def order */
const char *modes_profile_meaning(const char *profile); /* NULL when unknown */
/* "ID=value" pairs separated by ',' in registry order; returns the length snprintf would write */
int modes_format(const struct align_modes *m, char *buf, size_t len);

#endif /* ALIGN_MODES_H */
