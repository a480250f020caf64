/* compressor_bwd.h: backward of the DSv4 KV compressor (compressor.h; specs/dsv4-numerics.md 3.3-3.4), issue 18.
 * Inputs: the forward's x[T*K,D] bf16, wkv[N*F,D] bf16, wgate[N*F,D] bf16, ape[K,N*F] f32, w[F] f32, and
 * dc[T,F] bf16 (the gradient of the bf16 output c, bf16 as rope_bwd's dy and rmsnorm_bwd's dy).
 * Outputs: dx[T*K,D] bf16 (x is a bf16 activation: autograd returns a bf16 gradient for it, the fp32 sum
 * of its two GEMMs' gradients rounded once, as DS-ref's x.float() ToCopyBackward does), dwkv[N*F,D],
 * dwgate[N*F,D], dape[K,N*F], dw[F] f32 (fp32 parameters or main_grad; not rounded under any switch).
 * Dims and parameters: the forward's (compressor_params and its variants: 0 main, 1 indexer/rotate, 2 YaRN
 * chunk at pos0 = 98304). Saved from forward: nothing. K and Z of every token (compressor_proj), the
 * window's m, s and w_p (compressor_pool_stats / _weight), the pooled row C (compressor_pool), the norm
 * input x (compressor_norm_row) and its factor r (compressor_norm_factor) are recomputed by the forward's
 * own code, so they are the forward's bits.
 *
 * The path differentiated: the QAT-off form. CSA_QAT is not read: DS-ref's act_quant / fp4_act_quant are
 * inference kernels without a backward (as dsa_indexer_bwd differentiates the fp32 score whatever
 * DSA_INDEXER_SCORE says); a run under CSA_QAT=on (the default, deepseek-ref) gets the gradient of the
 * QAT-off compressor. That is also what a straight-through estimator of the QDQ would give: the QDQ is the
 * forward's last step (9), so dc would reach step 8 unchanged (inference: no training code with it read). Every other switch the forward reads is read, plus RMSNORM_BWD_FORM (the norm's
 * dx formula, rmsnorm_bwd.h step 4). RMSNORM_REDUCE=torch is refused (status 4), as by the forward.
 *
 * Rounding rule: a value the forward rounds to bf16 is a bf16 tensor in the framework, so the gradient
 * arriving at it is rounded to bf16 there (R below); everything else is binary32, F = bf16 -> f32.
 * Operation order (CPU twin = specification), per group g (position pos = pos0 + g*K):
 *   1. recompute K, Z of every (token, column) (compressor.h steps 1-2), C of every channel (3-5), then
 *      x = the norm input and r (step 6) of row g.
 *   2. gy = dc[g] (bf16 row); rotate: v = F(gy), the Hadamard of CSA_HADAMARD over F (compressor_hadamard:
 *      the matrix is symmetric; the library's backward is its forward with the same scale), gy = R(v * hscale);
 *      then RoPE's backward: rope_row under rope_bwd_params (rope_bwd.h: the conjugate rotation, rope's
 *      rounding points), bf16 in and out.
 *   3. norm backward (rmsnorm_bwd.h with D = F, w' = w or F(R(w)) per RMSNORM_WEIGHT), q_j = F(gy_j):
 *      p_j = rmsb_p(q_j, w_j, x_j, r); s = sum p_j in the RMSNORM_REDUCE order (the forward's row order,
 *      compressor_norm_factor's reduce without squaring); dC_j = rmsb_dx(...) (RMSNORM_BWD_FORM);
 *      CSA_COMP_NORM=bf16_input: dC_j = F(R(dC_j)) (the gradient of the bf16 norm input); fp32: unrounded;
 *      the weight term n_j = rmsb_q(q_j, x_j, r) = q_j * (x_j * r), kept for dw.
 *   4. window backward, channel ch, the forward's window (compressor_window) of n positions:
 *      G = dC_ch, CSA_COMP_SUM=bf16: G = R(G) (C and the products are bf16 tensors; their gradients are R(G)).
 *      For p ascending: w_p = compressor_pool_weight, W_p = w_p or R(w_p) (CSA_COMP_POOL);
 *        dW_p = G * K_p, R(dW_p) under CSA_COMP_POOL=bf16;
 *      delta = sum_p w_p * dW_p ascending from +0 (PyTorch's softmax backward: the saved fp32 output);
 *      for p ascending (real positions only; the first group's padding of N = 2 has no element):
 *        dZ_p = w_p * (dW_p - delta);  dK_p = G * W_p, R(dK_p) under CSA_COMP_GEMM=bf16;
 *        ape and gate: da = dZ_p, or R(dZ_p) under CSA_COMP_APE=bf16 (the bf16 sum's gradient reaches both
 *        bf16 operands; ape's cast back to f32 is exact); dz = da, or R(da) under CSA_COMP_GEMM=bf16.
 *      Every (token, column) is at one window position of one (g, ch) at most (N = 2: column c < F of
 *      group g's tokens is group g+1's previous half, F + c its own half; N = 1: column c of group g), so
 *      dk, dz, da are written once, never summed; the columns no window reads (N = 2: column c < F of the
 *      last group's tokens) get +0.
 *   5. dx[t,d] = R(skv + sg) with skv = sum over j < N*F ascending from +0 of dk[t,j] * F(wkv[j,d]) and sg
 *      likewise with dz, wgate (the kv sum added first; + commutes); CSA_COMP_GEMM=bf16 (the bf16 GEMMs
 *      return bf16 gradients, added in bf16): R(R(skv) + R(sg)).
 *   6. dwkv[j,d] = sum over tokens t ascending (0..T*K-1) from +0 of dk[t,j] * F(x[t,d]); dwgate with dz.
 *   7. dape[k,j] = sum over groups g ascending from +0 of da[gK+k, j].
 *   8. dw[ch] = sum over groups g ascending from +0 of n_ch (step 3) of group g.
 * No float atomics; no fused multiply-add (both twins compiled without contraction); NaN bits: nan_host.h.
 * Error bound vs the long double evaluation of the exact gradient of the same function (QAT off; fp32
 * precision switches, CSA_COMP_NORM=fp32; the RoPE / Hadamard backward rows of step 2 taken as given, they
 * are rope_bwd's and an exact permutation-sign sum plus one rounding), u = 2^-24: with every quantity's
 * absolute counterpart |.| (the same chain evaluated on absolute values: |g|, |w'|, |x| r, the sums of |terms|),
 * each output is within n u |.| with n = D + N*F + T*K + 2K + 2F + 64 (the recomputed forward's error,
 * the norm's two row sums, the window's two sums, the projection sums), plus half a bf16 ulp for dx.
 * test-ops-ref-compressor.c checks it, and every gradient against central differences of the forward twin.
 * Batch invariance: dx of group g's tokens depends on dc of groups g and g+1 (N = 2) or g (N = 1), so with
 * T' < T groups the first T' - 1 (N = 2) or T' (N = 1) groups' dx rows are the same bits; dwkv, dwgate,
 * dape and dw sum over tokens or groups (not row outputs).
 */
