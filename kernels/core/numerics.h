/* numerics.h: shared scalar numerics for the C twins and the CUDA twins.
 *
 * Everything here is `ALIGN_HD static inline` so that a CUDA kernel and its C twin call the very
 * same code. Contract for bitwise CPU == GPU (portable functions, names `align_*`):
 *   - built only from IEEE-754 operations that are correctly rounded on both sides: binary32 and
 *     binary64 +, -, *, /, sqrt, conversions double->float (round to nearest even), integer bit
 *     manipulation. No fused multiply-add (host: -ffp-contract=off, set project-wide; device: the
 *     CUDA twins must be compiled with -fmad=false -ftz=false -prec-div=true -prec-sqrt=true);
 *     no library transcendental.
 *   - the transcendentals are evaluated in binary64 (argument reduction + Taylor polynomial whose
 *     truncation error is below 2^-60 relative) and rounded once to binary32. The binary64 result
 *     is within ~4 binary64 ulps of the exact value, so the float result is the correctly rounded
 *     one except when the exact value lies within ~2^-51 relative of a float rounding boundary;
 *     it is then at most 1 float ulp away. tests/kernels/test-math.c measures this.
 *   - NaN results are canonical quiet NaNs (0x7fc00000) for invalid operations and the quieted
 *     input for NaN inputs, because CPUs and GPUs produce different default NaN bit patterns.
 *   - requires FLT_EVAL_METHOD == 0 (SSE2 / any GPU): double rounding through x87 would break it.
 *
 * Mimic functions (names `mimic_*`) reproduce what a framework does instead: they are documented
 * one by one below; some are CPU only (they call the C library) and a CUDA twin asked to run them
 * must report "not supported" rather than substitute another implementation.
 *
 * bf16 values travel as raw bit patterns (`align_bf16`, uint16_t) so that this header does not
 * depend on any vendor bf16 type.
 */
#ifndef ALIGN_NUMERICS_H
#define ALIGN_NUMERICS_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define ALIGN_HD __host__ __device__
#else
#define ALIGN_HD
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "align numerics need FLT_EVAL_METHOD == 0 (no extended-precision intermediates)"
#endif
#endif

/* Raw bf16 bit pattern: sign, 8 exponent bits, 7 mantissa bits (the top half of a binary32). */
typedef uint16_t align_bf16;

#define ALIGN_CANONICAL_NAN_BITS 0x7fc00000u
#define ALIGN_LOG2E_F 1.44269504088896340736f /* rounds to 0x3fb8aa3b */

ALIGN_HD static inline uint32_t align_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

ALIGN_HD static inline float align_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

ALIGN_HD static inline uint64_t align_f64_bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

