/* mhc_cuda.cuh: device pieces shared by the CUDA twins of mhc_pre and mhc_head (kernels/ops/mhc_pre.cu,
 * kernels/ops/mhc_head.cu); the C twins' contract is in mhc_pre.h / mhc_head.h. Include from .cu only.
 *
 *   mhc_cuda_project   the mapping GEMM mix[T, R] = dot(x32[t], fn_r) on the portable tiled GEMM
 *                      (matmul_cuda.h), with the C twin's operand roundings and K order;
 *   mhc_block_sumsq    the pairwise (reduce.h PAIRWISE) sum of squares of one token's K values by a
 *                      whole CTA, bitwise equal to align_reduce_pairwise(x32, K, 1, 1);
 *   mhc_dev_rms, mhc_dev_exp, mhc_dev_sigmoid, mhc_dev_compute_h: steps 1, 3 and 4 of mhc_pre.h as
 *                      the C twin writes them;
 *   mhc_launch_*       the launch knobs (struct align_launch) of both twins.
 * The switches come decoded (struct mhc_modes of mhc_pre.h, built by mhc_modes_init in mhc_pre.c).
 *
 * Every binary32 / binary64 operation that can produce a NaN goes through nan_host.h (hn_add, hn_mul,
 * ...; fmaf through mm_hn_fmaf), so NaN results carry the host's bits, as ops_cuda.h requires; on
 * non-NaN values these are the plain IEEE operations. The numerics.h functions called here
 * (align_expf, align_exp2f, align_sqrtf, align_rsqrtf, bf16 rounding) return NaN only for a NaN
 * input, which they quiet with its payload kept, the same on both sides. mimic_exp_via_exp2f is
 * written out as align_exp2f(hn_mul(x, ALIGN_LOG2E_F)) for that reason (its plain product would
 * turn a NaN input into the device's canonical NaN).
 *
 * Parallel pairwise sum, why it equals the C twin's stack algorithm: PAIRWISE is the level-wise
 * tree (level l+1 node i = node 2i + node 2i+1 of level l, a last odd node carried up unchanged;
 * reduce.h states the equivalence and the recursive definition proves it: the first split point m
 * is a power of two, so every level's pairing inside [m, n) is the pairing of a fresh array). Let
 * L be the smallest power of two with ceil(K / L) <= the CTA size. Node i of level log2 L covers
 * [iL, min(K, (i+1)L)), an aligned range, so its value is the pairwise sum of that range: thread
 * i computes it with the C twin's stack loop (mhc_pairwise_sq_seq, a line-by-line copy that reads
 * bf16 instead of staged floats). The CTA then combines the nodes level by level in shared memory
 * (left + right, odd node carried: the C twin's merges and final fold are left + right too, which
 * also fixes which NaN wins). Squares are binary32 products of the exact bf16 -> f32 values, as
 * align__reduce_elt forms them.
 *
 * Launch knobs (struct align_launch), the same for both twins:
 *   block           threads per CTA of the per-token kernel: 0 -> 256; otherwise the nearest multiple
 *                   of 32 in [64, 1024] (Sinkhorn needs N*N <= 64 threads);
 *   rows_per_block  tokens per CTA (0 -> 1), processed one after another by all of the CTA's threads;
 *   grid_cap        at most this many CTAs in either kernel (they loop over tiles / token groups);
 *   serial          1: the reference path, one thread per token running the C twin's loops as written
 *                   (mapping dots, pairwise stack, Sinkhorn and all), block threads per CTA (128 when 0).
 */
#ifndef ALIGN_MHC_CUDA_CUH
#define ALIGN_MHC_CUDA_CUH

#include "math_cuda.cuh"
#include "matmul_cuda.h"
#include "matmul_dev.cuh"
#include "mhc_pre.h"
#include "ops_cuda.h"

/* align_reduce_pairwise(x32, n, 1, 1) with x32[i] = F(x[i]): the same stack, the same additions. */
__device__ __forceinline__ float mhc_pairwise_sq_seq(const align_bf16 *x, long long n)
{
	float val[64];
	long long cnt[64]; /* number of elements summed in each stack slot: a power of two */
	int top = 0;
	if (n <= 0)
		return 0.0f;
	for (long long i = 0; i < n; i++) {
		float e = align_bf16_to_f32(x[i]);
		float v = hn_mul(e, e);
		long long c = 1;
		while (top > 0 && cnt[top - 1] == c) {
			v = hn_add(val[top - 1], v);
			c *= 2;
			top--;
		}
		val[top] = v;
		cnt[top] = c;
		top++;
	}
	float s = val[top - 1];
	for (int j = top - 2; j >= 0; j--)
		s = hn_add(val[j], s);
	return s;
}

/* Pairwise sum of squares of the K bf16 values at x by all blockDim.x threads of the CTA (every
 * thread must call it); every thread gets the result. red: 2 x blockDim.x floats of shared memory. */
