/* ingest-impl: the ingest state shared by ingest.c (emit) and ingest-files.c (the file driver). */
#ifndef ALIGN_INGEST_IMPL_H
#define ALIGN_INGEST_IMPL_H

#include "ingest.h"
#include "store-ingest.h"

#include <jansson.h>

/* One key (canon, rank, step, micro) seen in this run: how many times, and the first value's hash. */
struct occ_slot {
	uint64_t key; /* 0 = empty */
	int64_t rank, step;
	int64_t count;
	uint64_t value_hash;
};

/* Running stepsum of one (rank, step) in this file, flushed into the stepsum table at commit. */
struct step_slot {
	int64_t rank, step;
	int64_t n, n_exact;
	uint64_t h;
	int used;
};

struct seq_slot {
	int64_t rank;
	int64_t next;
};

struct ingest {
	struct align_err *e; /* the command's error record: every failure's one message */
	sqlite3 *db;
	const char *db_path;
	struct reader *r;
	const struct ingest_format *fmt;
	const struct ingest_opts *opts;
	int64_t run_id, source_id;
	int run_preexisted;	/* occurrence and order counters must consult the database */
	struct store_ingest st; /* the file's statements, open during its transaction */
	struct occ_slot *occ;
	size_t occ_cap, occ_used;
	struct step_slot *steps; /* open addressing on (rank, step) */
	size_t steps_cap, steps_used;
	struct seq_slot *seq;
	size_t n_seq, cap_seq;
	char **meta; /* canons of phase "meta" this file already put into meta_canon */
	size_t n_meta, cap_meta;
	json_t *warnings;
	int64_t n_records, n_deduped;
	int64_t file_rank;
	double progress_at;
	int64_t not_repr_warned; /* source_id + 1 of the file whose PREC_EXACT print that is not a value of
				  * its dtype was warned (classify: once per file) */
	char framework[64];	 /* the file's own framework (parser's names hook), "" for the format's */
	int name_from_header;	 /* the run name is the one the file's header gives (no --as) */
	int64_t *made;		 /* runs this invocation created under names from headers: later files of */
	size_t n_made;		 /* the same name extend them without --append */
};

/* Rank from a file name (workerlog.N, rankN, _RANK_N_, globalrank-N), or -1. */
int64_t ingest_rank_from_path(const char *path);
/* Add this file's per-step summaries into the stepsum table (inside the file's transaction). */
int ingest_flush_stepsum(struct ingest *ig);
/* Forget (and free) the file's set of meta canons: called with the file's statements finalized, so
 * the next file (whatever happened to this one's transaction) writes its own meta_canon rows. */
void ingest_meta_reset(struct ingest *ig);

#endif
