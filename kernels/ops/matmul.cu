/* matmul.cu: CUDA twin of the matmul op, y[T,F] = a[T,D] @ b[F,D]^T, bitwise equal to the C twin
 * (kernels/ops/matmul.c, contract in kernels/ops/matmul.h) in every mode of the portable engine
 * (MATMUL_IMPL=portable; the GPU-only engines tc, cublas, cublas_pinned are at the bottom); also the shared
 * portable GEMM (matmul_cuda.h) that the mapping GEMMs of mhc_pre / mhc_head run on.
 *
 * Why the bits equal the C twin's, element by element (C twin: matmul_dot over pa, pb):
 *   - operands: every element is loaded (bf16 -> f32 exactly, or f32), passed through the same
 *     ALIGN_HD matmul_operand() as the C twin (bf16 / tf32 / none), and staged in shared memory;
 *     each staged value is the C twin's pa[t*D+k] / pb[f*D+k].
 *   - one thread owns each output element for the whole K loop (a TM x TN micro-tile of them),
 *     walks k = 0, 1, ..., D-1 in order, one shared-memory K tile after the other, and never
 *     touches k >= D (the tail tile is cut at D, not zero-padded: acc + 0 would turn -0 into +0).
 *   - seq, FMA off: C does acc = a0*b0, then acc = acc + R(a_k*b_k). Here acc starts at -0 and
 *     does acc + R(a_k*b_k) for every k: -0 + x == x bit for bit for every x (x = +-0, NaN
 *     included), so after k = 0 both hold R(a0*b0). nvcc --fmad=false keeps mul and add apart.
 *   - seq, FMA on: acc = +0, acc = fmaf(a_k, b_k, acc): the C twin's loop (fmaf correctly rounded
 *     on both sides).
 *   - split16: c = ceil(D/16); when k reaches a multiple of c the running chunk sum `part` is
 *     folded, total = total + part (total starts at -0, so the first fold is total = part as in
 *     C's `first`), and part restarts; the last chunk is folded after the loop. Chunks are
 *     [jc, min(D, (j+1)c)), all non-empty: the C twin's partials in the C twin's order.
 *   - fp64: double acc from +0, acc = acc + (double)a*(double)b (products exact), one final
 *     rounding to float; MATMUL_FMA ignored, as in C.
 *   - D == 0: every order gives +0 in C; stored as +0 here.
 *   - output: ALIGN_HD align_f32_to_bf16 (round to nearest even) or the f32 itself.
 *   So the tile sizes, the grid and the number of rows T change nothing (batch invariance), and
 *   every tile configuration (enum matmul_cuda_tile) gives the same bits; tests compare them.
 *   NaN: the device returns 0x7fffffff for an invalid operation and drops payloads, x86 keeps the
 *   first NaN operand or returns 0xffc00000 (nan_host.h). NaN is sticky through +, * and fmaf,
 *   so an output is NaN exactly when some step was; those outputs (and only those) are
 *   recomputed after the tile by the reference dot (matmul_dev.cuh: matmul_dot with nan_host.h
 *   operators), which gives the host's NaN bits. Non-NaN outputs are the plain path's bits.
 *
 * Kernel (classic SGEMM): block tile BM x BN, K tile BK, each thread TM x TN outputs. Operands
 * are loaded 4 k at a time (float4 / 4 x bf16 when the row stride and pointer allow), rounded,
 * and stored transposed (k-major, padded against bank conflicts) into a double-buffered shared
 * tile; the next K tile is fetched into registers while the current one is consumed; one
 * __syncthreads per K tile. A full K tile without a split16 boundary runs unchecked; the tail
 * tile and tiles holding a boundary check k per step. CTAs loop over the tiles when the grid is
 * capped. Configurations (matmul_cuda.h maps the launch knobs onto them): LARGE 128x128x8 with
 * 8x8 per thread (256 threads) for seq, 128x64x8 with 8x4 for split16 (64 partial + 64 total
 * registers) and fp64 (64 doubles); SMALL 32x32x16, 4x2 (128 threads); SKINNY 16x32x32, 2x4 (64);
 * NARROW 128x4x16, 2x4 (64). The serial path (launch->serial) is one thread per output row
 * running the reference dot. Written for nvcc and for the host emulator (tests/gpu/emu:
 * dynamic shared memory through align_cuda_dyn_smem, launches through ALIGN_CUDA_LAUNCH).
 *
 * Napkin maths (H100 SXM, 132 SMs, ~1.98 GHz boost): FFMA/FMUL/FADD each issue at 128 lanes/clk
 * per SM, so the fp32 FMA peak is 132*128*2*1.98e9 = 66.9 TFLOP/s, and without FMA a
 * multiply-add takes two instructions: the mode's ceiling is half of that, 33.5 TFLOP/s
 * (FLOPs counted as 2 M N K in every mode). Per K step a LARGE thread does 64 multiply-adds
 * against 4 LDS.128 (8 + 8 operands), a 16:1 math:load ratio, so the kernel is math bound; the
 * operand traffic per block tile is (BM + BN) K elements for BM BN K multiply-adds (64 MACs per
 * loaded element at 128 x 128). fp64 runs at the H100's fp64 rate (1/2 of fp32 CUDA cores).
 * split16 at 8x4 per thread has a 10.7:1 ratio. Per 8-k tile a LARGE thread also fetches, rounds
 * and stores 8 + 8 operands (~10 % of its instructions next to 1024 FMUL/FADD). 2 CTAs of 256
 * threads per SM (128 registers). Expected: ~80-88 % of the mode's ceiling, i.e. ~40-44 % of the
 * FMA peak with FMA off (the 40 % goal sits at the edge of what FMA-off arithmetic allows) and
 * ~70-80 % of it with FMA on. tests/gpu/bench-matmul.cu measures both peaks on the device.
 *
 * GPU-only engines (MATMUL_IMPL=tc|cublas|cublas_pinned; semantics and refusals in matmul.h "Engines"): the bottom
 * of this file checks the modes, stages operands (element-wise passes: f32 -> bf16 rounding, bf16 ->
 * f32 widening, fp32 -> bf16 output rounding) into stream-ordered temporaries (cudaMallocAsync /
 * cudaFreeAsync on the op's stream, so every pass, the GEMM and the release are ordered on it) and
 * calls matmul_tc_fwd_cuda_out, cublasGemmEx or cublasLtMatmul with the pinned algorithm. None is a twin
 * of the C code; the emulator build (ALIGN_CUDA_EMU) refuses them with status 4. Check:
 * tests/gpu/test-matmul-impl.cu.
 *
 * Build: kernels/meson.build (nvcc --fmad=false --prec-div=true --prec-sqrt=true --ftz=false
 * -arch=sm_90; the op links libcublas and libcublasLt). Check: tests/gpu (the generic CUDA-vs-C driver over every
 * mode and launch configuration); speed: tests/gpu/bench-matmul.cu.
 */
