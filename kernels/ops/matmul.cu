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
 * Shapes and modes: matmul_cfg_init (matmul.c, shared with the C twin; it also makes the engine
 * refusals of matmul.h); this file reads only the config.
 * GPU-only engines (MATMUL_IMPL=tc|cublas|cublas_pinned; semantics and refusals in matmul.h "Engines"): the bottom
 * of this file stages operands (element-wise passes: f32 -> bf16 rounding, bf16 -> f32 widening, fp32
 * -> bf16 output rounding) into temporaries carved from the device context's workspace (one
 * align_dev_scratch call per op call, 256-byte aligned pieces; every pass and the GEMM are ordered on
 * dev->stream) and calls matmul_tc_fwd_cuda_out, cublasGemmEx or cublasLtMatmul with the pinned
 * algorithm, on the context's cuBLAS / cuBLASLt handles (created once). None is a twin
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
#include "op_cfg.h"
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
	int opd_a, opd_b; /* ALIGN_MATMUL_OPERAND_* */
	int chunk;	  /* split16: ceil(k / 16) */
};

template <int ACC> struct mm_acc_type {
	typedef float type;
};
template <> struct mm_acc_type<ALIGN_MATMUL_ACCUM_FP64> {
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
			if (ACC == ALIGN_MATMUL_ACCUM_FP64)
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
	constexpr bool SPLIT = ACC == ALIGN_MATMUL_ACCUM_SPLIT16;
	constexpr int SM = SPLIT ? TM : 1, SN = SPLIT ? TN : 1;
	typedef typename mm_acc_type<ACC>::type acc_t;
	const int tid = threadIdx.x, tx = tid % NTX, ty = tid / NTX;
	/* -0 + x == x for every x: the FMA-off start; +0 is the fmaf start and the fp64 start */
	const acc_t init = (ACC == ALIGN_MATMUL_ACCUM_FP64 || FMA) ? (acc_t)0.0f : (acc_t)-0.0f;
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
								tot[i % SM][j % SN] =
									tot[i % SM][j % SN] + (float)acc[i][j];
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
	float(*As)[BK][BM + MM_PAD] = (float(*)[BK][BM + MM_PAD]) align_cuda_dyn_smem();
	float(*Bs)[BK][BN + MM_PAD] =
		(float(*)[BK][BN + MM_PAD])(align_cuda_dyn_smem() + (size_t)2 * BK * (BM + MM_PAD) * sizeof(float));
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

#define MM_V(BM, BN, BK, TM, TN, ACC, FMA)                                                                             \
	{                                                                                                              \
		matmul_portable_kernel<BM, BN, BK, TM, TN, ACC, FMA>, BM, BN, (BM / TM) * (BN / TN),                   \
			MM_SMEM_BYTES(BM, BN, BK)                                                                      \
	}
/* the five (accumulation, fma) kernels of one tile shape: seq, seq+fma, split16, split16+fma, fp64 */
#define MM_ROW(BM, BN, BK, TM, TN)                                                                                     \
	{                                                                                                              \
		MM_V(BM, BN, BK, TM, TN, ALIGN_MATMUL_ACCUM_SEQ, 0),                                                   \
			MM_V(BM, BN, BK, TM, TN, ALIGN_MATMUL_ACCUM_SEQ, 1),                                           \
			MM_V(BM, BN, BK, TM, TN, ALIGN_MATMUL_ACCUM_SPLIT16, 0),                                       \
			MM_V(BM, BN, BK, TM, TN, ALIGN_MATMUL_ACCUM_SPLIT16, 1),                                       \
			MM_V(BM, BN, BK, TM, TN, ALIGN_MATMUL_ACCUM_FP64, 0)                                           \
	}

static const struct mm_variant mm_variants[MATMUL_TILE_COUNT][5] = {
	/* LARGE: 8x8 per thread for seq; split16 and fp64 need twice the registers per output: 8x4 */
	{MM_V(128, 128, 8, 8, 8, ALIGN_MATMUL_ACCUM_SEQ, 0), MM_V(128, 128, 8, 8, 8, ALIGN_MATMUL_ACCUM_SEQ, 1),
	 MM_V(128, 64, 8, 8, 4, ALIGN_MATMUL_ACCUM_SPLIT16, 0), MM_V(128, 64, 8, 8, 4, ALIGN_MATMUL_ACCUM_SPLIT16, 1),
	 MM_V(128, 64, 8, 8, 4, ALIGN_MATMUL_ACCUM_FP64, 0)},
	MM_ROW(32, 32, 16, 4, 2), /* SMALL: 128 threads */
	MM_ROW(16, 32, 32, 2, 4), /* SKINNY: 64 threads */
	MM_ROW(128, 4, 16, 2, 4), /* NARROW: 64 threads */
};

/* the column of mm_variants for (accum, fma): seq, seq+fma, split16, split16+fma, fp64 (fma ignored) */
static int mm_variant_index(int accum, int fma)
{
	switch ((enum align_MATMUL_ACCUM_value)accum) {
	case ALIGN_MATMUL_ACCUM_SEQ:
		return fma;
	case ALIGN_MATMUL_ACCUM_SPLIT16:
		return 2 + fma;
	case ALIGN_MATMUL_ACCUM_FP64:
	default: /* matmul_cuda_gemm_run refused any other value */
		return 4;
	}
}

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
	if (g->opd_a < 0 || g->opd_a >= ALIGN_MATMUL_OPERAND__COUNT || g->opd_b < 0 ||
	    g->opd_b >= ALIGN_MATMUL_OPERAND__COUNT)
		return mm_einval("unknown operand rounding");
	if (g->accum < 0 || g->accum >= ALIGN_MATMUL_ACCUM__COUNT || g->tile < 0 || g->tile >= MATMUL_TILE_COUNT)
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
	const struct mm_variant *v = &mm_variants[g->tile][mm_variant_index(g->accum, g->fma != 0)];
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
/* The refusals of matmul.h ("Engines") are matmul_cfg_init's (matmul.c); the engines run on checked
 * tensors and a config that allows them. */

#if defined(MM_HAVE_TC) || defined(MM_HAVE_CUBLAS)
/* In the engines below: on a failed CUDA call, return 3 with the message in dev->err. */
#define MM_TRY(call)                                                                                                   \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ != cudaSuccess)                                                                                 \
			return align_dev_fail(dev, #call, (int)e_, __FILE__, __LINE__);                                \
	} while (0)

#define MM_PASS_THREADS 256
#define MM_PASS_GRID_CAP 4096 /* element-wise passes: grid-stride beyond 1M threads */
#define MM_SCRATCH_ALIGN 256  /* offsets of the temporaries inside the workspace */

/* dst[r * ldd + k] = the bf16 operand of src[r * d + k] for k < d (a bf16 element as is, an f32 one
 * rounded to nearest even: matmul_operand bf16), +0 for d <= k < ldd; r < rows */
__global__ void mm_to_bf16_kernel(const void *src, int src_bf16, int64_t rows, int64_t d, align_bf16 *dst, int64_t ldd)
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

/* The temporaries of one engine call from the device context's workspace (one align_dev_scratch call):
 * p[i] gets bytes[i] bytes at a 256-byte aligned offset, NULL when bytes[i] is 0. Everything that
 * uses them is ordered on dev->stream, so the next op's use of the workspace comes after. */
static int mm_scratch(struct align_dev *dev, const size_t *bytes, void **p, int n)
{
	size_t off[4], total = 0;
	for (int i = 0; i < n; i++) {
		off[i] = total;
		total += (bytes[i] + MM_SCRATCH_ALIGN - 1) / MM_SCRATCH_ALIGN * MM_SCRATCH_ALIGN;
	}
	void *base = NULL;
	if (total)
		ALIGN_TRY(dev->err, align_dev_scratch(dev, total, &base));
	for (int i = 0; i < n; i++)
		p[i] = bytes[i] ? (void *)((char *)base + off[i]) : NULL;
	return ALIGN_OK;
}
#endif /* MM_HAVE_TC || MM_HAVE_CUBLAS */

#ifdef MM_HAVE_TC
/* tc: operands the kernel cannot read as they are (f32, D % 8 != 0, not 16-byte aligned) are staged as
 * bf16 rows of kp = D rounded up to 8 elements, zero-padded; an unaligned y goes through a temporary. */
static int mm_fwd_tc(struct align_dev *dev, const struct matmul_cfg *c, const struct align_tensor *a,
		     const struct align_tensor *b, struct align_tensor *y)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	const int64_t T = c->T, D = c->D, F = c->F, kp = (D + 7) / 8 * 8;
	const int y_f32 = y->dtype == ALIGN_DT_F32;
	const size_t ybytes = (size_t)(T * F) * (y_f32 ? sizeof(float) : sizeof(align_bf16));
	const int stage_a = a->dtype != ALIGN_DT_BF16 || D % 8 != 0 || !mm_aligned(a->data, 16);
	const int stage_b = b->dtype != ALIGN_DT_BF16 || D % 8 != 0 || !mm_aligned(b->data, 16);
	const int stage_y = !mm_aligned(y->data, 16);
	const size_t bytes[3] = {stage_a ? (size_t)(T * kp) * sizeof(align_bf16) : 0,
				 stage_b ? (size_t)(F * kp) * sizeof(align_bf16) : 0, stage_y ? ybytes : 0};
	void *tmp[3]; /* staged a, staged b, y */
	struct matmul_tc_params p = {T, F, kp};
	ALIGN_TRY(dev->err, mm_scratch(dev, bytes, tmp, 3));
	if (stage_a)
		MM_TRY(mm_to_bf16(a, T, D, (align_bf16 *)tmp[0], kp, stream));
	if (stage_b)
		MM_TRY(mm_to_bf16(b, F, D, (align_bf16 *)tmp[1], kp, stream));
	const void *pa = stage_a ? tmp[0] : a->data, *pb = stage_b ? tmp[1] : b->data;
	int rc = matmul_tc_fwd_cuda_out(&p, y_f32, pa, pb, stage_y ? tmp[2] : y->data, stream); /* own message */
	if (rc)
		return rc;
	if (stage_y)
		MM_TRY(cudaMemcpyAsync(y->data, tmp[2], ybytes, cudaMemcpyDeviceToDevice, stream));
	return ALIGN_OK;
}
#endif /* MM_HAVE_TC */

