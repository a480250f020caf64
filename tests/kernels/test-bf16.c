/* test-bf16.c: exhaustive check of binary32 -> bf16 round-to-nearest-even (all 2^32 inputs)
 * against an independent reference that picks the nearer of the two bf16 neighbours by exact
 * binary64 distances, and of the exact bf16 -> binary32 widening (all 2^16 inputs).
 * Exit status 0 = pass. Runtime: ~10 s on one core. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "numerics.h"

/* Reference: bf16 neighbours below and above |x| (by truncation), exact distances in binary64,
 * ties to the even neighbour; the neighbour above the largest finite bf16 is 2^128 (= inf). */
static uint16_t ref_round(uint32_t u)
{
	uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
	float x = align_bits_f32(mag);
	uint32_t lo = mag >> 16;
	uint32_t hi = lo + 1;
	double a = (double)align_bits_f32(lo << 16);
	double b = (lo << 16) == 0x7f7f0000u ? ldexp(1.0, 128) : (double)align_bits_f32(hi << 16);
	double da = (double)x - a, db = b - (double)x;
	uint32_t r;
	if (da < db)
		r = lo;
	else if (db < da)
		r = hi;
	else
		r = (lo & 1u) ? hi : lo;
	return (uint16_t)((sign >> 16) | r);
}

int main(void)
{
	uint64_t bad = 0, nans = 0;
	for (uint64_t i = 0; i <= 0xffffffffull; i++) {
		uint32_t u = (uint32_t)i;
		uint16_t got = align_f32_to_bf16(align_bits_f32(u));
		if ((u & 0x7fffffffu) > 0x7f800000u) {
			nans++;
			int ok = (got & 0x7f80u) == 0x7f80u && (got & 0x0040u) &&
				 (got & 0x8000u) == ((u >> 16) & 0x8000u);
			if (!ok && bad++ < 10)
				printf("nan 0x%08" PRIx32 " -> 0x%04x not a quiet NaN of the same sign\n", u, got);
			continue;
		}
		if ((u & 0x7fffffffu) == 0x7f800000u) {
			if (got != (u >> 16) && bad++ < 10)
				printf("inf 0x%08" PRIx32 " -> 0x%04x\n", u, got);
			continue;
		}
		uint16_t want = ref_round(u);
		if (got != want && bad++ < 10)
			printf("0x%08" PRIx32 " -> 0x%04x, want 0x%04x\n", u, got, want);
	}
	for (uint32_t h = 0; h < 65536; h++) {
		float f = align_bf16_to_f32((align_bf16)h);
		if (align_f32_bits(f) != h << 16 && bad++ < 20)
			printf("widen 0x%04x wrong\n", h);
		if (!align_isnanf(f) && align_f32_to_bf16(f) != h && bad++ < 20)
			printf("round trip 0x%04x wrong\n", h);
	}
	printf("bf16 rounding: 2^32 inputs (%" PRIu64 " NaN), %" PRIu64 " failures\n", nans, bad);
	return bad ? 1 : 0;
}
