/* mhc_head_bwd.cu: CUDA twin of the hc_head backward (contract: mhc_head_bwd.h; the kernels and their
 * layout: mhc_bwd_cuda.cuh, shared with mhc_pre_bwd.cu). */
#include "mhc_bwd_cuda.cuh"

extern "C" int mhc_head_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				     int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				     struct align_dev *dev)
{
	return mhc_bwd_cuda("mhc_head_bwd", params, m, in, n_in, out, n_out, launch, dev);
}
