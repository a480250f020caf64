/* store-ingest: every SQL statement of the ingest path (tables in schema/0001-init.sql and
 * 0003-meta-canon.sql), with named parameters bound by name, so that harness/ingest holds no SQL.
 *
 * Contract: none of these functions begins, commits or rolls back: ingest wraps each input file in one
 * transaction (store_begin_err .. store_commit_err / store_rollback) and calls them inside it. Each
 * returns an exit-code class and sets the one message in e; a failing statement names itself
 * ("sqlite: cannot prepare '<what>'") or carries the SQLite message ("sqlite: <why>"). */
#ifndef ALIGN_STORE_INGEST_H
#define ALIGN_STORE_INGEST_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

struct align_err;

/* The columns of one record row after run_id, in the order of the INSERT (X(column)); the parameter of
 * a column is named :<column> and bound through STORE_REC_<column>. */
/* clang-format off */
#define STORE_RECORD_COLUMNS(X) \
	X(source_id) X(line) X(rank) X(step) X(micro) X(seq) X(occ) X(name) X(canon) X(phase) X(dtype) \
	X(shape) X(bits) X(value) X(text) X(digits) X(lo) X(hi) X(digest) X(digest_alg) X(stats) X(head) \
	X(payload) X(missing) X(extra) X(call) X(io)
/* clang-format on */

enum store_rec_col {
	STORE_REC_run_id,
#define X(c) STORE_REC_##c,
	STORE_RECORD_COLUMNS(X)
#undef X
		STORE_REC_N
};

/* The statements one input file runs for each record, prepared once per file (inside its transaction)
 * and finalized before the transaction ends. */
struct store_ingest {
	sqlite3 *db;
	struct align_err *e;	    /* where failures go */
	sqlite3_stmt *record;	    /* insert one record row */
	int rec_param[STORE_REC_N]; /* parameter index of each column, looked up by its :name */
	sqlite3_stmt *count_key;    /* records of a key already in the run (occurrence counter) */
	sqlite3_stmt *key_record;   /* one occurrence of a key, with its source (merging sources) */
	sqlite3_stmt *next_seq;	    /* the next free seq of a rank in the run */
	sqlite3_stmt *stepsum;	    /* add to a (rank, step) summary */
	sqlite3_stmt *meta;	    /* note a canon of phase "meta" */
};

/* Prepare the per-file statements (all or none). */
int store_ingest_open(struct store_ingest *s, sqlite3 *db, struct align_err *e);
/* Finalize them (safe on a zeroed or already closed struct). */
void store_ingest_close(struct store_ingest *s);

/* The record row being built: set each column (unset ones stay NULL), then insert. Text and blobs are
 * bound SQLITE_STATIC (they must live until store_rec_insert returns) except store_rec_blob_owned,
 * whose malloc'd buffer the store frees. */
void store_rec_int64(struct store_ingest *s, enum store_rec_col c, int64_t v);
void store_rec_double(struct store_ingest *s, enum store_rec_col c, double v);
void store_rec_text(struct store_ingest *s, enum store_rec_col c, const char *text, size_t len);
void store_rec_blob_owned(struct store_ingest *s, enum store_rec_col c, void *data, size_t len);
/* Insert the row and clear the bindings. A row whose (run, rank, seq) is taken is not an error here:
 * *duplicate = 1 and ALIGN_OK, no message (the caller words it with its file:line). */
int store_rec_insert(struct store_ingest *s, int *duplicate);

/* A stored record's value identity (the columns ingest's value hash reads) and where it came from.
 * Pointers are borrowed: valid only during the callback that receives it. */
struct store_value {
	int64_t occ;
	const char *missing, *dtype, *digest, *text; /* NULL: SQL NULL */
	size_t text_len;
	int has_bits; /* bits is not NULL */
	int64_t bits;
	const char *path;	  /* its source file (store_key_record only, else NULL) */
	int64_t line;		  /* its line there (store_key_record only) */
	const char *stats, *head; /* the summaries (JSON texts) of a tensor shown by them only */
};
typedef void (*store_value_fn)(void *u, const struct store_value *v);

