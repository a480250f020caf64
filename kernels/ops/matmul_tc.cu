/* matmul_tc.cu: batch-invariant bf16 tensor-core matmul (API and contract in matmul_tc.h), a
 * GPU-only framework-mimic: y[M,N] = R(a[M,K] @ b[N,K]^T), bf16 in, fp32 accumulate, bf16 out (or the
 * fp32 accumulators themselves, matmul_tc_fwd_cuda_out).
 * Not bitwise equal to the portable C twin and never registered as the matmul op's twin.
 *
 * Why it is deterministic and batch invariant: one fixed block tile (128 x 256 x 64) for every M,
 * N and K; each output element is accumulated by exactly one warp, in registers, by a fixed
 * sequence of mma.sync m16n8k16 over k16 steps in ascending K (no split-K, no stream-K, no atomics);
 * the element's position inside its tile (row % 128, column % 256) and the mma fragment slot that
 * holds it depend only on (row, column), never on M or on the grid. Rows past M are loaded as
 * zeros and never stored; they meet valid rows only in the same mma instruction, which computes
 * each output element from its own row and column. So row r of A[:M] @ B is the same bits for every
 * M, and the same bits run to run (tests/gpu/test-matmul-tc.cu checks M in 1..8192).
 *
 * Algorithm (Ampere-style, runs on sm_80+; compiled for sm_90):
 *   - block 128 x 256, 8 warps in 2 (M) x 4 (N), each warp 64 x 64 = 4 x 8 mma tiles of 16 x 8,
 *     128 fp32 accumulators per thread;
 *   - K tile 64: a 128 x 64 A tile (16 KiB) and a 256 x 64 B tile (32 KiB) per stage, 4 stages
 *     (192 KiB dynamic shared memory) filled by cp.async.cg 16-byte copies (rows past M/N and
 *     columns past K zero-filled by a 0-byte source), wait_group(STAGES-2) + one __syncthreads
 *     per K tile, the copy of tile kt+3 issued before the math of tile kt;
 *   - shared rows are 128 bytes with the 16-byte chunk index XOR (row & 7): conflict-free
 *     ldmatrix.x4 for A (16 x 16) and B (two 8-column n tiles x 16 k) fragments;
 *   - epilogue: accumulators -> bf16 (round to nearest even) or kept fp32 -> a padded shared tile ->
 *     16-byte coalesced global stores (bf16 pitch 264 elements; fp32 pitch 264 floats: a half warp's
 *     float2 stores of rows g = 0..3, columns 2 t4 hit banks 8 g + 2 t4 (+1), all distinct);
 *   - grid: one CTA per output tile, grouped 8 tile rows at a time (tile rows of one group share
 *     B panels in L2).
 *
 * Napkin maths (H100 SXM): 2 M N K FLOPs; dense bf16 peak 989 TFLOP/s is reached only by wgmma
 * (sm_90a warpgroup MMA); the warp-level mma.sync path used here issues to the same tensor cores
 * but public microbenchmarks put its ceiling near 60-70 % of that peak. Per K tile a CTA moves
 * (128 + 256) x 64 x 2 = 48 KiB from L2/HBM for 2 x 128 x 256 x 64 = 4.2 MFLOP: 85 FLOP/byte of
 * L2 traffic, 6.8 TB/s of L2 bandwidth at 550 TFLOP/s, within the H100's L2 bandwidth; HBM traffic
 * is lower thanks to the grouped raster. Expected: 450-600 TFLOP/s at M >= 4096 on DeepSeek shapes,
 * i.e. ~0.6-0.8x cuBLAS (cuBLAS uses wgmma + TMA: 740-770 TFLOP/s, perf-anchors M1); the 0.85x goal
 * most likely needs a wgmma/TMA main loop. Small N or M (e.g. N = 1536: 6 tile columns)
 * lose to wave quantization: the tile is fixed by design. bench: tests/gpu/bench-matmul.cu.
 *
 * Requirements: K % 8 == 0 and a, b, y 16-byte aligned (cp.async 16-byte chunks); M, N any.
 * Without a GPU: compiled as C++ with tests/emu/cuda-emu.h (ALIGN_CUDA_EMU), the PTX wrappers
 * below become host emulations, so the fragment layouts, swizzle, pipeline and epilogue can be
 * checked against a binary64 reference on a CPU (not the tensor cores' rounding, not speed).
 */