ALIGN_HD static inline double align_bits_f64(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

ALIGN_HD static inline float align_canonical_nanf(void)
{
	return align_bits_f32(ALIGN_CANONICAL_NAN_BITS);
}

/* NaN input -> the same NaN with the quiet bit set (payload and sign kept). */
ALIGN_HD static inline float align_quiet_nanf(float x)
{
	return align_bits_f32(align_f32_bits(x) | 0x00400000u);
}

ALIGN_HD static inline int align_isnanf(float x)
{
	return (align_f32_bits(x) & 0x7fffffffu) > 0x7f800000u;
}

/* ---- bf16 <-> fp32 ------------------------------------------------------------------------ */

/* R(x): binary32 -> bf16, round to nearest, ties to even. Overflow rounds to +-inf exactly as
 * IEEE does (values >= 0x7f7f8000 in magnitude), subnormals round like any other value (no
 * flush), NaN stays NaN: sign and the top 7 payload bits are kept and the quiet bit is set, so a
 * signalling NaN whose payload lives in the low 16 bits cannot turn into infinity. */
ALIGN_HD static inline align_bf16 align_f32_to_bf16(float f)
{
	uint32_t u = align_f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (align_bf16)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (align_bf16)(u >> 16);
}

/* F(h): exact widening bf16 -> binary32. */
ALIGN_HD static inline float align_bf16_to_f32(align_bf16 h)
{
	return align_bits_f32((uint32_t)h << 16);
}

/* F(R(x)): the binary32 value a bf16 store and reload would give. */
ALIGN_HD static inline float align_round_bf16(float f)
{
	return align_bf16_to_f32(align_f32_to_bf16(f));
}

/* TF32 operand rounding as done by cvt.rna.tf32.f32 (10 mantissa bits, round to nearest, ties
 * away from zero); NaN and inf pass through (NaN quieted). Used by "tf32" GEMM modes. */
ALIGN_HD static inline float align_round_tf32(float f)
{
	uint32_t u = align_f32_bits(f);
	if ((u & 0x7f800000u) == 0x7f800000u)
		return align_isnanf(f) ? align_quiet_nanf(f) : f;
	u += 0x1000u;
	u &= ~0x1fffu;
	return align_bits_f32(u);
}

/* ---- binary64 building blocks (internal; names start with align__) --------------------------- */

#define ALIGN__LN2_HI 6.93147180369123816490e-01 /* 0x3fe62e42fee00000: k*LN2_HI exact, |k|<2^20 */
#define ALIGN__LN2_LO 1.90821492927058770002e-10 /* ln2 - LN2_HI */
#define ALIGN__LN2 6.93147180559945286227e-01
#define ALIGN__LOG2E 1.44269504088896338700e+00
#define ALIGN__SQRT2 1.41421356237309514547e+00
#define ALIGN__RINT_MAGIC 6755399441055744.0 /* 1.5 * 2^52: (x + M) - M rounds x to an integer */

/* e^r - 1 for |r| <= 0.35: Taylor series to r^14/14!, truncation < 2^-62 relative. */
ALIGN_HD static inline double align__expm1_poly(double r)
{
	double q = 1.0 / 87178291200.0; /* 1/14! */
	q = 1.0 / 6227020800.0 + r * q;
	q = 1.0 / 479001600.0 + r * q;
	q = 1.0 / 39916800.0 + r * q;
	q = 1.0 / 3628800.0 + r * q;
	q = 1.0 / 362880.0 + r * q;
	q = 1.0 / 40320.0 + r * q;
	q = 1.0 / 5040.0 + r * q;
	q = 1.0 / 720.0 + r * q;
	q = 1.0 / 120.0 + r * q;
	q = 1.0 / 24.0 + r * q;
	q = 1.0 / 6.0 + r * q;
	q = 0.5 + r * q;
	q = 1.0 + r * q;
	return r * q;
}

/* 2^k as a double for -1022 <= k <= 1023. */
ALIGN_HD static inline double align__pow2i(int k)
{
	return align_bits_f64((uint64_t)(int64_t)(k + 1023) << 52);
}

/* e^k2 * 2^k... : scales p by 2^k in two exact steps (|k| <= 2044). */
ALIGN_HD static inline double align__ldexp(double p, int k)
{
	int k1 = k / 2;
	return p * align__pow2i(k1) * align__pow2i(k - k1);
}

/* e^x in binary64, relative error < 2^-51 for results above 2^-1000; x NaN -> NaN. */
ALIGN_HD static inline double align__exp_d(double x)
{
	if (!(x == x))
		return x;
	if (x > 710.0)
		return 1.0 / 0.0;
	if (x < -746.0)
		return 0.0;
	double kd = (x * ALIGN__LOG2E + ALIGN__RINT_MAGIC) - ALIGN__RINT_MAGIC;
	double r = (x - kd * ALIGN__LN2_HI) - kd * ALIGN__LN2_LO;
	return align__ldexp(1.0 + align__expm1_poly(r), (int)kd);
}

/* 2^x in binary64 for x a float value (r = x - k is exact). */
ALIGN_HD static inline double align__exp2_d(double x)
{
	if (!(x == x))
		return x;
	if (x > 1030.0)
		return 1.0 / 0.0;
	if (x < -1080.0)
		return 0.0;
	double kd = (x + ALIGN__RINT_MAGIC) - ALIGN__RINT_MAGIC;
	double r = x - kd;
	return align__ldexp(1.0 + align__expm1_poly(r * ALIGN__LN2), (int)kd);
}

/* log(1+f) for -0.2929 <= f <= 0.4143 via 2*atanh(s), s = f/(2+f), |s| <= 0.1716;
 * series to s^25, truncation < 2^-62 relative. Keeps the sign of a zero f. */
ALIGN_HD static inline double align__log1p_small(double f)
{
	double s = f / (2.0 + f);
	double z = s * s;
	double t = 1.0 / 25.0;
	t = 1.0 / 23.0 + z * t;
	t = 1.0 / 21.0 + z * t;
	t = 1.0 / 19.0 + z * t;
	t = 1.0 / 17.0 + z * t;
	t = 1.0 / 15.0 + z * t;
	t = 1.0 / 13.0 + z * t;
	t = 1.0 / 11.0 + z * t;
	t = 1.0 / 9.0 + z * t;
	t = 1.0 / 7.0 + z * t;
	t = 1.0 / 5.0 + z * t;
	t = 1.0 / 3.0 + z * t;
	t = z * t;
	return 2.0 * s + 2.0 * s * t;
}

/* log(y) for y a positive, finite, normal binary64. */
ALIGN_HD static inline double align__log_d(double y)
{
	uint64_t u = align_f64_bits(y);
	int e = (int)((u >> 52) & 0x7ff) - 1023;
	double m = align_bits_f64((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
	if (m > ALIGN__SQRT2) {
		m *= 0.5;
		e += 1;
	}
	double ed = (double)e;
	return ed * ALIGN__LN2_HI + (ed * ALIGN__LN2_LO + align__log1p_small(m - 1.0));
}

/* log(1 + y) for y >= 0 or y > -1 in binary64 (y finite). */
ALIGN_HD static inline double align__log1p_d(double y)
{
	if (y > -0.2928 && y < 0.4142)
		return align__log1p_small(y);
	return align__log_d(1.0 + y);
}

/* ---- portable binary32 functions --------------------------------------------------------- */

/* e^x. Overflow to +inf above 88.7228..., underflows through subnormals to +0 below -103.97. */
ALIGN_HD static inline float align_expf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	return (float)align__exp_d((double)x);
}

/* 2^x. */
ALIGN_HD static inline float align_exp2f(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	return (float)align__exp2_d((double)x);
}

/* e^x - 1; exact -0/+0 for zeros, x for tiny x, -1 for large negative x. */
ALIGN_HD static inline float align_expm1f(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	double d = (double)x;
	if (d > -0.34 && d < 0.34)
		return (float)align__expm1_poly(d);
	return (float)(align__exp_d(d) - 1.0);
}

/* Natural log: log(+-0) = -inf, log(x<0) = NaN, log(+inf) = +inf. */
ALIGN_HD static inline float align_logf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x < 0.0f)
		return align_canonical_nanf();
	if (x == 0.0f)
		return -1.0f / 0.0f;
	if (x == 1.0f / 0.0f)
		return x;
	return (float)align__log_d((double)x);
}

