/* qnorm_bwd.cu: CUDA twin of the weightless Q norm backward (contract: qnorm_bwd.h; specification:
 * qnorm_bwd.c). q[T,H,D], dy[T,H,D] bf16 -> dq[T,H,D] bf16, the C twin's bytes in every portable mode: each
 * head row runs the header's two phases (qnorm_bwd_pre, qnorm_bwd_post), the same code as the C twin, with
 * reduce.h's orders run by one thread; between them the rsqrt of RMSNORM_RSQRT (rows_rsqrt: the portable
 * forms, or CUDA's rsqrtf for the GPU-only value).
 * Layout: one thread per head row, grid-stride; 2D floats of the device context's scratch per row.
 * Knobs: block (default 128), grid_cap; rows_per_block and serial not used (the row code is serial).
 * Limit: a NaN produced inside a row sum has the GPU's canonical bits (reduce.h's plain operators), so on
 * inputs that make a row NaN the NaN payload may differ from the C twin's; finite results are bitwise equal.
 */
#include "qnorm_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct qnb_args {
	const align_bf16 *q, *dy; /* [R, D] */
	align_bf16 *dq;		  /* [R, D] */
	float *scr;		  /* [R, 2D] */
	struct qnorm_bwd_cfg c;
};

__global__ void qnorm_bwd_row_kernel(qnb_args a)
{
	const int64_t D = a.c.D;
	for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < a.c.R;
	     row += (int64_t)gridDim.x * blockDim.x) {
		float *x32 = a.scr + row * 2 * D;
		float arg = qnorm_bwd_pre(&a.c, a.q + row * D, x32, x32 + D);
		qnorm_bwd_post(&a.c, a.dy + row * D, x32, x32 + D, rows_rsqrt(a.c.b.f.rsqrt, arg), a.dq + row * D);
	}
}

extern "C" int qnorm_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				  int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				  struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	qnb_args a;
	ALIGN_TRY(dev->err, qnorm_bwd_cfg_init(&a.c, (const struct qnorm_bwd_params *)params, m, in, n_in, out, n_out,
					       ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "qnorm_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("qnorm_bwd", "negative launch knob");
	a.q = (const align_bf16 *)in[0].data;
	a.dy = (const align_bf16 *)in[1].data;
	a.dq = (align_bf16 *)out[0].data;
	if (a.c.R <= 0 || a.c.D <= 0)
		return ALIGN_OK;
	void *scr = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)(a.c.R * 2 * a.c.D) * sizeof(float), &scr));
	a.scr = (float *)scr;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, mb = 0;
	ALIGN_TRY(dev->err, rows_max_block(qnorm_bwd_row_kernel, &mb));
	block = block > mb ? mb : block;
	int64_t grid = (a.c.R + block - 1) / block, cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	grid = grid > cap ? cap : grid;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(qnorm_bwd_row_kernel, (unsigned)(grid < 1 ? 1 : grid), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError());
	return ALIGN_OK;
}
