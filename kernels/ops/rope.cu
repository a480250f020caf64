/* rope.cu: CUDA twin of RoPE / inverse RoPE (contract: rope.h; specification: rope.c).
 * x[T,H,D] bf16, pos[T] i32 -> y[T,H,D] bf16, the C twin's bytes in every portable mode: the element code
 * is rope.h's (rope_freq, rope_cos_sin, rope_pair), shared with the C twin and compiled with --fmad=false;
 * shapes and modes come from rope_cfg_init (rope.c). MATH_IMPL=libm has no GPU twin (status 4);
 * MATH_IMPL=cuda / cuda_fast take powf/cosf/sinf (or __powf/__cosf/__sinf) from CUDA, as PyTorch eager
 * computes the frequency and cos/sin tables on the GPU (checked by tests/gpu/torch-compare.py).
 *
 * Layout: each block first computes the rope_dim/2 frequencies into (dynamic) shared memory (one per thread, the
 * same rope_freq), then a grid-stride loop over work items: per head row, rope_dim/2 pairs (each thread
 * evaluates cos/sin of its pair's angle and writes both elements) followed by the D - rope_dim copied
 * elements. Knobs: block (default 256), grid_cap (default at most 16 blocks per SM); rows_per_block is not
 * used; serial: one thread per head row running rope_row as the C twin does.
 *
 * Napkin maths (DSv4-Flash q: T = 16384 tokens x 64 heads x 512 dims): 2 x 1.07 GB of bf16 traffic, ~0.75 ms
 * at ~2.9 TB/s; cos/sin in binary64 cost ~60 fp64 operations per pair (1/16 of the elements), below the
 * memory time on an H100.
 */
#include "rope.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct rope_args {
	const align_bf16 *x;
	const int32_t *pos;
	align_bf16 *y;
	struct rope_op_cfg c;
};

__global__ void rope_kernel(rope_args a)
{
	float *freq = (float *)align_cuda_dyn_smem(); /* rope_dim/2 floats */
	const struct rope_cfg *r = &a.c.r;
	const int np = r->rd / 2;
	for (int j = threadIdx.x; j < np; j += blockDim.x)
		freq[j] = rope_freq(r, j);
	__syncthreads();
	const int64_t D = a.c.D, per_row = np + (D - r->rd), rows = a.c.T * a.c.H;
	const int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows * per_row; i += stride) {
		int64_t row = i / per_row, k = i - row * per_row;
		const align_bf16 *x = a.x + row * D;
		align_bf16 *y = a.y + row * D;
		if (k < np) {
			int64_t ia, ib;
			rope_pair_index(r, D, (int)k, &ia, &ib);
			float cs, sn, ya, yb;
			rope_cos_sin(r, __ldg(a.pos + row / a.c.H), freq[k], &cs, &sn);
			rope_pair(r, align_bf16_to_f32(x[ia]), align_bf16_to_f32(x[ib]), cs, sn, &ya, &yb);
			y[ia] = align_f32_to_bf16(ya);
			y[ib] = align_f32_to_bf16(yb);
		} else {
			int64_t e = (r->first ? r->rd : 0) + (k - np);
			y[e] = x[e];
		}
	}
}

/* launch.serial: one thread per head row, rope_row as in rope.c */
__global__ void rope_serial_kernel(rope_args a)
{
	float freq[ROPE_MAX_DIM / 2];
	for (int j = 0; j < a.c.r.rd / 2; j++)
		freq[j] = rope_freq(&a.c.r, j);
	for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < a.c.T * a.c.H;
	     row += (int64_t)gridDim.x * blockDim.x)
		rope_row(&a.c.r, freq, a.pos[row / a.c.H], a.c.D, a.x + row * a.c.D, a.y + row * a.c.D);
}

extern "C" int rope_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			     struct align_tensor *out, int n_out, const struct align_launch *launch,
			     struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	rope_args a;
	ALIGN_TRY(dev->err, rope_cfg_init(&a.c, (const struct rope_params *)params, m, in, n_in, out, n_out,
					  ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "rope", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("rope", "negative launch knob");
	a.x = (const align_bf16 *)in[0].data;
	a.pos = (const int32_t *)in[1].data;
	a.y = (align_bf16 *)out[0].data;
	const int64_t rows = a.c.T * a.c.H;
	if (rows <= 0 || a.c.D <= 0)
		return ALIGN_OK;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	int rc = rows_max_block(L->serial > 0 ? rope_serial_kernel : rope_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block;
	int64_t work = L->serial > 0 ? rows : rows * (a.c.r.rd / 2 + a.c.D - a.c.r.rd);
	int64_t grid = (work + block - 1) / block;
	int64_t cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (grid > cap)
		grid = cap;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	if (L->serial > 0)
		ALIGN_CUDA_LAUNCH(rope_serial_kernel, (unsigned)grid, block, 0, stream, a);
	else
		ALIGN_CUDA_LAUNCH(rope_kernel, (unsigned)grid, block, (a.c.r.rd / 2) * sizeof(float), stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
