/* nan_host.h: NaN results as the host CPU produces them, for the CUDA twins.
 *
 * IEEE 754 says when an operation returns NaN, not which NaN. The C twins run on the host:
 *   x86-64 SSE:   a NaN result is the first source operand if it is a NaN (quieted), else the second
 *                 (quieted), else the "default NaN" 0xffc00000 (sign set; binary64 0xfff8000000000000).
 *   aarch64 (FPCR.DN = 0): a signalling NaN operand first (the first one), then a quiet NaN operand (the
 *                 first one), quieted; else the default NaN 0x7fc00000 (binary64 0x7ff8000000000000).
 * NVIDIA GPUs return the canonical NaN 0x7fffffff instead. So that a CUDA twin gives the C twin's bytes for
 * every input, each binary32 or binary64 +, -, *, / whose result can be NaN goes through hn_add, hn_sub,
 * hn_mul, hn_div (hn_addd, hn_muld for binary64); conversions through hn_f2d / hn_d2f, negation through
 * hn_neg. On the host they are the plain operators (so the C code and these helpers agree trivially); on
 * the device (or with ALIGN_NAN_HOST_EMULATE, which tests/kernels/test-nan-host.c uses to check the model
 * against the host's own arithmetic) the plain operator runs and a NaN result is replaced by the host's
 * choice. The choice depends only on the operands, so the NaN-free fast path is unchanged.
 * Because whether a result is NaN does not depend on NaN bits, a kernel may also compute with the plain
 * operators and recompute with these helpers only a result that came out NaN (rows_cuda.cuh: hx_*).
 *
 * Limit: the left operand of the C expression is taken as the first source. Compilers may commute + and *,
 * which matters only when both operands are NaNs with different payloads; inputs without NaN (every
 * ops_fill_tensor pattern) never meet that case, because every NaN they produce is the default NaN or
 * comes from it. Requires FLT_EVAL_METHOD == 0 like numerics.h.
 */
#ifndef ALIGN_NAN_HOST_H
#define ALIGN_NAN_HOST_H

#include "numerics.h"

/* ALIGN_NAN_WRITTEN_ORDER (defined by a C twin before its first #include): the helpers pick the NaN in the
 * written operand order on the host too, instead of leaving it to the compiler, which may commute the
 * operands of + and * (gcc 12 -O2 did, in mhc_pre_bwd.c: where a sign-flipped default NaN (-(-NaN) of a
 * sigmoid) met the default NaN, the C twin's dscale and dx NaN signs were the commuted operand's, so no
 * CUDA twin following the source could match). A C twin whose NaN values can meet NaNs of other bits
 * defines it; the cost is one NaN test per helper call. */
#if defined(__CUDA_ARCH__) || defined(ALIGN_NAN_HOST_EMULATE) || defined(ALIGN_NAN_WRITTEN_ORDER)
#define ALIGN_NAN_HOST_FIX 1
#else
#define ALIGN_NAN_HOST_FIX 0
#endif

#if defined(__aarch64__)
#define ALIGN_HOST_DEFAULT_NAN_F32 0x7fc00000u
#define ALIGN_HOST_DEFAULT_NAN_F64 0x7ff8000000000000ull
#define ALIGN_HOST_SNAN_FIRST 1
#else /* x86-64 SSE, the only other host the project builds on */
#define ALIGN_HOST_DEFAULT_NAN_F32 0xffc00000u
#define ALIGN_HOST_DEFAULT_NAN_F64 0xfff8000000000000ull
#define ALIGN_HOST_SNAN_FIRST 0
#endif

ALIGN_HD static inline int hn_is_snanf(float x)
{
	return align_isnanf(x) && !(align_f32_bits(x) & 0x00400000u);
}

