/* torch_order.h: PyTorch eager CUDA's selection and summation orders for small slices, as plain
 * sequential code shared by the C and CUDA twins (the "torch" values of ROUTER_TOPK_ORDER,
 * ROUTER_SUM, MHC_SUM_ORDER, RMSNORM_BWD_DW_ORDER and RMSNORM_REDUCE in modes.def). Integer and comparison logic plus binary32 adds in a
 * fixed association: portable, bit for bit the same on both sides.
 *
 * What each function reproduces (PyTorch 2.x ATen sources, aten/src/ATen/native/cuda; checked
 * against PyTorch 2.11 on an H100 by tests/gpu/torch-compare.py):
 *   torch_topk      torch.topk(x, k, sorted=True, largest=True) on one slice of n < 400 floats
 *                   (TensorTopK.cu sbtopk path; from 400 on with > 4000 slices PyTorch switches to
 *                   the multi-block kernel, not modelled). Selection: radix keys (radix_key: NaN
 *                   largest, -0 below +0); every element with key > the k-th key, then elements equal
 *                   to it in ascending index order until k are taken; gathered in that order
 *                   (strictly greater ones first, each group by ascending index). Sorting
 *                   (sortKeyValueInplace, stable = false): k <= 32: bitonicSortKVInPlace with 32
 *                   slots and 16 threads (SortUtils.cuh), comparator GTOp<float, true> (NaN
 *                   greater, then '>'), so equal values end in the network's order, not by index;
 *                   32 < k <= 64: a stable descending sort of the gathered order (WarpMergeSort).
 *   torch_sum_lastdim  x.sum(-1) over a contiguous slice of n < 128 floats (Reduce.cuh, vt0 = 4, no
 *                   vectorized input below 128): w = min(last_pow2(n), 32) lanes; lane l keeps 4
 *                   accumulators (+0 start) fed x[l + i w], x[l + 4w + i w], ...; the lane value is
 *                   ((a0 + a1) + a2) + a3; lanes are combined by shfl_down with decreasing offsets
 *                   w/2, ..., 1 (lane l += lane l + off).
 *   torch_sum_strided  x.sum(-2) of a [.., n, m] tensor (reduction over a non-innermost dim, n < 64):
 *                   one thread per output with 4 accumulators over k = 0, 4, 8, ... (+ i), combined
 *                   ((a0 + a1) + a2) + a3.
 *   torch_sum_cols  x.sum(0) of a contiguous [n, m] binary32 tensor, one column (autograd's sum_to of a
 *                   broadcast weight's gradient; Reduce.cuh setReduceConfig + ReduceOp::thread_reduce_impl +
 *                   block_y_reduce). The reduced dim is not the fastest, so outputs are vectorised by
 *                   v = 4, 2, 1 (the largest dividing m; fresh allocations are 16-byte aligned) and
 *                   set_block_dimension(m / v, n) with 512 / v threads gives block.y = bh; when
 *                   n >= min(16 bh, 256) the tokens are split over block.y (step bh: thread y takes
 *                   t = y, y + bh, ...), else one thread takes them all (step 1). Each thread keeps 4
 *                   accumulators (+0 start) fed its k-th token into accumulator k mod 4, combined
 *                   ((a0 + a1) + a2) + a3; the bh thread values then meet in block_y_reduce's shared-memory
 *                   tree (offsets bh/2, ..., 1: y += y + off). torch_sum_cols_step gives the step, or -1
 *                   where ATen would add a cross-CTA global_reduce (ceil(n / bh) >= 256: its split
 *                   depends on the SM count; not modelled), where the iterator drops the column dim
 *                   (m == 1, n > 1: a contiguous reduction, not modelled). Checked on an H200 up to
 *                   m = 16384 (torch-compare --probe, 2026-12-03: x.sum(0) and autograd's w.grad).
 *   torch_rowsum    x.sum(-1) / x.mean(-1) of a contiguous [rows, n] binary32 tensor in a fresh (16-byte
 *                   aligned) allocation, one row (Reduce.cuh setReduceConfig, input_vectorized_thread_reduce_impl
 *                   / thread_reduce_impl, block_x_reduce, block_y_reduce; MeanOps). torch_rowsum_plan(rows, n)
 *                   fixes the block shape from both dims, so the order of a row depends on the row count:
 *                   vec = n > 128 (float4 loads); dim0 = vec ? n / 4 : n; set_block_dimension(dim0, rows) with
 *                   512 threads: bw = min(p0, 32), bh = min(p1, 512 / bw), bw = min(p0, 512 / bh) (p0, p1 the
 *                   powers of two at or below dim0, rows, capped at 512); the row splits over block.y too (ys =
 *                   bh) when ceil(n / bw) >= min(16 bh, 256). Thread (x, y) keeps 4 accumulators from +0:
 *                   vec: an unaligned row start (the row's offset r n mod 4 = h > 0) first gives lanes h..3 of
 *                   y = 0 the head elements x - h into acc 0; then vectors v = x + y bw, + bw ys, ... of the
 *                   aligned part (elements 4 v + i into acc i) while complete; then the tail elements into acc 0
 *                   of lanes 0.. of y = 0; scalar: elements x + y bw + k bw ys, the k-th into acc k mod 4. The
 *                   thread value is ((a0 + a1) + a2) + a3; block_x_reduce first, per row of threads (shared
 *                   tree bw/2 .. 32 when bw > 32, then shfl_down with decreasing offsets (16 or bw/2) .. 1:
 *                   CUDA's order since PyTorch 2.9, "to match Triton"), then block_y_reduce of the ys row
 *                   sums in a shared-memory tree (offsets ys/2 .. 1). mean = sum * fl(fl(rows) / fl(rows n))
 *                   (MeanOps' factor, a multiply). Refused (plan.ok = 0): tensors past 2^31 bytes (ATen
 *                   splits the iterator for 32-bit indexing) and splits leaving >= 256 values a thread
 *                   (ATen adds a cross-CTA global reduce sized by the SM count). The y-first order failed
 *                   at the split (ys > 1) on an H200 (2026-12-03: 8 x 8192, 16 x 8200, through the fp32
 *                   weight gradient); ATen's ReduceOp::run calls block_x_reduce before block_y_reduce.
 *                   torch_rowdot_bf16 is the same reduction of a materialised product of two bf16 rows
 *                   (autograd's sum_to of grad * other for a factor broadcast over the last dim).
 *   torch_softmax_sum  the denominator of torch.softmax(x, -1) for n <= 1024 (PersistentSoftmax.cuh):
 *                   W = min(next_pow2(n), 32) lanes, lane l sums e[l], e[l + W], ... from 0.0f (padded
 *                   lanes hold exp(-inf) = +0), then an xor butterfly with offsets W/2, ..., 1.
 *   torch_softmax_bwd  torch.softmax's backward on CUDA for n <= 1024 (SoftMax.cu softmax_backward_cuda_out:
 *                   tmp = grad * output as its own kernel, then PersistentSoftmax.cuh softmax_warp_backward):
 *                   s = tmp summed as torch_softmax_sum sums, gI = tmp - output * s, which nvcc (ATen is
 *                   built with its default --fmad=true) contracts to fmaf(-output, s, tmp).
 * Every add is a binary32 '+' through hn_add (nan_host.h: the plain operator on the host, the host's
 * NaN bits on the device), so both twins give the same bytes; callers compile without contraction
 * (-ffp-contract=off / nvcc --fmad=false).
 */
