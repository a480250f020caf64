/* moe_combine_bwd.h: backward of the MoE combine (moe_combine.h; issue 18) and the gradient fan-in to the
 * token from its experts.
 * Inputs: the forward inputs eo[T,K,D] bf16, idx[T,K] i32, w[T,K] f32, shared[T,D] bf16; the gradient of
 * the combined output dy[T,D] bf16; the gradients of each slot's expert input dxe[T,K,D] bf16 (what each
 * routed expert's backward returns for the token's row) and of the shared expert's input dxs[T,D] bf16.
 * Outputs: d_eo[T,K,D] bf16, d_w[T,K] f32, d_shared[T,D] bf16, dx[T,D] bf16.
 * Saved from forward: nothing (eo and w are forward inputs; the combine's additions have gradient 1 each:
 * MOE_COMBINE_ACC's bf16 roundings pass the gradient unchanged, as autograd does).
 *
 * Operation order (CPU twin = specification), x = F(dy[t,d]):
 *   d_eo[t,s,d] = SWIGLU_PROBS=before_w2: R(x) (= dy); after_w2: R(x * w[t,s])
 *   d_w[t,s]    = after_w2: sum over d = 0..D-1 ascending of x * F(eo[t,s,d]), fp32, from the first term;
 *                 before_w2: +0 (the probability was applied inside the expert: swiglu_bwd's dp)
 *   d_shared    = R(x) (= dy)
 *   dx[t,d]     = the fan-in (the permutation's backward): acc = +0; for each slot s in the order
 *                 MOE_COMBINE_BWD_ORDER (expert: increasing expert id, equal ids in slot order, as the
 *                 forward's insertion sort; slot: 0..K-1): acc = acc + F(dxe[t,s,d]) (MOE_COMBINE_ACC=fp32)
 *                 or acc = R(acc + F(dxe[t,s,d])) (bf16: index_add_ into a bf16 gradient buffer, rounded
 *                 per add, as the forward's bf16 buffer); then acc = acc + F(dxs[t,d]); dx = R(acc).
 *                 In fp32 the order rarely shows: 7 bf16 terms within 2^16 of each other sum exactly; it
 *                 shows with the bf16 buffer, wide dynamic ranges or many slots.
 *                 atomic (GPU only, NON-DETERMINISTIC): an fp32 buffer at +0 receives atomicAdd of every
 *                 slot's and the shared expert's term in whatever order the hardware serialises them, then
 *                 R(buffer) (an fp32 buffer whatever MOE_COMBINE_ACC says). The C twin refuses it (modes.def GPU_NONDET: exit 2 naming the switch); no
 *                 profile holds it; tests/gpu/moe-atomic.sh runs it twice and reports whether the bits changed.
 * Error bound vs fp64 (test-ops-bwd.c): d_eo: (ub + 4 2^-24) |ref| (ub = 2^-8; exact under before_w2);
 *   d_shared: exact;
 *   d_w: (D + 2) 2^-24 sum_d |x eo|; dx: ub |ref| + (K + 2) 2^-24 S (fp32), ub |ref| + (K + 2) ub S (bf16),
 *   S = sum_s |dxe| + |dxs|.
 * Rows are independent (batch invariance) in the portable orders. K <= MOE_MAX_K.
 * Config: moe_combine_bwd_cfg_init (moe_combine_bwd.c), shared by both twins.
 */
#ifndef ALIGN_MOE_COMBINE_BWD_H
#define ALIGN_MOE_COMBINE_BWD_H

#include <stdint.h>

#include "moe_combine.h" /* struct moe_combine_params, MOE_MAX_K */

#ifdef __cplusplus
extern "C" {
#endif

struct align_modes;
struct align_tensor;
struct align_err;

struct moe_combine_bwd_cfg {
	int64_t T, K, D;
	int after;     /* SWIGLU_PROBS=after_w2 */
	int bf16;      /* MOE_COMBINE_ACC=bf16: the fan-in buffer is bf16 (rounded per add) */
	int by_expert; /* MOE_COMBINE_BWD_ORDER=expert */
	int atomic;    /* MOE_COMBINE_BWD_ORDER=atomic (CUDA twin only) */
};

int moe_combine_bwd_cfg_init(struct moe_combine_bwd_cfg *c, const struct moe_combine_params *p,
			     const struct align_modes *m, const struct align_tensor *in, int n_in,
			     const struct align_tensor *out, int n_out, int device, struct align_err *err);

int moe_combine_bwd_fwd_cpu(const struct moe_combine_params *p, const struct align_modes *m,
			    const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MOE_COMBINE_BWD_H */
