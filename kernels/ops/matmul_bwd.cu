/* matmul_bwd.cu: CUDA twin of the matmul backward (contract: matmul_bwd.h; specification: matmul_bwd.c).
 * a[T,D], b[F,D], dy[T,F] f32, main_grad[F,D] (WGRAD_DTYPE) -> da[T,D] (MATMUL_OUT), db[F,D] (WGRAD_DTYPE),
 * the C twin's bytes in every mode (the op has no GPU-only value): both twins evaluate each output with
 * the same header functions (matmul_bwd_dgrad, matmul_bwd_wgrad: one chain per output in the stated token
 * or K order, every NaN-capable operation through nan_host.h), so the order cannot drift between them.
 *
 * Layout: one thread per output element, grid-stride, da first then db (two launches on the stream).
 * Knobs: block (default 256), grid_cap (default at most 16 blocks per SM); rows_per_block not used;
 * serial: one thread per output row, the C twin's loops.
 * Napkin maths: 2 T D F multiply-adds per GEMM, operands re-read from L2 per output (no tiling): this is
 * the reference engine for bits, not for speed (the vendor engines of issue 18 are a later step).
 */
#include "matmul_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct mmb_args {
	const float *a, *b, *dy; /* [T,D], [F,D], [T,F] */
	const void *mg;		 /* main_grad [F,D], WGRAD_DTYPE */
	void *da, *db;		 /* [T,D] MATMUL_OUT, [F,D] WGRAD_DTYPE */
	struct matmul_bwd_cfg c;
};

__device__ static inline void mmb_store(void *p, int bf16, int64_t i, float v)
{
	if (bf16)
		((align_bf16 *)p)[i] = align_f32_to_bf16(v);
	else
		((float *)p)[i] = v;
}

__device__ static inline float mmb_mg(const mmb_args &a, int64_t i)
{
	if (a.c.wacc == ALIGN_WGRAD_ACCUM_FRESH)
		return 0.0f;
	return a.c.w_dtype == ALIGN_DT_BF16 ? align_bf16_to_f32(((const align_bf16 *)a.mg)[i])
					    : ((const float *)a.mg)[i];
}

__global__ void matmul_bwd_dgrad_kernel(mmb_args a)
{
	int64_t n = a.c.T * a.c.D, stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		int64_t t = i / a.c.D, d = i - t * a.c.D;
		mmb_store(a.da, a.c.da_dtype == ALIGN_DT_BF16, i, matmul_bwd_dgrad(&a.c, a.dy, a.b, t, d));
	}
}

__global__ void matmul_bwd_wgrad_kernel(mmb_args a)
{
	int64_t n = a.c.F * a.c.D, stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		int64_t f = i / a.c.D, d = i - f * a.c.D;
		mmb_store(a.db, a.c.w_dtype == ALIGN_DT_BF16, i, matmul_bwd_wgrad(&a.c, a.dy, a.a, f, d, mmb_mg(a, i)));
	}
}

/* launch.serial: one thread per row of da, then of db, the C twin's loops */
__global__ void matmul_bwd_serial_kernel(mmb_args a)
{
	int64_t rows = a.c.T + a.c.F, stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride)
		for (int64_t d = 0; d < a.c.D; d++) {
			if (r < a.c.T) {
				mmb_store(a.da, a.c.da_dtype == ALIGN_DT_BF16, r * a.c.D + d,
					  matmul_bwd_dgrad(&a.c, a.dy, a.b, r, d));
			} else {
				int64_t f = r - a.c.T, i = f * a.c.D + d;
				mmb_store(a.db, a.c.w_dtype == ALIGN_DT_BF16, i,
					  matmul_bwd_wgrad(&a.c, a.dy, a.a, f, d, mmb_mg(a, i)));
			}
		}
}

static int64_t mmb_grid(int64_t work, int block, const struct align_launch *L, const struct align_dev *dev)
{
	int64_t grid = (work + block - 1) / block, cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	grid = grid > cap ? cap : grid; /* grid-stride beyond 16 blocks per SM */
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	return grid < 1 ? 1 : grid;
}

extern "C" int matmul_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				   int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				   struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	mmb_args a;
	ALIGN_TRY(dev->err, matmul_bwd_cfg_init(&a.c, (const struct matmul_bwd_params *)params, m, in, n_in, out, n_out,
						ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "matmul_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("matmul_bwd", "negative launch knob");
	a.a = (const float *)in[0].data;
	a.b = (const float *)in[1].data;
	a.dy = (const float *)in[2].data;
	a.mg = in[3].data;
	a.da = out[0].data;
	a.db = out[1].data;
	if (a.c.D <= 0 || (a.c.T <= 0 && a.c.F <= 0))
		return ALIGN_OK;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	if (L->serial > 0) {
		ALIGN_TRY(dev->err, rows_max_block(matmul_bwd_serial_kernel, &maxb));
		block = block > maxb ? maxb : block;
		ALIGN_CUDA_LAUNCH(matmul_bwd_serial_kernel, (unsigned)mmb_grid(a.c.T + a.c.F, block, L, dev), block, 0,
				  stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
		return ALIGN_OK;
	}
	int maxd = 0;
	ALIGN_TRY(dev->err, rows_max_block(matmul_bwd_wgrad_kernel, &maxb));
	ALIGN_TRY(dev->err, rows_max_block(matmul_bwd_dgrad_kernel, &maxd));
	maxb = maxd < maxb ? maxd : maxb;
	block = block > maxb ? maxb : block;
	if (a.c.T > 0) {
		ALIGN_CUDA_LAUNCH(matmul_bwd_dgrad_kernel, (unsigned)mmb_grid(a.c.T * a.c.D, block, L, dev), block, 0,
				  stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
	}
	if (a.c.F > 0) {
		ALIGN_CUDA_LAUNCH(matmul_bwd_wgrad_kernel, (unsigned)mmb_grid(a.c.F * a.c.D, block, L, dev), block, 0,
				  stream, a);
		OPS_CUDA_TRY(cudaGetLastError());
	}
	return ALIGN_OK;
}
