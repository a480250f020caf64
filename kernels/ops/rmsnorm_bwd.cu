/* rmsnorm_bwd.cu: CUDA twin of the RMSNorm backward (contract: rmsnorm_bwd.h; specification:
 * rmsnorm_bwd.c). x[T,D] bf16, w[D] f32, dy[T,D] bf16 -> dx[T,D] bf16, dw[D] f32|bf16, the C twin's bytes
 * in every portable mode: the per-element formulas are the header's (rmsb_p, rmsb_dx, rmsb_q) and every
 * sum is reduce.h's code run by one thread (RMSNORM_REDUCE=torch: torch_order.h's torch_rowsum, ATen's
 * threads replayed by one), so the association is the C twin's by construction.
 * RMSNORM_RSQRT=cuda (GPU only) takes CUDA's rsqrtf (rows_rsqrt), as the forward twin does.
 *
 * Layout: the device context's scratch holds x as binary32 [T,D], q [T,D], r [T] and s [T]; kernel 1
 * (one thread per row) widens x, computes r, the p_j (into q's row) and s; kernel 2 (one thread per
 * element) writes dx and q; kernel 3 (one thread per column) sums dw over the tokens with stride D.
 * Knobs: block (default 256), grid_cap; rows_per_block and serial not used (the row kernel is serial).
 * Napkin maths: ~5 passes over T*D floats; the serial row sums make this the reference engine for bits
 * (a block-tree twin as rmsnorm.cu's is a later step).
 * NaN bits: every sum is reduce.h's align_reduce_hn (nan_host.h's operators), so a NaN row sum carries the
 * host's bits as the C twin's plain sums give them (the GPU's canonical NaN differed from them before:
 * 256 of 8192 dx elements on the extreme fill under RMSNORM_BWD_FORM=apex, H100 2026-11-28).
 */
#include "rmsnorm_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct rmsb_args {
	const align_bf16 *x, *dy; /* [T,D] */
	const float *w;		  /* [D] */
	align_bf16 *dx;		  /* [T,D] */
	void *dw;		  /* [D] f32 or bf16 */
	float *x32, *q, *r, *s;	  /* scratch: [T,D], [T,D], [T], [T] */
	struct rmsnorm_bwd_cfg c;
};

__global__ void rmsnorm_bwd_row_kernel(rmsb_args a)
{
	const int64_t D = a.c.D;
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		float *x32 = a.x32 + t * D, *p = a.q + t * D;
		for (int64_t j = 0; j < D; j++)
			x32[j] = align_bf16_to_f32(a.x[t * D + j]);
		float ss = rmsnorm_rowsum(&a.c.f, x32, D, t, 1, 1);
		float r = rows_rsqrt(a.c.f.rsqrt, hn_add(rmsnorm_mean(&a.c.f, ss, D), a.c.f.eps));
		for (int64_t j = 0; j < D; j++)
			p[j] = rmsb_p(&a.c, align_bf16_to_f32(a.dy[t * D + j]), a.w[j], x32[j], r);
		a.r[t] = r;
		a.s[t] = rmsnorm_rowsum(&a.c.f, p, D, t, 0, 1);
	}
}

__global__ void rmsnorm_bwd_elem_kernel(rmsb_args a)
{
	int64_t n = a.c.T * a.c.D, stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		int64_t t = i / a.c.D, j = i - t * a.c.D;
		float g = align_bf16_to_f32(a.dy[i]), x = a.x32[i], r = a.r[t];
		a.dx[i] = align_f32_to_bf16(rmsb_dx(&a.c, g, a.w[j], x, r, a.s[t]));
		a.q[i] = rmsb_q(g, x, r);
	}
}

__global__ void rmsnorm_bwd_dw_kernel(rmsb_args a)
{
	for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.c.D;
	     j += (int64_t)gridDim.x * blockDim.x) {
		float v = rmsb_dw(&a.c, a.q, j, 1);
		if (a.c.dw_dtype == ALIGN_DT_BF16)
			((align_bf16 *)a.dw)[j] = align_f32_to_bf16(v);
		else
			((float *)a.dw)[j] = v;
	}
}

static unsigned rmsb_grid(int64_t work, int block, const struct align_launch *L, const struct align_dev *dev)
{
	int64_t grid = (work + block - 1) / block, cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	grid = grid > cap ? cap : grid;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	return (unsigned)(grid < 1 ? 1 : grid);
}

extern "C" int rmsnorm_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				    int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				    struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	rmsb_args a;
	ALIGN_TRY(dev->err, rmsnorm_bwd_cfg_init(&a.c, (const struct rmsnorm_bwd_params *)params, m, in, n_in, out,
						 n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "rmsnorm_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("rmsnorm_bwd", "negative launch knob");
	a.x = (const align_bf16 *)in[0].data;
	a.w = (const float *)in[1].data;
	a.dy = (const align_bf16 *)in[2].data;
	a.dx = (align_bf16 *)out[0].data;
	a.dw = out[1].data;
	if (a.c.D <= 0)
		return ALIGN_OK;
	int64_t TD = a.c.T * a.c.D;
	void *scr = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)(2 * TD + 2 * a.c.T + 1) * sizeof(float), &scr));
	a.x32 = (float *)scr;
	a.q = a.x32 + TD;
	a.r = a.q + TD;
	a.s = a.r + a.c.T;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, mb = 0, m2 = 0, m3 = 0;
	ALIGN_TRY(dev->err, rows_max_block(rmsnorm_bwd_row_kernel, &mb));
	ALIGN_TRY(dev->err, rows_max_block(rmsnorm_bwd_elem_kernel, &m2));
	ALIGN_TRY(dev->err, rows_max_block(rmsnorm_bwd_dw_kernel, &m3));
	mb = m2 < mb ? m2 : mb;
	mb = m3 < mb ? m3 : mb;
	block = block > mb ? mb : block;
	if (a.c.T > 0) {
		ALIGN_CUDA_LAUNCH(rmsnorm_bwd_row_kernel, rmsb_grid(a.c.T, block, L, dev), block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
		ALIGN_CUDA_LAUNCH(rmsnorm_bwd_elem_kernel, rmsb_grid(TD, block, L, dev), block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
	}
	ALIGN_CUDA_LAUNCH(rmsnorm_bwd_dw_kernel, rmsb_grid(a.c.D, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError());
	return ALIGN_OK;
}
