/* xent.h: cross-entropy over the vocabulary with a stated reduction order (the LM loss and the MTP loss;
 * MCore `vocab_parallel_cross_entropy` at TP 1, torch `F.cross_entropy`, PaddleFleet `cross_entropy`).
 * logits[T,V] (f32, or bf16 per LMHEAD_LOGITS, widened exactly), labels[T] i32 (label < 0: ignored token,
 * torch's ignore_index / MCore's loss mask 0) -> loss[T] f32 (0 for ignored tokens), lse[T] f32
 * (logsumexp, saved for a backward), mean[1] f32 (the token mean of loss over the valid tokens).
 * Tokens are batch-first rows: t = b*S + s, S the sequence length (dim S; T must be a multiple of S).
 *
 * Operation order per row (CPU twin = specification), x_v = F(logit) in binary32:
 *   1. m = max_v x_v. A row with a NaN logit or a non-finite m (an +inf logit, or every logit -inf) gives
 *      lse = canonical NaN and loss = canonical NaN (0 when ignored); steps 2-5 are skipped.
 *   2. e_v = exp(x_v - m)   (binary32 subtract; exp per MATH_IMPL: portable align_expf, libm expf,
 *                            cuda expf / cuda_fast __expf on the GPU only)
 *   3. s = sum of e_v in the XENT_SUM order (reduce.h / torch_order.h):
 *        seq      left to right from e_0;   pairwise  reduce.h PAIRWISE;   warp32  reduce.h WARP32;
 *        torch    torch_softmax_sum: PyTorch's persistent log_softmax kernel (W = min(next_pow2(V), 32)
 *                 lanes, lane l sums e_l, e_{l+W}, ... from +0, then an xor butterfly), V <= 1024 only
 *                 (status 4 above: PyTorch switches to its block kernel there, not modelled).
 *   4. l = log(s)           (portable align_logf; libm logf; cuda logf / cuda_fast __logf)
 *   5. lse = m + l; loss = l - (x_y - m) (XENT_FORM=shifted: MCore's log(sum_exp) - predicted logit, and
 *      torch's -((x_y - m) - l), the same bits) or (m + l) - x_y (lse), y = labels[t]; ignored: 0.
 * Mean (one binary32 accumulator from +0, NaN bits as the host's; count = valid tokens, exact in fp32):
 *   token      t = 0, 1, ..., T-1 (batch-first order, [b,s]);
 *   seq_first  s = 0..S-1, b = 0..B-1, t = b*S + s (sequence-first order, MCore's [s,b] layout);
 *   torch32    torch nll_loss's mean on CUDA: n = clamp(1 << round(log2(T / 16)), 32, 1024) lanes from +0,
 *              lane i adds the tokens i, i+n, ...; then a halving tree lane[i] += lane[i + s], s = n/2 .. 1
 *              (the counts alike), mean = lane[0] / count[0] (read from ATen's LossNLL.cu; the earlier
 *              model, 32 lanes summed in order, was 1 ulp off PyTorch in 3 of 4 cases on an H100);
 *   then mean = sum / (float)count (0 valid tokens: 0 / 0, NaN, as torch).
 * Error bound vs the fp64 evaluation (same logits, exact exp and log), u = 2^-24: each e_v within u, the
 * sum within (V-1) u relative (seq; the other orders less), so log(s) within (V+1) u absolute, plus one
 * rounding each for x_y - m, log, the add and the subtract: |loss - ref| <= (V + 4) u + 4 u (|m| + |l| +
 * |x_y|) in every form (MATH_IMPL=libm: glibc's expf and logf are within 1 ulp, twice that); lse alike; mean: relative (T + 1) u of sum|loss| / count.
 * Checked by test-ops-ref-model.c. Rows are independent (loss and lse are batch invariant); the mean
 * follows the stated order, so it is deterministic and independent of the launch.
 * Config: xent_cfg_init (xent.c) checks the tensors and decodes every mode; both twins read the cfg.
 */
#ifndef ALIGN_XENT_H
#define ALIGN_XENT_H

#include <stdint.h>

#include "nan_host.h"
#include "reduce.h"
#include "torch_order.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "modes.h"

struct align_tensor;
struct align_err;

#define XENT_TORCH_MAX_V 1024 /* XENT_SUM=torch: PyTorch's persistent log_softmax limit */

struct xent_params {
	int64_t S; /* tokens per sequence (dims S by default); 0 = T (one sequence) */
};

/* what both twins run */
struct xent_cfg {
	int64_t T, V, S; /* logits [T,V], labels/loss/lse [T]; S tokens per sequence */
	int bf16;	 /* logits are bf16 */
	int sum;	 /* XENT_SUM value (ALIGN_XENT_SUM_*) */
	int lse;	 /* XENT_FORM=lse */
	int mean;	 /* XENT_MEAN value (ALIGN_XENT_MEAN_*) */
	int math;	 /* MATH_IMPL value */
};

int xent_cfg_init(struct xent_cfg *c, const struct xent_params *p, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		  struct align_err *err);

