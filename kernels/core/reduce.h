/* reduce.h: named, documented summation orders over binary32 arrays, shared by the C twins and
 * the CUDA twins (`ALIGN_HD static inline`), so that one CUDA thread can follow exactly the
 * order its C twin follows.
 *
 * Every function sums e(i) for i = 0..n-1 where e(i) = x[i*stride] (square == 0) or
 * x[i*stride] * x[i*stride] rounded to binary32 (square != 0; in ALIGN_REDUCE_F64 the square is
 * formed in binary64, where it is exact). All additions are binary32 round-to-nearest-even
 * unless stated. An empty sum is +0. Addition is commutative in IEEE arithmetic, so "a + b" and
 * "b + a" give the same bits (NaN payload propagation aside); association is what each order fixes.
 *
 *   SEQ       ((e0 + e1) + e2) + ... : left to right, starting from e0.
 *   PAIRWISE  sum(0..n) = sum(0..m) + sum(m..n) with m the largest power of two strictly below n
 *             (n >= 2); sum of one element is that element. Equivalently: bottom-up adjacent
 *             pairs level by level, an odd last element carried up unchanged. Computed with a
 *             binary-counter stack (no recursion, 64 slots).
 *   CHUNKED   partial_j = SEQ over elements [j*K, min(n, (j+1)*K)), then SEQ over the partials in
 *             increasing j ("split-K in chunks of K", then a sequential fix-up).
 *   WARP32    32 lanes: lane l starts at +0 and adds e(l), e(l+32), e(l+64), ... in order; then a
 *             xor butterfly: for off = 16, 8, 4, 2, 1: v[l] = v[l] + v[l ^ off] (all lanes at
 *             once, like __shfl_xor_sync); the result is lane 0 (all lanes hold the same bits).
 *             Because lanes start at +0, a lane holding only -0 turns into +0.
 *   F64       binary64 accumulator, SEQ order starting from e0, rounded once to binary32 at the
 *             end. For n < 2^29 terms of equal sign this is the correctly rounded sum up to a
 *             double rounding; in general |err| <= 2^-24 |sum| + n 2^-53 sum|e_i|.
 *
 * Error of the binary32 orders vs the exact sum (standard bounds, u = 2^-24):
 *   SEQ: (n-1) u sum|e_i|; PAIRWISE: ceil(log2 n) u sum|e_i|; CHUNKED: (K-1 + n/K) u sum|e_i|;
 *   WARP32: (ceil(n/32) + 5) u sum|e_i| (first-order terms; products add 1 u each when squared).
 */
#ifndef ALIGN_REDUCE_H
#define ALIGN_REDUCE_H

#include "nan_host.h"
#include "numerics.h"

enum align_reduce_order {
	ALIGN_REDUCE_SEQ,
	ALIGN_REDUCE_PAIRWISE,
	ALIGN_REDUCE_CHUNKED,
	ALIGN_REDUCE_WARP32,
	ALIGN_REDUCE_F64,
	ALIGN_REDUCE_TORCH, /* not an order of this header: torch_order.h torch_rowsum, which needs the row count and
			    * the row index; align_reduce answers a quiet NaN for it, so a caller that forgets shows */
};

/* Each order is written once with a flag hn: 0 = the plain operators (every caller but the ones below),
 * 1 = nan_host.h's hn_add / hn_mul (/ hn_f2d, hn_addd, hn_muld, hn_d2f for F64), so that on the device a
 * NaN sum carries the bits the host's written-order evaluation gives (align_reduce_hn). On the host hn_*
 * are the plain operators, so both forms give the same bits there; the flag is a constant at every call,
 * and the plain form compiles to the code it always was. */
ALIGN_HD static inline float align__reduce_elt(const float *x, int64_t i, int64_t stride, int square, int hn)
{
	float v = x[i * stride];
	return square ? (hn ? hn_mul(v, v) : v * v) : v;
}

ALIGN_HD static inline float align__radd(float a, float b, int hn)
{
	return hn ? hn_add(a, b) : a + b;
}

ALIGN_HD static inline float align__reduce_seq(const float *x, int64_t n, int64_t stride, int square, int hn)
{
	if (n <= 0)
		return 0.0f;
	float s = align__reduce_elt(x, 0, stride, square, hn);
	for (int64_t i = 1; i < n; i++)
		s = align__radd(s, align__reduce_elt(x, i, stride, square, hn), hn);
	return s;
}

ALIGN_HD static inline float align__reduce_pairwise(const float *x, int64_t n, int64_t stride, int square, int hn)
{
	float val[64];
	int64_t cnt[64]; /* number of elements summed in each stack slot: a power of two */
	int top = 0;
	if (n <= 0)
		return 0.0f;
	for (int64_t i = 0; i < n; i++) {
		float v = align__reduce_elt(x, i, stride, square, hn);
		int64_t c = 1;
		while (top > 0 && cnt[top - 1] == c) {
			v = align__radd(val[top - 1], v, hn);
			c *= 2;
			top--;
		}
		val[top] = v;
		cnt[top] = c;
		top++;
	}
	/* remaining slots hold blocks of decreasing size: fold from the right */
	float s = val[top - 1];
	for (int j = top - 2; j >= 0; j--)
		s = align__radd(val[j], s, hn);
	return s;
}

