/* explain.h: `align explain`, the module's shared state: which numeric choice made these bits.
 *
 * Given one op invocation (inputs and observed outputs, from safetensors files or from an ingested
 * run's payloads), the C twin is replayed over the op's own switches (impl->modes) and every assignment
 * that reproduces the observed outputs bitwise is reported, as the fewest descriptions (switches that
 * matter with their values, the rest "any"), with the closest profile; when none does, the closest
 * assignments with their element-level comparison.
 *
 * Files: cmd-explain.c (options, dispatch), explain-load.c (safetensors -> tensors, dims, screening
 * slices), explain-space.c (the search space: switches, values, assignment index <-> modes, the op's
 * dtype contract), explain-replay.c (one replay, the replay cache, -j worker threads), explain-search.c
 * (the search phases, exactness bookkeeping), explain-describe.c (minimal descriptions, closest profile,
 * closest assignments), explain-out.c (text, json, md), explain-runs.c (--runs A,B from the store).
 *
 * Exactness: every reported assignment was replayed on the whole input and compared byte for byte;
 * "no assignment reproduces" is printed only when every assignment of the space was either replayed or
 * refuted (refuted = its output on the screening rows already differs, or the op's dtype contract
 * excludes it); otherwise the output says the search was not exhaustive and how much was tried. */
#ifndef ALIGN_EXPLAIN_H
#define ALIGN_EXPLAIN_H

#include "modes.h"
#include "ops.h"
#include "status.h"

#include <stdint.h>
#include <stdio.h>

#define EX_MAX_SW 16	   /* switches of one op */
#define EX_MAX_T 8	   /* inputs or outputs of one op */
#define EX_MAX_CLOSE 3	   /* closest assignments reported when none reproduces */
#define EX_MAX_DESC 64	   /* descriptions printed */
#define EX_MAX_FIX 32	   /* --mode KEY=VALUE */
#define EX_MAX_PROFILES 16 /* closest profiles reported */
#define EX_SCREEN_ROWS 2   /* default rows of the screening replay */

struct align_ctx;
struct align_dev;
struct st_file;

/* The search space: the op's switches and, per switch, the values replayed on the device. An assignment
 * is a mixed-radix index: digit i picks val[i][digit] of switch sw[i] (switch 0 is the lowest digit). */
struct ex_space {
	int n_sw;
	int sw[EX_MAX_SW];		       /* mode ids, impl->modes order */
	int n_val[EX_MAX_SW];		       /* values in the domain */
	int val[EX_MAX_SW][MODES_MAX_VALUES];  /* value indices (ALIGN_<ID>_<TOKEN>) */
	int n_left[EX_MAX_SW];		       /* values left out (device, or --mode fixed it) */
	int left[EX_MAX_SW][MODES_MAX_VALUES]; /* those values */
	int fixed[EX_MAX_SW];		       /* 1: --mode fixed this switch */
	uint64_t size;			       /* product of n_val (0 when over UINT64_MAX / 2) */
	struct align_modes base;	       /* every other switch: its default */
};

/* One op invocation: the op, its dims and params, the inputs, the observed outputs. */
struct ex_case {
	const struct align_op *op;
	struct align_dims d;
	void *params;			   /* impl->params_size bytes */
	int variant;			   /* params_variant index */
	struct align_tensor in[EX_MAX_T];  /* the inputs as given (dtype as in the file) */
	struct align_tensor obs[EX_MAX_T]; /* observed output k (data NULL: not observed) */
	int n_obs;			   /* outputs observed */
	int64_t obs_elems;		   /* elements compared in all observed outputs */
	/* screening: the first `rows` rows of every T-leading tensor (0: no screening for this op) */
	int rows;
	struct align_dims sd;
	struct align_tensor sin[EX_MAX_T], sobs[EX_MAX_T];
	char in_src[512], out_src[512]; /* where inputs and outputs came from (file, or run:record) */
};

/* What one replay of one assignment gave. */
enum ex_state {
	EX_UNTRIED,
	EX_CONTRACT, /* excluded without a replay: an output or input dtype the modes cannot give */
	EX_REFUSED,  /* the twin refused the modes (unsupported here) */
	EX_SCREENED, /* the screening rows differ: cannot reproduce */
	EX_PASSED,   /* the screening rows agree (not yet replayed whole) */
	EX_MATCH,    /* replayed whole: bitwise equal */
	EX_DIFFER,   /* replayed whole: differs */
};

struct ex_result {
	uint64_t a;	   /* the assignment */
	int state;	   /* enum ex_state */
	uint64_t n_differ; /* elements that differ (screen or whole, per state) */
	uint64_t max_ulp;  /* largest ULP distance of those (NaN pairs left out) */
};

/* The replay cache: results keyed by the assignment index (open addressing). */
struct ex_cache {
	struct ex_result *slot;
	uint64_t cap, n;
};