ALIGN_HD static inline float xent_ld(const void *row, int bf16, int64_t v)
{
	return bf16 ? align_bf16_to_f32(((const align_bf16 *)row)[v]) : ((const float *)row)[v];
}

ALIGN_HD static inline float xent_expf(int math, float x)
{
#ifdef __CUDA_ARCH__
	if (math == ALIGN_MATH_IMPL_CUDA)
		return expf(x);
	if (math == ALIGN_MATH_IMPL_CUDA_FAST)
		return __expf(x);
#else
	if (math == ALIGN_MATH_IMPL_LIBM)
		return expf(x);
#endif
	return align_expf(x);
}

ALIGN_HD static inline float xent_logf(int math, float x)
{
#ifdef __CUDA_ARCH__
	if (math == ALIGN_MATH_IMPL_CUDA)
		return logf(x);
	if (math == ALIGN_MATH_IMPL_CUDA_FAST)
		return __logf(x);
#else
	if (math == ALIGN_MATH_IMPL_LIBM)
		return logf(x);
#endif
	return align_logf(x);
}

/* steps 1-5 for one row (row: V logits of the cfg's dtype; e: V floats of scratch) */
ALIGN_HD static inline void xent_row(const struct xent_cfg *c, const void *row, int32_t label, float *e, float *loss,
				     float *lse)
{
	const int64_t V = c->V;
	float m = xent_ld(row, c->bf16, 0);
	int bad = align_isnanf(m);
	for (int64_t v = 1; v < V; v++) {
		float x = xent_ld(row, c->bf16, v);
		bad |= align_isnanf(x);
		m = x > m ? x : m;
	}
	if (bad || !(m > -INFINITY && m < INFINITY)) {
		*lse = align_canonical_nanf();
		*loss = label < 0 ? 0.0f : align_canonical_nanf();
		return;
	}
	for (int64_t v = 0; v < V; v++)
		e[v] = xent_expf(c->math, xent_ld(row, c->bf16, v) - m);
	float s = c->sum == ALIGN_XENT_SUM_PAIRWISE ? align_reduce_pairwise(e, V, 1, 0)
		  : c->sum == ALIGN_XENT_SUM_WARP32 ? align_reduce_warp32(e, V, 1, 0)
		  : c->sum == ALIGN_XENT_SUM_TORCH  ? torch_softmax_sum(e, 1, V)
						    : align_reduce_seq(e, V, 1, 0);
	float l = xent_logf(c->math, s);
	*lse = m + l;
	if (label < 0) {
		*loss = 0.0f;
		return;
	}
	float xl = xent_ld(row, c->bf16, label);
	*loss = c->lse ? (m + l) - xl : l - (xl - m);
}

/* the mean of loss over the tokens whose label is >= 0, in the cfg's order */
ALIGN_HD static inline float xent_mean(const struct xent_cfg *c, const float *loss, const int32_t *labels)
{
	float acc = 0.0f, count = 0.0f;
	if (c->mean == ALIGN_XENT_MEAN_TORCH32) {
		/* nll_loss's CUDA mean (ATen LossNLL.cu, nll_loss_forward_reduce_cuda_kernel_2d): one block of
		 * n = clamp(1 << round(log2(T / 16)), 32, 1024) threads (T / 16 in integers), thread i sums the
		 * tokens i, i + n, ... (the loss as 0 - logprob - ...: the same binary32 sums), then a
		 * shared-memory halving tree (lane[i] += lane[i + s], s = n/2 .. 1) for the loss and the count,
		 * and lane[0] / count[0]. round(log2 q) = k when 2^(2k-1) <= q^2 < 2^(2k+1) (integers, exact). */
		int64_t q = c->T / 16, n = 32;
		if (q > 0) {
			int k = 0;
			while (((int64_t)1 << (k + 1)) <= q)
				k++;
			if ((double)q * (double)q >= (double)((int64_t)1 << (2 * k + 1)))
				k++;
			n = k <= 5 ? 32 : k >= 10 ? 1024 : (int64_t)1 << k;
		}
		float lane[1024], cnt[1024];
		for (int64_t i = 0; i < n; i++) {
			lane[i] = 0.0f, cnt[i] = 0.0f;
			for (int64_t t = i; t < c->T; t += n)
				if (labels[t] >= 0) {
					lane[i] = hn_add(lane[i], loss[t]);
					cnt[i] = cnt[i] + 1.0f;
				}
		}
		for (int64_t st = n / 2; st > 0; st >>= 1)
			for (int64_t i = 0; i < st; i++) {
				lane[i] = hn_add(lane[i], lane[i + st]);
				cnt[i] = cnt[i] + cnt[i + st];
			}
		return hn_div(lane[0], cnt[0]);
	}
	const int64_t S = c->S, B = c->T / c->S;
	for (int64_t k = 0; k < c->T; k++) {
		int64_t t = c->mean == ALIGN_XENT_MEAN_SEQ_FIRST ? (k % B) * S + k / B : k;
		if (labels[t] >= 0) {
			acc = hn_add(acc, loss[t]);
			count = count + 1.0f;
		}
	}
	return hn_div(acc, count);
}

int xent_fwd_cpu(const struct xent_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		 struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_XENT_H */
