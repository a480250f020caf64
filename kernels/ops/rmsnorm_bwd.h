/* rmsnorm_bwd.h: backward of the weighted RMSNorm (rmsnorm.h, RMSNORM_CAST=after_weight: y = w' * x * r).
 * Inputs x[T,D] bf16, w[D] f32 (the forward's), dy[T,D] bf16 (gradient of y); outputs dx[T,D] bf16 and
 * dw[D] (f32 or bf16 per RMSNORM_BWD_DW_DTYPE). Saved from forward: nothing; r is recomputed from x
 * exactly as the forward computes it (rmsnorm_factor: RMSNORM_REDUCE, RMSNORM_RSQRT, RMSNORM_EPS), w' = w
 * or F(R(w)) (RMSNORM_WEIGHT). RMSNORM_CAST is not read (the gradient of the after_weight form).
 *
 * Operation order per row t (CPU twin = specification; x = F(x[t,j]), g = F(dy[t,j]), binary32):
 *   1. r = rmsnorm_factor(x)                         (the forward's steps 1-3)
 *   2. dn_j = g_j * w'_j
 *   3. p_j  = dn_j * x_j (autograd) | dn_j * (x_j * r) (te) | (dn_j * x_j) * r (apex);
 *      s = sum of p_j over j in the RMSNORM_REDUCE order (reduce.h, the forward's row order; torch:
 *          torch_rowsum of the [T, D] product, autograd's sum_to of the broadcast r: x.sum(-1), no factor)
 *   4. dx_j per RMSNORM_BWD_FORM, stored R(dx_j):
 *        autograd: dn_j * r + ((((-0.5f * s) * ((r * r) * r)) / D) * (2.0f * x_j))
 *                  (PyTorch autograd of x * rsqrt(x.square().mean(-1) + eps) * w: mul_backward gives
 *                  dn * r and s = (dn * x).sum(-1); rsqrt_backward -0.5 * grad * result.pow(3); mean_backward
 *                  grad / D; pow_backward grad * (2 * x); the two gradients of x added in the engine's
 *                  order, the mul's first: tools/autograd/derivatives.yaml, FunctionsManual.cpp)
 *        te:       r * (dn_j - n_j * (s / D)), n_j = x_j * r  (TransformerEngine rmsnorm_bwd kernel:
 *                  mdyy = mean(dz * y), dx = rs * (dz - mdyy * y))
 *        apex:     (D * dn_j - n_j * s) * ((1.0f / D) * r)  (apex csrc/layer_norm_cuda_kernel.cu,
 *                  cuComputeGradInput with rms_only: f_grad_input = fH * c_loss * gamma - c_h * c_invvar *
 *                  sum_loss2, times term1 = (1 / fH) * c_invvar)
 *   dw_j = sum over t of q_tj = g_tj * (x_tj * r_t) in the RMSNORM_BWD_DW_ORDER token order (seq; pairwise
 *        as reduce.h; split16: 16 contiguous chunks of ceil(T/16) tokens summed in order, then the partials
 *        left to right = reduce.h CHUNKED; torch: PyTorch eager CUDA's x.sum(0) of the [T,D] product, which
 *        autograd's sum_to runs for the broadcast weight (torch_order.h torch_sum_cols: 4 accumulators per
 *        thread, block.y split from T >= min(16 block.y, 256); shapes where ATen adds a cross-CTA reduce,
 *        ceil(T / block.y) >= 256, are refused), binary32; stored per RMSNORM_BWD_DW_DTYPE (R for bf16).
 * Error bound vs the long double evaluation of the exact gradient with the same w' and binary32 eps
 * (u = 2^-24): dx: (2D + 64) u (r |dn_j| + r |n_j| S / D), S = sum |dn_j n_j|, plus half a bf16 ulp;
 * dw: (T + D + 32) u sum_t |q_tj| plus the output rounding. test-ops-ref-bwd.c checks both on the finite
 * fill sets, and dx, dw against central differences of the binary64 forward.
 * Batch invariance: dx's row t depends only on row t; dw sums over the tokens (not a row output).
 */
#ifndef ALIGN_RMSNORM_BWD_H
#define ALIGN_RMSNORM_BWD_H

#include "nan_host.h"
#include "rmsnorm.h"
#include "torch_order.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rmsnorm_bwd_params {
	int unused;
};

struct rmsnorm_bwd_cfg {
	int64_t T, D;
	struct rmsnorm_factor_cfg f; /* RMSNORM_REDUCE, RSQRT, EPS */
	int wbf16;		     /* RMSNORM_WEIGHT=bf16 */
	int form;		     /* ALIGN_RMSNORM_BWD_FORM_* */
	enum align_reduce_order dw_order;
	int64_t dw_chunk; /* split16: ceil(T/16) */
	int64_t dw_torch; /* torch: torch_sum_cols_step(T, D) (>= 0); -1 for the other orders */
	int dw_dtype;	  /* enum align_dtype of dw */
};

ALIGN_HD static inline float rmsb_w(const struct rmsnorm_bwd_cfg *c, float w)
{
	return c->wbf16 ? align_round_bf16(w) : w;
}

/* step 3's p_j */
ALIGN_HD static inline float rmsb_p(const struct rmsnorm_bwd_cfg *c, float g, float w, float x, float r)
{
	float dn = hn_mul(g, rmsb_w(c, w));
	if (c->form == ALIGN_RMSNORM_BWD_FORM_TE)
		return hn_mul(dn, hn_mul(x, r));
	if (c->form == ALIGN_RMSNORM_BWD_FORM_APEX)
		return hn_mul(hn_mul(dn, x), r);
	return hn_mul(dn, x);
}

/* step 4's dx_j before the bf16 rounding */
ALIGN_HD static inline float rmsb_dx(const struct rmsnorm_bwd_cfg *c, float g, float w, float x, float r, float s)
{
	float dn = hn_mul(g, rmsb_w(c, w)), D = (float)c->D;
	if (c->form == ALIGN_RMSNORM_BWD_FORM_TE)
		return hn_mul(r, hn_sub(dn, hn_mul(hn_mul(x, r), hn_div(s, D))));
	if (c->form == ALIGN_RMSNORM_BWD_FORM_APEX)
		return hn_mul(hn_sub(hn_mul(D, dn), hn_mul(hn_mul(x, r), s)), hn_mul(1.0f / D, r));
	float r3 = hn_mul(hn_mul(r, r), r);
	return hn_add(hn_mul(dn, r), hn_mul(hn_div(hn_mul(hn_mul(-0.5f, s), r3), D), hn_mul(2.0f, x)));
}

/* dw_j before the output rounding: column j of q[T,D] */
ALIGN_HD static inline float rmsb_dw(const struct rmsnorm_bwd_cfg *c, const float *q, int64_t j, int hn)
{
	if (c->dw_torch >= 0)
		return torch_sum_cols(q + j, c->D, c->T, c->dw_torch);
	return hn ? align_reduce_hn(c->dw_order, q + j, c->T, c->D, c->dw_chunk, 0)
		  : align_reduce(c->dw_order, q + j, c->T, c->D, c->dw_chunk, 0);
}

/* q_tj of the weight gradient */
ALIGN_HD static inline float rmsb_q(float g, float x, float r)
{
	return hn_mul(g, hn_mul(x, r));
}

int rmsnorm_bwd_cfg_init(struct rmsnorm_bwd_cfg *c, const struct rmsnorm_bwd_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err);

int rmsnorm_bwd_fwd_cpu(const struct rmsnorm_bwd_params *p, const struct align_modes *m, const struct align_tensor *in,
			int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_RMSNORM_BWD_H */
