/* mhc_head.h: mHC hc_head, the final learned contraction of the N streams
 * (specs/dsv4-numerics.md 6.7). x[T,N,D] bf16, fn[N, N*D] f32, base[N] f32, scale[1] f32
 * -> y[T,D] bf16.
 *
 * Operation order per token, same helpers and switches as hc_pre (mhc_pre.h steps 0-4, 6):
 *   params F(R(.)) when MHC_PARAM=bf16; rs per MHC_RMS_FORM (pairwise sum of squares);
 *   mix_i = dot(x32, fn_i) per MHC_PROJ_GEMM; h_i = compute_h(mix_i, rs, scale[0], base_i)
 *   per MHC_COMPUTEH_FMA; pre_i = sg(h_i) + hc_eps (always: DS-ref and MCore add the eps here);
 *   y_d = R(sum_j pre'_j * x32[j*D + d]) left to right, pre' per MHC_COEF.
 * Error bound vs fp64 of the same contract (checked by tests/kernels/test-ops-ref2.c, every mode
 * combination incl. MATH_IMPL, 3 fill sets): 1 bf16 ulp + 2^-18 sum_j |x_j| (MHC_COEF=bf16: plus
 * |x_j| times the gap of the two bf16 roundings of a pre_j within 2^-18 of a rounding boundary).
 * Measured worst error/bound at T=4, N=4, D=256: 0.50. Domain as hc_pre (sum x^2 in fp32 range).
 * Both twins call mhc_head_cfg_init first and then read only the config (struct mhc_head_cfg; the
 * switches are hc_pre's, decoded by the same mhc_modes_init).
 */
#ifndef ALIGN_MHC_HEAD_H
#define ALIGN_MHC_HEAD_H

#include "mhc_pre.h"

#ifdef __cplusplus
extern "C" { /* mhc_head_cfg_init is C (libkernels) */
#endif

/* hc_head's configuration (mhc_head_cfg_init in mhc_head.c), read by both twins */
struct mhc_head_cfg {
	int64_t T, N, D, K;  /* x[T,N,D], K = N*D */
	struct mhc_params p; /* the op's params */
	struct mhc_modes mm; /* hc_pre's switches */
};

/* Check x, fn, base, scale -> y and decode the modes; 0, ALIGN_ERR_INPUT, ALIGN_ERR_UNSUPPORTED,
 * ALIGN_ERR_INTERNAL with the message in err (NULL: stderr). */
int mhc_head_cfg_init(struct mhc_head_cfg *c, const struct mhc_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err);

int mhc_head_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		     struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MHC_HEAD_H */