/* Records of (canon, rank, step, micro) in the run that are not superseded: *n, and, in the same
 * lookup, occurrence 0's value passed to fn (not called when there is none). */
int store_count_key(struct store_ingest *s, int64_t run_id, const char *canon, int64_t rank, int64_t step,
		    int64_t micro, int64_t *n, store_value_fn fn, void *u);
/* The record of (canon, rank, step, micro) with occurrence occ that is not superseded, with its source
 * path and line, passed to fn; *found = 0 (fn not called) when there is none. */
int store_key_record(struct store_ingest *s, int64_t run_id, const char *canon, int64_t rank, int64_t step,
		     int64_t micro, int64_t occ, store_value_fn fn, void *u, int *found);
/* The next free seq of rank in the run (0 when it has none). */
int store_next_seq(struct store_ingest *s, int64_t run_id, int64_t rank, int64_t *seq);
/* The record that holds (rank, seq) in the run, as "'NAME' at PATH:LINE" (malloc'd, caller frees), or
 * NULL when there is none (for the message of a duplicate seq). */
int store_describe_seq(sqlite3 *db, int64_t run_id, int64_t rank, int64_t seq, char **where, struct align_err *e);
/* Add n records, n_exact of them exact, and hash term h (62 bits) to the summary of (rank, step). */
int store_add_stepsum(struct store_ingest *s, int64_t run_id, int64_t rank, int64_t step, int64_t n, int64_t n_exact,
		      int64_t h);
/* One summary to add (store_add_stepsums). */
struct store_stepsum {
	int64_t rank, step, n, n_exact, h;
};
/* store_add_stepsum for each of rows[0..n), STORE_STEPSUM_BATCH rows per statement (a line format has a
 * summary per record: the statement's fixed cost per row was a fifth of its ingest). */
#define STORE_STEPSUM_BATCH 64
int store_add_stepsums(struct store_ingest *s, int64_t run_id, const struct store_stepsum *rows, size_t n);
/* Clear the high bits of every summary hash (keeps the sums within 62 bits). */
int store_mask_stepsum(sqlite3 *db, struct align_err *e);
/* Note that canon is metadata in the run (once; again is a no-op). */
int store_note_meta_canon(struct store_ingest *s, int64_t run_id, const char *canon);

/* The id of run `name`, or 0 when there is none. */
int store_find_run(sqlite3 *db, const char *name, int64_t *id, struct align_err *e);
/* The path of run_id's source whose content has this SHA-256 (malloc'd, caller frees), or NULL when
 * the run holds no such content (another run may: dedup belongs to a run). */
int store_find_sha_in_run(sqlite3 *db, int64_t run_id, const char *sha, char **path, struct align_err *e);
/* Create run `name` ("cannot create run '<name>'" on failure). */
int store_insert_run(sqlite3 *db, const char *name, const char *framework, const char *format, const char *created,
		     int64_t *id, struct align_err *e);
/* Record source `path` of the run with a unique placeholder sha256 until store_finish_source. */
int store_insert_source(sqlite3 *db, int64_t run_id, const char *path, const char *format, const char *created,
			int64_t *id, struct align_err *e);
/* Set the source's content hash, sizes and warnings (a JSON array text, or NULL). */
int store_finish_source(sqlite3 *db, int64_t source_id, const char *sha, int64_t bytes, int64_t records,
			const char *warnings, struct align_err *e);
/* A restart re-ran steps >= from_step on rank: drop their summaries, mark their records superseded
 * and the run resumed. */
int store_supersede(sqlite3 *db, int64_t run_id, int64_t rank, int64_t from_step, struct align_err *e);
/* The run's header (a JSON text, malloc'd, caller frees), or NULL when it has none. */
int store_get_run_header(sqlite3 *db, int64_t run_id, char **json, struct align_err *e);
/* Replace the run's header with json. */
int store_set_run_header(sqlite3 *db, int64_t run_id, const char *json, struct align_err *e);

#endif
