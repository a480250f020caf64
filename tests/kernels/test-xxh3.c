/* test-xxh3.c: kernels/core/xxh3.h (our XXH3-64, written from the specification, shared with the GPU
 * digest) against libxxhash, bit for bit:
 *   1. every length 0..4096, each with seed 0 and two random seeds, at a random misalignment;
 *   2. random lengths up to 300000 and every block / stripe / class boundary (+-1) in that range,
 *      with seed 0 and a random seed;
 *   3. the portable 64x64->128 fold against the compiler's 128-bit product (and the edge values);
 *   4. the xxh3t64 tree digest built from xxh3.h against harness/core/digest.c's digest_xxh3t64.
 * Data are random bytes from a splitmix64 stream; the seed is argv[1] (hex) or a fixed default and is
 * printed with every failure. Exit status 0 = pass.
 * Run: meson test -C build kernels-xxh3   (or build/tests/kernels/test-kernels-xxh3 [seed]) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "digest.h"
#include "xxh3.h"

#define MAX_LEN 300000u
#define PAD 64u /* room for misaligning the start */

struct check {
	uint64_t seed; /* master seed of the random stream (printed on failure) */
	uint64_t rng;  /* splitmix64 state */
	long compared; /* comparisons made */
	int fails;     /* failures so far (only the first 20 are printed) */
};

static uint64_t next_u64(struct check *c)
{
	uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fail(struct check *c, const char *what, size_t len, uint64_t seed, uint64_t got, uint64_t want)
{
	if (c->fails++ < 20)
		printf("FAIL %s len=%zu seed=0x%016" PRIx64 ": got %016" PRIx64 " want %016" PRIx64
		       " (test seed 0x%" PRIx64 ")\n",
		       what, len, seed, got, want, c->seed);
}

static void fail_mul(struct check *c, uint64_t a, uint64_t b)
{
	if (c->fails++ < 20)
		printf("FAIL mul128_fold64_portable a=%016" PRIx64 " b=%016" PRIx64 ": got %016" PRIx64
		       " want %016" PRIx64 "\n",
		       a, b, align_xxh3_mul128_fold64_portable(a, b), align_xxh3_mul128_fold64(a, b));
}

static void compare(struct check *c, const unsigned char *p, size_t len, uint64_t seed)
{
	uint64_t got = align_xxh3_64_seed(p, len, seed);
	uint64_t want = XXH3_64bits_withSeed(p, len, seed);
	c->compared++;
	if (got != want)
		fail(c, "XXH3_64bits_withSeed", len, seed, got, want);
	if (seed == 0 && align_xxh3_64(p, len) != XXH3_64bits(p, len))
		fail(c, "XXH3_64bits", len, 0, align_xxh3_64(p, len), XXH3_64bits(p, len));
}

/* Random seeds: half small (the seeded short classes mix the low half), half full 64-bit. */
static uint64_t random_seed(struct check *c)
{
	uint64_t r = next_u64(c);
	return (r & 1) ? next_u64(c) : (r >> 40);
}

static void check_all_short(struct check *c, const unsigned char *buf)
{
	for (size_t len = 0; len <= 4096; len++) {
		const unsigned char *p = buf + next_u64(c) % PAD;
		compare(c, p, len, 0);
		compare(c, p, len, random_seed(c));
		compare(c, p, len, next_u64(c));
	}
}

static void check_long(struct check *c, const unsigned char *buf)
{
	for (int i = 0; i < 1500; i++) {
		size_t len = (size_t)(next_u64(c) % (MAX_LEN + 1));
		const unsigned char *p = buf + next_u64(c) % PAD;
		compare(c, p, len, 0);
		compare(c, p, len, random_seed(c));
	}
	/* boundaries of the 1024-byte blocks (stripe boundaries are multiples of 64 within them) */
	for (size_t b = 1024; b + 1 <= MAX_LEN; b += 1024 * 7 + 64)
		for (size_t d = b - 1; d <= b + 1; d++) {
			compare(c, buf, d, 0);
			compare(c, buf + 3, d, random_seed(c));
		}
	size_t edges[] = {65535, 65536, 65537, 65536 + 64, 65536 + 1023, 131072, 262144, MAX_LEN};
	for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
		compare(c, buf, edges[i], 0);
		compare(c, buf + 1, edges[i], next_u64(c));
	}
}

