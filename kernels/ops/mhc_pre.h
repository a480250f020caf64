/* mhc_pre.h: mHC hc_pre (specs/dsv4-numerics.md 6.2-6.4, 6.6) and the helpers hc_head shares.
 * x[T,N,D] bf16 (residual streams), fn[(2+N)*N, N*D] f32 (rows: pre 0..N-1, post N..2N-1,
 * comb 2N + N*j + k), base[(2+N)*N] f32, scale[3] f32 (pre, post, comb)
 *   -> y[T,D] bf16 (aggregated sublayer input), pre[T,N] f32, post[T,N] f32, comb[T,N,N] f32.
 *
 * Operation order per token (CPU twin = specification), x32 = F(flatten(x[t])), K = N*D:
 *   0. MHC_PARAM=bf16: fn, base, scale are used as F(R(.)).
 *   1. RMS factor (MHC_RMS_FORM), ss = pairwise sum of x32^2 (reduce.h), eps = norm_eps:
 *        rsqrt:   rs = align_rsqrtf(ss / K + eps)
 *        inv_rms: rs = 1.0f / (align_sqrtf(ss / K) + eps)
 *   2. mix_r = dot(x32, fn_r) per MHC_PROJ_GEMM: fp32 = seq order; split16 = 16 splits (matmul.h);
 *      tf32 = both operands TF32-rounded, split16 order. No FMA.
 *   3. h_r = (mix_r * rs) * scale_c + base_r (two roundings), or with MHC_COMPUTEH_FMA=on
 *      fmaf(mix_r * rs, scale_c, base_r); c = 0 pre rows, 1 post rows, 2 comb rows.
 *   4. sg(z) = 1.0f / (1.0f + e(-z)) with e = exp per MATH_IMPL (MHC_EXP=exp) or
 *      mimic_exp_via_exp2f (MHC_EXP=exp2); the softmax/exp of step 5 use the same e.
 *      pre_i = sg(h_i) + hc_eps (MHC_HPRE_EPS=on) or sg(h_i);
 *      post_i = 2 * sg(h_{N+i}) (MHC_HPOST_EPS=off) or 2 * (sg(h_{N+i}) + hc_eps).
 *   5. Sinkhorn on M0[j][k] = h_{2N+N*j+k}, sums left to right, divisions elementwise:
 *        c1:  M = e(M0 - rowmax) / rowsum + hc_eps; M /= (colsum + hc_eps);
 *             (iters-1) x { M /= (rowsum + hc_eps); M /= (colsum + hc_eps) }
 *        c0:  M = e(M0 - rowmax); iters x { M /= max(rowsum, hc_eps); M /= max(colsum, hc_eps) }
 *        c0p: M = e(M0 - rowmax); iters x { M /= (rowsum + hc_eps); M /= (colsum + hc_eps) }
 *      MHC_SUM_ORDER=torch: the softmax denominator by torch_softmax_sum, rowsum by
 *      torch_sum_lastdim, colsum by torch_sum_strided (torch_order.h; PyTorch eager CUDA's
 *      torch.softmax(-1), .sum(-1), .sum(-2)); for N = 4 the first two are both (e0+e2)+(e1+e3).
 *      comb = M (rows = source stream j, columns = destination k).
 *   6. y_d = R(sum_{j=0..N-1} pre'_j * x32[j*D + d]) left to right, pre' = pre or F(R(pre))
 *      (MHC_COEF=bf16). Outputs pre/post/comb are the unrounded binary32 values.
 * Error bound vs fp64 of the same contract (checked by tests/kernels/test-ops-ref2.c, every mode
 * combination incl. MATH_IMPL, 3 fill sets): pre, post within 2^-18 absolute, comb within 2^-14
 * absolute (20 Sinkhorn rounds), y within 1 bf16 ulp + 2^-18 sum|x_j| (MHC_COEF=bf16: plus
 * |x_j| times the gap of the two bf16 roundings when the fp64 pre_j is within 2^-18 of a bf16
 * rounding boundary). Measured worst error/bound at T=4, N=4, D=256: y 0.50, pre 0.02, post 0.09,
 * comb 0.003. Domain: tokens with FLT_MIN < sum x^2 / K and sum x^2 < FLT_MAX (beyond, the fp32
 * sum of squares overflows and rs = 0). Measured, not proven: the mapping GEMM's worst case
 * K 2^-24 sum|x fn| can exceed 2^-18 after the rs scaling.
 * Tokens are independent (batch invariance).
 * Both twins call mhc_pre_cfg_init first and then read only the config (struct mhc_pre_cfg); the
 * switches shared with hc_head are decoded once, by mhc_modes_init (struct mhc_modes).
 */
#ifndef ALIGN_MHC_PRE_H
#define ALIGN_MHC_PRE_H

