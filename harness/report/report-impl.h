/* report-impl: the comparison engine's internal state, shared by report.c (plan, fast path, main
 * loop), report-scan.c (reading one step of both runs, matching, verdicts) and report-map.c (name
 * mapping rules, interned names). Not a public interface: see report.h. */
#ifndef ALIGN_REPORT_IMPL_H
#define ALIGN_REPORT_IMPL_H

#include "report.h"

#include <regex.h>

/* Interned strings (canonical names): id <-> string, open addressing on an xxh3 hash. */
struct rp_strtab {
	char **s; /* id -> string (owned) */
	size_t n, cap;
	int32_t *slot; /* hash slot -> id + 1 (0: empty) */
	size_t slot_cap;
};

struct rp_rule {
	regex_t re;
	char *canon;
};

/* One (rank, step) of the union of both runs' step summaries. Side 0 = run A, 1 = run B. */
struct rp_unit {
	int64_t rank, step;
	int in[2];	     /* present in the run's stepsum */
	int64_t n[2], nx[2]; /* stepsum n, n_exact */
	int64_t h[2];
	int same;	       /* summaries equal: not read, counted */
	int read;	       /* to be read (not same, or same but needed for per-name counts) */
	int64_t sn[2], snx[2]; /* records in scope (after --metric) and how many of them are exact */
	int64_t nread[2];      /* records read */
	int metrics_counted;   /* its per-name counts came from canon_counts: reading it must not add them */
};

/* One record read, its strings as offsets into the step arena. */
struct rp_row {
	int32_t canon, source;
	int64_t rank, micro, seq, occ, line;
	size_t name, dtype, text, digest, digest_alg, missing, stats, head; /* arena offsets, 0 = NULL */
	int64_t id; /* record.id: the payload is loaded by it for a reported record (report-evidence.c) */
	int has_bits, has_value, has_interval, is_nan;
	uint64_t bits;
	double value, lo, hi;
	int digits;
	struct rp_unit *unit;
	int64_t pos;	 /* ordinal in its (rank, micro) of the step, in seq order (report.h) */
	size_t call, io; /* arena offsets of the input/output link, 0 = NULL */
	int32_t pair;	 /* its pair in c->pairs (set by the root-cause search) */
};

/* A key of the step: indexes into rows[0] / rows[1] (-1: absent) and its execution-order key. */
struct rp_pair {
	int32_t ia, ib;
	int64_t micro, seq, rank;
	int side;
	int64_t pos_hi, pos_lo; /* the larger and the smaller of the two sides' positions */
	int64_t seq_hi, seq_lo; /* the same for seq */
	int64_t occ;
	const char *canon; /* its canonical name (valid for the step) */
	int verdict;	   /* set by judge */
};

struct rp_source {
	int64_t id;
	char *path;
};

struct store_step_reader;

/* An input record of one side (io 'in'), for the root-cause search. */
struct rp_input {
	int64_t rank, micro;
	const char *call;
	int32_t row;
};

struct rp_ctx {
	sqlite3 *db;
	struct align_err *e; /* where a failure leaves its message (the command's context) */
	const struct report_opts *o;
	struct report *r;
	struct rp_rule *rules;
	size_t n_rules;
	struct rp_strtab names; /* canonical names; metric i of r->metrics has names id i */
	size_t metrics_cap;
	unsigned char *want; /* per name id: in scope */
	int filtering;	     /* only the names in want are read: --metric, or the numerics
	                                 * scope leaving meta names out (then filter is empty) */
	char **filter;	     /* the canonical --metric names */
	int n_filter;
	int read_all;	       /* --map or --no-stepsum: no fast path */
	struct rp_unit *units; /* sorted by (step, rank) */
	size_t n_units;
	int32_t *unit_slot; /* hash (rank, step) -> unit index + 1 */
	size_t unit_slot_cap;
	struct rp_source *sources; /* sorted by id */
	size_t n_sources;
	struct store_step_reader *read_q; /* one step of one run: see report-scan.c */
	char *canon_json;		  /* the names to read, JSON array text (SQL canons) */
	char *arena;			  /* strings of the rows of the current step */
	size_t arena_len, arena_cap;
	int oom; /* the arena could not grow */
	struct rp_row *rows[2];
	size_t n_rows[2], cap_rows[2];
	struct rp_pair *pairs;
	size_t n_pairs, cap_pairs;
	int64_t remaining;	 /* names in scope without a first difference yet */
	int phase2;		 /* --first-diff past the first difference: only `remaining` */
	int64_t first_diff_step; /* step of r->first_diff (--first-diff seeks first_only_in through it) */
	int have_bad;		 /* a record that is not bitwise-equal has been seen */
	int64_t step_records;	 /* records of the current step in scope (for proven_through) */
	int step_all_exact;
	int step_links;		 /* a record of the current step carries a call link */
	int32_t *only_group[2];	 /* per side, per name id: index + 1 of its r->only_in group */
	size_t only_group_cap;	 /* entries of each */
	struct rp_input *inputs; /* root-cause search: the step's input records of one side */
	size_t cap_inputs;
};

/* report-map.c */
int32_t rp_intern(struct rp_ctx *c, const char *s);
int rp_map_load(struct rp_ctx *c, const char *path);
/* The canonical name of a record: the first map rule matching name, else canon. */
const char *rp_map_name(const struct rp_ctx *c, const char *name, const char *canon);
void rp_map_free(struct rp_ctx *c);
/* Grow metrics so that every interned name has one. */
int rp_metrics_sync(struct rp_ctx *c);

/* report.c */
struct rp_unit *rp_unit_find(const struct rp_ctx *c, int64_t rank, int64_t step);

/* report-prov.c: run->prov from the run's header (JSON object text, NULL: none). */
int rp_prov_load(struct report_run *run, const char *header, struct align_err *e);

/* report-rootcause.c */
/* The root-cause search in the step just judged (pairs in execution order, their verdicts set):
 * sets r->root_cause when a pair qualifies (report.h). */
int rp_root_cause_step(struct rp_ctx *c, int64_t step);
/* After the walk: r->root_cause_none when no candidate was found. */
void rp_root_cause_finish(struct rp_ctx *c);

/* report-scan.c */
/* Read, match and judge one step: units[u0, u1) of that step whose `read` flag is set (all of them
 * in read_all mode). canons_json: the SQL canon filter. */
int rp_scan_step(struct rp_ctx *c, size_t u0, size_t u1);
int rp_scan_prepare(struct rp_ctx *c);
void rp_scan_free(struct rp_ctx *c);
const char *rp_source_path(const struct rp_ctx *c, int64_t id);
/* Count a verdict for a name (totals, metric, bad-step tracking). */
void rp_count(struct rp_ctx *c, int32_t canon, enum verdict v, int64_t n);
/* The verdict of a pair (compare_values, or only-in-a / only-in-b). */
void rp_pair_result(const struct rp_ctx *c, const struct rp_pair *p, struct cmp_result *res);
/* A new report item for a pair of the current step (NULL: out of memory). */
struct report_item *rp_pair_item(const struct rp_ctx *c, const struct rp_pair *p, int64_t step);
/* A string of the step arena (NULL for offset 0). */
const char *rp_str(const struct rp_ctx *c, size_t off);

#endif
