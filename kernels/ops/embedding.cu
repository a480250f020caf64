/* embedding.cu: CUDA twin of the token embedding lookup (contract: embedding.h; specification:
 * embedding.c). ids[T] i32, table[V,D] f32 -> y[T,D] bf16, the C twin's bytes in every mode (the op has
 * no GPU-only value): y = R(w), or R(F(R(w)) * scale) with the scale of embedding_cfg_init.
 *
 * The ids are copied to the host and checked (embedding_check_ids, the C twin's message) before the
 * launch: the twin waits for that copy (T * 4 bytes), so a bad id is status 2 with nothing written.
 * Layout: one thread per output element, grid-stride. Knobs: block (default 256), grid_cap (default at
 * most 16 blocks per SM); rows_per_block not used; serial: one thread per token row, the C twin's loop.
 *
 * Napkin maths (DSv4-Flash: T = 16384, D = 4096): 4 bytes read + 2 written per element, 402 MB, ~140 us
 * at ~2.9 TB/s on an H100 SXM: memory bound.
 */
#include "embedding.h"

#include <stdlib.h>

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct embedding_args {
	const int32_t *ids; /* [T] */
	const float *table; /* [V, D] */
	align_bf16 *y;	    /* [T, D] */
	struct embedding_cfg c;
};

__global__ void embedding_kernel(embedding_args a)
{
	int64_t n = a.c.T * a.c.D, stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		int64_t t = i / a.c.D, j = i - t * a.c.D;
		float w = __ldg(a.table + (int64_t)__ldg(a.ids + t) * a.c.D + j);
		a.y[i] = align_f32_to_bf16(embedding_value(&a.c, w));
	}
}

/* launch.serial: one thread per token row, embedding.c's loop */
__global__ void embedding_serial_kernel(embedding_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x)
		for (int64_t j = 0; j < a.c.D; j++)
			a.y[t * a.c.D + j] =
				align_f32_to_bf16(embedding_value(&a.c, a.table[(int64_t)a.ids[t] * a.c.D + j]));
}

extern "C" int embedding_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				  int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				  struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	embedding_args a;
	ALIGN_TRY(dev->err, embedding_cfg_init(&a.c, (const struct embedding_params *)params, m, in, n_in, out, n_out,
					       ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "embedding", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("embedding", "negative launch knob");
	a.ids = (const int32_t *)in[0].data;
	a.table = (const float *)in[1].data;
	a.y = (align_bf16 *)out[0].data;
	if (a.c.T <= 0 || a.c.D <= 0)
		return ALIGN_OK;
	int32_t *host = (int32_t *)malloc((size_t)a.c.T * sizeof(int32_t));
	if (!host)
		return align_fail(dev->err, ALIGN_ERR_INTERNAL, "embedding: out of host memory");
	cudaError_t e = cudaMemcpyAsync(host, a.ids, (size_t)a.c.T * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(stream);
	int rc = e == cudaSuccess ? embedding_check_ids(host, a.c.T, a.c.V, dev->err) : ALIGN_OK;
	free(host);
	OPS_CUDA_TRY(e);
	if (rc)
		return rc;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	ALIGN_TRY(dev->err, rows_max_block(L->serial > 0 ? embedding_serial_kernel : embedding_kernel, &maxb));
	block = block > maxb ? maxb : block;
	int64_t work = L->serial > 0 ? a.c.T : a.c.T * a.c.D, grid = (work + block - 1) / block;
	int64_t cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (grid > cap)
		grid = cap; /* grid-stride beyond 16 blocks per SM */
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	if (L->serial > 0)
		ALIGN_CUDA_LAUNCH(embedding_serial_kernel, (unsigned)grid, block, 0, stream, a);
	else
		ALIGN_CUDA_LAUNCH(embedding_kernel, (unsigned)grid, block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
