/* mhc_head.cu: CUDA twin of mHC hc_head (contract in mhc_head.h, C twin mhc_head.c), bitwise equal to
 * the C twin in every mode it accepts; MATH_IMPL=libm has no device twin (returns 4). Shapes and modes
 * come from mhc_head_cfg_init (mhc_head.c, shared with the C twin); the kernels read only the config.
 *
 * x[T,N,D] bf16, fn[N, ND] f32, base[N] f32, scale[1] f32 -> y[T,D] bf16.
 *
 * Three kernels per call (the parallel path), the pieces of mhc_pre.cu:
 *   1. mix[T, N] and the sums of squares ss[T] = mhc_cuda_project (mhc_project.cuh; after its pass that
 *      lays fn out k-major): the C twin's K order and operand roundings, the C twin's pairwise tree;
 *   2. the per-token kernel (mhc_head_token_kernel), 256 threads and MHC_Y_ROWS tokens per CTA by
 *      default, MHC_Y_BATCH at a time: thread i < batch computes token i's rs from ss (the C twin's
 *      formula) and pre_j = sigmoid(compute_h(mix_j, rs, scale, base_j)) + hc_eps (rounded to bf16
 *      when MHC_COEF=bf16) into shared memory; then all threads y_d = R(pre_0 x[0,d] + pre_1 x[1,d]
 *      + ...) left to right (mhc_block_y, 8 outputs per item with 16-byte loads when D % 8 == 0).
 *   NaN results carry the host's bits (nan_host.h). Launch knobs: mhc_cuda.cuh; the serial path is
 *   one thread per token running mhc_head.c's loop body as written.
 *
 * Napkin maths (bench-gpu-ops: T = 16384, N = 4, D = 4096, K = 16384; H100 ~3 TB/s, 29.6 T FP32
 * instr/s): the GEMM is 2 T N K = 2.1 G FMUL + FADD and the sum of squares 0.5 G: ~0.09 ms of issue
 * under kernel 1's read of x (537 MB, 0.18 ms): bandwidth bound, ~0.2 ms. Kernel 2 reads x again and
 * writes y (134 MB): ~0.22 ms. Expected ~0.42 ms in all (was 7.33 ms: the generic GEMM's NARROW tile
 * and a per-token CTA that read x twice). Once per forward pass.
 *
 * Build: kernels/meson.build. Check: the generic CUDA-vs-C driver in tests/gpu.
 */
#include <stdio.h>

#include "mhc_head.h"
#include "mhc_project.cuh"
#include "op_cfg.h"

struct mhc_head_args {
	const align_bf16 *x;
	const float *fn;  /* [N, K] (serial path) */
	const float *mix; /* [T, N] (parallel path) */
	const float *ss;  /* [T] sums of squares (parallel path) */
	const float *base;
	const float *scale;
	align_bf16 *y;
	long long T, K; /* K = N * D */
	int N, D;
	int rows;  /* tokens per CTA */
	int y_vec; /* 1: mhc_block_y may use 16-byte accesses */
	float hc_eps, norm_eps;
	struct mhc_modes mm; /* the decoded switches (the config's) */
	int emode;	     /* mhc_emode(&mm) */
};

