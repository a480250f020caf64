/* mhc_pre.cu: CUDA twin of mHC hc_pre (contract in mhc_pre.h, C twin mhc_pre.c), bitwise equal to
 * the C twin in every mode it accepts; MATH_IMPL=libm (glibc expf on the CPU) has no device twin
 * and returns ALIGN_ERR_UNSUPPORTED (4); MATH_IMPL=cuda / cuda_fast (GPU only) use CUDA's expf / exp2f
 * (mhc_dev_exp, math_cuda.cuh).
 *
 * x[T,N,D] bf16, fn[(2+N)N, ND] f32, base[(2+N)N] f32, scale[3] f32
 *   -> y[T,D] bf16, pre[T,N] f32, post[T,N] f32, comb[T,N,N] f32.
 *
 * Two kernels per call:
 *   1. the mapping GEMM mix[T, R] (R = (2+N)N) on the portable tiled GEMM (mhc_cuda_project): each
 *      (token, row) dot walks k = 0..ND-1 in the C twin's order (seq, or 16 chunks then the chunk
 *      sums), same operand roundings, no FMA; see kernels/ops/matmul.cu for why it is bitwise equal;
 *   2. one CTA (256 threads by default) per token (mhc_pre_token_kernel):
 *      - rs: parallel pairwise sum of squares (mhc_block_sumsq, the C twin's order exactly), then
 *        the C twin's RMS formula;
 *      - h_r = compute_h(mix_r, rs, scale_c, base_r) (mhc_pre.h step 3), thread r;
 *      - pre/post: thread i < N, the C twin's sigmoid and eps expressions;
 *      - Sinkhorn: thread j*N+k owns M[j][k]; every row or column sum is recomputed by each of its
 *        threads from shared memory in the C twin's order (left to right, or torch_order.h's for
 *        MHC_SUM_ORDER=torch), the owner divides its own
 *        element by the C twin's divisor; barriers separate reads from writes;
 *      - y_d = R(sum_j pre'_j x[j,d]) left to right, threads striding over d.
 *   Mix goes through a stream-ordered workspace (cudaMallocAsync, T R floats). NaN results carry
 *   the host's bits (nan_host.h; see mhc_cuda.cuh). Launch knobs: mhc_cuda.cuh. The serial path
 *   (launch->serial) is one thread per token running mhc_pre.c's loops as written
 *   (mhc_pre_token_serial), mapping dots included, with no workspace.
 *
 * Napkin maths (DSv4-Flash N = 4, D = 4096, K = 16384, R = 24, T = 4096): GEMM 2 T R K = 3.2 GFLOP
 * as separate FMUL + FADD (the contract forbids FMA), i.e. 3.2 G instructions at 128 lanes/clk/SM
 * = 33.5 T/s on an H100 -> ~0.1 ms at the issue limit; it cannot use K-parallelism in seq mode
 * (each dot is a 16384-long dependent chain), so small T is latency bound (~16384 x 8 clk ~ 70 us).
 * The per-token kernel reads x twice (2 K bytes each, 2 x 128 MiB at T = 4096 -> ~0.09 ms at
 * 3 TB/s) and runs ~1.3k sequential-per-thread Sinkhorn steps per token (20 rounds x 2 x (N adds
 * + 1 division) + barriers), spread over T CTAs. Expected ~0.2-0.4 ms at T = 4096.
 *
 * Build: kernels/meson.build. Check: the generic CUDA-vs-C driver in tests/gpu.
 */
#include <stdio.h>

#include "mhc_cuda.cuh"
#include "torch_order.h"

struct mhc_pre_args {
	const align_bf16 *x;
	const float *fn;  /* [R, K] (serial path) */
	const float *mix; /* [T, R] (parallel path) */
	const float *base;
	const float *scale;
	align_bf16 *y;
	float *pre, *post, *comb;
	long long T, K; /* K = N * D */
	int N, D;
	int rows; /* tokens per CTA */
	int iters;
	float hc_eps, norm_eps;
	int inv_rms, exp2, computeh_fma, param_bf16, coef_bf16, hpre_eps, hpost_eps, contract, gemm;
	int torch_sums; /* MHC_SUM_ORDER=torch */
};

