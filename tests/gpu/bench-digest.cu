/* bench-digest.cu: bandwidth of the GPU tree digest (align_digest_cuda, kernels/cuda/digest.cu) against a
 * device-to-device cudaMemcpy measured in the same run, on an input larger than L2 (default 4 GiB of
 * counter-RNG bytes, 16-byte aligned).
 *
 * Method: CUDA events on one stream around each call; 3 warm-up calls, then 20 timed calls of each
 * row; median, min and max reported. align_digest_cuda and _ws wait for their result, so their times
 * include both kernels, the 8-byte copy and the host round trip, and for align_digest_cuda the
 * workspace allocation (cudaMallocAsync / cudaFreeAsync); "leaves kernel" is
 * align_digest_leaves_cuda alone (the kernel its size selects), then forced to each of its two kernels (the split
 * one, 64 threads a leaf, and one group of 4 threads a leaf); two more rows hash N - 16 bytes at +8 and +1 bytes (the 8-byte and
 * unaligned load paths).
 * Derived figures (GB = 1e9 bytes):
 *   hash GB/s        = N / t_median                  (the hash reads N bytes)
 *   copy GB/s        = N / t_copy                    (bytes copied; the copy reads N and writes N)
 *   copy traffic     = 2 N / t_copy                  (DRAM bytes moved by the copy)
 *   fraction of copy = (N / t_hash) / (N / t_copy)   (same bytes-per-second definition for both)
 *   fraction of copy traffic = (N / t_hash) / (2 N / t_copy)   (DRAM bytes per second, the strict one)
 *   goal: align_digest_cuda >= 0.80 of copy.
 * The digest is checked to be identical on every call and equal to the CPU's digest_xxh3t64 of the
 * same bytes (copied back to the host once).
 * Exit status: 0 done (and verified), 1 wrong digest, 2 CUDA or host error, 77 skip (no CUDA device).
 * Run: build-cu/tests/gpu/bench-gpu-digest [GiB]   (meson test -C build-cu --benchmark --suite gpu) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

extern "C" {
#include "digest.h"
}
#include "cuda_check.h"
#include "digest_cuda.h"
#include "gpu_skip.h"
#include "gpu-build-commit.h"
#include "rng.h"

#define WARMUP 3
#define REPS 20

enum bench_op {
	OP_DIGEST,
	OP_DIGEST_WS,
	OP_LEAVES,
	OP_LEAVES_SPLIT,
	OP_LEAVES_GROUP,
	OP_WS_OFF8,
	OP_WS_OFF1,
	OP_COPY,
	OP_COUNT
};

struct bench {
	size_t bytes;	     /* N */
	unsigned char *src;  /* N input bytes */
	unsigned char *dst;  /* N bytes, the copy's destination */
	void *ws;	     /* workspace of align_digest_cuda_ws */
	uint64_t *leaves;    /* leaf digests of the leaves-only row */
	cudaStream_t stream; /* all work */
	cudaEvent_t ev0, ev1;
	uint64_t digest[OP_COUNT]; /* first digest seen per row; every later one must match */
	int have_digest[OP_COUNT]; /* digest[op] is set */
	int mismatches;		   /* calls whose digest differed from the first of their row */
	float ms[OP_COUNT][REPS];  /* timed runs */
};

static const char *op_name[OP_COUNT] = {"align_digest_cuda",
					"align_digest_cuda_ws",
					"leaves kernel only",
					"leaves, split kernel (64 threads a leaf)",
					"leaves, one group (4 threads) a leaf",
					"align_digest_cuda_ws, input at +8 B, N - 16 B (8-byte loads)",
					"align_digest_cuda_ws, input at +1 B, N - 16 B (unaligned loads)",
					"cudaMemcpy device-to-device"};

__global__ void bench_fill(uint64_t *p, size_t n_words)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_words; i += (size_t)gridDim.x * blockDim.x)
		p[i] = align_rng_u64(0x6265636864696773ull, 1, i);
}

