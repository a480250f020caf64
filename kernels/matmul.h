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
 */
#ifndef ALIGN_MATMUL_H
#define ALIGN_MATMUL_H

#include "numerics.h"

struct align_modes;
struct align_tensor;

enum matmul_accum { MATMUL_ACC_SEQ, MATMUL_ACC_SPLIT16, MATMUL_ACC_F64 };
enum matmul_operand { MATMUL_OPD_BF16, MATMUL_OPD_F32, MATMUL_OPD_TF32 };

struct matmul_params {
	int unused; /* shapes come from the tensors; kept for the common calling convention */
};

ALIGN_HD static inline float matmul_operand(float v, int operand)
{
	return operand == MATMUL_OPD_BF16 ? align_round_bf16(v) : operand == MATMUL_OPD_TF32 ? align_round_tf32(v) : v;
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

/* dot(a, b) over n elements in the order of `accum` (enum matmul_accum); fma: use fmaf */
ALIGN_HD static inline float matmul_dot(const float *a, const float *b, int64_t n, int accum, int fma)
{
	if (accum == MATMUL_ACC_F64) {
		double s = 0.0;
		for (int64_t k = 0; k < n; k++)
			s += (double)a[k] * (double)b[k];
		return (float)s;
	}
	if (accum == MATMUL_ACC_SPLIT16) {
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

int matmul_fwd_cpu(const struct matmul_params *p, const struct align_modes *m, const struct align_tensor *in,
		   int n_in, struct align_tensor *out, int n_out);

#endif /* ALIGN_MATMUL_H */
