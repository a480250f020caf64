/* swiglu_bwd.cu: CUDA twin of the SwiGLU backward (contract: swiglu_bwd.h; specification: swiglu_bwd.c).
 * g, u, da [T,F] bf16, p[T] f32 -> dg, du [T,F] bf16, dp[T] f32, the C twin's bytes in every portable mode;
 * shapes and modes come from swiglu_bwd_cfg_init (swiglu_bwd.c), shared with the C twin. MATH_IMPL=libm has
 * no GPU twin (refused, status 4); cuda / cuda_fast (GPU only) take exp from CUDA (math_cuda.cuh).
 *
 * Both twins run swb_elem (the element's operations, host NaN rules through hn_*) and swb_sum (the dp order)
 * from swiglu_bwd.h, so each output is the same sequence of IEEE operations. Kernel 1: grid-stride over the
 * T*F elements, dg and du stored, the dp term c written to the device context's scratch (T*F floats,
 * stream-ordered). Kernel 2: one thread per row sums its F terms with swb_sum (sequential per row: no float
 * atomics, no cross-thread tree). launch.serial: one thread per row does both, as the C twin's loops.
 *
 * Napkin maths (DSv4-Flash: T = 16384, F = 2048): bytes = 3 x 2TF (g, u, da) + 2 x 2TF (dg, du) + 2 x 4TF
 * (terms written and read) = 604 MB: memory bound, ~200 us at ~3 TB/s; kernel 2 reads the terms row by row
 * with one thread per row (uncoalesced: a faster per-row tree is future work; the order is the contract).
 * Not run on a GPU yet (no device this session): compiled only.
 */
#include "swiglu_bwd.h"

#include "math_cuda.cuh"
#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct swb_args {
	const align_bf16 *g, *u, *da; /* [T, F] */
	const float *p;		      /* [T] */
	align_bf16 *dg, *du;	      /* [T, F] */
	float *dp;		      /* [T] */
	float *terms;		      /* [T, F] scratch (NULL in the serial path) */
	struct swiglu_bwd_cfg c;
};

ALIGN_HD static inline float swb_q(const swb_args &a, int64_t t)
{
	return a.c.scale_bf16 ? align_round_bf16(a.p[t]) : a.p[t];
}

ALIGN_HD static inline float swb_one(const swb_args &a, int64_t t, int64_t i)
{
	float g = align_bf16_to_f32(a.g[i]), dg, du;
	float e = dm_expf(a.c.math, hn_neg(swb_gate(&a.c, g)));
	float c = swb_elem(&a.c, g, align_bf16_to_f32(a.u[i]), align_bf16_to_f32(a.da[i]), swb_q(a, t), e, &dg, &du);
	a.dg[i] = align_f32_to_bf16(dg);
	a.du[i] = align_f32_to_bf16(du);
	return c;
}

__global__ void swiglu_bwd_elem_kernel(swb_args a)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.c.T * a.c.F; i += stride)
		a.terms[i] = swb_one(a, i / a.c.F, i);
}

__global__ void swiglu_bwd_dp_kernel(swb_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x)
		a.dp[t] = a.c.after ? 0.0f : swb_sum(a.c.sum, a.terms + t * a.c.F, a.c.F);
}

/* launch.serial: one thread per row, the loops of swiglu_bwd.c (terms in a per-row scratch row) */
__global__ void swiglu_bwd_serial_kernel(swb_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		for (int64_t f = 0; f < a.c.F; f++)
			a.terms[t * a.c.F + f] = swb_one(a, t, t * a.c.F + f);
		a.dp[t] = a.c.after ? 0.0f : swb_sum(a.c.sum, a.terms + t * a.c.F, a.c.F);
	}
}

extern "C" int swiglu_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				   int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				   struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	swb_args a;
	ALIGN_TRY(dev->err, swiglu_bwd_cfg_init(&a.c, (const struct swiglu_params *)params, m, in, n_in, out, n_out,
						ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "swiglu_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("swiglu_bwd", "negative launch knob");
	const int64_t T = a.c.T, F = a.c.F;
	a.g = (const align_bf16 *)in[0].data;
	a.u = (const align_bf16 *)in[1].data;
	a.p = (const float *)in[2].data;
	a.da = (const align_bf16 *)in[3].data;
	a.dg = (align_bf16 *)out[0].data;
	a.du = (align_bf16 *)out[1].data;
	a.dp = (float *)out[2].data;
	if (T <= 0)
		return ALIGN_OK;
	void *terms = NULL; /* the shared workspace: stream-ordered, this call's kernels only */
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)T * (size_t)(F > 0 ? F : 1) * sizeof(float), &terms));
	a.terms = (float *)terms;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	int rc = rows_max_block(L->serial > 0 ? swiglu_bwd_serial_kernel : swiglu_bwd_elem_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block;
	int64_t rgrid = (T + block - 1) / block;
	if (L->grid_cap > 0 && rgrid > L->grid_cap)
		rgrid = L->grid_cap;
	if (L->serial > 0) {
		ALIGN_CUDA_LAUNCH(swiglu_bwd_serial_kernel, (unsigned)rgrid, block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
		return ALIGN_OK;
	}
	int64_t grid = (T * F + block - 1) / block, cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (grid > cap)
		grid = cap; /* grid-stride beyond 16 blocks per SM */
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	if (grid < 1)
		grid = 1;
	ALIGN_CUDA_LAUNCH(swiglu_bwd_elem_kernel, (unsigned)grid, block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	ALIGN_CUDA_LAUNCH(swiglu_bwd_dp_kernel, (unsigned)rgrid, block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