#include <stdio.h>
#include <string.h>

#include "matmul_tc.h"
#include "numerics.h"

#define TC_BM MATMUL_TC_BLOCK_M
#define TC_BN 256
#define TC_BK 64
#define TC_STAGES 4
#define TC_THREADS 256
#define TC_GROUP_M 8
#define TC_A_BYTES (TC_BM * TC_BK * 2)
#define TC_B_BYTES (TC_BN * TC_BK * 2)
#define TC_STAGE_BYTES (TC_A_BYTES + TC_B_BYTES)
#define TC_SMEM_BYTES (TC_STAGES * TC_STAGE_BYTES)
#define TC_C_PITCH (TC_BN + 8)	 /* bf16 elements per row of the epilogue tile: conflict-free stores */
#define TC_C32_PITCH (TC_BN + 8) /* floats per row of the fp32 epilogue tile: conflict-free float2 stores */

#if TC_BM * TC_C_PITCH * 2 > TC_SMEM_BYTES || TC_BM * TC_C32_PITCH * 4 > TC_SMEM_BYTES
#error "the epilogue tile must fit in the pipeline's shared memory"
#endif

static int tc_fail(const char *call, cudaError_t e, const char *file, int line)
{
	fprintf(stderr, "error: %s failed: %s (%s) at %s:%d\n", call, cudaGetErrorString(e), cudaGetErrorName(e), file,
		line);
	return 3;
}

#define TC_TRY(call)                                                                                                   \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ != cudaSuccess)                                                                                 \
			return tc_fail(#call, e_, __FILE__, __LINE__);                                                 \
	} while (0)

static int tc_einval(const char *what)
{
	fprintf(stderr, "error: matmul_tc_fwd_cuda: %s\n", what);
	return 2;
}

/* ---- device side ---- */

#ifdef ALIGN_CUDA_EMU
/* Host emulation (tests/gpu/emu, fibers for threads) of the PTX used below, so that the kernel's
 * indexing, swizzle, fragment layouts, pipeline and epilogue can be checked without a GPU: shared
 * addresses are offsets from the block's dynamic shared memory, cp.async copies at once (a valid
 * schedule of an asynchronous copy followed by its wait), ldmatrix and mma are warp-collective
 * exchanges through shuffles implementing the PTX ISA fragment layouts. The emulated mma sums in
 * binary64 (its bits are not the tensor cores'). */
static inline unsigned char *tc_smem_base(void)
{
	return align_emu_cur()->smem;
}

__device__ __forceinline__ uint32_t tc_smem_addr(const void *p)
{
	return (uint32_t)((const unsigned char *)p - tc_smem_base());
}

__device__ __forceinline__ void tc_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
	memset(tc_smem_base() + dst, 0, 16);
	if (src_bytes)
		memcpy(tc_smem_base() + dst, src, (size_t)src_bytes);
}

__device__ __forceinline__ void tc_cp_async_commit(void)
{
}

template <int N> __device__ __forceinline__ void tc_cp_async_wait(void)
{
}

/* lane t gets, of matrix j (rows addressed by lanes 8j..8j+7), row t/4, the 32-bit pair at column 2 (t%4) */
__device__ __forceinline__ void tc_ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
	const int lane = (int)(threadIdx.x % 32);
	for (int j = 0; j < 4; j++) {
		uint32_t row = __shfl_sync(0xffffffffu, addr, 8 * j + lane / 4);
		memcpy(&r[j], tc_smem_base() + row + 4 * (lane % 4), 4);
	}
}

