/* qnorm_bwd.h: backward of the weightless per-head Q RMSNorm (qnorm.h). q[T,H,D] bf16 (the forward's
 * input), dy[T,H,D] bf16 (gradient of y) -> dq[T,H,D] bf16. Each (t, h) row of D elements is independent.
 * Saved from forward: nothing; the factor is recomputed from q as the forward computes it. Reads
 * RMSNORM_REDUCE (every row sum), RMSNORM_RSQRT, RMSNORM_EPS, RMSNORM_BWD_FORM (fp32 chain only) and
 * QNORM_BWD_PREC. x = F(q), g = F(dy), binary32 unless R (round to bf16) is written.
 *
 * QNORM_BWD_PREC (operation order per row, CPU twin = specification):
 *   fp32 (Megatron: the norm inside torch.compile, fp32 in the fused graph; the forward's fp32_fused):
 *     r = rsqrt(sum(x*x)/D + eps) (rmsnorm_factor); then rmsnorm_bwd.h's steps 3-4 with w = 1: p_j, s in
 *     the RMSNORM_REDUCE order, dq_j = R(dx_j) in the RMSNORM_BWD_FORM (autograd, te, apex).
 *   bf16_eager (DS-ref / Paddle eager: q is bf16, so autograd runs every op on bf16 tensors, each op's
 *     result rounded to bf16, opmath fp32 inside an op; the forward's bf16_eager chain):
 *     forward recomputed: sq_j = R(x_j*x_j); ss = sum(sq) (RMSNORM_REDUCE); ms = R(ss/D); a = R(ms + eps);
 *       r = R(rsqrt(a));
 *     backward, in autograd's order (tools/autograd/derivatives.yaml: mul, rsqrt, mean, pow):
 *       dx1_j = R(g_j * r)                         mul_backward, grad of x in x * r
 *       u_j = R(g_j * x_j); dr = R(sum(u))        mul_backward, grad of r: (grad * x).sum(-1) (RMSNORM_REDUCE)
 *       t = R(-0.5f * dr); r3 = R((r * r) * r); da = R(t * r3)   rsqrt: -0.5 * grad * result.pow(3)
 *       dsq = R(da / D)                            mean_backward: grad.expand() / D
 *       dx2_j = R(dsq * R(2.0f * x_j))             pow_backward: grad * (2 * x)
 *       dq_j = R(dx1_j + dx2_j)                    the engine adds the two gradients of x, the mul's first
 * Error bound vs the long double gradient r (g - n mean(g n)) with n = x r of the exact factor (u = 2^-24,
 * ub = 2^-8): fp32: (2D + 64) u (r |g_j| + r |n_j| S / D) + ub/2 |ref|, S = sum |g n|;
 * bf16_eager: 8 ub (r |g_j| + r |n_j| S / D) + ub/2 |ref| (about a dozen bf16 roundings along the chain).
 * test-ops-ref-bwd.c checks both, and central differences of the binary64 forward.
 */
#ifndef ALIGN_QNORM_BWD_H
#define ALIGN_QNORM_BWD_H

#include "rmsnorm_bwd.h"

#ifdef __cplusplus
extern "C" {
#endif

struct qnorm_bwd_params {
	int unused;
};

struct qnorm_bwd_cfg {
	int64_t T, H, D, R;	  /* R = T*H rows of D */
	int bf16;		  /* QNORM_BWD_PREC=bf16_eager */
	struct rmsnorm_bwd_cfg b; /* f (REDUCE, RSQRT, EPS) and form; wbf16 = 0, weight 1 */
};

/* phase 1 of a row: x32[j] = F(q[j]); returns the argument of the rsqrt (fp32: ss/D + eps; bf16_eager:
 * a = R(R(ss/D) + eps)); tmp: D floats of scratch */
ALIGN_HD static inline float qnorm_bwd_pre(const struct qnorm_bwd_cfg *c, const align_bf16 *q, float *x32, float *tmp)
{
	const int64_t D = c->D;
	for (int64_t j = 0; j < D; j++)
		x32[j] = align_bf16_to_f32(q[j]);
	if (!c->bf16)
		return hn_add(hn_div(align_reduce_hn(c->b.f.order, x32, D, 1, 0, 1), (float)D), c->b.f.eps);
	for (int64_t j = 0; j < D; j++)
		tmp[j] = align_round_bf16(hn_mul(x32[j], x32[j]));
	float ms = align_round_bf16(hn_div(align_reduce_hn(c->b.f.order, tmp, D, 1, 0, 0), (float)D));
	return align_round_bf16(hn_add(ms, c->b.f.eps));
}

/* phase 2: r = rsqrt(phase 1's value) as the caller's RMSNORM_RSQRT computes it (rounded here for bf16) */
ALIGN_HD static inline void qnorm_bwd_post(const struct qnorm_bwd_cfg *c, const align_bf16 *dy, const float *x32,
					   float *tmp, float r, align_bf16 *dq)
{
	const int64_t D = c->D;
	if (!c->bf16) {
		for (int64_t j = 0; j < D; j++)
			tmp[j] = rmsb_p(&c->b, align_bf16_to_f32(dy[j]), 1.0f, x32[j], r);
		float s = align_reduce_hn(c->b.f.order, tmp, D, 1, 0, 0);
		for (int64_t j = 0; j < D; j++)
			dq[j] = align_f32_to_bf16(rmsb_dx(&c->b, align_bf16_to_f32(dy[j]), 1.0f, x32[j], r, s));
		return;
	}
	r = align_round_bf16(r);
	for (int64_t j = 0; j < D; j++)
		tmp[j] = align_round_bf16(hn_mul(align_bf16_to_f32(dy[j]), x32[j]));
	float dr = align_round_bf16(align_reduce_hn(c->b.f.order, tmp, D, 1, 0, 0));
	float t = align_round_bf16(hn_mul(-0.5f, dr)), r3 = align_round_bf16(hn_mul(hn_mul(r, r), r));
	float dsq = align_round_bf16(hn_div(align_round_bf16(hn_mul(t, r3)), (float)D));
	for (int64_t j = 0; j < D; j++) {
		float g = align_bf16_to_f32(dy[j]);
		float dx1 = align_round_bf16(hn_mul(g, r));
		float dx2 = align_round_bf16(hn_mul(dsq, align_round_bf16(hn_mul(2.0f, x32[j]))));
		dq[j] = align_f32_to_bf16(hn_add(dx1, dx2));
	}
}

int qnorm_bwd_cfg_init(struct qnorm_bwd_cfg *c, const struct qnorm_bwd_params *p, const struct align_modes *m,
		       const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		       struct align_err *err);

int qnorm_bwd_fwd_cpu(const struct qnorm_bwd_params *p, const struct align_modes *m, const struct align_tensor *in,
		      int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_QNORM_BWD_H */
