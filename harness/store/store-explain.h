/* store-explain: the SQL of `align explain --runs` (harness/explain/explain-runs.c): the tensor records
 * of one run whose names start with a prefix ("swiglu." for the op's tensors "swiglu.g", ...) and that
 * carry a payload, in execution order (rank, seq). */
#ifndef ALIGN_STORE_EXPLAIN_H
#define ALIGN_STORE_EXPLAIN_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

struct align_err;

/* One record; strings and the payload (zlib-compressed, as ingest stores it) are valid during the
 * callback only. */
struct store_explain_row {
	const char *name, *dtype, *shape; /* shape: JSON array text */
	const void *payload;
	size_t payload_len;
	int64_t rank, step, micro, occ, seq;
};

typedef int (*store_explain_fn)(void *u, const struct store_explain_row *row);

/* Every non-superseded record of run `run` named prefix + "." + anything, with a payload, in (rank, seq)
 * order. *found_run = 0 when the run does not exist (not an error; nothing is called). */
int store_explain_tensors(sqlite3 *db, const char *run, const char *prefix, store_explain_fn fn, void *u,
			  int *found_run, struct align_err *e);

#endif