/* the divisor of one Sinkhorn step for line sum s. mode: 1 = s + eps, 2 = max(s, eps) */
__device__ __forceinline__ float mhc_sk_div(float s, int mode, float eps)
{
	return mode == 2 ? (s > eps ? s : eps) : hn_add(s, eps);
}

/* a line sum of the Sinkhorn (mhc_pre.c row_sum / col_sum; c1's first row step sums the softmax
 * denominator, which MHC_SUM_ORDER=torch takes from torch_softmax_sum) */
__device__ __forceinline__ float mhc_sk_sum(const float *M, int n, int cols, int line, int softmax, int torch)
{
	if (torch)
		return cols ? torch_sum_strided(M + line, n, n)
			    : softmax ? torch_softmax_sum(M + line * n, 1, n) : torch_sum_lastdim(M + line * n, 1, n);
	const float *v = cols ? M + line : M + line * n;
	const int st = cols ? n : 1;
	float s = v[0];
	for (int i = 1; i < n; i++)
		s = hn_add(s, v[i * st]);
	return s;
}

/* One Sinkhorn normalisation of rows (cols = 0) or columns (cols = 1) of the n x n matrix M (shared);
 * thread tid < n*n owns element tid and sums its line itself (mhc_sk_sum). mode: 0 = "v / s + eps"
 * (c1 first row step), 1 = "v / (s + eps)", 2 = "v / max(s, eps)". All threads must call it. */
__device__ __forceinline__ void mhc_sk_step(float *M, int n, int cols, int mode, float eps, int torch)
{
	const int tid = threadIdx.x;
	float mine = 0.0f;
	if (tid < n * n) {
		int j = tid / n, k = tid % n;
		float s = mhc_sk_sum(M, n, cols, cols ? k : j, mode == 0, torch);
		mine = mode == 0 ? hn_add(hn_div(M[tid], s), eps) : hn_div(M[tid], mhc_sk_div(s, mode, eps));
	}
	__syncthreads();
	if (tid < n * n)
		M[tid] = mine;
	__syncthreads();
}

/* sinkhorn() of mhc_pre.c on the n x n matrix M (shared), by the whole CTA */
__device__ __forceinline__ void mhc_sinkhorn(float *M, int n, int contract, int iters, float eps, int exp2,
					     int torch)
{
	const int tid = threadIdx.x;
	float mine = 0.0f;
	if (tid < n * n) {
		int j = tid / n;
		float mx = M[j * n];
		for (int k = 1; k < n; k++)
			mx = M[j * n + k] > mx ? M[j * n + k] : mx;
		mine = mhc_dev_exp(hn_sub(M[tid], mx), exp2);
	}
	__syncthreads();
	if (tid < n * n)
		M[tid] = mine;
	__syncthreads();
	int rounds = iters;
	if (contract == 0) { /* c1: softmax + eps, a column step, then iters - 1 full rounds */
		mhc_sk_step(M, n, 0, 0, eps, torch);
		mhc_sk_step(M, n, 1, 1, eps, torch);
		rounds -= 1;
	}
	const int mode = contract == 1 ? 2 : 1;
	for (int it = 0; it < rounds; it++) {
		mhc_sk_step(M, n, 0, mode, eps, torch);
		mhc_sk_step(M, n, 1, mode, eps, torch);
	}
}

/* h_r for r < R from mix (mhc_pre.h steps 0 and 3) */
__device__ __forceinline__ float mhc_pre_h(const struct mhc_pre_args &a, int r, float mix, float rs)
{
	const int N = a.N;
	float sc = a.scale[r < N ? 0 : r < 2 * N ? 1 : 2], bs = a.base[r];
	if (a.param_bf16) {
		sc = align_round_bf16(sc);
		bs = align_round_bf16(bs);
	}
	return mhc_dev_compute_h(mix, rs, sc, bs, a.computeh_fma);
}

