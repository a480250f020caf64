/* run-nccl: NCCL for `align run OP --ranks N` (run-ranks.c) and bench-coll: the library loaded at run time
 * (dlopen "libnccl.so.2", so align starts and runs everything else without NCCL), the communicator of one
 * rank (its GPU, NCCL's unique id exchanged through a file), and one collective on that rank's row under
 * ALIGN_COLL_IMPL=nccl (ncclAllReduce / ncclReduceScatter / ncclAllGather) or fixed (coll.h: an all-to-all
 * of NCCL point-to-point sends, the rank-order sum coll_sum_rows_cuda, an ncclAllGather). Compiled only
 * when the build has CUDA (run-nccl.cu); plain C view. Every failure sets its message in err. */
#ifndef ALIGN_RUN_NCCL_H
#define ALIGN_RUN_NCCL_H

#include <stdint.h>

#include "coll.h"
#include "dev.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUN_NCCL_NSYM 12

struct run_nccl {
	void *lib;		  /* dlopen handle, NULL until run_nccl_load */
	char path[512];		  /* the library that was loaded (dlinfo's path, else the name asked for) */
	int version;		  /* ncclGetVersion: 22809 = 2.28.9 */
	void *sym[RUN_NCCL_NSYM]; /* the NCCL functions (run-nccl.cu names them) */
	void *comm;		  /* ncclComm_t after run_nccl_init */
	int rank, nranks;	  /* this process's place in the communicator */
	struct align_err *err;	  /* where failures put their message */
};

/* Load libnccl.so.2 (the loader's search path: LD_LIBRARY_PATH, then the CUDA toolkit's lib and lib64)
 * and its functions; n->version. ALIGN_ERR_UNSUPPORTED with the loader's message when it is missing. */
int run_nccl_load(struct run_nccl *n, struct align_err *err);
/* Open CUDA device `device` into d (align_dev_open), exchange NCCL's unique id through id_path (rank 0
 * calls ncclGetUniqueId and creates the file, refusing one that exists; the others wait for it, at most
 * wait_s seconds), ncclCommInitRank, and rank 0 removes the file once every rank has joined.
 * d->nccl_comm = n->comm. */
int run_nccl_init(struct run_nccl *n, struct align_dev *d, int device, int rank, int nranks, const char *id_path,
		  double wait_s);
/* Bytes of device scratch run_nccl_coll_dev needs for c (the fixed path's all-to-all and gather buffers). */
size_t run_nccl_scratch_bytes(const struct coll_cfg *c);
/* This rank's part of the collective c (c->N = nranks; c->impl FIXED or NCCL) on device buffers of
 * d->stream: x = the rank's row (c->in_cols elements), y = its result (c->out_cols), scratch of
 * run_nccl_scratch_bytes. Enqueued only (no synchronisation). */
int run_nccl_coll_dev(struct run_nccl *n, struct align_dev *d, const struct coll_cfg *c, const void *x, void *y,
		      void *scratch);
/* The same from host rows: copy in, run, wait, copy out (d's pool, released afterwards). */
int run_nccl_coll(struct run_nccl *n, struct align_dev *d, const struct coll_cfg *c, const void *x_row, void *y_row);
/* Destroy the communicator, close d and the library (safe on zeroed structs). */
void run_nccl_close(struct run_nccl *n, struct align_dev *d);

#ifdef __cplusplus
}
#endif

#endif