#ifndef ALIGN_TORCH_ORDER_H
#define ALIGN_TORCH_ORDER_H

#include <stdint.h>

#include "nan_host.h"
#include "numerics.h"

#define TORCH_TOPK_MAX_K 64
#define TORCH_SUM_MAX_N 127

/* TopKTypeConfig<float>::convert: order-preserving unsigned key, NaN the largest */
ALIGN_HD static inline uint32_t torch_radix_key(float v)
{
	if (align_isnanf(v))
		return 0xffffffffu;
	uint32_t x = align_f32_bits(v);
	return x ^ ((x & 0x80000000u) ? 0xffffffffu : 0x80000000u);
}

/* GTOp<float, true>: NaN above everything else, then '>' */
ALIGN_HD static inline int torch_gt(float l, float r)
{
	return (align_isnanf(l) && !align_isnanf(r)) || l > r;
}

/* bitonicSwap of SortUtils.cuh on slots a, b */
ALIGN_HD static inline void torch_bitonic_swap(float *key, int32_t *val, unsigned char *valid, int a, int b, int dir)
{
	int swap = (torch_gt(key[a], key[b]) && valid[a]) || !valid[b];
	if (swap == dir) {
		float tk = key[a];
		int32_t tv = val[a];
		unsigned char tb = valid[a];
		key[a] = key[b], val[a] = val[b], valid[a] = valid[b];
		key[b] = tk, val[b] = tv, valid[b] = tb;
	}
}