/* pre_i and post_i (mhc_pre.h step 4) from h */
__device__ __forceinline__ void mhc_pre_coefs(const struct mhc_pre_args &a, const float *h, int i, float *pv,
					      float *qv)
{
	float sp = mhc_dev_sigmoid(h[i], a.exp2), so = mhc_dev_sigmoid(h[a.N + i], a.exp2);
	*pv = a.hpre_eps == 0 ? hn_add(sp, a.hc_eps) : sp;
	*qv = a.hpost_eps == 0 ? hn_mul(2.0f, so) : hn_mul(2.0f, hn_add(so, a.hc_eps));
}

/* y_d = R(sum_j coef_j x[j, d]) left to right (mhc_pre.h step 6) */
__device__ __forceinline__ void mhc_pre_y(const struct mhc_pre_args &a, const float *coef, long long t, int d)
{
	const align_bf16 *xt = a.x + t * a.K;
	float acc = hn_mul(coef[0], align_bf16_to_f32(xt[d]));
	for (int j = 1; j < a.N; j++)
		acc = hn_add(acc, hn_mul(coef[j], align_bf16_to_f32(xt[(long long)j * a.D + d])));
	a.y[t * a.D + d] = align_f32_to_bf16(acc);
}

/* dynamic shared memory: h[80] | M[64] | coef[8] | red[2 * blockDim.x] floats */
#define MHC_PRE_SMEM_FLOATS ((2 + MHC_MAX_N) * MHC_MAX_N + MHC_MAX_N * MHC_MAX_N + MHC_MAX_N)

__global__ void mhc_pre_token_kernel(const struct mhc_pre_args a)
{
	float *h = (float *)align_cuda_dyn_smem();
	float *M = h + (2 + MHC_MAX_N) * MHC_MAX_N;
	float *coef = M + MHC_MAX_N * MHC_MAX_N;
	float *red = coef + MHC_MAX_N;
	const int tid = threadIdx.x, nt = blockDim.x, N = a.N, R = (2 + N) * N;
	const long long groups = (a.T + a.rows - 1) / a.rows;
	for (long long grp = blockIdx.x; grp < groups; grp += gridDim.x)
		for (long long t = grp * a.rows; t < (grp + 1) * a.rows && t < a.T; t++) {
			const float ss = mhc_block_sumsq(a.x + t * a.K, a.K, red);
			const float rs = mhc_dev_rms(ss, a.K, a.inv_rms, a.norm_eps);
			for (int r = tid; r < R; r += nt)
				h[r] = mhc_pre_h(a, r, a.mix[t * R + r], rs);
			__syncthreads();
			if (tid < N) {
				float pv, qv;
				mhc_pre_coefs(a, h, tid, &pv, &qv);
				a.pre[t * N + tid] = pv;
				a.post[t * N + tid] = qv;
				coef[tid] = a.coef_bf16 ? align_round_bf16(pv) : pv;
			}
			if (tid < N * N)
				M[tid] = h[2 * N + tid];
			__syncthreads();
			mhc_sinkhorn(M, N, a.contract, a.iters, a.hc_eps, a.exp2, a.torch_sums);
			if (tid < N * N)
				a.comb[t * N * N + tid] = M[tid];
			for (int d = tid; d < a.D; d += nt)
				mhc_pre_y(a, coef, t, d);
			__syncthreads(); /* h, M, coef are rewritten by the next token */
		}
}

