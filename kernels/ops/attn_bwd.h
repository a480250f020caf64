/* attn_bwd.h: backward of the composed DSv4 attention layer (attn.h; specs/dsv4-numerics.md 3.1-3.9), issue 18,
 * composed on the backward ops' entry points (matmul_bwd, rope_bwd, sparse_attn_bwd, qnorm_bwd, rmsnorm_bwd,
 * compressor_bwd) so that every bit is theirs run one after another (tests/kernels/test-ops-ref-attn-bwd.c
 * rebuilds the chain from the ops' own entry points and compares bytes).
 *
 * Inputs:  attn's seven (x, wd, wq, ape, vec, wo_a, wo_b; packing in attn.h) and dy[T,D] bf16 (the gradient of
 *          the bf16 layer output).
 * Outputs: dx[T,D] bf16 (x is a bf16 activation: autograd gives a bf16 gradient; every composed op returns
 *          its contribution as bf16 (matmul_bwd under MATMUL_OUT=bf16, compressor_bwd), and the contributions
 *          are added as below), dwd, dwq, dape, dvec, dwo_a, dwo_b f32, shaped as the inputs (one dtype per
 *          tensor: dwd mixes matmul_bwd's rows (WGRAD_DTYPE) with compressor_bwd's (f32 always), dvec the
 *          norms' (RMSNORM_BWD_DW_DTYPE) with the sink's (f32); a bf16 result is stored widened, exactly).
 * Parameters and variants: attn's (csa, hca, swa). Saved from forward: nothing; every intermediate (positions,
 *          qa, qr, the qnorm input, q, kv, the compressed entries, the index sets, the inverse-RoPE'd o, z) is
 *          recomputed by the forward itself (attn_pipe_run, attn_saved) under the same modes.
 * Not differentiated: the indexer (csa). Its top-k selection is not differentiable, so the main attention's
 *          gradient does not flow into the indexer branch (its training signal is the separate indexer loss,
 *          spec 3.10): the indexer compressor's wkv, wgate, ape and norm w, indexer wq_b and the head weights
 *          get +0. The index sets are recomputed by the forward's own code (attn_pipe.h steps 5-6).
 * CSA_QAT: the FP8 QDQ of kv's nope dims is the last step of kv (attn.h step 3): its gradient is taken as the
 *          straight-through one (dkv reaches RoPE's backward unchanged), as compressor_bwd.h does for its own
 *          QDQ (the QAT-off gradient); CSA_QAT is read only through the recomputed forward (the kv that
 *          sparse_attn_bwd sees).
 * main_grad: attn_bwd takes no gradient buffers; matmul_bwd's main_grad is +0 everywhere (a step's first
 *          micro-batch: Megatron zeroes main_grad before it). So WGRAD_ACCUM=main_grad is fresh but for -0
 *          (acc + 0 = +0), add rounds the wgrad to bf16 once (R_w(0 + F(R_bf16(acc))): fresh's bits under
 *          WGRAD_DTYPE=bf16, a bf16 value under fp32).
 *
 * Operation order (CPU twin = specification; attn_bwd_pipe.h runs it for both twins; F widening, R bf16):
 *   0. attn_pipe_run: y, q, kv, o and attn_saved as the forward computes them.
 *   Every linear of the forward (attn_linear: bf16 operands, fp32 accumulate, bf16 out) is differentiated by
 *   matmul_bwd(a = F(input), b = F(weight), dy = F(its output gradient), main_grad = +0, params S = 0: one
 *   sequence) under the caller's MATMUL_ACCUM, MATMUL_FMA, WGRAD_* with MATMUL_OUT=bf16 (the input's gradient
 *   is a bf16 activation's) and MATMUL_OPERAND=bf16 (the forward's operands are bf16; fp32 or tf32 would read
 *   the same values).
 *   1. y = linear(z, wo_b): dz[T,G*E] bf16, dwo_b.
 *   2. for g = 0..G-1: z_g = linear(o2_g, wo_a_g): do2[:, g] bf16 [T,H*F], dwo_a rows g*E..(g+1)*E.
 *   3. rope_bwd of the inverse RoPE (rope params with inverse = 1: the forward rotation): do[T,G*H,F].
 *   4. sparse_attn_bwd(q, kv_full, idx, sink, do) (scale, window as the forward): dq bf16, dkv_full f32
 *      [T+nc,F] (its fixed scatter order), dsink -> dvec's sink.
 *   5. q path: rope_bwd(dq) -> dqn; qnorm_bwd(qb, dqn) -> dqb (QNORM_MODE=fp32_out: the cast to bf16 before
 *      RoPE passes dqn through, widened exactly); matmul_bwd(qr, wq_b, dqb) -> dqr, dwq rows 0..G*H*F;
 *      rmsnorm_bwd(qa, q_norm w, dqr) -> dqa, dvec q_norm w; matmul_bwd(x, wq_a, dqa) -> gq[T,D] bf16, dwd
 *      rows 0..K.
 *   6. kv path: dkv = R(dkv_full rows 0..T-1) (kv is a bf16 tensor); (QDQ: straight through); rope_bwd ->
 *      dkvn; rmsnorm_bwd(kva, kv_norm w, dkvn) -> dkva, dvec kv_norm w; matmul_bwd(x, wkv, dkva) -> gkv
 *      [T,D] bf16, dwd rows K..K+F.
 *   7. compressor path (csa, hca; nc > 0): dc = R(dkv_full rows T..T+nc-1); compressor_bwd(x rows 0..nc*r-1,
 *      compressor wkv, wgate (coff*F rows each), ape [r, coff*F], norm w, dc) -> gc[nc*r,D] bf16, dwd's
 *      compressor rows (hca: the first F of each 2F block; the rest +0), dape's first r*coff*F, dvec's
 *      compressor norm w.
 *   8. dx[t,d] = R(F(gq) + F(gkv)) then + F(gc) for t < nc*r: binary32, left to right from the q path's
 *      term (the rows no compressor group reads have two terms). PyTorch's engine adds a tensor's
 *      gradients in bf16 (one rounding per add): the same bits for two terms; with three, one rounding
 *      fewer than its R(R(a + b) + c) (and its order is the graph's, not fixed).
 *   Outputs not written by a step (the indexer's rows, hca's unused compressor rows) are +0.
 * Rounding points and orders: those of the ops named; attn_bwd's own are the casts of dkv_full to bf16 and
 * the dx sum (one binary32 chain, one rounding), and exact widenings and copies.
 * Error bound: every output is the named ops' bytes on the stated inputs (test-ops-ref-attn-bwd.c checks the
 * equality byte for byte, rebuilding the chain from the ops' own entry points), so each op's own bound holds
 * for its step; the whole against central differences of the forward twin along the gradient (and along
 * half of it), per output and variant, within 5% of g . step (the forward's bf16 roundings and the step's
 * curvature; 0.9 of that measured at the test's small shapes, QAT off).
 * Batch invariance: dx's row t depends on the rows >= t of dy that read token t (its kv entry, its compressor
 * group's entry): not a row output (ops_out_not_rows); the weight gradients sum over tokens. The
 * test-ops driver checks determinism and every switch's effect.
 * Not read: MATMUL_OPERAND and MATMUL_OUT (fixed above), MATMUL_IMPL (no linear runs on an engine: attn's are
 * its own element code, matmul_bwd reads no engine). RMSNORM_REDUCE=torch is refused (status 4), as by attn.
 */