static int bench_call(struct bench *b, int op)
{
	uint64_t d = 0;
	switch (op) {
	case OP_DIGEST:
		if (align_digest_cuda(b->src, b->bytes, &d, b->stream))
			return 2;
		break;
	case OP_DIGEST_WS:
		if (align_digest_cuda_ws(b->src, b->bytes, b->ws, &d, b->stream))
			return 2;
		break;
	case OP_WS_OFF8:
	case OP_WS_OFF1:
		if (align_digest_cuda_ws(b->src + (op == OP_WS_OFF8 ? 8 : 1), b->bytes - 16, b->ws, &d, b->stream))
			return 2;
		break;
	case OP_LEAVES:
		return align_digest_leaves_cuda(b->src, b->bytes, b->leaves, b->stream) ? 2 : 0;
	case OP_LEAVES_SPLIT:
	case OP_LEAVES_GROUP: {
		uint64_t keep = align_digest_cuda_set_split_below(op == OP_LEAVES_SPLIT ? UINT64_MAX : 0);
		int rc = align_digest_leaves_cuda(b->src, b->bytes, b->leaves, b->stream) ? 2 : 0;
		align_digest_cuda_set_split_below(keep);
		return rc;
	}
	default:
		CK(cudaMemcpyAsync(b->dst, b->src, b->bytes, cudaMemcpyDeviceToDevice, b->stream));
		return 0;
	}
	if (!b->have_digest[op]) {
		b->digest[op] = d;
		b->have_digest[op] = 1;
	} else if (d != b->digest[op]) {
		b->mismatches++;
	}
	return 0;
}