/* bitonicSort<32> with 16 threads, descending; within a step the 16 threads touch disjoint slots,
 * so running them one after another is exact */
ALIGN_HD static inline void torch_bitonic32(float *key, int32_t *val, unsigned char *valid)
{
	for (int size = 2; size < 32; size *= 2)
		for (int stride = size / 2; stride > 0; stride /= 2)
			for (int t = 0; t < 16; t++) {
				int pos = 2 * t - (t & (stride - 1));
				torch_bitonic_swap(key, val, valid, pos, pos + stride, (t & (size / 2)) != 0);
			}
	for (int stride = 16; stride > 0; stride /= 2)
		for (int t = 0; t < 16; t++) {
			int pos = 2 * t - (t & (stride - 1));
			torch_bitonic_swap(key, val, valid, pos, pos + stride, 0);
		}
}

/* torch.topk(sorted=True) of x[0..n) (element stride xs), k <= TORCH_TOPK_MAX_K, k <= n: the
 * selected indices in torch's output order -> sel[0..k). taken: n flags (stride ts) of scratch. */
ALIGN_HD static inline void torch_topk(const float *x, int64_t xs, int64_t n, int64_t k, int32_t *sel,
				       unsigned char *taken, int64_t ts)
{
	for (int64_t e = 0; e < n; e++)
		taken[e * ts] = 0;
	uint32_t kth = 0;
	for (int64_t j = 0; j < k; j++) { /* the j-th largest key, ties to the lower index */
		int64_t best = -1;
		uint32_t bk = 0;
		for (int64_t e = 0; e < n; e++) {
			uint32_t ke = torch_radix_key(x[e * xs]);
			if (!taken[e * ts] && (best < 0 || ke > bk)) {
				best = e;
				bk = ke;
			}
		}
		taken[best * ts] = 1;
		kth = bk;
	}
	/* gather order: keys above the k-th value first, then the k-th value's, each by index */
	float key[32];
	int32_t val[32];
	unsigned char valid[32];
	int64_t m = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int64_t e = 0; e < n; e++)
			if (taken[e * ts] && (torch_radix_key(x[e * xs]) > kth) == (pass == 0)) {
				if (k <= 32) {
					key[m] = x[e * xs];
					val[m] = (int32_t)e;
					valid[m] = 1;
				}
				sel[m++] = (int32_t)e;
			}
	if (k <= 1)
		return;
	if (k <= 32) {
		for (int64_t i = k; i < 32; i++) {
			key[i] = 0.0f; /* K{} */
			val[i] = 0;
			valid[i] = 0;
		}
		torch_bitonic32(key, val, valid);
		for (int64_t i = 0; i < k; i++)
			sel[i] = val[i];
		return;
	}
	for (int64_t j = 1; j < k; j++) /* stable insertion sort, descending by GTOp */
		for (int64_t i = j; i > 0 && torch_gt(x[sel[i] * xs], x[sel[i - 1] * xs]); i--) {
			int32_t t = sel[i];
			sel[i] = sel[i - 1];
			sel[i - 1] = t;
		}
}

/* shfl_down with decreasing offsets over w lanes (w a power of two <= 32): lane 0's value */
ALIGN_HD static inline float torch_lane_tree(float *lane, int w)
{
	for (int off = w / 2; off > 0; off /= 2)
		for (int l = 0; l < off; l++)
			lane[l] = hn_add(lane[l], lane[l + off]);
	return lane[0];
}