__device__ __forceinline__ float mhc_block_sumsq(const align_bf16 *x, long long K, float *red)
{
	const int tid = threadIdx.x, nt = blockDim.x;
	long long L = 1;
	while ((K + L - 1) / L > nt)
		L *= 2;
	int c = (int)((K + L - 1) / L); /* nodes at level log2 L */
	if (tid < c) {
		long long s = (long long)tid * L, len = K - s < L ? K - s : L;
		red[tid] = mhc_pairwise_sq_seq(x + s, len);
	}
	int src = 0;
	while (c > 1) {
		__syncthreads();
		int nc = (c + 1) / 2;
		float *from = red + src * nt, *to = red + (src ^ 1) * nt;
		if (tid < nc)
			to[tid] = 2 * tid + 1 < c ? hn_add(from[2 * tid], from[2 * tid + 1]) : from[2 * tid];
		src ^= 1;
		c = nc;
	}
	__syncthreads();
	float ss = K > 0 ? red[src * nt] : 0.0f;
	__syncthreads(); /* red may be reused after the return */
	return ss;
}

/* mhc_rms_factor after the sum (mhc_pre.h step 1): the C twin's expression */
__device__ __forceinline__ float mhc_dev_rms(float ss, long long k, int inv_rms, float eps)
{
	float q = hn_div(ss, (float)k);
	return inv_rms ? hn_div(1.0f, hn_add(align_sqrtf(q), eps)) : align_rsqrtf(hn_add(q, eps));
}

/* the e() mode word of the kernels from the decoded switches: bit 0 = MHC_EXP=exp2, bits 1.. = the
 * ALIGN_MATH_IMPL_* value */
static inline int mhc_emode(const struct mhc_modes *c)
{
	return c->exp2 | (c->math << 1);
}

/* mhc_exp of mhc_pre.c: exp(x), or exp2(x * log2e) with a binary32 product; portable numerics.h
 * (bitwise the C twin) or, for the GPU-only MATH_IMPL=cuda / cuda_fast, CUDA's expf / exp2f
 * (math_cuda.cuh). libm has no device twin: the configs refuse it (ops_cfg_math). */
__device__ __forceinline__ float mhc_dev_exp(float x, int emode)
{
	int math = emode >> 1;
	return emode & 1 ? dm_exp2f(math, hn_mul(x, ALIGN_LOG2E_F)) : dm_expf(math, x);
}

/* mhc_sigmoid: 1.0f / (1.0f + e(-z)) */
__device__ __forceinline__ float mhc_dev_sigmoid(float z, int emode)
{
	return hn_div(1.0f, hn_add(1.0f, mhc_dev_exp(hn_neg(z), emode)));
}

/* mhc_compute_h (mhc_pre.h step 3) */
__device__ __forceinline__ float mhc_dev_compute_h(float mix, float rs, float scale, float base, int fma)
{
	float p = hn_mul(mix, rs);
	return fma ? mm_hn_fmaf(p, scale, base) : hn_add(hn_mul(p, scale), base);
}

/* mhc_project of mhc_pre.c for all T tokens: mix[t * rows + r] = dot(xq_t, row_r), the portable GEMM
 * (matmul_cuda.h) in the order and operand roundings of the decoded switches c (accum, opd_x; fn as
 * stored with opd_fn), no FMA. x: [T, k] bf16, fn: [rows, k] f32, mix: [T, rows] f32, device pointers. */
static inline int mhc_cuda_project(const void *x, const void *fn, float *mix, int64_t T, int64_t rows, int64_t k,
				   const struct mhc_modes *c, int grid_cap, cudaStream_t stream)
{
	struct matmul_cuda_gemm g;
	g.a = x;
	g.a_bf16 = 1;
	g.lda = k;
	g.b = fn;
	g.b_bf16 = 0;
	g.ldb = k;
	g.y = mix;
	g.y_bf16 = 0;
	g.ldy = rows;
	g.m = T;
	g.n = rows;
	g.k = k;
	g.opd_a = c->opd_x;
	g.opd_b = c->opd_fn;
	g.accum = c->accum;
	g.fma = 0;
	g.tile = rows <= 4 ? MATMUL_TILE_NARROW : MATMUL_TILE_SKINNY;
	g.grid_cap = grid_cap;
	g.serial_block = 0;
	return matmul_cuda_gemm_run(&g, stream);
}

/* ---- launch knobs ---- */

struct mhc_launch {
	int threads;  /* per CTA */
	int rows;     /* tokens per CTA */
	int grid_cap; /* 0: none */
	int serial;   /* 1: reference path */
};

static inline int mhc_launch_resolve(const char *op, const struct align_launch *l, struct mhc_launch *r,
				     struct align_err *err)
{
	r->threads = 256;
	r->rows = 1;
	r->grid_cap = 0;
	r->serial = 0;
	if (!l)
		return 0;
	if (l->block < 0 || l->rows_per_block < 0 || l->grid_cap < 0 || l->serial < 0)
		return align_fail(err, ALIGN_ERR_INPUT, "%s (cuda): negative launch knob", op);
	r->serial = l->serial != 0;
	if (r->serial) {
		r->threads = l->block > 0 ? (l->block > 1024 ? 1024 : l->block) : 128;
	} else if (l->block > 0) {
		int t = (l->block + 16) / 32 * 32;
		r->threads = t < 64 ? 64 : t > 1024 ? 1024 : t;
	}
	r->rows = l->rows_per_block > 0 ? l->rows_per_block : 1;
	r->grid_cap = l->grid_cap;
	return 0;
}

/* CTAs for `work` units, at most cap (0: no cap) */
static inline unsigned mhc_grid(long long work, int cap)
{
	long long n = work < 1 ? 1 : work;
	if (cap > 0 && n > cap)
		n = cap;
	if (n > 0x7fffffff)
		n = 0x7fffffff;
	return (unsigned)n;
}

#endif /* ALIGN_MHC_CUDA_CUH */
