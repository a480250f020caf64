/* dsa_indexer.cu: CUDA twin of the DeepSeek-V3.2 DSA indexer (contract: dsa_indexer.h; specification:
 * dsa_indexer.c). q[T,H,D], k[S,D], w[T,H] bf16 -> idx[T,K] i32, score[T,S] f32, the C twin's bytes in every mode
 * (all values are portable): the same ALIGN_HD row code (dsa_indexer_prep_row, dsa_indexer_weight,
 * dsa_indexer_score) and the same total orders (indexer.h).
 *
 * Layout. Kernel 1 prepares every row (T*H q rows, then S k rows; one thread per row, grid-stride): rotation,
 * bf16 rounding, FP8 codes and block scale into scratch (codes bf16 [T*H*D + S*D], scales f32 [T*H + S]).
 * Kernel 2: one block per query row t (grid-stride over rows) puts the H head weights in shared memory,
 * computes the row's S scores (one thread per key) into the score output, then ranks: rank(j) = the number of
 * keys before j in the order (a total order: distinct ranks), the selected ones (rank < k) land at idx[t, rank]
 * with no atomics; thread 0 then applies the INDEX / TORCH reordering and the -1 mapping (as the C twin).
 * Knobs: block (default 256), grid_cap; serial: one thread per query row running the C twin's loops (selection
 * by repeated minimum). Cost: O(S H D) per row for the scores and O(S^2) for the ranking: a reference kernel.
 */
#include "dsa_indexer.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct dsa_indexer_args {
	const align_bf16 *q, *k, *w;
	int32_t *idx;
	float *score;
	align_bf16 *qp, *kp; /* prepared rows */
	float *qs, *ks;	     /* their block scales */
	struct dsa_indexer_cfg c;
};

ALIGN_HD static inline int di_before(const struct dsa_indexer_cfg *c, const float *x, int64_t a, int64_t b)
{
	return c->ix.order == ALIGN_INDEXER_TOPK_ORDER_TORCH ? indexer_before_key(x[a], a, x[b], b)
							     : indexer_before(x[a], a, x[b], b);
}

/* the selection in rank order sits in row[0..kk): INDEX / TORCH reordering, then keys past `last` -> -1 */
ALIGN_HD static inline void di_finish(const struct dsa_indexer_cfg *c, const float *x, int32_t *row, int64_t kk,
				      int64_t last)
{
	if (c->ix.order != ALIGN_INDEXER_TOPK_ORDER_SORTED && kk > 0) {
		uint32_t kth = torch_radix_key(x[row[kk - 1]]);
		for (int64_t j = 1; j < kk; j++) /* ascending key */
			for (int64_t i = j; i > 0 && row[i] < row[i - 1]; i--) {
				int32_t t = row[i];
				row[i] = row[i - 1];
				row[i - 1] = t;
			}
		if (c->ix.order == ALIGN_INDEXER_TOPK_ORDER_TORCH)
			indexer_torch_order(x, row, kk, kth);
	}
	for (int64_t j = 0; j < c->K; j++)
		row[j] = j < kk && row[j] <= last ? row[j] : -1;
}

__global__ void dsa_indexer_prep_kernel(dsa_indexer_args a)
{
	const struct dsa_indexer_cfg *c = &a.c;
	const int64_t nq = c->T * c->H, n = nq + c->S;
	float tmp[2 * DSA_INDEXER_D_MAX];
	for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (int64_t)gridDim.x * blockDim.x) {
		if (r < nq)
			a.qs[r] = dsa_indexer_prep_row(c, a.q + r * c->D, a.qp + r * c->D, tmp);
		else
			a.ks[r - nq] = dsa_indexer_prep_row(c, a.k + (r - nq) * c->D, a.kp + (r - nq) * c->D, tmp);
	}
}

__global__ void dsa_indexer_kernel(dsa_indexer_args a)
{
	const struct dsa_indexer_cfg *c = &a.c;
	float *wt = (float *)align_cuda_dyn_smem(); /* H floats */
	const int64_t kk = c->K < c->S ? c->K : c->S;
	for (int64_t t = blockIdx.x; t < c->T; t += gridDim.x) {
		const int64_t last = c->start + t;
		float *x = a.score + t * c->S;
		int32_t *row = a.idx + t * c->K;
		const align_bf16 *qt = a.qp + t * c->H * c->D;
		for (int64_t h = threadIdx.x; h < c->H; h += blockDim.x)
			wt[h] = dsa_indexer_weight(c, a.w[t * c->H + h], a.qs[t * c->H + h]);
		__syncthreads();
		for (int64_t j = threadIdx.x; j < c->S; j += blockDim.x)
			x[j] = j <= last ? dsa_indexer_score(c, qt, a.kp + j * c->D, wt, a.ks[j]) : -INFINITY;
		__syncthreads();
		for (int64_t j = threadIdx.x; j < c->S; j += blockDim.x) {
			int64_t rank = 0;
			for (int64_t o = 0; o < c->S && rank < kk; o++)
				rank += di_before(c, x, o, j);
			if (rank < kk)
				row[rank] = (int32_t)j;
		}
		__syncthreads();
		if (threadIdx.x == 0)
			di_finish(c, x, row, kk, last);
		__syncthreads(); /* wt and the row are reused by the next t */
	}
}

