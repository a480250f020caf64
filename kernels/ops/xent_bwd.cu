/* xent_bwd.cu: CUDA twin of the cross-entropy backward (contract: xent_bwd.h; specification: xent_bwd.c).
 * logits[T,V], labels[T], dloss[T] -> dlogits[T,V]: the C twin's bytes in every portable mode (xent_bwd_row
 * is the same code on both sides, ALIGN_HD in xent_bwd.h). With MATH_IMPL=cuda, XENT_SUM=torch,
 * XENT_BWD_PROB=explsm and XENT_BWD_FORM=lsm_fma it is the autograd of F.cross_entropy(logits.float(),
 * labels, reduction='none') on CUDA for V <= 1024 (tests/gpu/torch-compare.py).
 *
 * The labels are copied to the host and checked (label >= V: status 2, the C twin's message) before the
 * launch. Layout as xent.cu: one thread per token row (grid-stride), V floats of device workspace each for
 * e_v (at most 64 Mi floats in flight). Knobs: block (default 128), grid_cap; serial: one thread for every
 * row. A reference: the row is read three times (max, exp, gradient) by one thread, so a DSv4-Flash
 * vocabulary (V = 129280) runs at a fraction of the bandwidth a block-per-row kernel would reach.
 */
#include "xent_bwd.h"

#include <stdlib.h>

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#define XENT_BWD_WS_FLOATS (64ll << 20)

struct xent_bwd_args {
	const void *logits;    /* [T, V] f32 or bf16 */
	const int32_t *labels; /* [T] */
	const float *dloss;    /* [T] */
	void *dlogits;	       /* [T, V], the logits' dtype */
	float *ws;	       /* e_v: V floats per thread in flight */
	int64_t threads;       /* gridDim.x * blockDim.x, for the workspace slot */
	struct xent_bwd_cfg c;
};

__global__ void xent_bwd_rows_kernel(xent_bwd_args a)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	float *e = a.ws + i * a.c.f.V;
	size_t es = a.c.f.bf16 ? 2 : 4;
	for (int64_t t = i; t < a.c.f.T; t += a.threads)
		xent_bwd_row(&a.c, (const char *)a.logits + (size_t)(t * a.c.f.V) * es, a.labels[t], a.dloss[t], e,
			     (char *)a.dlogits + (size_t)(t * a.c.f.V) * es);
}

extern "C" int xent_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				 int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				 struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	xent_bwd_args a;
	ALIGN_TRY(dev->err, xent_bwd_cfg_init(&a.c, (const struct xent_params *)params, m, in, n_in, out, n_out,
					      ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "xent_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("xent_bwd", "negative launch knob");
	a.logits = in[0].data;
	a.labels = (const int32_t *)in[1].data;
	a.dloss = (const float *)in[2].data;
	a.dlogits = out[0].data;
	const int64_t T = a.c.f.T, V = a.c.f.V;
	int32_t *host = (int32_t *)malloc((size_t)(T > 0 ? T : 1) * sizeof(int32_t));
	if (!host)
		return align_fail(dev->err, ALIGN_ERR_INTERNAL, "xent_bwd: out of host memory");
	cudaError_t e = cudaMemcpyAsync(host, a.labels, (size_t)T * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(stream);
	int rc = ALIGN_OK;
	for (int64_t t = 0; e == cudaSuccess && rc == ALIGN_OK && t < T; t++)
		if (host[t] >= V)
			rc = align_fail(dev->err, ALIGN_ERR_INPUT, "xent_bwd: labels[%lld] = %d is outside [0, %lld)",
					(long long)t, (int)host[t], (long long)V);
	free(host);
	OPS_CUDA_TRY(e);
	if (rc)
		return rc;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, maxb = 0;
	ALIGN_TRY(dev->err, rows_max_block(xent_bwd_rows_kernel, &maxb));
	block = block > maxb ? maxb : block;
	int64_t grid = L->serial > 0 ? 1 : (T + block - 1) / block;
	if (L->serial > 0)
		block = 1;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	while (grid > 1 && grid * block * V > XENT_BWD_WS_FLOATS)
		grid /= 2; /* rows in flight x V within the workspace cap; grid-stride covers the rest */
	if (grid < 1)
		grid = 1;
	a.threads = grid * block;
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)(a.threads * V) * sizeof(float), &ws));
	a.ws = (float *)ws;
	if (T > 0)
		ALIGN_CUDA_LAUNCH(xent_bwd_rows_kernel, (unsigned)grid, block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
