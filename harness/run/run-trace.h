/* run-trace: the ATF v1 trace that `align run` writes: a header with the op, device, implementation,
 * dims, seed and every resolved numeric mode, then one record per input and output tensor per step
 * (xxh3t64 digest, dtype, shape, first elements). Written to a temp file and renamed at close. */
#ifndef ALIGN_RUN_TRACE_H
#define ALIGN_RUN_TRACE_H

#include "ops.h"

#include <stdio.h>

struct run_trace {
	FILE *f;
	char path[4096];
	char tmp[4200];
	long long seq;
};

/* The ATF dtype name of a kernel tensor dtype (fp32, bf16, int32). */
const char *run_trace_dtype(int dtype);
/* Open path and write the header; exit-code class. */
int run_trace_open(struct run_trace *t, const char *path, const char *op, const char *device, const char *impl,
                   const struct align_modes *m, const struct align_dims *d, unsigned long long seed, int steps,
                   int variant);
/* One tensor record: phase "input" or "fwd". */
int run_trace_tensor(struct run_trace *t, const char *op, int step, const char *phase, const struct align_tensor *x);
/* Flush, close and rename into place (ok != 0), or remove the temp file. */
int run_trace_close(struct run_trace *t, int ok);

#endif
