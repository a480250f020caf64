/* mhc_head_bwd.h: backward of mHC hc_head (mhc_head.h; specs/dsv4-numerics.md 6.7), issue 18.
 * Inputs: the forward inputs x[T,N,D] bf16, fn[N,K] f32, base[N] f32, scale[1] f32 (K = N*D) and
 * dy[T,D] bf16 (the gradient of y). Outputs: dx[T,N,D] bf16, dfn[N,K] f32, dbase[N] f32, dscale[1] f32.
 * The contract is hc_pre's backward (mhc_pre_bwd.h) restricted to the N pre rows and one scale:
 * recompute x32, ss, rs, mix, h, s = sg(h) with hc_head's helpers and switches (pre = s + hc_eps
 * always); B1 pre rows (dpre_j = dsum_d g_d x32[j*D+d], dh_j = (dpre_j * (1 - s_j)) * s_j), B2 (dmix,
 * drs, dss, dx), C (token sums, MHC_BWD_TSUM). Same error bound (1 bf16 ulp + 2^-12 M, measured).
 * Config: mhc_bwd_cfg_init; C twin mhc_bwd_fwd_cpu (mhc_pre_bwd.c); CUDA twin mhc_head_bwd.cu.
 */
#ifndef ALIGN_MHC_HEAD_BWD_H
#define ALIGN_MHC_HEAD_BWD_H

#include "mhc_pre_bwd.h"

#endif /* ALIGN_MHC_HEAD_BWD_H */
