/* test-digest-cuda.cu: the GPU tree digest (kernels/cuda/digest.cu, align_digest_cuda) against the CPU one
 * (harness/core/digest.c, digest_xxh3t64 on libxxhash), bit for bit, on random bytes:
 *   - every length class of a leaf and of the root: 0, 1..16, 17, 128, 129, 240, 241, 1023..1025,
 *     65535..65537, 30 and 31 leaves (root of 240 / 248 bytes), 128 and 129 leaves (root of one
 *     block / one block + a stripe), ...; random sizes up to 64 MiB; 1 GiB;
 *   - at input offsets 0, 8 and 1..15 (the 16-byte, 8-byte and unaligned load paths);
 *   - inputs ending exactly at the end of their allocation (for compute-sanitizer memcheck);
 *   - align_digest_cuda_ws equal to align_digest_cuda; align_digest_leaves_cuda leaf by leaf against
 *     XXH3_64bits, with guard words around the leaf array (writes outside it are detected);
 *   - argument errors return ALIGN_DIGEST_CUDA_EINVAL.
 * Exit status: 0 pass, 1 mismatch, 2 CUDA or host error, 77 skip (no CUDA device).
 * Run: meson test -C build-cu --suite gpu   (or build-cu/tests/gpu/test-gpu-digest-cuda [seed]) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include <cuda_runtime_api.h>

extern "C" {
#include "digest.h"
}
#include "cuda_check.h"
#include "digest_cuda.h"
#include "gpu_skip.h"

#define GIB ((size_t)1 << 30)
#define LEAF ((size_t)DIGEST_LEAF_BYTES)
#define CAP (GIB + 64) /* device and host buffers: 1 GiB plus room for offsets */
#define GUARD 0xa5a5a5a5deadbeefull

struct gpu_check {
	uint64_t seed;	     /* master seed of the random data (printed on failure) */
	uint64_t rng;	     /* splitmix64 state */
	unsigned char *host; /* CAP random bytes */
	unsigned char *dev;  /* the same bytes on the device */
	cudaStream_t stream; /* the device context's stream (non-blocking) */
	long cases;	     /* digests compared */
	int fails;	     /* mismatches (the first 20 printed) */
};

static uint64_t next_u64(struct gpu_check *c)
{
	uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Compare both GPU entry points with the CPU digest of `size` bytes at `off`; 0, or 2 on a CUDA error. */
static int check_one(struct gpu_check *c, size_t off, size_t size, void *ws)
{
	uint64_t want = digest_xxh3t64(c->host + off, size), got = 0, got_ws = 0;
	if (align_digest_cuda(c->dev + off, size, &got, c->stream))
		return 2;
	if (align_digest_cuda_ws(c->dev + off, size, ws, &got_ws, c->stream))
		return 2;
	c->cases++;
	if (got != want || got_ws != want) {
		if (c->fails++ < 20)
			printf("FAIL size=%zu offset=%zu: align_digest_cuda %016" PRIx64 ", _ws %016" PRIx64
			       ", digest_xxh3t64 %016" PRIx64 " (seed 0x%" PRIx64 ")\n",
			       size, off, got, got_ws, want, c->seed);
	}
	return 0;
}

static int check_sizes(struct gpu_check *c)
{
	static const size_t sizes[] = {0,
				       1,
				       2,
				       3,
				       4,
				       5,
				       8,
				       9,
				       15,
				       16,
				       17,
				       31,
				       64,
				       127,
				       128,
				       129,
				       239,
				       240,
				       241,
				       255,
				       256,
				       1023,
				       1024,
				       1025,
				       2048,
				       4095,
				       65535,
				       65536,
				       65537,
				       LEAF + 240,
				       LEAF + 241,
				       2 * LEAF,
				       3 * LEAF + 5,
				       30 * LEAF,
				       30 * LEAF + 1,
				       31 * LEAF - 1,
				       31 * LEAF,
				       128 * LEAF,
				       128 * LEAF + 1,
				       129 * LEAF,
				       129 * LEAF + 7,
				       1000 * LEAF + 3};
	size_t ws_bytes = align_digest_cuda_workspace_bytes(GIB);
	void *ws = NULL;
	CK(cudaMalloc(&ws, ws_bytes));
	int rc = 0;
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !rc; i++) {
		size_t offs[] = {0, 8, 1 + (size_t)(next_u64(c) % 15), 3, 13};
		for (size_t k = 0; k < 5 && !rc; k++)
			rc = check_one(c, offs[k], sizes[i], ws);
	}
	for (int i = 0; i < 40 && !rc; i++) {
		size_t size = (size_t)(next_u64(c) % (64u << 20)), off = (size_t)(next_u64(c) % 17);
		rc = check_one(c, off, size, ws);
	}
	if (!rc)
		rc = check_one(c, 0, GIB, ws);
	if (!rc)
		rc = check_one(c, 5, GIB - 7, ws);
	cudaFree(ws);
	return rc;
}

/* Inputs that end exactly at the end of their allocation, at every offset class: with
 * compute-sanitizer --tool memcheck, a read past the input's last 8-byte word would be reported. */
static int check_exact(struct gpu_check *c)
{
	static const size_t sizes[] = {1, 7, 17, 241, 1000, 1031, 65537, 3 * LEAF + 13};
	static const size_t offs[] = {0, 1, 3, 8, 13};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
			unsigned char *d = NULL;
			uint64_t got = 0, want = digest_xxh3t64(c->host + offs[k], sizes[i]);
			CK(cudaMalloc((void **)&d, offs[k] + sizes[i]));
			CK(cudaMemcpy(d, c->host, offs[k] + sizes[i], cudaMemcpyHostToDevice));
			int rc = align_digest_cuda(d + offs[k], sizes[i], &got, c->stream);
			cudaFree(d);
			if (rc)
				return 2;
			c->cases++;
			if (got != want && c->fails++ < 20)
				printf("FAIL exact allocation size=%zu offset=%zu: got %016" PRIx64 " want %016" PRIx64
				       "\n",
				       sizes[i], offs[k], got, want);
		}
	return 0;
}

