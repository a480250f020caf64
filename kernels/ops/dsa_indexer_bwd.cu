/* dsa_indexer_bwd.cu: CUDA twin of the DSA indexer's score backward (contract: dsa_indexer_bwd.h;
 * specification: dsa_indexer_bwd.c): the C twin's bytes (the same ALIGN_HD rows, terms, sums and rotation).
 * Layout: kernel 1 rotates every q and k row into the workspace (one thread per row); kernel 2, one thread
 * per (t, h): ddot[t,h,:] into the workspace and dw; kernel 3, one thread per (t, h) row of dq (its D sums,
 * then the rotation); kernel 4, one thread per key row of dk. Per-thread scratch: 3 D floats of local memory
 * (D <= 128). Grid-stride; knobs: block (default 128), grid_cap; serial: one thread each. No atomics.
 */
#include "dsa_indexer_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct dsa_indexer_bwd_args {
	const align_bf16 *q, *k, *w; /* [T,H,D], [S,D], [T,H] */
	const float *ds;	     /* [T,S] */
	align_bf16 *dq, *dk, *dw;    /* [T,H,D], [S,D], [T,H] */
	align_bf16 *rq, *rk;	     /* rotated rows (workspace) */
	float *ddot;		     /* [T,H,S] (workspace) */
	struct dsa_indexer_cfg c;
};

#define DIB_STRIDE(i, n)                                                                                               \
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__global__ void dsa_indexer_bwd_prep_kernel(dsa_indexer_bwd_args a)
{
	float tmp[2 * DSA_INDEXER_D_MAX];
	const int64_t D = a.c.D, nq = a.c.T * a.c.H;
	DIB_STRIDE(i, nq + a.c.S)
	{
		if (i < nq)
			dsa_indexer_prep_row(&a.c, a.q + i * D, a.rq + i * D, tmp);
		else
			dsa_indexer_prep_row(&a.c, a.k + (i - nq) * D, a.rk + (i - nq) * D, tmp);
	}
}

__global__ void dsa_indexer_bwd_ddot_kernel(dsa_indexer_bwd_args a)
{
	const int64_t H = a.c.H, D = a.c.D, S = a.c.S;
	DIB_STRIDE(i, a.c.T * H)
	{
		int64_t t = i / H, h = i - t * H;
		float wb = dsa_indexer_weight(&a.c, a.w[i], 1.0f), acc = 0.0f;
		for (int64_t j = 0; j < S; j++) {
			float dd = 0.0f, term = 0.0f;
			if (dsa_indexer_bwd_visible(&a.c, t, j)) {
				indexer_bwd_terms(&a.c.ix, indexer_bwd_dot(&a.c.ix, a.rq + t * H * D, a.rk + j * D, h),
						  a.ds[t * S + j], wb, &dd, &term);
				acc = hn_add(acc, term);
			}
			a.ddot[i * S + j] = dd;
		}
		a.dw[i] = align_f32_to_bf16(indexer_bwd_dw(&a.c.ix, align_round_bf16(acc)));
	}
}

__global__ void dsa_indexer_bwd_dq_kernel(dsa_indexer_bwd_args a)
{
	float g[3 * DSA_INDEXER_D_MAX];
	const int64_t H = a.c.H, D = a.c.D, S = a.c.S;
	DIB_STRIDE(i, a.c.T * H)
	{
		int64_t t = i / H;
		for (int64_t d = 0; d < D; d++) {
			float s = 0.0f;
			for (int64_t j = 0; j < S; j++)
				if (dsa_indexer_bwd_visible(&a.c, t, j))
					s = hn_add(s, hn_mul(a.ddot[i * S + j], align_bf16_to_f32(a.rk[j * D + d])));
			g[2 * D + d] = s;
		}
		dsa_indexer_bwd_rotate(&a.c, g + 2 * D, a.dq + i * D, g);
	}
}

