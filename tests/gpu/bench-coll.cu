/* bench-coll.cu: the collectives' speed (kernels/ops/coll.h, harness/run/run-nccl.h).
 *
 * Part 1, --ranks N processes (default 1), one per GPU, each with an NCCL communicator (libnccl.so.2 by
 * dlopen, as align run --ranks): allreduce and reduce_scatter under NCCL's own ncclAllReduce /
 * ncclReduceScatter and under align's fixed order (all-to-all of ncclSend/ncclRecv, the rank-order sum
 * kernel, ncclAllGather for allreduce), fp32 and bf16, per-rank buffers of 1 MiB to 1 GiB (x4).
 * Figures as nccl-tests defines them (coll_busbw; doc/PERFORMANCE.md there): bytes = the per-rank buffer
 * (allreduce: count x size; reduce_scatter: its input, N x recvcount x size), algbw = bytes / t, busbw =
 * algbw x 2(N-1)/N (allreduce), x (N-1)/N (reduce_scatter); "fixed / nccl" = busbw(fixed) / busbw(nccl)
 * (with N = 1 busbw is 0 by definition: the ratio is taken of algbw). t = median of 20 timed calls on
 * rank 0 after 3 warm-ups (CUDA events on the rank's stream, NCCL_NVLS_ENABLE=0 unless set).
 * Part 2, one GPU: the fixed-order sum kernel (coll_sum_rows_cuda) over R buffers standing in for R ranks
 * (R = 2, 4, 8; rows of 1 MiB to 1 GiB), against a device-to-device cudaMemcpy of 1 GiB measured in the
 * same run: traffic = (R + 1) x row bytes (R rows read, one written); fraction of copy = (traffic / t) /
 * (2 x bytes / t_copy).
 * Checks (exact answers known in advance): rank r's row i is (r + 1) x (i mod 7 + 1), so every sum is the
 * small integer N(N+1)/2 x (i mod 7 + 1), exact in fp32 and bf16; both engines' results are compared with
 * it on every element of the smallest size; the sum kernel likewise with rows k + 1.
 * Exit status: 0 done and verified, 1 a wrong result, 2 a CUDA / NCCL / host error, 77 no CUDA device.
 * Run: build-gpu/tests/gpu/bench-gpu-coll [--ranks N] [--max-mib M] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cuda_runtime.h>

#include "ops_cuda.h" /* first: it prepares ops.h for nvcc */

#include "coll.h"
#include "cuda_check.h"
#include "gpu-build-commit.h"
#include "gpu_skip.h"
#include "run-nccl.h"

#define WARMUP 3
#define REPS 20

static float median(float *v, int n, float *lo, float *hi)
{
	std::sort(v, v + n);
	*lo = v[0], *hi = v[n - 1];
	return v[n / 2];
}

__global__ static void fill_rank(void *x, int dt, int64_t n, float scale)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		float v = scale * (float)(i % 7 + 1);
		if (dt == ALIGN_DT_BF16)
			((align_bf16 *)x)[i] = align_f32_to_bf16(v);
		else
			((float *)x)[i] = v;
	}
}

/* every element of y (n, dtype dt, on the device) equals mult x (i % 7 + 1) in column order base + i */
static int check_exact(const void *y, int dt, int64_t n, int64_t base, float mult, const char *what)
{
	size_t es = align_dtype_size(dt);
	char *h = (char *)malloc((size_t)n * es + 1);
	if (!h || cudaMemcpy(h, y, (size_t)n * es, cudaMemcpyDeviceToHost) != cudaSuccess) {
		free(h);
		return 2;
	}
	int64_t bad = 0;
	for (int64_t i = 0; i < n; i++) {
		float got = dt == ALIGN_DT_BF16 ? align_bf16_to_f32(((align_bf16 *)h)[i]) : ((float *)h)[i];
		bad += got != mult * (float)((base + i) % 7 + 1);
	}
	free(h);
	if (bad)
		printf("WRONG: %s: %lld of %lld elements differ from the exact sum\n", what, (long long)bad,
		       (long long)n);
	return bad ? 1 : 0;
}

