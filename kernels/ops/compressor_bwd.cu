/* compressor_bwd.cu: CUDA twin of the DSv4 KV compressor's backward (contract: compressor_bwd.h; specification:
 * compressor_bwd.c). x[T*K,D], wkv/wgate[N*F,D] bf16, ape[K,N*F], w[F] f32, dc[T,F] bf16 -> dx[T*K,D] bf16,
 * dwkv/dwgate[N*F,D], dape[K,N*F], dw[F] f32, the C twin's bytes in every portable mode: every step is the
 * shared code of compressor.h (the forward's recomputation) and compressor_bwd.h (the backward's rows and
 * sums, each sum run by one thread in the contract's order), compiled with --fmad=false; shapes and modes
 * from compressor_bwd_cfg_init. MATH_IMPL=libm has no GPU twin (status 4); cuda / cuda_fast and
 * RMSNORM_RSQRT=cuda as the forward twin.
 *
 * Layout, six kernels on dev->stream through one workspace (align_dev_scratch, binary32: Kv, Zv, dK, dZ
 * [T*K][N*F], then C, tmp, dC, n [T][F], then gy [T][F] bf16):
 *   1. one thread per (token, column): K and Z (compressor_proj), dK = dZ = +0;
 *   2. one thread per (group, channel): the pooled value C (compressor_pool);
 *   3. one thread per group: the norm input and factor, dc's RoPE / Hadamard backward, the norm backward;
 *   4. one thread per (group, channel): the window backward, writing the window's dk and da (each element
 *      has one writer: compressor_bwd.h step 4);
 *   5. one thread per (token, d): dx; one per (column, d, kv|gate): dwkv, dwgate over the tokens;
 *   6. one thread per ape element and per channel: dape, dw over the groups.
 * The C twin interleaves steps 3 and 4 per group; no group's step reads another's outputs, so the bits agree.
 * Knobs: block (default 256), grid_cap; serial: every kernel with one thread; rows_per_block not used.
 * Napkin maths (DSv4-Flash main compressor, 4096 tokens, D = 4096, N*F = 1024): the forward's 2 x 4.3 G
 * multiply-adds twice more (dx and the weight gradients), each output a sequential sum in one thread (the
 * bitwise order; a tiled twin is a later step); kernels 2-4 and 6 are O(T F K) and O(T F log F).
 */
#include "math_cuda.cuh" /* first: compressor.h takes dm_expf from it in the device pass */

#include "compressor_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct compb_args {
	const align_bf16 *x, *wk, *wz, *dc;
	const float *ape, *w;
	align_bf16 *dx;
	float *dwk, *dwz, *dape, *dw;
	float *Kv, *Zv, *dK, *dZ, *C, *tmp, *dC, *n; /* workspace */
	align_bf16 *gy;				     /* workspace */
	struct compressor_bwd_cfg c;
};

#define COMPB_LOOP(i, n)                                                                                               \
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__global__ void compb_proj_kernel(compb_args a)
{
	const int64_t NF = a.c.o.N * a.c.o.F, D = a.c.o.D;
	COMPB_LOOP(i, a.c.o.T * a.c.o.K * NF)
	{
		int64_t t = i / NF, j = i - t * NF;
		compressor_proj(&a.c.o.c, a.x + t * D, a.wk + j * D, a.wz + j * D, D, a.ape[(t % a.c.o.K) * NF + j],
				&a.Kv[i], &a.Zv[i]);
		a.dK[i] = a.dZ[i] = 0.0f;
	}
}

__global__ void compb_pool_kernel(compb_args a)
{
	const int64_t F = a.c.o.F;
	COMPB_LOOP(i, a.c.o.T * F)
	{
		int64_t g = i / F, ch = i - g * F;
		struct compressor_win win = compressor_window(a.Kv, a.Zv, g, ch, a.c.o.K, a.c.o.N, F);
		a.C[i] = compressor_pool(&a.c.o.c, &win);
	}
}

__global__ void compb_row_kernel(compb_args a)
{
	const int64_t F = a.c.o.F;
	COMPB_LOOP(g, a.c.o.T)
	{
		float *C = a.C + g * F, *tmp = a.tmp + g * F;
		align_bf16 *gy = a.gy + g * F;
		compressor_norm_row(&a.c.o.c, C, a.w, F, g, gy);
		float r = compressor_norm_factor(&a.c.o.c, C, F, g);
		compressor_bwd_grad_row(&a.c, a.dc + g * F, (int32_t)(a.c.o.pos0 + g * a.c.o.K), gy, tmp);
		compressor_bwd_norm_row(&a.c, C, r, a.w, gy, tmp, a.dC + g * F, a.n + g * F);
	}
}