#ifdef MM_HAVE_CUBLAS
static int mm_cublas_fail(struct align_dev *dev, const char *call, cublasStatus_t s, const char *file, int line)
{
	return align_fail(dev->err, ALIGN_ERR_INTERNAL, "%s failed: %s (%s) at %s:%d", call, cublasGetStatusString(s),
			  cublasGetStatusName(s), file, line);
}

#define MM_BLAS_TRY(call)                                                                                              \
	do {                                                                                                           \
		cublasStatus_t s_ = (call);                                                                            \
		if (s_ != CUBLAS_STATUS_SUCCESS)                                                                       \
			return mm_cublas_fail(dev, #call, s_, __FILE__, __LINE__);                                     \
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

/* t as the cublas engine's operand type into dst (rows x D): bf16 (lowp) or f32 */
static cudaError_t mm_cublas_stage(const struct align_tensor *t, int64_t rows, int64_t D, int lowp, void *dst,
				   cudaStream_t stream)
{
	return lowp ? mm_to_bf16(t, rows, D, (align_bf16 *)dst, D, stream)
		    : mm_widen((const align_bf16 *)t->data, rows * D, (float *)dst, stream);
}

/* cublas: y^T[F,T] (column-major, ld F) = b^T... as PyTorch's Linear: gemm(transa = T, transb = N, m = F,
 * n = T, k = D, A = b (ld D), B = a (ld D), C = y (ld F)); operand staging and types per matmul.h. The
 * context's handle; its stream and math mode are set on every call (other users set theirs). */
static int mm_fwd_cublas(struct align_dev *dev, const struct matmul_cfg *c, const struct align_tensor *a,
			 const struct align_tensor *b, struct align_tensor *y)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	const int64_t T = c->T, D = c->D, F = c->F;
	const int opd = c->operand, lowp = opd == ALIGN_MATMUL_OPERAND_BF16, y_bf16 = y->dtype == ALIGN_DT_BF16;
	const cudaDataType_t ab_type = lowp ? CUDA_R_16BF : CUDA_R_32F;
	const cudaDataType_t c_type = lowp && y_bf16 ? CUDA_R_16BF : CUDA_R_32F;
	const cublasComputeType_t compute =
		opd == ALIGN_MATMUL_OPERAND_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	const cublasMath_t math = opd == ALIGN_MATMUL_OPERAND_FP32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH;
	const size_t es = lowp ? sizeof(align_bf16) : sizeof(float);
	const int stage_a = lowp ? a->dtype != ALIGN_DT_BF16 : a->dtype != ALIGN_DT_F32;
	const int stage_b = lowp ? b->dtype != ALIGN_DT_BF16 : b->dtype != ALIGN_DT_F32;
	const int stage_y = !lowp && y_bf16; /* the fp32 result before its bf16 rounding */
	const size_t bytes[3] = {stage_a ? (size_t)(T * D) * es : 0, stage_b ? (size_t)(F * D) * es : 0,
				 stage_y ? (size_t)(T * F) * sizeof(float) : 0};
	const float one = 1.0f, zero = 0.0f;
	void *tmp[3], *hv = NULL;
	if (T > INT_MAX || D > INT_MAX || F > INT_MAX)
		return align_fail(dev->err, ALIGN_ERR_INPUT,
				  "matmul (cuda): MATMUL_IMPL=cublas takes T, D and F below 2^31");
	ALIGN_TRY(dev->err, mm_scratch(dev, bytes, tmp, 3));
	if (stage_a)
		MM_TRY(mm_cublas_stage(a, T, D, lowp, tmp[0], stream));
	if (stage_b)
		MM_TRY(mm_cublas_stage(b, F, D, lowp, tmp[1], stream));
	ALIGN_TRY(dev->err, align_dev_cublas(dev, &hv));
	cublasHandle_t h = (cublasHandle_t)hv;
	MM_BLAS_TRY(cublasSetStream(h, stream));
	MM_BLAS_TRY(cublasSetMathMode(h, math));
	MM_BLAS_TRY(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)F, (int)T, (int)D, &one, stage_b ? tmp[1] : b->data,
				 ab_type, (int)D, stage_a ? tmp[0] : a->data, ab_type, (int)D, &zero,
				 stage_y ? tmp[2] : y->data, c_type, (int)F, compute, CUBLAS_GEMM_DEFAULT));
	/* C (F x T, ld F) is all written (beta = 0); initcheck does not see cuBLAS's stores (dev.h) */
	align_dev_mark_written(dev, stage_y ? tmp[2] : y->data,
			       (size_t)(T * F) * (c_type == CUDA_R_16BF ? sizeof(align_bf16) : sizeof(float)));
	if (stage_y)
		MM_TRY(mm_round((const float *)tmp[2], T * F, (align_bf16 *)y->data, stream));
	return ALIGN_OK;
}