#include <limits.h>
#include <stdio.h>

#include "matmul_cuda.h"
#include "matmul_dev.cuh"
#include "ops_cuda.h"
/* The GPU-only engines. The emulator (tests/gpu/emu) has no cuBLAS and refuses cublas (status 4); it
 * refuses tc too unless built with ALIGN_EMU_MATMUL_TC (then kernels/ops/matmul_tc.cu must be linked). */
#if !defined(ALIGN_CUDA_EMU) || defined(ALIGN_EMU_MATMUL_TC)
#define MM_HAVE_TC 1
#include "matmul_tc.h"
#endif
#ifndef ALIGN_CUDA_EMU
#define MM_HAVE_CUBLAS 1
#include <cublasLt.h>
#include <cublas_v2.h>
#endif

#define MM_PAD 4 /* floats of padding per shared row: conflict-free transposed stores, 16-byte rows */

/* kernel arguments (sizes checked to fit int by the launcher) */
struct mm_args {
	const void *a;
	const void *b;
	void *y;
	long long lda, ldb, ldy;
	int m, n, k;
	int a_bf16, b_bf16, y_bf16;
	int a_vec, b_vec; /* 1: rows may be read 4 elements at a time (stride and pointer aligned) */
	int opd_a, opd_b; /* enum matmul_operand */
	int chunk;	  /* split16: ceil(k / 16) */
};

template <int ACC> struct mm_acc_type {
	typedef float type;
};
template <> struct mm_acc_type<MATMUL_ACC_F64> {
	typedef double type;
};

static int mm_einval(const char *what)
{
	return ops_cuda_bad_input("matmul_cuda_gemm_run", what);
}

/* ---- device side ---- */

/* v[0..3] = row `row`, elements k..k+3 of p (f32 or bf16 as f32), +0 outside rows x K */
__device__ __forceinline__ void mm_load4(const void *p, int bf16, int vec, long long ld, int rows, int K, int row,
					 int k, float v[4])
{
	if (row < rows && vec && k + 4 <= K) {
		long long off = (long long)row * ld + k;
		if (bf16) {
			uint2 u = __ldg((const uint2 *)((const align_bf16 *)p + off));
			v[0] = align_bits_f32(u.x << 16);
			v[1] = align_bits_f32(u.x & 0xffff0000u);
			v[2] = align_bits_f32(u.y << 16);
			v[3] = align_bits_f32(u.y & 0xffff0000u);
		} else {
			float4 f = __ldg((const float4 *)((const float *)p + off));
			v[0] = f.x;
			v[1] = f.y;
			v[2] = f.z;
			v[3] = f.w;
		}
		return;
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float x = 0.0f;
		if (row < rows && k + i < K) {
			long long off = (long long)row * ld + k + i;
			x = bf16 ? align_bf16_to_f32(((const align_bf16 *)p)[off]) : ((const float *)p)[off];
		}
		v[i] = x;
	}
}

/* T consecutive floats from shared memory at p (16-byte aligned when T % 4 == 0, 8 when T % 2 == 0) */
template <int T> __device__ __forceinline__ void mm_read(const float *p, float v[T])
{
	if (T % 4 == 0) {
#pragma unroll
		for (int q = 0; q < T / 4; q++) {
			float4 f = *(const float4 *)(p + 4 * q);
			v[4 * q] = f.x;
			v[4 * q + 1] = f.y;
			v[4 * q + 2] = f.z;
			v[4 * q + 3] = f.w;
		}
	} else if (T % 2 == 0) {
#pragma unroll
		for (int q = 0; q < T / 2; q++) {
			float2 f = *(const float2 *)(p + 2 * q);
			v[2 * q] = f.x;
			v[2 * q + 1] = f.y;
		}
	} else {
#pragma unroll
		for (int q = 0; q < T; q++)
			v[q] = p[q];
	}
}

/* Fetch the ROWS x BK operand tile at (r0, k0) into registers: slot s = 4 consecutive k of one row. */
template <int ROWS, int BK, int NT, int PER>
__device__ __forceinline__ void mm_fetch(const void *p, int bf16, int vec, long long ld, int rows, int K, int r0,
					 int k0, int tid, float r[PER][4])
{
	constexpr int KQ = BK / 4, SLOTS = ROWS * KQ;
#pragma unroll
	for (int q = 0; q < PER; q++) {
		int s = tid + q * NT;
		if (SLOTS % NT == 0 || s < SLOTS)
			mm_load4(p, bf16, vec, ld, rows, K, r0 + s / KQ, k0 + 4 * (s % KQ), r[q]);
	}
}

/* Round the fetched values (matmul_operand, the C twin's function) and store them k-major. */
template <int ROWS, int BK, int NT, int PER>
__device__ __forceinline__ void mm_stage(float (*dst)[ROWS + MM_PAD], int opd, int tid, const float r[PER][4])
{
	constexpr int KQ = BK / 4, SLOTS = ROWS * KQ;
#pragma unroll
	for (int q = 0; q < PER; q++) {
		int s = tid + q * NT;
		if (SLOTS % NT == 0 || s < SLOTS) {
#pragma unroll
			for (int i = 0; i < 4; i++)
				dst[4 * (s % KQ) + i][s / KQ] = matmul_operand(r[q][i], opd);
		}
	}
}

/* the reference dot (matmul_dev.cuh) of output (row, col): host NaN bits */
__device__ MM_NOINLINE float mm_ref_at(const struct mm_args &g, int row, int col, int accum, int fma)
{
	const void *ar = g.a_bf16 ? (const void *)((const align_bf16 *)g.a + (long long)row * g.lda)
				  : (const void *)((const float *)g.a + (long long)row * g.lda);
	const void *br = g.b_bf16 ? (const void *)((const align_bf16 *)g.b + (long long)col * g.ldb)
				  : (const void *)((const float *)g.b + (long long)col * g.ldb);
	return mm_dot_ref(ar, g.a_bf16, br, g.b_bf16, g.k, g.opd_a, g.opd_b, accum, fma);
}

__device__ __forceinline__ void mm_store(const struct mm_args &g, int row, int col, float v)
{
	long long off = (long long)row * g.ldy + col;
	if (g.y_bf16)
		((align_bf16 *)g.y)[off] = align_f32_to_bf16(v);
	else
		((float *)g.y)[off] = v;
}