/* Leaf digests one by one, and guard words on both sides of the leaf array. */
static int check_leaves(struct gpu_check *c, size_t off, size_t size)
{
	size_t n = (size + LEAF - 1) / LEAF;
	uint64_t *dl = NULL, *hl = (uint64_t *)malloc((n + 2) * sizeof *hl);
	if (!hl) {
		fprintf(stderr, "error: out of memory\n");
		return 2;
	}
	for (size_t i = 0; i < n + 2; i++)
		hl[i] = GUARD;
	CK(cudaMalloc((void **)&dl, (n + 2) * sizeof *dl));
	CK(cudaMemcpy(dl, hl, (n + 2) * sizeof *dl, cudaMemcpyHostToDevice));
	if (align_digest_leaves_cuda(c->dev + off, size, dl + 1, c->stream))
		return 2;
	CK(cudaStreamSynchronize(c->stream));
	CK(cudaMemcpy(hl, dl, (n + 2) * sizeof *dl, cudaMemcpyDeviceToHost));
	cudaFree(dl);
	c->cases++;
	if (hl[0] != GUARD || hl[n + 1] != GUARD) {
		c->fails++;
		printf("FAIL align_digest_leaves_cuda wrote outside the leaf array (size=%zu offset=%zu)\n", size, off);
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = size - i * LEAF < LEAF ? size - i * LEAF : LEAF;
		uint64_t want = XXH3_64bits(c->host + off + i * LEAF, len);
		if (hl[i + 1] != want && c->fails++ < 20)
			printf("FAIL leaf %zu of size=%zu offset=%zu: got %016" PRIx64 " want %016" PRIx64 "\n", i,
			       size, off, hl[i + 1], want);
	}
	free(hl);
	return 0;
}

static int check_errors(struct gpu_check *c)
{
	uint64_t d = 0;
	c->cases++;
	if (align_digest_cuda(NULL, 5, &d, c->stream) != ALIGN_DIGEST_CUDA_EINVAL ||
	    align_digest_cuda(c->dev, 5, NULL, c->stream) != ALIGN_DIGEST_CUDA_EINVAL ||
	    align_digest_cuda_ws(c->dev, 5, (char *)c->dev + 1, &d, c->stream) != ALIGN_DIGEST_CUDA_EINVAL) {
		c->fails++;
		printf("FAIL argument errors are not reported as ALIGN_DIGEST_CUDA_EINVAL\n");
	}
	return 0;
}

static int run(struct gpu_check *c)
{
	for (size_t i = 0; i + 8 <= CAP; i += 8) {
		uint64_t r = next_u64(c);
		memcpy(c->host + i, &r, 8);
	}
	CK(cudaMalloc((void **)&c->dev, CAP));
	CK(cudaMemcpy(c->dev, c->host, CAP, cudaMemcpyHostToDevice));
	/* both leaf kernels on every input: the split one (64 threads a leaf) and one group a leaf */
	static const uint64_t split[] = {UINT64_MAX, 0};
	static const char *const split_name[] = {"split leaf kernel", "one group a leaf"};
	int rc = 0;
	uint64_t keep = align_digest_cuda_set_split_below(split[0]);
	for (int pass = 0; pass < 2 && !rc; pass++) {
		align_digest_cuda_set_split_below(split[pass]);
		int f0 = c->fails;
		long n0 = c->cases;
		rc = check_sizes(c);
		size_t leaf_cases[][2] = {{0, 200 * LEAF + 77}, {3, 5 * LEAF + 100}, {8, 7 * LEAF}, {1, 150}};
		for (size_t i = 0; i < 4 && !rc; i++)
			rc = check_leaves(c, leaf_cases[i][0], leaf_cases[i][1]);
		if (!rc)
			rc = check_exact(c);
		printf("%s: %ld cases, %d failures\n", split_name[pass], c->cases - n0, c->fails - f0);
	}
	align_digest_cuda_set_split_below(keep);
	if (!rc)
		rc = check_errors(c);
	cudaFree(c->dev);
	return rc;
}

int main(int argc, char **argv)
{
	gpu_skip_if_none();
	struct align_err err = {0, "", ""};
	struct align_dev dev;
	if (gpu_dev_open(&dev, &err))
		return 2;
	struct gpu_check c;
	memset(&c, 0, sizeof c);
	c.stream = (cudaStream_t)dev.stream;
	c.seed = argc > 1 ? strtoull(argv[1], NULL, 16) : 0xd16e57c0da0001ull;
	c.rng = c.seed;
	c.host = (unsigned char *)malloc(CAP);
	if (!c.host) {
		fprintf(stderr, "error: out of memory (%zu bytes)\n", (size_t)CAP);
		return 2;
	}
	int rc = run(&c);
	free(c.host);
	printf("digest-cuda on %s: %ld cases compared with digest_xxh3t64 / XXH3_64bits (sizes 0 .. 1 GiB, "
	       "offsets 0 .. 16), %d failures%s (seed 0x%" PRIx64 ")\n",
	       dev.name, c.cases, c.fails, rc ? ", stopped by an error" : "", c.seed);
	align_dev_close(&dev);
	if (rc)
		return rc;
	return c.fails ? 1 : 0;
}