#define MM_PIN_ROWS 8192	     /* the n the pinned algorithm is chosen at (matmul.h) */
#define MM_PIN_WORKSPACE (32u << 20) /* the workspace the heuristic may plan for */

/* the cuBLASLt objects of one pinned call, destroyed by mm_lt_free */
struct mm_lt {
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, lc, lref, lcref;
	cublasLtMatmulPreference_t pref;
	cublasLtMatmulAlgo_t algo;
	size_t workspace; /* bytes the algorithm needs for the actual T */
};

static void mm_lt_free(struct mm_lt *p)
{
	if (p->pref)
		cublasLtMatmulPreferenceDestroy(p->pref);
	cublasLtMatrixLayout_t *ls[5] = {&p->la, &p->lb, &p->lc, &p->lref, &p->lcref};
	for (int i = 0; i < 5; i++)
		if (*ls[i])
			cublasLtMatrixLayoutDestroy(*ls[i]);
	if (p->desc)
		cublasLtMatmulDescDestroy(p->desc);
}

/* The pinned algorithm for (fp, kp, c_type), chosen at n = MM_PIN_ROWS, checked for T (matmul.h step 2). */
static int mm_lt_plan(struct align_dev *dev, cublasLtHandle_t h, struct mm_lt *p, int64_t T, int64_t kp, int64_t fp,
		      cudaDataType_t c_type, const struct matmul_cfg *c)
{
	const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	const size_t wmax = MM_PIN_WORKSPACE;
	const int one_split = 1;
	const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
	cublasLtMatmulHeuristicResult_t res[16], chk;
	int n = 0, chosen = -1;
	MM_BLAS_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	MM_BLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
	MM_BLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
	/* column-major views: A = b^T [kp, F], B = a^T [kp, T], C = y^T [F, T] */
	MM_BLAS_TRY(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, (uint64_t)kp, (uint64_t)fp, kp));
	MM_BLAS_TRY(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, (uint64_t)kp, (uint64_t)T, kp));
	MM_BLAS_TRY(cublasLtMatrixLayoutCreate(&p->lc, c_type, (uint64_t)fp, (uint64_t)T, fp));
	MM_BLAS_TRY(cublasLtMatrixLayoutCreate(&p->lref, CUDA_R_16BF, (uint64_t)kp, MM_PIN_ROWS, kp));
	MM_BLAS_TRY(cublasLtMatrixLayoutCreate(&p->lcref, c_type, (uint64_t)fp, MM_PIN_ROWS, fp));
	MM_BLAS_TRY(cublasLtMatmulPreferenceCreate(&p->pref));
	MM_BLAS_TRY(cublasLtMatmulPreferenceSetAttribute(p->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wmax,
							 sizeof wmax));
	MM_BLAS_TRY(
		cublasLtMatmulAlgoGetHeuristic(h, p->desc, p->la, p->lref, p->lcref, p->lcref, p->pref, 16, res, &n));
	for (int i = 0; i < n && chosen < 0; i++) {
		int splitk = 1;
		size_t got = 0;
		if (cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
							 sizeof splitk, &got) == CUBLAS_STATUS_SUCCESS &&
		    splitk <= 1)
			chosen = i;
	}
	if (chosen < 0)
		return align_fail(dev->err, ALIGN_ERR_UNSUPPORTED,
				  "matmul (cuda): cuBLASLt offers no algorithm without split-K for F=%lld, D=%lld "
				  "(MATMUL_IMPL=cublas_pinned)",
				  (long long)c->F, (long long)c->D);
	p->algo = res[chosen].algo;
	MM_BLAS_TRY(cublasLtMatmulAlgoConfigSetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split,
							 sizeof one_split));
	MM_BLAS_TRY(cublasLtMatmulAlgoConfigSetAttribute(&p->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &no_reduction,
							 sizeof no_reduction));
	if (cublasLtMatmulAlgoCheck(h, p->desc, p->la, p->lb, p->lc, p->lc, &p->algo, &chk) != CUBLAS_STATUS_SUCCESS ||
	    chk.workspaceSize > wmax)
		return align_fail(dev->err, ALIGN_ERR_UNSUPPORTED,
				  "matmul (cuda): the pinned cuBLASLt algorithm for F=%lld, D=%lld does not accept "
				  "T=%lld (MATMUL_IMPL=cublas_pinned)",
				  (long long)c->F, (long long)c->D, (long long)T);
	p->workspace = chk.workspaceSize;
	return ALIGN_OK;
}

