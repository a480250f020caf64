/* digest_cuda.h: the ATF v1 tensor digest "xxh3t64" (harness/core/digest.h has the definition) computed
 * on a CUDA device, bit-identical to the CPU's digest_xxh3t64. C linkage; include from C or CUDA.
 * The algorithm, its napkin maths and the launch layout are at the top of kernels/cuda/digest.cu.
 *
 * All functions return 0 on success, ALIGN_DIGEST_CUDA_EINVAL for bad arguments or
 * ALIGN_DIGEST_CUDA_ECUDA when a CUDA call fails; one message on stderr names the failing call,
 * file and line. The input may have any alignment (16-byte aligned input takes the fastest loads).
 *
 * Test: tests/gpu/test-digest-cuda.cu; bandwidth: tests/gpu/bench-digest.cu. */
#ifndef ALIGN_DIGEST_CUDA_H
#define ALIGN_DIGEST_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* cudaStream_t exactly as the CUDA runtime declares it (driver_types.h; an identical typedef may be
 * repeated in C11 and C++), so that C code calling these functions needs no CUDA header. */
typedef struct CUstream_st *cudaStream_t;

#define ALIGN_DIGEST_CUDA_EINVAL 2 /* same value as ALIGN_EINPUT */
#define ALIGN_DIGEST_CUDA_ECUDA 3  /* same value as ALIGN_EINTERNAL */

#ifdef __cplusplus
extern "C" {
#endif

/* Digest of the `bytes` bytes at device_ptr, written to *digest_out (host memory). Enqueues the work
 * on `stream` with a stream-ordered workspace (cudaMallocAsync / cudaFreeAsync) and waits for the
 * stream before returning. bytes == 0 needs no device work (device_ptr may then be NULL).
 * The allocation costs 0.1-0.24 ms on an H100 with the default memory pool (7-14% of a 4 GiB digest);
 * callers that hash repeatedly should keep a workspace and call align_digest_cuda_ws. */
int align_digest_cuda(const void *device_ptr, size_t bytes, uint64_t *digest_out, cudaStream_t stream);

/* Device workspace bytes that align_digest_cuda_ws needs for `bytes` input bytes. */
size_t align_digest_cuda_workspace_bytes(size_t bytes);

/* As align_digest_cuda, with a caller-provided device workspace of at least
 * align_digest_cuda_workspace_bytes(bytes) bytes, 16-byte aligned (no allocation in the call). */
int align_digest_cuda_ws(const void *device_ptr, size_t bytes, void *device_workspace, uint64_t *digest_out,
			 cudaStream_t stream);

/* Leaf digests only: device_leaves[i] = XXH3_64bits(leaf i) for the ceil(bytes / 65536) leaves, as
 * host-order uint64_t in device memory. Asynchronous on `stream` (nothing is waited for). */
int align_digest_leaves_cuda(const void *device_ptr, size_t bytes, uint64_t *device_leaves, cudaStream_t stream);

/* Inputs of fewer leaves than `leaves` take the split leaf kernel (64 threads a leaf; default: every
 * input), the others one group of 4 threads a leaf; the bits are the same. Returns the previous value.
 * For tests and benchmarks (not thread-safe: set it before launching). */
uint64_t align_digest_cuda_set_split_below(uint64_t leaves);

#ifdef __cplusplus
}
#endif

#endif
