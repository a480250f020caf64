/* indexer_bwd.cu: CUDA twin of the lightning indexer's score backward (contract: indexer_bwd.h;
 * specification: indexer_bwd.c): the C twin's bytes (the same ALIGN_HD terms and sequential sums).
 * Layout: kernel 1, one thread per (t, h): the dots, ddot[t,h,:] into the device workspace (T H S floats)
 * and dw[t,h]; kernel 2, one thread per dq element (the sum over c); kernel 3, one thread per dk element
 * (the sum over t, then h). Grid-stride; knobs: block (default 128), grid_cap; serial: one thread each.
 * No atomics: every sum is one thread's loop in the stated order.
 * Napkin maths (DSv4: T = 4096, H = 64, D = 128, S = 1024): the dots cost 2 T H S D = 6.9e10 flops once,
 * the workspace T H S floats = 1 GiB: a reference for the small shapes the tests and explain use.
 */
#include "indexer_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct indexer_bwd_args {
	const align_bf16 *q, *k, *w; /* [T,H,D], [S,D], [T,H] */
	const float *ds;	     /* [T,S] */
	align_bf16 *dq, *dk, *dw;    /* [T,H,D], [S,D], [T,H] */
	float *ddot;		     /* [T,H,S] workspace */
	struct indexer_cfg c;
};

__global__ void indexer_bwd_ddot_kernel(indexer_bwd_args a)
{
	const int64_t H = a.c.H, D = a.c.D, S = a.c.S;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.c.T * H;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t t = i / H, h = i - t * H;
		float wb = indexer_weight(&a.c, a.w[i]), acc = 0.0f;
		for (int64_t e = 0; e < S; e++) {
			float dd = 0.0f, term = 0.0f;
			if (indexer_bwd_visible(&a.c, t, e)) {
				indexer_bwd_terms(&a.c, indexer_bwd_dot(&a.c, a.q + t * H * D, a.k + e * D, h),
						  a.ds[t * S + e], wb, &dd, &term);
				acc = hn_add(acc, term);
			}
			a.ddot[i * S + e] = dd;
		}
		a.dw[i] = align_f32_to_bf16(indexer_bwd_dw(&a.c, align_round_bf16(acc)));
	}
}

__global__ void indexer_bwd_dq_kernel(indexer_bwd_args a)
{
	const int64_t H = a.c.H, D = a.c.D, S = a.c.S;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.c.T * H * D;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t th = i / D, d = i - th * D, t = th / H;
		float acc = 0.0f;
		for (int64_t e = 0; e < S; e++)
			if (indexer_bwd_visible(&a.c, t, e))
				acc = hn_add(acc, hn_mul(a.ddot[th * S + e], align_bf16_to_f32(a.k[e * D + d])));
		a.dq[i] = align_f32_to_bf16(acc);
	}
}

__global__ void indexer_bwd_dk_kernel(indexer_bwd_args a)
{
	const int64_t H = a.c.H, D = a.c.D, S = a.c.S;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < S * D;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t e = i / D, d = i - e * D;
		float acc = 0.0f;
		for (int64_t t = 0; t < a.c.T; t++)
			if (indexer_bwd_visible(&a.c, t, e))
				for (int64_t h = 0; h < H; h++)
					acc = hn_add(acc, hn_mul(a.ddot[(t * H + h) * S + e],
								 align_bf16_to_f32(a.q[(t * H + h) * D + d])));
		a.dk[i] = align_f32_to_bf16(acc);
	}
}

static int64_t ib_grid(int64_t n, int block, const struct align_launch *L)
{
	int64_t grid = L->serial > 0 ? 1 : (n + block - 1) / block;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	return grid < 1 ? 1 : grid;
}

extern "C" int indexer_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				    int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				    struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	indexer_bwd_args a;
	ALIGN_TRY(dev->err, indexer_bwd_cfg_init(&a.c, (const struct indexer_params *)params, m, in, n_in, out, n_out,
						 ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "indexer_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("indexer_bwd", "negative launch knob");
	a.q = (const align_bf16 *)in[0].data;
	a.k = (const align_bf16 *)in[1].data;
	a.w = (const align_bf16 *)in[2].data;
	a.ds = (const float *)in[3].data;
	a.dq = (align_bf16 *)out[0].data;
	a.dk = (align_bf16 *)out[1].data;
	a.dw = (align_bf16 *)out[2].data;
	const int64_t T = a.c.T, H = a.c.H, D = a.c.D, S = a.c.S;
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)(T * H * S > 0 ? T * H * S : 1) * sizeof(float), &ws));
	a.ddot = (float *)ws;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, maxb = 0, mb = 0;
	ALIGN_TRY(dev->err, rows_max_block(indexer_bwd_ddot_kernel, &maxb));
	ALIGN_TRY(dev->err, rows_max_block(indexer_bwd_dq_kernel, &mb));
	maxb = mb < maxb ? mb : maxb;
	ALIGN_TRY(dev->err, rows_max_block(indexer_bwd_dk_kernel, &mb));
	maxb = mb < maxb ? mb : maxb;
	block = L->serial > 0 ? 1 : (block > maxb ? maxb : block);
	if (T * H > 0) {
		ALIGN_CUDA_LAUNCH(indexer_bwd_ddot_kernel, (unsigned)ib_grid(T * H, block, L), block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
		ALIGN_CUDA_LAUNCH(indexer_bwd_dq_kernel, (unsigned)ib_grid(T * H * D, block, L), block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
	}
	if (S * D > 0) {
		ALIGN_CUDA_LAUNCH(indexer_bwd_dk_kernel, (unsigned)ib_grid(S * D, block, L), block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
	}
	return ALIGN_OK;
}
