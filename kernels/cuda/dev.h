/* dev.h: the device context, persistent for the process: one stream, the device's properties queried
 * once, cuBLAS / cuBLASLt handles created on first use, a scratch workspace and a pool of tensor
 * allocations reused across ops and steps, and room for an NCCL communicator. Made once by its owner
 * (the harness's align_ctx, a test, a benchmark) and passed to every CUDA twin instead of a stream.
 *
 * Plain C view: no CUDA header is needed to hold one (handles are void *), so C code can own it;
 * dev.cu implements it with the CUDA runtime. Every failure sets the message in *err (status.h) and
 * returns ALIGN_ERR_INTERNAL (a CUDA call: the call, its error name and file:line).
 *
 * Ordering: everything runs on d->stream. align_dev_scratch and align_dev_alloc hand out memory that
 * later work on the same stream may reuse; growing the workspace synchronises the stream first, so
 * a buffer is never freed under a kernel that still reads it.
 */
#ifndef ALIGN_DEV_H
#define ALIGN_DEV_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ALIGN_DEV_POOL 64 /* tensor allocations the pool keeps */

struct align_dev_block {
	void *p;      /* device memory */
	size_t bytes; /* its size */
	int used;     /* handed out since the last align_dev_release_all */
};

struct align_dev {
	int ordinal;		 /* CUDA device number */
	char name[256];		 /* cudaDeviceProp.name */
	int sm_count;		 /* multiprocessors */
	int cc_major, cc_minor;	 /* compute capability */
	int max_smem_optin;	 /* cudaDevAttrMaxSharedMemoryPerBlockOptin, bytes */
	int driver_version;	 /* cudaDriverGetVersion: 13000 = 13.0 */
	int runtime_version;	 /* cudaRuntimeGetVersion */
	size_t total_mem;	 /* bytes */
	void *stream;		 /* cudaStream_t: the one stream of the process */
	void *cublas;		 /* cublasHandle_t, NULL until align_dev_cublas */
	void *cublaslt;		 /* cublasLtHandle_t, NULL until align_dev_cublaslt */
	int cublas_version;	 /* cublasGetVersion, 0 until cuBLAS ran */
	size_t cublaslt_version; /* cublasLtGetVersion, 0 until cuBLASLt ran */
	void *scratch;		 /* the shared workspace */
	size_t scratch_bytes;	 /* its size */
	struct align_dev_block pool[ALIGN_DEV_POOL];
	int n_pool;	       /* blocks in pool */
	void *nccl_comm;       /* ncclComm_t for the collectives; NULL until they open one */
	struct align_err *err; /* where failures put their message */
};

/* 1 when the CUDA runtime sees at least one device (no message) */
int align_dev_available(void);
/* Open device ordinal: properties, versions, one non-blocking stream. */
int align_dev_open(struct align_dev *d, int ordinal, struct align_err *err);
/* Free the pool, the workspace, the handles and the stream. Safe on a zeroed struct. */
void align_dev_close(struct align_dev *d);
/* Device memory of at least bytes from the pool (reuses a free block that fits, else allocates). */
int align_dev_alloc(struct align_dev *d, size_t bytes, void **p);
/* Every pool block back to free (the memory is kept for the next step). */
void align_dev_release_all(struct align_dev *d);
/* The shared workspace, at least bytes; valid until the next call that grows it. */
int align_dev_scratch(struct align_dev *d, size_t bytes, void **p);
/* The handles, created once (cublasSetStream to d->stream); the versions are recorded. */
int align_dev_cublas(struct align_dev *d, void **handle);
int align_dev_cublaslt(struct align_dev *d, void **handle);
/* Tell compute-sanitizer's initcheck that [p, p + bytes) is written by the work queued on d->stream so far.
 * For buffers that only cuBLAS / cuBLASLt wrote: initcheck does not see those kernels' stores (on sm90 the
 * nvjet kernels store through TMA) and reports every later read of their output as uninitialised
 * (tests/gpu/initcheck-cublas.sh shows it on a standalone cublasGemmEx / cublasLtMatmul, and that the GEMM
 * wrote every byte). Through NVTX's memory API (nvtxMemCudaMarkInitialized): a no-op without a tool
 * attached, and it changes no data. Call it only on what a library call was documented to write. */
void align_dev_mark_written(struct align_dev *d, const void *p, size_t bytes);
/* Wait for d->stream; a failure of earlier asynchronous work is reported here. */
int align_dev_sync(struct align_dev *d);
/* A CUDA runtime call failed: "call failed: <string> (<name>) at file:line", status 3. */
int align_dev_fail(struct align_dev *d, const char *call, int cuda_error, const char *file, int line);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_DEV_H */