/* one rank of part 1 */
static int rank_main(int rank, int nranks, const char *id_path, int64_t max_mib)
{
	if (gpu_none())
		return 77;
	struct align_err err;
	struct run_nccl nc;
	memset(&err, 0, sizeof err);
	struct align_dev dev;
	memset(&dev, 0, sizeof dev);
	if (!getenv("NCCL_NVLS_ENABLE"))
		setenv("NCCL_NVLS_ENABLE", "0", 1);
	if (run_nccl_load(&nc, &err) || run_nccl_init(&nc, &dev, rank, rank, nranks, id_path, 120)) {
		fprintf(stderr, "error: rank %d: %s\n", rank, err.msg);
		return 2;
	}
	cudaStream_t s = (cudaStream_t)dev.stream;
	if (rank == 0)
		printf("\n## NCCL %d (%s), %d rank(s), %s\n\n| op | dtype | MiB per rank | engine | median us | min | "
		       "max | "
		       "algbw GB/s | busbw GB/s | fixed / nccl |\n| --- | --- | --- | --- | --- | --- | --- | --- | "
		       "--- | "
		       "--- |\n",
		       nc.version, nc.path, nranks, dev.name);
	int rc = 0;
	const int kinds[2] = {COLL_ALLREDUCE, COLL_REDUCE_SCATTER}, dts[2] = {ALIGN_DT_F32, ALIGN_DT_BF16};
	size_t maxb = (size_t)max_mib << 20;
	void *x, *y, *scratch;
	cudaEvent_t e0, e1;
	CK(cudaMalloc(&x, maxb));
	CK(cudaMalloc(&y, maxb));
	CK(cudaMalloc(&scratch, 3 * maxb + maxb / nranks + 4096));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int k = 0; k < 2 && !rc; k++)
		for (int t = 0; t < 2 && !rc; t++)
			for (size_t bytes = 1 << 20; bytes <= maxb && !rc; bytes *= 4) {
				size_t es = align_dtype_size(dts[t]);
				int64_t count = (int64_t)(bytes / es);
				struct coll_cfg c = {kinds[k], nranks, 0, count, 0, dts[t], 0};
				c.D = kinds[k] == COLL_REDUCE_SCATTER ? count / nranks : count;
				c.in_cols = kinds[k] == COLL_REDUCE_SCATTER ? c.D * nranks : c.D;
				c.out_cols = c.D;
				fill_rank<<<1024, 256, 0, s>>>(x, dts[t], c.in_cols, (float)(rank + 1));
				double busbw[2] = {0, 0}, algbw[2] = {0, 0};
				for (int engine = 0; engine < 2 && !rc; engine++) {
					c.impl = engine ? ALIGN_COLL_IMPL_FIXED : ALIGN_COLL_IMPL_NCCL;
					float ms[REPS], lo, hi;
					for (int i = 0; i < WARMUP + REPS && !rc; i++) {
						CK(cudaEventRecord(e0, s));
						rc = run_nccl_coll_dev(&nc, &dev, &c, x, y, scratch);
						CK(cudaEventRecord(e1, s));
						CK(cudaEventSynchronize(e1));
						if (i >= WARMUP)
							CK(cudaEventElapsedTime(&ms[i - WARMUP], e0, e1));
					}
					if (rc) {
						fprintf(stderr, "error: rank %d: %s\n", rank, err.msg);
						break;
					}
					if (bytes == 1 << 20)
						rc = check_exact(y, dts[t], c.D,
								 kinds[k] == COLL_REDUCE_SCATTER ? rank * c.D : 0,
								 (float)(nranks * (nranks + 1) / 2),
								 engine ? "fixed" : "nccl");
					float med = median(ms, REPS, &lo, &hi);
					algbw[engine] = coll_algbw((double)bytes, med * 1e-3);
					busbw[engine] = coll_busbw(kinds[k], nranks, (double)bytes, med * 1e-3);
					if (rank == 0) {
						double ratio = nranks > 1 ? busbw[1] / busbw[0] : algbw[1] / algbw[0];
						printf("| %s | %s | %zu | %s | %.1f | %.1f | %.1f | %.1f | %.1f |",
						       kinds[k] == COLL_ALLREDUCE ? "allreduce" : "reduce_scatter",
						       dts[t] == ALIGN_DT_BF16 ? "bf16" : "fp32", bytes >> 20,
						       engine ? "fixed" : "nccl", med * 1e3, lo * 1e3, hi * 1e3,
						       algbw[engine] / 1e9, busbw[engine] / 1e9);
						if (engine)
							printf(" %.2f |\n", ratio);
						else
							printf(" |\n");
					}
				}
			}
	fflush(stdout);
	cudaFree(x), cudaFree(y), cudaFree(scratch);
	run_nccl_close(&nc, &dev);
	return rc;
}