/* One k step of a thread's TM x TN micro-tile: as / bs point at the thread's operands of that k. */
template <int TM, int TN, int ACC, int FMA, typename acc_t>
__device__ __forceinline__ void mm_kstep(acc_t (&acc)[TM][TN], const float *as, const float *bs)
{
	float av[TM], bv[TN];
	mm_read<TM>(as, av);
	mm_read<TN>(bs, bv);
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++) {
			if (ACC == MATMUL_ACC_F64)
				acc[i][j] = acc[i][j] + (acc_t)((double)av[i] * (double)bv[j]);
			else if (FMA)
				acc[i][j] = (acc_t)fmaf(av[i], bv[j], (float)acc[i][j]);
			else
				acc[i][j] = acc[i][j] + (acc_t)(av[i] * bv[j]);
		}
}

/* One BM x BN output tile at (m0, n0) by the whole CTA. */
template <int BM, int BN, int BK, int TM, int TN, int ACC, int FMA>
__device__ __forceinline__ void mm_tile(const struct mm_args &g, int m0, int n0, float (*As)[BK][BM + MM_PAD],
					float (*Bs)[BK][BN + MM_PAD])
{
	constexpr int NTX = BN / TN, NT = (BM / TM) * NTX;
	constexpr int A_PER = (BM * BK / 4 + NT - 1) / NT, B_PER = (BN * BK / 4 + NT - 1) / NT;
	constexpr bool SPLIT = ACC == MATMUL_ACC_SPLIT16;
	constexpr int SM = SPLIT ? TM : 1, SN = SPLIT ? TN : 1;
	typedef typename mm_acc_type<ACC>::type acc_t;
	const int tid = threadIdx.x, tx = tid % NTX, ty = tid / NTX;
	/* -0 + x == x for every x: the FMA-off start; +0 is the fmaf start and the fp64 start */
	const acc_t init = (ACC == MATMUL_ACC_F64 || FMA) ? (acc_t)0.0f : (acc_t)-0.0f;
	acc_t acc[TM][TN];
	float tot[SM][SN];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = init;
#pragma unroll
	for (int i = 0; i < SM; i++)
#pragma unroll
		for (int j = 0; j < SN; j++)
			tot[i][j] = -0.0f;

	float ra[A_PER][4], rb[B_PER][4];
	const int KT = (g.k + BK - 1) / BK;
	int bnd = g.chunk; /* next split16 chunk boundary */
	if (KT > 0) {
		mm_fetch<BM, BK, NT, A_PER>(g.a, g.a_bf16, g.a_vec, g.lda, g.m, g.k, m0, 0, tid, ra);
		mm_fetch<BN, BK, NT, B_PER>(g.b, g.b_bf16, g.b_vec, g.ldb, g.n, g.k, n0, 0, tid, rb);
		mm_stage<BM, BK, NT, A_PER>(As[0], g.opd_a, tid, ra);
		mm_stage<BN, BK, NT, B_PER>(Bs[0], g.opd_b, tid, rb);
	}
	__syncthreads();
	for (int kt = 0; kt < KT; kt++) {
		const int cur = kt & 1, k0 = kt * BK;
		if (kt + 1 < KT) {
			mm_fetch<BM, BK, NT, A_PER>(g.a, g.a_bf16, g.a_vec, g.lda, g.m, g.k, m0, k0 + BK, tid, ra);
			mm_fetch<BN, BK, NT, B_PER>(g.b, g.b_bf16, g.b_vec, g.ldb, g.n, g.k, n0, k0 + BK, tid, rb);
		}
		const int kmax = g.k - k0 < BK ? g.k - k0 : BK;
		if (kmax == BK && (!SPLIT || bnd >= k0 + BK)) { /* a full tile without a chunk boundary */
#pragma unroll
			for (int kk = 0; kk < BK; kk++)
				mm_kstep<TM, TN, ACC, FMA>(acc, &As[cur][kk][ty * TM], &Bs[cur][kk][tx * TN]);
		} else { /* the tail tile, or a split16 chunk ends inside this tile */
#pragma unroll
			for (int kk = 0; kk < BK; kk++) {
				if (kk < kmax) {
					if (SPLIT && k0 + kk == bnd) { /* close the chunk [bnd - c, bnd) */
#pragma unroll
						for (int i = 0; i < TM; i++)
#pragma unroll
							for (int j = 0; j < TN; j++) {
								tot[i % SM][j % SN] = tot[i % SM][j % SN] + (float)acc[i][j];
								acc[i][j] = init;
							}
						bnd += g.chunk;
					}
					mm_kstep<TM, TN, ACC, FMA>(acc, &As[cur][kk][ty * TM], &Bs[cur][kk][tx * TN]);
				}
			}
		}
		if (kt + 1 < KT) {
			mm_stage<BM, BK, NT, A_PER>(As[cur ^ 1], g.opd_a, tid, ra);
			mm_stage<BN, BK, NT, B_PER>(Bs[cur ^ 1], g.opd_b, tid, rb);
		}
		__syncthreads();
	}

	static_assert(TM * TN <= 64, "the NaN mask holds 64 outputs");
	unsigned long long nan_mask = 0;
#pragma unroll
	for (int i = 0; i < TM; i++) {
		int row = m0 + ty * TM + i;
		if (row >= g.m)
			continue;
#pragma unroll
		for (int j = 0; j < TN; j++) {
			int col = n0 + tx * TN + j;
			if (col >= g.n)
				continue;
			float v = SPLIT ? tot[i % SM][j % SN] + (float)acc[i][j] : (float)acc[i][j];
			if (g.k == 0)
				v = 0.0f;
			if (align_isnanf(v))
				nan_mask |= 1ull << (i * TN + j);
			mm_store(g, row, col, v);
		}
	}
	/* NaN is sticky: a NaN output is recomputed with the host's NaN rules, after the accumulators
	 * are dead (the out-of-line call does not then cost the main loop registers) */
	for (int b = 0; nan_mask; b++, nan_mask >>= 1)
		if (nan_mask & 1) {
			int row = m0 + ty * TM + b / TN, col = n0 + tx * TN + b % TN;
			mm_store(g, row, col, mm_ref_at(g, row, col, ACC, FMA));
		}
}

/* Tiles in column-major tile order (consecutive CTAs share a B panel), grid-stride when capped. */
/* dynamic shared memory of one tile configuration: As[2][BK][BM + PAD], then Bs[2][BK][BN + PAD] */
#define MM_SMEM_BYTES(BM, BN, BK) ((size_t)2 * (BK) * ((BM) + MM_PAD + (BN) + MM_PAD) * sizeof(float))

