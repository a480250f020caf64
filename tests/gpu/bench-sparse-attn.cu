/* bench-sparse-attn.cu: the sparse_attn CUDA twin at DSv4-Flash shapes (H = 64 heads, D = 512, N = 640 =
 * 128 window + 512 top-k slots; T tokens, S = T + T / 4 kv rows: raw then compressed), in the portable
 * deepseek-ref (online64, bf16 P, bf16_tc dot) and megatron (full fp32 softmax, sink in the max, fp32 dot)
 * modes. Per profile: median of 5 timed runs after 2 warm-ups (CUDA events), the arithmetic as GFLOP/s
 * (2 T H N D multiply-add pairs = 4 T H N D binary32 operations: CUDA cores, no FMA contraction) and its
 * fraction of the fp32 non-FMA issue roofline (SMs x 128 lanes x clock: one add or multiply per lane
 * per cycle), and a determinism check (two runs, same bytes).
 * tests/gpu/bench-sparse-attn.py runs this binary and PyTorch eager on the same shapes in one run.
 *
 * usage: bench-gpu-sparse-attn [T]   (default T = 1024)
 * Prints one line per profile: "sparse_attn profile=P T=.. H=64 D=512 N=640 ms=.. gflops=.. roofline=..".
 * Exit 0, 1 when a run was not deterministic or failed, 77 without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "gpu-build-commit.h"
#include "gpu_skip.h"
#include "ops_cuda.h"
#include "sparse_attn.h"

#define WARMUP 2
#define REPS 5

static int cmpf(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static size_t nbytes(const struct align_tensor *t)
{
	return (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
}

int main(int argc, char **argv)
{
	gpu_skip_if_none();
	struct align_dev dev;
	struct align_err err;
	memset(&err, 0, sizeof err);
	if (gpu_dev_open(&dev, &err))
		return 2;
	long T = argc > 1 ? atol(argv[1]) : 1024;
	char shape[128];
	snprintf(shape, sizeof shape, "T=%ld,H=64,D=512,S=%ld,N=640", T, T + T / 4);
	const struct align_op *op = ops_find("sparse_attn");
	struct align_dims d;
	char derr[256];
	if (!op || ops_dims_parse(shape, &d, derr, sizeof derr)) {
		fprintf(stderr, "error: %s\n", op ? derr : "no sparse_attn op");
		return 2;
	}
	struct sparse_attn_params p;
	op->impl->params_default(&p, &d);
	int clock_khz = 0;
	CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
	double peak = (double)dev.sm_count * 128.0 * clock_khz * 1e3; /* binary32 operations per second */
	printf("device %s (%d SMs, %.0f MHz), build %s\n", dev.name, dev.sm_count, clock_khz / 1e3,
	       ALIGN_GPU_BUILD_COMMIT);
	const char *profiles[] = {"deepseek-ref", "megatron"};
	int bad = 0;
	for (int pi = 0; pi < 2; pi++) {
		struct align_modes m;
		modes_init_default(&m);
		modes_apply_profile(&m, profiles[pi], derr, sizeof derr);
		struct align_tensor hin[4], din[4], dout[1], hout[2];
		for (int i = 0; i < 4; i++) {
			if (ops_tensor_alloc(op, 0, i, &d, &m, &hin[i]) || ops_fill_input(op, i, &hin[i], 1, 0))
				return 2;
			din[i] = hin[i];
			CK(cudaMalloc(&din[i].data, nbytes(&hin[i])));
			CK(cudaMemcpy(din[i].data, hin[i].data, nbytes(&hin[i]), cudaMemcpyHostToDevice));
		}
		for (int k = 0; k < 2; k++)
			if (ops_tensor_alloc(op, 1, 0, &d, &m, &hout[k]))
				return 2;
		dout[0] = hout[0];
		CK(cudaMalloc(&dout[0].data, nbytes(&hout[0])));
		cudaStream_t s = (cudaStream_t)dev.stream;
		cudaEvent_t e0, e1;
		CK(cudaEventCreate(&e0));
		CK(cudaEventCreate(&e1));
		float ms[REPS];
		for (int r = 0; r < WARMUP + REPS; r++) {
			CK(cudaEventRecord(e0, s));
			if (sparse_attn_fwd_cuda(&p, &m, din, 4, dout, 1, NULL, &dev)) {
				fprintf(stderr, "error: sparse_attn_fwd_cuda failed (%s)\n", profiles[pi]);
				return 1;
			}
			CK(cudaEventRecord(e1, s));
			CK(cudaEventSynchronize(e1));
			if (r >= WARMUP)
				CK(cudaEventElapsedTime(&ms[r - WARMUP], e0, e1));
			if (r < 2)
				CK(cudaMemcpy(hout[r].data, dout[0].data, nbytes(&hout[0]), cudaMemcpyDeviceToHost));
		}
		qsort(ms, REPS, sizeof ms[0], cmpf);
		int det = memcmp(hout[0].data, hout[1].data, nbytes(&hout[0])) == 0;
		bad |= !det;
		double flops = 4.0 * (double)T * 64 * 640 * 512;
		printf("sparse_attn profile=%s T=%ld H=64 D=512 N=640 ms=%.3f gflops=%.1f roofline=%.3f "
		       "deterministic=%s\n",
		       profiles[pi], T, ms[REPS / 2], flops / (ms[REPS / 2] * 1e-3) / 1e9,
		       flops / (ms[REPS / 2] * 1e-3) / peak, det ? "yes" : "NO");
		for (int i = 0; i < 4; i++) {
			cudaFree(din[i].data);
			ops_tensor_free(&hin[i]);
		}
		cudaFree(dout[0].data);
		ops_tensor_free(&hout[0]);
		ops_tensor_free(&hout[1]);
		cudaEventDestroy(e0);
		cudaEventDestroy(e1);
	}
	align_dev_close(&dev);
	return bad;
}
