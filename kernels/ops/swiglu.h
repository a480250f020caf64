/* swiglu.h: DSv4 routed/shared expert activation (specs/dsv4-numerics.md 5).
 * g[T,F] bf16 (gate GEMM output), u[T,F] bf16 (up GEMM output), p[T] f32 (routing probability of
 * this token for this expert) -> a[T,F] bf16, the input of the down projection W2.
 *
 * Operation order per element (CPU twin = specification), g32 = F(g), u32 = F(u), L = limit:
 *   1. clamp, when L > 0 and (the expert is routed, or SWIGLU_SHARED_CLAMP=on):
 *        u32 = u32 < -L ? -L : (u32 > L ? L : u32);  g32 = g32 > L ? L : g32   (NaN passes)
 *   2. silu in binary32 with e(x) = exp per MATH_IMPL:
 *        div: s = g32 / (1.0f + e(-g32));   mul: s = g32 * (1.0f / (1.0f + e(-g32)))
 *   3. a = s * u32
 *   4. SWIGLU_PROBS=before_w2: q = p (SWIGLU_SCALE=fp32) or F(R(p)) (bf16);
 *        single: out = R(q * a)        double: out = R(F(R(a)) * q)
 *      after_w2: out = R(a) (the probability is applied by moe_combine after W2)
 * Error bound vs fp64 (exact exp, exact p, same clamp), relative, ub = 2^-8 (bf16 unit
 * roundoff): single ub + 8 2^-24; double or SWIGLU_SCALE=bf16 3 ub + 8 2^-24 (the binary32 steps
 * add <= 8 2^-24). Checked by test-ops-ref.c.
 * Elementwise: batch invariant by construction.
 * Config: swiglu_cfg_init (swiglu.c) checks the tensors and decodes every mode once into struct
 * swiglu_cfg; both twins call it first and read only the cfg.
 */
#ifndef ALIGN_SWIGLU_H
#define ALIGN_SWIGLU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct align_modes;
struct align_tensor;
struct align_err;

struct swiglu_params {
	float limit; /* swiglu_limit, 10.0 in DSv4; 0 = no clamp */
	int shared;  /* 1 for the shared expert (clamp only with SWIGLU_SHARED_CLAMP=on) */
};

/* what both twins run: the dims and every decoded choice */
struct swiglu_cfg {
	int64_t T, F;	/* g, u, a [T,F]; p [T] */
	float L;	/* clamp limit (params.limit) */
	int clamp;	/* L > 0 and (routed, or SWIGLU_SHARED_CLAMP=on) */
	int after;	/* SWIGLU_PROBS=after_w2 */
	int dbl;	/* SWIGLU_ROUND=double */
	int scale_bf16; /* SWIGLU_SCALE=bf16 */
	int mul;	/* SWIGLU_SILU=mul */
	int math;	/* MATH_IMPL value (ALIGN_MATH_IMPL_*): portable, libm (CPU) or cuda / cuda_fast (GPU) */
};

/* Check in/out (data may be NULL) and decode the modes for device (enum align_device). ALIGN_ERR_INPUT
 * for a bad tensor, ALIGN_ERR_UNSUPPORTED for a value device cannot run, ALIGN_ERR_INTERNAL for a value
 * modes.def has but this function does not handle; the message goes to err (NULL: stderr). */
int swiglu_cfg_init(struct swiglu_cfg *c, const struct swiglu_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		    struct align_err *err);

int swiglu_fwd_cpu(const struct swiglu_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		   struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_SWIGLU_H */
