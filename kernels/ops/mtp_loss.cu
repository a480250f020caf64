/* mtp_loss.cu: CUDA twin of the MTP loss scaling and combination (contract: mtp_loss.h): mtp_loss_row, one
 * thread per row, compiled with --fmad=false, so every portable result is the C twin's.
 * Knobs: launch.block (default 128), serial: one thread. Napkin maths: K + 3 flops a row; launch bound.
 */
#include "mtp_loss.h"

#include "rows_cuda.cuh"

#include "op_cfg.h"

__global__ void mtp_loss_kernel(mtp_loss_cfg c, const float *lm, const float *L, float *scaled, float *total)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < c.T; t += (int64_t)gridDim.x * blockDim.x)
		mtp_loss_row(&c, lm[t], L + t * c.K, &scaled[t], &total[t]);
}

extern "C" int mtp_loss_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				 int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				 struct align_dev *dev)
{
	struct mtp_loss_cfg c;
	ALIGN_TRY(dev->err, mtp_loss_cfg_init(&c, (const struct mtp_loss_params *)params, m, in, n_in, out, n_out,
					      ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "mtp_loss", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("mtp_loss", "negative launch knob");
	if (c.T <= 0)
		return ALIGN_OK;
	int maxb = 0, rc = rows_max_block(mtp_loss_kernel, &maxb);
	if (rc)
		return rc;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128;
	block = L->serial > 0 ? 1 : block > maxb ? maxb : block;
	int64_t grid = L->serial > 0 ? 1 : (c.T + block - 1) / block;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(mtp_loss_kernel, (unsigned)grid, block, 0, (cudaStream_t)dev->stream, c,
			  (const float *)in[0].data, (const float *)in[1].data, (float *)out[0].data,
			  (float *)out[1].data);
	OPS_CUDA_TRY(cudaGetLastError());
	return ALIGN_OK;
}
