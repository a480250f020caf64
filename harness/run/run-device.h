/* run-device: `align run --device cuda`: the device context opened once per process, each op's CUDA
 * twin run on copies of the host tensors (pool memory of the context, released after each call), and
 * the close. Compiled only when the build has CUDA (run-device.cu); the C side sees plain C (dev.h
 * holds no CUDA type), so cmd-run owns the struct align_dev and ctx_close needs no CUDA header.
 * Every failure sets its message in the error record given to run_device_open (d->err). */
#ifndef ALIGN_RUN_DEVICE_H
#define ALIGN_RUN_DEVICE_H

#include "dev.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open device 0 into d: properties, driver and runtime versions, the one stream; ALIGN_ERR_INTERNAL
 * "--device cuda: no CUDA device (...)" when there is none. */
int run_device_open(struct align_dev *d, struct align_err *err);
/* Create the vendor GEMM handle the modes select for ops that read MATMUL_IMPL (cublas: cuBLAS,
 * cublas_pinned: cuBLASLt), so that d->cublas_version / d->cublaslt_version are known before the
 * trace header is written. Nothing when no vendor GEMM is selected. */
int run_device_vendor_gemm(struct align_dev *d, const struct align_modes *m);
/* Copy in, run op's CUDA twin on d->stream, wait, copy out; the pool is released afterwards.
 * 0 ok; 2 refused inputs; 3 a CUDA error; 4 the modes are not supported on the GPU. A twin prints its
 * own message (ops_cuda.h); the context's failures are in d->err. */
int run_device_op(struct align_dev *d, const struct align_op *op, const void *params, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);
/* Wait for the stream and free everything (safe on a zeroed struct). */
void run_device_close(struct align_dev *d);

#ifdef __cplusplus
}
#endif

#endif
