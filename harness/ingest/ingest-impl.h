/* ingest-impl: the ingest state shared by ingest.c (emit) and ingest-files.c (the file driver). */
#ifndef ALIGN_INGEST_IMPL_H
#define ALIGN_INGEST_IMPL_H

#include "ingest.h"
#include "store-ingest.h"

#include <jansson.h>

/* One key (canon, rank, step, micro) seen in this run (ingest-merge.c). A file's i-th occurrence of
 * the key is occurrence i of the run; occurrences 0..base-1 came from the run's other sources. */
struct occ_slot {
	uint64_t key;	/* 0 = empty */
	uint64_t hash0; /* value hash of occurrence 0 (0: none yet) */
	int64_t step;	/* for supersede */
	int32_t rank;	/* for supersede */
	int32_t count;	/* occurrences in the run: its other sources' and this file's */
	int32_t base;	/* of those, from the run's other sources */
	int32_t file_n; /* occurrences of this file so far */
	uint32_t gen;	/* the file (ingest.file_gen) that base and file_n are of */
};

/* What identifies a record's value (ingest_value_hash): the missing reason, else bits and dtype, else
 * the digest, else the printed text, else the summaries (stats, head). The stepsum hash and the merge of sources both use it. */
struct value_id {
	const char *missing;
	int has_bits;
	uint64_t bits;
	const char *dtype;
	const char *digest;
	const char *text;
	size_t text_len;	  /* 0: strlen(text) */
	const char *stats, *head; /* a tensor shown by its summaries only (AccProber, msprobe statistics) */
};

/* Where a record met another source's record of its key (ingest_occurrence). */
enum occ_meets {
	OCC_NEW,	/* a new occurrence: insert it as *occ */
	OCC_GLOBAL_DUP, /* a global value (rank -1) printed again with its value: keep one */
	OCC_ALREADY,	/* the run's other source holds this occurrence with this value: keep one */
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
	const char *run_name;	/* the run's name (messages) */
	int run_preexisted;	/* occurrence and order counters must consult the database */
	int occ_complete;	/* occ holds every key of the run (created by this command, no rollback since):
				 * a key not there has no record, no lookup needed */
	uint32_t file_gen;	/* counts the files of this command (occ_slot.gen) */
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
	int64_t n_already; /* records this file shares with the run's other sources (not inserted) */
	char *already_at;  /* "FILE:LINE" of the first of them (malloc'd) */
	int64_t file_rank;
	double progress_at;
	int64_t not_repr_warned; /* source_id + 1 of the file whose PREC_EXACT print that is not a value of
				  * its dtype was warned (classify: once per file) */
	char framework[64];	 /* the file's own framework (parser's names hook), "" for the format's */
	int name_from_header;	 /* the run name is the one the file's header gives (no --as) */
	int64_t *made;		 /* runs this invocation created under names from headers: later files of */
	size_t n_made;		 /* the same name extend them without --append */
};

/* The value hash of v (the stepsum term and the merge of sources). */
uint64_t ingest_value_hash(const struct value_id *v);
/* The occurrence of r's key (canon) in the run and what r meets there (enum occ_meets); a value that
 * disagrees with another source's record of the same occurrence fails here (file:line, both values),
 * unless --occurrences. */
int ingest_occurrence(struct ingest *ig, const struct rec *r, const char *canon, const struct value_id *v, uint64_t vh,
		      int64_t *occ, enum occ_meets *meets);
/* A restart re-ran steps >= from_step on rank: forget the occurrences counted there. */
void ingest_occ_supersede(struct ingest *ig, int64_t rank, int64_t from_step);
/* Forget every occurrence counted (the table is freed; later files ask the database). */
void ingest_occ_reset(struct ingest *ig);

/* Rank from a file name (workerlog.N, rankN, _RANK_N_, globalrank-N), or -1. */
int64_t ingest_rank_from_path(const char *path);
/* Add this file's per-step summaries into the stepsum table (inside the file's transaction). */
int ingest_flush_stepsum(struct ingest *ig);
/* Forget (and free) the file's set of meta canons: called with the file's statements finalized, so
 * the next file (whatever happened to this one's transaction) writes its own meta_canon rows. */
void ingest_meta_reset(struct ingest *ig);

#endif