__global__ void compb_poolbwd_kernel(compb_args a)
{
	const int64_t F = a.c.o.F;
	COMPB_LOOP(i, a.c.o.T * F)
	{
		int64_t g = i / F, ch = i - g * F;
		compressor_bwd_pool(&a.c.o.c, a.Kv, a.Zv, a.dK, a.dZ, g, ch, a.c.o.K, a.c.o.N, F, a.dC[i]);
	}
}

__global__ void compb_grad_kernel(compb_args a)
{
	const int64_t NF = a.c.o.N * a.c.o.F, D = a.c.o.D, TK = a.c.o.T * a.c.o.K, nx = TK * D;
	COMPB_LOOP(i, nx + 2 * NF * D)
	{
		if (i < nx) {
			int64_t t = i / D, d = i - t * D;
			a.dx[i] = compressor_bwd_dx(&a.c.o.c, a.dK + t * NF, a.dZ + t * NF, a.wk, a.wz, NF, D, d);
		} else {
			int64_t k = i - nx, gate = k >= NF * D, e = gate ? k - NF * D : k, j = e / D, d = e - j * D;
			float v = compressor_bwd_dwproj(&a.c.o.c, a.dK, a.dZ, a.x, TK, NF, D, j, d, (int)gate);
			(gate ? a.dwz : a.dwk)[e] = v;
		}
	}
}

__global__ void compb_gsum_kernel(compb_args a)
{
	const int64_t NF = a.c.o.N * a.c.o.F, K = a.c.o.K, T = a.c.o.T, F = a.c.o.F;
	COMPB_LOOP(i, K * NF + F)
	{
		if (i < K * NF)
			a.dape[i] = compressor_bwd_gsum(a.dZ + i, T, K * NF);
		else
			a.dw[i - K * NF] = compressor_bwd_gsum(a.n + (i - K * NF), T, F);
	}
}

extern "C" int compressor_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				       int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				       struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	compb_args a;
	ALIGN_TRY(dev->err, compressor_bwd_cfg_init(&a.c, (const struct compressor_params *)params, m, in, n_in, out,
						    n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "compressor_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("compressor_bwd", "negative launch knob");
	a.x = (const align_bf16 *)in[0].data;
	a.wk = (const align_bf16 *)in[1].data;
	a.wz = (const align_bf16 *)in[2].data;
	a.ape = (const float *)in[3].data;
	a.w = (const float *)in[4].data;
	a.dc = (const align_bf16 *)in[5].data;
	a.dx = (align_bf16 *)out[0].data;
	a.dwk = (float *)out[1].data;
	a.dwz = (float *)out[2].data;
	a.dape = (float *)out[3].data;
	a.dw = (float *)out[4].data;
	const int64_t T = a.c.o.T, K = a.c.o.K, F = a.c.o.F, NF = a.c.o.N * F, D = a.c.o.D;
	size_t nkz = (size_t)(T * K * NF), nr = (size_t)(T * F);
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (4 * nkz + 5 * nr + 1) * sizeof(float), &ws));
	a.Kv = (float *)ws;
	a.Zv = a.Kv + nkz;
	a.dK = a.Zv + nkz;
	a.dZ = a.dK + nkz;
	a.C = a.dZ + nkz;
	a.tmp = a.C + nr;
	a.dC = a.tmp + nr;
	a.n = a.dC + nr;
	a.gy = (align_bf16 *)(a.n + nr);
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	int64_t cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (L->grid_cap > 0 && cap > L->grid_cap)
		cap = L->grid_cap;
	void (*kern[6])(compb_args) = {compb_proj_kernel,    compb_pool_kernel, compb_row_kernel,
				       compb_poolbwd_kernel, compb_grad_kernel, compb_gsum_kernel};
	int64_t work[6] = {(int64_t)nkz, (int64_t)nr, T, (int64_t)nr, T * K * D + 2 * NF * D, K * NF + F};
	for (int k = 0; k < 6; k++) {
		if (work[k] <= 0)
			continue;
		ALIGN_TRY(dev->err, rows_max_block(kern[k], &maxb));
		int b = L->serial > 0 ? 1 : (block > maxb ? maxb : block);
		int64_t grid = L->serial > 0 ? 1 : (work[k] + b - 1) / b;
		grid = grid > cap ? cap : grid;
		ALIGN_CUDA_LAUNCH(kern[k], (unsigned)grid, b, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	}
	return ALIGN_OK;
}
