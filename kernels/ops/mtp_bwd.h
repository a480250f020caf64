/* mtp_bwd.h: backward of the MTP pre-layer (mtp.h), issue 18: from dx, the gradient of X0, the gradients of
 * the pre-layer's float inputs, composed on the backward ops' entry points (matmul_bwd, rmsnorm_bwd,
 * embedding_bwd) so that every bit is theirs run one after another.
 *
 * Inputs:  ids[T] i32, table[V,D] f32, h[T,N,D] bf16, norm[2,D] f32, proj[2D,D] f32 (the forward's, as
 *          mtp.h lists them; pos is not an input: only the positions' shift reads it, and nothing depends on
 *          it), dx[T,N,D] bf16 (the gradient of X0: bf16 as X0 is, the dtype autograd gives the gradient of
 *          a bf16 activation), main_grad[2D,D] (WGRAD_DTYPE; rows as proj: the two projections' buffers,
 *          read by WGRAD_ACCUM=main_grad and add only).
 * Outputs: dtable[V,D] (EMBED_BWD_DTYPE), dh[T,N,D] bf16, dnorm[2,D] (RMSNORM_BWD_DW_DTYPE; row 0 enorm,
 *          row 1 hnorm), dproj[2D,D] (WGRAD_DTYPE; rows 0..D-1 e_proj, D..2D-1 h_proj).
 * Parameters: mtp's (S tokens per sequence). Saved from forward: nothing; the MTP ids, e, en and hn are
 *          recomputed from the inputs by the forward's own steps 1-3 (mtp_pipe_front: the shift, the
 *          embedding and rmsnorm twins under the same modes), the factors r inside rmsnorm_bwd (its contract).
 *
 * Operation order (CPU twin = specification; mtp_bwd_pipe.h runs it for both twins), F widening, R bf16:
 *   1. tok, e, en, hn = mtp steps 1-3.
 *   2. by MTP_COMBINE, the gradients of en[T,D] (den) and hn[T*N,D] (dhn), bf16:
 *      add       dhp = dx (the bf16 add's gradient passes through; the rounding of X0 has none);
 *                dep[t,j] = R(sum over s = 0..N-1 of F(dx[t,s,j])): the sum_to of ep's broadcast over the
 *                streams, binary32 from the s = 0 term, s ascending (so N = 1 passes dx through bit for bit);
 *                matmul_bwd(a = F(en), b = We, dy = F(dep), main_grad rows 0..D-1) -> den, dproj rows 0..D-1;
 *                matmul_bwd(a = F(hn), b = Wh, dy = F(dx) viewed [T*N,D], main_grad rows D..) -> dhn, rows D..
 *      concat_eh matmul_bwd(a = [F(en[t]) | F(hn[t*N+s])], b = [We | Wh] (mtp's MTP_K_CAT and MTP_K_WCAT, the
 *                forward's own operands), dy = F(dx) [T*N,D], main_grad = [mg rows 0..D-1 | mg rows D..] as
 *                one [D,2D] eh_proj buffer) -> da[T*N,2D] bf16 and db[D,2D]; dhn = da[:, D..2D);
 *                den[t,j] = R(sum over s of F(da[t*N+s, j])) as dep above (en's broadcast over the streams);
 *                dproj rows 0..D-1 = db[:, 0..D), rows D.. = db[:, D..2D) (copies)
 *      concat_he the same with the halves swapped ([hn | en], [Wh | We]; PaddleNLP's order).
 *      Every matmul_bwd runs under the caller's MATMUL_OPERAND, MATMUL_ACCUM, MATMUL_FMA and WGRAD_* with
 *      MATMUL_OUT=bf16 (den and dhn are bf16 activations' gradients: one rounding of the fp32 dot), params S
 *      for the T rows of e and S*N for the T*N rows of the streams (row t*N+s = (b*S+p)*N+s: sequence b's
 *      rows are contiguous, so WGRAD_ORDER=sb visits (p, s) outer and b inner, the [s*n, b] flattening;
 *      Megatron's [s, b, n, h] view would visit (p, b, s): not modelled).
 *   3. rmsnorm_bwd(x = h viewed [T*N,D], w = hnorm, dy = dhn) -> dh, dnorm row 1;
 *      rmsnorm_bwd(x = e, w = enorm, dy = den) -> de[T,D] bf16, dnorm row 0 (RMSNORM_BWD_* and the forward's
 *      RMSNORM_WEIGHT, _RSQRT, _REDUCE, _EPS; RMSNORM_CAST reaches the bits through en and hn only).
 *   4. embedding_bwd(ids = the MTP ids (tok row 0), table, dy = de) -> dtable (EMBED_BWD_*; scale 0 as the
 *      forward's embedding). The fill id 0 of each sequence's last token is an id like the others: its
 *      gradient goes to row 0, as MCore's roll_tensor fill and PF's zero-padded tail feed it.
 * Rounding points and orders: those of the ops named; mtp_bwd's own are the stream sums of step 2 (one
 * binary32 chain, one bf16 rounding) and exact copies and widenings.
 * Error bound: every output is the named ops' bytes on the stated inputs (tests/kernels/test-ops-ref-mtp-bwd.c
 * checks the equality byte for byte, rebuilding the composition from the ops' own entry points); the stream
 * sum is within (N - 1) u sum|dx| plus half a bf16 ulp; the whole against central differences of a long
 * double evaluation of the exact pre-layer (no roundings, bf16-exact weights) is within 2^-6 in the 2-norm
 * of each gradient on uniform fills (the bf16 roundings of en, hn, dep, den, dhn, de and of the bf16 outputs,
 * 2^-9 relative each on average; 2^-7.7 measured at T=4, N=2, D=8).
 * Batch invariance: dh's row t depends only on h[t] and dx[t] (the h path never meets the ids; the dgrads and
 * rmsnorm_bwd are per row); dtable, dnorm and dproj sum over the tokens (not row outputs).
 * Not read: MTP_SHIFT (positions only), MATMUL_OUT (fixed bf16), MATMUL_IMPL (no projection is recomputed;
 * matmul_bwd runs its portable order and reads no engine: the backward refuses nothing the forward's engine
 * choice would), EMBED_SCALE (the embedding runs unscaled).
 */