/* x.sum(-1) of x[0..n) (stride xs), 1 <= n <= TORCH_SUM_MAX_N */
ALIGN_HD static inline float torch_sum_lastdim(const float *x, int64_t xs, int64_t n)
{
	int w = 1;
	while (w * 2 <= n && w < 32)
		w *= 2;
	float lane[32];
	for (int l = 0; l < w; l++) {
		float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
		int64_t idx = l;
		while (idx + 3 * (int64_t)w < n) {
			for (int i = 0; i < 4; i++)
				a[i] = hn_add(a[i], x[(idx + i * w) * xs]);
			idx += 4 * (int64_t)w;
		}
		for (int i = 0; i < 4 && idx + i * w < n; i++)
			a[i] = hn_add(a[i], x[(idx + i * w) * xs]);
		lane[l] = hn_add(hn_add(hn_add(a[0], a[1]), a[2]), a[3]);
	}
	return torch_lane_tree(lane, w);
}

/* x.sum(-2) for one output: x[0..n) (stride xs), n >= 1 (one thread's 4 accumulators: exact for x.sum(-2)
 * while n < min(16 block.y, 256), see torch_sum_cols_step) */
ALIGN_HD static inline float torch_sum_strided(const float *x, int64_t xs, int64_t n)
{
	float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	int64_t idx = 0;
	while (idx + 3 < n) {
		for (int i = 0; i < 4; i++)
			a[i] = hn_add(a[i], x[(idx + i) * xs]);
		idx += 4;
	}
	for (int i = 0; i < 4 && idx + i < n; i++)
		a[i] = hn_add(a[i], x[(idx + i) * xs]);
	return hn_add(hn_add(hn_add(a[0], a[1]), a[2]), a[3]);
}

#define TORCH_COLS_MAX_STEP 512

ALIGN_HD static inline int64_t torch_last_pow2(int64_t n)
{
	int64_t p = 1;
	while (p * 2 <= n)
		p *= 2;
	return p;
}

/* A reduction over a non-innermost dim of n values into m outputs whose innermost (contiguous, output-
 * vectorised) dim has `inner` elements, e.g. x.sum(1) of a contiguous [A, n, inner] tensor: m = A * inner
 * (torch_sum_cols_step below is x.sum(0) of [n, m], inner = m). Returns the token step (block.y split; 1:
 * one thread per output), -1 where
 * not modelled: m == 1 with n > 1 too (the iterator drops the column dim and reduces contiguously; the
 * candidate torch_sum_lastdim, step 0, reproduced torch at no probed length on an H200, 2026-12-02: T=100
 * failed) */
ALIGN_HD static inline int64_t torch_sum_cols_step_v(int64_t n, int64_t m, int64_t inner)
{
	if (n < 1 || m < 1)
		return 1;
	if (m == 1)
		return n == 1 ? 1 : -1;
	if (n == 1)
		return 1;
	int64_t v = inner % 4 == 0 ? 4 : inner % 2 == 0 ? 2 : 1, mnt = 512 / v, dim0 = m / v;
	int64_t d0 = dim0 < mnt ? torch_last_pow2(dim0) : mnt, d1 = n < mnt ? torch_last_pow2(n) : mnt;
	int64_t bw = d0 < 32 ? d0 : 32;
	int64_t bh = d1 < mnt / bw ? d1 : mnt / bw;
	int64_t thr = 16 * bh < 256 ? 16 * bh : 256;
	if (n < thr)
		return 1;
	if ((n + bh - 1) / bh >= 256)
		return -1;
	return bh;
}

ALIGN_HD static inline int64_t torch_sum_cols_step(int64_t n, int64_t m)
{
	return torch_sum_cols_step_v(n, m, m);
}

/* one column of x.sum(0): x[0..n) (stride xs), step from torch_sum_cols_step (>= 0) */
ALIGN_HD static inline float torch_sum_cols(const float *x, int64_t xs, int64_t n, int64_t step)
{
	if (step == 0)
		return torch_sum_lastdim(x, xs, n);
	if (step <= 1 || step > TORCH_COLS_MAX_STEP) /* 1; callers pass no other value outside 2..MAX */
		return n > 0 ? torch_sum_strided(x, xs, n) : 0.0f;
	float lane[TORCH_COLS_MAX_STEP];
	for (int64_t y = 0; y < step; y++)
		lane[y] = torch_sum_strided(x + y * xs, xs * step, (n - y + step - 1) / step);
	for (int64_t off = step / 2; off > 0; off /= 2)
		for (int64_t y = 0; y < off; y++)
			lane[y] = hn_add(lane[y], lane[y + off]);
	return lane[0];
}

