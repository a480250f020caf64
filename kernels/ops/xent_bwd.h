/* xent_bwd.h: backward of the cross-entropy (xent.h), issue 18: the gradient of each token's loss with
 * respect to its logits. Inputs: logits[T,V] (f32, or bf16 per LMHEAD_LOGITS, widened exactly), labels[T]
 * i32 (< 0: ignored), dloss[T] f32 (the gradient of loss[t]: for a token mean, g / count on the valid
 * tokens, as torch's nll_loss backward and MCore's loss-mask sum give it); output dlogits[T,V] in the
 * logits' dtype (bf16: the fp32 gradient rounded once, the backward of MCore's / torch's logits.float()).
 * Saved from forward: nothing; the row statistics are recomputed with xent.h's steps 1-4 (m, e_v, s, l)
 * under the same XENT_SUM and MATH_IMPL, so they are the forward's bits.
 *
 * Operation order per row (CPU twin = specification), x_v = F(logit) in binary32, d = dloss[t]:
 *   1. m, e_v = exp(x_v - m), s (XENT_SUM order), l = log(s): xent.h steps 1-4. A row xent.h calls bad (a
 *      NaN logit, an +inf logit, or every logit -inf) gives canonical NaN in every element, except an
 *      ignored row under XENT_BWD_FORM=scale (zeros, below).
 *   2. p_v (XENT_BWD_PROB):
 *        div      e_v / s                         (MCore: exp_logits.div_(sum_exp_logits), saved)
 *        explsm   exp((x_v - m) - l)              (torch: exp of the saved log_softmax output, which is
 *                                                   (x - m) - log(sum) in its kernels; Paddle's softmax)
 *   3. g_v (XENT_BWD_FORM), y = labels[t]:
 *        scale    ignored row: +0; g_v = (p_v - 1) * d at v = y, p_v * d elsewhere (two roundings at y,
 *                 one elsewhere: MCore's in-place subtract then multiply, Paddle's grad kernel)
 *        lsm      gO_v = -d at v = y (0 - d: nll_loss's -grad), +0 elsewhere and on ignored rows;
 *                 sigma = (gO_y) + 0 (the row sum of gO: one non-zero term, so exact whatever its order,
 *                 and -0 becomes +0 as a sum from +0 does; ignored rows: +0);
 *                 g_v = gO_v - R(p_v * sigma)
 *        lsm_fma  g_v = fmaf(-p_v, sigma, gO_v)  (ATen's log_softmax backward `gO - exp(out) * sum`,
 *                 contracted by nvcc; the persistent kernel at V <= 1024 and the block kernel above
 *                 compute it alike, only their sums differ, and those add one non-zero term)
 *      In the lsm forms an ignored row still computes p (torch runs log_softmax backward on every row), so
 *      a bad ignored row is NaN there, as in torch; under scale it is 0, as Paddle writes it.
 *   4. dlogits = g_v (f32) or R_bf16(g_v).
 * NaN bits: the host's NaN rules (nan_host.h hn_*), so both twins give the same bytes.
 *
 * Error bound vs the fp64 evaluation (same logits, exact exp, log and softmax), u = 2^-24: xent.h's bound
 * gives s within (V - 1) u relative and l within (V + 1) u absolute, so p_v is within
 * eps_p = (V + 3) u + u |x_v - m| (div: x_v - m, e_v, s, the quotient) or (V + 4) u + 2 u |x_v - m| +
 * 2 u |l| (explsm: the two subtractions amplified by exp) relative, times 2 with MATH_IMPL=libm; then
 * |g_v - ref| <= (eps_p + 3 u) p_v |d| + 2 u |d| (the label term's 1 - p cancellation is exact in the
 * scale form's subtract when p >= 1/2, and bounded by u there otherwise), and half a bf16 ulp of the
 * result for bf16 logits. Checked by test-ops-ref-model.c. Rows are independent: batch invariant.
 * Config: xent_bwd_cfg_init (xent_bwd.c) checks the tensors and decodes every mode; both twins read it.
 */
#ifndef ALIGN_XENT_BWD_H
#define ALIGN_XENT_BWD_H

#include "xent.h"

#ifdef __cplusplus
extern "C" {
#endif

/* what both twins run */
struct xent_bwd_cfg {
	struct xent_cfg f; /* the forward's config (T, V, dtype, XENT_SUM, MATH_IMPL); S and the mean unused */
	int prob;	   /* XENT_BWD_PROB value */
	int form;	   /* XENT_BWD_FORM value */
};

int xent_bwd_cfg_init(struct xent_bwd_cfg *c, const struct xent_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err);

ALIGN_HD static inline void xent_bwd_st(void *row, int bf16, int64_t v, float g)
{
	if (bf16)
		((align_bf16 *)row)[v] = align_f32_to_bf16(g);
	else
		((float *)row)[v] = g;
}

/* steps 1-4 for one row: row (V logits), label, d = dloss[t], e (V floats of scratch), out (V gradients) */
ALIGN_HD static inline void xent_bwd_row(const struct xent_bwd_cfg *c, const void *row, int32_t label, float d,
					 float *e, void *out)
{
	const struct xent_cfg *f = &c->f;
	const int64_t V = f->V;
	const int scale = c->form == ALIGN_XENT_BWD_FORM_SCALE;
	if (scale && label < 0) {
		for (int64_t v = 0; v < V; v++)
			xent_bwd_st(out, f->bf16, v, 0.0f);
		return;
	}
	float m = xent_ld(row, f->bf16, 0);
	int bad = align_isnanf(m);
	for (int64_t v = 1; v < V; v++) {
		float x = xent_ld(row, f->bf16, v);
		bad |= align_isnanf(x);
		m = x > m ? x : m;
	}
	if (bad || !(m > -INFINITY && m < INFINITY)) {
		for (int64_t v = 0; v < V; v++)
			xent_bwd_st(out, f->bf16, v, align_canonical_nanf());
		return;
	}
	for (int64_t v = 0; v < V; v++)
		e[v] = xent_expf(f->math, xent_ld(row, f->bf16, v) - m);
	float s = f->sum == ALIGN_XENT_SUM_PAIRWISE ? align_reduce_pairwise(e, V, 1, 0)
		  : f->sum == ALIGN_XENT_SUM_WARP32 ? align_reduce_warp32(e, V, 1, 0)
		  : f->sum == ALIGN_XENT_SUM_TORCH  ? torch_softmax_sum(e, 1, V)
						    : align_reduce_seq(e, V, 1, 0);
	float l = xent_logf(f->math, s);
	float gy = label < 0 ? 0.0f : hn_neg(d);	   /* nll_loss's gradient at the label (lsm forms) */
	float sigma = label < 0 ? 0.0f : hn_add(gy, 0.0f); /* the row sum of gO */
	for (int64_t v = 0; v < V; v++) {
		float p = c->prob == ALIGN_XENT_BWD_PROB_DIV
				  ? hn_div(e[v], s)
				  : xent_expf(f->math, hn_sub(hn_sub(xent_ld(row, f->bf16, v), m), l));
		float g;
		if (scale)
			g = v == label ? hn_mul(hn_sub(p, 1.0f), d) : hn_mul(p, d);
		else {
			float go = v == label ? gy : 0.0f;
			g = c->form == ALIGN_XENT_BWD_FORM_LSM_FMA ? hn_fmaf(hn_neg(p), sigma, go)
								   : hn_sub(go, hn_mul(p, sigma));
		}
		xent_bwd_st(out, f->bf16, v, g);
	}
}

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_XENT_BWD_H */
