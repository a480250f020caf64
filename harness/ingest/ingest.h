/* ingest: the driver every format parser reports to. One transaction per input file; records are
 * canonicalised, ordered and classified here so that parsers only say what they read.
 *
 * Parser contract: parse(ig, reader) reads the whole file, calls ingest_emit for each value, and
 * returns an exit-code class; an error must have been printed through ingest_error (file:line: what).
 * Keys: rank -1 = a global value printed by any rank (deduplicated when equal); micro -1 = a step-level
 * value (not per micro-batch); step -1 = no step. */
#ifndef ALIGN_INGEST_H
#define ALIGN_INGEST_H

#include "numtext.h"
#include "reader.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#define ALIGN_NO_RANK (-1)
#define ALIGN_NO_MICRO (-1)
#define ALIGN_NO_STEP (-1)
#define ALIGN_NO_SEQ (-1)

/* One observed value as a parser saw it. Pointers are borrowed for the duration of ingest_emit. */
struct rec {
	int64_t rank, step, micro;
	int64_t seq;                /* ALIGN_NO_SEQ: assigned in emit order per rank */
	int64_t line;               /* source line (0: the reader's current line) */
	const char *name;           /* as printed */
	const char *phase;          /* fwd, bwd, grad, param, optim, loss, metric, eval (NULL: loss) */
	const char *dtype;          /* dtype of the underlying value (fp32 for losses), NULL unknown */
	const char *shape;          /* JSON array text, NULL for scalars */
	const char *text;           /* printed value, NULL if none */
	size_t text_len;            /* 0: strlen(text) */
	enum prec_kind prec;        /* how to read text */
	int prec_n;                 /* decimals for PREC_DEC */
	int has_bits;               /* bits are exact in dtype (ATF hex, md5-verified values) */
	uint64_t bits;
	const char *digest, *digest_alg;
	const char *stats, *head, *extra; /* JSON texts */
	const void *payload;
	size_t payload_len;
	const char *missing;        /* the key is present but its value is not (why) */
};

struct ingest_opts {
	int micro_batches;          /* --micro-batches N for order-derived anchors (default 1) */
	char order[8][32];          /* --order main,mtp: print order of anchor losses per micro-batch */
	int n_order;
	int quiet;
};

struct ingest;

int ingest_emit(struct ingest *ig, const struct rec *r);
/* A restart re-ran steps >= from_step on rank: earlier records there become superseded. */
int ingest_supersede(struct ingest *ig, int64_t rank, int64_t from_step);
/* Print "warning: file:line: what" and keep it in source.warnings. */
void ingest_warn(struct ingest *ig, int64_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Print "error: file:line: what"; returns ALIGN_EINPUT. line 0: the reader's current line. */
int ingest_error(struct ingest *ig, int64_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Merge a JSON object (environment, modes, world size, ...) into the run header. */
int ingest_set_header(struct ingest *ig, const char *json_text);
/* Rank derived from the file name (workerlog.N, rankN, _RANK_N_, globalrank-N), or -1. */
int64_t ingest_file_rank(const struct ingest *ig);
const char *ingest_path(const struct ingest *ig);
const struct ingest_opts *ingest_get_opts(const struct ingest *ig);
int64_t ingest_current_line(const struct ingest *ig);

/* A format: detect scores the first bytes (0 = not this format, 100 = certain). */
struct ingest_format {
	const char *name;
	const char *framework;
	const char *summary;
	int (*detect)(const char *head, size_t len, const char *path);
	int (*parse)(struct ingest *ig, struct reader *r);
};

const struct ingest_format *const *ingest_formats(size_t *count);
const struct ingest_format *ingest_format_find(const char *name);

/* Ingest files into run `as` (NULL: named after the first file). Exit-code class. */
int ingest_files(sqlite3 *db, const char *db_path, const char *as, int append, const char *format,
                 const struct ingest_opts *opts, char **files, int n_files);

#endif