/* cublas_pinned: the plan (mm_lt_plan), then the staged operands, the matmul and the copy out of a padded y */
static int mm_fwd_pinned_run(struct align_dev *dev, cublasLtHandle_t h, struct mm_lt *lt, const struct matmul_cfg *c,
			     const struct align_tensor *a, const struct align_tensor *b, struct align_tensor *y)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	const int64_t T = c->T, D = c->D, F = c->F, kp = (D + 7) / 8 * 8, fp = (F + 7) / 8 * 8; /* padded K, F */
	const int y_f32 = y->dtype == ALIGN_DT_F32;
	const cudaDataType_t c_type = y_f32 ? CUDA_R_32F : CUDA_R_16BF;
	const size_t es = y_f32 ? sizeof(float) : sizeof(align_bf16);
	const int stage_a = a->dtype != ALIGN_DT_BF16 || D % 8 != 0 || !mm_aligned(a->data, 16);
	const int stage_b = b->dtype != ALIGN_DT_BF16 || D % 8 != 0 || F != fp || !mm_aligned(b->data, 16);
	const int stage_y = F != fp || !mm_aligned(y->data, 16); /* y through a [T, fp] temporary */
	const float one = 1.0f, zero = 0.0f;
	void *tmp[4]; /* staged a, staged b, y, workspace */
	ALIGN_TRY(dev->err, mm_lt_plan(dev, h, lt, T, kp, fp, c_type, c));
	const size_t bytes[4] = {stage_a ? (size_t)(T * kp) * sizeof(align_bf16) : 0,
				 stage_b ? (size_t)(fp * kp) * sizeof(align_bf16) : 0,
				 stage_y ? (size_t)(T * fp) * es : 0, lt->workspace};
	ALIGN_TRY(dev->err, mm_scratch(dev, bytes, tmp, 4));
	if (stage_a)
		MM_TRY(mm_to_bf16(a, T, D, (align_bf16 *)tmp[0], kp, stream));
	if (stage_b) { /* rows F .. fp-1 stay zero: columns of y that are dropped */
		MM_TRY(cudaMemsetAsync(tmp[1], 0, bytes[1], stream));
		MM_TRY(mm_to_bf16(b, F, D, (align_bf16 *)tmp[1], kp, stream));
	}
	void *py = stage_y ? tmp[2] : y->data;
	MM_BLAS_TRY(cublasLtMatmul(h, lt->desc, &one, stage_b ? tmp[1] : b->data, lt->la, stage_a ? tmp[0] : a->data,
				   lt->lb, &zero, py, lt->lc, py, lt->lc, &lt->algo, tmp[3], lt->workspace, stream));
	/* D (fp x T, ld fp) is all written (beta = 0); initcheck does not see cuBLASLt's stores (dev.h) */
	align_dev_mark_written(dev, py, (size_t)(T * fp) * es);
	if (stage_y) /* the first F of each fp columns */
		MM_TRY(cudaMemcpy2DAsync(y->data, (size_t)F * es, tmp[2], (size_t)fp * es, (size_t)F * es, (size_t)T,
					 cudaMemcpyDeviceToDevice, stream));
	return ALIGN_OK;
}

