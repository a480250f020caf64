/* compressor.cu: CUDA twin of the DSv4 KV compressor (contract: compressor.h; specification:
 * compressor.c). x[T*K,D] bf16, wkv/wgate[N*F,D] bf16, ape[K,N*F] f32, w[F] f32 -> c[T,F] bf16, the C
 * twin's bytes in every portable mode: every step is compressor.h's shared element code (compressor_proj,
 * compressor_pool, compressor_finish_row with rope.h's rope_row), compiled with --fmad=false; shapes and
 * modes from compressor_cfg_init (compressor.c). MATH_IMPL=libm has no GPU twin (status 4); MATH_IMPL=cuda
 * / cuda_fast take expf / __expf (softmax) and cosf / sinf / powf (RoPE) from CUDA; RMSNORM_RSQRT=cuda
 * calls rsqrtf.
 *
 * Layout, three kernels on dev->stream through one workspace (align_dev_scratch: K and Z of every
 * token [2][T*K][N*F] then the pooled rows [T][F], binary32):
 *   1. one thread per (token, column): the two dot products over D in the C twin's order, ape;
 *   2. one thread per (group, channel): the window softmax and the pooled sum;
 *   3. one thread per group: norm, RoPE, Hadamard and QDQ of the row, serially (the row code keeps its
 *      working row in the workspace).
 * Knobs: block (default 256), grid_cap; rows_per_block is not used; serial: every kernel with one thread.
 *
 * Napkin maths (DSv4-Flash main CSA compressor, 4096 tokens, D = 4096, N*F = 1024): 2 x 4.3 G
 * multiply-adds in kernel 1 (one thread per output with a sequential D loop: the bitwise order; CUDA
 * cores at ~67 TFLOP/s of fp32 issue: ~0.26 ms if compute bound; the weight rows are L2 hits);
 * kernels 2-3 are O(T F K) and O(T F log F).
 */
#include "math_cuda.cuh" /* first: compressor.h takes dm_expf from it in the device pass */

#include "compressor.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct comp_args {
	const align_bf16 *x, *wk, *wz;
	const float *ape, *w;
	align_bf16 *y;
	float *Kv, *Zv, *C; /* workspace */
	struct compressor_op_cfg c;
};

__global__ void comp_proj_kernel(comp_args a)
{
	const int64_t NF = a.c.N * a.c.F, n = a.c.T * a.c.K * NF, D = a.c.D;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		int64_t t = i / NF, j = i - t * NF;
		compressor_proj(&a.c.c, a.x + t * D, a.wk + j * D, a.wz + j * D, D, a.ape[(t % a.c.K) * NF + j],
				&a.Kv[i], &a.Zv[i]);
	}
}

__global__ void comp_pool_kernel(comp_args a)
{
	const int64_t F = a.c.F, K = a.c.K, N = a.c.N, n = a.c.T * F;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		int64_t g = i / F, ch = i - g * F;
		struct compressor_win win = compressor_window(a.Kv, a.Zv, g, ch, K, N, F);
		float c = compressor_pool(&a.c.c, &win);
		a.C[i] = c;
	}
}

__global__ void comp_row_kernel(comp_args a)
{
	const int64_t F = a.c.F;
	for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < a.c.T;
	     g += (int64_t)gridDim.x * blockDim.x)
		compressor_finish_row(&a.c.c, a.C + g * F, a.w, F, g, (int32_t)(a.c.pos0 + g * a.c.K), a.y + g * F);
}

extern "C" int compressor_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				   int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				   struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	comp_args a;
	ALIGN_TRY(dev->err, compressor_cfg_init(&a.c, (const struct compressor_params *)params, m, in, n_in, out, n_out,
						ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "compressor", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("compressor", "negative launch knob");
	a.x = (const align_bf16 *)in[0].data;
	a.wk = (const align_bf16 *)in[1].data;
	a.wz = (const align_bf16 *)in[2].data;
	a.ape = (const float *)in[3].data;
	a.w = (const float *)in[4].data;
	a.y = (align_bf16 *)out[0].data;
	const int64_t T = a.c.T, K = a.c.K, NF = a.c.N * a.c.F;
	if (T <= 0)
		return ALIGN_OK;
	void *ws = NULL;
	size_t nkz = (size_t)(T * K * NF);
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (2 * nkz + (size_t)(T * a.c.F)) * sizeof(float), &ws));
	a.Kv = (float *)ws;
	a.Zv = a.Kv + nkz;
	a.C = a.Zv + nkz;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	int64_t cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (L->grid_cap > 0 && cap > L->grid_cap)
		cap = L->grid_cap;
	int64_t work[3] = {(int64_t)nkz, T * a.c.F, T};
	for (int k = 0; k < 3; k++) {
		int rc = rows_max_block(k == 0 ? comp_proj_kernel : k == 1 ? comp_pool_kernel : comp_row_kernel, &maxb);
		if (rc)
			return rc;
		int b = L->serial > 0 ? 1 : (block > maxb ? maxb : block);
		int64_t grid = L->serial > 0 ? 1 : (work[k] + b - 1) / b;
		grid = grid > cap ? cap : grid;
		if (k == 0)
			ALIGN_CUDA_LAUNCH(comp_proj_kernel, (unsigned)grid, b, 0, stream, a);
		else if (k == 1)
			ALIGN_CUDA_LAUNCH(comp_pool_kernel, (unsigned)grid, b, 0, stream, a);
		else
			ALIGN_CUDA_LAUNCH(comp_row_kernel, (unsigned)grid, b, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	}
	return ALIGN_OK;
}
