/* test-rows-cuda.cu: the block-level reduction orders of kernels/cuda/rows_cuda.cuh (rows_reduce, used by the
 * row-wise CUDA twins) against reduce.h's align_reduce, bit for bit, with binary32 sums as output so that
 * an association difference cannot hide behind a bf16 rounding (the op-level test can miss one).
 * Values: random signs and magnitudes over 2^-20 .. 2^20 (every association gives different bits), plus
 * rows with +-inf pairs (NaN sums: the host's NaN bits, nan_host.h), for n = 1 .. 40 and around powers
 * of two up to 70000, threads per row G = 32, 64, 96, 512, rows per block 1 .. 3, squares on and off,
 * orders seq, pairwise, warp32, fp64. The registers layout (rows_regs_load + rows_regs_sum, what the
 * rmsnorm and qnorm kernels use when a row fits in registers) the same way on bf16 rows (n a multiple of
 * 8 up to 16384; G = 32, 64, 96, 128, 256, 512 with LPT = rows_regs_lpt(n, G)), and every thread of the
 * group must return the same bits (the broadcast).
 * Exit status: 0 pass, 1 mismatch, 2 CUDA error, 77 skip (no CUDA device).
 * Run: build-cu2/tests/gpu/test-gpu-rows-cuda (or tests/emu/run-emu.sh ... test-rows-cuda). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "gpu_skip.h"
#include "rng.h"
#include "rows_cuda.cuh"

struct rows_f32 {
	const float *p;
	ALIGN_HD float operator()(int64_t i) const
	{
		return p[i];
	}
	__device__ void load8(int64_t i0, float e[8]) const
	{
		for (int q = 0; q < 8; q++)
			e[q] = p[i0 + q];
	}
};

/* out[r] = rows_reduce over row r of x (rows of n floats, read from global memory) */
__global__ void rows_test_kernel(const float *x, float *out, int64_t rows, int64_t n, int order, int square, int rpb)
{
	rows_geom rg = rows_geom_make(rpb);
	float *scr = (float *)align_cuda_dyn_smem() + (size_t)rg.g * (size_t)rows_scratch_floats(n);
	for (int64_t r0 = (int64_t)blockIdx.x * rpb; r0 < rows; r0 += (int64_t)gridDim.x * rpb) {
		int64_t row = r0 + rg.g;
		bool valid = row < rows;
		rows_f32 xr = {x + (valid ? row : 0) * n};
		float s = rows_reduce(order, xr, n, square, scr, rg, valid);
		if (valid && rg.gt == 0)
			out[row] = s;
		__syncthreads();
	}
}

/* out[row * G + gt] = rows_regs_sum over bf16 row `row` of x, as every thread of the group sees it */
template <int LPT>
__global__ void rows_regs_test_kernel(const align_bf16 *x, float *out, int64_t rows, int64_t n, int order, int square,
				      int rpb)
{
	rows_geom rg = rows_geom_make(rpb);
	size_t per = (size_t)rows_scratch_floats(n) * 4 + (size_t)n * 2;
	unsigned char *sm = align_cuda_dyn_smem() + (size_t)rg.g * per;
	float *scr = (float *)sm;
	align_bf16 *xs = (align_bf16 *)(sm + rows_scratch_floats(n) * 4);
	for (int64_t r0 = (int64_t)blockIdx.x * rpb; r0 < rows; r0 += (int64_t)gridDim.x * rpb) {
		int64_t row = r0 + rg.g;
		bool valid = row < rows;
		rows_bf16_row xg = {x + (valid ? row : 0) * n};
		uint4 v[LPT];
		rows_regs_load<LPT>(v, xg.p, n / 8, rg, valid);
		float s = rows_regs_sum<LPT>(order, v, xg, n, square, scr, xs, rg, valid);
		if (valid)
			out[row * rg.G + rg.gt] = s;
	}
}

static float value(uint64_t seed, uint64_t i, int nan_row)
{
	uint64_t u = align_rng_u64(seed, 7, i);
	float m = align_rng_uniform(seed, 8, i) + 0.5f;
	int e = (int)(u % 41) - 20;
	float v = m * (e >= 0 ? (float)(1u << e) : 1.0f / (float)(1u << -e));
	if (nan_row && (u >> 8) % 97 == 0)
		v = (u >> 20) & 1 ? 1.0f / 0.0f : -1.0f / 0.0f;
	return (u >> 32) & 1 ? -v : v;
}