static int bench_op_run(struct bench *b, int op)
{
	for (int i = 0; i < WARMUP; i++)
		if (bench_call(b, op))
			return 2;
	CK(cudaStreamSynchronize(b->stream));
	for (int i = 0; i < REPS; i++) {
		CK(cudaEventRecord(b->ev0, b->stream));
		if (bench_call(b, op))
			return 2;
		CK(cudaEventRecord(b->ev1, b->stream));
		CK(cudaEventSynchronize(b->ev1));
		CK(cudaEventElapsedTime(&b->ms[op][i], b->ev0, b->ev1));
	}
	return 0;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* Median (mean of the two middle values), min and max of the REPS runs of op. */
static void bench_stats(struct bench *b, int op, double *med, double *lo, double *hi)
{
	float v[REPS];
	memcpy(v, b->ms[op], sizeof v);
	qsort(v, REPS, sizeof v[0], cmp_float);
	*med = (v[REPS / 2 - 1] + v[REPS / 2]) / 2.0;
	*lo = v[0];
	*hi = v[REPS - 1];
}

static void bench_report(struct bench *b)
{
	double med[OP_COUNT], lo, hi;
	double gb = (double)b->bytes / 1e9;
	printf("| row | median ms | min ms | max ms | GB/s (N / median) | fraction of copy | fraction of copy "
	       "traffic |\n|---|---|---|---|---|---|---|\n");
	bench_stats(b, OP_COPY, &med[OP_COPY], &lo, &hi);
	for (int op = 0; op < OP_COUNT; op++) {
		bench_stats(b, op, &med[op], &lo, &hi);
		double bw = gb / (med[op] / 1e3), copy_bw = gb / (med[OP_COPY] / 1e3);
		printf("| %s | %.3f | %.3f | %.3f | %.1f | %.3f | %.3f |\n", op_name[op], med[op], lo, hi, bw,
		       bw / copy_bw, bw / (2 * copy_bw));
	}
	double frac = med[OP_COPY] / med[OP_DIGEST];
	int clock_khz = 0, bus_bits = 0;
	cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
	cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
	/* peak = 2 (double data rate) x bus bytes x memory clock */
	printf("\ncopy traffic (2 N / t_copy): %.1f GB/s; peak DRAM (2 x %d bit / 8 x %d kHz): %.1f GB/s\n",
	       2 * gb / (med[OP_COPY] / 1e3), bus_bits, clock_khz, 2.0 * bus_bits / 8 * clock_khz * 1e3 / 1e9);
	printf("goal align_digest_cuda >= 0.80 of copy: %s (%.3f)\n", frac >= 0.80 ? "met" : "NOT met", frac);
}

/* The CPU digest of the same bytes for every hashing row, and no row with two different digests. */
static int bench_verify(struct bench *b)
{
	unsigned char *h = (unsigned char *)malloc(b->bytes);
	if (!h) {
		fprintf(stderr, "error: out of memory (%zu bytes for the CPU check)\n", b->bytes);
		return 2;
	}
	CK(cudaMemcpy(h, b->src, b->bytes, cudaMemcpyDeviceToHost));
	uint64_t want = digest_xxh3t64(h, b->bytes);
	uint64_t want8 = digest_xxh3t64(h + 8, b->bytes - 16), want1 = digest_xxh3t64(h + 1, b->bytes - 16);
	free(h);
	int ok = !b->mismatches && b->digest[OP_DIGEST] == want && b->digest[OP_DIGEST_WS] == want &&
		 b->digest[OP_WS_OFF8] == want8 && b->digest[OP_WS_OFF1] == want1;
	printf("digest %016" PRIx64 " (+8: %016" PRIx64 ", +1: %016" PRIx64 "), CPU digest_xxh3t64 %016" PRIx64
	       " (+8: %016" PRIx64 ", +1: %016" PRIx64
	       "), calls with another digest than their row's first: %d -> %s\n",
	       b->digest[OP_DIGEST], b->digest[OP_WS_OFF8], b->digest[OP_WS_OFF1], want, want8, want1, b->mismatches,
	       ok ? "verified" : "WRONG");
	return ok ? 0 : 1;
}

static int bench_run(struct bench *b)
{
	size_t n = (b->bytes + DIGEST_LEAF_BYTES - 1) / DIGEST_LEAF_BYTES;
	CK(cudaMalloc((void **)&b->src, b->bytes));
	CK(cudaMalloc((void **)&b->dst, b->bytes));
	CK(cudaMalloc(&b->ws, align_digest_cuda_workspace_bytes(b->bytes)));
	CK(cudaMalloc((void **)&b->leaves, n * sizeof *b->leaves));
	CK(cudaEventCreate(&b->ev0));
	CK(cudaEventCreate(&b->ev1));
	bench_fill<<<1024, 256, 0, b->stream>>>((uint64_t *)b->src, b->bytes / 8);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(b->stream));
	for (int op = 0; op < OP_COUNT; op++)
		if (bench_op_run(b, op))
			return 2;
	bench_report(b);
	return bench_verify(b);
}

int main(int argc, char **argv)
{
	gpu_skip_if_none();
	struct align_err err = {0, "", ""};
	struct align_dev dev;
	if (gpu_dev_open(&dev, &err))
		return 2;
	int l2_bytes = 0;
	CK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, dev.ordinal));
	struct bench b;
	memset(&b, 0, sizeof b);
	b.stream = (cudaStream_t)dev.stream;
	b.bytes = (size_t)((argc > 1 ? atof(argv[1]) : 4.0) * (double)((size_t)1 << 30));
	if (b.bytes < 64 || b.bytes % 8) {
		fprintf(stderr, "error: input size must be a multiple of 8 bytes, at least 64\n");
		return 2;
	}
	printf("bench-digest: %s (sm_%d%d, %d SMs, L2 %d MiB), N = %zu bytes (%.2f GiB), warm-up %d, %d timed "
	       "runs per row; built from %s\n\n",
	       dev.name, dev.cc_major, dev.cc_minor, dev.sm_count, l2_bytes >> 20, b.bytes, (double)b.bytes / (1 << 30),
	       WARMUP, REPS, ALIGN_GPU_BUILD_COMMIT);
	int rc = bench_run(&b);
	cudaFree(b.src);
	cudaFree(b.dst);
	cudaFree(b.ws);
	cudaFree(b.leaves);
	align_dev_close(&dev);
	return rc;
}