#ifndef ALIGN_ATTN_BWD_H
#define ALIGN_ATTN_BWD_H

#include "attn.h"
#include "compressor_bwd.h"
#include "matmul_bwd.h"
#include "nan_host.h"
#include "qnorm_bwd.h"
#include "rmsnorm_bwd.h"
#include "rope_bwd.h"
#include "sparse_attn_bwd.h"

#ifdef __cplusplus
extern "C" {
#endif

struct attn_bwd_cfg {
	struct attn_cfg f;     /* the forward's dims and switches */
	struct align_modes mm; /* the modes matmul_bwd runs with: the caller's, MATMUL_OUT and _OPERAND bf16 */
	int w_dtype;	       /* matmul_bwd's db and main_grad (WGRAD_DTYPE) */
	int dw_dtype;	       /* rmsnorm_bwd's dw (RMSNORM_BWD_DW_DTYPE) */
};

/* Check the tensors (data may be NULL) and the sub-ops' configurations for device, so that a value one of
 * them refuses fails before anything runs: ALIGN_ERR_INPUT, _UNSUPPORTED or _INTERNAL, the message to err. */
int attn_bwd_cfg_init(struct attn_bwd_cfg *c, const struct attn_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err);

int attn_bwd_fwd_cpu(const struct attn_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		     struct align_tensor *out, int n_out);

/* attn_bwd's element steps, one index i < rows*n each */
enum attn_bwd_kind {
	ATTNB_K_WIDEN, /* f32 out[r*ldo + offo + j] = F(bf16 a[r*lda + offa + j]) */
	ATTNB_K_COPY,  /* bf16 out[r*ldo + offo + j] = a[r*lda + offa + j] */
	ATTNB_K_ZERO,  /* f32 out[i] = +0 */
	ATTNB_K_DX,    /* bf16 out[i] = R(F(a[i]) + F(b[i]) (+ F(c[i]) when i < n * crows)) (step 8) */
};

struct attn_bwd_kargs {
	const void *a, *b, *c;
	void *out;
	int64_t rows, n, lda, offa, ldo, offo, crows;
};

ALIGN_HD static inline void attn_bwd_elem(int k, const struct attn_bwd_kargs *a, int64_t i)
{
	int64_t r = i / a->n, j = i - r * a->n;
	if (k == ATTNB_K_WIDEN) {
		((float *)a->out)[r * a->ldo + a->offo + j] =
			align_bf16_to_f32(((const align_bf16 *)a->a)[r * a->lda + a->offa + j]);
	} else if (k == ATTNB_K_COPY) {
		((align_bf16 *)a->out)[r * a->ldo + a->offo + j] = ((const align_bf16 *)a->a)[r * a->lda + a->offa + j];
	} else if (k == ATTNB_K_ZERO) {
		((float *)a->out)[i] = 0.0f;
	} else if (k == ATTNB_K_DX) {
		float acc = hn_add(align_bf16_to_f32(((const align_bf16 *)a->a)[i]),
				   align_bf16_to_f32(((const align_bf16 *)a->b)[i]));
		if (r < a->crows)
			acc = hn_add(acc, align_bf16_to_f32(((const align_bf16 *)a->c)[i]));
		((align_bf16 *)a->out)[i] = align_f32_to_bf16(acc);
	}
}

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_ATTN_BWD_H */
