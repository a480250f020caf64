/* attn.h: the composed DSv4 attention layer (specs/dsv4-numerics.md 3.1-3.9), variants csa (compress ratio
 * 4, lightning indexer), hca (ratio 128, every causal compressed entry) and swa (sliding window only).
 * Dims: T tokens, D hidden, G output groups, H heads per group (G*H heads), F head dim (q = k = v; RoPE on
 * the last rope_dim = 64), K q_lora rank, E o_lora rank, N indexer heads, S indexer head dim (a power of
 * two), V window slots (DSv4: 128). Inputs (the weights packed by role so that one op has few tensors):
 *   x[T,D] bf16                     the attention-norm output
 *   wd[K+5*F+4*S+N,D] bf16          rows applied to x: wq_a [K] | wkv [F] | compressor wkv [2F] | compressor
 *                                   wgate [2F] | indexer-compressor wkv [2S] | its wgate [2S] | indexer
 *                                   head weights [N] (ratio 128 reads the first F (S) rows of each 2F block)
 *   wq[G*H*F+N*S,K] bf16            rows applied to the q_lora vector: wq_b | indexer wq_b
 *   ape[256*F+256*S] f32            compressor ape as a dense [r, coff*F] at 0, indexer compressor ape as a
 *                                   dense [r, coff*S] at 256*F (r*coff <= 256)
 *   vec[K+2*F+S+G*H] f32            q_norm w | kv_norm w | compressor norm w | indexer-compressor norm w | sink
 *   wo_a[G*E,H*F] bf16, wo_b[D,G*E] bf16   grouped low-rank output projection
 * Outputs: y[T,D] bf16; saved state for the backward: q[T,G*H,F] (after norm and RoPE), kv[T,F] (after norm,
 * RoPE and QAT), o[T,G*H,F] (sparse attention output before the inverse RoPE). The index sets, the
 * compressed entries and the indexer scores are recomputed from these inputs.
 *
 * Operation order (both twins run attn_pipe.h over the other ops' own entry points; R = round to bf16):
 *   1. linear(a, w) = R(sum_k F(a_k) F(w_k)) per output, k ascending from +0 (binary32; bf16 GEMM, fp32
 *      accumulate, bf16 out).
 *   2. qr = rmsnorm(linear(x, wq_a), q_norm w) (the rmsnorm op: RMSNORM_*);
 *      q = rope(qnorm(linear(qr, wq_b))) at position t (the qnorm op, QNORM_MODE; fp32_out is rounded to
 *      bf16 before RoPE; the rope op with params.rope).
 *   3. kv = rope(rmsnorm(linear(x, wkv), kv_norm w)); CSA_QAT=on: FP8 QDQ of its nope dims (compressor.h
 *      compressor_qdq_row, block 64).
 *   4. csa / hca: the compressor op (main, ratio r, coff = 2 iff r = 4) over the first floor(T/r)*r rows of x
 *      -> nc = floor(T/r) entries, appended after kv: kv_full[T+nc,F].
 *   5. csa: the indexer compressor (rotate) -> kI[nc,S]; qI = linear(qr, indexer wq_b) [T,N,S], RoPE at t,
 *      Hadamard (CSA_HADAMARD) times S^-0.5 rounded, FP4 QDQ if CSA_QAT; hw = linear(x, head weights)
 *      [T,N]; the indexer op (ratio 4, offset T, K = topk) -> the compressed slots.
 *   6. index set of query t, V + C slots: window slot j < V holds u = max(0, t-V+1) + j, -1 when u > t;
 *      then csa: the indexer's topk slots; hca: slot c holds T + c when c < floor((t+1)/128), else -1
 *      (C = nc); swa: none.
 *   7. o = sparse_attn(q, kv_full, idx, sink) (the sparse_attn op, window = V, scale (float)F^-0.5, CSA_*).
 *   8. inverse RoPE of o at t (the rope op, inverse); z[t,g,e] = linear(o[t, g*H*F .. (g+1)*H*F),
 *      wo_a[g*E+e]); y = linear(z[t], wo_b).
 * Error bound vs fp64: the composition of the ops' bounds (each op's own test checks its bound; attn's own
 * linears are bf16 GEMMs with fp32 accumulation: ulp_bf16 + n 2^-24 sum |a w|). test-ops checks attn's
 * determinism, batch invariance and the switches' effect; bisect-attn the profiles' separation.
 * Rows never depend on later rows (causal index sets, per-row steps): batch invariant.
 */
