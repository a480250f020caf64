/* paddle-legacy: the older PaddleNLP / ERNIE trainer layouts paddle-log reads (ingest-paddle-legacy.c). */
#ifndef ALIGN_PADDLE_LEGACY_H
#define ALIGN_PADDLE_LEGACY_H

#include "anchor.h"

/* A Trainer dict print wrapped over several lines, being joined. */
struct paddle_legacy {
	char *dict;
	size_t len, cap; /* len 0: none open */
	int64_t line;	 /* where it started */
	int lines;
};

/* "global step N, epoch: E, batch: B, loss: X, ..." (m without the logger prefix): returns 1 when m is
 * such a line (its records emitted, *rc the result), 0 when not. */
int paddle_legacy_step_line(struct ingest *ig, struct paddle_state *ps, const char *m, size_t n, int64_t line, int *rc);
/* "eval loss: X, acc: Y, ..." of the example scripts' evaluate() (m without the logger prefix), at the last
 * global step: returns 1 when m is one (records emitted, *rc the result), 0 when not. */
int paddle_legacy_eval_line(struct ingest *ig, struct paddle_state *ps, const char *m, size_t n, int64_t line, int *rc);
/* A line of a Trainer dict print "{'loss': ..., 'global_step': N, ...}" (a start, or the next line of an
 * open one): returns 1 when consumed (*rc the result), 0 when m is no part of one. */
int paddle_legacy_dict(struct ingest *ig, struct paddle_state *ps, struct paddle_legacy *pl, const char *m, size_t n,
		       int64_t line, int *rc);
/* 1 while a wrapped dict is open. */
int paddle_legacy_open(const struct paddle_legacy *pl);
void paddle_legacy_free(struct paddle_legacy *pl);

#endif