ALIGN_HD static inline float align__reduce_chunked(const float *x, int64_t n, int64_t stride, int64_t chunk, int square,
						   int hn)
{
	if (n <= 0)
		return 0.0f;
	if (chunk <= 0)
		chunk = n;
	float total = 0.0f;
	for (int64_t j0 = 0; j0 < n; j0 += chunk) {
		int64_t len = n - j0 < chunk ? n - j0 : chunk;
		float part = align__reduce_seq(x + j0 * stride, len, stride, square, hn);
		total = j0 == 0 ? part : align__radd(total, part, hn);
	}
	return total;
}

ALIGN_HD static inline float align__reduce_warp32(const float *x, int64_t n, int64_t stride, int square, int hn)
{
	float v[32];
	for (int l = 0; l < 32; l++) {
		float s = 0.0f;
		for (int64_t i = l; i < n; i += 32)
			s = align__radd(s, align__reduce_elt(x, i, stride, square, hn), hn);
		v[l] = s;
	}
	for (int off = 16; off >= 1; off /= 2)
		for (int l = 0; l < off; l++)
			v[l] = align__radd(v[l], v[l + off], hn); /* lanes l and l^off hold equal bits afterwards */
	return v[0];
}

ALIGN_HD static inline float align__reduce_f64(const float *x, int64_t n, int64_t stride, int square, int hn)
{
	if (n <= 0)
		return 0.0f;
	double v0 = hn ? hn_f2d(x[0]) : (double)x[0];
	double s = square ? (hn ? hn_muld(v0, v0) : v0 * v0) : v0;
	for (int64_t i = 1; i < n; i++) {
		double v = hn ? hn_f2d(x[i * stride]) : (double)x[i * stride];
		double e = square ? (hn ? hn_muld(v, v) : v * v) : v;
		s = hn ? hn_addd(s, e) : s + e;
	}
	return hn ? hn_d2f(s) : (float)s;
}

ALIGN_HD static inline float align__reduce(enum align_reduce_order order, const float *x, int64_t n, int64_t stride,
					   int64_t chunk, int square, int hn)
{
	switch (order) {
	case ALIGN_REDUCE_PAIRWISE:
		return align__reduce_pairwise(x, n, stride, square, hn);
	case ALIGN_REDUCE_CHUNKED:
		return align__reduce_chunked(x, n, stride, chunk, square, hn);
	case ALIGN_REDUCE_WARP32:
		return align__reduce_warp32(x, n, stride, square, hn);
	case ALIGN_REDUCE_F64:
		return align__reduce_f64(x, n, stride, square, hn);
	case ALIGN_REDUCE_TORCH:
		return align_bits_f32(0x7fc00000u); /* torch_rowsum's (torch_order.h): never reached here */
	case ALIGN_REDUCE_SEQ:
	default:
		return align__reduce_seq(x, n, stride, square, hn);
	}
}

ALIGN_HD static inline float align_reduce_seq(const float *x, int64_t n, int64_t stride, int square)
{
	return align__reduce_seq(x, n, stride, square, 0);
}

ALIGN_HD static inline float align_reduce_pairwise(const float *x, int64_t n, int64_t stride, int square)
{
	return align__reduce_pairwise(x, n, stride, square, 0);
}

ALIGN_HD static inline float align_reduce_chunked(const float *x, int64_t n, int64_t stride, int64_t chunk, int square)
{
	return align__reduce_chunked(x, n, stride, chunk, square, 0);
}

ALIGN_HD static inline float align_reduce_warp32(const float *x, int64_t n, int64_t stride, int square)
{
	return align__reduce_warp32(x, n, stride, square, 0);
}

ALIGN_HD static inline float align_reduce_f64(const float *x, int64_t n, int64_t stride, int square)
{
	return align__reduce_f64(x, n, stride, square, 0);
}

/* Dispatch by order; `chunk` is used by ALIGN_REDUCE_CHUNKED only. */
ALIGN_HD static inline float align_reduce(enum align_reduce_order order, const float *x, int64_t n, int64_t stride,
					  int64_t chunk, int square)
{
	return align__reduce(order, x, n, stride, chunk, square, 0);
}

/* The same sum with nan_host.h's operators: on the device, a NaN result has the host's bits (serial
 * reference kernels call it, or recompute with it a sum that came out NaN); on the host = align_reduce. */
ALIGN_HD static inline float align_reduce_hn(enum align_reduce_order order, const float *x, int64_t n, int64_t stride,
					     int64_t chunk, int square)
{
	return align__reduce(order, x, n, stride, chunk, square, 1);
}

#endif /* ALIGN_REDUCE_H */
