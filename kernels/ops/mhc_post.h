/* mhc_post.h: mHC hc_post, the residual update (specs/dsv4-numerics.md 6.5).
 * x[T,N,D] bf16 (streams), f[T,D] bf16 (sublayer output), post[T,N] f32, comb[T,N,N] f32
 * (from hc_pre, rows = source stream) -> x_new[T,N,D] bf16.
 *
 * Operation order per (t, k, d) (CPU twin = specification), X_j = F(x[t,j,d]), fo = F(f[t,d]):
 *   H(j,k) = comb[j][k] (MHC_HRES_TRANSPOSE=on: H_res^T X, DS semantics) or comb[k][j] (off).
 *   MHC_POST_ROUND=single, coefficients c' = c or F(R(c)) (MHC_COEF=bf16):
 *     comb_first: a = sum_j H'(j,k) * X_j (left to right from j = 0); out = R(a + post'_k * fo)
 *     post_first: a = post'_k * fo; a = a + H'(j,k) * X_j for j = 0..N-1; out = R(a)
 *   MHC_POST_ROUND=double (MCore: bf16 bmm, bf16 h_post; coefficients always bf16-rounded):
 *     mixed = R(sum_j F(R(H(j,k))) * X_j); pf = R(F(R(post_k)) * fo); out = R(F(pf) + F(mixed))
 * Error bound vs fp64 of the same formula (same coefficient rounding): single 1 bf16 ulp of the
 * reference + (N+1) 2^-24 S; double 2^-8 (|mixed| + |pf|) + 1 bf16 ulp + (N+1) 2^-24 S, with
 * S = sum |terms|. Tokens are independent. N <= MHC_MAX_N.
 * Config: mhc_post_cfg_init (mhc_post.c) checks the tensors and decodes every mode once into struct
 * mhc_post_cfg; both twins call it first and read only the cfg.
 */
#ifndef ALIGN_MHC_POST_H
#define ALIGN_MHC_POST_H

#include <stdint.h>

#include "mhc_pre.h"

#ifdef __cplusplus
extern "C" {
#endif

struct align_err;

/* what both twins run: the dims and every decoded choice */
struct mhc_post_cfg {
	int64_t T, D;	/* x, x_new [T,N,D]; f [T,D]; post [T,N]; comb [T,N,N] */
	int N;		/* streams */
	int transpose;	/* MHC_HRES_TRANSPOSE=on: H[j][k] = comb[j][k] */
	int dbl;	/* MHC_POST_ROUND=double */
	int coef_bf16;	/* coefficients rounded to bf16: MHC_COEF=bf16 or MHC_POST_ROUND=double */
	int post_first; /* MHC_POST_ORDER=post_first */
};

/* Check in/out (data may be NULL) and decode the modes for device (enum align_device). ALIGN_ERR_INPUT
 * for a bad tensor or N > MHC_MAX_N, ALIGN_ERR_UNSUPPORTED for a value device cannot run,
 * ALIGN_ERR_INTERNAL for a value modes.def has but this function does not handle; the message goes to
 * err (NULL: stderr). */
int mhc_post_cfg_init(struct mhc_post_cfg *c, const struct mhc_params *p, const struct align_modes *m,
		      const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		      struct align_err *err);

int mhc_post_fwd_cpu(const struct mhc_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		     struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_MHC_POST_H */
