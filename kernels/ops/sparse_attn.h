/* sparse_attn.h: DSv4 sparse MQA attention with an attention sink (specs/dsv4-numerics.md 3.7).
 * q[T,H,D] bf16, kv[S,D] bf16 (K = V, one head), idx[T,N] i32, sink[H] f32 -> o[T,H,D] bf16.
 * Slot k of query t names kv row j = idx[t,k]; j outside [0, S) (-1 by convention) is invalid: its
 * logit is -inf and its value row is 0 (DS-ref zero fill; MCore gathers row 0 and weighs it by 0, equal
 * unless that row holds inf/NaN). params: scale (default binary32 of D^-0.5) and window W (the first W
 * slots of each row are the sliding window, the rest the compressed entries). Saved state for the
 * backward (a later issue): none beyond the inputs; the row statistics (m, l) are recomputed.
 *
 * Operation order per (t, h) (CPU twin = specification; x = F(bf16), + and * binary32 unless said):
 *   visiting order of the slots (CSA_INDEX_ORDER): window_first k = 0..N-1; compressed_first
 *     k = W..N-1, then 0..W-1.
 *   dot_k: CSA_QK=fp32: acc = +0; acc = acc + q_d*kv_d for d = 0..D-1 (CSA_SUM_ORDER=torch: the
 *     products summed by torch_sum_lastdim, torch_order.h); bf16_tc: for each chunk of 16 d's, the
 *     exact products summed in binary64 from +0 in d order, acc = acc + (float)chunk (one rounding per
 *     chunk: the tensor-core model, portable but not Hopper's own rounding).
 *   logit z_k = dot_k * c, c = scale (CSA_EXP=exp) or c = scale * LOG2E_F (exp2; binary32 product);
 *     invalid slots z_k = -inf. sink s = sink[h] or R(sink[h]) (CSA_SINK); exp2: s = s * LOG2E_F.
 *     E(x) = exp(x) or exp2(x) (CSA_EXP) with MATH_IMPL's implementation.
 *   max: m = max(m, z) in visiting order, starting from -inf (CSA_SINK_IN_MAX=off) or from s (on);
 *     a NaN z is taken (and kept).
 *   full: m over all slots; e_k = E(z_k - m); l = sum of e_k in visiting order from +0 (torch:
 *     torch_sum_lastdim over the visiting order); l = l + E(s - m); p_k = e_k / l, P = R(p) or p
 *     (CSA_P); o_d = sum over visiting order of P_k * v_k,d from +0 (torch: torch_sum_strided).
 *   online64: slots in blocks of 64 in visiting order (the last block shorter); per block:
 *     m' = max(m, block's z); a = E(m - m'); e_k = E(z_k - m'); l = l * a + (sum of the block's e_k
 *     from +0 in order); acc_d = acc_d * a, then acc_d = acc_d + P_k * v_k,d in order, P = R(e) or e;
 *     m = m'. After the blocks: l = l + E(s - m); o_d = acc_d / l. (With the sink out of the max and a
 *     first block whose slots are all invalid, a = E(-inf - -inf) = NaN, as the TileLang kernel.)
 *   a row with no valid slot: CSA_EMPTY_ROW=ieee keeps what the arithmetic gives; zero stores +0.
 *   out = R(o_d).
 * Error bound vs fp64 (test-ops-ref.c; A = sum_k p_k |v_k| with p the exact weights, dS the worst
 *   logit error scale * (D U sum |q_d kv_d|) + 4 U (|z_k| + |m|)): ulp_bf16(o) + (P bf16 ? 2^-8 A : 0)
 *   + (4 dS + (N + D + 16) U) 2 A. Rows whose fp64 result is not finite, and empty rows, are skipped.
 * Rows (t) are independent (batch invariance). Config: sparse_attn_cfg_init (sparse_attn.c) checks the
 * tensors and decodes every mode once into struct sparse_attn_cfg; both twins read only the cfg.
 */
#ifndef ALIGN_SPARSE_ATTN_H
#define ALIGN_SPARSE_ATTN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPARSE_ATTN_BLOCK 64 /* online softmax block (DS-ref TileLang block_I) */
#define SPARSE_ATTN_TORCH_D 127
#define SPARSE_ATTN_TORCH_N 63

struct align_modes;
struct align_tensor;
struct align_err;

struct sparse_attn_params {
	float scale; /* softmax scale; default binary32 D^-0.5 */
	int window;  /* slots of the sliding window at the front of each idx row */
};

/* what both twins run: the dims and every decoded choice */
struct sparse_attn_cfg {
	int64_t T, H, D, S, N; /* q, o [T,H,D]; kv [S,D]; idx [T,N]; sink [H] */
	int64_t W;	       /* window slots (0 <= W <= N) */
	float c;	       /* logit factor: scale, or scale * LOG2E_F (exp2) */
	int sink_in_max;       /* CSA_SINK_IN_MAX=on */
	int online;	       /* CSA_SOFTMAX=online64 */
	int p_bf16;	       /* CSA_P=bf16 */
	int exp2;	       /* CSA_EXP=exp2 */
	int qk_tc;	       /* CSA_QK=bf16_tc */
	int torch_sums;	       /* CSA_SUM_ORDER=torch */
	int sink_bf16;	       /* CSA_SINK=bf16 */
	int comp_first;	       /* CSA_INDEX_ORDER=compressed_first */
	int empty_zero;	       /* CSA_EMPTY_ROW=zero */
	int math;	       /* MATH_IMPL value */
};

/* Check in/out (data may be NULL) and decode the modes for device (enum align_device). ALIGN_ERR_INPUT
 * for a bad tensor or parameter (torch sums with D > 127 or N > 63), ALIGN_ERR_UNSUPPORTED for a value
 * device cannot run, ALIGN_ERR_INTERNAL for a value modes.def has but this function does not handle;
 * the message goes to err (NULL: stderr). */
int sparse_attn_cfg_init(struct sparse_attn_cfg *c, const struct sparse_attn_params *p, const struct align_modes *m,
			 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			 struct align_err *err);

int sparse_attn_fwd_cpu(const struct sparse_attn_params *p, const struct align_modes *m, const struct align_tensor *in,
			int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_SPARSE_ATTN_H */
