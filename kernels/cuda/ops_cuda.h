/* ops_cuda.h: the calling convention of the CUDA twins and their registry (kernels/cuda/ops_cuda.cu).
 * Include from C or CUDA.
 *
 * A CUDA twin `<op>_fwd_cuda` (kernels/ops/<op>.cu, C linkage) takes the same params, modes and tensor
 * descriptors as the C twin `<op>_fwd_cpu` (ops.h), except that every tensor's data is a DEVICE pointer,
 * plus launch knobs and the device context (dev.h: its stream, handles, workspace, properties). It checks
 * shapes and dtypes like the C twin, enqueues its work on dev->stream and returns without waiting (a twin may wait if it must; its .cu says so). Return values:
 *   0 ALIGN_OK
 *   2 ALIGN_ERR_INPUT        bad shape, dtype, parameter or launch knob (message names it)
 *   3 ALIGN_ERR_INTERNAL     a CUDA call failed (message: the call, its error, file:line)
 *   4 ALIGN_ERR_UNSUPPORTED  the modes ask for something the GPU cannot reproduce (MATH_IMPL=libm): never
 *                            substituted; the message names the mode.
 * One message goes to stderr on every non-zero return.
 *
 * Contract in portable modes: the output bytes equal the C twin's for every input, shape and launch
 * configuration, NaN bits included (nan_host.h). Launch knobs only move work between threads; a twin
 * adjusts a knob it cannot honour to the nearest valid value (its .cu says how) and rejects only
 * negative values. tests/gpu/test-ops-cuda.cu checks all of this for every op that has a twin.
 *
 * Registry: ops_cuda_fwd(op) is the op's twin (NULL only for an op pointer not in ops.def). Every row of
 * ops.def has a twin: kernels/cuda/ops_cuda.cu's table is the X-macro over ops.def. Adding an op: write
 * kernels/ops/<op>.cu defining <op>_fwd_cuda (declared below for every row of ops.def) and add it to
 * kernels_cuda_src in kernels/meson.build.
 */
#ifndef ALIGN_OPS_CUDA_H
#define ALIGN_OPS_CUDA_H

/* system headers first, outside extern "C" (numerics.h includes them again) */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDA_ARCH__
/* numerics.h defines these host-only mimics outside the device pass, but ops.h's host inlines name them:
 * declare them for nvcc's device pass (host functions: device code cannot call them). */
float mimic_libm_expf(float x);
float mimic_libm_log1pf(float x);
#endif
#include "ops.h"
#include "dev.h"

/* Launch configuration knobs; 0 = the op's default. Results never depend on them. */
struct align_launch {
	int block;	    /* threads per block */
	int rows_per_block; /* rows (tokens, heads) a block processes at once; threads per row = block / this */
	int grid_cap;	    /* at most this many blocks; the rest is covered by grid-stride loops */
	int serial;	    /* 1: the reference path, one thread per row running the C twin's loops as written */
};

typedef int (*align_fwd_cuda_fn)(const void *params, const struct align_modes *m, const struct align_tensor *in,
				 int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				 struct align_dev *dev);

/* <op>_fwd_cuda for every op of ops.def (the registry names each one) */
#define OP(name, desc, inputs)                                                                                         \
	int name##_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,  \
			    struct align_tensor *out, int n_out, const struct align_launch *launch,                    \
			    struct align_dev *dev);
#include "ops.def"
#undef OP

/* The CUDA twin of op, or NULL when op is not a registry entry. */
align_fwd_cuda_fn ops_cuda_fwd(const struct align_op *op);

/* Messages, worded like the rest of the project; each returns its status code. */
int ops_cuda_fail(const char *call, cudaError_t e, const char *file, int line);	    /* 3 */
int ops_cuda_bad_input(const char *op, const char *what);			    /* 2 */
int ops_cuda_unsupported(const char *op, const struct align_modes *m, int mode_id); /* 4 */

#ifdef __cplusplus
}
#endif

/* In a twin: return 3 with the message when a CUDA call fails. */
#define OPS_CUDA_TRY(call)                                                                                             \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ != cudaSuccess)                                                                                 \
			return ops_cuda_fail(#call, e_, __FILE__, __LINE__);                                           \
	} while (0)

#endif /* ALIGN_OPS_CUDA_H */
