/* test-matmul-tc.cu: the batch-invariant tensor-core matmul (kernels/ops/matmul_tc.cu, matmul_tc_fwd_cuda) is
 *   1. deterministic: three runs of y = a[:8192] @ b^T give the same bytes;
 *   2. batch invariant: for every M of a sample of 1..8192 (all of 1..9, both sides of every power of
 *      two from 16 to 8192, and a few others), y = a[:M] @ b^T equals the first M rows of the M = 8192
 *      result byte for byte, and the bytes after row M of a pre-filled output are untouched;
 *   3. accurate: on 24 sampled rows (every column), |y - ref| <= tol against a binary64 reference of the
 *      same bf16 operands, with
 *        tol = 2^-8 |ref| + (K/16 + 1) 2^-21 S,   S = sum_k |a_k b_k|,
 *      i.e. the bf16 output rounding (half an ulp is 2^-9 relative; 2^-8 leaves room for the rounding of
 *      an inexact fp32 sum) plus up to 4 fp32 ulps of S per m16n8k16 step (K/16 sequential mma steps;
 *      tensor cores add the 16 exact products and the accumulator with truncation and limited
 *      alignment, so a plain K u S bound is not assumed). The worst err / tol and err / S are printed;
 *   4. refuses bad arguments: K % 8 != 0 and misaligned pointers (status 2), M = 0 is a no-op (status 0);
 *   5. at large shapes (M x N x K = 4096 x 4096 x 4096 and 4096 x 1536 x 7168, the bench's): 3 calls launched
 *      back to back into outputs pre-filled with 3 different byte patterns give identical bytes, and an fp64
 *      spot check of 16 elements of every output tile is within the tolerance of 3.
 * Every fill is cudaMemsetAsync on the test's stream and every copy back follows cudaStreamSynchronize: the
 * stream is cudaStreamNonBlocking, so a plain cudaMemset / cudaMemcpy (legacy default stream) is NOT
 * ordered with the kernel (the race that made tests/gpu/bench-matmul.cu report "CHANGED between calls").
 * Shapes (N, K): (1024, 1024), (1000, 7168) (N not a multiple of 8 or of the 256-column tile: scalar
 * stores), (264, 200) (K not a multiple of the 64-deep K tile). Inputs: bf16 of counter-RNG normal-ish
 * values (kernels/core/rng.h), a at scale 1, b at scale 1/16.
 * Exit status: 0 pass, 1 a check failed, 2 CUDA or host error, 77 skip (no CUDA device).
 * Run: build/tests/gpu/test-gpu-matmul-tc (meson test -C build --suite gpu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda_check.h"
#include "gpu-build-commit.h"
#include "gpu_skip.h"
#include "matmul_tc.h"
#include "numerics.h"
#include "rng.h"

#define MMAX 8192
#define SEED 0x7c7c7c7cull

struct shape {
	int64_t n, k;
};

static const struct shape shapes[] = {{1024, 1024}, {1000, 7168}, {264, 200}};

struct ctx {
	int64_t n, k;
	align_bf16 *a, *b, *y0, *y1; /* device: a[MMAX,k], b[n,k], y0 = the M = 8192 result, y1 scratch */
	align_bf16 *hy0, *hy1;	     /* host copies */
	cudaStream_t s;
	int fails;
};

__global__ void gen_bf16(align_bf16 *p, int64_t n, uint64_t stream, float scale)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		p[i] = align_f32_to_bf16(align_rng_normalish(SEED, stream, (uint64_t)i) * scale);
}

static int run_tc(struct ctx *c, int64_t m, align_bf16 *y)
{
	struct matmul_tc_params p = {m, c->n, c->k};
	int rc = matmul_tc_fwd_cuda(&p, c->a, c->b, y, c->s);
	if (rc) {
		fprintf(stderr, "error: matmul_tc_fwd_cuda(m=%lld, n=%lld, k=%lld) returned %d\n", (long long)m,
			(long long)c->n, (long long)c->k, rc);
		return 2;
	}
	CK(cudaStreamSynchronize(c->s));
	return 0;
}

static void verdict(struct ctx *c, int ok, const char *what)
{
	printf("%s n=%lld k=%lld %s\n", ok ? "PASS" : "FAIL", (long long)c->n, (long long)c->k, what);
	if (!ok)
		c->fails++;
}

