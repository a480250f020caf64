/* mhc_pre_bwd.h: backward of mHC hc_pre (mhc_pre.h; specs/dsv4-numerics.md 6.2-6.6), issue 18.
 * Inputs: the forward inputs x[T,N,D] bf16, fn[R,K] f32, base[R] f32, scale[3] f32 (R = (2+N)*N,
 * K = N*D) and the gradients of the outputs that leave the op: dy[T,D] bf16 (of y), dpost[T,N] f32,
 * dcomb[T,N,N] f32 (pre is consumed by y inside the op; its gradient is dy's). Outputs: dx[T,N,D] bf16,
 * dfn[R,K] f32, dbase[R] f32, dscale[3] f32 (parameter gradients summed over the T tokens).
 *
 * Saved from forward: nothing; per token the forward is recomputed from x and the parameters with the
 * forward's own helpers and switches (mhc_pre.h steps 0-5: x32, ss, rs, mix, h, the sigmoids, the
 * Sinkhorn states), bitwise as hc_pre computes them. Parameter and coefficient roundings to bf16
 * (MHC_PARAM, MHC_COEF) pass the gradient straight through.
 * Operation order per token (CPU twin = specification; every operation binary32, unfused):
 *   B1. dh_r per row group, g_d = F(dy[t,d]), s_r = sg(h_r):
 *       pre rows:  dpre_j = dsum_d (g_d * x32[j*D+d]) (exact products; MHC_BWD_DSUM=torch: row t*N + j of
 *                  the [T*N, D] product, torch_rowdot_bf16); dh_j = (dpre_j * (1 - s_j)) * s_j
 *                  (ATen sigmoid_backward: grad * (1 - y) * y);
 *       post rows: dh_{N+i} = ((2 * dpost_i) * (1 - s)) * s (the eps of MHC_HPOST_EPS is a constant);
 *       comb rows: dh_{2N+jN+k} = dM0[j][k], the Sinkhorn backward of G = dcomb[t] (MHC_BWD_SINKHORN):
 *         unrolled: back through the 2*iters normalisation steps the forward took (mhc_bwd.h,
 *           mhc_bwd_sinkhorn_unrolled: row/column step y = m/d: dm = (G - sum_l G_l y_l) / d, or G / d
 *           where c0 clamped d to eps; c1's softmax step: p * (G - sum_l G_l p_l); c0/c0p: times E; the
 *           row max is a constant), the exact gradient of the computed iterations;
 *         autograd: the same steps term by term as PyTorch autograd evaluates the unfused torch loop
 *           (mhc_bwd_sinkhorn_autograd): dm = G / d + sum_l -(G_l * ((m_l / d) / d)), the sums in
 *           MHC_SUM_ORDER; softmax step torch_softmax_bwd (fmaf(-p, s, G * p));
 *         implicit: the fixed-point form (mhc_bwd_sinkhorn_implicit): P taken as the balanced limit,
 *           dM0 = P * (G - u_j - v_k) with [diag(a) P; P^T diag(b)][u; v] = [(P*G)1; (P*G)^T 1], v_{N-1} = 0,
 *           a 2N-1 linear solve per token (no states kept); it ignores the eps terms and the finite
 *           iteration count.
 *   B2. (mhc_bwd_tail) a_r = dh_r * scale'_c; dmix_r = a_r * rs; drs = sum_r a_r * mix_r (r ascending);
 *       the token's dscale term ps_c = sum_{r in c} dh_r * (mix_r * rs); dss = ((drs * -0.5) * ((rs * rs) *
 *       rs)) / K (rsqrt), or ((drs * -(rs * rs)) / (2 * sqrt(ss / K))) / K (inv_rms);
 *       dx[i] = R(((pre'_j * g_d) + sum_r dmix_r * fn'_r[i]) + (2 * x32[i]) * dss), i = j*D + d, r
 *       ascending; fn' = the parameter-rounded weight (the backward GEMMs are fp32 with the operands as
 *       stored: MHC_PROJ_GEMM's split16/tf32 order of the forward is not mirrored in backward).
 *   C.  over tokens (MHC_BWD_TSUM: seq = t ascending; split16 = 16 contiguous token splits, each
 *       ascending, partials left to right): dfn[r,i] = tsum (dmix_{t,r} * x32_t[i]); dbase[r] =
 *       tsum dh_{t,r}; dscale[c] = tsum ps_{t,c}. MHC_BWD_TSUM=torch: dbase as x.sum(0) of the [T, R]
 *       dh (torch_sum_cols, autograd's sum_to of the expanded base; refused past torch_sum_cols_step's
 *       model), dfn and dscale as seq (their torch forms are GEMMs).
 *   dsum (MHC_BWD_DSUM): as mhc_post_bwd.h (seq, the split16 GEMM order, or torch's row reduction).
 * Error bound vs fp64 of the same formula (tests/kernels/test-ops-ref-bwd3.c): each output within
 * 1 bf16 ulp (dx) + 2^-12 M, M = the sum of the absolute values of the terms of its last reduction,
 * evaluated in fp64 (dx: |pre g| + sum |dmix fn| + |2 x dss|; dfn: sum_t |dmix x|; dbase: sum_t |dh|;
 * dscale: sum |dh mix rs|). Measured, not proven (fp32 sigmoid, exp and 40 Sinkhorn steps feed dh);
 * measured worst error/bound at the default dims is printed by the test. Domain: hc_pre's (ss > 0).
 * Dx rows are per token (batch invariant); the parameter gradients depend on T by definition.
 * Config: mhc_bwd_cfg_init (mhc_pre_bwd.c); the scalar steps are shared by both twins (mhc_bwd.h).
 */
#ifndef ALIGN_MHC_PRE_BWD_H
#define ALIGN_MHC_PRE_BWD_H

#include "mhc_bwd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* both ops' C twin: op "mhc_pre_bwd" or "mhc_head_bwd" */
int mhc_bwd_fwd_cpu(const char *op, const struct mhc_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MHC_PRE_BWD_H */