static int check(int64_t n, int G, int rpb, int order, int square, long *cases, int *fails)
{
	const int64_t rows = 5;
	size_t bytes = (size_t)(rows * n) * sizeof(float);
	float *hx = (float *)malloc(bytes), *dx = NULL, *dout = NULL, hout[5];
	if (!hx) {
		fprintf(stderr, "error: out of memory\n");
		return 2;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t i = 0; i < n; i++)
			hx[r * n + i] = value(0x5eed + (uint64_t)n, (uint64_t)(r * n + i), r == 4);
	CK(cudaMalloc((void **)&dx, bytes));
	CK(cudaMalloc((void **)&dout, sizeof hout));
	CK(cudaMemcpy(dx, hx, bytes, cudaMemcpyHostToDevice));
	size_t smem = (size_t)rpb * (size_t)rows_scratch_floats(n) * sizeof(float);
	CK(rows_smem_optin(rows_test_kernel, smem));
	int grid = (int)((rows + rpb - 1) / rpb);
	ALIGN_CUDA_LAUNCH(rows_test_kernel, grid > 2 ? 2 : grid, G * rpb, smem, (cudaStream_t)0, (const float *)dx,
			  dout, rows, n, order, square, rpb);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost));
	for (int64_t r = 0; r < rows; r++) {
		float want = align_reduce((enum align_reduce_order)order, hx + r * n, n, 1, 0, square);
		(*cases)++;
		if (align_f32_bits(want) != align_f32_bits(hout[r]) && (*fails)++ < 20)
			printf("FAIL n=%" PRId64 " G=%d rpb=%d order=%d square=%d row %" PRId64 ": got %08" PRIx32
			       " want %08" PRIx32 "\n",
			       n, G, rpb, order, square, r, align_f32_bits(hout[r]), align_f32_bits(want));
	}
	cudaFree(dx);
	cudaFree(dout);
	free(hx);
	return 0;
}

typedef void (*regs_kernel_fn)(const align_bf16 *, float *, int64_t, int64_t, int, int, int);

static regs_kernel_fn regs_kernel(int lpt)
{
	return lpt == 1	  ? rows_regs_test_kernel<1>
	       : lpt == 2 ? rows_regs_test_kernel<2>
	       : lpt == 4 ? rows_regs_test_kernel<4>
			  : rows_regs_test_kernel<8>;
}

/* the registers layout: 5 bf16 rows of n (n % 8 == 0), G threads per row, rpb rows per block */
static int check_regs(int64_t n, int G, int rpb, int order, int square, long *cases, int *fails)
{
	const int64_t rows = 5;
	int lpt = rows_regs_lpt(n, G);
	if (lpt == 0)
		return 0;
	regs_kernel_fn k = regs_kernel(lpt);
	struct cudaFuncAttributes fa;
	CK(cudaFuncGetAttributes(&fa, k));
	if (G * rpb > fa.maxThreadsPerBlock)
		return 0;
	size_t xb = (size_t)(rows * n) * sizeof(align_bf16), ob = (size_t)(rows * G) * sizeof(float);
	align_bf16 *hx = (align_bf16 *)malloc(xb), *dx = NULL;
	float *hf = (float *)malloc((size_t)n * sizeof(float)), *hout = (float *)malloc(ob), *dout = NULL;
	if (!hx || !hf || !hout) {
		fprintf(stderr, "error: out of memory\n");
		return 2;
	}
	for (int64_t r = 0; r < rows; r++)
		for (int64_t i = 0; i < n; i++)
			hx[r * n + i] = align_f32_to_bf16(value(0xb16 + (uint64_t)n, (uint64_t)(r * n + i), r == 4));
	CK(cudaMalloc((void **)&dx, xb));
	CK(cudaMalloc((void **)&dout, ob));
	CK(cudaMemcpy(dx, hx, xb, cudaMemcpyHostToDevice));
	size_t smem = (size_t)rpb * ((size_t)rows_scratch_floats(n) * 4 + (size_t)n * 2);
	CK(rows_smem_optin(k, smem));
	int grid = (int)((rows + rpb - 1) / rpb);
	ALIGN_CUDA_LAUNCH(k, grid > 2 ? 2 : grid, G * rpb, smem, (cudaStream_t)0, (const align_bf16 *)dx, dout, rows, n,
			  order, square, rpb);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	CK(cudaMemcpy(hout, dout, ob, cudaMemcpyDeviceToHost));
	for (int64_t r = 0; r < rows; r++) {
		for (int64_t i = 0; i < n; i++)
			hf[i] = align_bf16_to_f32(hx[r * n + i]);
		float want = align_reduce((enum align_reduce_order)order, hf, n, 1, 0, square);
		(*cases)++;
		for (int t = 0; t < G; t++)
			if (align_f32_bits(want) != align_f32_bits(hout[r * G + t])) {
				if ((*fails)++ < 20)
					printf("FAIL registers n=%" PRId64
					       " G=%d LPT=%d rpb=%d order=%d square=%d row %" PRId64
					       " thread %d: got %08" PRIx32 " want %08" PRIx32 "\n",
					       n, G, lpt, rpb, order, square, r, t, align_f32_bits(hout[r * G + t]),
					       align_f32_bits(want));
				break;
			}
	}
	cudaFree(dx);
	cudaFree(dout);
	free(hx);
	free(hf);
	free(hout);
	return 0;
}

