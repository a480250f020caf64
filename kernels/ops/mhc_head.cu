/* mhc_head.cu: CUDA twin of mHC hc_head (contract in mhc_head.h, C twin mhc_head.c), bitwise equal to
 * the C twin in every mode it accepts; MATH_IMPL=libm has no device twin (returns 4).
 *
 * x[T,N,D] bf16, fn[N, ND] f32, base[N] f32, scale[1] f32 -> y[T,D] bf16.
 *
 * Two kernels per call, the pieces of mhc_pre.cu (mhc_cuda.cuh):
 *   1. mix[T, N] = the mapping GEMM (portable tiled GEMM, NARROW tile for N <= 4), the C twin's
 *      K order and operand roundings;
 *   2. one CTA (256 threads by default) per token: rs by the parallel pairwise sum of squares (the
 *      C twin's order), pre_i = sigmoid(compute_h(mix_i, rs, scale, base_i)) + hc_eps (rounded to
 *      bf16 when MHC_COEF=bf16) by thread i < N, then y_d = R(pre_0 x[0,d] + pre_1 x[1,d] + ...)
 *      left to right, threads striding over d.
 *   NaN results carry the host's bits (nan_host.h). Launch knobs: mhc_cuda.cuh; the serial path is
 *   one thread per token running mhc_head.c's loop body as written.
 *
 * Napkin maths (N = 4, D = 4096, T = 4096): GEMM 2 T N K = 0.54 GFLOP as FMUL + FADD (~20 us at the
 * issue limit, but only T N = 16k dependent K-long chains: latency bound, ~16384 x 8 clk / wave);
 * the token kernel reads x twice (2 x 128 MiB, ~0.09 ms at 3 TB/s). Once per forward pass.
 *
 * Build: kernels/meson.build. Check: the generic CUDA-vs-C driver in tests/gpu.
 */
#include <stdio.h>

#include "mhc_cuda.cuh"

struct mhc_head_args {
	const align_bf16 *x;
	const float *fn;  /* [N, K] (serial path) */
	const float *mix; /* [T, N] (parallel path) */
	const float *base;
	const float *scale;
	align_bf16 *y;
	long long T, K; /* K = N * D */
	int N, D;
	int rows; /* tokens per CTA */
	float hc_eps, norm_eps;
	int inv_rms, exp2, computeh_fma, param_bf16, coef_bf16, gemm;
};

/* pre_i of mhc_head.c: sigmoid(compute_h(mix_i, rs, scale, base_i)) + hc_eps, then R per MHC_COEF */
__device__ __forceinline__ float mhc_head_coef(const struct mhc_head_args &a, int i, float mix, float rs)
{
	float sc = a.scale[0], bs = a.base[i];
	if (a.param_bf16) {
		sc = align_round_bf16(sc);
		bs = align_round_bf16(bs);
	}
	float pv = hn_add(mhc_dev_sigmoid(mhc_dev_compute_h(mix, rs, sc, bs, a.computeh_fma), a.exp2), a.hc_eps);
	return a.coef_bf16 ? align_round_bf16(pv) : pv;
}

/* y_d = R(pre_0 x[0, d] + pre_1 x[1, d] + ...) left to right */
__device__ __forceinline__ void mhc_head_y(const struct mhc_head_args &a, const float *pre, long long t, int d)
{
	const align_bf16 *xt = a.x + t * a.K;
	float acc = hn_mul(pre[0], align_bf16_to_f32(xt[d]));
	for (int j = 1; j < a.N; j++)
		acc = hn_add(acc, hn_mul(pre[j], align_bf16_to_f32(xt[(long long)j * a.D + d])));
	a.y[t * a.D + d] = align_f32_to_bf16(acc);
}

/* dynamic shared memory: pre[8] | red[2 * blockDim.x] floats */
__global__ void mhc_head_token_kernel(const struct mhc_head_args a)
{
	float *pre = (float *)align_cuda_dyn_smem();
	float *red = pre + MHC_MAX_N;
	const int tid = threadIdx.x, nt = blockDim.x, N = a.N;
	const long long groups = (a.T + a.rows - 1) / a.rows;
	for (long long grp = blockIdx.x; grp < groups; grp += gridDim.x)
		for (long long t = grp * a.rows; t < (grp + 1) * a.rows && t < a.T; t++) {
			const float ss = mhc_block_sumsq(a.x + t * a.K, a.K, red);
			const float rs = mhc_dev_rms(ss, a.K, a.inv_rms, a.norm_eps);
			if (tid < N)
				pre[tid] = mhc_head_coef(a, tid, a.mix[t * N + tid], rs);
			__syncthreads();
			for (int d = tid; d < a.D; d += nt)
				mhc_head_y(a, pre, t, d);
			__syncthreads(); /* pre is rewritten by the next token */
		}
}