/* part 2: the sum kernel over R rows on one GPU against the copy */
static int sum_kernel_part(int64_t max_mib)
{
	gpu_skip_if_none();
	cudaStream_t s;
	cudaEvent_t e0, e1;
	CK(cudaStreamCreate(&s));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	size_t copy_bytes = (size_t)1 << 30, maxrow = (size_t)max_mib << 20;
	void *a, *b, *x, *y;
	CK(cudaMalloc(&a, copy_bytes));
	CK(cudaMalloc(&b, copy_bytes));
	CK(cudaMemset(a, 1, copy_bytes));
	float ms[REPS], lo, hi;
	for (int i = 0; i < WARMUP + REPS; i++) {
		CK(cudaEventRecord(e0, s));
		CK(cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice, s));
		CK(cudaEventRecord(e1, s));
		CK(cudaEventSynchronize(e1));
		if (i >= WARMUP)
			CK(cudaEventElapsedTime(&ms[i - WARMUP], e0, e1));
	}
	double copy_traffic = 2.0 * (double)copy_bytes / (median(ms, REPS, &lo, &hi) * 1e-3);
	CK(cudaFree(a));
	CK(cudaFree(b));
	printf("\n## fixed-order sum kernel on one GPU (R buffers for R ranks), fp32\n\ncopy traffic (cudaMemcpy "
	       "D2D, 1 GiB): %.1f GB/s\n\n| R | MiB per row | median us | min | max | traffic GB/s | fraction of copy "
	       "|\n| --- | --- | --- | --- | --- | --- | --- |\n",
	       copy_traffic / 1e9);
	int rc = 0;
	for (int R = 2; R <= 8 && !rc; R *= 2) {
		size_t row_cap = std::min(maxrow, ((size_t)8 << 30) / R);
		CK(cudaMalloc(&x, row_cap * R));
		CK(cudaMalloc(&y, row_cap));
		for (int k = 0; k < R; k++)
			fill_rank<<<1024, 256, 0, s>>>((char *)x + k * row_cap, ALIGN_DT_F32, (int64_t)(row_cap / 4),
						       (float)(k + 1));
		for (size_t row = 1 << 20; row <= row_cap && !rc; row *= 4) {
			int64_t n = (int64_t)(row / 4);
			for (int i = 0; i < WARMUP + REPS && !rc; i++) {
				CK(cudaEventRecord(e0, s));
				rc = coll_sum_rows_cuda(x, ALIGN_DT_F32, R, (int64_t)(row_cap / 4), n, y, s) ? 2 : 0;
				CK(cudaEventRecord(e1, s));
				CK(cudaEventSynchronize(e1));
				if (i >= WARMUP)
					CK(cudaEventElapsedTime(&ms[i - WARMUP], e0, e1));
			}
			if (!rc && row == 1 << 20)
				rc = check_exact(y, ALIGN_DT_F32, n, 0, (float)(R * (R + 1) / 2), "sum kernel");
			float med = median(ms, REPS, &lo, &hi);
			double traffic = (double)(R + 1) * (double)row / (med * 1e-3);
			printf("| %d | %zu | %.1f | %.1f | %.1f | %.1f | %.2f |\n", R, row >> 20, med * 1e3, lo * 1e3,
			       hi * 1e3, traffic / 1e9, traffic / copy_traffic);
		}
		cudaFree(x), cudaFree(y);
	}
	return rc;
}

int main(int argc, char **argv)
{
	int nranks = 1;
	int64_t max_mib = 1024;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
			nranks = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc)
			max_mib = atoll(argv[++i]);
		else {
			fprintf(stderr, "usage: bench-gpu-coll [--ranks N] [--max-mib M]\n");
			return 2;
		}
	}
	if (nranks < 1 || nranks > COLL_MAX_RANKS || max_mib < 1) {
		fprintf(stderr, "error: --ranks 1..%d, --max-mib >= 1\n", COLL_MAX_RANKS);
		return 2;
	}
	printf("# bench-coll: commit %s\n", ALIGN_GPU_BUILD_COMMIT);
	fflush(stdout);
	/* the ranks first: this process touches CUDA only after they are forked and done */
	char dir[] = "/tmp/bench-coll-XXXXXX", id[64];
	if (!mkdtemp(dir))
		return 2;
	snprintf(id, sizeof id, "%s/nccl-id", dir);
	pid_t pids[COLL_MAX_RANKS];
	for (int r = 0; r < nranks; r++)
		if ((pids[r] = fork()) == 0)
			_exit(rank_main(r, nranks, id, max_mib));
	int worst = 0;
	for (int r = 0; r < nranks; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 2;
		if (code == 77)
			return 77;
		worst = std::max(worst, code);
	}
	rmdir(dir);
	int rc = sum_kernel_part(max_mib);
	return std::max(worst, rc);
}