#include "matmul.h"
#include "reduce.h"

#ifdef __cplusplus
extern "C" { /* the cfg functions are C (libkernels) */
#endif

struct align_modes;
struct align_tensor;

#define MHC_MAX_N 8

struct mhc_params {
	int sinkhorn_iters; /* 20 in DSv4 */
	float hc_eps;	    /* 1e-6 */
	float norm_eps;	    /* 1e-6 */
};

struct align_dims;
/* params_default / params_variant of mhc_pre, mhc_post and mhc_head (the DSv4 values; one variant) */
void mhc_params_default(void *params, const struct align_dims *d);
int mhc_params_variant(void *params, const struct align_dims *d, int k);

/* The switches hc_pre and hc_head share, decoded once (mhc_modes_init) for both ops and both twins. */
struct mhc_modes {
	int math;	  /* ALIGN_MATH_IMPL_* the twin runs in e() (step 4) */
	int exp2;	  /* 1: MHC_EXP=exp2 */
	int inv_rms;	  /* 1: MHC_RMS_FORM=inv_rms (step 1) */
	int accum;	  /* ALIGN_MATMUL_ACCUM_* of the mapping dot (MHC_PROJ_GEMM: fp32 seq; split16, tf32 split16) */
	int opd_x;	  /* ALIGN_MATMUL_OPERAND_* of x32 and of the parameter-rounded fn (TF32 for tf32, else FP32) */
	int opd_fn;	  /* the same for fn as stored (what the GPU GEMM loads): BF16 when MHC_PARAM=bf16 (the
			     parameter rounding; tf32(F(R(v))) == F(R(v))), else opd_x */
	int param_bf16;	  /* 1: MHC_PARAM=bf16 (step 0) */
	int coef_bf16;	  /* 1: MHC_COEF=bf16 (step 6) */
	int computeh_fma; /* 1: MHC_COMPUTEH_FMA=on (step 3) */
};

/* hc_pre's configuration (mhc_pre_cfg_init in mhc_pre.c), read by both twins */
struct mhc_pre_cfg {
	int64_t T, N, D, K, R; /* x[T,N,D], K = N*D, R = (2+N)*N mapping rows */
	struct mhc_params p;   /* the op's params */
	struct mhc_modes mm;   /* the shared switches */
	int sinkhorn;	       /* ALIGN_MHC_SINKHORN_* (step 5) */
	int torch_sums;	       /* 1: MHC_SUM_ORDER=torch */
	int hpre_eps;	       /* 1: MHC_HPRE_EPS=on */
	int hpost_eps;	       /* 1: MHC_HPOST_EPS=on */
};

/* Decode the shared switches for device (enum align_device): 0, ALIGN_ERR_UNSUPPORTED (MATH_IMPL not
 * runnable there), ALIGN_ERR_INTERNAL (a value not handled); op names the op in the message. */
int mhc_modes_init(struct mhc_modes *c, const char *op, const struct align_modes *m, int device, struct align_err *err);
/* x[T,N,D] bf16 with 1 <= N <= MHC_MAX_N (and T, D, N*D below 2^31 on the GPU) */
int mhc_check_x(const char *op, const struct align_tensor *x, int device, struct align_err *err);
/* Check x, fn, base, scale -> y, pre, post, comb and decode the modes; 0, ALIGN_ERR_INPUT,
 * ALIGN_ERR_UNSUPPORTED, ALIGN_ERR_INTERNAL with the message in err (NULL: stderr). */
int mhc_pre_cfg_init(struct mhc_pre_cfg *c, const struct mhc_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err);

/* step 1 */
ALIGN_HD static inline float mhc_rms_factor(const float *x32, int64_t k, int inv_rms, float eps)
{
	float ss = align_reduce_pairwise(x32, k, 1, 1);
	return inv_rms ? 1.0f / (align_sqrtf(ss / (float)k) + eps) : align_rsqrtf(ss / (float)k + eps);
}

/* step 3 */
ALIGN_HD static inline float mhc_compute_h(float mix, float rs, float scale, float base, int fma)
{
	return fma ? fmaf(mix * rs, scale, base) : (mix * rs) * scale + base;
}

/* shared by hc_pre and hc_head (C twins): e(x) and sigmoid per MHC_EXP / MATH_IMPL */
float mhc_exp(const struct mhc_modes *c, float x);
float mhc_sigmoid(const struct mhc_modes *c, float z);
/* step 2 for `rows` rows of fn (already parameter-rounded): mix[r] = dot(x32, fn_r) */
void mhc_project(const struct mhc_modes *c, const float *x32, const float *fn, int64_t rows, int64_t k, float *xq,
		 float *mix);

int mhc_pre_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		    struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MHC_PRE_H */
