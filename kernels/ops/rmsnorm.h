/* rmsnorm.h: weighted RMSNorm over the last dim (DSv4 attn_norm, ffn_norm, q_norm, kv_norm,
 * compressor norm, final norm; specs/dsv4-numerics.md 2.1). x[T,D] bf16, w[D] f32 -> y[T,D] bf16.
 *
 * Operation order per row (CPU twin = specification), x32 = F(x):
 *   1. ss  = sum of x32*x32 in the RMSNORM_REDUCE order (reduce.h: seq, pairwise, warp32, or
 *            fp64 with exact squares; torch: torch_order.h torch_rowsum, ATen's CUDA row reduction of a
 *            [T, D] binary32 tensor, whose order follows T as well as D), binary32 result.
 *   2. ms  = ss / (float)D                       (binary32 divide)
 *            ms = ss * fl(fl(T) / fl(T D))       (torch: MeanOps' factor, a multiply)
 *   3. r   = rsqrt(ms + eps)                      eps = 1e-6f or 1e-5f (RMSNORM_EPS), binary32 add;
 *            rsqrt per RMSNORM_RSQRT: rn = align_rsqrtf (correctly rounded in practice),
 *            div = 1.0f/sqrtf, approx = mimic_rsqrtf_approx (<= 3.2 ulp, see test-math).
 *   4. y   = x32 * r                              (binary32)
 *   5. w'  = w (RMSNORM_WEIGHT=fp32) or F(R(w)) (bf16)
 *   6. out = R(w' * y)            (RMSNORM_CAST=after_weight: one rounding, DS-ref)
 *      out = R(F(R(y)) * F(R(w')))  (before_weight: normalised value stored as bf16, then a bf16
 *                                    multiply with the bf16 weight, HF/LLaMA style)
 * Error bound vs the fp64 evaluation of w' * x / sqrt(mean(x^2) + eps) (same w', same binary32
 * eps), relative to the reference, with ub = 2^-8 the bf16 unit roundoff and u = 2^-24:
 * after_weight: ub + (D+16) u (one bf16 rounding + the binary32 steps); before_weight:
 * 3 ub + (D+16) u (three bf16 roundings). Checked by test-ops-ref.c.
 * Rows are independent: a row's bytes do not depend on T (batch invariance), except under
 * RMSNORM_REDUCE=torch, where ATen picks its block shape from T: rows differ between T < 16 and T >= 16
 * (block.y = 1, 2, 4, 8 rows give 512 / 256 / ... lanes a row at most), as in PyTorch itself.
 * Config: rmsnorm_cfg_init (rmsnorm.c) checks the tensors and decodes every mode once into struct
 * rmsnorm_cfg; both twins call it first and read only the cfg. RMSNORM_REDUCE / RSQRT / EPS are
 * decoded by rmsnorm_factor_cfg_init, which qnorm shares.
 */
#ifndef ALIGN_RMSNORM_H
#define ALIGN_RMSNORM_H

#include <stddef.h>
#include <stdint.h>

#include "reduce.h"
#include "torch_order.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "modes.h"

struct align_tensor;
struct align_err;

struct rmsnorm_params {
	int unused; /* eps comes from RMSNORM_EPS; shapes from the tensors */
};

/* steps 1-3 of a row (shared with qnorm) */
struct rmsnorm_factor_cfg {
	enum align_reduce_order order; /* RMSNORM_REDUCE */
	int rsqrt;		       /* RMSNORM_RSQRT value (ALIGN_RMSNORM_RSQRT_*; cuda: GPU only) */
	float eps;		       /* RMSNORM_EPS in binary32 */
	struct torch_rowsum tr;	       /* RMSNORM_REDUCE=torch (order ALIGN_REDUCE_TORCH): the plan of T rows */
};

/* what both twins run: the dims and every decoded choice */
struct rmsnorm_cfg {
	int64_t T, D;		     /* x, y [T,D]; w [D] */
	struct rmsnorm_factor_cfg f; /* RMSNORM_REDUCE, RSQRT, EPS */
	int wbf16;		     /* RMSNORM_WEIGHT=bf16 */
	int before;		     /* RMSNORM_CAST=before_weight */
};

/* rsqrt of RMSNORM_RSQRT value v: rn, div, approx (the CUDA twins call rsqrtf for cuda themselves) */
ALIGN_HD static inline float rmsnorm_rsqrt(int v, float x)
{
	return v == ALIGN_RMSNORM_RSQRT_DIV	 ? hn_div(1.0f, align_sqrtf(x)) /* align_rsqrtf_div, host NaN bits */
	       : v == ALIGN_RMSNORM_RSQRT_APPROX ? mimic_rsqrtf_approx(x)
						 : align_rsqrtf(x);
}

/* the row sum of x[0..n) (squared when square) of row `row` in the RMSNORM_REDUCE order; hn: nan_host.h's
 * operators (the device's NaN bits as the host's; the torch order always uses them) */
ALIGN_HD static inline float rmsnorm_rowsum(const struct rmsnorm_factor_cfg *f, const float *x, int64_t n, int64_t row,
					    int square, int hn)
{
	if (f->order == ALIGN_REDUCE_TORCH)
		return torch_rowsum(x, 0, &f->tr, row, square);
	return hn ? align_reduce_hn(f->order, x, n, 1, 0, square) : align_reduce(f->order, x, n, 1, 0, square);
}

/* step 2 from ss */
ALIGN_HD static inline float rmsnorm_mean(const struct rmsnorm_factor_cfg *f, float ss, int64_t n)
{
	return f->order == ALIGN_REDUCE_TORCH ? hn_mul(ss, f->tr.mean) : hn_div(ss, (float)n);
}

/* steps 1-3: r = rsqrt(sum(x^2)/n + eps) over n binary32 values, row `row` of the op's rows */
ALIGN_HD static inline float rmsnorm_factor(const float *x32, int64_t n, int64_t row,
					    const struct rmsnorm_factor_cfg *f)
{
	float ss = rmsnorm_rowsum(f, x32, n, row, 1, 0);
	return rmsnorm_rsqrt(f->rsqrt, hn_add(rmsnorm_mean(f, ss, n), f->eps));
}

/* Decode RMSNORM_REDUCE, RMSNORM_RSQRT and RMSNORM_EPS for device (enum align_device); op names the
 * caller in messages; rows x n: the [rows, n] tensor whose rows the op normalises (RMSNORM_REDUCE=torch
 * plans its order from both), rows < 0 for an op that does not model the torch order (it refuses it).
 * ALIGN_ERR_UNSUPPORTED: RMSNORM_RSQRT=cuda on the CPU, RMSNORM_REDUCE=torch where refused or for a shape
 * torch_rowsum_plan does not model; ALIGN_ERR_INTERNAL: a value not handled here. */
int rmsnorm_factor_cfg_init(struct rmsnorm_factor_cfg *f, const char *op, const struct align_modes *m, int device,
			    int64_t rows, int64_t n, struct align_err *err);

/* Check in/out (data may be NULL) and decode the modes for device. ALIGN_ERR_INPUT for a bad tensor,
 * ALIGN_ERR_UNSUPPORTED for a value device cannot run, ALIGN_ERR_INTERNAL for a value modes.def has but
 * this function does not handle; the message goes to err (NULL: stderr). */
int rmsnorm_cfg_init(struct rmsnorm_cfg *c, const struct rmsnorm_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err);

int rmsnorm_fwd_cpu(const struct rmsnorm_params *p, const struct align_modes *m, const struct align_tensor *in,
		    int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_RMSNORM_H */
