/* bisect: the state of one 'align bisect' shared by its parts.
 *
 *   bisect-spec.c     ENV_SPEC parsing (KEY=V,..., @FILE, profile:NAME) and the switch list
 *   bisect-cache.c    digests, the bisect_trial cache table (schema/0002-bisect.sql)
 *   bisect-trial.c    one trial: a fresh process and its traces; the -j pool
 *   bisect-ingest.c   a trial's traces into the database as its run
 *   bisect-compare.c  a trial's run against the baseline run: the first divergent record
 *   bisect-search.c   delta debugging (ddmin), every independent culprit, the interaction analysis
 *   bisect-out.c      the report: text, JSON, Markdown
 *   (store/store-bisect.c holds every SQL statement of these parts)
 *
 * A switch is a key whose value differs between the good and the bad environment (NULL = unset on
 * that side). A subset of switches is a byte array over bisect.sw: set[i] = 1 puts switch i at its bad
 * value, every other key keeps its good value. Everything is owned by struct bisect and freed by
 * bisect_free; no state lives outside it but the SIGINT/SIGTERM flag (cmd-bisect.c says why). A failure
 * leaves its one message in *err (the command's context) and returns its status. */
#ifndef ALIGN_BISECT_H
#define ALIGN_BISECT_H

#include "status.h"

#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stddef.h>
#include <sys/types.h>

/* An environment override: KEY -> value, or unset (val NULL). Kept sorted by key. */
struct bisect_env {
	char **key;
	char **val;
	size_t n, cap;
};

struct bisect_switch {
	char *key;
	char *good; /* value in the good environment, NULL: unset */
	char *bad;  /* value in the bad environment, NULL: unset */
};

enum trial_verdict { TRIAL_PENDING, TRIAL_SAME, TRIAL_DIVERGES, TRIAL_UNUSABLE };

/* Exit status of the command, kept until its traces are read. */
struct trial_proc {
	pid_t pid;	/* 0: not running */
	int errfd;	/* read end of the exec-error pipe */
	double started; /* monotonic seconds */
	int timed_out;
};

struct bisect_trial {
	unsigned char *set; /* n_sw bytes: 1 = switch at its bad value */
	char env[65];	    /* sha256 of the trial's resolved environment overrides */
	char *run_name;	    /* the run that holds its records (NULL: unusable) */
	long long run_id;
	enum trial_verdict verdict;
	char *reason;	    /* unusable: why */
	json_t *first_diff; /* diverges: the first divergent record as a report JSON ITEM (owned), made from
	                     * the report's struct (report_item_json) or read from the cache table */
	long long n_diff;   /* number of differing records */
	double duration;    /* seconds the command ran */
	int cached;	    /* 1: answered by the cache table, no process */
	int index;	    /* 1-based order of first use: the row of the trial table */
	struct trial_proc proc;
};

struct bisect {
	struct align_err *err; /* the command's error record (ctx->err): every failure leaves its message here */
	sqlite3 *db;
	const char *db_path;
	char **cmd; /* the command as typed (argv of the trials) */
	int n_cmd;
	char *exe;		  /* what cmd[0] runs: an absolute path (trials run in their own directory) */
	char *cmd_json;		  /* the command as typed, JSON array text (cache rows) */
	struct bisect_env good;	  /* the merged good environment */
	struct bisect_switch *sw; /* the search space, sorted by key */
	size_t n_sw;
	const char *baseline_opt; /* --baseline RUN, or NULL: the good trial */
	char *baseline_run;	  /* the run every trial is compared with */
	char **metrics;		  /* --metric: compare only these metrics (names as report takes them) */
	int n_metrics;
	char *compared;		/* JSON {"baseline":..,"metrics":[..]}: what verdicts are relative to */
	int jobs;		/* -j: trials run at once */
	double timeout;		/* --timeout seconds, 0: none */
	const char *trace_glob; /* --trace-glob, NULL: the file $ALIGN_TRACE names */
	char key[65];		/* sha256 of command, good environment and trace glob */
	char *workdir;		/* absolute: <db dir>/.align-bisect/<key prefix> */
	struct bisect_trial **trials;
	size_t n_trials, cap_trials;
	int n_run;		     /* trials that ran a process in this invocation */
	int max_trials;		     /* ddmin's worst case, for the progress line */
	double t0;		     /* monotonic start */
	int progress;		     /* stderr is a terminal */
	int retry_unusable;	     /* --retry-unusable: run cached unusable trials again */
	int lock_fd;		     /* flock on <workdir>/lock: one bisect per work directory at a time */
	volatile sig_atomic_t *stop; /* set by SIGINT/SIGTERM: kill the trials and stop */
};

