/* rope_bwd.h: backward of RoPE / inverse RoPE (rope.h; specs/dsv4-numerics.md 3.3, 3.8), issue 18.
 * Inputs: dy[T,H,D] bf16 (the gradient of the forward's y), pos[T] i32 (the forward's positions); output
 * dx[T,H,D] bf16. Parameters and variants: rope's (rope_params; variant 1 is the backward of the inverse
 * RoPE). Saved from forward: nothing (the rotation depends on pos and the parameters only).
 *
 * The rotation is orthogonal, so the gradient is the conjugate rotation of dy with the same cos/sin and the
 * same rounding points, which is rope.h's contract with `inverse` flipped (the non-rope dims pass dy through):
 *   complex form (ROPE_ARITH=fp32, DS-ref view_as_complex(x.float()) * freqs_cis, then .type_as(x)):
 *     autograd's MulBackward0 gives dx_c = dy_c * conj(cis) in complex64 and ToCopyBackward0 rounds it:
 *     dx_a = R(ga*c - gb*(-s)) = R(ga*c + gb*s), dx_b = R(ga*(-s) + gb*c), rope.h step 3 with s -> -s
 *     (gb*(-s) = -(gb*s) exactly, + commutes);
 *   fma_ac / fma_bd (c10::complex<float> operator* contracted by nvcc): the same product of dy by (c, -s);
 *   bf16 form (ROPE_ARITH=bf16, Megatron t*cos + rotate_half(t)*sin on bf16 tensors): the two products'
 *     gradients R(g*cos), R(g*sin) (bf16 MulBackward0), rotate_half's backward (a sign and a swap, exact),
 *     the bf16 sum of the two into t's gradient: dx_a = R(R(ga*c) + R(gb*s)), dx_b = R(R(gb*c) - R(ga*s)),
 *     again rope.h with s -> -s (R(gb*(-s)) = -R(gb*s));
 *   ROPE_COSSIN=bf16: the rounded cos/sin of the forward (rounding commutes with the sign).
 * So rope_bwd(dy) is bitwise rope(dy) with `inverse` flipped, in every mode (tests/kernels check it
 * against rope itself; the error bound is rope's).
 * Signed zeros (not modelled): a -0 gradient element stays -0 here (as with a split / cat-based rope,
 * whose backward concatenates). A rope written with slices (x[..., -64:], t[..., 0::2], rotate_half's
 * chunks; Megatron's unfused path, tests/gpu/torch-compare.py's reference) gets its gradient as the sum of
 * the slices' zero-filled gradients, so PyTorch turns every -0 of dx into +0 there.
 */
#ifndef ALIGN_ROPE_BWD_H
#define ALIGN_ROPE_BWD_H

#include "rope.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the forward rope parameters that compute rope_bwd under p: a copy of p with `inverse` flipped */
static inline struct rope_params rope_bwd_params(const struct rope_params *p)
{
	struct rope_params q = *p;
	q.inverse = !q.inverse;
	return q;
}

/* the tensors of rope_bwd (names dy, pos, dx in the messages), then rope's config under the flipped params */
int rope_bwd_cfg_init(struct rope_op_cfg *c, const struct rope_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_ROPE_BWD_H */