/* sinkhorn() of mhc_pre.c as written, in one thread */
__device__ void mhc_sinkhorn_serial(float *M, int n, int contract, int iters, float eps, int exp2, int torch)
{
	for (int j = 0; j < n; j++) {
		float mx = M[j * n];
		for (int k = 1; k < n; k++)
			mx = M[j * n + k] > mx ? M[j * n + k] : mx;
		for (int k = 0; k < n; k++)
			M[j * n + k] = mhc_dev_exp(hn_sub(M[j * n + k], mx), exp2);
	}
	int rounds = iters;
	if (contract == 0) {
		for (int j = 0; j < n; j++) {
			float s = mhc_sk_sum(M, n, 0, j, 1, torch);
			for (int k = 0; k < n; k++)
				M[j * n + k] = hn_add(hn_div(M[j * n + k], s), eps);
		}
		for (int k = 0; k < n; k++) {
			float s = mhc_sk_sum(M, n, 1, k, 0, torch);
			for (int j = 0; j < n; j++)
				M[j * n + k] = hn_div(M[j * n + k], hn_add(s, eps));
		}
		rounds -= 1;
	}
	const int mode = contract == 1 ? 2 : 1;
	for (int it = 0; it < rounds; it++) {
		for (int j = 0; j < n; j++) {
			float d = mhc_sk_div(mhc_sk_sum(M, n, 0, j, 0, torch), mode, eps);
			for (int k = 0; k < n; k++)
				M[j * n + k] = hn_div(M[j * n + k], d);
		}
		for (int k = 0; k < n; k++) {
			float d = mhc_sk_div(mhc_sk_sum(M, n, 1, k, 0, torch), mode, eps);
			for (int j = 0; j < n; j++)
				M[j * n + k] = hn_div(M[j * n + k], d);
		}
	}
}

/* The reference path: token t by one thread, mhc_pre_fwd_cpu's loop body as written. */
__global__ void mhc_pre_serial_kernel(const struct mhc_pre_args a)
{
	const int N = a.N, R = (2 + N) * N;
	const int ox = mhc_opd_x(a.gemm), ofn = mhc_opd_fn(a.gemm, a.param_bf16);
	const int acc = a.gemm == 0 ? MATMUL_ACC_SEQ : MATMUL_ACC_SPLIT16;
	for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < a.T;
	     t += (long long)gridDim.x * blockDim.x) {
		const align_bf16 *xt = a.x + t * a.K;
		float h[(2 + MHC_MAX_N) * MHC_MAX_N], coef[MHC_MAX_N];
		const float rs = mhc_dev_rms(mhc_pairwise_sq_seq(xt, a.K), a.K, a.inv_rms, a.norm_eps);
		for (int r = 0; r < R; r++)
			h[r] = mhc_pre_h(a, r, mm_dot_ref(xt, 1, a.fn + (long long)r * a.K, 0, a.K, ox, ofn, acc, 0), rs);
		for (int i = 0; i < N; i++) {
			float pv, qv;
			mhc_pre_coefs(a, h, i, &pv, &qv);
			a.pre[t * N + i] = pv;
			a.post[t * N + i] = qv;
			coef[i] = a.coef_bf16 ? align_round_bf16(pv) : pv;
		}
		float *M = a.comb + t * N * N;
		for (int i = 0; i < N * N; i++)
			M[i] = h[2 * N + i];
		mhc_sinkhorn_serial(M, N, a.contract, a.iters, a.hc_eps, a.exp2, a.torch_sums);
		for (int d = 0; d < a.D; d++)
			mhc_pre_y(a, coef, t, d);
	}
}

static int mhc_pre_check(const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out)
{
	if (n_in != 4 || n_out != 4 || in[0].ndim != 3)
		return ops_cuda_bad_input("mhc_pre", "expects x[T,N,D], fn, base, scale -> y, pre, post, comb");
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2], K = N * D, R = (2 + N) * N;
	int64_t xs[3] = {T, N, D}, fs[2] = {R, K}, bs[1] = {R}, ss[1] = {3}, ys[2] = {T, D}, ns[2] = {T, N},
		cs[3] = {T, N, N};
	if (N < 1 || N > MHC_MAX_N || ops_check(&in[0], ALIGN_DT_BF16, 3, xs) ||
	    ops_check(&in[1], ALIGN_DT_F32, 2, fs) || ops_check(&in[2], ALIGN_DT_F32, 1, bs) ||
	    ops_check(&in[3], ALIGN_DT_F32, 1, ss) || ops_check(&out[0], ALIGN_DT_BF16, 2, ys) ||
	    ops_check(&out[1], ALIGN_DT_F32, 2, ns) || ops_check(&out[2], ALIGN_DT_F32, 2, ns) ||
	    ops_check(&out[3], ALIGN_DT_F32, 3, cs))
		return ops_cuda_bad_input("mhc_pre", "shape or dtype mismatch (N must be 1..8)");
	if (T > 0x7fffffff || D > 0x7fffffff || K > 0x7fffffff)
		return ops_cuda_bad_input("mhc_pre", "T, D or N*D too large");
	return 0;
}