#ifndef ALIGN_COMPRESSOR_BWD_H
#define ALIGN_COMPRESSOR_BWD_H

#include "compressor.h"
#include "rmsnorm_bwd.h"
#include "rope_bwd.h"

#ifdef __cplusplus
extern "C" {
#endif

struct compressor_bwd_cfg {
	struct compressor_op_cfg o; /* the forward's dims and switches */
	struct rmsnorm_bwd_cfg nb;  /* the norm's backward: form, wbf16, D = F (orders not read) */
	struct rope_cfg rinv;	    /* RoPE under rope_bwd_params: the conjugate rotation */
};

int compressor_bwd_cfg_init(struct compressor_bwd_cfg *c, const struct compressor_params *p,
			    const struct align_modes *m, const struct align_tensor *in, int n_in,
			    const struct align_tensor *out, int n_out, int device, struct align_err *err);

int compressor_bwd_fwd_cpu(const struct compressor_params *p, const struct align_modes *m,
			   const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

/* ---- the shared row code (both twins) ---- */

/* step 2: dc row (F bf16) -> gy (F bf16) at position pos; tmp: F floats */
ALIGN_HD static inline void compressor_bwd_grad_row(const struct compressor_bwd_cfg *c, const align_bf16 *dc,
						    int32_t pos, align_bf16 *gy, float *tmp)
{
	const int64_t F = c->o.F;
	if (c->o.c.rotate) {
		for (int64_t i = 0; i < F; i++)
			tmp[i] = align_bf16_to_f32(dc[i]);
		compressor_hadamard(c->o.c.butterfly, tmp, F);
		for (int64_t i = 0; i < F; i++)
			gy[i] = align_f32_to_bf16(hn_mul(tmp[i], c->o.c.hscale));
	} else {
		for (int64_t i = 0; i < F; i++)
			gy[i] = dc[i];
	}
	rope_row(&c->rinv, NULL, pos, F, gy, gy);
}

/* step 3: x (norm input), r, gy -> dC[F] (the pooled row's gradient) and n[F] (dw's terms); p: F floats */
ALIGN_HD static inline void compressor_bwd_norm_row(const struct compressor_bwd_cfg *c, const float *x, float r,
						    const float *w, const align_bf16 *gy, float *p, float *dC, float *n)
{
	const int64_t F = c->o.F;
	for (int64_t j = 0; j < F; j++)
		p[j] = rmsb_p(&c->nb, align_bf16_to_f32(gy[j]), w[j], x[j], r);
	float s = align_reduce_hn(c->o.c.f.order, p, F, 1, 0, 0);
	for (int64_t j = 0; j < F; j++) {
		float g = align_bf16_to_f32(gy[j]), d = rmsb_dx(&c->nb, g, w[j], x[j], r, s);
		dC[j] = c->o.c.norm_fp32 ? d : align_round_bf16(d);
		n[j] = rmsb_q(g, x[j], r);
	}
}

/* step 4's dW_p */
ALIGN_HD static inline float compressor_bwd_dw(const struct compressor_cfg *c, float G, float Kp)
{
	float d = hn_mul(G, Kp);
	return c->pool_bf16 ? align_round_bf16(d) : d;
}

/* step 4 for group g, channel ch with the pooled gradient dC: writes dk (into dK) and da (into dZ) of the
 * window's real positions ([tokens][N*F] like Kv, Zv) */
ALIGN_HD static inline void compressor_bwd_pool(const struct compressor_cfg *c, const float *Kv, const float *Zv,
						float *dK, float *dZ, int64_t g, int64_t ch, int64_t K, int64_t N,
						int64_t F, float dC)
{
	struct compressor_win w = compressor_window(Kv, Zv, g, ch, K, N, F);
	const int64_t n = w.np + w.no, NF = N * F;
	const float G = c->sum_bf16 ? align_round_bf16(dC) : dC;
	float m, s, delta = 0.0f;
	compressor_pool_stats(c, &w, &m, &s);
	for (int64_t p = 0; p < n; p++) {
		float wp = compressor_pool_weight(c, &w, p, m, s);
		delta = hn_add(delta, hn_mul(wp, compressor_bwd_dw(c, G, compressor_win_k(&w, p))));
	}
	for (int64_t p = 0; p < n; p++) {
		if (p < w.np && !w.Kp)
			continue; /* the first group's padding */
		float wp = compressor_pool_weight(c, &w, p, m, s), W = c->pool_bf16 ? align_round_bf16(wp) : wp;
		float dz = hn_mul(wp, hn_sub(compressor_bwd_dw(c, G, compressor_win_k(&w, p)), delta));
		float dk = hn_mul(G, W);
		int64_t e = p < w.np ? ((g - 1) * K + p) * NF + ch : (g * K + p - w.np) * NF + (N - 1) * F + ch;
		dK[e] = c->gemm_bf16 ? align_round_bf16(dk) : dk;
		dZ[e] = c->ape_bf16 ? align_round_bf16(dz) : dz;
	}
}

/* step 4's dz from da */
ALIGN_HD static inline float compressor_bwd_dz(const struct compressor_cfg *c, float da)
{
	return c->gemm_bf16 ? align_round_bf16(da) : da;
}

/* step 5: dx[t,d] from the rows dk, da of token t (N*F each) */
ALIGN_HD static inline align_bf16 compressor_bwd_dx(const struct compressor_cfg *c, const float *dk, const float *da,
						    const align_bf16 *wk, const align_bf16 *wz, int64_t NF, int64_t D,
						    int64_t d)
{
	float skv = 0.0f, sg = 0.0f;
	for (int64_t j = 0; j < NF; j++)
		skv = hn_add(skv, hn_mul(dk[j], align_bf16_to_f32(wk[j * D + d])));
	for (int64_t j = 0; j < NF; j++)
		sg = hn_add(sg, hn_mul(compressor_bwd_dz(c, da[j]), align_bf16_to_f32(wz[j * D + d])));
	if (c->gemm_bf16)
		return align_f32_to_bf16(hn_add(align_round_bf16(skv), align_round_bf16(sg)));
	return align_f32_to_bf16(hn_add(skv, sg));
}

/* step 6: dwkv[j,d] (gate 0) or dwgate[j,d] (gate 1) over the TK tokens */
ALIGN_HD static inline float compressor_bwd_dwproj(const struct compressor_cfg *c, const float *dK, const float *dZ,
						   const align_bf16 *x, int64_t TK, int64_t NF, int64_t D, int64_t j,
						   int64_t d, int gate)
{
	float acc = 0.0f;
	for (int64_t t = 0; t < TK; t++) {
		float gv = gate ? compressor_bwd_dz(c, dZ[t * NF + j]) : dK[t * NF + j];
		acc = hn_add(acc, hn_mul(gv, align_bf16_to_f32(x[t * D + d])));
	}
	return acc;
}

/* steps 7-8: sum over n groups of v[g * stride] ascending from +0 */
ALIGN_HD static inline float compressor_bwd_gsum(const float *v, int64_t n, int64_t stride)
{
	float acc = 0.0f;
	for (int64_t g = 0; g < n; g++)
		acc = hn_add(acc, v[g * stride]);
	return acc;
}

#endif /* ALIGN_COMPRESSOR_BWD_H */