static void check_mul(struct check *c)
{
	uint64_t edge[] = {0, 1, 0xffffffffu, 0x100000000ull, 0xffffffffffffffffull, 0x8000000000000000ull};
	for (size_t i = 0; i < 6; i++)
		for (size_t k = 0; k < 6; k++)
			if (align_xxh3_mul128_fold64_portable(edge[i], edge[k]) !=
			    align_xxh3_mul128_fold64(edge[i], edge[k]))
				fail_mul(c, edge[i], edge[k]);
	for (int i = 0; i < 200000; i++) {
		uint64_t a = next_u64(c), b = next_u64(c);
		if (align_xxh3_mul128_fold64_portable(a, b) != align_xxh3_mul128_fold64(a, b))
			fail_mul(c, a, b);
	}
}

/* The tree digest from xxh3.h alone: leaves of 65536 bytes, then the little-endian leaf digests
 * hashed with seed = byte count. */
static uint64_t tree_xxh3(const unsigned char *p, size_t bytes)
{
	size_t n = (bytes + DIGEST_LEAF_BYTES - 1) / DIGEST_LEAF_BYTES;
	unsigned char *le = malloc(8 * n + 1);
	if (!le) {
		fprintf(stderr, "error: out of memory\n");
		exit(2);
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = bytes - i * DIGEST_LEAF_BYTES < DIGEST_LEAF_BYTES ? bytes - i * DIGEST_LEAF_BYTES
									       : DIGEST_LEAF_BYTES;
		uint64_t h = align_xxh3_64(p + i * DIGEST_LEAF_BYTES, len);
		for (int b = 0; b < 8; b++)
			le[8 * i + b] = (unsigned char)(h >> (8 * b));
	}
	uint64_t d = align_xxh3_64_seed(le, 8 * n, bytes);
	free(le);
	return d;
}

static void check_tree(struct check *c)
{
	const size_t L = DIGEST_LEAF_BYTES;
	size_t sizes[] = {0,	   1,		240,	 241,	      L - 1,	  L,
			  L + 1,   2 * L,	30 * L,	 30 * L + 1,  31 * L - 1, 31 * L + 17,
			  128 * L, 128 * L + 1, 129 * L, 129 * L + 3, 300 * L,	  1000 * L + 5};
	size_t nsizes = sizeof sizes / sizeof sizes[0];
	size_t cap = 1000 * L + 5 + PAD;
	unsigned char *big = malloc(cap);
	if (!big) {
		fprintf(stderr, "error: out of memory\n");
		exit(2);
	}
	for (size_t i = 0; i + 8 <= cap; i += 8) {
		uint64_t r = next_u64(c);
		memcpy(big + i, &r, 8);
	}
	for (size_t i = 0; i < nsizes + 40; i++) {
		size_t bytes = i < nsizes ? sizes[i] : (size_t)(next_u64(c) % (200 * L));
		const unsigned char *p = big + (i & 7);
		uint64_t got = tree_xxh3(p, bytes), want = digest_xxh3t64(p, bytes);
		c->compared++;
		if (got != want)
			fail(c, "tree digest vs digest_xxh3t64", bytes, bytes, got, want);
	}
	free(big);
}

int main(int argc, char **argv)
{
	struct check c = {.seed = argc > 1 ? strtoull(argv[1], NULL, 16) : 0x5eed0f3a11c0ffeeull};
	c.rng = c.seed;
	unsigned char *buf = malloc(MAX_LEN + PAD);
	if (!buf) {
		fprintf(stderr, "error: out of memory\n");
		return 2;
	}
	for (size_t i = 0; i < MAX_LEN + PAD; i++)
		buf[i] = (unsigned char)(next_u64(&c) >> 56);
	check_all_short(&c, buf);
	long after_short = c.compared;
	check_long(&c, buf);
	long after_long = c.compared;
	check_mul(&c);
	check_tree(&c);
	free(buf);
	printf("xxh3: %ld hashes compared with libxxhash (%ld for lengths 0..4096 x 3 seeds, %ld of random and "
	       "boundary lengths up to %u), %ld tree digests compared with digest_xxh3t64; %d failures "
	       "(test seed 0x%" PRIx64 ")\n",
	       after_long, after_short, after_long - after_short, MAX_LEN, c.compared - after_long, c.fails, c.seed);
	return c.fails ? 1 : 0;
}