/* launch.serial: one thread per query row: weights (scratch wall), scores, selection by repeated minimum */
__global__ void dsa_indexer_serial_kernel(dsa_indexer_args a, float *wall)
{
	const struct dsa_indexer_cfg *c = &a.c;
	const int64_t kk = c->K < c->S ? c->K : c->S;
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < c->T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		const int64_t last = c->start + t;
		float *x = a.score + t * c->S, *wt = wall + t * c->H;
		int32_t *row = a.idx + t * c->K;
		for (int64_t h = 0; h < c->H; h++)
			wt[h] = dsa_indexer_weight(c, a.w[t * c->H + h], a.qs[t * c->H + h]);
		for (int64_t j = 0; j < c->S; j++)
			x[j] = j <= last ? dsa_indexer_score(c, a.qp + t * c->H * c->D, a.kp + j * c->D, wt, a.ks[j])
					 : -INFINITY;
		for (int64_t i = 0; i < kk; i++) {
			int64_t best = -1;
			for (int64_t j = 0; j < c->S; j++) {
				int taken = 0;
				for (int64_t u = 0; u < i && !taken; u++)
					taken = row[u] == j;
				if (!taken && (best < 0 || di_before(c, x, j, best)))
					best = j;
			}
			row[i] = (int32_t)best;
		}
		di_finish(c, x, row, kk, last);
	}
}

extern "C" int dsa_indexer_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				    int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				    struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	dsa_indexer_args a;
	ALIGN_TRY(dev->err, dsa_indexer_cfg_init(&a.c, (const struct dsa_indexer_params *)params, m, in, n_in, out,
						 n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "dsa_indexer", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("dsa_indexer", "negative launch knob");
	a.q = (const align_bf16 *)in[0].data;
	a.k = (const align_bf16 *)in[1].data;
	a.w = (const align_bf16 *)in[2].data;
	a.idx = (int32_t *)out[0].data;
	a.score = (float *)out[1].data;
	if (a.c.T <= 0)
		return ALIGN_OK;
	if (a.c.H * (int64_t)sizeof(float) > 48 * 1024)
		return ops_cuda_bad_input("dsa_indexer", "H above 12288 heads");
	const int64_t nq = a.c.T * a.c.H, nrow = nq + a.c.S;
	size_t fbytes = (size_t)(nrow + nq) * sizeof(float); /* scales, then the serial path's weights */
	size_t bytes = fbytes + (size_t)(nrow * a.c.D) * sizeof(align_bf16);
	void *scr = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, bytes, &scr));
	a.qs = (float *)scr;
	a.ks = a.qs + nq;
	float *wall = a.ks + a.c.S;
	a.qp = (align_bf16 *)((char *)scr + fbytes);
	a.kp = a.qp + nq * a.c.D;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	int64_t cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	int rc = rows_max_block(dsa_indexer_prep_kernel, &maxb);
	if (rc)
		return rc;
	int pb = block > maxb ? maxb : block;
	int64_t pgrid = (nrow + pb - 1) / pb;
	pgrid = pgrid > cap ? cap : pgrid;
	if (L->grid_cap > 0 && pgrid > L->grid_cap)
		pgrid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(dsa_indexer_prep_kernel, (unsigned)pgrid, pb, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	if (L->serial > 0) {
		rc = rows_max_block(dsa_indexer_serial_kernel, &maxb);
		if (rc)
			return rc;
		block = block > maxb ? maxb : block;
		int64_t grid = (a.c.T + block - 1) / block;
		if (L->grid_cap > 0 && grid > L->grid_cap)
			grid = L->grid_cap;
		ALIGN_CUDA_LAUNCH(dsa_indexer_serial_kernel, (unsigned)grid, block, 0, stream, a, wall);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
		return ALIGN_OK;
	}
	rc = rows_max_block(dsa_indexer_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block;
	int64_t grid = a.c.T > cap ? cap : a.c.T;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(dsa_indexer_kernel, (unsigned)grid, block, (size_t)a.c.H * sizeof(float), stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