/* cublas_pinned: cuBLASLt, one algorithm per (F, kp, output dtype) chosen at n = MM_PIN_ROWS (matmul.h), on
 * the context's handle */
static int mm_fwd_pinned(struct align_dev *dev, const struct matmul_cfg *c, const struct align_tensor *a,
			 const struct align_tensor *b, struct align_tensor *y)
{
	void *hv = NULL;
	if (c->T > INT_MAX || (c->D + 7) / 8 * 8 > INT_MAX || (c->F + 7) / 8 * 8 > INT_MAX)
		return align_fail(dev->err, ALIGN_ERR_INPUT,
				  "matmul (cuda): MATMUL_IMPL=cublas_pinned takes T, D and F below 2^31");
	ALIGN_TRY(dev->err, align_dev_cublaslt(dev, &hv));
	struct mm_lt lt;
	memset(&lt, 0, sizeof lt);
	int rc = mm_fwd_pinned_run(dev, (cublasLtHandle_t)hv, &lt, c, a, b, y);
	mm_lt_free(&lt);
	return rc;
}
#endif /* MM_HAVE_CUBLAS */

#if !defined(MM_HAVE_TC) || !defined(MM_HAVE_CUBLAS)
static int mm_not_built(struct align_dev *dev, int impl) /* emulator builds (tests/gpu/emu) */
{
	return align_fail(dev->err, ALIGN_ERR_UNSUPPORTED, "matmul (cuda): %s=%s is not built into the emulator",
			  modes_info(MODE_MATMUL_IMPL)->env, modes_value_name(MODE_MATMUL_IMPL, impl));
}
#endif