template <int BM, int BN, int BK, int TM, int TN, int ACC, int FMA>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) matmul_portable_kernel(const struct mm_args g)
{
	float (*As)[BK][BM + MM_PAD] = (float (*)[BK][BM + MM_PAD])align_cuda_dyn_smem();
	float (*Bs)[BK][BN + MM_PAD] = (float (*)[BK][BN + MM_PAD])(align_cuda_dyn_smem() +
								       (size_t)2 * BK * (BM + MM_PAD) * sizeof(float));
	const long long tiles_m = (g.m + BM - 1) / BM, tiles = tiles_m * ((g.n + BN - 1) / BN);
	for (long long t = blockIdx.x; t < tiles; t += gridDim.x)
		mm_tile<BM, BN, BK, TM, TN, ACC, FMA>(g, (int)(t % tiles_m) * BM, (int)(t / tiles_m) * BN, As, Bs);
}

/* The reference path (launch->serial): one thread per output row, the C twin's loops as written. */
__global__ void matmul_serial_kernel(const struct mm_args g, int accum, int fma)
{
	for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < g.m;
	     row += (long long)gridDim.x * blockDim.x)
		for (int col = 0; col < g.n; col++)
			mm_store(g, (int)row, col, mm_ref_at(g, (int)row, col, accum, fma));
}

/* ---- host side ---- */

typedef void (*mm_kernel_fn)(const struct mm_args);

struct mm_variant {
	mm_kernel_fn fn;
	int bm, bn, threads;
	size_t smem; /* dynamic shared memory bytes */
};

#define MM_V(BM, BN, BK, TM, TN, ACC, FMA)                                                                     \
	{ matmul_portable_kernel<BM, BN, BK, TM, TN, ACC, FMA>, BM, BN, (BM / TM) * (BN / TN),                 \
	  MM_SMEM_BYTES(BM, BN, BK) }
/* the five (accumulation, fma) kernels of one tile shape: seq, seq+fma, split16, split16+fma, fp64 */
#define MM_ROW(BM, BN, BK, TM, TN)                                                                             \
	{ MM_V(BM, BN, BK, TM, TN, MATMUL_ACC_SEQ, 0), MM_V(BM, BN, BK, TM, TN, MATMUL_ACC_SEQ, 1),            \
	  MM_V(BM, BN, BK, TM, TN, MATMUL_ACC_SPLIT16, 0), MM_V(BM, BN, BK, TM, TN, MATMUL_ACC_SPLIT16, 1),    \
	  MM_V(BM, BN, BK, TM, TN, MATMUL_ACC_F64, 0) }

static const struct mm_variant mm_variants[MATMUL_TILE_COUNT][5] = {
	/* LARGE: 8x8 per thread for seq; split16 and fp64 need twice the registers per output: 8x4 */
	{ MM_V(128, 128, 8, 8, 8, MATMUL_ACC_SEQ, 0), MM_V(128, 128, 8, 8, 8, MATMUL_ACC_SEQ, 1),
	  MM_V(128, 64, 8, 8, 4, MATMUL_ACC_SPLIT16, 0), MM_V(128, 64, 8, 8, 4, MATMUL_ACC_SPLIT16, 1),
	  MM_V(128, 64, 8, 8, 4, MATMUL_ACC_F64, 0) },
	MM_ROW(32, 32, 16, 4, 2),  /* SMALL: 128 threads */
	MM_ROW(16, 32, 32, 2, 4),  /* SKINNY: 64 threads */
	MM_ROW(128, 4, 16, 2, 4),  /* NARROW: 64 threads */
};

static int mm_aligned(const void *p, unsigned bytes)
{
	return (uintptr_t)p % bytes == 0;
}

/* CTAs for `work` units (tiles, or rows / threads), at most grid_cap (0: no cap) */
static unsigned mm_grid(long long work, int grid_cap)
{
	long long n = work < 1 ? 1 : work;
	if (grid_cap > 0 && n > grid_cap)
		n = grid_cap;
	if (n > 0x7fffffff)
		n = 0x7fffffff;
	return (unsigned)n;
}