#ifndef ALIGN_MTP_BWD_H
#define ALIGN_MTP_BWD_H

#include "embedding_bwd.h"
#include "matmul_bwd.h"
#include "mtp.h"
#include "nan_host.h"
#include "rmsnorm_bwd.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mtp_bwd_cfg {
	struct mtp_cfg f;      /* T, S, V, N, D, combine (MTP_COMBINE) */
	struct align_modes mm; /* the modes matmul_bwd runs with: the caller's, MATMUL_OUT=bf16 */
	int tab_dtype;	       /* dtable (EMBED_BWD_DTYPE) */
	int dw_dtype;	       /* dnorm (RMSNORM_BWD_DW_DTYPE) */
	int w_dtype;	       /* dproj and main_grad (WGRAD_DTYPE) */
};

/* Check the tensors (data may be NULL) and every sub-op's configuration for device, so that a value one of
 * them refuses (RMSNORM_BWD_DW_ORDER=torch outside its shapes, a GPU-only value on the CPU) fails before
 * anything runs: ALIGN_ERR_INPUT, ALIGN_ERR_UNSUPPORTED or ALIGN_ERR_INTERNAL, the message to err. */
int mtp_bwd_cfg_init(struct mtp_bwd_cfg *c, const struct mtp_params *p, const struct align_modes *m,
		     const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		     struct align_err *err);

/* mtp_bwd's element steps, one index i each */
enum mtp_bwd_kind {
	MTPB_K_SUMN, /* i < rows*n: bf16 out[r*ldo + offo + j] = R(sum over s < N of F(a[(r*N + s)*lda + offa + j])) */
	MTPB_K_COPY, /* i < rows*n: out[r*ldo + offo + j] = a[r*lda + offa + j], esize bytes (2 or 4) */
};

struct mtp_bwd_kargs {
	const void *a;
	void *out;
	int64_t rows, n, lda, offa, ldo, offo, N;
	int esize;
};

ALIGN_HD static inline void mtp_bwd_elem(int k, const struct mtp_bwd_kargs *a, int64_t i)
{
	int64_t r = i / a->n, j = i - r * a->n, o = r * a->ldo + a->offo + j;
	if (k == MTPB_K_SUMN) {
		const align_bf16 *x = (const align_bf16 *)a->a + r * a->N * a->lda + a->offa + j;
		float acc = align_bf16_to_f32(x[0]);
		for (int64_t s = 1; s < a->N; s++)
			acc = hn_add(acc, align_bf16_to_f32(x[s * a->lda]));
		((align_bf16 *)a->out)[o] = align_f32_to_bf16(acc);
	} else if (k == MTPB_K_COPY) {
		int64_t src = r * a->lda + a->offa + j;
		if (a->esize == 2)
			((uint16_t *)a->out)[o] = ((const uint16_t *)a->a)[src];
		else
			((uint32_t *)a->out)[o] = ((const uint32_t *)a->a)[src];
	}
}

int mtp_bwd_fwd_cpu(const struct mtp_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		    struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MTP_BWD_H */
