/* sparse_mla.h: DeepSeek-V3.2 sparse MLA attention over the indexer's selection (specs/dsv4-numerics.md 4.3),
 * absorbed (MQA) form: one shared latent K = V row per key.
 * q[T,H,D] bf16 (per head [q_nope @ W_kv_b latent (F dims) | q_pe after RoPE (D - F dims)]; V3.2: F = 512,
 * D = 576), kv[S,D] bf16 (the cache rows [kv_norm latent | k_pe]), idx[T,N] i32 (selected kv rows, -1 or any
 * row outside [0, S) invalid) -> o[T,H,F] bf16 (attention over the latent values kv[:, :F], before the value
 * up-projection). No sink. params: scale (default binary32 of 192^-0.5, V3.2's qk_head_dim; YaRN mscale^2 is
 * the caller's). Saved state for a backward: none beyond the inputs (m, l are recomputed).
 *
 * Operation order per (t, h) (CPU twin = specification; + * / binary32 unless said, through nan_host.h):
 *   slots (DSA_MLA_SLOTS): gather: k = 0..N-1 as given, row j = idx[t,k] (a duplicate counts twice; an invalid
 *     slot has logit -inf and value row 0); mask: the distinct valid rows of idx[t,:] in ascending order (DS-V3.2
 *     scatters a -inf/0 index mask over all positions: masked positions add +0 to every sum, so only these
 *     rows change bits); a mask row with no valid row visits one invalid slot (the softmax of an all -inf row).
 *   dot (DSA_MLA_QK; sparse_attn_row.h sa_dot): split: (sum_{d<F} F(q_d) F(kv_d)) + (sum_{F<=d<D} ...), each a
 *     sequential binary32 sum from +0 (V3.2's two fp32 einsums added); fp32: one sequential sum over d < D;
 *     bf16_tc: chunks of 16 d's summed exactly in binary64, acc = acc + (float)chunk (tensor-core model).
 *   logit z_k = dot_k * cz, cz = scale (DSA_MLA_EXP=exp) or scale * LOG2E_F (exp2, binary32); invalid: -inf.
 *     E = exp or exp2 (MATH_IMPL's implementation, as sparse_attn).
 *   full (DSA_MLA_SOFTMAX): m = max of z in slot order from -inf (a NaN is taken and kept); e_k = E(z_k - m);
 *     l = sum e_k from +0 in slot order; p_k = e_k / l; P_k = R(p_k) (DSA_MLA_P=bf16) or p_k;
 *     o_d = sum_k P_k * v_{k,d} from +0 in slot order (d < F).
 *   online64 / online1024: slots in blocks of B = 64 / 1024 (the last shorter); per block m' = max(m, block's z),
 *     a = E(m - m'), e_k = E(z_k - m'), l = l * a + (the block's e_k summed from +0), acc_d = acc_d * a then
 *     acc_d = acc_d + P(e_k) * v_{k,d} in slot order, m = m'; after the blocks o_d = acc_d / l.
 *     (A first block whose slots are all invalid gives a = E(-inf - -inf) = NaN, as sparse_attn.)
 *   a row with no valid slot: DSA_MLA_EMPTY_ROW=ieee keeps what the arithmetic gives (NaN), zero stores +0.
 *   out = R(o_d).
 * Error bound vs fp64 (test-ops-ref-dsa.c; p exact weights over the valid slots, counted with multiplicity in
 *   gather, A = sum_k p_k |v_k|, dS = the worst logit error scale * D 2^-24 sum |q_d kv_d| + 4 U (|z_k| + |m|),
 *   U = 2^-24): ulp_bf16(o) + (P bf16 ? 2^-8 A : 0) + (4 dS + (N + D + 16) U) 2 A. Empty rows and rows whose
 *   fp64 value is not finite are skipped.
 * Rows (t, h) are independent (batch invariance); no float atomics. Both twins call sparse_mla_row.h.
 */
#ifndef ALIGN_SPARSE_MLA_H
#define ALIGN_SPARSE_MLA_H

#include <stdint.h>

#include "sparse_attn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPARSE_MLA_QK_SPLIT 0
#define SPARSE_MLA_QK_FP32 1
#define SPARSE_MLA_QK_BF16_TC 2

struct align_modes;
struct align_tensor;
struct align_err;

struct sparse_mla_params {
	float scale; /* softmax scale; default binary32 of 192^-0.5 */
};

struct sparse_mla_cfg {
	int64_t T, H, D, F, S, N;
	int qk;				/* SPARSE_MLA_QK_* */
	int block;			/* 0: full softmax; 64 or 1024: online */
	int gather;			/* DSA_MLA_SLOTS=gather */
	int empty_zero;			/* DSA_MLA_EMPTY_ROW=zero */
	struct sparse_attn_cfg sa;	/* sparse_attn's scalar steps: D (all dims), qk_tc, exp2, p_bf16, math, c */
	struct sparse_attn_cfg lat, pe; /* the same with D = F and D - F (split dots) */
};

int sparse_mla_cfg_init(struct sparse_mla_cfg *c, const struct sparse_mla_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err);

int sparse_mla_fwd_cpu(const struct sparse_mla_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_SPARSE_MLA_H */