extern "C" int mhc_pre_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	const struct mhc_params *p = (const struct mhc_params *)params;
	if (!p || !m || !in || !out)
		return ops_cuda_bad_input("mhc_pre", "NULL argument");
	int rc = mhc_pre_check(in, n_in, out, n_out);
	if (rc)
		return rc;
	struct mhc_launch L;
	if ((rc = mhc_launch_resolve("mhc_pre", launch, &L)))
		return rc;
	if (m->v[MODE_MATH_IMPL] == ALIGN_MATH_IMPL_LIBM)
		return ops_cuda_unsupported("mhc_pre", m, MODE_MATH_IMPL);
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2], K = N * D, R = (2 + N) * N;
	if (T == 0)
		return 0;
	struct mhc_pre_args a;
	a.x = (const align_bf16 *)in[0].data;
	a.fn = (const float *)in[1].data;
	a.mix = NULL;
	a.base = (const float *)in[2].data;
	a.scale = (const float *)in[3].data;
	a.y = (align_bf16 *)out[0].data;
	a.pre = (float *)out[1].data;
	a.post = (float *)out[2].data;
	a.comb = (float *)out[3].data;
	a.T = T;
	a.K = K;
	a.N = (int)N;
	a.D = (int)D;
	a.rows = L.rows;
	a.iters = p->sinkhorn_iters;
	a.hc_eps = p->hc_eps;
	a.norm_eps = p->norm_eps;
	a.inv_rms = m->v[MODE_MHC_RMS_FORM] == ALIGN_MHC_RMS_FORM_INV_RMS;
	a.exp2 = mhc_emode(m); /* MHC_EXP and MATH_IMPL */
	a.computeh_fma = m->v[MODE_MHC_COMPUTEH_FMA] == ALIGN_MHC_COMPUTEH_FMA_ON;
	a.param_bf16 = m->v[MODE_MHC_PARAM] == ALIGN_MHC_PARAM_BF16;
	a.coef_bf16 = m->v[MODE_MHC_COEF] == ALIGN_MHC_COEF_BF16;
	a.hpre_eps = m->v[MODE_MHC_HPRE_EPS];
	a.hpost_eps = m->v[MODE_MHC_HPOST_EPS];
	a.contract = m->v[MODE_MHC_SINKHORN];
	a.torch_sums = m->v[MODE_MHC_SUM_ORDER] == ALIGN_MHC_SUM_ORDER_TORCH;
	a.gemm = m->v[MODE_MHC_PROJ_GEMM];
	if (L.serial) {
		ALIGN_CUDA_LAUNCH(mhc_pre_serial_kernel, mhc_grid((T + L.threads - 1) / L.threads, L.grid_cap), L.threads,
				  0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_pre_serial_kernel */
		return 0;
	}
	float *mix = NULL;
	OPS_CUDA_TRY(cudaMallocAsync((void **)&mix, (size_t)(T * R) * sizeof(float), stream));
	a.mix = mix;
	rc = mhc_cuda_project(a.x, a.fn, mix, T, R, K, a.gemm, a.param_bf16, L.grid_cap, stream);
	if (rc == 0) {
		ALIGN_CUDA_LAUNCH(mhc_pre_token_kernel, mhc_grid((T + L.rows - 1) / L.rows, L.grid_cap), L.threads,
				  (MHC_PRE_SMEM_FLOATS + 2 * L.threads) * sizeof(float), stream, a);
		cudaError_t e = cudaGetLastError(); /* the launch of mhc_pre_token_kernel */
		if (e != cudaSuccess)
			rc = ops_cuda_fail("mhc_pre_token_kernel<<<...>>>", e, __FILE__, __LINE__);
	}
	cudaError_t e = cudaFreeAsync(mix, stream);
	if (rc)
		return rc;
	if (e != cudaSuccess)
		return ops_cuda_fail("cudaFreeAsync(mix, stream)", e, __FILE__, __LINE__);
	return 0;
}
