/* ingest: the driver every format parser reports to. One transaction per input file; records are
 * canonicalised, ordered and classified here so that parsers only say what they read.
 *
 * Parser contract: parse(ig, reader) reads the whole file, calls ingest_emit for each value, and
 * returns an exit-code class; a failure has set its one message through ingest_error (file:line: what),
 * fail_internal(ingest_err(ig), ...) or the reader (whose messages name the file).
 * Keys: rank -1 = a global value printed by any rank (deduplicated when equal); micro -1 = a step-level
 * value (not per micro-batch); step -1 = no step. A key repeated within one file is a further
 * occurrence; across the files of one run it is the same record (kept once) or a disagreement (an
 * error), see ingest-merge.c. */
#ifndef ALIGN_INGEST_H
#define ALIGN_INGEST_H

#include "numtext.h"
#include "reader.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ALIGN_NO_RANK (-1)
#define ALIGN_NO_MICRO (-1)
#define ALIGN_NO_STEP (-1)
#define ALIGN_NO_SEQ (-1)

/* One observed value as a parser saw it. Pointers are borrowed for the duration of ingest_emit. */
struct rec {
	int64_t rank, step, micro;
	int64_t seq;	     /* ALIGN_NO_SEQ: assigned in emit order per rank */
	int64_t line;	     /* source line (0: the reader's current line) */
	const char *name;    /* as printed */
	const char *phase;   /* fwd, bwd, grad, param, optim, loss, metric, eval (NULL: loss) */
	const char *dtype;   /* dtype of the underlying value (fp32 for losses), NULL unknown */
	const char *shape;   /* JSON array text, NULL for scalars */
	const char *text;    /* printed value, NULL if none */
	size_t text_len;     /* 0: strlen(text) */
	enum prec_kind prec; /* how to read text */
	int prec_n;	     /* decimals for PREC_DEC */
	int has_bits;	     /* bits are exact in dtype (ATF hex, md5-verified values) */
	uint64_t bits;
	const char *digest, *digest_alg;
	const char *stats, *head, *extra; /* JSON texts */
	const void *payload;
	size_t payload_len;
	const char *missing; /* the key is present but its value is not (why) */
	const char *call;    /* the op/module invocation this record belongs to (NULL: not linked); records
			      * of one call share it within (rank, step, micro) */
	const char *io;	     /* "in" or "out": which side of the call (NULL with call NULL) */
};

struct ingest_opts {
	int micro_batches; /* --micro-batches N for order-derived anchors (default 1) */
	char order[8][32]; /* --order main,mtp: print order of anchor losses per micro-batch */
	int n_order;
	int quiet;
	int occurrences; /* --occurrences: a key another source of the run holds is a further occurrence,
			  * not the same record (kept once) or a disagreement (an error) */
};

struct ingest;
struct align_err;

int ingest_emit(struct ingest *ig, const struct rec *r);
/* A restart re-ran steps >= from_step on rank: earlier records there become superseded. */
int ingest_supersede(struct ingest *ig, int64_t rank, int64_t from_step);
/* Print "warning: file:line: what" and keep it in source.warnings. */
void ingest_warn(struct ingest *ig, int64_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fail with "file:line: what" (the message goes to the command's error record); returns ALIGN_EINPUT.
 * line 0: the reader's current line. */
int ingest_error(struct ingest *ig, int64_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Merge a JSON object (environment, modes, world size, ...) into the run header. */
int ingest_set_header(struct ingest *ig, const char *json_text);
/* Rank derived from the file name (workerlog.N, rankN, _RANK_N_, globalrank-N), or -1. */
int64_t ingest_file_rank(const struct ingest *ig);
const char *ingest_path(const struct ingest *ig);
const struct ingest_opts *ingest_get_opts(const struct ingest *ig);
/* The error record a parser's failures other than ingest_error go to (fail_internal(ingest_err(ig), ...)). */
struct align_err *ingest_err(struct ingest *ig);
int64_t ingest_current_line(const struct ingest *ig);

/* What a parser provides: detect scores the first bytes (0 = not this format, 100 = certain); parse
 * reads the whole file (parser contract above). */
struct ingest_parser {
	int (*detect)(const char *head, size_t len, const char *path);
	int (*parse)(struct ingest *ig, struct reader *r);
	/* Optional: the run name and framework the file's first bytes name (an ATF header's "run" and
	 * "framework"), "" each when it names none. Called before the run is created: the name is the
	 * default of --as, the framework that of the run's framework column (else the format's). Returns
	 * an exit-code class (message through ingest_error). */
	int (*names)(struct ingest *ig, const char *head, size_t len, char *run, size_t run_size, char *framework,
		     size_t framework_size);
};

/* How a format reads its file (formats.def column "reads"). */
enum ingest_reads {
	INGEST_READS_LINES, /* line by line: any size */
	INGEST_READS_WHOLE, /* whole (reader_slurp): at most READER_MAX_SLURP bytes */
};

/* A row of formats.def. */
struct ingest_format {
	const char *name;		    /* --format NAME, source.format, run.format */
	const char *framework;		    /* run.framework */
	enum ingest_reads reads;	    /* whole-file formats are size-checked before any work */
	const char *summary;		    /* the --list-formats line */
	const char *expects;		    /* what a file that yields no record lacks (the error says it) */
	const struct ingest_parser *parser; /* ingest-<id>.c */
};

#define FORMAT(id, name, framework, reads, summary, expects) extern const struct ingest_parser ingest_parser_##id;
#include "formats.def"
#undef FORMAT

/* The formats in formats.def order. */
const struct ingest_format *ingest_formats(size_t *count);
/* The format called name, or NULL. */
const struct ingest_format *ingest_format_find(const char *name);
/* Print "name framework summary" per format (align ingest --list-formats). */
void ingest_formats_print(FILE *out);

/* Ingest files into run `as` (NULL: each file into a run named after it), each file in its own
 * transaction; returns the worst exit-code class of the files. Content the run already holds (same
 * sha256) is a no-op; the same content into another run is ingested there. A file that yields no record
 * is an input error (nothing of it written). A failing file's message goes to e; when
 * more files follow, it is printed there and then (err_print) so that each failing file reports once
 * and e holds the last one for the caller. */
int ingest_files_err(sqlite3 *db, const char *db_path, const char *as, int append, const char *format,
		     const struct ingest_opts *opts, char **files, int n_files, struct align_err *e);
/* TRANSITIONAL (bisect): ingest_files_err(..., NULL): every message printed at once. */
int ingest_files(sqlite3 *db, const char *db_path, const char *as, int append, const char *format,
		 const struct ingest_opts *opts, char **files, int n_files);

#endif
