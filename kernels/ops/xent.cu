/* xent.cu: CUDA twin of the cross-entropy (contract: xent.h; specification: xent.c). logits[T,V] (f32 or
 * bf16), labels[T] -> loss[T], lse[T], mean[1]: the C twin's bytes in every portable mode (xent_row and
 * xent_mean are the same code on both sides, ALIGN_HD in xent.h). MATH_IMPL=cuda / cuda_fast (GPU only)
 * take expf/logf (or __expf/__logf) from CUDA, as PyTorch's log_softmax kernel does; with XENT_SUM=torch
 * and XENT_MEAN=torch32 that is F.cross_entropy(logits.float(), labels) on CUDA for V <= 1024
 * (tests/gpu/torch-compare.py).
 *
 * The labels are copied to the host and checked (label >= V: status 2, the C twin's message) before the
 * launch: the twin waits for that copy. Layout: one thread per token row (grid-stride), each with V floats
 * of the device workspace for e_v (at most 64 Mi floats in flight: the grid is capped so that
 * rows in flight x V fits); then one thread computes the mean in the stated order. Knobs: block (default
 * 128), grid_cap; rows_per_block not used; serial: one thread for every row.
 *
 * Napkin maths (DSv4-Flash: T = 4096, V = 129280, f32 logits): 2.1 GB read twice (max, then exp) plus the
 * workspace written and read once: ~3 ms at ~2.9 TB/s, and ~40 fp64 operations per exp (portable): a
 * reference, not a production kernel.
 */
#include "xent.h"

#include <stdlib.h>

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#define XENT_WS_FLOATS (64ll << 20)

struct xent_args {
	const void *logits;    /* [T, V] f32 or bf16 */
	const int32_t *labels; /* [T] */
	float *loss, *lse;     /* [T] */
	float *mean;	       /* [1] */
	float *ws;	       /* e_v: V floats per thread in flight */
	int64_t threads;       /* gridDim.x * blockDim.x, for the workspace slot */
	struct xent_cfg c;
};

__global__ void xent_rows_kernel(xent_args a)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	float *e = a.ws + i * a.c.V;
	size_t es = a.c.bf16 ? 2 : 4;
	for (int64_t t = i; t < a.c.T; t += a.threads)
		xent_row(&a.c, (const char *)a.logits + (size_t)(t * a.c.V) * es, a.labels[t], e, a.loss + t,
			 a.lse + t);
}

__global__ void xent_mean_kernel(xent_args a)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		a.mean[0] = xent_mean(&a.c, a.loss, a.labels);
}

extern "C" int xent_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			     struct align_tensor *out, int n_out, const struct align_launch *launch,
			     struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	xent_args a;
	ALIGN_TRY(dev->err, xent_cfg_init(&a.c, (const struct xent_params *)params, m, in, n_in, out, n_out,
					  ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "xent", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("xent", "negative launch knob");
	a.logits = in[0].data;
	a.labels = (const int32_t *)in[1].data;
	a.loss = (float *)out[0].data;
	a.lse = (float *)out[1].data;
	a.mean = (float *)out[2].data;
	int32_t *host = (int32_t *)malloc((size_t)(a.c.T > 0 ? a.c.T : 1) * sizeof(int32_t));
	if (!host)
		return align_fail(dev->err, ALIGN_ERR_INTERNAL, "xent: out of host memory");
	cudaError_t e =
		cudaMemcpyAsync(host, a.labels, (size_t)a.c.T * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(stream);
	int rc = ALIGN_OK;
	for (int64_t t = 0; e == cudaSuccess && rc == ALIGN_OK && t < a.c.T; t++)
		if (host[t] >= a.c.V)
			rc = align_fail(dev->err, ALIGN_ERR_INPUT, "xent: labels[%lld] = %d is outside [0, %lld)",
					(long long)t, (int)host[t], (long long)a.c.V);
	free(host);
	OPS_CUDA_TRY(e);
	if (rc)
		return rc;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, maxb = 0;
	ALIGN_TRY(dev->err, rows_max_block(xent_rows_kernel, &maxb));
	block = block > maxb ? maxb : block;
	int64_t grid = L->serial > 0 ? 1 : (a.c.T + block - 1) / block;
	if (L->serial > 0)
		block = 1;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	while (grid > 1 && grid * block * a.c.V > XENT_WS_FLOATS)
		grid /= 2; /* rows in flight x V within the workspace cap; grid-stride covers the rest */
	if (grid < 1)
		grid = 1;
	a.threads = grid * block;
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)(a.threads * a.c.V) * sizeof(float), &ws));
	a.ws = (float *)ws;
	if (a.c.T > 0)
		ALIGN_CUDA_LAUNCH(xent_rows_kernel, (unsigned)grid, block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	ALIGN_CUDA_LAUNCH(xent_mean_kernel, 1, 1, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
