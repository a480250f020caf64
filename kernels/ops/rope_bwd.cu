/* rope_bwd.cu: CUDA twin of the RoPE backward (contract: rope_bwd.h; specification: rope_bwd.c): rope's CUDA
 * twin (rope.cu) under the flipped parameters, after rope_bwd's own tensor checks, so its bytes are rope's
 * and therefore the C twin's in every portable mode. */
#include "rope_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

extern "C" int rope_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			     struct align_tensor *out, int n_out, const struct align_launch *launch,
			     struct align_dev *dev);

extern "C" int rope_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				 int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				 struct align_dev *dev)
{
	struct rope_op_cfg c;
	ALIGN_TRY(dev->err, rope_bwd_cfg_init(&c, (const struct rope_params *)params, m, in, n_in, out, n_out,
					      ALIGN_DEVICE_CUDA, dev->err));
	struct rope_params q = rope_bwd_params((const struct rope_params *)params);
	return rope_fwd_cuda(&q, m, in, n_in, out, n_out, launch, dev);
}