#ifndef ALIGN_ATTN_H
#define ALIGN_ATTN_H

#include <stdint.h>

#include "compressor.h"
#include "nan_host.h"
#include "numerics.h"
#include "rope.h"

#ifdef __cplusplus
extern "C" {
#endif

struct align_modes;
struct align_tensor;
struct align_err;

enum attn_variant { ATTN_CSA, ATTN_HCA, ATTN_SWA }; /* `--variant csa|hca|swa` (ops.c names them) */

struct attn_params {
	int variant;		 /* enum attn_variant */
	int topk;		 /* indexer top-k (DSv4-Flash 512) */
	int window;		 /* sliding-window slots V (DSv4 128; default: the dim V) */
	struct rope_params rope; /* RoPE of q, kv, compressor, indexer (csa/hca: YaRN; swa: plain 10000) */
};

/* what both twins run */
struct attn_cfg {
	int64_t T, D, G, H, F, K, E, N, S, V;
	int variant;
	int64_t ratio, coff, nc;  /* compress ratio (0: swa), coff, compressed entries floor(T/ratio) */
	int64_t topk, C, NS;	  /* indexer top-k; compressed slots per query; V + C */
	struct compressor_cfg cc; /* CSA_QAT, CSA_HADAMARD and the Hadamard scale of S (rotate) */
	int qnorm_f32;		  /* QNORM_MODE=fp32_out: the qnorm output is f32 */
	int rope_dim;
};

int attn_cfg_init(struct attn_cfg *c, const struct attn_params *p, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		  struct align_err *err);

/* the C backend's element steps of attn_pipe.h (attn.c; attn_bwd.c runs the forward with it) */
struct attn_kargs;
int attn_cpu_kern(void *ctx, int kind, const struct attn_kargs *a);

int attn_fwd_cpu(const struct attn_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		 struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

/* ---- element code shared by the twins ---- */

/* step 1: one output of a bf16 GEMM with fp32 accumulation (a, w: n bf16) */
ALIGN_HD static inline align_bf16 attn_linear(const align_bf16 *a, const align_bf16 *w, int64_t n)
{
	float acc = 0.0f;
	for (int64_t k = 0; k < n; k++)
		acc = hn_add(acc, hn_mul(align_bf16_to_f32(a[k]), align_bf16_to_f32(w[k])));
	return align_f32_to_bf16(acc);
}

/* step 6: slot j of query t (ci: the indexer's topk slots of row t for csa) */
ALIGN_HD static inline int32_t attn_slot(const struct attn_cfg *c, int64_t t, int64_t j, const int32_t *ci)
{
	if (j < c->V) {
		int64_t u = (t - c->V + 1 > 0 ? t - c->V + 1 : 0) + j;
		return u > t ? -1 : (int32_t)u;
	}
	j -= c->V;
	if (c->variant == ATTN_CSA)
		return c->nc > 0 ? ci[j] : -1;
	return j < (t + 1) / 128 ? (int32_t)(c->T + j) : -1;
}

/* step 5: one indexer query head row (S bf16, in place) after its RoPE: Hadamard, scale, FP4 QDQ;
 * tmp: S floats */
ALIGN_HD static inline void attn_qi_rotate(const struct attn_cfg *c, align_bf16 *q, float *tmp)
{
	for (int64_t i = 0; i < c->S; i++)
		tmp[i] = align_bf16_to_f32(q[i]);
	compressor_hadamard(c->cc.butterfly, tmp, c->S);
	for (int64_t i = 0; i < c->S; i++)
		q[i] = align_f32_to_bf16(hn_mul(tmp[i], c->cc.hscale));
	if (c->cc.qat)
		compressor_qdq_row(1, q, c->S, 0);
}

#endif /* ALIGN_ATTN_H */
