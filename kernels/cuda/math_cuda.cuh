/* math_cuda.cuh: the MATH_IMPL choice inside the CUDA twins (modes.def); impl is the MATH_IMPL value
 * (ALIGN_MATH_IMPL_*, decoded by the op's config).
 *
 *   portable  align numerics.h: correctly rounded (binary64 inside), bitwise equal to the C twins.
 *   libm      glibc on the CPU: no device twin (the ops' configs refuse it on the GPU with status 4).
 *   cuda      GPU only: what PyTorch eager CUDA kernels call for binary32 (built without fast
 *             math): expf, exp2f, log1pf from libdevice (max 2 ulp, not correctly rounded),
 *             sigmoid as 1.0f / (1.0f + expf(-x)) (torch.sigmoid, silu's exp), softplus as
 *             x > 20 ? x : log1pf(expf(x)) (F.softplus, beta 1, threshold 20).
 *   cuda_fast GPU only: --use_fast_math builds: __expf, ex2.approx.ftz.f32, __fdividef in sigmoid;
 *             log1pf has no fast variant and stays libdevice's.
 * The GPU-only values are checked for run-to-run determinism and batch invariance (every function
 * here is a pure function of its argument) and against PyTorch by tests/gpu/torch-compare.py, not
 * against the C twins. The libdevice functions use explicit fused multiply-adds inside, so nvcc's
 * --fmad=false on align's kernels does not change them.
 */
#ifndef ALIGN_MATH_CUDA_CUH
#define ALIGN_MATH_CUDA_CUH

#include <stddef.h>

#include "numerics.h"

#ifdef __cplusplus
extern "C" {
#endif
#include "modes.h"
#ifdef __cplusplus
}
#endif

/* the GPU-only values (CUDA's own functions) */
ALIGN_HD static inline int dm_cuda_math(int impl)
{
	return impl == ALIGN_MATH_IMPL_CUDA || impl == ALIGN_MATH_IMPL_CUDA_FAST;
}

/* ALIGN_HD so that the twins' host-device helpers can call them; the GPU-only branches exist only in
 * device code (a host pass never runs a GPU-only value: ops_fwd_cpu refuses it) */
ALIGN_HD static inline float dm_expf(int impl, float x)
{
#ifdef __CUDA_ARCH__
	if (impl == ALIGN_MATH_IMPL_CUDA)
		return expf(x);
	if (impl == ALIGN_MATH_IMPL_CUDA_FAST)
		return __expf(x);
#endif
	(void)impl;
	return align_expf(x);
}

ALIGN_HD static inline float dm_exp2f(int impl, float x)
{
#ifdef __CUDA_ARCH__
	if (impl == ALIGN_MATH_IMPL_CUDA)
		return exp2f(x);
	if (impl == ALIGN_MATH_IMPL_CUDA_FAST) {
		float y;
		asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
		return y;
	}
#endif
	(void)impl;
	return align_exp2f(x);
}

ALIGN_HD static inline float dm_log1pf(int impl, float x)
{
#ifdef __CUDA_ARCH__
	if (dm_cuda_math(impl))
		return log1pf(x);
#endif
	(void)impl;
	return align_log1pf(x);
}

ALIGN_HD static inline float dm_sigmoidf(int impl, float x)
{
#ifdef __CUDA_ARCH__
	if (impl == ALIGN_MATH_IMPL_CUDA)
		return 1.0f / (1.0f + expf(-x));
	if (impl == ALIGN_MATH_IMPL_CUDA_FAST)
		return __fdividef(1.0f, 1.0f + __expf(-x));
#endif
	(void)impl;
	return align_sigmoidf(x);
}

ALIGN_HD static inline float dm_softplusf(int impl, float x)
{
#ifdef __CUDA_ARCH__
	if (dm_cuda_math(impl))
		return x > 20.0f ? x : log1pf(dm_expf(impl, x));
#endif
	(void)impl;
	return align_softplusf(x);
}

#endif /* ALIGN_MATH_CUDA_CUH */