/* MATMUL_IMPL=tc, cublas or cublas_pinned on checked tensors (the config allows the engine): empty shapes,
 * D == 0 (y = +0), then the engine */
static int mm_fwd_engine(struct align_dev *dev, const struct matmul_cfg *c, const struct align_tensor *a,
			 const struct align_tensor *b, struct align_tensor *y)
{
	switch ((enum align_MATMUL_IMPL_value)c->impl) {
#ifndef MM_HAVE_TC
	case ALIGN_MATMUL_IMPL_TC:
		return mm_not_built(dev, c->impl);
#endif
#ifndef MM_HAVE_CUBLAS
	case ALIGN_MATMUL_IMPL_CUBLAS:
	case ALIGN_MATMUL_IMPL_CUBLAS_PINNED:
		return mm_not_built(dev, c->impl);
#endif
	default:
		break;
	}
	if (c->T == 0 || c->F == 0)
		return 0;
	if (c->D == 0) { /* every engine's empty sum: +0, as the portable engine */
		cudaError_t e = cudaMemsetAsync(y->data, 0, (size_t)(c->T * c->F) * align_dtype_size(y->dtype),
						(cudaStream_t)dev->stream);
		return e == cudaSuccess ? 0 : align_dev_fail(dev, "cudaMemsetAsync(y)", (int)e, __FILE__, __LINE__);
	}
	switch ((enum align_MATMUL_IMPL_value)c->impl) {
#ifdef MM_HAVE_TC
	case ALIGN_MATMUL_IMPL_TC:
		return mm_fwd_tc(dev, c, a, b, y);
#endif
#ifdef MM_HAVE_CUBLAS
	case ALIGN_MATMUL_IMPL_CUBLAS:
		return mm_fwd_cublas(dev, c, a, b, y);
	case ALIGN_MATMUL_IMPL_CUBLAS_PINNED:
		return mm_fwd_pinned(dev, c, a, b, y);
#endif
	default:
		(void)a, (void)b;
		return align_fail(dev->err, ALIGN_ERR_INTERNAL, "matmul (cuda): MATMUL_IMPL value %d not handled",
				  c->impl);
	}
}