__global__ void dsa_indexer_bwd_dk_kernel(dsa_indexer_bwd_args a)
{
	float g[3 * DSA_INDEXER_D_MAX];
	const int64_t H = a.c.H, D = a.c.D, S = a.c.S;
	DIB_STRIDE(j, S)
	{
		for (int64_t d = 0; d < D; d++) {
			float s = 0.0f;
			for (int64_t t = 0; t < a.c.T; t++)
				if (dsa_indexer_bwd_visible(&a.c, t, j))
					for (int64_t h = 0; h < H; h++)
						s = hn_add(s, hn_mul(a.ddot[(t * H + h) * S + j],
								     align_bf16_to_f32(a.rq[(t * H + h) * D + d])));
			g[2 * D + d] = s;
		}
		dsa_indexer_bwd_rotate(&a.c, g + 2 * D, a.dk + j * D, g);
	}
}

static int64_t dib_grid(int64_t n, int block, const struct align_launch *L)
{
	int64_t grid = L->serial > 0 ? 1 : (n + block - 1) / block;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	return grid < 1 ? 1 : grid;
}

extern "C" int dsa_indexer_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
					int n_in, struct align_tensor *out, int n_out,
					const struct align_launch *launch, struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	dsa_indexer_bwd_args a;
	ALIGN_TRY(dev->err, dsa_indexer_bwd_cfg_init(&a.c, (const struct dsa_indexer_params *)params, m, in, n_in, out,
						     n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "dsa_indexer_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("dsa_indexer_bwd", "negative launch knob");
	a.q = (const align_bf16 *)in[0].data;
	a.k = (const align_bf16 *)in[1].data;
	a.w = (const align_bf16 *)in[2].data;
	a.ds = (const float *)in[3].data;
	a.dq = (align_bf16 *)out[0].data;
	a.dk = (align_bf16 *)out[1].data;
	a.dw = (align_bf16 *)out[2].data;
	const int64_t T = a.c.T, H = a.c.H, D = a.c.D, S = a.c.S;
	size_t nr = (size_t)(T * H * D + S * D), nd = (size_t)(T * H * S);
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, nd * sizeof(float) + nr * sizeof(align_bf16) + 16, &ws));
	a.ddot = (float *)ws;
	a.rq = (align_bf16 *)(a.ddot + nd);
	a.rk = a.rq + T * H * D;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, maxb = 1024, mb = 0;
	ALIGN_TRY(dev->err, rows_max_block(dsa_indexer_bwd_prep_kernel, &mb));
	maxb = mb < maxb ? mb : maxb;
	ALIGN_TRY(dev->err, rows_max_block(dsa_indexer_bwd_ddot_kernel, &mb));
	maxb = mb < maxb ? mb : maxb;
	ALIGN_TRY(dev->err, rows_max_block(dsa_indexer_bwd_dq_kernel, &mb));
	maxb = mb < maxb ? mb : maxb;
	ALIGN_TRY(dev->err, rows_max_block(dsa_indexer_bwd_dk_kernel, &mb));
	maxb = mb < maxb ? mb : maxb;
	block = L->serial > 0 ? 1 : (block > maxb ? maxb : block);
	if (T * H + S > 0) {
		ALIGN_CUDA_LAUNCH(dsa_indexer_bwd_prep_kernel, (unsigned)dib_grid(T * H + S, block, L), block, 0,
				  stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	}
	if (T * H > 0) {
		ALIGN_CUDA_LAUNCH(dsa_indexer_bwd_ddot_kernel, (unsigned)dib_grid(T * H, block, L), block, 0, stream,
				  a);
		OPS_CUDA_TRY(cudaGetLastError());
		ALIGN_CUDA_LAUNCH(dsa_indexer_bwd_dq_kernel, (unsigned)dib_grid(T * H, block, L), block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
	}
	if (S > 0) {
		ALIGN_CUDA_LAUNCH(dsa_indexer_bwd_dk_kernel, (unsigned)dib_grid(S, block, L), block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
	}
	return ALIGN_OK;
}