static inline float tc_lo(uint32_t v)
{
	return align_bf16_to_f32((align_bf16)(v & 0xffffu));
}

static inline float tc_hi(uint32_t v)
{
	return align_bf16_to_f32((align_bf16)(v >> 16));
}

/* m16n8k16 row.col: a0 (g, 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..); b0 (k 2t.., n g),
 * b1 (k 2t+8.., n g); c0, c1 (g, 2t, 2t+1), c2, c3 (g+8, 2t, 2t+1); g = lane / 4, t = lane % 4 */
__device__ __forceinline__ void tc_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	const int lane = (int)(threadIdx.x % 32), g = lane / 4, t = lane % 4;
	float A[2][16], B[2][16];
	for (int q = 0; q < 4; q++) {
		uint32_t v[4];
		for (int i = 0; i < 4; i++)
			v[i] = __shfl_sync(0xffffffffu, a[i], 4 * g + q);
		A[0][2 * q] = tc_lo(v[0]), A[0][2 * q + 1] = tc_hi(v[0]);
		A[1][2 * q] = tc_lo(v[1]), A[1][2 * q + 1] = tc_hi(v[1]);
		A[0][2 * q + 8] = tc_lo(v[2]), A[0][2 * q + 9] = tc_hi(v[2]);
		A[1][2 * q + 8] = tc_lo(v[3]), A[1][2 * q + 9] = tc_hi(v[3]);
		for (int cs = 0; cs < 2; cs++) {
			uint32_t w0 = __shfl_sync(0xffffffffu, b0, 4 * (2 * t + cs) + q);
			uint32_t w1 = __shfl_sync(0xffffffffu, b1, 4 * (2 * t + cs) + q);
			B[cs][2 * q] = tc_lo(w0), B[cs][2 * q + 1] = tc_hi(w0);
			B[cs][2 * q + 8] = tc_lo(w1), B[cs][2 * q + 9] = tc_hi(w1);
		}
	}
	for (int r = 0; r < 2; r++)
		for (int cs = 0; cs < 2; cs++) {
			double s = c[2 * r + cs];
			for (int k = 0; k < 16; k++)
				s += (double)A[r][k] * (double)B[cs][k];
			c[2 * r + cs] = (float)s;
		}
}
#else
__device__ __forceinline__ uint32_t tc_smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared; src_bytes 0 writes 16 zero bytes (src must still be a valid address) */
__device__ __forceinline__ void tc_cp_async16(uint32_t dst, const void *src, int src_bytes)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void tc_cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void tc_cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void tc_ldmatrix_x4(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr)
		     : "memory");
}

/* c += a (16 x 16, row) * b (16 x 8, col), bf16 inputs, fp32 accumulators */
__device__ __forceinline__ void tc_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
		     "{%8, %9}, {%0, %1, %2, %3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif /* ALIGN_CUDA_EMU */

/* byte offset of 16-byte chunk `ch` (0..7) of tile row `row` (128-byte rows, XOR swizzle) */
__device__ __forceinline__ uint32_t tc_swz(int row, int ch)
{
	return (uint32_t)(row * 128 + ((ch ^ (row & 7)) << 4));
}

