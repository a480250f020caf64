/* mhc_pre.cu: CUDA twin of mHC hc_pre (contract in mhc_pre.h, C twin mhc_pre.c), bitwise equal to
 * the C twin in every mode it accepts; MATH_IMPL=libm (glibc expf on the CPU) has no device twin
 * and returns ALIGN_ERR_UNSUPPORTED (4) from mhc_pre_cfg_init (mhc_pre.c: shapes and modes, shared with
 * the C twin; the kernels read only the config); MATH_IMPL=cuda / cuda_fast (GPU only) use CUDA's expf / exp2f
 * (mhc_dev_exp, math_cuda.cuh).
 *
 * x[T,N,D] bf16, fn[(2+N)N, ND] f32, base[(2+N)N] f32, scale[3] f32
 *   -> y[T,D] bf16, pre[T,N] f32, post[T,N] f32, comb[T,N,N] f32.
 *
 * Three kernels per call (the parallel path):
 *   1. the mapping GEMM mix[T, R] (R = (2+N)N) fused with the sums of squares ss[T] of the RMS factor
 *      (mhc_cuda_project, mhc_project.cuh: a dedicated small-R kernel, after a pass that lays fn out
 *      k-major): each (token, row) dot walks k = 0..ND-1 in the C twin's order (seq, or 16 chunks
 *      then the chunk sums), same operand roundings, no FMA; ss by the C twin's pairwise tree; see
 *      mhc_project.cuh for why both are bitwise equal;
 *   2. the per-token kernel (mhc_pre_token_kernel), 256 threads and MHC_Y_ROWS tokens per CTA by
 *      default, taken MHC_Y_BATCH at a time:
 *      - thread i < batch runs token i's step 1-5 tail as mhc_pre.c writes it: rs from ss (the C
 *        twin's RMS formula), h_r = compute_h(mix_r, rs, scale_c, base_r) for every r, pre/post (the
 *        C twin's sigmoid and eps expressions), then the Sinkhorn of mhc_pre.c line by line on the
 *        token's N x N matrix in shared memory (mhc_sinkhorn_serial; the sums in the C twin's order,
 *        left to right or torch_order.h's for MHC_SUM_ORDER=torch), comb, and the coefficients pre'
 *        of step 6 into shared memory;
 *      - then all threads: y_d = R(sum_j pre'_j x[j,d]) left to right (mhc_block_y), 8 outputs of
 *        one token per item with one 16-byte load per stream when D % 8 == 0.
 *   Mix, ss and the k-major fn go through the device context's workspace (align_dev_scratch, one
 *   call, ordered on dev->stream). NaN results carry the host's bits (nan_host.h; see mhc_cuda.cuh and
 *   mhc_project.cuh). Launch knobs: mhc_cuda.cuh. The serial path (launch->serial) is one thread per
 *   token running mhc_pre.c's loops as written (mhc_pre_token_serial), mapping dots included, with no
 *   workspace.
 *
 * Napkin maths (bench-gpu-ops: T = 16384, N = 4, D = 4096, K = 16384, R = 24; H100 SXM ~1.75 GHz
 * under load, ~3 TB/s): the GEMM is 2 T R K = 12.9 G FMUL + FADD (the contract forbids FMA) at
 * 132 x 128 lanes/clk = 29.6 T instr/s -> 0.44 ms at the issue limit, ~0.5 ms expected for kernel 1
 * (mhc_project.cuh has its budget; x read once there, overlapped). Kernel 2 reads x once more (537 MB)
 * and writes y (134 MB): ~0.22 ms at 3 TB/s; its Sinkhorns (one thread per token, ~12k clk each,
 * 2 T N N 20 divisions in all) overlap across the CTAs of an SM. Expected ~0.75 ms in all (was 4.19 ms
 * on the generic tiled GEMM with a per-token CTA reading x twice). What is left: x's second read;
 * fusing y into kernel 1 needs the token's whole x after its last k (L2 cannot hold 64 tokens x
 * 32 KB x 256 CTAs), i.e. a software pipeline that streams tile i - 1's y during tile i's GEMM.
 *
 * Build: kernels/meson.build. Check: the generic CUDA-vs-C driver in tests/gpu.
 */
