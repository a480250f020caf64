/* matmul.h: y[T,F] = a[T,D] @ b[F,D]^T (torch Linear layout), the GEMM contract shared by the
 * matmul op and the GEMMs inside router and mhc (via matmul_dot).
 *
 * Operation order (CPU twin = specification):
 *   1. operands: each element is read (bf16 or f32 tensor) as binary32 v and, per MATMUL_OPERAND,
 *      used as v (fp32), F(R(v)) (bf16) or rna-rounded to 10 mantissa bits (tf32, as
 *      cvt.rna.tf32.f32). Products of two bf16 or two tf32 values are exact in binary32.
 *   2. dot over k = 0..D-1 per MATMUL_ACCUM (see matmul_dot); with MATMUL_FMA=on every
 *      multiply-add is fmaf(a, b, acc) (fmaf on CPU and GPU, both correctly rounded), the
 *      accumulator starting at +0; with FMA off, acc = a0*b0 then acc = acc + R32(a_k*b_k).
 *        seq:     k = 0, 1, ..., D-1.
 *        split16: 16 contiguous splits of c = ceil(D/16) (the last ones shorter or empty), each
 *                 summed as seq; the 16 partials then summed left to right (empty ones skipped).
 *        fp64:    binary64 accumulation of exact binary64 products, k ascending, one rounding
 *                 to binary32 (MATMUL_FMA ignored).
 *   3. output per MATMUL_OUT: R(acc) (bf16) or acc (fp32).
 * Error bound vs the exact dot of the operands as used in step 1 (u = 2^-24, S = sum|a_k b_k|):
 *   seq: D u S; split16: (ceil(D/16) + 16) u S; fp64: u |exact| + D 2^-53 S;
 *   plus, for a bf16 output, half a bf16 ulp of the result (<= 2^-8 relative).
 *   test-ops-ref.c checks every mode against an fp64 reference with these bounds.
 *
 * Engines (MATMUL_IMPL, ALIGN_MATMUL_IMPL_*; read by the matmul op only: the GEMMs inside router and mhc
 * always run the order above). Everything above describes `portable`, the only engine of the C twin.
 *   portable: steps 1-3, bitwise equal on CPU and GPU (kernels/ops/matmul.c, kernels/ops/matmul.cu).
 *   tc (GPU only; kernels/ops/matmul_tc.cu): the batch-invariant bf16 tensor-core GEMM.
 *     1. operands as step 1 with MATMUL_OPERAND=bf16: a bf16 tensor as is, an f32 tensor rounded to
 *        bf16 (round to nearest even) by a staging pass. Operands that the kernel cannot read in place
 *        (f32, D % 8 != 0, not 16-byte aligned) are staged as bf16 rows of ceil(D/8)*8 elements,
 *        zero-padded; the kernel zero-fills K past D up to its 64-deep tile anyway, so the padding
 *        adds the same +0 products it would have added.
 *     2. mma.sync m16n8k16 into fp32 accumulators, K ascending in tiles of 64, one warp per output
 *        element, no split-K; inside an mma the tensor core's own order and rounding.
 *     3. MATMUL_OUT=bf16: R(acc), one round to nearest even of the fp32 accumulator; fp32: acc.
 *     The bits are fixed by (D, the row of a, the row of b): deterministic run to run and batch
 *     invariant (row t of y is the same for every T and every row block the rows come in). They are
 *     not the portable engine's bits (other summation order and precision).
 *   cublas (GPU only): cuBLAS as PyTorch eager CUDA calls it for nn.Linear without bias (y = a @ b^T):
 *     cublasGemmEx(transa = T, transb = N, m = F, n = T, k = D, A = b, lda = D, B = a, ldb = D,
 *     C = y, ldc = F, alpha = 1, beta = 0, CUBLAS_GEMM_DEFAULT) on the device context's handle
 *     (align_dev_cublas, created once; stream and math mode set on every call), cuBLAS's default
 *     workspace, per MATMUL_OPERAND:
 *       bf16: A, B CUDA_R_16BF (f32 tensors rounded to bf16 first, as step 1), CUBLAS_COMPUTE_32F,
 *             CUBLAS_DEFAULT_MATH (PyTorch's default allow_bf16_reduced_precision_reduction: a split-K
 *             reduction may round partial sums to bf16), C CUDA_R_16BF (MATMUL_OUT=bf16: cuBLAS's
 *             epilogue rounds to nearest even) or CUDA_R_32F (fp32).
 *       fp32: A, B CUDA_R_32F (bf16 tensors widened exactly), CUBLAS_COMPUTE_32F,
 *             CUBLAS_PEDANTIC_MATH (no TF32, no reduced precision), C CUDA_R_32F; MATMUL_OUT=bf16:
 *             that fp32 result rounded once to bf16 (round to nearest even) by a separate pass.
 *       tf32: as fp32 with CUBLAS_COMPUTE_32F_FAST_TF32 and CUBLAS_DEFAULT_MATH; cuBLAS / the tensor
 *             cores convert the fp32 operands to TF32 themselves (not necessarily the rna rounding
 *             of step 1).
 *     Deterministic run to run for one GPU model and cuBLAS version (cuBLAS's reproducibility
 *     guarantee for one stream), NOT batch invariant in general: the kernel (tile shape, split-K)
 *     cuBLAS picks depends on T. Asynchronous on dev->stream like the other engines.
 *   cublas_pinned (GPU only): cuBLASLt with one tensor-core algorithm pinned per weight shape, for
 *     batch-invariant GEMMs at cuBLAS speed (tests/gpu/bench-matmul-lt.cu measured it on an H100).
 *     1. operands as tc (MATMUL_OPERAND=bf16 only; f32, D % 8 != 0 or unaligned operands staged as
 *        zero-padded bf16 rows of kp = ceil(D/8)*8); F % 8 != 0: b gets zero rows up to fp = ceil(F/8)*8
 *        and y is computed as [T, fp] in a temporary whose first F columns are copied out (the extra
 *        columns are dropped; every column is its own dot, so the kept ones do not change); an
 *        unaligned y goes through a temporary too.
 *     2. the algorithm: cublasLtMatmulAlgoGetHeuristic for (m = fp, n = MATMUL_PIN_ROWS = 8192, k = kp),
 *        transa = T, transb = N, bf16 A and B, C/D of the output dtype, CUBLAS_COMPUTE_32F, at most
 *        32 MiB of workspace; the first result without split-K, then forced to split-K 1 and no
 *        reduction scheme. It depends on (fp, kp, the output dtype), never on T, so every T runs the
 *        same kernel with the same tiling and K order: row t of y is the same whatever T
 *        (cublasLtMatmulAlgoCheck must accept the actual T, else status 4).
 *     3. MATMUL_OUT=bf16: cuBLASLt's epilogue rounds the fp32 accumulator (round to nearest even);
 *        fp32: the accumulator.
 *     Deterministic and batch invariant for one GPU model and cuBLASLt version; the bits are not
 *     tc's, cublas's or portable's (another kernel).
 *   Refused (status 4, one message, nothing run or written, never a substitute) for tc and cublas:
 *     MATMUL_ACCUM other than seq and MATMUL_FMA=on (they name the portable engine's order; accepting
 *     them would record an order that did not run), the same for cublas_pinned; for tc and
 *     cublas_pinned also MATMUL_OPERAND fp32 and tf32 (bf16 operands only). The engines are GPU only
 *     (modes.def GPU_ONLY): matmul_cfg_init refuses them on the CPU. These refusals are all made by
 *     matmul_cfg_init (struct matmul_cfg below), the one decoding of the modes that both twins read.
 *     The launch knobs (struct align_launch) do not apply to tc and cublas and are ignored (negative
 *     values are still refused, status 2). D == 0 gives y = +0 from every engine.
 *   Agreement with portable (same operand and output modes): |y_engine - y_portable| within the
 *     tolerance stated and checked in tests/gpu/test-matmul-impl.cu (a bound in S = sum |a_k b_k|
 *     and |y|; the engines add in other orders, so the bits differ).
 */
