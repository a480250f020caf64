/* mhc_cuda.cuh: device pieces shared by the CUDA twins of mhc_pre and mhc_head (kernels/ops/mhc_pre.cu,
 * kernels/ops/mhc_head.cu); the C twins' contract is in mhc_pre.h / mhc_head.h. Include from .cu only.
 *
 *   mhc_pairwise_sq_seq the pairwise (reduce.h PAIRWISE) sum of squares of one token's K values by one
 *                      thread, the C twin's stack loop (serial paths, NaN recomputes);
 *   mhc_block_y        y_d = R(sum_j coef_j x[j, d]) for a batch of tokens by a whole CTA (mhc_pre.h
 *                      step 6, mhc_head.h), 8 outputs per thread with 16-byte loads where aligned;
 *   mhc_dev_rms, mhc_dev_exp, mhc_dev_sigmoid, mhc_dev_compute_h: steps 1, 3 and 4 of mhc_pre.h as
 *                      the C twin writes them;
 *   mhc_launch_*       the launch knobs (struct align_launch) of both twins.
 * The mapping GEMM and the fused sums of squares are mhc_project.cuh's (mhc_cuda_project).
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
 * Launch knobs (struct align_launch), the same for both twins:
 *   block           threads per CTA of the per-token kernel: 0 -> 256; otherwise the nearest multiple
 *                   of 32 in [64, 1024]; for the mapping GEMM (mhc_project.cuh) it picks the R <= 24
 *                   variant: 0 or >= 96 threads -> two tokens per thread (pair), 64 -> one;
 *   rows_per_block  tokens per CTA of the per-token kernel (0 -> MHC_Y_ROWS in mhc_pre.cu / mhc_head.cu;
 *                   struct mhc_launch keeps 1 for the backward twins), taken MHC_Y_BATCH at a time;
 *   grid_cap        at most this many CTAs in every kernel (they loop over tiles / token groups);
 *   serial          1: the reference path, one thread per token running the C twin's loops as written
 *                   (mapping dots, pairwise stack, Sinkhorn and all), block threads per CTA (128 when 0).
 */
#ifndef ALIGN_MHC_CUDA_CUH
#define ALIGN_MHC_CUDA_CUH

#include "math_cuda.cuh"
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

/* tokens whose coefficients a per-token CTA holds at a time (shared memory), and the default tokens
 * per CTA of mhc_pre / mhc_head's per-token kernels */
#define MHC_Y_BATCH 32
#define MHC_Y_ROWS 32

/* y_d of one token with nan_host.h's operators (host NaN bits): xt = the token's row, c its coefficients */
static __device__ MM_NOINLINE float mhc_y_ref(const align_bf16 *xt, const float *c, int N, int D, int d)
{
	float acc = hn_mul(c[0], align_bf16_to_f32(xt[d]));
	for (int j = 1; j < N; j++)
		acc = hn_add(acc, hn_mul(c[j], align_bf16_to_f32(xt[(long long)j * D + d])));
	return acc;
}

/* y[t, d] = R(coef_0 x[t, 0, d] + coef_1 x[t, 1, d] + ...) left to right (mhc_pre.h step 6, the C
 * twins' loops) for the nb tokens t0 .. t0 + nb - 1, coef[i * N + j] (shared memory) the coefficients of
 * token t0 + i, by all threads of the CTA; vec: D % 8 == 0 and x, y 16-byte aligned (8 outputs per
 * item, one 16-byte load per stream), else one output per item. The plain operators run; NaN is sticky
 * through + and *, so an output is NaN exactly when some step was, and only those are recomputed with
 * the host's NaN rules (mhc_y_ref). */
__device__ __forceinline__ void mhc_block_y(const align_bf16 *x, align_bf16 *y, const float *coef, long long t0, int nb,
					    int N, int D, int vec)
{
	const long long K = (long long)N * D;
	if (vec) {
		const int dv = D / 8;
		for (long long it = threadIdx.x; it < (long long)nb * dv; it += blockDim.x) {
			const int i = (int)(it / dv), d = (int)(it % dv) * 8;
			const float *c = coef + i * N;
			const align_bf16 *xt = x + (t0 + i) * K;
			uint4 u[MHC_MAX_N];
#pragma unroll
			for (int j = 0; j < MHC_MAX_N; j++)
				if (j < N)
					u[j] = __ldg((const uint4 *)(xt + (long long)j * D + d));
			float acc[8];
#pragma unroll
			for (int j = 0; j < MHC_MAX_N; j++) {
				if (j >= N)
					break;
				const float cj = c[j];
				const unsigned w[4] = {u[j].x, u[j].y, u[j].z, u[j].w};
#pragma unroll
				for (int e = 0; e < 8; e++) {
					float p = cj * align_bits_f32(e & 1 ? w[e / 2] & 0xffff0000u : w[e / 2] << 16);
					acc[e] = j ? acc[e] + p : p;
				}
			}
			unsigned o[4];
#pragma unroll
			for (int q = 0; q < 4; q++) {
				float lo = acc[2 * q], hi = acc[2 * q + 1];
				if (align_isnanf(lo))
					lo = mhc_y_ref(xt, c, N, D, d + 2 * q);
				if (align_isnanf(hi))
					hi = mhc_y_ref(xt, c, N, D, d + 2 * q + 1);
				o[q] = (unsigned)align_f32_to_bf16(lo) | (unsigned)align_f32_to_bf16(hi) << 16;
			}
			*(uint4 *)(y + (t0 + i) * D + d) = make_uint4(o[0], o[1], o[2], o[3]);
		}
		return;
	}
	for (long long it = threadIdx.x; it < (long long)nb * D; it += blockDim.x) {
		const int i = (int)(it / D), d = (int)(it % D);
		y[(t0 + i) * D + d] = align_f32_to_bf16(mhc_y_ref(x + (t0 + i) * K, coef + i * N, N, D, d));
	}
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
