/* run-trace: the ATF v1 trace that `align run` writes: a header with the op, device, implementation,
 * dims, seed, every resolved numeric mode and the provenance of the run (align_commit: the source tree
 * at build time; device: "cpu" or the GPU's name; with CUDA driver_version, cuda_runtime_version and the
 * cublas_version / cublaslt_version of a vendor GEMM), then one record per input and output tensor per
 * step (xxh3t64 digest, dtype, shape, first elements). One rank of a collective (align run --ranks) writes
 * its rank and world size, nccl_version and nccl_library, and nccl_set (variables align set itself); every
 * trace records the NCCL_* variables in force (nccl_env). Written to a temp file and renamed at close.
 * Failures set their message in the error record given to run_trace_open. */
#ifndef ALIGN_RUN_TRACE_H
#define ALIGN_RUN_TRACE_H

#include "dev.h"
#include "ops.h"

#include <stdio.h>

struct run_trace {
	FILE *f;	       /* the temp file while open, else NULL */
	char path[4096];       /* where it is renamed at close */
	char tmp[4200];	       /* <path>.tmp.<pid> */
	long long seq;	       /* the next record's seq */
	int rank;	       /* the records' rank (the header's) */
	struct align_err *err; /* where failures put their message */
};

/* What the header says about the run. */
struct run_trace_head {
	const char *op;		     /* the op or block name */
	const char *impl;	     /* "c11-twin" or "cuda-twin" */
	const struct align_modes *m; /* the resolved modes */
	const struct align_dims *d;  /* dims (all zero for a block) */
	unsigned long long seed;     /* RNG seed of the inputs */
	int steps;		     /* --steps */
	int variant;		     /* params_variant index */
	const struct align_dev *dev; /* the open device (--device cuda), NULL on the CPU */
	int rank, world_size;	     /* one rank of a collective (align run --ranks); 0, 0: one process */
	int nccl_version;	     /* ncclGetVersion (22809 = 2.28.9) when NCCL ran, else 0 */
	const char *nccl_library;    /* the libnccl that was loaded, NULL when none */
	const char *nccl_set;	     /* NCCL variables align set itself ("NCCL_NVLS_ENABLE"), NULL: none */
};

/* The ATF dtype name of a kernel tensor dtype (fp32, bf16, int32). */
const char *run_trace_dtype(int dtype);
/* Open path and write the header; a status. */
int run_trace_open(struct run_trace *t, const char *path, const struct run_trace_head *h, struct align_err *err);
/* One tensor record: phase "input" or "fwd". */
int run_trace_tensor(struct run_trace *t, const char *op, int step, const char *phase, const struct align_tensor *x);
/* Flush, close and rename into place (ok != 0), or remove the temp file. */
int run_trace_close(struct run_trace *t, int ok);

#endif
