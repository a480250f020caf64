/* fp8.h: FP8 e4m3 (torch.float8_e4m3fn) quantise-dequantise emulation with a per-block scale, shared by the
 * ops that emulate FP8 activations (dsa_indexer: DS-V3.2 `act_quant`, specs/dsv4-numerics.md 4.2 step 5;
 * the DSv4 QAT emulation of spec 3.9 can reuse it). ALIGN_HD: both twins run this code.
 *
 * e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no infinity; finite values are k * 2^-9
 * (|k| < 8, subnormal) and (8 + m) * 2^(e-3) for e in [-6, 8] (largest 448 = 1.75 * 2^8). Every such value
 * is exactly a bf16 value (and the product of two is exact in binary32).
 *
 * align_round_e4m3(x): x rounded to e4m3 to nearest, ties to even, saturating at +-448 (cvt with satfinite;
 *   act_quant clamps to [-448, 448] first, so saturation never decides there); NaN -> NaN (quieted); -0
 *   keeps its sign.
 * align_fp8_scale(amax, rule): the block scale from the block's amax (the caller takes amax = the largest
 *   |x| over the block, NaN elements skipped as CUDA fmaxf does, then amax = max(amax, 1e-4f)):
 *   ALIGN_FP8_SCALE_UE8M0: s = 2^ceil(log2(R(amax * R(1/448)))), the power of two read off the binary32 bits
 *       (exponent + 1 unless the mantissa is 0): DS-V3.2 act_quant with scale_fmt "ue8m0" (fast_round_scale);
 *   ALIGN_FP8_SCALE_MUL:   s = R(amax * R(1/448)): DS-V3.2 act_quant without scale_fmt (fp32 scale);
 *   ALIGN_FP8_SCALE_DIV:   s = R(amax / 448): torch-style fake-quant emulations (amax / fp8_max).
 * align_fp8_code(x, s): the e4m3 code value of x in a block of scale s: align_round_e4m3(clamp(R(x / s),
 *   -448, 448)) (binary32 division; NaN passes the clamp); the dequantised value is code * s.
 */
#ifndef ALIGN_FP8_H
#define ALIGN_FP8_H

#include <stdint.h>

#include "nan_host.h"
#include "numerics.h"

#define ALIGN_FP8_E4M3_MAX 448.0f
#define ALIGN_FP8_AMAX_MIN 1e-4f
#define ALIGN_FP8_SCALE_UE8M0 0
#define ALIGN_FP8_SCALE_MUL 1
#define ALIGN_FP8_SCALE_DIV 2

ALIGN_HD static inline float align_round_e4m3(float x)
{
	uint32_t u = align_f32_bits(x), sign = u & 0x80000000u, a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return align_quiet_nanf(x);
	float r;
	if (a < 0x3c800000u) {				 /* |x| < 2^-6: subnormal e4m3, quantum 2^-9 */
		float m = align_bits_f32(a) * 512.0f;	 /* exact, m < 8 */
		float k = (m + 8388608.0f) - 8388608.0f; /* ties to even (binary32 RN, no contraction) */
		r = k * 0x1p-9f;
	} else if (a >= 0x43e00000u) { /* >= 448 (and inf): saturate */
		r = ALIGN_FP8_E4M3_MAX;
	} else {
		uint32_t v = a + 0x7ffffu + ((a >> 20) & 1u); /* keep 3 mantissa bits, ties to even */
		v &= ~0xfffffu;
		r = align_bits_f32(v);
		if (r > ALIGN_FP8_E4M3_MAX)
			r = ALIGN_FP8_E4M3_MAX; /* 464 and above round to 480: satfinite */
	}
	return align_bits_f32(align_f32_bits(r) | sign);
}

/* the largest |x| seen so far: NaN skipped (fmaxf), as the block reduction of act_quant */
ALIGN_HD static inline float align_fp8_absmax(float amax, float x)
{
	float a = align_bits_f32(align_f32_bits(x) & 0x7fffffffu);
	return align_isnanf(a) || a <= amax ? amax : a;
}

ALIGN_HD static inline float align_fp8_scale(float amax, int rule)
{
	const float inv = (float)(1.0 / 448.0);
	amax = amax > ALIGN_FP8_AMAX_MIN ? amax : ALIGN_FP8_AMAX_MIN;
	if (rule == ALIGN_FP8_SCALE_DIV)
		return amax / ALIGN_FP8_E4M3_MAX;
	float s = amax * inv;
	if (rule == ALIGN_FP8_SCALE_MUL)
		return s;
	uint32_t b = align_f32_bits(s);
	int e = (int)((b >> 23) & 0xffu) - 127 + ((b & 0x7fffffu) != 0);
	return align_bits_f32((uint32_t)(e + 127) << 23);
}

ALIGN_HD static inline float align_fp8_code(float x, float s)
{
	float v = hn_div(x, s);
	if (!align_isnanf(v))
		v = v < -ALIGN_FP8_E4M3_MAX ? -ALIGN_FP8_E4M3_MAX : v > ALIGN_FP8_E4M3_MAX ? ALIGN_FP8_E4M3_MAX : v;
	return align_round_e4m3(v);
}

#endif /* ALIGN_FP8_H */