/* Issue the copies of K tile kt into stage buffers sa / sb. */
__device__ __forceinline__ void tc_load_tile(uint32_t sa, uint32_t sb, const align_bf16 *a, const align_bf16 *b,
					     int64_t m, int64_t n, int64_t k, int64_t m0, int64_t n0, int kt, int tid)
{
	const int64_t k0 = (int64_t)kt * TC_BK;
#pragma unroll
	for (int i = 0; i < TC_BM * 8 / TC_THREADS; i++) {
		int idx = tid + i * TC_THREADS, row = idx >> 3, ch = idx & 7;
		int64_t gm = m0 + row, gk = k0 + ch * 8;
		bool ok = gm < m && gk < k;
		tc_cp_async16(sa + tc_swz(row, ch), ok ? (const void *)(a + gm * k + gk) : (const void *)a,
			      ok ? 16 : 0);
	}
#pragma unroll
	for (int i = 0; i < TC_BN * 8 / TC_THREADS; i++) {
		int idx = tid + i * TC_THREADS, row = idx >> 3, ch = idx & 7;
		int64_t gn = n0 + row, gk = k0 + ch * 8;
		bool ok = gn < n && gk < k;
		tc_cp_async16(sb + tc_swz(row, ch), ok ? (const void *)(b + gn * k + gk) : (const void *)b,
			      ok ? 16 : 0);
	}
}