ALIGN_HD static inline int hn_isnand(double x)
{
	return (align_f64_bits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/* The host's NaN for a binary32 operation on (a, b) whose result is NaN. */
ALIGN_HD static inline float hn_pickf(float a, float b)
{
	if (ALIGN_HOST_SNAN_FIRST && !hn_is_snanf(a) && hn_is_snanf(b))
		return align_quiet_nanf(b);
	if (align_isnanf(a))
		return align_quiet_nanf(a);
	if (align_isnanf(b))
		return align_quiet_nanf(b);
	return align_bits_f32(ALIGN_HOST_DEFAULT_NAN_F32);
}

ALIGN_HD static inline double hn_pickd(double a, double b)
{
	const uint64_t quiet = 0x0008000000000000ull;
	uint64_t ua = align_f64_bits(a), ub = align_f64_bits(b);
	if (ALIGN_HOST_SNAN_FIRST && !(hn_isnand(a) && !(ua & quiet)) && hn_isnand(b) && !(ub & quiet))
		return align_bits_f64(ub | quiet);
	if (hn_isnand(a))
		return align_bits_f64(ua | quiet);
	if (hn_isnand(b))
		return align_bits_f64(ub | quiet);
	return align_bits_f64(ALIGN_HOST_DEFAULT_NAN_F64);
}

ALIGN_HD static inline float hn_fixf(float r, float a, float b)
{
#if ALIGN_NAN_HOST_FIX
	if (align_isnanf(r))
		return hn_pickf(a, b);
#else
	(void)a;
	(void)b;
#endif
	return r;
}

ALIGN_HD static inline double hn_fixd(double r, double a, double b)
{
#if ALIGN_NAN_HOST_FIX
	if (hn_isnand(r))
		return hn_pickd(a, b);
#else
	(void)a;
	(void)b;
#endif
	return r;
}

ALIGN_HD static inline float hn_add(float a, float b)
{
	return hn_fixf(a + b, a, b);
}

ALIGN_HD static inline float hn_sub(float a, float b)
{
	return hn_fixf(a - b, a, b);
}

ALIGN_HD static inline float hn_mul(float a, float b)
{
	return hn_fixf(a * b, a, b);
}

ALIGN_HD static inline float hn_div(float a, float b)
{
	return hn_fixf(a / b, a, b);
}

ALIGN_HD static inline double hn_addd(double a, double b)
{
	return hn_fixd(a + b, a, b);
}

ALIGN_HD static inline double hn_muld(double a, double b)
{
	return hn_fixd(a * b, a, b);
}

/* fmaf(a, b, c) with the host's NaN: a NaN result is the first NaN of (a, b, c) quieted (a and b by
 * hn_pickf's rule), else the host's default NaN. This is glibc's fmaf on x86-64 (vfmadd with the operands
 * in C order, or the binary64 fallback a*b then +c); with at most one distinct NaN among the operands
 * (every input without NaN) the order does not matter. Plain fmaf on the host without the fix. */
ALIGN_HD static inline float hn_fmaf(float a, float b, float c)
{
	float r = fmaf(a, b, c);
#if ALIGN_NAN_HOST_FIX
	if (align_isnanf(r))
		return align_isnanf(a) || align_isnanf(b) ? hn_pickf(a, b) : hn_pickf(c, 0.0f);
#endif
	return r;
}

/* -x as the host does it: a sign flip, also of a NaN (xorps / fneg). */
ALIGN_HD static inline float hn_neg(float x)
{
	return align_bits_f32(align_f32_bits(x) ^ 0x80000000u);
}

/* (double)x: a NaN keeps its sign and payload (shifted up 29 bits) and is quieted. */
ALIGN_HD static inline double hn_f2d(float x)
{
#if ALIGN_NAN_HOST_FIX
	if (align_isnanf(x)) {
		uint32_t u = align_f32_bits(x);
		uint64_t s = (uint64_t)(u >> 31) << 63, p = (uint64_t)(u & 0x003fffffu) << 29;
		return align_bits_f64(s | 0x7ff8000000000000ull | p);
	}
#endif
	return (double)x;
}

/* (float)d: a NaN keeps its sign and the top 22 payload bits and is quieted. */
ALIGN_HD static inline float hn_d2f(double d)
{
#if ALIGN_NAN_HOST_FIX
	if (hn_isnand(d)) {
		uint64_t u = align_f64_bits(d);
		uint32_t s = (uint32_t)(u >> 63) << 31, p = (uint32_t)((u >> 29) & 0x003fffffu);
		return align_bits_f32(s | 0x7fc00000u | p);
	}
#endif
	return (float)d;
}

#endif /* ALIGN_NAN_HOST_H */