#ifndef ALIGN_MATMUL_H
#define ALIGN_MATMUL_H

#include <stdint.h>

#include "numerics.h"
#include "status.h"

#ifdef __cplusplus
extern "C" { /* matmul_cfg_init and modes.h's functions are C (libkernels) */
#endif

#include "modes.h"

struct align_modes;
struct align_tensor;

struct matmul_params {
	int unused; /* shapes come from the tensors; kept for the common calling convention */
};

/* The op's configuration, built once by matmul_cfg_init (matmul.c) and read by both twins: the shapes
 * and the decoded modes. Mode values are the generated enums of modes.def. */
struct matmul_cfg {
	int64_t T, D, F; /* a[T,D], b[F,D] -> y[T,F] */
	int y_dtype;	 /* enum align_dtype of y (MATMUL_OUT) */
	int operand;	 /* ALIGN_MATMUL_OPERAND_*: the rounding of step 1 */
	int accum;	 /* ALIGN_MATMUL_ACCUM_*: the order of step 2 */
	int fma;	 /* 1: MATMUL_FMA=on */
	int impl;	 /* ALIGN_MATMUL_IMPL_*: portable on the CPU; any engine on the GPU */
};

/* Check a[T,D], b[F,D] (f32 or bf16) -> y[T,F] (dtype per MATMUL_OUT) and decode the modes for device
 * (enum align_device). 0, ALIGN_ERR_INPUT (shape or dtype), ALIGN_ERR_UNSUPPORTED (a value the device
 * cannot run, or an engine refusal of "Engines" above), ALIGN_ERR_INTERNAL (a value not handled); the
 * message goes to err (NULL: stderr). Data pointers are not read. */
int matmul_cfg_init(struct matmul_cfg *c, const struct matmul_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		    struct align_err *err);

ALIGN_HD static inline float matmul_operand(float v, int operand)
{
	return operand == ALIGN_MATMUL_OPERAND_BF16   ? align_round_bf16(v)
	       : operand == ALIGN_MATMUL_OPERAND_TF32 ? align_round_tf32(v)
						      : v;
}

ALIGN_HD static inline float matmul__seq(const float *a, const float *b, int64_t n, int fma)
{
	if (n <= 0)
		return 0.0f;
	float acc;
	if (fma) {
		acc = 0.0f;
		for (int64_t k = 0; k < n; k++)
			acc = fmaf(a[k], b[k], acc);
	} else {
		acc = a[0] * b[0];
		for (int64_t k = 1; k < n; k++)
			acc = acc + a[k] * b[k];
	}
	return acc;
}

/* dot(a, b) over n elements in the order of `accum` (ALIGN_MATMUL_ACCUM_*); fma: use fmaf */
ALIGN_HD static inline float matmul_dot(const float *a, const float *b, int64_t n, int accum, int fma)
{
	if (accum == ALIGN_MATMUL_ACCUM_FP64) {
		double s = 0.0;
		for (int64_t k = 0; k < n; k++)
			s += (double)a[k] * (double)b[k];
		return (float)s;
	}
	if (accum == ALIGN_MATMUL_ACCUM_SPLIT16) {
		int64_t c = (n + 15) / 16;
		float total = 0.0f;
		int first = 1;
		for (int64_t k0 = 0; k0 < n && c > 0; k0 += c) {
			float part = matmul__seq(a + k0, b + k0, n - k0 < c ? n - k0 : c, fma);
			total = first ? part : total + part;
			first = 0;
		}
		return total;
	}
	return matmul__seq(a, b, n, fma);
}

int matmul_fwd_cpu(const struct matmul_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		   struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MATMUL_H */