/* The warp's 64 x 64 share of one staged K tile: 4 k16 steps x (4 x 8) mma. */
__device__ __forceinline__ void tc_compute_tile(float acc[4][8][4], uint32_t sa, uint32_t sb, int wm, int wn, int lane)
{
#pragma unroll
	for (int ks = 0; ks < TC_BK / 16; ks++) {
		uint32_t af[4][4], bf[8][2];
#pragma unroll
		for (int mi = 0; mi < 4; mi++) {
			/* lanes 0-15: rows 0-15 at k 0-7; lanes 16-31: rows 0-15 at k 8-15 -> a0..a3 */
			int row = wm * 64 + mi * 16 + (lane & 15), ch = ks * 2 + (lane >> 4);
			tc_ldmatrix_x4(af[mi], sa + tc_swz(row, ch));
		}
#pragma unroll
		for (int nj = 0; nj < 4; nj++) {
			/* matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) */
			int row = wn * 64 + nj * 16 + (lane & 7) + ((lane >> 4) << 3), ch = ks * 2 + ((lane >> 3) & 1);
			uint32_t r[4];
			tc_ldmatrix_x4(r, sb + tc_swz(row, ch));
			bf[2 * nj][0] = r[0];
			bf[2 * nj][1] = r[1];
			bf[2 * nj + 1][0] = r[2];
			bf[2 * nj + 1][1] = r[3];
		}
#pragma unroll
		for (int mi = 0; mi < 4; mi++)
#pragma unroll
			for (int ni = 0; ni < 8; ni++)
				tc_mma(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
	}
}

/* Accumulators -> bf16 tile in shared memory -> coalesced 16-byte stores (per element at edges). */
__device__ __forceinline__ void tc_store(float acc[4][8][4], unsigned char *smem, align_bf16 *y, int64_t m, int64_t n,
					 int64_t m0, int64_t n0, int wm, int wn, int lane, int tid)
{
	align_bf16 *sc = (align_bf16 *)smem;
	const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
	for (int mi = 0; mi < 4; mi++)
#pragma unroll
		for (int ni = 0; ni < 8; ni++) {
			int r = wm * 64 + mi * 16 + g, c = wn * 64 + ni * 8 + t4 * 2;
			sc[r * TC_C_PITCH + c] = align_f32_to_bf16(acc[mi][ni][0]);
			sc[r * TC_C_PITCH + c + 1] = align_f32_to_bf16(acc[mi][ni][1]);
			sc[(r + 8) * TC_C_PITCH + c] = align_f32_to_bf16(acc[mi][ni][2]);
			sc[(r + 8) * TC_C_PITCH + c + 1] = align_f32_to_bf16(acc[mi][ni][3]);
		}
	__syncthreads();
	const bool vec = n % 8 == 0;
#pragma unroll 4
	for (int i = 0; i < TC_BM * TC_BN / 8 / TC_THREADS; i++) {
		int idx = tid + i * TC_THREADS, row = idx / (TC_BN / 8), ch = idx % (TC_BN / 8);
		int64_t gm = m0 + row, gn = n0 + ch * 8;
		if (gm >= m || gn >= n)
			continue;
		const align_bf16 *src = &sc[row * TC_C_PITCH + ch * 8];
		if (vec) {
			*(uint4 *)(y + gm * n + gn) = *(const uint4 *)src;
		} else {
			for (int e = 0; e < 8 && gn + e < n; e++)
				y[gm * n + gn + e] = src[e];
		}
	}
}

/* The same for fp32 output: the accumulators themselves, 4 floats (16 bytes) per store when n % 4 == 0. */
__device__ __forceinline__ void tc_store_f32(float acc[4][8][4], unsigned char *smem, float *y, int64_t m, int64_t n,
					     int64_t m0, int64_t n0, int wm, int wn, int lane, int tid)
{
	float *sc = (float *)smem;
	const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
	for (int mi = 0; mi < 4; mi++)
#pragma unroll
		for (int ni = 0; ni < 8; ni++) {
			int r = wm * 64 + mi * 16 + g, c = wn * 64 + ni * 8 + t4 * 2;
			float2 lo = {acc[mi][ni][0], acc[mi][ni][1]}, hi = {acc[mi][ni][2], acc[mi][ni][3]};
			*(float2 *)&sc[r * TC_C32_PITCH + c] = lo;
			*(float2 *)&sc[(r + 8) * TC_C32_PITCH + c] = hi;
		}
	__syncthreads();
	const bool vec = n % 4 == 0;
#pragma unroll 4
	for (int i = 0; i < TC_BM * TC_BN / 4 / TC_THREADS; i++) {
		int idx = tid + i * TC_THREADS, row = idx / (TC_BN / 4), ch = idx % (TC_BN / 4);
		int64_t gm = m0 + row, gn = n0 + ch * 4;
		if (gm >= m || gn >= n)
			continue;
		const float *src = &sc[row * TC_C32_PITCH + ch * 4];
		if (vec) {
			*(float4 *)(y + gm * n + gn) = *(const float4 *)src;
		} else {
			for (int e = 0; e < 4 && gn + e < n; e++)
				y[gm * n + gn + e] = src[e];
		}
	}
}

/* Y_F32: store the fp32 accumulators (tc_store_f32) instead of their bf16 rounding (tc_store). */
template <bool Y_F32>
__global__ void __launch_bounds__(TC_THREADS, 1)
	matmul_tc_kernel(const align_bf16 *__restrict__ a, const align_bf16 *__restrict__ b, void *__restrict__ y,
			 int64_t m, int64_t n, int64_t k, int tiles_m, int tiles_n)
{
#ifdef ALIGN_CUDA_EMU
	unsigned char *tc_smem = tc_smem_base();
#else
	extern __shared__ __align__(128) unsigned char tc_smem[];
#endif
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wm = warp >> 2, wn = warp & 3;

	/* grouped raster: TC_GROUP_M tile rows per group, tile columns outer within a group */
	const int pid = blockIdx.x, per_group = TC_GROUP_M * tiles_n;
	const int first_m = (pid / per_group) * TC_GROUP_M;
	const int gsz = tiles_m - first_m < TC_GROUP_M ? tiles_m - first_m : TC_GROUP_M;
	const int tm = first_m + (pid % per_group) % gsz, tn = (pid % per_group) / gsz;
	const int64_t m0 = (int64_t)tm * TC_BM, n0 = (int64_t)tn * TC_BN;

	const uint32_t s0 = tc_smem_addr(tc_smem);
	const int KT = (int)((k + TC_BK - 1) / TC_BK);

	float acc[4][8][4];
#pragma unroll
	for (int mi = 0; mi < 4; mi++)
#pragma unroll
		for (int ni = 0; ni < 8; ni++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[mi][ni][e] = 0.0f;

#pragma unroll
	for (int s = 0; s < TC_STAGES - 1; s++) {
		if (s < KT)
			tc_load_tile(s0 + s * TC_STAGE_BYTES, s0 + s * TC_STAGE_BYTES + TC_A_BYTES, a, b, m, n, k, m0,
				     n0, s, tid);
		tc_cp_async_commit();
	}
	for (int kt = 0; kt < KT; kt++) {
		tc_cp_async_wait<TC_STAGES - 2>(); /* tile kt has landed (for this thread's copies) */
		__syncthreads();		   /* ... for every thread's; stage (kt-1) % S is free */
		const int nk = kt + TC_STAGES - 1;
		if (nk < KT) {
			const uint32_t st = s0 + (nk % TC_STAGES) * TC_STAGE_BYTES;
			tc_load_tile(st, st + TC_A_BYTES, a, b, m, n, k, m0, n0, nk, tid);
		}
		tc_cp_async_commit(); /* possibly empty: keeps the group count in step */
		const uint32_t sc = s0 + (kt % TC_STAGES) * TC_STAGE_BYTES;
		tc_compute_tile(acc, sc, sc + TC_A_BYTES, wm, wn, lane);
	}
	tc_cp_async_wait<0>();
	__syncthreads(); /* every warp is done with the pipeline buffers before they hold the output */
	if (Y_F32)
		tc_store_f32(acc, tc_smem, (float *)y, m, n, m0, n0, wm, wn, lane, tid);
	else
		tc_store(acc, tc_smem, (align_bf16 *)y, m, n, m0, n0, wm, wn, lane, tid);
}

/* ---- host side ---- */

extern "C" int matmul_tc_fwd_cuda_out(const struct matmul_tc_params *p, int y_f32, const void *a, const void *b,
				      void *y, cudaStream_t stream)
{
	if (!p)
		return tc_einval("no parameters");
	if (p->m < 0 || p->n < 0 || p->k < 0)
		return tc_einval("negative size");
	if (p->k % 8)
		return tc_einval("k must be a multiple of 8");
	if (y_f32 != 0 && y_f32 != 1)
		return tc_einval("y_f32 must be 0 or 1");
	if (p->m == 0 || p->n == 0)
		return 0;
	if (!a || !b || !y)
		return tc_einval("a, b or y is NULL");
	if ((uintptr_t)a % 16 || (uintptr_t)b % 16 || (uintptr_t)y % 16)
		return tc_einval("a, b and y must be 16-byte aligned");
	int64_t tiles_m = (p->m + TC_BM - 1) / TC_BM, tiles_n = (p->n + TC_BN - 1) / TC_BN;
	if (tiles_m * tiles_n > 0x7fffffff || p->k / TC_BK > 0x7ffffffe)
		return tc_einval("too large for one grid");
	void (*kern)(const align_bf16 *, const align_bf16 *, void *, int64_t, int64_t, int64_t, int, int) =
		y_f32 ? matmul_tc_kernel<true> : matmul_tc_kernel<false>;
	TC_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, TC_SMEM_BYTES));
#ifdef ALIGN_CUDA_EMU
	align_emu_launch(kern, (unsigned)(tiles_m * tiles_n), TC_THREADS, TC_SMEM_BYTES, stream, (const align_bf16 *)a,
			 (const align_bf16 *)b, y, p->m, p->n, p->k, (int)tiles_m, (int)tiles_n);
#else
	kern<<<(unsigned)(tiles_m * tiles_n), TC_THREADS, TC_SMEM_BYTES, stream>>>(
		(const align_bf16 *)a, (const align_bf16 *)b, y, p->m, p->n, p->k, (int)tiles_m, (int)tiles_n);
#endif
	TC_TRY(cudaGetLastError()); /* the launch of matmul_tc_kernel */
	return 0;
}

extern "C" int matmul_tc_fwd_cuda(const struct matmul_tc_params *p, const void *a, const void *b, void *y,
				  cudaStream_t stream)
{
	return matmul_tc_fwd_cuda_out(p, 0, a, b, y, stream);
}