extern "C" int matmul_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			       struct align_tensor *out, int n_out, const struct align_launch *launch,
			       struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	struct matmul_cfg c;
	if (launch && (launch->block < 0 || launch->rows_per_block < 0 || launch->grid_cap < 0 || launch->serial < 0))
		return align_fail(dev->err, ALIGN_ERR_INPUT, "matmul (cuda): negative launch knob");
	ALIGN_TRY(dev->err, matmul_cfg_init(&c, (const struct matmul_params *)params, m, in, n_in, out, n_out,
					    ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "matmul", in, n_in, out, n_out));
	if (c.impl != ALIGN_MATMUL_IMPL_PORTABLE) /* launch knobs do not apply to the GPU-only engines (matmul.h) */
		return mm_fwd_engine(dev, &c, &in[0], &in[1], &out[0]);
	struct matmul_cuda_gemm g;
	g.a = in[0].data;
	g.a_bf16 = in[0].dtype == ALIGN_DT_BF16;
	g.lda = c.D;
	g.b = in[1].data;
	g.b_bf16 = in[1].dtype == ALIGN_DT_BF16;
	g.ldb = c.D;
	g.y = out[0].data;
	g.y_bf16 = c.y_dtype == ALIGN_DT_BF16;
	g.ldy = c.F;
	g.m = c.T;
	g.n = c.F;
	g.k = c.D;
	g.opd_a = c.operand;
	g.opd_b = c.operand;
	g.accum = c.accum;
	g.fma = c.fma;
	g.tile = mm_pick_tile(launch, c.T, c.F);
	g.grid_cap = launch ? launch->grid_cap : 0;
	g.serial_block = launch && launch->serial ? (launch->block > 0 ? launch->block : 128) : 0;
	return matmul_cuda_gemm_run(&g, stream);
}