/* 1. three full runs, same bytes */
static int check_determinism(struct ctx *c)
{
	size_t bytes = (size_t)MMAX * c->n * sizeof(align_bf16);
	if (run_tc(c, MMAX, c->y0))
		return 2;
	CK(cudaMemcpy(c->hy0, c->y0, bytes, cudaMemcpyDeviceToHost));
	int ok = 1;
	for (int r = 0; r < 2; r++) {
		CK(cudaMemsetAsync(c->y1, 0x5a, bytes, c->s)); /* on c->s: cudaMemset would not order with it */
		if (run_tc(c, MMAX, c->y1))
			return 2;
		CK(cudaMemcpy(c->hy1, c->y1, bytes, cudaMemcpyDeviceToHost));
		ok &= memcmp(c->hy0, c->hy1, bytes) == 0;
	}
	verdict(c, ok, "determinism: 3 runs at M = 8192, identical bytes");
	return 0;
}

/* 2. every sampled M: rows 0..M-1 equal the M = 8192 rows, nothing written past row M - 1 */
static int check_invariance(struct ctx *c)
{
	static const int64_t extra[] = {15,   16,   17,	  31,	32,   33,   63,	  64,	65,   127,  128,
					129,  255,  256,  257,	383,  511,  512,  513,	1000, 1023, 1024,
					1025, 2047, 2048, 2049, 3000, 4095, 4096, 4097, 6000, 8191, 8192};
	int64_t ms[64];
	int nm = 0;
	for (int64_t m = 1; m <= 9; m++)
		ms[nm++] = m;
	for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
		ms[nm++] = extra[i];
	int64_t bad_m = -1, overwrite_m = -1;
	size_t row = (size_t)c->n * sizeof(align_bf16);
	for (int i = 0; i < nm; i++) {
		int64_t m = ms[i];
		CK(cudaMemsetAsync(c->y1, 0xff, (size_t)MMAX * row, c->s));
		if (run_tc(c, m, c->y1))
			return 2;
		size_t got = (size_t)(m < MMAX ? m + 1 : m) * row;
		CK(cudaMemcpy(c->hy1, c->y1, got, cudaMemcpyDeviceToHost));
		if (bad_m < 0 && memcmp(c->hy1, c->hy0, (size_t)m * row) != 0)
			bad_m = m;
		if (m < MMAX && overwrite_m < 0)
			for (int64_t j = 0; j < c->n; j++)
				if (c->hy1[m * c->n + j] != 0xffff) {
					overwrite_m = m;
					break;
				}
	}
	char msg[160];
	if (bad_m < 0)
		snprintf(msg, sizeof msg,
			 "batch invariance: rows of a[:M] @ b^T equal the M = 8192 rows for %d values "
			 "of M in 1..8192",
			 nm);
	else
		snprintf(msg, sizeof msg, "batch invariance: M = %lld differs from the M = 8192 rows",
			 (long long)bad_m);
	verdict(c, bad_m < 0, msg);
	if (overwrite_m < 0)
		snprintf(msg, sizeof msg, "no write past row M - 1");
	else
		snprintf(msg, sizeof msg, "M = %lld wrote past its last row", (long long)overwrite_m);
	verdict(c, overwrite_m < 0, msg);
	return 0;
}