int main(int argc, char **argv)
{
	gpu_skip_if_none();
	int quick = argc > 1 && !strcmp(argv[1], "--quick");
	struct cudaFuncAttributes fa;
	CK(cudaFuncGetAttributes(&fa, rows_test_kernel));
	int64_t ns[128];
	int nn = 0;
	for (int64_t n = 1; n <= 40; n++)
		ns[nn++] = n;
	static const int64_t big[] = {63, 64, 65, 255, 256, 257, 511, 1000, 4095, 4096, 4097, 8197, 33000, 70000};
	for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
		if (!quick || big[i] < 5000)
			ns[nn++] = big[i];
	static const int Gs[] = {32, 64, 96, 512};
	static const int orders[] = {ALIGN_REDUCE_SEQ, ALIGN_REDUCE_PAIRWISE, ALIGN_REDUCE_WARP32, ALIGN_REDUCE_F64};
	long cases = 0;
	int fails = 0, rc = 0;
	for (int k = 0; k < nn && !rc; k++)
		for (int gi = 0; gi < 4 && !rc; gi++)
			for (int rpb = 1; rpb <= 3 && !rc; rpb++) {
				if (Gs[gi] * rpb > fa.maxThreadsPerBlock || (quick && (rpb == 2 || Gs[gi] == 512)))
					continue;
				for (int o = 0; o < 4 && !rc; o++)
					for (int sq = 0; sq < 2 && !rc; sq++)
						rc = check(ns[k], Gs[gi], rpb, orders[o], sq, &cases, &fails);
			}
	long staged = cases;
	static const int64_t rn[] = {8, 16, 24, 32, 40, 64, 136, 256, 264, 512, 1000, 2048, 4096, 8192, 8200, 16384};
	static const int rGs[] = {32, 64, 96, 128, 256, 512};
	for (size_t k = 0; k < sizeof rn / sizeof rn[0] && !rc; k++)
		for (size_t gi = 0; gi < sizeof rGs / sizeof rGs[0] && !rc; gi++)
			for (int rpb = 1; rpb <= 3 && !rc; rpb++) {
				if (quick && (rpb == 2 || rn[k] > 5000 || rGs[gi] == 256))
					continue;
				for (int o = 0; o < 4 && !rc; o++)
					for (int sq = 0; sq < 2 && !rc; sq++)
						rc = check_regs(rn[k], rGs[gi], rpb, orders[o], sq, &cases, &fails);
			}
	printf("rows-cuda: %ld row sums compared with align_reduce (seq, pairwise, warp32, fp64; n up to %" PRId64
	       "; staged %ld, registers layout %ld), %d failures%s\n",
	       cases, ns[nn - 1], staged, cases - staged, fails, rc ? ", stopped by an error" : "");
	return rc ? rc : fails ? 1 : 0;
}