/* pre_i of mhc_head.c: sigmoid(compute_h(mix_i, rs, scale, base_i)) + hc_eps, then R per MHC_COEF */
__device__ __forceinline__ float mhc_head_coef(const struct mhc_head_args &a, int i, float mix, float rs)
{
	float sc = a.scale[0], bs = a.base[i];
	if (a.mm.param_bf16) {
		sc = align_round_bf16(sc);
		bs = align_round_bf16(bs);
	}
	float pv = hn_add(mhc_dev_sigmoid(mhc_dev_compute_h(mix, rs, sc, bs, a.mm.computeh_fma), a.emode), a.hc_eps);
	return a.mm.coef_bf16 ? align_round_bf16(pv) : pv;
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

/* dynamic shared memory: coef[MHC_Y_BATCH][N] floats */
__global__ void __launch_bounds__(1024, 1) mhc_head_token_kernel(const struct mhc_head_args a)
{
	float *coef = (float *)align_cuda_dyn_smem();
	const int N = a.N;
	const long long groups = (a.T + a.rows - 1) / a.rows;
	for (long long grp = blockIdx.x; grp < groups; grp += gridDim.x) {
		const long long end = (grp + 1) * a.rows < a.T ? (grp + 1) * a.rows : a.T;
		for (long long b0 = grp * a.rows; b0 < end; b0 += MHC_Y_BATCH) {
			const int nb = end - b0 < MHC_Y_BATCH ? (int)(end - b0) : MHC_Y_BATCH;
			for (int i = threadIdx.x; i < nb; i += blockDim.x) {
				const long long t = b0 + i;
				const float rs = mhc_dev_rms(a.ss[t], a.K, a.mm.inv_rms, a.norm_eps);
				for (int j = 0; j < N; j++)
					coef[i * N + j] = mhc_head_coef(a, j, a.mix[t * N + j], rs);
			}
			__syncthreads();
			mhc_block_y(a.x, a.y, coef, b0, nb, N, a.D, a.y_vec);
			__syncthreads(); /* coef is rewritten by the next batch */
		}
	}
}

/* The reference path: token t by one thread, mhc_head_fwd_cpu's loop body as written. */
__global__ void mhc_head_serial_kernel(const struct mhc_head_args a)
{
	const int N = a.N;
	for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < a.T;
	     t += (long long)gridDim.x * blockDim.x) {
		const align_bf16 *xt = a.x + t * a.K;
		float mix[MHC_MAX_N], pre[MHC_MAX_N];
		const float rs = mhc_dev_rms(mhc_pairwise_sq_seq(xt, a.K), a.K, a.mm.inv_rms, a.norm_eps);
		for (int i = 0; i < N; i++)
			mix[i] = mm_dot_ref(xt, 1, a.fn + (long long)i * a.K, 0, a.K, a.mm.opd_x, a.mm.opd_fn,
					    a.mm.accum, 0);
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
	struct mhc_launch L;
	struct mhc_head_cfg c;
	ALIGN_TRY(dev->err, mhc_launch_resolve("mhc_head", launch, &L, dev->err));
	ALIGN_TRY(dev->err, mhc_head_cfg_init(&c, (const struct mhc_params *)params, m, in, n_in, out, n_out,
					      ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "mhc_head", in, n_in, out, n_out));
	const int64_t T = c.T, N = c.N;
	if (T == 0)
		return 0;
	struct mhc_head_args a;
	a.x = (const align_bf16 *)in[0].data;
	a.fn = (const float *)in[1].data;
	a.mix = NULL;
	a.ss = NULL;
	a.base = (const float *)in[2].data;
	a.scale = (const float *)in[3].data;
	a.y = (align_bf16 *)out[0].data;
	a.T = T;
	a.K = c.K;
	a.N = (int)N;
	a.D = (int)c.D;
	a.rows = L.rows;
	a.y_vec = 0;
	a.hc_eps = c.p.hc_eps;
	a.norm_eps = c.p.norm_eps;
	a.mm = c.mm;
	a.emode = mhc_emode(&c.mm);
	if (L.serial) {
		ALIGN_CUDA_LAUNCH(mhc_head_serial_kernel, mhc_grid((T + L.threads - 1) / L.threads, L.grid_cap),
				  L.threads, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_head_serial_kernel */
		return 0;
	}
	/* the workspace: fnt (k-major fn, mhc_project.cuh) | mix[T, N] | ss[T] */
	const size_t nf = mhc_pj_fnt_floats(N, c.K), nm = ((size_t)(T * N) + 63) / 64 * 64;
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (nf + nm + (size_t)T) * sizeof(float), &ws));
	float *fnt = (float *)ws, *mix = fnt + nf, *ss = mix + nm;
	a.mix = mix;
	a.ss = ss;
	const int pair = !launch || launch->block <= 0 || L.threads >= 96;
	ALIGN_TRY(dev->err, mhc_cuda_project(a.x, a.fn, fnt, mix, ss, T, N, c.K, &c.mm, pair, L.grid_cap, stream));
	a.rows = launch && launch->rows_per_block > 0 ? L.rows : MHC_Y_ROWS;
	a.y_vec = a.D % 8 == 0 && (uintptr_t)a.x % 16 == 0 && (uintptr_t)a.y % 16 == 0;
	ALIGN_CUDA_LAUNCH(mhc_head_token_kernel, mhc_grid((T + a.rows - 1) / a.rows, L.grid_cap), L.threads,
			  (size_t)MHC_Y_BATCH * a.N * sizeof(float), stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_head_token_kernel */
	return 0;
}