extern "C" int matmul_cuda_gemm_run(const struct matmul_cuda_gemm *g, cudaStream_t stream)
{
	const int64_t lim = 0x7fffffff;
	if (!g)
		return mm_einval("no arguments");
	if (g->m < 0 || g->n < 0 || g->k < 0 || g->m > lim || g->n > lim || g->k > lim)
		return mm_einval("sizes must lie in 0..2^31-1");
	if (g->lda < g->k || g->ldb < g->k || g->ldy < g->n)
		return mm_einval("a row stride is shorter than the row");
	if (g->opd_a < 0 || g->opd_a > MATMUL_OPD_TF32 || g->opd_b < 0 || g->opd_b > MATMUL_OPD_TF32)
		return mm_einval("unknown operand rounding");
	if (g->accum < 0 || g->accum > MATMUL_ACC_F64 || g->tile < 0 || g->tile >= MATMUL_TILE_COUNT)
		return mm_einval("unknown accumulation order or tile configuration");
	if (g->grid_cap < 0 || g->serial_block < 0)
		return mm_einval("negative launch knob");
	if (g->m == 0 || g->n == 0)
		return 0;
	if (!g->y || (g->k > 0 && (!g->a || !g->b)))
		return mm_einval("a, b or y is NULL");
	struct mm_args a;
	a.a = g->a;
	a.b = g->b;
	a.y = g->y;
	a.lda = g->lda;
	a.ldb = g->ldb;
	a.ldy = g->ldy;
	a.m = (int)g->m;
	a.n = (int)g->n;
	a.k = (int)g->k;
	a.a_bf16 = g->a_bf16 != 0;
	a.b_bf16 = g->b_bf16 != 0;
	a.y_bf16 = g->y_bf16 != 0;
	a.a_vec = g->lda % 4 == 0 && mm_aligned(g->a, a.a_bf16 ? 8 : 16);
	a.b_vec = g->ldb % 4 == 0 && mm_aligned(g->b, a.b_bf16 ? 8 : 16);
	a.opd_a = g->opd_a;
	a.opd_b = g->opd_b;
	a.chunk = (int)((g->k + 15) / 16);
	if (g->serial_block > 0) {
		int threads = g->serial_block > 1024 ? 1024 : g->serial_block;
		unsigned grid = mm_grid((g->m + threads - 1) / threads, g->grid_cap);
		ALIGN_CUDA_LAUNCH(matmul_serial_kernel, grid, threads, 0, stream, a, g->accum, (int)(g->fma != 0));
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of matmul_serial_kernel */
		return 0;
	}
	int combo = g->accum == MATMUL_ACC_F64 ? 4 : 2 * (g->accum == MATMUL_ACC_SPLIT16) + (g->fma != 0);
	const struct mm_variant *v = &mm_variants[g->tile][combo];
	long long tiles = ((g->m + v->bm - 1) / v->bm) * ((g->n + v->bn - 1) / v->bn);
	ALIGN_CUDA_LAUNCH(v->fn, mm_grid(tiles, g->grid_cap), v->threads, v->smem, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of matmul_portable_kernel */
	return 0;
}

/* Launch knobs -> tile (the mapping is stated in matmul_cuda.h). */
static int mm_pick_tile(const struct align_launch *l, int64_t m, int64_t n)
{
	int block = l ? l->block : 0, rows = l ? l->rows_per_block : 0;
	if (block == 0)
		return m * n >= (int64_t)128 * 128 * 64 ? MATMUL_TILE_LARGE : MATMUL_TILE_SMALL;
	if (block >= 256)
		return MATMUL_TILE_LARGE;
	if (block >= 128)
		return MATMUL_TILE_SMALL;
	return rows > 16 ? MATMUL_TILE_NARROW : MATMUL_TILE_SKINNY;
}

/* ---- the GPU-only engines of the op: MATMUL_IMPL=tc, cublas, cublas_pinned (semantics in matmul.h) ---- */

/* status 4 with one message: the value of mode_id cannot run with the requested engine */
static int mm_refuse(const struct align_modes *m, int mode_id, const char *why)
{
	const char *v = modes_value_name(mode_id, m->v[mode_id]);
	const char *impl = modes_value_name(MODE_MATMUL_IMPL, m->v[MODE_MATMUL_IMPL]);
	fprintf(stderr, "error: matmul (cuda): %s=%s is not supported with %s=%s (%s)\n", modes_info(mode_id)->env,
		v ? v : "?", modes_info(MODE_MATMUL_IMPL)->env, impl ? impl : "?", why);
	return ALIGN_ERR_UNSUPPORTED;
}

/* the refusals of matmul.h ("Engines"); 0 when the engine can run these modes */
static int mm_engine_check(const struct align_modes *m, int impl)
{
	if (impl != MATMUL_IMPL_TC && impl != MATMUL_IMPL_CUBLAS && impl != MATMUL_IMPL_CUBLAS_PINNED)
		return ops_cuda_bad_input("matmul", "unknown MATMUL_IMPL value");
	if (m->v[MODE_MATMUL_ACCUM] != MATMUL_ACC_SEQ)
		return mm_refuse(m, MODE_MATMUL_ACCUM, "the engine sums in its own order; only the default is accepted");
	if (m->v[MODE_MATMUL_FMA] != ALIGN_MATMUL_FMA_OFF)
		return mm_refuse(m, MODE_MATMUL_FMA, "the engine sums in its own order; only the default is accepted");
	if (impl == MATMUL_IMPL_TC && m->v[MODE_MATMUL_OPERAND] != MATMUL_OPD_BF16)
		return mm_refuse(m, MODE_MATMUL_OPERAND, "the tensor-core kernel takes bf16 operands");
	if (impl == MATMUL_IMPL_CUBLAS_PINNED && m->v[MODE_MATMUL_OPERAND] != MATMUL_OPD_BF16)
		return mm_refuse(m, MODE_MATMUL_OPERAND, "the pinned algorithm is chosen for bf16 operands");
	return 0;
}

#if defined(MM_HAVE_TC) || defined(MM_HAVE_CUBLAS)
/* In the engines below: on a failed CUDA / cuBLAS call, set rc (message with call, file and line) and
 * go to `out`, where the temporaries and the handle are released. */
#define MM_TRY(call)                                                                                           \
	do {                                                                                                   \
		cudaError_t e_ = (call);                                                                       \
		if (e_ != cudaSuccess) {                                                                       \
			rc = ops_cuda_fail(#call, e_, __FILE__, __LINE__);                                     \
			goto out;                                                                              \
		}                                                                                              \
	} while (0)

#define MM_PASS_THREADS 256
#define MM_PASS_GRID_CAP 4096 /* element-wise passes: grid-stride beyond 1M threads */

/* dst[r * ldd + k] = the bf16 operand of src[r * d + k] for k < d (a bf16 element as is, an f32 one
 * rounded to nearest even: matmul_operand bf16), +0 for d <= k < ldd; r < rows */
__global__ void mm_to_bf16_kernel(const void *src, int src_bf16, int64_t rows, int64_t d, align_bf16 *dst,
				  int64_t ldd)
{
	const int64_t n = rows * ldd;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		const int64_t r = i / ldd, k = i - r * ldd;
		align_bf16 v = 0;
		if (k < d)
			v = src_bf16 ? ((const align_bf16 *)src)[r * d + k]
				     : align_f32_to_bf16(((const float *)src)[r * d + k]);
		dst[i] = v;
	}
}

/* mm_to_bf16_kernel over a tensor's rows on `stream`: the launch's error (the widen / round passes of
 * the cublas engine below likewise) */
static cudaError_t mm_to_bf16(const struct align_tensor *t, int64_t rows, int64_t d, align_bf16 *dst, int64_t ldd,
			      cudaStream_t stream)
{
	unsigned grid = mm_grid((rows * ldd + MM_PASS_THREADS - 1) / MM_PASS_THREADS, MM_PASS_GRID_CAP);
	ALIGN_CUDA_LAUNCH(mm_to_bf16_kernel, grid, MM_PASS_THREADS, 0, stream, (const void *)t->data,
			  (int)(t->dtype == ALIGN_DT_BF16), rows, d, dst, ldd);
	return cudaGetLastError();
}

/* Stream-ordered release of the temporaries (after the work queued before it); keeps the first error. */
static int mm_free_tmp(void *const *tmp, int n, int rc, cudaStream_t stream)
{
	for (int i = 0; i < n; i++)
		if (tmp[i]) {
			cudaError_t e = cudaFreeAsync(tmp[i], stream);
			if (e != cudaSuccess && rc == 0)
				rc = ops_cuda_fail("cudaFreeAsync(tmp[i], stream)", e, __FILE__, __LINE__);
		}
	return rc;
}
#endif /* MM_HAVE_TC || MM_HAVE_CUBLAS */

#ifdef MM_HAVE_TC
/* tc: operands the kernel cannot read as they are (f32, D % 8 != 0, not 16-byte aligned) are staged as
 * bf16 rows of kp = D rounded up to 8 elements, zero-padded; an unaligned y goes through a temporary. */
static int mm_fwd_tc(const struct align_tensor *a, const struct align_tensor *b, struct align_tensor *y, int64_t T,
		     int64_t D, int64_t F, cudaStream_t stream)
{
	const int64_t kp = (D + 7) / 8 * 8;
	const int y_f32 = y->dtype == ALIGN_DT_F32;
	const size_t ybytes = (size_t)(T * F) * (y_f32 ? sizeof(float) : sizeof(align_bf16));
	const int stage_a = a->dtype != ALIGN_DT_BF16 || D % 8 != 0 || !mm_aligned(a->data, 16);
	const int stage_b = b->dtype != ALIGN_DT_BF16 || D % 8 != 0 || !mm_aligned(b->data, 16);
	void *tmp[3] = {NULL, NULL, NULL}; /* staged a, staged b, y */
	const void *pa = a->data, *pb = b->data;
	void *py = y->data;
	struct matmul_tc_params p = {T, F, kp};
	int rc = 0;
	if (stage_a) {
		MM_TRY(cudaMallocAsync(&tmp[0], (size_t)(T * kp) * sizeof(align_bf16), stream));
		MM_TRY(mm_to_bf16(a, T, D, (align_bf16 *)tmp[0], kp, stream));
		pa = tmp[0];
	}
	if (stage_b) {
		MM_TRY(cudaMallocAsync(&tmp[1], (size_t)(F * kp) * sizeof(align_bf16), stream));
		MM_TRY(mm_to_bf16(b, F, D, (align_bf16 *)tmp[1], kp, stream));
		pb = tmp[1];
	}
	if (!mm_aligned(py, 16)) {
		MM_TRY(cudaMallocAsync(&tmp[2], ybytes, stream));
		py = tmp[2];
	}
	rc = matmul_tc_fwd_cuda_out(&p, y_f32, pa, pb, py, stream); /* 2 or 3 with its own message */
	if (rc == 0 && tmp[2])
		MM_TRY(cudaMemcpyAsync(y->data, tmp[2], ybytes, cudaMemcpyDeviceToDevice, stream));
out:
	return mm_free_tmp(tmp, 3, rc, stream);
}
#endif /* MM_HAVE_TC */

#ifdef MM_HAVE_CUBLAS
#define MM_BLAS_TRY(call)                                                                                      \
	do {                                                                                                   \
		cublasStatus_t s_ = (call);                                                                    \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
			rc = mm_cublas_fail(#call, s_, __FILE__, __LINE__);                                    \
			goto out;                                                                              \
		}                                                                                              \
	} while (0)

/* dst[i] = F(src[i]), exact widening of bf16 to f32 */
__global__ void mm_widen_kernel(const align_bf16 *src, int64_t n, float *dst)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		dst[i] = align_bf16_to_f32(src[i]);
}

