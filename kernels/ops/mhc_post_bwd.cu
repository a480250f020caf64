/* mhc_post_bwd.cu: CUDA twin of the hc_post backward (contract: mhc_post_bwd.h; specification:
 * mhc_post_bwd.c), the C twin's bytes in every mode (all portable): both twins call the same scalar
 * steps (mhc_post_bwd_coef, mhc_post_bwd_point, mhc_post_bwd_red, ALIGN_HD in mhc_post_bwd.h, every
 * binary32 operation through nan_host.h), so the operands, order and roundings are the C twin's.
 * Layout (a first, correct version; not tuned): kernel 1, one thread per (t, d): the token's N*N + N
 * coefficients, then dx[t, 0..N-1, d] and df[t, d]; kernel 2, one thread per (t, r), r < N + N*N: one
 * sequential (or split16) sum over D for dpost / dcomb. No atomics; every output has one writer.
 * Not run on a GPU yet (the session that wrote it had none).
 */
#include "mhc_cuda.cuh"
#include "mhc_post_bwd.h"
#include "op_cfg.h"

struct mpb_args {
	const align_bf16 *x, *f, *dy;
	const float *post, *comb;
	align_bf16 *dx, *df;
	float *dpost, *dcomb;
	struct mhc_post_bwd_cfg c;
};

__global__ void mhc_post_bwd_point_kernel(const struct mpb_args a)
{
	const long long n = a.c.T * a.c.D;
	const int N = a.c.N;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x) {
		const long long t = i / a.c.D, d = i % a.c.D;
		float H[MHC_MAX_N * MHC_MAX_N], P[MHC_MAX_N];
		for (int q = 0; q < N * N + N; q++) {
			float v = mhc_post_bwd_coef(&a.c, a.post, a.comb, t, q);
			if (q < N * N)
				H[q] = v;
			else
				P[q - N * N] = v;
		}
		mhc_post_bwd_point(&a.c, H, P, a.dy, a.dx, a.df, t, d);
	}
}

__global__ void mhc_post_bwd_red_kernel(const struct mpb_args a)
{
	const int R = a.c.N + a.c.N * a.c.N;
	const long long n = a.c.T * R;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x)
		mhc_post_bwd_red(&a.c, a.x, a.f, a.dy, a.dpost, a.dcomb, i / R, (int)(i % R));
}

extern "C" int mhc_post_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				     int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				     struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	struct mhc_launch L;
	struct mpb_args a;
	ALIGN_TRY(dev->err, mhc_launch_resolve("mhc_post_bwd", launch, &L, dev->err));
	ALIGN_TRY(dev->err, mhc_post_bwd_cfg_init(&a.c, (const struct mhc_params *)params, m, in, n_in, out, n_out,
						  ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "mhc_post_bwd", in, n_in, out, n_out));
	if (a.c.T == 0)
		return 0;
	a.x = (const align_bf16 *)in[0].data;
	a.f = (const align_bf16 *)in[1].data;
	a.post = (const float *)in[2].data;
	a.comb = (const float *)in[3].data;
	a.dy = (const align_bf16 *)in[4].data;
	a.dx = (align_bf16 *)out[0].data;
	a.df = (align_bf16 *)out[1].data;
	a.dpost = (float *)out[2].data;
	a.dcomb = (float *)out[3].data;
	const int th = L.serial ? 1 : L.threads;
	const long long np = a.c.T * a.c.D, nr = a.c.T * (a.c.N + a.c.N * a.c.N);
	if (np > 0) {
		ALIGN_CUDA_LAUNCH(mhc_post_bwd_point_kernel, mhc_grid((np + th - 1) / th, L.grid_cap), th, 0, stream,
				  a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_post_bwd_point_kernel */
	}
	ALIGN_CUDA_LAUNCH(mhc_post_bwd_red_kernel, mhc_grid((nr + th - 1) / th, L.grid_cap), th, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_post_bwd_red_kernel */
	return 0;
}