/* the softmax denominator of e[0..n) (stride es), e = exp(x - max), 1 <= n <= 1024 */
ALIGN_HD static inline float torch_softmax_sum(const float *e, int64_t es, int64_t n)
{
	int w = 1;
	while (w < n && w < 32)
		w *= 2;
	float lane[32];
	for (int l = 0; l < w; l++) {
		float s = 0.0f;
		for (int64_t i = l; i < n; i += w)
			s = hn_add(s, e[i * es]);
		lane[l] = s; /* a padded lane adds exp(-inf) = +0 to 0.0f */
	}
	return torch_lane_tree(lane, w); /* xor butterfly: lane 0 sees this tree, every lane the same value */
}

/* torch.softmax(x, -1) backward on one slice: g the output gradient, y the softmax output (stride 1,
 * 1 <= n <= 1024); gi may alias g. tmp is kept in gi. */
ALIGN_HD static inline void torch_softmax_bwd(const float *g, const float *y, int64_t n, float *gi)
{
	for (int64_t i = 0; i < n; i++)
		gi[i] = hn_mul(g[i], y[i]);
	float s = torch_softmax_sum(gi, 1, n);
	for (int64_t i = 0; i < n; i++)
		gi[i] = hn_fmaf(hn_neg(y[i]), s, gi[i]); /* hn_neg: a device neg.f32 of a NaN is unspecified */
}

/* ---- x.sum(-1) / x.mean(-1) of a contiguous [rows, n] binary32 tensor (torch_rowsum) ---- */

#define TORCH_ROWSUM_MAX_THREADS 512

struct torch_rowsum {
	int64_t rows, n;
	int vec;    /* float4 loads (n > 128) */
	int bw;	    /* block.x: lanes over a row */
	int ys;	    /* block.y threads splitting a row (1: a warp or block row per output) */
	float mean; /* MeanOps' factor fl(fl(rows) / fl(rows n)) */
	int ok;	    /* 0: a shape ATen reduces in a way not modelled here (see above) */
};

ALIGN_HD static inline struct torch_rowsum torch_rowsum_plan(int64_t rows, int64_t n)
{
	struct torch_rowsum p = {rows, n, n > 128, 1, 1, 0.0f, 1};
	if (rows < 1 || n < 1 || rows > INT32_MAX / 4 / n) {
		p.ok = rows >= 1 && n >= 1 ? 0 : 1;
		return p;
	}
	int64_t dim0 = p.vec ? n / 4 : n, mnt = TORCH_ROWSUM_MAX_THREADS;
	int64_t p0 = dim0 < mnt ? torch_last_pow2(dim0) : mnt, p1 = rows < mnt ? torch_last_pow2(rows) : mnt;
	int64_t bw = p0 < 32 ? p0 : 32;
	int64_t bh = p1 < mnt / bw ? p1 : mnt / bw;
	bw = p0 < mnt / bh ? p0 : mnt / bh;
	int64_t vpt = (n + bw - 1) / bw, thr = 16 * bh < 256 ? 16 * bh : 256;
	p.bw = (int)bw;
	if (vpt >= thr) { /* the block.y split; refused where it would leave >= 256 values a thread (ATen
			   * splits the row over CTAs then, sized by the SM count) */
		p.ys = (int)bh;
		if ((n + bw * bh - 1) / (bw * bh) >= 256)
			p.ok = 0;
	}
	p.mean = (float)rows / (float)(rows * n);
	return p;
}

/* element i of the row: binary32 (bf16 = 0) or bf16 bits (bf16 = 1), squared (binary32) when square; with
 * y (bf16 bits, bf16 = 1) the product F(x[i]) * F(y[i]) instead */
