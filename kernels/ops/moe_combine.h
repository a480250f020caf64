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
 * Rows are independent (batch invariance). K <= MOE_MAX_K.
 * Config: moe_combine_cfg_init (moe_combine.c) checks the tensors and decodes every mode once into struct
 * moe_combine_cfg; both twins call it first and read only the cfg.
 */
#ifndef ALIGN_MOE_COMBINE_H
#define ALIGN_MOE_COMBINE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_MAX_K 64 /* most top-k slots per token (the twins' per-token arrays) */

struct align_modes;
struct align_tensor;
struct align_err;

struct moe_combine_params {
	int unused;
};

/* what both twins run: the dims and every decoded choice */
struct moe_combine_cfg {
	int64_t T, K, D; /* eo [T,K,D]; idx, w [T,K]; shared, y [T,D] */
	int bf16;	 /* MOE_COMBINE_ACC=bf16 */
	int by_expert;	 /* MOE_COMBINE_ORDER=expert */
	int after;	 /* SWIGLU_PROBS=after_w2: eo times w */
};

/* Check in/out (data may be NULL) and decode the modes for device (enum align_device). ALIGN_ERR_INPUT
 * for a bad tensor or K > MOE_MAX_K, ALIGN_ERR_UNSUPPORTED for a value device cannot run,
 * ALIGN_ERR_INTERNAL for a value modes.def has but this function does not handle; the message goes to
 * err (NULL: stderr). */
int moe_combine_cfg_init(struct moe_combine_cfg *c, const struct moe_combine_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err);

int moe_combine_fwd_cpu(const struct moe_combine_params *p, const struct align_modes *m, const struct align_tensor *in,
			int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MOE_COMBINE_H */
