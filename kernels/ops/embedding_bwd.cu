/* embedding_bwd.cu: CUDA twin of the embedding backward (contract: embedding_bwd.h; specification:
 * embedding_bwd.c). ids[T], table[V,D] (its shape), dy[T,D] bf16 -> dtable[V,D] (bf16 or fp32): the C
 * twin's bytes in every mode (embedding_bwd_elem is the same code on both sides, ALIGN_HD).
 *
 * The ids are copied to the host and checked (embedding_check_ids, the C twin's message) before the
 * launch. Layout: one block per table row (grid-stride over rows); its thread 0 lists the row's tokens
 * in increasing t into the block's slot of the device workspace (T ints per block in flight), then the
 * block's threads take the columns (j = threadIdx.x, += blockDim.x), each summing its column over the
 * list in the stated order: no atomics, no cross-block order. Knobs: block (default 128), grid_cap
 * (default 1024 blocks); serial: one thread for every row.
 *
 * Napkin maths (DSv4-Flash: V = 129280, D = 4096, T = 4096): the lists cost V * T id reads by one thread
 * per block (5.3e8, spread over the grid: ~ms), the sums T * D bf16 reads plus V * D writes (~1 GB):
 * a reference, bound by the list scan at large V.
 */
#include "embedding_bwd.h"

#include <stdlib.h>

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct embedding_bwd_args {
	const int32_t *ids;   /* [T] */
	const align_bf16 *dy; /* [T, D] */
	void *dtable;	      /* [V, D] */
	int32_t *ws;	      /* T ints per block in flight: the row's tokens */
	struct embedding_bwd_cfg c;
};

__global__ void embedding_bwd_kernel(embedding_bwd_args a)
{
	int64_t *n = (int64_t *)align_cuda_dyn_smem(); /* the row's token count (dynamic shared memory) */
	int32_t *list = a.ws + (int64_t)blockIdx.x * a.c.f.T;
	for (int64_t r = blockIdx.x; r < a.c.f.V; r += gridDim.x) {
		if (threadIdx.x == 0) {
			int64_t k = 0;
			for (int64_t t = 0; t < a.c.f.T; t++)
				if (a.ids[t] == r)
					list[k++] = (int32_t)t;
			*n = k;
		}
		__syncthreads();
		for (int64_t j = threadIdx.x; j < a.c.f.D; j += blockDim.x)
			embedding_bwd_st(&a.c, a.dtable, r * a.c.f.D + j, embedding_bwd_elem(&a.c, list, *n, a.dy, j));
		__syncthreads(); /* the list and n are rewritten for the next row */
	}
}

extern "C" int embedding_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				      int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				      struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	embedding_bwd_args a;
	ALIGN_TRY(dev->err, embedding_bwd_cfg_init(&a.c, (const struct embedding_params *)params, m, in, n_in, out,
						   n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "embedding_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("embedding_bwd", "negative launch knob");
	a.ids = (const int32_t *)in[0].data;
	a.dy = (const align_bf16 *)in[2].data;
	a.dtable = out[0].data;
	const int64_t T = a.c.f.T, V = a.c.f.V;
	if (V <= 0 || a.c.f.D <= 0)
		return ALIGN_OK;
	if (T > 0) {
		int32_t *host = (int32_t *)malloc((size_t)T * sizeof(int32_t));
		if (!host)
			return align_fail(dev->err, ALIGN_ERR_INTERNAL, "embedding_bwd: out of host memory");
		cudaError_t e =
			cudaMemcpyAsync(host, a.ids, (size_t)T * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(stream);
		int rc = e == cudaSuccess ? embedding_check_ids(host, T, V, dev->err) : ALIGN_OK;
		free(host);
		OPS_CUDA_TRY(e);
		if (rc)
			return rc;
	}
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, maxb = 0;
	ALIGN_TRY(dev->err, rows_max_block(embedding_bwd_kernel, &maxb));
	block = block > maxb ? maxb : block;
	int64_t grid = L->serial > 0 ? 1 : V, cap = L->grid_cap > 0 ? L->grid_cap : 1024;
	if (L->serial > 0)
		block = 1;
	if (grid > cap)
		grid = cap;
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)(grid * (T > 0 ? T : 1)) * sizeof(int32_t), &ws));
	a.ws = (int32_t *)ws;
	ALIGN_CUDA_LAUNCH(embedding_bwd_kernel, (unsigned)grid, block, sizeof(int64_t), stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
