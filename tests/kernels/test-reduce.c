/* test-reduce.c: the summation orders of reduce.h follow their documented association.
 * Checks (1) small hand-written expressions for each order, with values chosen so that every
 * association gives different bits, (2) random arrays against independent re-implementations
 * (recursive power-of-two split, explicit lane arrays, long double for F64), (3) strides and
 * squares, (4) determinism. Exit status 0 = pass; the seed is printed on failure. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "reduce.h"
#include "rng.h"

static int fails;

static void expect(const char *what, float got, float want)
{
	if (align_f32_bits(got) != align_f32_bits(want)) {
		printf("FAIL %s: got %a want %a\n", what, got, want);
		fails++;
	}
}

static float rec_pairwise(const float *x, int64_t n)
{
	if (n == 1)
		return x[0];
	int64_t m = 1;
	while (m * 2 < n)
		m *= 2;
	return rec_pairwise(x, m) + rec_pairwise(x + m, n - m);
}

static float lanes_ref(const float *x, int64_t n)
{
	float lane[32];
	for (int l = 0; l < 32; l++) {
		lane[l] = 0.0f;
		for (int64_t i = l; i < n; i += 32)
			lane[l] = lane[l] + x[i];
	}
	float tmp[32];
	for (int off = 16; off; off >>= 1) {
		for (int l = 0; l < 32; l++)
			tmp[l] = lane[l] + lane[l ^ off];
		for (int l = 0; l < 32; l++)
			lane[l] = tmp[l];
	}
	for (int l = 1; l < 32; l++)
		if (align_f32_bits(lane[l]) != align_f32_bits(lane[0]))
			return NAN;
	return lane[0];
}

static void hand_cases(void)
{
	/* 1, 2^-24, 2^-24, ... : the order decides whether the small terms survive */
	const float e = 0x1p-24f;
	float x[7] = {1.0f, e, e, e, e, e, -1.0f};
	expect("seq7", align_reduce_seq(x, 7, 1, 0), (((((1.0f + e) + e) + e) + e) + e) + -1.0f);
	expect("pair7", align_reduce_pairwise(x, 7, 1, 0), ((1.0f + e) + (e + e)) + ((e + e) + -1.0f));
	expect("chunk3", align_reduce_chunked(x, 7, 1, 3, 0), ((1.0f + e) + e) + ((e + e) + e) + -1.0f);
	expect("f64", align_reduce_f64(x, 7, 1, 0), (float)(5.0 * 0x1p-24));
	float w[40];
	for (int i = 0; i < 40; i++)
		w[i] = (float)i + 0.25f;
	w[0] = 0x1p25f;
	w[32] = -0x1p25f;
	/* lane 0 = (0 + 2^25) - 2^25 = 0 exactly; others keep their small values */
	float lane[32];
	for (int l = 0; l < 32; l++)
		lane[l] = l < 8 ? 0.0f + w[l] + w[l + 32] : 0.0f + w[l];
	lane[0] = (0.0f + 0x1p25f) + -0x1p25f;
	for (int off = 16; off; off >>= 1)
		for (int l = 0; l < off; l++)
			lane[l] = lane[l] + lane[l + off];
	expect("warp32", align_reduce_warp32(w, 40, 1, 0), lane[0]);
	float z[3] = {-0.0f, -0.0f, -0.0f};
	expect("seq -0", align_reduce_seq(z, 3, 1, 0), -0.0f);
	expect("pair -0", align_reduce_pairwise(z, 3, 1, 0), -0.0f);
	expect("warp -0", align_reduce_warp32(z, 3, 1, 0), 0.0f);
	expect("empty", align_reduce_seq(z, 0, 1, 0), 0.0f);
	float sq[3] = {3.0f, 4.0f, 0x1.000002p0f};
	expect("sq seq", align_reduce_seq(sq, 3, 1, 1), (9.0f + 16.0f) + 0x1.000002p0f * 0x1.000002p0f);
	expect("sq f64", align_reduce_f64(sq, 3, 1, 1), (float)(25.0 + (double)0x1.000002p0f * 0x1.000002p0f));
}

int main(void)
{
	uint64_t seed = 0x5eed0001u;
	hand_cases();
	enum { NMAX = 5000 };
	static float x[NMAX * 3], col[NMAX];
	for (int trial = 0; trial < 400; trial++) {
		int64_t n = 1 + (int64_t)(align_rng_u64(seed, 1, (uint64_t)trial) % NMAX);
		for (int64_t i = 0; i < n * 3; i++)
			x[i] = align_rng_normalish(seed, 2 + (uint64_t)trial, (uint64_t)i) *
			       (i % 7 == 0 ? 4096.0f : 1.0f);
		for (int64_t i = 0; i < n; i++)
			col[i] = x[i * 3 + 1];
		char what[64];
		snprintf(what, sizeof what, "pairwise n=%" PRId64, n);
		expect(what, align_reduce_pairwise(x, n, 1, 0), rec_pairwise(x, n));
		snprintf(what, sizeof what, "stride n=%" PRId64, n);
		expect(what, align_reduce(ALIGN_REDUCE_PAIRWISE, x + 1, n, 3, 0, 0), rec_pairwise(col, n));
		snprintf(what, sizeof what, "warp32 n=%" PRId64, n);
		expect(what, align_reduce_warp32(x, n, 1, 0), lanes_ref(x, n));
		long double acc = 0;
		double dacc = 0;
		for (int64_t i = 0; i < n; i++) {
			acc += x[i];
			dacc += x[i];
		}
		snprintf(what, sizeof what, "f64 n=%" PRId64, n);
		expect(what, align_reduce_f64(x, n, 1, 0), (float)dacc);
		float seq = 0;
		for (int64_t i = 0; i < n; i++)
			seq = i ? seq + x[i] : x[i];
		snprintf(what, sizeof what, "seq n=%" PRId64, n);
		expect(what, align_reduce_seq(x, n, 1, 0), seq);
		int64_t k = 1 + trial % 300;
		float tot = 0;
		for (int64_t j = 0; j < n; j += k) {
			float p = x[j];
			for (int64_t i = j + 1; i < j + k && i < n; i++)
				p += x[i];
			tot = j ? tot + p : p;
		}
		snprintf(what, sizeof what, "chunked n=%" PRId64 " k=%" PRId64, n, k);
		expect(what, align_reduce_chunked(x, n, 1, k, 0), tot);
		/* error bound of the binary32 orders vs long double */
		long double abs_sum = 0;
		for (int64_t i = 0; i < n; i++)
			abs_sum += fabsl((long double)x[i]);
		float pw = align_reduce_pairwise(x, n, 1, 0);
		int lg = 0;
		while ((1LL << lg) < n)
			lg++;
		if (fabsl((long double)pw - acc) > lg * 0x1p-24L * abs_sum * 1.0001L + 0x1p-149L) {
			printf("FAIL pairwise bound n=%" PRId64 "\n", n);
			fails++;
		}
	}
	if (fails)
		printf("test-reduce: %d failures (seed 0x%" PRIx64 ")\n", fails, seed);
	else
		printf("test-reduce: ok\n");
	return fails ? 1 : 0;
}