/* 3. 24 sampled rows against binary64 */
static int check_reference(struct ctx *c)
{
	static const int64_t rows[] = {0,    1,	   2,	 7,    8,    15,   16,	 127,  128,  129,  255,	 256,
				       1000, 2047, 2048, 3071, 4095, 4096, 5000, 6143, 7000, 8064, 8190, 8191};
	size_t nb = (size_t)c->n * c->k;
	align_bf16 *hb = (align_bf16 *)malloc(nb * sizeof *hb), *ha = (align_bf16 *)malloc((size_t)c->k * sizeof *ha);
	if (!hb || !ha) {
		free(hb);
		free(ha);
		fprintf(stderr, "error: out of memory for the host reference\n");
		return 2;
	}
	cudaError_t e = cudaMemcpy(hb, c->b, nb * sizeof *hb, cudaMemcpyDeviceToHost);
	double worst = 0, worst_rel = 0;
	int64_t wr = 0, wc = 0;
	for (size_t i = 0; e == cudaSuccess && i < sizeof rows / sizeof rows[0]; i++) {
		int64_t r = rows[i];
		e = cudaMemcpy(ha, c->a + r * c->k, (size_t)c->k * sizeof *ha, cudaMemcpyDeviceToHost);
		for (int64_t j = 0; e == cudaSuccess && j < c->n; j++) {
			double ref = 0, S = 0;
			for (int64_t k = 0; k < c->k; k++) {
				double p =
					(double)align_bf16_to_f32(ha[k]) * (double)align_bf16_to_f32(hb[j * c->k + k]);
				ref += p;
				S += fabs(p);
			}
			double got = (double)align_bf16_to_f32(c->hy0[r * c->n + j]);
			double err = fabs(got - ref);
			double tol = ldexp(fabs(ref), -8) + (double)(c->k / 16 + 1) * ldexp(S, -21) + 1e-30;
			double q = err == err ? err / tol : INFINITY; /* a NaN result is the worst */
			if (q > worst) {
				worst = q;
				wr = r;
				wc = j;
			}
			if (S > 0 && err / S > worst_rel)
				worst_rel = err / S;
		}
	}
	free(hb);
	free(ha);
	CK(e);
	char msg[200];
	snprintf(msg, sizeof msg,
		 "fp64 reference on 24 rows: worst err/tol %.3g at (%lld, %lld), worst err/S %.3g (2^-21 (K/16+1) = "
		 "%.3g)",
		 worst, (long long)wr, (long long)wc, worst_rel, (double)(c->k / 16 + 1) * ldexp(1.0, -21));
	verdict(c, worst <= 1.0, msg);
	return 0;
}

/* 4. refusals */
static int check_refusals(struct ctx *c)
{
	struct matmul_tc_params p = {16, c->n, c->k - 4};
	int ok = matmul_tc_fwd_cuda(&p, c->a, c->b, c->y1, c->s) == 2;
	p.k = c->k;
	ok &= matmul_tc_fwd_cuda(&p, (const char *)c->a + 2, c->b, c->y1, c->s) == 2;
	ok &= matmul_tc_fwd_cuda(&p, c->a, c->b, (char *)c->y1 + 8, c->s) == 2;
	p.m = 0;
	ok &= matmul_tc_fwd_cuda(&p, c->a, c->b, c->y1, c->s) == 0;
	CK(cudaStreamSynchronize(c->s));
	verdict(c, ok, "refusals: k % 8 != 0 and misaligned pointers give 2, m = 0 gives 0");
	return 0;
}

static int run_shape(const struct shape *sh, cudaStream_t s, int *fails)
{
	struct ctx c;
	memset(&c, 0, sizeof c);
	c.n = sh->n;
	c.k = sh->k;
	c.s = s;
	size_t ybytes = (size_t)MMAX * c.n * sizeof(align_bf16);
	int rc = 2;
	if (cudaMalloc((void **)&c.a, (size_t)MMAX * c.k * sizeof(align_bf16)) != cudaSuccess ||
	    cudaMalloc((void **)&c.b, (size_t)c.n * c.k * sizeof(align_bf16)) != cudaSuccess ||
	    cudaMalloc((void **)&c.y0, ybytes) != cudaSuccess || cudaMalloc((void **)&c.y1, ybytes) != cudaSuccess ||
	    !(c.hy0 = (align_bf16 *)malloc(ybytes)) || !(c.hy1 = (align_bf16 *)malloc(ybytes))) {
		fprintf(stderr, "error: allocation failed for n=%lld k=%lld\n", (long long)c.n, (long long)c.k);
		goto out;
	}
	gen_bf16<<<1024, 256, 0, s>>>(c.a, (int64_t)MMAX * c.k, 1, 1.0f);
	gen_bf16<<<1024, 256, 0, s>>>(c.b, c.n * c.k, 2, 0.0625f);
	if (cudaGetLastError() != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) {
		fprintf(stderr, "error: input generation failed\n");
		goto out;
	}
	if (check_determinism(&c) || check_invariance(&c) || check_reference(&c) || check_refusals(&c))
		goto out;
	rc = 0;
out:
	cudaFree(c.a);
	cudaFree(c.b);
	cudaFree(c.y0);
	cudaFree(c.y1);
	free(c.hy0);
	free(c.hy1);
	*fails += c.fails;
	return rc;
}