#include <stdio.h>

#include "mhc_project.cuh"
#include "op_cfg.h"
#include "torch_order.h"

struct mhc_pre_args {
	const align_bf16 *x;
	const float *fn;  /* [R, K] (serial path) */
	const float *mix; /* [T, R] (parallel path) */
	const float *ss;  /* [T] sums of squares (parallel path) */
	const float *base;
	const float *scale;
	align_bf16 *y;
	float *pre, *post, *comb;
	long long T, K; /* K = N * D */
	int N, D;
	int rows;  /* tokens per CTA */
	int y_vec; /* 1: mhc_block_y may use 16-byte accesses */
	int iters;
	float hc_eps, norm_eps;
	struct mhc_modes mm;	 /* the decoded switches (the config's) */
	int emode;		 /* mhc_emode(&mm) */
	int hpre_eps, hpost_eps; /* 1: MHC_HPRE_EPS=on, MHC_HPOST_EPS=on */
	int sinkhorn;		 /* ALIGN_MHC_SINKHORN_* */
	int torch_sums;		 /* MHC_SUM_ORDER=torch */
};

/* the divisions of one Sinkhorn step (mhc_sinkhorn_serial) */
enum mhc_sk_mode {
	MHC_SK_SOFTMAX_EPS, /* v / s + eps: c1's first row step, s the softmax denominator */
	MHC_SK_ADD_EPS,	    /* v / (s + eps): c1 and c0p */
	MHC_SK_MAX_EPS,	    /* v / max(s, eps): c0 */
};

/* the divisor of one Sinkhorn step for line sum s (mode MHC_SK_ADD_EPS or MHC_SK_MAX_EPS) */
__device__ __forceinline__ float mhc_sk_div(float s, int mode, float eps)
{
	return mode == MHC_SK_MAX_EPS ? (s > eps ? s : eps) : hn_add(s, eps);
}

/* a line sum of the Sinkhorn (mhc_pre.c row_sum / col_sum; c1's first row step sums the softmax
 * denominator, which MHC_SUM_ORDER=torch takes from torch_softmax_sum) */
__device__ __forceinline__ float mhc_sk_sum(const float *M, int n, int cols, int line, int softmax, int torch)
{
	if (torch)
		return cols	 ? torch_sum_strided(M + line, n, n)
		       : softmax ? torch_softmax_sum(M + line * n, 1, n)
				 : torch_sum_lastdim(M + line * n, 1, n);
	const float *v = cols ? M + line : M + line * n;
	const int st = cols ? n : 1;
	float s = v[0];
	for (int i = 1; i < n; i++)
		s = hn_add(s, v[i * st]);
	return s;
}

/* h_r for r < R from mix (mhc_pre.h steps 0 and 3) */
__device__ __forceinline__ float mhc_pre_h(const struct mhc_pre_args &a, int r, float mix, float rs)
{
	const int N = a.N;
	float sc = a.scale[r < N ? 0 : r < 2 * N ? 1 : 2], bs = a.base[r];
	if (a.mm.param_bf16) {
		sc = align_round_bf16(sc);
		bs = align_round_bf16(bs);
	}
	return mhc_dev_compute_h(mix, rs, sc, bs, a.mm.computeh_fma);
}

