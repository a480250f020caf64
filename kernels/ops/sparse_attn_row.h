/* sparse_attn_row.h: the scalar steps of sparse_attn.h's contract, shared by the C twin (sparse_attn.c)
 * and the CUDA twin (sparse_attn.cu) so that both evaluate the very same binary32 / binary64 operations:
 * the q.kv dot product (CSA_QK, CSA_SUM_ORDER), E(x) per CSA_EXP and MATH_IMPL, the NaN-keeping max.
 * Every binary32 operation goes through nan_host.h (host NaN bits on the device). Include after
 * sparse_attn.h; CUDA includes math_cuda.cuh first (MATH_IMPL=cuda / cuda_fast). */
#ifndef ALIGN_SPARSE_ATTN_ROW_H
#define ALIGN_SPARSE_ATTN_ROW_H

#include <math.h>

#include "modes.h"
#include "nan_host.h"
#include "numerics.h"
#include "sparse_attn.h"
#include "torch_order.h"

#ifdef __CUDACC__
#define SA_EXPF(math, x) dm_expf(math, x)
#define SA_EXP2F(math, x) dm_exp2f(math, x)
#else
/* CPU: portable, or glibc (MATH_IMPL=libm) */
static inline float sa_cpu_expf(int math, float x)
{
	return math == ALIGN_MATH_IMPL_LIBM ? expf(x) : align_expf(x);
}
static inline float sa_cpu_exp2f(int math, float x)
{
	return math == ALIGN_MATH_IMPL_LIBM ? exp2f(x) : align_exp2f(x);
}
#define SA_EXPF(math, x) sa_cpu_expf(math, x)
#define SA_EXP2F(math, x) sa_cpu_exp2f(math, x)
#endif

/* visiting position k -> slot (CSA_INDEX_ORDER) */
ALIGN_HD static inline int64_t sa_slot(const struct sparse_attn_cfg *c, int64_t k)
{
	if (!c->comp_first)
		return k;
	return k < c->N - c->W ? c->W + k : k - (c->N - c->W);
}

/* E(x): exp or exp2 (CSA_EXP) */
ALIGN_HD static inline float sa_e(const struct sparse_attn_cfg *c, float x)
{
	return c->exp2 ? SA_EXP2F(c->math, x) : SA_EXPF(c->math, x);
}

/* max in visiting order: a NaN operand is taken and kept */
ALIGN_HD static inline float sa_max(float m, float z)
{
	return align_isnanf(m) ? m : (align_isnanf(z) || z > m) ? z : m;
}

ALIGN_HD static inline int sa_valid(const struct sparse_attn_cfg *c, int32_t j)
{
	return j >= 0 && (int64_t)j < c->S;
}

/* q.kv for one slot (q, kv: D bf16 each); tmp: D floats for the torch order */
ALIGN_HD static inline float sa_dot(const struct sparse_attn_cfg *c, const align_bf16 *q, const align_bf16 *kv,
				    float *tmp)
{
	const int64_t D = c->D;
	float acc = 0.0f;
	if (c->qk_tc) {
		for (int64_t d0 = 0; d0 < D; d0 += 16) {
			double s = 0.0;
			for (int64_t d = d0; d < D && d < d0 + 16; d++)
				s = hn_addd(s,
					    hn_muld(hn_f2d(align_bf16_to_f32(q[d])), hn_f2d(align_bf16_to_f32(kv[d]))));
			acc = hn_add(acc, hn_d2f(s));
		}
		return acc;
	}
	if (c->torch_sums) {
		for (int64_t d = 0; d < D; d++)
			tmp[d] = hn_mul(align_bf16_to_f32(q[d]), align_bf16_to_f32(kv[d]));
		return torch_sum_lastdim(tmp, 1, D);
	}
	for (int64_t d = 0; d < D; d++)
		acc = hn_add(acc, hn_mul(align_bf16_to_f32(q[d]), align_bf16_to_f32(kv[d])));
	return acc;
}

/* the logit of a slot: dot * c, or -inf for an invalid slot */
ALIGN_HD static inline float sa_logit(const struct sparse_attn_cfg *c, float dot, int valid)
{
	return valid ? hn_mul(dot, c->c) : -INFINITY;
}

/* the sink in the logit domain */
ALIGN_HD static inline float sa_sink(const struct sparse_attn_cfg *c, float sink)
{
	float s = c->sink_bf16 ? align_round_bf16(sink) : sink;
	return c->exp2 ? hn_mul(s, ALIGN_LOG2E_F) : s;
}

ALIGN_HD static inline float sa_p(const struct sparse_attn_cfg *c, float p)
{
	return c->p_bf16 ? align_round_bf16(p) : p;
}

#endif /* ALIGN_SPARSE_ATTN_ROW_H */