/* 5. large shapes (the bench's): LARGE_RUNS calls launched back to back on one stream into outputs
 * pre-filled (on that stream) with different bytes, one synchronisation, then the bytes compared
 * (an element a call failed to write keeps its own fill and differs), and an fp64 spot check of
 * LARGE_SPOTS elements of every 128 x 256 output tile (positions from a counter hash, so every tile
 * row offset and column offset class is sampled across tiles) with the tolerance of check 3. */
#define LARGE_RUNS 3
#define LARGE_SPOTS 16

struct large_shape {
	int64_t m, n, k;
};

static const struct large_shape large_shapes[] = {{4096, 4096, 4096}, {4096, 1536, 7168}};

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static int check_large(const struct large_shape *sh, cudaStream_t s, int *fails)
{
	const int64_t m = sh->m, n = sh->n, k = sh->k;
	const size_t na = (size_t)(m * k), nb = (size_t)(n * k), ny = (size_t)(m * n);
	static const int fill[LARGE_RUNS] = {0x5a, 0xa5, 0xff};
	align_bf16 *a = NULL, *b = NULL, *y[LARGE_RUNS] = {NULL}, *ha = NULL, *hb = NULL, *hy[LARGE_RUNS] = {NULL};
	int rc = 2, ok = 1, bad_run = -1;
	int64_t first_diff = -1, tiles_m = (m + 127) / 128, tiles_n = (n + 255) / 256;
	double worst = 0, worst_rel = 0;
	int64_t wr = 0, wc = 0;
	char msg[240];
	if (cudaMalloc((void **)&a, na * 2) != cudaSuccess || cudaMalloc((void **)&b, nb * 2) != cudaSuccess ||
	    !(ha = (align_bf16 *)malloc(na * 2)) || !(hb = (align_bf16 *)malloc(nb * 2))) {
		fprintf(stderr, "error: allocation failed for the %lld x %lld x %lld check\n", (long long)m,
			(long long)n, (long long)k);
		goto out;
	}
	for (int r = 0; r < LARGE_RUNS; r++)
		if (cudaMalloc((void **)&y[r], ny * 2) != cudaSuccess || !(hy[r] = (align_bf16 *)malloc(ny * 2))) {
			fprintf(stderr, "error: allocation failed for the %lld x %lld x %lld check\n", (long long)m,
				(long long)n, (long long)k);
			goto out;
		}
	gen_bf16<<<1024, 256, 0, s>>>(a, (int64_t)na, 3, 1.0f);
	gen_bf16<<<1024, 256, 0, s>>>(b, (int64_t)nb, 4, 0.0625f);
	if (cudaGetLastError() != cudaSuccess) {
		fprintf(stderr, "error: input generation failed\n");
		goto out;
	}
	for (int r = 0; r < LARGE_RUNS; r++) {
		struct matmul_tc_params p = {m, n, k};
		if (cudaMemsetAsync(y[r], fill[r], ny * 2, s) != cudaSuccess) {
			fprintf(stderr, "error: cudaMemsetAsync failed\n");
			goto out;
		}
		int st = matmul_tc_fwd_cuda(&p, a, b, y[r], s);
		if (st) {
			fprintf(stderr, "error: matmul_tc_fwd_cuda(m=%lld, n=%lld, k=%lld) returned %d\n", (long long)m,
				(long long)n, (long long)k, st);
			goto out;
		}
	}
	/* every copy below after this: a plain cudaMemcpy (legacy default stream) does not wait for work on
	 * a cudaStreamNonBlocking stream */
	if (cudaStreamSynchronize(s) != cudaSuccess) {
		fprintf(stderr, "error: cudaStreamSynchronize failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		goto out;
	}
	for (int r = 0; r <= LARGE_RUNS; r++) {
		cudaError_t e = r < LARGE_RUNS ? cudaMemcpy(hy[r], y[r], ny * 2, cudaMemcpyDeviceToHost)
					       : cudaMemcpy(ha, a, na * 2, cudaMemcpyDeviceToHost);
		if (e == cudaSuccess && r == LARGE_RUNS)
			e = cudaMemcpy(hb, b, nb * 2, cudaMemcpyDeviceToHost);
		if (e != cudaSuccess) {
			fprintf(stderr, "error: cudaMemcpy failed: %s\n", cudaGetErrorString(e));
			goto out;
		}
	}
	for (int r = 1; r < LARGE_RUNS && bad_run < 0; r++)
		if (memcmp(hy[0], hy[r], ny * 2) != 0) {
			bad_run = r;
			for (size_t j = 0; j < ny && first_diff < 0; j++)
				if (hy[0][j] != hy[r][j])
					first_diff = (int64_t)j;
		}
	if (bad_run < 0)
		snprintf(msg, sizeof msg, "determinism: %d calls at M = %lld, back to back, identical bytes",
			 LARGE_RUNS, (long long)m);
	else
		snprintf(msg, sizeof msg,
			 "determinism: call %d at M = %lld differs from call 0, first at (%lld, %lld): %04x vs %04x",
			 bad_run, (long long)m, (long long)(first_diff / n), (long long)(first_diff % n),
			 hy[0][first_diff], hy[bad_run][first_diff]);
	printf("%s m=%lld n=%lld k=%lld %s\n", bad_run < 0 ? "PASS" : "FAIL", (long long)m, (long long)n, (long long)k,
	       msg);
	*fails += bad_run >= 0;
	for (int64_t tm = 0; tm < tiles_m; tm++)
		for (int64_t tn = 0; tn < tiles_n; tn++)
			for (int e = 0; e < LARGE_SPOTS; e++) {
				uint64_t h = mix64(((uint64_t)(tm * tiles_n + tn) << 8) + (uint64_t)e);
				int64_t r = tm * 128 + (int64_t)(h % 128), j = tn * 256 + (int64_t)((h >> 7) % 256);
				if (r >= m || j >= n)
					continue;
				double ref = 0, S = 0;
				for (int64_t q = 0; q < k; q++) {
					double pr = (double)align_bf16_to_f32(ha[r * k + q]) *
						    (double)align_bf16_to_f32(hb[j * k + q]);
					ref += pr;
					S += fabs(pr);
				}
				double got = (double)align_bf16_to_f32(hy[0][r * n + j]);
				double err = fabs(got - ref);
				double tol = ldexp(fabs(ref), -8) + (double)(k / 16 + 1) * ldexp(S, -21) + 1e-30;
				double qq = err == err ? err / tol : INFINITY;
				if (qq > worst) {
					worst = qq;
					wr = r;
					wc = j;
				}
				if (S > 0 && err / S > worst_rel)
					worst_rel = err / S;
			}
	ok = worst <= 1.0;
	snprintf(msg, sizeof msg,
		 "fp64 spot check, %d elements of each of the %lld tiles: worst err/tol %.3g at (%lld, %lld), worst "
		 "err/S "
		 "%.3g",
		 LARGE_SPOTS, (long long)(tiles_m * tiles_n), worst, (long long)wr, (long long)wc, worst_rel);
	printf("%s m=%lld n=%lld k=%lld %s\n", ok ? "PASS" : "FAIL", (long long)m, (long long)n, (long long)k, msg);
	*fails += !ok;
	rc = 0;
out:
	cudaFree(a);
	cudaFree(b);
	free(ha);
	free(hb);
	for (int r = 0; r < LARGE_RUNS; r++) {
		cudaFree(y[r]);
		free(hy[r]);
	}
	return rc;
}

int main(void)
{
	gpu_skip_if_none();
	struct align_err err = {0, "", ""};
	struct align_dev dev;
	if (gpu_dev_open(&dev, &err))
		return 2;
	printf("test-matmul-tc: %s (sm_%d%d, %d SMs); built from %s\n", dev.name, dev.cc_major, dev.cc_minor,
	       dev.sm_count, ALIGN_GPU_BUILD_COMMIT);
	cudaStream_t s = (cudaStream_t)dev.stream;
	int fails = 0, rc = 0;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && rc == 0; i++)
		rc = run_shape(&shapes[i], s, &fails);
	for (size_t i = 0; i < sizeof large_shapes / sizeof large_shapes[0] && rc == 0; i++)
		rc = check_large(&large_shapes[i], s, &fails);
	align_dev_close(&dev);
	if (rc)
		return rc;
	printf("%s: %d check(s) failed\n", fails ? "FAIL" : "PASS", fails);
	return fails ? 1 : 0;
}
