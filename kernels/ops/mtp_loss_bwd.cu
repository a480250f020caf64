/* mtp_loss_bwd.cu: CUDA twin of the MTP loss side's backward (contract: mtp_loss_bwd.h): mtp_loss_bwd_row,
 * one thread per row, compiled with --fmad=false and the host's NaN rules (nan_host.h), so every result is
 * the C twin's. Knobs: launch.block (default 128), grid_cap, serial: one thread. Napkin maths: 4 flops and
 * 4 (K + 2) bytes a row; launch bound. No atomics.
 */
#include "mtp_loss_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

__global__ void mtp_loss_bwd_kernel(mtp_loss_bwd_cfg c, const float *dtotal, float *dlm, float *dL)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < c.f.T;
	     t += (int64_t)gridDim.x * blockDim.x)
		mtp_loss_bwd_row(&c, dtotal[t], &dlm[t], dL + t * c.f.K);
}

extern "C" int mtp_loss_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				     int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				     struct align_dev *dev)
{
	struct mtp_loss_bwd_cfg c;
	ALIGN_TRY(dev->err, mtp_loss_bwd_cfg_init(&c, (const struct mtp_loss_bwd_params *)params, m, in, n_in, out,
						  n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "mtp_loss_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("mtp_loss_bwd", "negative launch knob");
	if (c.f.T <= 0)
		return ALIGN_OK;
	int maxb = 0, rc = rows_max_block(mtp_loss_bwd_kernel, &maxb);
	if (rc)
		return rc;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128;
	block = L->serial > 0 ? 1 : block > maxb ? maxb : block;
	int64_t grid = L->serial > 0 ? 1 : (c.f.T + block - 1) / block;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(mtp_loss_bwd_kernel, (unsigned)grid, block, 0, (cudaStream_t)dev->stream, c,
			  (const float *)in[1].data, (float *)out[0].data, (float *)out[1].data);
	OPS_CUDA_TRY(cudaGetLastError());
	return ALIGN_OK;
}
