/* sparse_mla_row.h: the steps of sparse_mla.h's contract as ALIGN_HD code, run by the C twin (sparse_mla.c) for
 * every row and by the CUDA twin's serial path; the CUDA twin's parallel kernel splits the same loops over threads
 * (slots, d) and must give these bits. Reuses sparse_attn_row.h (dot products, E, max, P rounding). Include after
 * sparse_mla.h; CUDA includes math_cuda.cuh first. */
#ifndef ALIGN_SPARSE_MLA_ROW_H
#define ALIGN_SPARSE_MLA_ROW_H

#include "sparse_attn_row.h"
#include "sparse_mla.h"

/* the slots of query row idx (N entries) into list; returns their count */
ALIGN_HD static inline int64_t sparse_mla_slots(const struct sparse_mla_cfg *c, const int32_t *idx, int32_t *list)
{
	if (c->gather) {
		for (int64_t k = 0; k < c->N; k++)
			list[k] = idx[k];
		return c->N;
	}
	int64_t n = 0;
	for (int64_t k = 0; k < c->N; k++) { /* insertion into the ascending list of distinct valid rows */
		int32_t j = idx[k];
		if (!sa_valid(&c->sa, j))
			continue;
		int64_t i = n;
		while (i > 0 && list[i - 1] > j)
			i--;
		if (i > 0 && list[i - 1] == j)
			continue;
		for (int64_t u = n; u > i; u--)
			list[u] = list[u - 1];
		list[i] = j;
		n++;
	}
	if (n == 0 && c->N > 0)
		list[n++] = -1; /* the all -inf row */
	return n;
}

/* the logit of kv row j (valid) for query row q */
ALIGN_HD static inline float sparse_mla_logit(const struct sparse_mla_cfg *c, const align_bf16 *q, const align_bf16 *kv,
					      int32_t j)
{
	const align_bf16 *r = kv + (int64_t)j * c->D;
	float dot = c->qk == SPARSE_MLA_QK_SPLIT
			    ? hn_add(sa_dot(&c->lat, q, r, NULL), sa_dot(&c->pe, q + c->F, r + c->F, NULL))
			    : sa_dot(&c->sa, q, r, NULL);
	return sa_logit(&c->sa, dot, 1);
}

ALIGN_HD static inline float sparse_mla_v(const struct sparse_mla_cfg *c, const align_bf16 *kv, int32_t j, int64_t d)
{
	return sa_valid(&c->sa, j) ? align_bf16_to_f32(kv[(int64_t)j * c->D + d]) : 0.0f;
}

/* one (t, h) row: q (D), idx row (N) -> o (F). z, e, list: N each; acc: F */
ALIGN_HD static inline void sparse_mla_row(const struct sparse_mla_cfg *c, const align_bf16 *q, const align_bf16 *kv,
					   const int32_t *idx, align_bf16 *o, float *z, float *e, int32_t *list,
					   float *acc)
{
	const int64_t n = sparse_mla_slots(c, idx, list), F = c->F;
	int any = 0;
	for (int64_t k = 0; k < n; k++) {
		int v = sa_valid(&c->sa, list[k]);
		any |= v;
		z[k] = v ? sparse_mla_logit(c, q, kv, list[k]) : -INFINITY;
	}
	if (!any && c->empty_zero) {
		for (int64_t d = 0; d < F; d++)
			o[d] = align_f32_to_bf16(0.0f);
		return;
	}
	float m = -INFINITY, l = 0.0f;
	if (!c->block) {
		for (int64_t k = 0; k < n; k++)
			m = sa_max(m, z[k]);
		for (int64_t k = 0; k < n; k++)
			e[k] = sa_e(&c->sa, hn_sub(z[k], m));
		for (int64_t k = 0; k < n; k++)
			l = hn_add(l, e[k]);
		for (int64_t k = 0; k < n; k++)
			e[k] = sa_p(&c->sa, hn_div(e[k], l));
		for (int64_t d = 0; d < F; d++) {
			float a = 0.0f;
			for (int64_t k = 0; k < n; k++)
				a = hn_add(a, hn_mul(e[k], sparse_mla_v(c, kv, list[k], d)));
			o[d] = align_f32_to_bf16(a);
		}
		return;
	}
	for (int64_t d = 0; d < F; d++)
		acc[d] = 0.0f;
	for (int64_t k0 = 0; k0 < n; k0 += c->block) {
		int64_t k1 = k0 + c->block < n ? k0 + c->block : n;
		float m2 = m;
		for (int64_t k = k0; k < k1; k++)
			m2 = sa_max(m2, z[k]);
		float a = sa_e(&c->sa, hn_sub(m, m2)), bs = 0.0f;
		for (int64_t k = k0; k < k1; k++) {
			e[k] = sa_e(&c->sa, hn_sub(z[k], m2));
			bs = hn_add(bs, e[k]);
		}
		l = hn_add(hn_mul(l, a), bs);
		for (int64_t d = 0; d < F; d++) {
			float x = hn_mul(acc[d], a);
			for (int64_t k = k0; k < k1; k++)
				x = hn_add(x, hn_mul(sa_p(&c->sa, e[k]), sparse_mla_v(c, kv, list[k], d)));
			acc[d] = x;
		}
		m = m2;
	}
	for (int64_t d = 0; d < F; d++)
		o[d] = align_f32_to_bf16(hn_div(acc[d], l));
}

#endif /* ALIGN_SPARSE_MLA_ROW_H */