/* dst[i] = R(src[i]): one round to nearest even to bf16 */
__global__ void mm_round_kernel(const float *src, int64_t n, align_bf16 *dst)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		dst[i] = align_f32_to_bf16(src[i]);
}

static cudaError_t mm_widen(const align_bf16 *src, int64_t n, float *dst, cudaStream_t stream)
{
	ALIGN_CUDA_LAUNCH(mm_widen_kernel, mm_grid((n + MM_PASS_THREADS - 1) / MM_PASS_THREADS, MM_PASS_GRID_CAP),
			  MM_PASS_THREADS, 0, stream, src, n, dst);
	return cudaGetLastError();
}

static cudaError_t mm_round(const float *src, int64_t n, align_bf16 *dst, cudaStream_t stream)
{
	ALIGN_CUDA_LAUNCH(mm_round_kernel, mm_grid((n + MM_PASS_THREADS - 1) / MM_PASS_THREADS, MM_PASS_GRID_CAP),
			  MM_PASS_THREADS, 0, stream, src, n, dst);
	return cudaGetLastError();
}

static int mm_cublas_fail(const char *call, cublasStatus_t s, const char *file, int line)
{
	fprintf(stderr, "error: %s failed: %s (%s) at %s:%d\n", call, cublasGetStatusString(s), cublasGetStatusName(s),
		file, line);
	return ALIGN_ERR_INTERNAL;
}

/* cublas: y^T[F,T] (column-major, ld F) = b^T... as PyTorch's Linear: gemm(transa = T, transb = N, m = F,
 * n = T, k = D, A = b (ld D), B = a (ld D), C = y (ld F)); operand staging and types per matmul.h. */
static int mm_fwd_cublas(const struct align_modes *m, const struct align_tensor *a, const struct align_tensor *b,
			 struct align_tensor *y, int64_t T, int64_t D, int64_t F, cudaStream_t stream)
{
	const int opd = m->v[MODE_MATMUL_OPERAND], lowp = opd == MATMUL_OPD_BF16, y_bf16 = y->dtype == ALIGN_DT_BF16;
	const cudaDataType_t ab_type = lowp ? CUDA_R_16BF : CUDA_R_32F;
	const cudaDataType_t c_type = lowp && y_bf16 ? CUDA_R_16BF : CUDA_R_32F;
	const cublasComputeType_t compute = opd == MATMUL_OPD_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	const cublasMath_t math = opd == MATMUL_OPD_F32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH;
	const float one = 1.0f, zero = 0.0f;
	void *tmp[3] = {NULL, NULL, NULL}; /* a, b as the GEMM's type; fp32 result before its bf16 rounding */
	const void *pa = a->data, *pb = b->data;
	void *pc = y->data;
	cublasHandle_t h = NULL;
	int rc = 0;
	if (T > INT_MAX || D > INT_MAX || F > INT_MAX)
		return ops_cuda_bad_input("matmul", "MATMUL_IMPL=cublas takes T, D and F below 2^31");
	if (lowp ? a->dtype != ALIGN_DT_BF16 : a->dtype != ALIGN_DT_F32) {
		MM_TRY(cudaMallocAsync(&tmp[0], (size_t)(T * D) * (lowp ? sizeof(align_bf16) : sizeof(float)), stream));
		MM_TRY(lowp ? mm_to_bf16(a, T, D, (align_bf16 *)tmp[0], D, stream)
			    : mm_widen((const align_bf16 *)a->data, T * D, (float *)tmp[0], stream));
		pa = tmp[0];
	}
	if (lowp ? b->dtype != ALIGN_DT_BF16 : b->dtype != ALIGN_DT_F32) {
		MM_TRY(cudaMallocAsync(&tmp[1], (size_t)(F * D) * (lowp ? sizeof(align_bf16) : sizeof(float)), stream));
		MM_TRY(lowp ? mm_to_bf16(b, F, D, (align_bf16 *)tmp[1], D, stream)
			    : mm_widen((const align_bf16 *)b->data, F * D, (float *)tmp[1], stream));
		pb = tmp[1];
	}
	if (!lowp && y_bf16) {
		MM_TRY(cudaMallocAsync(&tmp[2], (size_t)(T * F) * sizeof(float), stream));
		pc = tmp[2];
	}
	MM_BLAS_TRY(cublasCreate(&h));
	MM_BLAS_TRY(cublasSetStream(h, stream));
	MM_BLAS_TRY(cublasSetMathMode(h, math));
	MM_BLAS_TRY(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)F, (int)T, (int)D, &one, pb, ab_type, (int)D, pa,
				 ab_type, (int)D, &zero, pc, c_type, (int)F, compute, CUBLAS_GEMM_DEFAULT));
	if (tmp[2])
		MM_TRY(mm_round((const float *)tmp[2], T * F, (align_bf16 *)y->data, stream));
