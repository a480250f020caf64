/* mtp.h: the MTP pre-layer of DSv4 multi-token prediction, depth 1 (specs/dsv4-numerics.md 8): the shift of
 * the token inputs, the shared embedding of the shifted ids, enorm / hnorm, and the combination of the
 * embedding with the main model's hidden streams into the MTP layer's input X0. What follows X0 (one
 * transformer layer, hc_head, final norm, the shared lm_head and xent) is the other ops; the loss side
 * (scaling by mtp_loss_scaling_factor / depth, combining the main and MTP losses) is the mtp_loss op.
 *
 * Inputs:  ids[T] i32 (the main model's ids, B sequences of S tokens, T = B*S), pos[T] i32 (their RoPE
 *          positions), table[V,D] f32 (the shared embedding, fp32 master), h[T,N,D] bf16 (the main model's
 *          final mHC streams, before hc_head: the pre-contraction state), norm[2,D] f32 (row 0 enorm,
 *          row 1 hnorm), proj[2D,D] f32 (rows 0..D-1 e_proj = We, rows D..2D-1 h_proj = Wh).
 * Outputs: tok[3,T] i32 (row 0 the MTP ids, row 1 the MTP labels, row 2 the MTP positions), e[T,D] bf16
 *          (the embedding of the MTP ids), en[T,D] bf16, hn[T*N,D] bf16 (hnorm per stream over D),
 *          ep[T,D] bf16, hp[T*N,D] bf16 (the two projections as DSv4 computes them), x[T,N,D] bf16 (X0).
 *
 * Steps (CPU twin = specification; mtp_pipe.h runs them for both twins), token t = b*S + p:
 *   1. shift (per sequence, never across one; MCore `roll_tensor(..., shifts=-1)` with fill 0 in
 *      megatron/core/transformer/multi_token_prediction.py `MultiTokenPredictionLayer._get_embeddings`;
 *      PaddleFleet DSv4 `_embed_shifted_mtp`):
 *        ids'[t] = p+1 < S ? ids[t+1] : 0;   labels'[t] = p+2 < S ? ids[t+2] : -1 (ignored)
 *        pos'[t] = pos[t]                              MTP_SHIFT=roll (MCore: positions are rolled only for
 *                                                      learned position embeddings; DSv4 has RoPE)
 *        pos'[t] = p+1 < S ? pos[t+1] : 0              MTP_SHIFT=roll_pos (PF-DSv4 [1, ..., s-1, 0] when
 *                                                      pos = 0..S-1)
 *   2. e = embedding(ids', table) (the embedding op, scale 0: the bf16 parameter's rows). The embedding
 *      step checks the MTP ids: one outside [0, V) is ALIGN_ERR_INPUT "embedding: ids[t] = ..." with t the
 *      MTP token (the main id at t+1); the first id of each sequence is never read.
 *   3. en = rmsnorm(e, enorm), hn = rmsnorm(h viewed [T*N,D], hnorm): the rmsnorm op under the caller's
 *      RMSNORM_* modes (PF applies hnorm to the flattened [s*b*n, D] view: the same rows).
 *   4. ep = R(en @ We^T), hp = R(hn @ Wh^T): the matmul op on F(en), F(hn) under the caller's MATMUL_*
 *      modes (operands, K order, fmaf, engine), then one bf16 rounding (R of an fp32 output; a bf16 output
 *      is kept as it is: the same single rounding on the portable engine, so MATMUL_OUT changes no portable
 *      bits; it reaches the vendor engines on the GPU).
 *   5. X0 by MTP_COMBINE:
 *      add       x[t,s,:] = R(F(ep[t,:]) + F(hp[t*N+s,:]))   DSv4 / MCore with mHC (`e_proj`/`h_proj`,
 *                                                            `_concat_embeddings`) / PF (`e_out.unsqueeze(-2)
 *                                                            + h_out`): two bf16 linears, a bf16 add
 *      concat_eh x[t,s,:] = R([en[t] | hn[t*N+s]] @ [We | Wh]^T)   one eh_proj on cat([e, h], -1): MCore
 *                                                            without mHC, PaddleNLP DeepseekV2MTPLayer
 *                                                            (`eh_proj(paddle.concat([nextn_hidden_state,
 *                                                            hidden_states]))`), DS-V3; a single K = 2D
 *                                                            accumulation in the matmul op's order
 *      concat_he x[t,s,:] = R([hn[t*N+s] | en[t]] @ [Wh | We]^T)   the same with h first (PaddleNLP
 *                                                            DeepseekV2MTPLayerAuto's concat order)
 *      The concat forms use the same weights laid out as one [D, 2D] eh_proj, so the three values differ
 *      only by rounding and summation order. ep and hp are computed in every mode (diagnostic records;
 *      under concat x does not use them).
 * Error bound vs fp64 (same bf16 operands as the matmul op sees them): en, hn as rmsnorm.h; ep, hp
 * matmul.h's seq bound (D u S_abs) plus half a bf16 ulp; x under add: ep + hp exact in fp64 then one
 * bf16 rounding, so |x - (ep + hp)| <= 2^-9 |ep + hp|; under concat: the 2D-term dot's bound (2D u S_abs)
 * plus half a bf16 ulp. Checked by tests/kernels/test-ops-ref-mtp.c.
 * Batch invariance: sequences are independent (the shift never crosses one) and every row's reductions run
 * in a fixed order: a sequence's outputs do not depend on the others (the test checks it, portable).
 * Config: mtp_cfg_init checks every tensor and decodes MTP_SHIFT and MTP_COMBINE; the sub-ops decode theirs.
 */