ALIGN_HD static inline float torch__rs_elt(const void *x, const align_bf16 *y, int bf16, int64_t i, int square)
{
	float v = bf16 ? align_bf16_to_f32(((const align_bf16 *)x)[i]) : ((const float *)x)[i];
	if (y)
		return hn_mul(v, align_bf16_to_f32(y[i]));
	return square ? hn_mul(v, v) : v;
}

/* one thread's value: its 4 accumulators combined */
ALIGN_HD static inline float torch__rs_thread(const void *x, const align_bf16 *x2, int bf16,
					      const struct torch_rowsum *p, int64_t h, int xl, int y, int square)
{
	float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	const int64_t n = p->n, step = (int64_t)p->bw * p->ys;
	if (p->vec) {
		int64_t start = 0, end = n;
		if (h > 0) { /* the unaligned head: lanes h..3 of y = 0 */
			if (y == 0 && xl >= h && xl < 4)
				a[0] = hn_add(a[0], torch__rs_elt(x, x2, bf16, xl - h, square));
			start = 4 - h;
			end = n + h - 4;
		}
		for (int64_t v = xl + (int64_t)y * p->bw; v * 4 + 3 < end; v += step)
			for (int i = 0; i < 4; i++)
				a[i] = hn_add(a[i], torch__rs_elt(x, x2, bf16, start + v * 4 + i, square));
		int64_t tail = end - end % 4 + xl;
		if (y == 0 && tail < end)
			a[0] = hn_add(a[0], torch__rs_elt(x, x2, bf16, start + tail, square));
	} else {
		int64_t k = 0;
		for (int64_t i = xl + (int64_t)y * p->bw; i < n; i += step, k++)
			a[k % 4] = hn_add(a[k % 4], torch__rs_elt(x, x2, bf16, i, square));
	}
	return hn_add(hn_add(hn_add(a[0], a[1]), a[2]), a[3]);
}

/* the row sum of torch_rowsum / torch_rowdot_bf16 (x2: the second factor, or NULL) */
ALIGN_HD static inline float torch__rowsum(const void *x, const align_bf16 *x2, int bf16, const struct torch_rowsum *p,
					   int64_t row, int square)
{
	float v[TORCH_ROWSUM_MAX_THREADS];
	const int bw = p->bw, ys = p->ys;
	const int64_t h = p->vec ? (row * p->n) % 4 : 0;
	for (int y = 0; y < ys; y++)
		for (int xl = 0; xl < bw; xl++)
			v[xl + y * bw] = torch__rs_thread(x, x2, bf16, p, h, xl, y, square);
	float yv[TORCH_ROWSUM_MAX_THREADS];
	for (int y = 0; y < ys; y++) { /* block_x_reduce of each row of threads first */
		float *w = v + y * bw;
		int dim = bw;
		if (dim > 32) { /* the shared-memory tree down to a warp */
			for (int off = dim / 2; off >= 32; off /= 2)
				for (int xl = 0; xl < off; xl++)
					w[xl] = hn_add(w[xl], w[xl + off]);
			dim = 32;
		}
		yv[y] = torch_lane_tree(w, dim); /* shfl_down, offsets dim/2 .. 1 */
	}
	for (int off = ys / 2; off > 0; off /= 2) /* then block_y_reduce of the row sums */
		for (int y = 0; y < off; y++)
			yv[y] = hn_add(yv[y], yv[y + off]);
	return yv[0];
}

/* x.sum(-1) of row `row` (elements x[0..n), binary32 or bf16 bits, squared when square) under plan p (p->ok) */
ALIGN_HD static inline float torch_rowsum(const void *x, int bf16, const struct torch_rowsum *p, int64_t row,
					  int square)
{
	return torch__rowsum(x, NULL, bf16, p, row, square);
}

/* (F(a) * F(b)).sum(-1) of row `row` of a materialised [rows, n] product of two bf16 rows a[0..n), b[0..n)
 * (autograd's sum_to of a broadcast factor's gradient, grad * other; the products are exact in binary32)
 * under plan p (p->ok) */
ALIGN_HD static inline float torch_rowdot_bf16(const align_bf16 *a, const align_bf16 *b, const struct torch_rowsum *p,
					       int64_t row)
{
	return torch__rowsum(a, b, 1, p, row, 0);
}

#endif /* ALIGN_TORCH_ORDER_H */