out:
	rc = mm_free_tmp(tmp, 3, rc, stream);
	if (h) { /* cublasDestroy synchronizes the device: the call returns with y written */
		cublasStatus_t s = cublasDestroy(h);
		if (s != CUBLAS_STATUS_SUCCESS && rc == 0)
			rc = mm_cublas_fail("cublasDestroy(h)", s, __FILE__, __LINE__);
	}
	return rc;
}
#define MM_PIN_ROWS 8192	   /* the n the pinned algorithm is chosen at (matmul.h) */
#define MM_PIN_WORKSPACE (32u << 20) /* the workspace the heuristic may plan for */

#define MM_LT_TRY(call)                                                                                        \
	do {                                                                                                   \
		cublasStatus_t s_ = (call);                                                                    \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
			rc = mm_cublas_fail(#call, s_, __FILE__, __LINE__);                                    \
			goto lt_out;                                                                           \
		}                                                                                              \
	} while (0)

/* cublas_pinned: cuBLASLt, one algorithm per (F, kp, output dtype) chosen at n = MM_PIN_ROWS (matmul.h) */
static int mm_fwd_pinned(const struct align_tensor *a, const struct align_tensor *b, struct align_tensor *y,
			 int64_t T, int64_t D, int64_t F, cudaStream_t stream)
{
	const int64_t kp = (D + 7) / 8 * 8, fp = (F + 7) / 8 * 8; /* padded K, and F (ld of y) */
	const int y_f32 = y->dtype == ALIGN_DT_F32;
	const cudaDataType_t c_type = y_f32 ? CUDA_R_32F : CUDA_R_16BF;
	const size_t es = y_f32 ? sizeof(float) : sizeof(align_bf16), ybytes = (size_t)(T * fp) * es;
	const int stage_a = a->dtype != ALIGN_DT_BF16 || D % 8 != 0 || !mm_aligned(a->data, 16);
	const int stage_b = b->dtype != ALIGN_DT_BF16 || D % 8 != 0 || F != fp || !mm_aligned(b->data, 16);
	void *tmp[4] = {NULL, NULL, NULL, NULL}; /* staged a, staged b, y, workspace */
	const void *pa = a->data, *pb = b->data;
	void *py = y->data;
	cublasLtHandle_t h = NULL;
	cublasLtMatmulDesc_t desc = NULL;
	cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL, lref = NULL;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res[16], chk;
	cublasLtMatmulAlgo_t algo;
	const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	const float one = 1.0f, zero = 0.0f;
	const size_t wmax = MM_PIN_WORKSPACE;
	const int one_split = 1;
	const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
	int n = 0, chosen = -1, rc = 0;
	if (T > INT_MAX || kp > INT_MAX || fp > INT_MAX)
		return ops_cuda_bad_input("matmul", "MATMUL_IMPL=cublas_pinned takes T, D and F below 2^31");
	if (stage_a) {
		MM_TRY(cudaMallocAsync(&tmp[0], (size_t)(T * kp) * sizeof(align_bf16), stream));
		MM_TRY(mm_to_bf16(a, T, D, (align_bf16 *)tmp[0], kp, stream));
		pa = tmp[0];
	}
	if (stage_b) { /* rows F .. fp-1 stay zero: columns of y that are dropped */
		MM_TRY(cudaMallocAsync(&tmp[1], (size_t)(fp * kp) * sizeof(align_bf16), stream));
		MM_TRY(cudaMemsetAsync(tmp[1], 0, (size_t)(fp * kp) * sizeof(align_bf16), stream));
		MM_TRY(mm_to_bf16(b, F, D, (align_bf16 *)tmp[1], kp, stream));
		pb = tmp[1];
	}
	if (F != fp || !mm_aligned(py, 16)) { /* y through a [T, fp] temporary */
		MM_TRY(cudaMallocAsync(&tmp[2], ybytes, stream));
		py = tmp[2];
	}
	MM_LT_TRY(cublasLtCreate(&h));
	MM_LT_TRY(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	MM_LT_TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
	MM_LT_TRY(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
	/* column-major views: A = b^T [kp, F], B = a^T [kp, T], C = y^T [F, T] */
	MM_LT_TRY(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, (uint64_t)kp, (uint64_t)fp, kp));
	MM_LT_TRY(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, (uint64_t)kp, (uint64_t)T, kp));
	MM_LT_TRY(cublasLtMatrixLayoutCreate(&lc, c_type, (uint64_t)fp, (uint64_t)T, fp));
	MM_LT_TRY(cublasLtMatrixLayoutCreate(&lref, CUDA_R_16BF, (uint64_t)kp, MM_PIN_ROWS, kp));
	MM_LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
	MM_LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wmax,
						       sizeof wmax));
	{
		cublasLtMatrixLayout_t lcref = NULL;
		MM_LT_TRY(cublasLtMatrixLayoutCreate(&lcref, c_type, (uint64_t)fp, MM_PIN_ROWS, fp));
		cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lref, lcref, lcref, pref, 16, res, &n);
		cublasLtMatrixLayoutDestroy(lcref);
		MM_LT_TRY(hs);
	}
	for (int i = 0; i < n && chosen < 0; i++) {
		int splitk = 1;
		size_t got = 0;
		if (cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
							 sizeof splitk, &got) == CUBLAS_STATUS_SUCCESS && splitk <= 1)
			chosen = i;
	}
	if (chosen < 0) {
		fprintf(stderr, "error: matmul (cuda): cuBLASLt offers no algorithm without split-K for F=%lld, D=%lld "
				"(MATMUL_IMPL=cublas_pinned)\n", (long long)F, (long long)D);
		rc = ALIGN_ERR_UNSUPPORTED;
		goto lt_out;
	}
	algo = res[chosen].algo;
	MM_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split,
						       sizeof one_split));
	MM_LT_TRY(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction,
						       sizeof no_reduction));
	if (cublasLtMatmulAlgoCheck(h, desc, la, lb, lc, lc, &algo, &chk) != CUBLAS_STATUS_SUCCESS ||
	    chk.workspaceSize > wmax) {
		fprintf(stderr, "error: matmul (cuda): the pinned cuBLASLt algorithm for F=%lld, D=%lld does not accept "
				"T=%lld (MATMUL_IMPL=cublas_pinned)\n", (long long)F, (long long)D, (long long)T);
		rc = ALIGN_ERR_UNSUPPORTED;
		goto lt_out;
	}
	if (chk.workspaceSize)
		MM_TRY(cudaMallocAsync(&tmp[3], chk.workspaceSize, stream));
	MM_LT_TRY(cublasLtMatmul(h, desc, &one, pb, la, pa, lb, &zero, py, lc, py, lc, &algo, tmp[3], chk.workspaceSize,
				 stream));
	if (tmp[2]) /* the first F of each fp columns */
		MM_TRY(cudaMemcpy2DAsync(y->data, (size_t)F * es, tmp[2], (size_t)fp * es, (size_t)F * es, (size_t)T,
					 cudaMemcpyDeviceToDevice, stream));