/* log(1 + x): -1 -> -inf, below -1 -> NaN, keeps -0. */
ALIGN_HD static inline float align_log1pf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x < -1.0f)
		return align_canonical_nanf();
	if (x == -1.0f)
		return -1.0f / 0.0f;
	if (x == 1.0f / 0.0f)
		return x;
	return (float)align__log1p_d((double)x);
}

/* 1 / (1 + e^-x), evaluated in binary64 and rounded once. */
ALIGN_HD static inline float align_sigmoidf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	return (float)(1.0 / (1.0 + align__exp_d(-(double)x)));
}

/* log(1 + e^x) with PyTorch's threshold: x > 20 returns x. For binary32 that threshold is exact:
 * log1p(e^-x) < 2.1e-9 is below half an ulp of any x > 20, so x is the correctly rounded value. */
ALIGN_HD static inline float align_softplusf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x > 20.0f)
		return x;
	return (float)align__log1p_d(align__exp_d((double)x));
}

/* IEEE square root (correctly rounded on both sides); negative -> canonical NaN. */
ALIGN_HD static inline float align_sqrtf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x < 0.0f)
		return align_canonical_nanf();
#ifdef __CUDA_ARCH__
	return __fsqrt_rn(x);
#else
	return sqrtf(x);
#endif
}

