/* indexer.cu: CUDA twin of the DSv4 lightning indexer (contract: indexer.h; specification: indexer.c).
 * q[T,H,D], k[S,D], w[T,H] bf16 -> idx[T,K] i32, score[T,S] f32, the C twin's bytes in every mode (all values
 * are portable): the scores are indexer_score (indexer.h), one thread per (t, c), the same sequential sums;
 * the selection uses the same total orders.
 *
 * Layout: one block per query row t (grid-stride over rows). The block scales the H head weights into shared
 * memory, computes the row's S scores into the score output, then every thread ranks its entries: rank(c) =
 * the number of entries before c in the order (indexer_before, or indexer_before_key for TORCH), a total
 * order, so ranks are distinct and the selected entries (rank < k) land at idx[t, rank] with no atomics.
 * SORTED is then complete; for INDEX and TORCH thread 0 re-sorts the k selected entries by entry and, for
 * TORCH, applies indexer_torch_order (as the C twin); finally the entries are mapped to c + offset or -1.
 * Knobs: block (default 256), grid_cap (default at most 16 blocks per SM); rows_per_block unused; serial: one
 * thread per row running the C twin's loops with an insertion sort.
 *
 * Cost: the ranking is O(S^2) comparisons per row and the score O(S H D) per row, sequential per thread: a
 * reference kernel, not tuned (DSv4-Flash S = n/4, H = 64, D = 128). Thread 0's re-sort is O(k^2).
 */
#include "indexer.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct indexer_args {
	const align_bf16 *q, *k, *w;
	int32_t *idx;
	float *score;
	struct indexer_cfg c;
};

ALIGN_HD static inline int ix_before(const struct indexer_cfg *c, const float *x, int64_t a, int64_t b)
{
	return c->order == ALIGN_INDEXER_TOPK_ORDER_TORCH ? indexer_before_key(x[a], a, x[b], b)
							  : indexer_before(x[a], a, x[b], b);
}

/* sel[0..k): ascending entry (insertion sort) */
ALIGN_HD static inline void ix_sort_entries(int32_t *sel, int64_t k)
{
	for (int64_t j = 1; j < k; j++)
		for (int64_t i = j; i > 0 && sel[i] < sel[i - 1]; i--) {
			int32_t t = sel[i];
			sel[i] = sel[i - 1];
			sel[i - 1] = t;
		}
}

/* after the selection sits in row[0..kk) in the order's rank order: INDEX / TORCH reordering and mapping */
ALIGN_HD static inline void ix_finish(const struct indexer_cfg *c, const float *x, int32_t *row, int64_t kk,
				      int64_t vis)
{
	if (c->order != ALIGN_INDEXER_TOPK_ORDER_SORTED && kk > 0) {
		uint32_t kth = torch_radix_key(x[row[kk - 1]]);
		ix_sort_entries(row, kk);
		if (c->order == ALIGN_INDEXER_TOPK_ORDER_TORCH)
			indexer_torch_order(x, row, kk, kth);
	}
	for (int64_t j = 0; j < c->K; j++)
		row[j] = j < kk && row[j] < vis ? (int32_t)(row[j] + c->offset) : -1;
}

__global__ void indexer_kernel(indexer_args a)
{
	const struct indexer_cfg *c = &a.c;
	float *wb = (float *)align_cuda_dyn_smem(); /* H floats */
	const int64_t kk = c->K < c->S ? c->K : c->S;
	for (int64_t t = blockIdx.x; t < c->T; t += gridDim.x) {
		const int64_t vis = (t + 1) / c->ratio;
		float *x = a.score + t * c->S;
		int32_t *row = a.idx + t * c->K;
		for (int64_t h = threadIdx.x; h < c->H; h += blockDim.x)
			wb[h] = indexer_weight(c, a.w[t * c->H + h]);
		__syncthreads();
		for (int64_t s = threadIdx.x; s < c->S; s += blockDim.x)
			x[s] = s < vis ? indexer_score(c, a.q + t * c->H * c->D, a.k + s * c->D, wb) : -INFINITY;
		__syncthreads();
		for (int64_t s = threadIdx.x; s < c->S; s += blockDim.x) {
			int64_t rank = 0;
			for (int64_t o = 0; o < c->S && rank < kk; o++)
				rank += ix_before(c, x, o, s);
			if (rank < kk)
				row[rank] = (int32_t)s;
		}
		__syncthreads();
		if (threadIdx.x == 0)
			ix_finish(c, x, row, kk, vis);
		__syncthreads(); /* wb and the row are reused by the next t */
	}
}

/* launch.serial: one thread per row: scores, then the selection by repeated minimum as written in order */
__global__ void indexer_serial_kernel(indexer_args a, float *wball)
{
	const struct indexer_cfg *c = &a.c;
	const int64_t kk = c->K < c->S ? c->K : c->S;
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < c->T; t += (int64_t)gridDim.x * blockDim.x) {
		const int64_t vis = (t + 1) / c->ratio;
		float *x = a.score + t * c->S, *wb = wball + t * c->H;
		int32_t *row = a.idx + t * c->K;
		for (int64_t h = 0; h < c->H; h++)
			wb[h] = indexer_weight(c, a.w[t * c->H + h]);
		for (int64_t s = 0; s < c->S; s++)
			x[s] = s < vis ? indexer_score(c, a.q + t * c->H * c->D, a.k + s * c->D, wb) : -INFINITY;
		for (int64_t j = 0; j < kk; j++) { /* j-th entry of the order among those not taken */
			int64_t best = -1;
			for (int64_t s = 0; s < c->S; s++) {
				int taken = 0;
				for (int64_t i = 0; i < j && !taken; i++)
					taken = row[i] == s;
				if (!taken && (best < 0 || ix_before(c, x, s, best)))
					best = s;
			}
			row[j] = (int32_t)best;
		}
		ix_finish(c, x, row, kk, vis);
	}
}

extern "C" int indexer_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	indexer_args a;
	ALIGN_TRY(dev->err, indexer_cfg_init(&a.c, (const struct indexer_params *)params, m, in, n_in, out, n_out,
					     ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "indexer", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("indexer", "negative launch knob");
	a.q = (const align_bf16 *)in[0].data;
	a.k = (const align_bf16 *)in[1].data;
	a.w = (const align_bf16 *)in[2].data;
	a.idx = (int32_t *)out[0].data;
	a.score = (float *)out[1].data;
	if (a.c.T <= 0)
		return ALIGN_OK;
	if (a.c.H * (int64_t)sizeof(float) > 48 * 1024)
		return ops_cuda_bad_input("indexer", "H above 12288 heads");
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	int64_t cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (L->serial > 0) {
		int rc = rows_max_block(indexer_serial_kernel, &maxb);
		if (rc)
			return rc;
		block = block > maxb ? maxb : block;
		void *wb = NULL;
		ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)(a.c.T * a.c.H) * sizeof(float), &wb));
		int64_t grid = (a.c.T + block - 1) / block;
		if (L->grid_cap > 0 && grid > L->grid_cap)
			grid = L->grid_cap;
		ALIGN_CUDA_LAUNCH(indexer_serial_kernel, (unsigned)grid, block, 0, stream, a, (float *)wb);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
		return ALIGN_OK;
	}
	int rc = rows_max_block(indexer_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block;
	int64_t grid = a.c.T > cap ? cap : a.c.T;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(indexer_kernel, (unsigned)grid, block, (size_t)a.c.H * sizeof(float), stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