lt_out:
out:
	rc = mm_free_tmp(tmp, 4, rc, stream);
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	if (lref)
		cublasLtMatrixLayoutDestroy(lref);
	if (lc)
		cublasLtMatrixLayoutDestroy(lc);
	if (lb)
		cublasLtMatrixLayoutDestroy(lb);
	if (la)
		cublasLtMatrixLayoutDestroy(la);
	if (desc)
		cublasLtMatmulDescDestroy(desc);
	if (h) {
		cublasStatus_t sd = cublasLtDestroy(h);
		if (sd != CUBLAS_STATUS_SUCCESS && rc == 0)
			rc = mm_cublas_fail("cublasLtDestroy(h)", sd, __FILE__, __LINE__);
	}
	return rc;
}
#endif /* MM_HAVE_CUBLAS */

#if !defined(MM_HAVE_TC) || !defined(MM_HAVE_CUBLAS)
static int mm_not_built(int impl) /* emulator builds (tests/gpu/emu) */
{
	fprintf(stderr, "error: matmul (cuda): %s=%s is not built into the emulator\n", modes_info(MODE_MATMUL_IMPL)->env,
		modes_value_name(MODE_MATMUL_IMPL, impl));
	return ALIGN_ERR_UNSUPPORTED;
}
#endif

/* MATMUL_IMPL=tc, cublas or cublas_pinned on checked tensors: refusals, empty shapes, D == 0 (y = +0), then
 * the engine */
static int mm_fwd_engine(const struct align_modes *m, int impl, const struct align_tensor *a,
			 const struct align_tensor *b, struct align_tensor *y, int64_t T, int64_t D, int64_t F,
			 cudaStream_t stream)
{
	int rc = mm_engine_check(m, impl);
	if (rc)
		return rc;
#ifndef MM_HAVE_TC
	if (impl == MATMUL_IMPL_TC)
		return mm_not_built(impl);
#endif
#ifndef MM_HAVE_CUBLAS
	if (impl == MATMUL_IMPL_CUBLAS || impl == MATMUL_IMPL_CUBLAS_PINNED)
		return mm_not_built(impl);
#endif
	if (T == 0 || F == 0)
		return 0;
	if (!y->data || (D > 0 && (!a->data || !b->data)))
		return ops_cuda_bad_input("matmul", "a, b or y is NULL");
	if (D == 0) { /* every engine's empty sum: +0, as the portable engine */
		OPS_CUDA_TRY(cudaMemsetAsync(y->data, 0, (size_t)(T * F) * align_dtype_size(y->dtype), stream));
		return 0;
	}
#ifdef MM_HAVE_TC
	if (impl == MATMUL_IMPL_TC)
		return mm_fwd_tc(a, b, y, T, D, F, stream);
#endif
#ifdef MM_HAVE_CUBLAS
	if (impl == MATMUL_IMPL_CUBLAS)
		return mm_fwd_cublas(m, a, b, y, T, D, F, stream);
	if (impl == MATMUL_IMPL_CUBLAS_PINNED)
		return mm_fwd_pinned(a, b, y, T, D, F, stream);
#endif
	(void)a, (void)b;
	return ALIGN_ERR_INTERNAL; /* unreachable: every impl value was handled above */
}

extern "C" int matmul_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
			       int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
			       struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	(void)params; /* struct matmul_params has no field that matters */
	if (!m || !in || !out || n_in != 2 || n_out != 1)
		return ops_cuda_bad_input("matmul", "expects a[T,D], b[F,D] -> y[T,F]");
	const struct align_tensor *a = &in[0], *b = &in[1];
	if (a->ndim != 2 || b->ndim != 2 || a->shape[1] != b->shape[1] || a->dtype == ALIGN_DT_I32 ||
	    b->dtype == ALIGN_DT_I32)
		return ops_cuda_bad_input("matmul", "a and b must be 2-d f32/bf16 with the same number of columns");
	int64_t T = a->shape[0], D = a->shape[1], F = b->shape[0];
	int64_t oshape[2] = {T, F};
	int odt = m->v[MODE_MATMUL_OUT] == ALIGN_MATMUL_OUT_BF16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
	if (ops_check(&out[0], odt, 2, oshape))
		return ops_cuda_bad_input("matmul", "y must be [T,F] in the dtype MATMUL_OUT selects");
	if (launch && (launch->block < 0 || launch->rows_per_block < 0 || launch->grid_cap < 0 || launch->serial < 0))
		return ops_cuda_bad_input("matmul", "negative launch knob");
	const int impl = m->v[MODE_MATMUL_IMPL];
	if (impl != MATMUL_IMPL_PORTABLE) /* launch knobs do not apply to the GPU-only engines (matmul.h) */
		return mm_fwd_engine(m, impl, a, b, &out[0], T, D, F, stream);
	struct matmul_cuda_gemm g;
	g.a = a->data;
	g.a_bf16 = a->dtype == ALIGN_DT_BF16;
	g.lda = D;
	g.b = b->data;
	g.b_bf16 = b->dtype == ALIGN_DT_BF16;
	g.ldb = D;
	g.y = out[0].data;
	g.y_bf16 = odt == ALIGN_DT_BF16;
	g.ldy = F;
	g.m = T;
	g.n = F;
	g.k = D;
	g.opd_a = m->v[MODE_MATMUL_OPERAND];
	g.opd_b = m->v[MODE_MATMUL_OPERAND];
	g.accum = m->v[MODE_MATMUL_ACCUM];
	g.fma = m->v[MODE_MATMUL_FMA] == ALIGN_MATMUL_FMA_ON;
	g.tile = mm_pick_tile(launch, T, F);
	g.grid_cap = launch ? launch->grid_cap : 0;
	g.serial_block = launch && launch->serial ? (launch->block > 0 ? launch->block : 128) : 0;
	return matmul_cuda_gemm_run(&g, stream);
}