/* The reference path: token t by one thread, mhc_head_fwd_cpu's loop body as written. */
__global__ void mhc_head_serial_kernel(const struct mhc_head_args a)
{
	const int N = a.N;
	const int ox = mhc_opd_x(a.gemm), ofn = mhc_opd_fn(a.gemm, a.param_bf16);
	const int acc = a.gemm == 0 ? MATMUL_ACC_SEQ : MATMUL_ACC_SPLIT16;
	for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < a.T;
	     t += (long long)gridDim.x * blockDim.x) {
		const align_bf16 *xt = a.x + t * a.K;
		float mix[MHC_MAX_N], pre[MHC_MAX_N];
		const float rs = mhc_dev_rms(mhc_pairwise_sq_seq(xt, a.K), a.K, a.inv_rms, a.norm_eps);
		for (int i = 0; i < N; i++)
			mix[i] = mm_dot_ref(xt, 1, a.fn + (long long)i * a.K, 0, a.K, ox, ofn, acc, 0);
		for (int i = 0; i < N; i++)
			pre[i] = mhc_head_coef(a, i, mix[i], rs);
		for (int d = 0; d < a.D; d++)
			mhc_head_y(a, pre, t, d);
	}
}

extern "C" int mhc_head_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				 int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				 struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	const struct mhc_params *p = (const struct mhc_params *)params;
	if (!p || !m || !in || !out)
		return ops_cuda_bad_input("mhc_head", "NULL argument");
	if (n_in != 4 || n_out != 1 || in[0].ndim != 3)
		return ops_cuda_bad_input("mhc_head", "expects x[T,N,D], fn, base, scale -> y");
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2], K = N * D;
	int64_t xs[3] = {T, N, D}, fs[2] = {N, K}, bs[1] = {N}, ss[1] = {1}, ys[2] = {T, D};
	if (N < 1 || N > MHC_MAX_N || ops_check(&in[0], ALIGN_DT_BF16, 3, xs) ||
	    ops_check(&in[1], ALIGN_DT_F32, 2, fs) || ops_check(&in[2], ALIGN_DT_F32, 1, bs) ||
	    ops_check(&in[3], ALIGN_DT_F32, 1, ss) || ops_check(&out[0], ALIGN_DT_BF16, 2, ys))
		return ops_cuda_bad_input("mhc_head", "shape or dtype mismatch (N must be 1..8)");
	if (T > 0x7fffffff || D > 0x7fffffff || K > 0x7fffffff)
		return ops_cuda_bad_input("mhc_head", "T, D or N*D too large");
	struct mhc_launch L;
	int rc = mhc_launch_resolve("mhc_head", launch, &L);
	if (rc)
		return rc;
	if (m->v[MODE_MATH_IMPL] == ALIGN_MATH_IMPL_LIBM)
		return ops_cuda_unsupported("mhc_head", m, MODE_MATH_IMPL);
	if (T == 0)
		return 0;
	struct mhc_head_args a;
	a.x = (const align_bf16 *)in[0].data;
	a.fn = (const float *)in[1].data;
	a.mix = NULL;
	a.base = (const float *)in[2].data;
	a.scale = (const float *)in[3].data;
	a.y = (align_bf16 *)out[0].data;
	a.T = T;
	a.K = K;
	a.N = (int)N;
	a.D = (int)D;
	a.rows = L.rows;
	a.hc_eps = p->hc_eps;
	a.norm_eps = p->norm_eps;
	a.inv_rms = m->v[MODE_MHC_RMS_FORM] == ALIGN_MHC_RMS_FORM_INV_RMS;
	a.exp2 = mhc_emode(m); /* MHC_EXP and MATH_IMPL */
	a.computeh_fma = m->v[MODE_MHC_COMPUTEH_FMA] == ALIGN_MHC_COMPUTEH_FMA_ON;
	a.param_bf16 = m->v[MODE_MHC_PARAM] == ALIGN_MHC_PARAM_BF16;
	a.coef_bf16 = m->v[MODE_MHC_COEF] == ALIGN_MHC_COEF_BF16;
	a.gemm = m->v[MODE_MHC_PROJ_GEMM];
	if (L.serial) {
		ALIGN_CUDA_LAUNCH(mhc_head_serial_kernel, mhc_grid((T + L.threads - 1) / L.threads, L.grid_cap),
				  L.threads, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_head_serial_kernel */
		return 0;
	}
	float *mix = NULL;
	OPS_CUDA_TRY(cudaMallocAsync((void **)&mix, (size_t)(T * N) * sizeof(float), stream));
	a.mix = mix;
	rc = mhc_cuda_project(a.x, a.fn, mix, T, N, K, a.gemm, a.param_bf16, L.grid_cap, stream);
	if (rc == 0) {
		ALIGN_CUDA_LAUNCH(mhc_head_token_kernel, mhc_grid((T + L.rows - 1) / L.rows, L.grid_cap), L.threads,
				  (MHC_MAX_N + 2 * L.threads) * sizeof(float), stream, a);
		cudaError_t e = cudaGetLastError(); /* the launch of mhc_head_token_kernel */
		if (e != cudaSuccess)
			rc = ops_cuda_fail("mhc_head_token_kernel<<<...>>>", e, __FILE__, __LINE__);
	}
	cudaError_t e = cudaFreeAsync(mix, stream);
	if (rc)
		return rc;
	if (e != cudaSuccess)
		return ops_cuda_fail("cudaFreeAsync(mix, stream)", e, __FILE__, __LINE__);
	return 0;
}
