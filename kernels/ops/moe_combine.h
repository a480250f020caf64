/* moe_combine.h: MoE combine (specs/dsv4-numerics.md 7.3): y[t] = sum over the token's K expert
 * outputs (+ the shared expert), eo[T,K,D] bf16 (expert outputs per top-k slot), idx[T,K] i32
 * (expert id of each slot), w[T,K] f32 (routing weights), shared[T,D] bf16 -> y[T,D] bf16.
 *
 * Operation order per (t, d) (CPU twin = specification):
 *   slots visited in increasing expert id (MOE_COMBINE_ORDER=expert: the order of a permutation
 *   sorted by expert, DS-ref loop over experts) or in slot order 0..K-1 (slot);
 *   contribution c_s = F(eo[t,s,d]) (SWIGLU_PROBS=before_w2: the weight was applied inside the
 *   expert) or F(eo[t,s,d]) * w[t,s] (after_w2, binary32 product, DS-V3.2);
 *   fp32 (MOE_COMBINE_ACC): acc = +0; acc = acc + c_s for each slot; acc = acc + F(shared);
 *        y = R(acc)                                             (DS-ref)
 *   bf16: b = +0; b = R(F(b) + c_s) for each slot; y = R(F(b) + F(shared))   (MCore index_add_
 *        into a bf16 buffer, deterministic)
 * Error bound vs fp64 sum of the same contributions (S = sum |c_s| + |shared|):
 *   fp32: half a bf16 ulp of the reference + (K+1) 2^-24 S;  bf16: 1 bf16 ulp + (K+2) 2^-8 S.
 * Rows are independent (batch invariance).
 */
#ifndef ALIGN_MOE_COMBINE_H
#define ALIGN_MOE_COMBINE_H

struct align_modes;
struct align_tensor;

struct moe_combine_params {
	int unused;
};

int moe_combine_fwd_cpu(const struct moe_combine_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);

#endif /* ALIGN_MOE_COMBINE_H */