/* 1/sqrt(x) evaluated in binary64 then rounded once (within 1 ulp of correctly rounded; the
 * RN-rsqrt choice). rsqrt(+-0) = +-inf, rsqrt(+inf) = +0, negative -> canonical NaN. */
ALIGN_HD static inline float align_rsqrtf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x == 0.0f)
		return 1.0f / x;
	if (x < 0.0f)
		return align_canonical_nanf();
	return (float)(1.0 / sqrt((double)x));
}

/* 1.0f / sqrtf(x) in binary32: two roundings (the "1/sqrtf" choice of frameworks). */
ALIGN_HD static inline float align_rsqrtf_div(float x)
{
	return 1.0f / align_sqrtf(x);
}

/* x * sigmoid(x) as x / (1 + e^-x) in binary64, rounded once. silu(-inf) = -0 (the limit; the
 * naive formula gives NaN). */
ALIGN_HD static inline float align_siluf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x == -1.0f / 0.0f)
		return -0.0f;
	return (float)((double)x / (1.0 + align__exp_d(-(double)x)));
}

/* ---- sin, cos, pow (RoPE tables) ------------------------------------------------------------ */

/* pi/2 in three 33-bit pieces (fdlibm's pio2_1, pio2_2, pio2_3): k * piece is exact for |k| < 2^20 */
#define ALIGN__PIO2_1 1.57079632673412561417e+00
#define ALIGN__PIO2_2 6.07710050630396597660e-11
#define ALIGN__PIO2_3 2.02226624871116645580e-21
#define ALIGN__2_OVER_PI 6.36619772367581382433e-01
#define ALIGN_TRIG_MAX_ARG 1647099.0f /* (2^20 - 1) * pi/2 rounded down: the exact-reduction domain */

/* r = x - k pi/2 with k = rint(x 2/pi), returned with k mod 4 in *q. x - k PIO2_1 is exact (both are
 * multiples of 2^-32 below 2^21 in magnitude), the second piece is subtracted with an exact two-sum and
 * the third added to the error term: |r error| < 2^-52 |r| + 2^-100 for |x| <= ALIGN_TRIG_MAX_ARG. */
ALIGN_HD static inline double align__rem_pio2(double x, int *q)
{
	double kd = (x * ALIGN__2_OVER_PI + ALIGN__RINT_MAGIC) - ALIGN__RINT_MAGIC;
	double a = x - kd * ALIGN__PIO2_1, b = -(kd * ALIGN__PIO2_2);
	double s = a + b, bb = s - a;
	double err = (a - (s - bb)) + (b - bb);
	*q = (int)((int64_t)kd & 3);
	return s + (err - kd * ALIGN__PIO2_3);
}

/* sin r and cos r for |r| <= pi/4 + 2^-20: Taylor series to r^25/25! and r^24/24!, truncation < 2^-80 */
ALIGN_HD static inline double align__sin_poly(double r)
{
	double z = r * r, p = 0.0;
	for (int n = 25; n >= 3; n -= 2)
		p = (p + 1.0) * z / (double)((n - 1) * n) * -1.0;
	return r + r * p;
}

ALIGN_HD static inline double align__cos_poly(double r)
{
	double z = r * r, p = 0.0;
	for (int n = 24; n >= 2; n -= 2)
		p = (p + 1.0) * z / (double)((n - 1) * n) * -1.0;
	return 1.0 + p;
}

