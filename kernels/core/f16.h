/* f16.h: IEEE binary16 (fp16) <-> binary32, as raw bit patterns (align_f16, uint16_t), for the C twins and
 * the CUDA kernels alike (ALIGN_HD; no vendor half type). The collectives (kernels/ops/coll.h) carry fp16
 * data; the rest of the ops do not.
 *   align_f32_to_f16: round to nearest, ties to even; overflow (|x| >= 65520) gives +-inf; subnormal
 *                     results are rounded, not flushed; NaN stays NaN (quiet bit set, top payload kept).
 *   align_f16_to_f32: exact widening (subnormals included).
 * tests/kernels/test-coll.c checks every fp16 value round-trips and the rounding against _Float16 where the
 * compiler has it, else against a binary64 reference. */
#ifndef ALIGN_F16_H
#define ALIGN_F16_H

#include "numerics.h"

typedef uint16_t align_f16;

ALIGN_HD static inline align_f16 align_f32_to_f16(float f)
{
	uint32_t u = align_f32_bits(f);
	uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	if (a > 0x7f800000u) /* NaN: quiet, the top payload bits kept */
		return (align_f16)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
	if (a >= 0x477ff000u) /* >= 65520 = 65504 + half an ulp: the tie goes to the even neighbour, 2^16 = inf */
		return (align_f16)(sign | 0x7c00u);
	if (a >= 0x38800000u) { /* normal result (>= 2^-14): round the 13 dropped bits, rebias 127 -> 15 */
		uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
		return (align_f16)(sign | ((r - 0x38000000u) >> 13));
	}
	uint32_t e = a >> 23;
	if (e < 102) /* below 2^-25: rounds to zero (2^-25 itself is a tie to the even 0) */
		return (align_f16)sign;
	uint32_t m = (a & 0x7fffffu) | 0x800000u; /* value = m * 2^(e-150); in units of 2^-24: m >> (126-e) */
	int shift = 126 - (int)e;		  /* 14..24 */
	uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1u)))
		q++;
	return (align_f16)(sign | q); /* q == 0x400 is the smallest normal, bit-exact */
}

ALIGN_HD static inline float align_f16_to_f32(align_f16 h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0x1fu)
		return align_bits_f32(sign | 0x7f800000u | (m << 13));
	if (e == 0) { /* zero or subnormal: m * 2^-24, exact in binary32 */
		float v = (float)m * 0x1p-24f;
		return sign ? -v : v;
	}
	return align_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* F(R16(x)) */
ALIGN_HD static inline float align_round_f16(float f)
{
	return align_f16_to_f32(align_f32_to_f16(f));
}

#endif /* ALIGN_F16_H */
