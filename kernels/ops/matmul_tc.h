/* matmul_tc.h: batch-invariant tensor-core matmul, a GPU-only framework-mimic implementation (what a
 * bf16 linear does on tensor cores), NOT a twin of the portable matmul op: its bits differ from the
 * C twin (tensor cores add products in their own order and precision). It is held instead to:
 *   - run-to-run determinism (no atomics, no split-K, fixed schedule),
 *   - batch invariance: row r of y = a[:M] @ b^T is bitwise the same for every M (one fixed block
 *     tiling and K order for every M; a row's tile position r % 128 never depends on M),
 *   - an fp64 reference within the bound of tests/gpu/test-matmul-tc.cu,
 *   - speed against cuBLAS (tests/gpu/bench-matmul.cu).
 *
 *   y[M,N] = a[M,K] (bf16) @ b[N,K]^T (bf16), fp32 accumulation, K ascending in tiles of 64 (columns
 *   past K zero-filled), stored as bf16 R(acc) (one round to nearest even: matmul_tc_fwd_cuda) or as
 *   the fp32 accumulator itself (matmul_tc_fwd_cuda_out with y_f32 = 1). Both come from the same
 *   accumulators: the fp32 output rounded once to bf16 is the bf16 output; both are batch invariant.
 *
 * Layout: row-major, K contiguous in a and b (torch Linear), device pointers, 16-byte aligned,
 * K a multiple of 8; any M >= 0, N >= 0. Algorithm and napkin maths: kernels/matmul_tc.cu.
 * The matmul op (kernels/ops/matmul.cu, MATMUL_IMPL=tc) stages operands that miss these requirements.
 * Returns 0, 2 (bad arguments; message on stderr) or 3 (CUDA error with call, file and line).
 * Asynchronous on `stream`: read y only after synchronizing `stream` (or from work queued on it); with a
 * cudaStreamNonBlocking stream a plain cudaMemcpy / cudaMemset (legacy default stream) is NOT ordered
 * with the kernel and sees a half-written y. C linkage.
 */
#ifndef ALIGN_MATMUL_TC_H
#define ALIGN_MATMUL_TC_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct matmul_tc_params {
	int64_t m; /* rows of a and y */
	int64_t n; /* rows of b, columns of y */
	int64_t k; /* shared dimension, a multiple of 8 */
};

int matmul_tc_fwd_cuda(const struct matmul_tc_params *p, const void *a, const void *b, void *y, cudaStream_t stream);
/* y_f32 = 0: the same as matmul_tc_fwd_cuda (y bf16); y_f32 = 1: y holds the fp32 accumulators */
int matmul_tc_fwd_cuda_out(const struct matmul_tc_params *p, int y_f32, const void *a, const void *b, void *y,
			   cudaStream_t stream);

/* Rows per block tile: M is cut into tiles of this many rows whatever M is. */
#define MATMUL_TC_BLOCK_M 128

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MATMUL_TC_H */
