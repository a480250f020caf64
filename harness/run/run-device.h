/* run-device: run one op's CUDA twin on host tensors (copy in, launch, copy out) for `align run
 * --device cuda`. Compiled only when the build has CUDA (run-device.cu); the C side sees plain C. */
#ifndef ALIGN_RUN_DEVICE_H
#define ALIGN_RUN_DEVICE_H

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 0 ok; 2 the op has no CUDA twin or refused its inputs; 3 a CUDA error (message printed);
 * 4 the modes are not supported on the GPU (never substituted). name_out: the device's name. */
int run_device_op(const struct align_op *op, const void *params, const struct align_modes *m,
                  const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out, char *name_out,
                  size_t name_len);

#ifdef __cplusplus
}
#endif

#endif
