/* router.h: DSv4 MoE gate (specs/dsv4-numerics.md 7.1, 7.2).
 * x[T,D] bf16, w[E,D] f32 (gate weight), bias[E] f32 (selection-only correction bias),
 * ids[T] i32 (token ids, hash layers), tid2eid[V,K] i32 (hash table) -> idx[T,K] i32, wt[T,K] f32.
 *
 * Operation order per token (CPU twin = specification):
 *   1. logits l_e = matmul_dot(F(x), w'_e, D, seq, no FMA) (matmul.h), where per ROUTER_GEMM
 *      w' = w (fp32), F(R(w)) (bf16w), or x and w TF32-rounded (tf32).
 *   2. scores s_e (params.score):
 *        sqrtsoftplus: sqrtf(softplus(l)) or sqrtf(softplus(l) + 1e-20f) (ROUTER_SQRTSOFTPLUS_EPS)
 *        sigmoid:      sigmoid(l)
 *        softmax:      m = max l; e = exp(l - m); Z = seq sum over e ascending; s = e / Z
 *      softplus/sigmoid/exp per MATH_IMPL (ops.h).
 *   3. hash layer (params.hash): experts = tid2eid[ids[t]] (ROUTER_HASH_TABLE=table) or
 *      (ids[t] + j) mod E (placeholder), j = 0..K-1; skip 4-5.
 *   4. selection score b_e = s_e + bias_e. Groups (params.n_groups > 1): group g holds experts
 *      [g*E/G, (g+1)*E/G); its score is the seq sum of its top K/topk_groups b values (sorted
 *      descending); the topk_groups best groups are kept (ties: lower group id); experts of the
 *      other groups get b = -inf (ROUTER_GROUP_MASK=neginf) or b = b * 0.0f (zero).
 *   5. top-K of b: K passes, each taking the largest remaining b with strict '>' scanning from
 *      e = 0, so ties go to the lower expert id and NaN never wins (all-NaN: lowest free id).
 *      ROUTER_TOPK_ORDER=torch: torch_topk (torch_order.h: torch.topk(sorted=True) on CUDA, radix
 *      selection with NaN largest, 32-wide bitonic sort), also for the group step (per-group top
 *      values summed by torch_sum_lastdim, groups chosen by torch_topk).
 *   6. output order: selection order (sorted), ascending expert id (index), torch_topk's (torch).
 *   7. weights wt_j = s_{idx_j} (unbiased). Except for softmax: sum = seq sum of wt in output
 *      order (fp32), binary64 sum rounded to binary32 (ROUTER_SUM=fp64) or torch_sum_lastdim over
 *      the output order (torch); wt_j = wt_j / (sum) or wt_j / (sum + 1e-20f) (ROUTER_NORM_EPS).
 *   8. wt_j = wt_j * route_scale.
 * Error bound vs fp64 of the same contract (checked by tests/kernels/test-ops-ref2.c, every mode
 * combination incl. MATH_IMPL, 4 param variants, 3 fill sets): the selected set is a valid top-K of
 * the fp64 selection scores within 2^-16 relative (group choice likewise); weights on that set are
 * within 2^-16 relative + 2^-40 of the fp64 weights. Measured worst error/bound at T=8, D=256,
 * E=256: weights 0.33 (softmax), 0.04 (hash), 0.03 (sqrtsoftplus), 0.01 (sigmoid, groups); ids 0.
 * Domain: rows whose exact logits stay > -80 (non-softmax) and whose GEMM terms stay below FLT_MAX;
 * outside it fp32 underflow/overflow decides (not bounded). The bound is measured, not proven: the
 * worst-case GEMM error D 2^-24 sum|x w| exceeds 2^-16 relative for cancelling logits.
 * Rows are independent (batch invariance).
 * Both twins call router_cfg_init first and then read only the config (struct router_cfg).
 */
#ifndef ALIGN_ROUTER_H
#define ALIGN_ROUTER_H

#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" { /* router_cfg_init is C (libkernels) */
#endif

struct align_modes;
struct align_tensor;

#define ROUTER_MAX_K 64 /* largest K and n_groups */

enum router_score { ROUTER_SCORE_SQRTSOFTPLUS, ROUTER_SCORE_SIGMOID, ROUTER_SCORE_SOFTMAX };

struct router_params {
	int score;	   /* enum router_score */
	float route_scale; /* routed_scaling_factor: 1.5 Flash, 2.5 Pro/V3.2 */
	int n_groups;	   /* expert groups (0 or 1 = none) */
	int topk_groups;   /* groups kept */
	int hash;	   /* 1 = hash-routed layer */
};

/* The op's configuration, built once by router_cfg_init (router.c) and read by both twins: the shapes,
 * the params and the decoded modes (mode values are the generated enums of modes.def). */
struct router_cfg {
	int64_t T, D, E, V, K;	/* x[T,D], w[E,D], tid2eid[V,K], idx/wt[T,K] */
	struct router_params p; /* the op's params, checked */
	int math;		/* ALIGN_MATH_IMPL_* the twin runs (step 2) */
	int x_opd, w_opd;	/* ALIGN_MATMUL_OPERAND_* of x and w in step 1 (ROUTER_GEMM; FP32 = as is) */
	int sp_eps;		/* 1: ROUTER_SQRTSOFTPLUS_EPS=1e-20 */
	int norm_eps;		/* 1: ROUTER_NORM_EPS=1e-20 */
	int sum;		/* ALIGN_ROUTER_SUM_* */
	int topk_order;		/* ALIGN_ROUTER_TOPK_ORDER_* */
	int mask_zero;		/* 1: ROUTER_GROUP_MASK=zero */
	int placeholder;	/* 1: ROUTER_HASH_TABLE=placeholder */
};

/* Check the tensors (dtypes, shapes, K and the groups against E) and decode the modes for device
 * (enum align_device). 0, ALIGN_ERR_INPUT, ALIGN_ERR_UNSUPPORTED (MATH_IMPL=libm on the GPU, cuda and
 * cuda_fast on the CPU), ALIGN_ERR_INTERNAL (a value not handled); message in err (NULL: stderr). */
int router_cfg_init(struct router_cfg *c, const struct router_params *p, const struct align_modes *m,
		    const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		    struct align_err *err);

int router_fwd_cpu(const struct router_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		   struct align_tensor *out, int n_out);

#ifdef __cplusplus
}
#endif

#endif /* ALIGN_ROUTER_H */