/* bisect-spec.c */
/* Set (val NULL: unset) key; 0, or -1 when out of memory. */
int bisect_env_set(struct bisect_env *e, const char *key, const char *val);
const char *bisect_env_get(const struct bisect_env *e, const char *key, int *present);
void bisect_env_free(struct bisect_env *e);
/* Merge one ENV_SPEC (later keys win) into e; on failure the message is in err (ALIGN_ERR_INPUT). */
int bisect_spec_parse(const char *opt, const char *spec, struct bisect_env *e, struct align_err *err);
/* The switches: keys whose value differs between good and bad (sorted by key). */
int bisect_switches(struct bisect *b, const struct bisect_env *bad);
/* Human-readable "KEY=VALUE" or "KEY unset" for switch i at its bad (bad=1) or good value. */
void bisect_switch_text(const struct bisect_switch *s, int bad, char *buf, size_t len);

/* bisect-cache.c */
double bisect_now(void);
/* The overrides of a subset: the good environment, the subset's switches at their bad value. */
int bisect_trial_env(const struct bisect *b, const unsigned char *set, struct bisect_env *out);
void bisect_sha256_hex(const void *data, size_t len, char out[65]);
/* The bisect key (command, good environment, trace glob) and the work directory under it. */
int bisect_make_key(struct bisect *b);
/* The environment digest of a subset (sorted KEY=VALUE / KEY unset lines of all overrides). */
void bisect_env_digest(const struct bisect *b, const unsigned char *set, char out[65]);
/* The run name of a trial: bisect:<16 hex of sha256(key, env)>. */
void bisect_run_name(const struct bisect *b, const char *env, char *out, size_t len);
/* The command as typed, a JSON array (new reference). */
json_t *bisect_cmd_json(const struct bisect *b);
/* JSON array of the switches a subset puts at their bad value ("KEY=V" / "KEY unset"). */
json_t *bisect_set_json(const struct bisect *b, const unsigned char *set);
/* Fill t from the cache table; 1 when found and still valid, 0 when it must run, <0 on error. */
int bisect_cache_load(struct bisect *b, struct bisect_trial *t);
int bisect_cache_store(struct bisect *b, const struct bisect_trial *t);

/* bisect-trial.c */
/* Evaluate the subsets in order (memo, then cache, then processes, up to b->jobs at once); out[i]
 * receives the trial of sets[i]. Exit-code class: ALIGN_EINPUT when the command cannot be run. */
int bisect_eval(struct bisect *b, unsigned char *const *sets, size_t n, struct bisect_trial **out);
/* The trial of a subset if already known in this invocation, else NULL. */
struct bisect_trial *bisect_known(const struct bisect *b, const unsigned char *set);
/* Mark a trial unusable, with why. */
void bisect_unusable(struct bisect_trial *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* bisect-ingest.c */
/* Ingest a finished trial's trace files as its run (or find the run that already holds them). A trace
 * that cannot be read or ingested makes the trial unusable; the return is for database errors. */
int bisect_trial_ingest(struct bisect *b, struct bisect_trial *t, const char *dir, char **files, int n);
/* dir/name, malloc'd. */
char *bisect_path_join(const char *dir, const char *name);

/* bisect-compare.c */
/* Compare trial t's run with b->baseline_run; sets verdict, n_diff and first_diff. */
int bisect_compare(struct bisect *b, struct bisect_trial *t);
/* Set b->compared from the baseline run and the metrics. */
int bisect_set_compared(struct bisect *b);

/* bisect-search.c */
struct bisect_culprit {
	unsigned char *set;	       /* the 1-minimal set */
	struct bisect_trial *trial;    /* its trial */
	struct bisect_trial **alone;   /* per member (in switch order): the member alone */
	struct bisect_trial **without; /* per member: the set without it */
	int n;			       /* members */
	int interaction;	       /* n >= 2 and no member diverges alone */
};
struct bisect_result {
	struct bisect_culprit *culprits; /* in the order found */
	int n_culprits;
	struct bisect_trial *rest; /* the last check of the switches left (NULL: none left, or --first) */
	const char *why_not;	   /* no culprit: why */
};
/* Precondition trials (good, full bad), then ddmin, then again on the rest until it changes nothing
 * (first_only: stop after one culprit). ALIGN_OK with r->n_culprits >= 0, or an error class. */
int bisect_search(struct bisect *b, int first_only, struct bisect_result *r);
void bisect_result_free(struct bisect_result *r);

/* bisect-out.c */
enum bisect_format { BISECT_TEXT, BISECT_JSON, BISECT_MD };
/* Write the report to path (atomically: temp file + rename) or stdout when path is NULL. */
int bisect_write_report(const struct bisect *b, const struct bisect_result *res, enum bisect_format fmt,
			const char *path);

void bisect_free(struct bisect *b);

#endif