/* sin(x) (cos_ = 0) or cos(x) (cos_ = 1) in binary64 for a binary32 x, rounded once by the caller.
 * Within ALIGN_TRIG_MAX_ARG the binary64 value is within ~4 binary64 ulps; beyond it the reduction is
 * no longer exact (the result stays deterministic and equal on both twins, its accuracy degrades). */
ALIGN_HD static inline double align__sincos_d(float x, int cos_)
{
	int q;
	double r = align__rem_pio2((double)x, &q);
	q = (q + cos_) & 3;
	double v = (q & 1) ? align__cos_poly(r) : align__sin_poly(r);
	return (q & 2) ? -v : v;
}

/* sin(x): +-0 -> +-0, +-inf -> canonical NaN, NaN quieted. */
ALIGN_HD static inline float align_sinf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x == 0.0f)
		return x;
	if (x - x != 0.0f)
		return align_canonical_nanf();
	return (float)align__sincos_d(x, 0);
}

/* cos(x): cos(+-0) = 1, +-inf -> canonical NaN, NaN quieted. */
ALIGN_HD static inline float align_cosf(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x - x != 0.0f)
		return align_canonical_nanf();
	return (float)align__sincos_d(x, 1);
}

/* b^e for a positive, finite, normal b and a finite e: exp(e log b) in binary64, rounded once (the
 * binary64 error is ~|e log b| 2^-52, so the result is correctly rounded or 1 ulp off). Other operands:
 * canonical NaN (callers pass RoPE bases and exponents in [0, 1)). */
ALIGN_HD static inline float align_powf_pos(float b, float e)
{
	if (!(b >= FLT_MIN && b <= FLT_MAX) || e - e != 0.0f)
		return align_canonical_nanf();
	return (float)align__exp_d((double)e * align__log_d((double)b));
}

/* ---- mimic variants ------------------------------------------------------------------------ */

/* e^x as exp2(x * log2(e)) with the product rounded to binary32 first: what Triton/cuTile/
 * FlashMLA style kernels do (`exp2f(x * 1.4426950408889634f)`). Error grows with |x| (the
 * rounding of the product is amplified by x): up to ~|x|*2^-24*ln2 relative. Portable. */
ALIGN_HD static inline float mimic_exp_via_exp2f(float x)
{
	return align_exp2f(x * ALIGN_LOG2E_F);
}

/* Approximate reciprocal square root in the style of CUDA's rsqrtf (MUFU.RSQ, documented as
 * 2 ulp max): a bit-trick seed (0x5f375a86) refined by three Newton steps in binary32,
 * y <- y * (1.5f - (0.5f * x * y) * y). Not correctly rounded (test-math measures the error);
 * built from binary32 ops only, so CPU and GPU agree bit for bit. It does NOT reproduce the
 * hardware MUFU bits. Subnormal inputs are scaled by 2^24 first. */
ALIGN_HD static inline float mimic_rsqrtf_approx(float x)
{
	if (align_isnanf(x))
		return align_quiet_nanf(x);
	if (x == 0.0f)
		return 1.0f / x;
	if (x < 0.0f)
		return align_canonical_nanf();
	if (x == 1.0f / 0.0f)
		return 0.0f;
	float scale = 1.0f;
	if (x < FLT_MIN) {
		x *= 16777216.0f;
		scale = 4096.0f;
	}
	float y = align_bits_f32(0x5f375a86u - (align_f32_bits(x) >> 1));
	float hx = 0.5f * x;
	for (int i = 0; i < 3; i++)
		y = y * (1.5f - (hx * y) * y);
	return y * scale;
}

#ifndef __CUDA_ARCH__
/* The C library's expf / log1pf (CPU only: glibc's results differ from CUDA's expf in the last
 * bit on about 1 input in 5). Used by the "libm" math mode; no CUDA twin exists. */
static inline float mimic_libm_expf(float x)
{
	return expf(x);
}

static inline float mimic_libm_log1pf(float x)
{
	return log1pf(x);
}
#endif

#endif /* ALIGN_NUMERICS_H */
