/* matmul_dev.cuh: device helpers shared by the portable GEMM (matmul.cu) and the mHC twins
 * (mhc_cuda.cuh): element loads, the host-NaN fused multiply-add, and the reference dot product, a
 * line-by-line copy of matmul_dot (matmul.h) with every NaN-capable operation taken through
 * nan_host.h so that even a NaN result has the host's bits. Include from .cu only.
 * Written for nvcc and for the host emulator of tests/gpu/emu (no static __shared__, launches through
 * ALIGN_CUDA_LAUNCH, no intrinsics the emulator lacks), so run-emu.sh can check the kernels' logic.
 */
#ifndef ALIGN_MATMUL_DEV_CUH
#define ALIGN_MATMUL_DEV_CUH

#include "matmul.h"
#include "nan_host.h"
#include "rows_cuda.cuh" /* ALIGN_CUDA_LAUNCH, align_cuda_dyn_smem: the emulator's hooks (tests/gpu/emu) */

#ifdef ALIGN_CUDA_EMU
#define MM_NOINLINE
#else
#define MM_NOINLINE __noinline__ /* slow paths: keep them out of the callers' register budget */
#endif

/* element i of an f32 or bf16 array, as binary32 */
static __device__ __forceinline__ float mm_ld(const void *p, int bf16, long long i)
{
	return bf16 ? align_bf16_to_f32(((const align_bf16 *)p)[i]) : ((const float *)p)[i];
}

/* fmaf(a, b, c) with the host's NaN (nan_host.h hn_fmaf: on the device the fix is always on) */
static __device__ __forceinline__ float mm_hn_fmaf(float a, float b, float c)
{
	return hn_fmaf(a, b, c);
}

/* matmul__seq of matmul.h over n elements starting at element k0 of rows a and b */
static __device__ MM_NOINLINE float mm_seq_ref(const void *a, int a_bf16, const void *b, int b_bf16, long long k0,
					       long long n, int opd_a, int opd_b, int fma)
{
	if (n <= 0)
		return 0.0f;
	float acc;
	if (fma) {
		acc = 0.0f;
		for (long long k = k0; k < k0 + n; k++)
			acc = mm_hn_fmaf(matmul_operand(mm_ld(a, a_bf16, k), opd_a),
					 matmul_operand(mm_ld(b, b_bf16, k), opd_b), acc);
	} else {
		acc = hn_mul(matmul_operand(mm_ld(a, a_bf16, k0), opd_a), matmul_operand(mm_ld(b, b_bf16, k0), opd_b));
		for (long long k = k0 + 1; k < k0 + n; k++)
			acc = hn_add(acc, hn_mul(matmul_operand(mm_ld(a, a_bf16, k), opd_a),
						 matmul_operand(mm_ld(b, b_bf16, k), opd_b)));
	}
	return acc;
}

/* matmul_dot(opd_a(a), opd_b(b), n, accum, fma) of matmul.h, host NaN bits; a, b: row starts */
static __device__ MM_NOINLINE float mm_dot_ref(const void *a, int a_bf16, const void *b, int b_bf16, long long n,
					       int opd_a, int opd_b, int accum, int fma)
{
	if (accum == ALIGN_MATMUL_ACCUM_FP64) {
		double s = 0.0;
		for (long long k = 0; k < n; k++)
			s = hn_addd(s, hn_muld(hn_f2d(matmul_operand(mm_ld(a, a_bf16, k), opd_a)),
					       hn_f2d(matmul_operand(mm_ld(b, b_bf16, k), opd_b))));
		return hn_d2f(s);
	}
	if (accum == ALIGN_MATMUL_ACCUM_SPLIT16) {
		long long c = (n + 15) / 16;
		float total = 0.0f;
		int first = 1;
		for (long long k0 = 0; k0 < n && c > 0; k0 += c) {
			float part = mm_seq_ref(a, a_bf16, b, b_bf16, k0, n - k0 < c ? n - k0 : c, opd_a, opd_b, fma);
			total = first ? part : hn_add(total, part);
			first = 0;
		}
		return total;
	}
	return mm_seq_ref(a, a_bf16, b, b_bf16, 0, n, opd_a, opd_b, fma);
}

#endif /* ALIGN_MATMUL_DEV_CUH */