struct ex_counts {
	uint64_t screen, full, contract, refused; /* replays made, assignments excluded without a replay */
};

/* One search: space, case, cache and its bookkeeping. */
struct ex_search {
	struct align_ctx *ctx;
	struct ex_case *c;
	struct ex_space sp;
	struct ex_cache cache;
	struct ex_counts n;
	int jobs;	       /* -j */
	int device;	       /* enum align_device */
	struct align_dev *dev; /* --device cuda: the open device (one stream: jobs 1, no screening) */
	uint64_t max_replays;  /* --max-replays: the exhaustive phase only when the space fits */
	int exhaustive;	       /* every assignment of the space replayed or refuted */
	int screen;	       /* screening on (0: --no-screen, or the op has no T-leading rows) */
	uint64_t n_match;      /* assignments verified bitwise */
	double seconds;	       /* wall time of the search */
};

/* A description: per switch the set of values (bit v = value index v) that reproduce together. */
struct ex_desc {
	uint32_t set[EX_MAX_SW];
	uint64_t count; /* assignments it stands for */
};

/* The outcome shown to the user. */
struct ex_closest {
	uint64_t a;
	uint64_t n_differ, max_ulp;
};

struct ex_answer {
	int n_desc;
	struct ex_desc desc[EX_MAX_DESC];
	int more_desc;			      /* descriptions not printed */
	int n_profile;			      /* closest profiles (all those tied; 0: none) */
	const char *profile[EX_MAX_PROFILES]; /* their names, profiles.def order */
	uint32_t profile_sw[EX_MAX_PROFILES]; /* bit i: switch i differs from the nearest description */
	int profile_diff;		      /* how many switches differ (the same for all of them) */
	int n_close;
	struct ex_closest close[EX_MAX_CLOSE];
	int close_rank; /* how many candidates the closest were picked among (replayed whole) */
};

/* explain-space.c */
int ex_space_init(struct ex_search *s, const char *const *fix, int n_fix);
void ex_space_modes(const struct ex_space *sp, uint64_t a, struct align_modes *m);
int ex_space_digit(const struct ex_space *sp, uint64_t a, int i);	     /* value index of switch i */
uint64_t ex_space_with(const struct ex_space *sp, uint64_t a, int i, int v); /* switch i set to value v */
/* assignment nearest to modes m (a switch whose value is not in the domain keeps digit 0); *missing = bit
 * i when switch i's value of m is not in the domain */
uint64_t ex_space_from_modes(const struct ex_space *sp, const struct align_modes *m, uint32_t *missing);
/* 1 when the op's dtype contract admits the assignment for the given inputs and observed outputs */
int ex_space_contract(const struct ex_search *s, const struct align_modes *m);

/* explain-load.c */
int ex_load_files(struct align_ctx *ctx, struct ex_case *c, const char *inputs, const char *output, const char *shape,
		  int variant, struct st_file *inf, struct st_file *outf);
/* the dims, params, shapes and the screening slices once c->in and c->obs hold data */
int ex_case_prepare(struct align_ctx *ctx, struct ex_case *c, const char *shape, int variant, int screen_rows);
void ex_case_free(struct ex_case *c);
int ex_dtype_of(const char *name); /* align dtype name -> enum align_dtype, -1 unknown */

/* explain-replay.c */
int ex_cache_init(struct ex_cache *c, uint64_t cap);
void ex_cache_free(struct ex_cache *c);
struct ex_result *ex_cache_get(struct ex_cache *c, uint64_t a); /* NULL when absent */
/* evaluate the assignments (screen first when on, then whole for those that pass; whole only when
 * whole != 0), in parallel (s->jobs), into the cache */
int ex_eval(struct ex_search *s, const uint64_t *as, uint64_t n, int whole);
/* the op's twin on the search's device (the C twin, or the CUDA twin through run-device.h) */
int ex_fwd(struct ex_search *s, const struct align_modes *m, const struct align_tensor *in, struct align_tensor *out);
/* replay a whole; out[k] receives output k (caller frees with ops_tensor_free) */
int ex_replay_whole(struct ex_search *s, uint64_t a, struct align_tensor *out);

/* explain-search.c */
int ex_search_run(struct ex_search *s);
void ex_search_free(struct ex_search *s);

/* explain-describe.c */
int ex_describe(struct ex_search *s, struct ex_answer *ans);

/* explain-out.c */
int ex_render(struct ex_search *s, const struct ex_answer *ans, const char *format, FILE *out);
/* --runs: both sides, then the switches whose values differ */
int ex_render_pair(struct ex_search *s[2], const struct ex_answer *ans[2], const char *names[2], const char *format,
		   FILE *out);

/* explain-runs.c: the inputs and outputs of op at the first record where runs A and B differ */
int ex_load_runs(struct align_ctx *ctx, const char *runs, const char *record, struct ex_case c[2],
		 const char *names[2]);

#endif