#ifndef ALIGN_MTP_H
#define ALIGN_MTP_H

#include <stdint.h>

#include "numerics.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "modes.h"

struct align_tensor;
struct align_err;

struct mtp_params {
	int64_t S; /* tokens per sequence (the dim S; params_default takes it from the dims) */
};

enum mtp_combine { MTP_ADD, MTP_CONCAT_EH, MTP_CONCAT_HE };

struct mtp_cfg {
	int64_t T, S, V, N, D; /* tokens, tokens per sequence, vocabulary, streams, hidden */
	int shift_pos;	       /* MTP_SHIFT=roll_pos */
	int combine;	       /* enum mtp_combine (MTP_COMBINE) */
	int mm_dtype;	       /* the matmul op's output dtype (MATMUL_OUT) */
};

/* Check the tensors (data may be NULL) for p->S tokens per sequence and decode the modes for device (enum
 * align_device): ALIGN_ERR_INPUT for a bad tensor or S (S < 1 or T not a multiple of S), ALIGN_ERR_INTERNAL
 * for a value not handled; the message goes to err. */
int mtp_cfg_init(struct mtp_cfg *c, const struct mtp_params *p, const struct align_modes *m,
		 const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		 struct align_err *err);

/* the element steps of mtp_pipe.h, one index i each */
enum mtp_kind {
	MTP_K_SHIFT, /* i < T: tok[0][i], tok[1][i], tok[2][i] (step 1) */
	MTP_K_TOF32, /* i < rows*n: f32 out[r*n + j] = F(bf16 a[(r / div)*n + j]) (the matmul operand) */
	MTP_K_CAT,   /* i < rows*2n: f32 out[r*2n + j] = first half F(a[(r/div)*n + j]), second F(b[(r/divb)*n + j]) */
	MTP_K_WCAT,  /* i < n*2n: f32 out[r*2n + j] = w rows [a | b] (f32) */
	MTP_K_ROUND, /* i < rows*n: bf16 out[i] = R(a[i]) with a f32 (adt F32) or bf16 (copied) */
	MTP_K_ADD,   /* i < rows*n: bf16 out[i] = R(F(a[((i/n) / div)*n + i%n]) + F(b[i])) */
};

struct mtp_kargs {
	const void *a, *b;
	void *out;
	int64_t rows, n, div, divb, S;
	int adt, shift_pos;
	const int32_t *ids, *pos;
};

/* one element of kind k at index i */
ALIGN_HD static inline void mtp_elem(int k, const struct mtp_kargs *a, int64_t i)
{
	switch (k) {
	case MTP_K_SHIFT: {
		int64_t p = i % a->S;
		int32_t *tok = (int32_t *)a->out;
		tok[i] = p + 1 < a->S ? a->ids[i + 1] : 0;
		tok[a->rows + i] = p + 2 < a->S ? a->ids[i + 2] : -1;
		tok[2 * a->rows + i] = a->shift_pos ? (p + 1 < a->S ? a->pos[i + 1] : 0) : a->pos[i];
		break;
	}
	case MTP_K_TOF32: {
		int64_t r = i / a->n, j = i - r * a->n;
		((float *)a->out)[i] = align_bf16_to_f32(((const align_bf16 *)a->a)[(r / a->div) * a->n + j]);
		break;
	}
	case MTP_K_CAT: {
		int64_t r = i / (2 * a->n), j = i - r * 2 * a->n;
		float v = j < a->n ? align_bf16_to_f32(((const align_bf16 *)a->a)[(r / a->div) * a->n + j])
				   : align_bf16_to_f32(((const align_bf16 *)a->b)[(r / a->divb) * a->n + (j - a->n)]);
		((float *)a->out)[i] = v;
		break;
	}
	case MTP_K_WCAT: {
		int64_t r = i / (2 * a->n), j = i - r * 2 * a->n;
		((float *)a->out)[i] =
			j < a->n ? ((const float *)a->a)[r * a->n + j] : ((const float *)a->b)[r * a->n + (j - a->n)];
		break;
	}
	case MTP_K_ROUND:
		((align_bf16 *)a->out)[i] =
			a->adt == 0 ? align_f32_to_bf16(((const float *)a->a)[i]) : ((const align_bf16 *)a->a)[i];
		break;
	case MTP_K_ADD: {
		int64_t r = i / a->n, j = i - r * a->n;
		float e = align_bf16_to_f32(((const align_bf16 *)a->a)[(r / a->div) * a->n + j]);
		float h = align_bf16_to_f32(((const align_bf16 *)a->b)[i]);
		((align_bf16 *)a->out)[i] = align_f32_to_bf16(e + h);
		break;
	}
	default:
		break;
	}
}

/* elements of kind k (the loop bound of mtp_elem) */
static inline int64_t mtp_elems(int k, const struct mtp_kargs *a)
{
	return k == MTP_K_SHIFT ? a->rows : k == MTP_K_CAT || k == MTP_K_WCAT ? a->rows * 2 * a->n : a->rows * a->n;
}

int mtp_fwd_cpu(const struct mtp_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MTP_H */