/* pre_i and post_i (mhc_pre.h step 4) from h */
__device__ __forceinline__ void mhc_pre_coefs(const struct mhc_pre_args &a, const float *h, int i, float *pv, float *qv)
{
	float sp = mhc_dev_sigmoid(h[i], a.emode), so = mhc_dev_sigmoid(h[a.N + i], a.emode);
	*pv = a.hpre_eps ? hn_add(sp, a.hc_eps) : sp;
	*qv = a.hpost_eps ? hn_mul(2.0f, hn_add(so, a.hc_eps)) : hn_mul(2.0f, so);
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

/* sinkhorn() of mhc_pre.c as written, in one thread; contract: ALIGN_MHC_SINKHORN_* */
__device__ void mhc_sinkhorn_serial(float *M, int n, int contract, int iters, float eps, int emode, int torch)
{
	for (int j = 0; j < n; j++) {
		float mx = M[j * n];
		for (int k = 1; k < n; k++)
			mx = M[j * n + k] > mx ? M[j * n + k] : mx;
		for (int k = 0; k < n; k++)
			M[j * n + k] = mhc_dev_exp(hn_sub(M[j * n + k], mx), emode);
	}
	int rounds = iters;
	if (contract == ALIGN_MHC_SINKHORN_C1) {
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
	const int mode = contract == ALIGN_MHC_SINKHORN_C0 ? MHC_SK_MAX_EPS : MHC_SK_ADD_EPS;
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

/* Token t's steps 1-5 after the sums (mhc_pre_fwd_cpu's loop body as written, from mix and ss) by one
 * thread: pre, post and comb outputs; M: the token's N x N Sinkhorn matrix (shared memory); coef: its N
 * coefficients of step 6. */
static __device__ MM_NOINLINE void mhc_pre_token_coefs(const struct mhc_pre_args &a, long long t, float *M, float *coef)
{
	const int N = a.N, R = (2 + N) * N;
	float h[(2 + MHC_MAX_N) * MHC_MAX_N];
	const float rs = mhc_dev_rms(a.ss[t], a.K, a.mm.inv_rms, a.norm_eps);
	for (int r = 0; r < R; r++)
		h[r] = mhc_pre_h(a, r, a.mix[t * R + r], rs);
	for (int i = 0; i < N; i++) {
		float pv, qv;
		mhc_pre_coefs(a, h, i, &pv, &qv);
		a.pre[t * N + i] = pv;
		a.post[t * N + i] = qv;
		coef[i] = a.mm.coef_bf16 ? align_round_bf16(pv) : pv;
	}
	for (int i = 0; i < N * N; i++)
		M[i] = h[2 * N + i];
	mhc_sinkhorn_serial(M, N, a.sinkhorn, a.iters, a.hc_eps, a.emode, a.torch_sums);
	for (int i = 0; i < N * N; i++)
		a.comb[t * N * N + i] = M[i];
}

/* dynamic shared memory: M[MHC_Y_BATCH][N * N] | coef[MHC_Y_BATCH][N] floats */
__global__ void __launch_bounds__(1024, 1) mhc_pre_token_kernel(const struct mhc_pre_args a)
{
	float *M = (float *)align_cuda_dyn_smem();
	const int N = a.N;
	float *coef = M + MHC_Y_BATCH * N * N;
	const long long groups = (a.T + a.rows - 1) / a.rows;
	for (long long grp = blockIdx.x; grp < groups; grp += gridDim.x) {
		const long long end = (grp + 1) * a.rows < a.T ? (grp + 1) * a.rows : a.T;
		for (long long b0 = grp * a.rows; b0 < end; b0 += MHC_Y_BATCH) {
			const int nb = end - b0 < MHC_Y_BATCH ? (int)(end - b0) : MHC_Y_BATCH;
			for (int i = threadIdx.x; i < nb; i += blockDim.x)
				mhc_pre_token_coefs(a, b0 + i, M + i * N * N, coef + i * N);
			__syncthreads();
			mhc_block_y(a.x, a.y, coef, b0, nb, N, a.D, a.y_vec);
			__syncthreads(); /* M and coef are rewritten by the next batch */
		}
	}
}

/* The reference path: token t by one thread, mhc_pre_fwd_cpu's loop body as written. */
__global__ void mhc_pre_serial_kernel(const struct mhc_pre_args a)
{
	const int N = a.N, R = (2 + N) * N;
	for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < a.T;
	     t += (long long)gridDim.x * blockDim.x) {
		const align_bf16 *xt = a.x + t * a.K;
		float h[(2 + MHC_MAX_N) * MHC_MAX_N], coef[MHC_MAX_N];
		const float rs = mhc_dev_rms(mhc_pairwise_sq_seq(xt, a.K), a.K, a.mm.inv_rms, a.norm_eps);
		for (int r = 0; r < R; r++)
			h[r] = mhc_pre_h(a, r,
					 mm_dot_ref(xt, 1, a.fn + (long long)r * a.K, 0, a.K, a.mm.opd_x, a.mm.opd_fn,
						    a.mm.accum, 0),
					 rs);
		for (int i = 0; i < N; i++) {
			float pv, qv;
			mhc_pre_coefs(a, h, i, &pv, &qv);
			a.pre[t * N + i] = pv;
			a.post[t * N + i] = qv;
			coef[i] = a.mm.coef_bf16 ? align_round_bf16(pv) : pv;
		}
		float *M = a.comb + t * N * N;
		for (int i = 0; i < N * N; i++)
			M[i] = h[2 * N + i];
		mhc_sinkhorn_serial(M, N, a.sinkhorn, a.iters, a.hc_eps, a.emode, a.torch_sums);
		for (int d = 0; d < a.D; d++)
			mhc_pre_y(a, coef, t, d);
	}
}

extern "C" int mhc_pre_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	struct mhc_launch L;
	struct mhc_pre_cfg c;
	ALIGN_TRY(dev->err, mhc_launch_resolve("mhc_pre", launch, &L, dev->err));
	ALIGN_TRY(dev->err, mhc_pre_cfg_init(&c, (const struct mhc_params *)params, m, in, n_in, out, n_out,
					     ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "mhc_pre", in, n_in, out, n_out));
	const int64_t T = c.T, R = c.R;
	if (T == 0)
		return 0;
	struct mhc_pre_args a;
	a.x = (const align_bf16 *)in[0].data;
	a.fn = (const float *)in[1].data;
	a.mix = NULL;
	a.ss = NULL;
	a.base = (const float *)in[2].data;
	a.scale = (const float *)in[3].data;
	a.y = (align_bf16 *)out[0].data;
	a.pre = (float *)out[1].data;
	a.post = (float *)out[2].data;
	a.comb = (float *)out[3].data;
	a.T = T;
	a.K = c.K;
	a.N = (int)c.N;
	a.D = (int)c.D;
	a.rows = L.rows;
	a.y_vec = 0;
	a.iters = c.p.sinkhorn_iters;
	a.hc_eps = c.p.hc_eps;
	a.norm_eps = c.p.norm_eps;
	a.mm = c.mm;
	a.emode = mhc_emode(&c.mm);
	a.hpre_eps = c.hpre_eps;
	a.hpost_eps = c.hpost_eps;
	a.sinkhorn = c.sinkhorn;
	a.torch_sums = c.torch_sums;
	if (L.serial) {
		ALIGN_CUDA_LAUNCH(mhc_pre_serial_kernel, mhc_grid((T + L.threads - 1) / L.threads, L.grid_cap),
				  L.threads, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_pre_serial_kernel */
		return 0;
	}
	/* the workspace: fnt (k-major fn, mhc_project.cuh) | mix[T, R] | ss[T] */
	const size_t nf = mhc_pj_fnt_floats(R, c.K), nm = ((size_t)(T * R) + 63) / 64 * 64;
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (nf + nm + (size_t)T) * sizeof(float), &ws));
	float *fnt = (float *)ws, *mix = fnt + nf, *ss = mix + nm;
	a.mix = mix;
	a.ss = ss;
	const int pair = !launch || launch->block <= 0 || L.threads >= 96;
	ALIGN_TRY(dev->err, mhc_cuda_project(a.x, a.fn, fnt, mix, ss, T, R, c.K, &c.mm, pair, L.grid_cap, stream));
	a.rows = launch && launch->rows_per_block > 0 ? L.rows : MHC_Y_ROWS;
	a.y_vec = a.D % 8 == 0 && (uintptr_t)a.x % 16 == 0 && (uintptr_t)a.y % 16 == 0;
	ALIGN_CUDA_LAUNCH(mhc_pre_token_kernel, mhc_grid((T + a.rows - 1) / a.rows, L.grid_cap), L.threads,
			  (size_t)MHC_Y_BATCH * (a.N * a.N + a.N) * sizeof(float), stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_pre_token_kernel */
	return 0;
}
