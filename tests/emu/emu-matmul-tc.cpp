/* emu-matmul-tc.cpp: the tensor-core matmul's logic (kernels/ops/matmul_tc.cu compiled for the host emulator,
 * tests/emu: fibers for threads, host emulations of cp.async / ldmatrix / mma.sync) checked on a machine
 * without a GPU: for y = a[:M] @ b^T with the given N, K and M,
 *   - every element of the M-row result within 2^-8 |ref| + (K/16 + 2) 2^-23 S of a binary64 reference
 *     (S = sum |a_k b_k|; the emulated mma sums 16 products and the accumulator in binary64 and
 *     rounds once to fp32, so the bf16 output rounding and one fp32 rounding per k16 step remain),
 *   - for M' in {1, 2, 7, 8, 17, 127, 128, 129, 200, M} (those <= M): rows 0..M'-1 equal the M-row result
 *     byte for byte and nothing is written past row M' - 1.
 * It proves indexing, swizzle, fragment layouts, the cp.async pipeline and the epilogue; not the tensor
 * cores' rounding, not speed (tests/gpu/test-matmul-tc.cu on a GPU does that).
 * Run: tests/emu/run-emu-matmul-tc.sh [N K M]   (default 264 200 260: ~3 min on one core).
 * Exit status: 0 pass, 1 fail, 2 error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "matmul_tc.h"
#include "numerics.h"
#include "rng.h"

static int run(int64_t m, int64_t n, int64_t k, const align_bf16 *a, const align_bf16 *b, align_bf16 *y)
{
	struct matmul_tc_params p = {m, n, k};
	int rc = matmul_tc_fwd_cuda(&p, a, b, y, NULL);
	if (rc)
		fprintf(stderr, "error: matmul_tc_fwd_cuda(m=%lld) returned %d\n", (long long)m, rc);
	return rc;
}

int main(int argc, char **argv)
{
	int64_t N = argc > 3 ? atoll(argv[1]) : 264, K = argc > 3 ? atoll(argv[2]) : 200,
		MM = argc > 3 ? atoll(argv[3]) : 260;
	align_bf16 *a = NULL, *b = NULL, *y0 = NULL, *y1 = NULL;
	if (N < 1 || K < 8 || K % 8 || MM < 1 || cudaMalloc((void **)&a, MM * K * 2) ||
	    cudaMalloc((void **)&b, N * K * 2) || cudaMalloc((void **)&y0, MM * N * 2) ||
	    cudaMalloc((void **)&y1, MM * N * 2)) {
		fprintf(stderr, "usage: emu-matmul-tc N K M (K a multiple of 8)\n");
		return 2;
	}
	for (int64_t i = 0; i < MM * K; i++)
		a[i] = align_f32_to_bf16(align_rng_normalish(7, 1, (uint64_t)i));
	for (int64_t i = 0; i < N * K; i++)
		b[i] = align_f32_to_bf16(align_rng_normalish(7, 2, (uint64_t)i) * 0.0625f);
	memset(y0, 0xff, (size_t)(MM * N * 2));
	if (run(MM, N, K, a, b, y0))
		return 2;
	int fails = 0;
	double worst = 0;
	for (int64_t r = 0; r < MM; r++)
		for (int64_t j = 0; j < N; j++) {
			double ref = 0, S = 0;
			for (int64_t k = 0; k < K; k++) {
				double p = (double)align_bf16_to_f32(a[r * K + k]) * align_bf16_to_f32(b[j * K + k]);
				ref += p;
				S += fabs(p);
			}
			double got = align_bf16_to_f32(y0[r * N + j]);
			double tol = ldexp(fabs(ref), -8) + (double)(K / 16 + 2) * ldexp(S, -23) + 1e-30;
			double q = got == got ? fabs(got - ref) / tol : INFINITY;
			worst = q > worst ? q : worst;
			if (q > 1 && fails++ < 5)
				printf("  (%lld, %lld): got %.9g, reference %.9g\n", (long long)r, (long long)j, got,
				       ref);
		}
	printf("%s N=%lld K=%lld M=%lld: fp64 reference, worst err/tol %.3g\n", fails ? "FAIL" : "PASS", (long long)N,
	       (long long)K, (long long)MM, worst);
	const int64_t ms[] = {1, 2, 7, 8, 17, 127, 128, 129, 200, MM};
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
		int64_t m = ms[i];
		if (m > MM)
			continue;
		memset(y1, 0xff, (size_t)(MM * N * 2));
		if (run(m, N, K, a, b, y1))
			return 2;
		int same = memcmp(y0, y1, (size_t)(m * N * 2)) == 0, over = 0;
		for (int64_t j = m * N; j < MM * N; j++)
			over |= y1[j] != 0xffff;
		printf("%s M=%lld: rows equal the M=%lld rows%s\n", same && !over ? "PASS" : "FAIL", (long long)m,
		       (long long)MM, over ? ", but it wrote past its last row" : "");
		fails += !same || over;
	}
	return fails ? 1 : 0;
}
