/* matmul_cuda.h: the portable (bitwise == C twin) tiled GEMM on a CUDA device, shared by the matmul
 * op (kernels/ops/matmul.cu) and the mapping GEMMs of mhc_pre / mhc_head (kernels/mhc_*.cu).
 *
 *   y[i, j] = dot(opd_a(a[i, :]), opd_b(b[j, :]))   i < m, j < n, over k = 0..K-1
 *
 * with the dot in the order of `accum` (ALIGN_MATMUL_ACCUM_*) and `fma`, exactly matmul_dot of
 * kernels/ops/matmul.h (the contract and its proof of equality are at the top of kernels/ops/matmul.cu).
 * a and b are row-major with their K elements contiguous (torch Linear layout), f32 or bf16; y is
 * row-major f32 or bf16 (one rounding R(.) of the binary32 result). Device pointers.
 * Every tile configuration gives the same bits; `tile` only picks the speed.
 * This is the portable engine only (MATMUL_IMPL=portable). The matmul op's GPU-only engines, tc and
 * cublas, are reached through matmul_fwd_cuda (kernels/ops/matmul.cu; semantics in matmul.h "Engines"), never
 * from here: the router and mHC GEMMs always run this one.
 *
 * NaN results carry the host's NaN bits (nan_host.h): NaN is sticky through +, * and fmaf, so an
 * output is NaN exactly when some step produced one; only then is that element recomputed by the
 * reference dot (matmul_dev.cuh), which takes every step through nan_host.h. Other outputs never
 * pay for it.
 *
 * Launch knobs of the matmul op (struct align_launch) -> tile: block 0 = by shape (LARGE for
 * T F >= 2^20, else SMALL); block >= 256 -> LARGE (256 threads); 128..255 -> SMALL (128 threads);
 * 1..127 -> 64 threads: SKINNY when rows_per_block is 0 or <= 16, NARROW when it is larger (the
 * tile height nearest to it). grid_cap caps the grid (CTAs then loop over tiles). serial = 1 runs
 * the reference path: one thread per output row (launch->block threads per CTA, 128 when 0,
 * at most 1024) computing each element with the reference dot, the C twin's loops as written.
 *
 * Returns 0, ALIGN_ERR_INPUT (2: bad sizes or arguments) or ALIGN_ERR_INTERNAL (3: a CUDA call
 * failed; one message on stderr names the call, file and line; ops_cuda.h). Asynchronous on
 * `stream`.
 */
#ifndef ALIGN_MATMUL_CUDA_H
#define ALIGN_MATMUL_CUDA_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum matmul_cuda_tile {
	MATMUL_TILE_LARGE,  /* 128 x 128 (seq) or 128 x 64 (split16, fp64) blocks: big GEMMs */
	MATMUL_TILE_SMALL,  /* 32 x 32 blocks, BK 16: many blocks for small shapes */
	MATMUL_TILE_SKINNY, /* 16 x 32 blocks, BK 32, 2 x 4 per thread: n <= 32 (mhc_pre mapping) */
	MATMUL_TILE_NARROW, /* 128 x 4 blocks, BK 16, 2 x 4 per thread: n <= 4 (mhc_head mapping) */
	MATMUL_TILE_COUNT
};

struct matmul_cuda_gemm {
	const void *a;	  /* m rows of lda elements (k used), f32 or bf16 */
	int a_bf16;	  /* 1: a holds bf16 bit patterns */
	int64_t lda;	  /* elements between rows of a (>= k) */
	const void *b;	  /* n rows of ldb elements */
	int b_bf16;	  /* 1: b holds bf16 */
	int64_t ldb;	  /* elements between rows of b (>= k) */
	void *y;	  /* m rows of ldy elements (n written) */
	int y_bf16;	  /* 1: store R(acc) as bf16, 0: store acc as f32 */
	int64_t ldy;	  /* elements between rows of y (>= n) */
	int64_t m, n, k;  /* sizes; k may be 0 (y = +0) */
	int opd_a;	  /* ALIGN_MATMUL_OPERAND_* applied to every a element as loaded */
	int opd_b;	  /* ALIGN_MATMUL_OPERAND_* applied to every b element as loaded */
	int accum;	  /* ALIGN_MATMUL_ACCUM_* */
	int fma;	  /* 1: fmaf(a, b, acc) from acc = +0; 0: acc = a0 b0, then acc + R(a b) */
	int tile;	  /* enum matmul_cuda_tile */
	int grid_cap;	  /* at most this many CTAs (0: one per tile); CTAs loop over the tiles */
	int serial_block; /* > 0: the reference path with this many threads per CTA; tile ignored */
};

int matmul_cuda_gemm_run(const struct matmul_cuda_gemm *g, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MATMUL_CUDA_H */
