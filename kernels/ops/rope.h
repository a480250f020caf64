/* rope.h: rotary position embedding (specs/dsv4-numerics.md 3.3; inverse RoPE 3.8; DS-V3.2 indexer 4.2).
 * x[T,H,D] bf16, pos[T] i32 (the position of each row: token index, or c*r for compressed entry c)
 * -> y[T,H,D] bf16: the rope_dim rotated dims (the last rope_dim, or the first with rope_first) are
 * rotated, the other D - rope_dim dims are copied bit for bit.
 *
 * Operation order (CPU twin = specification), all binary32 unless stated, R = round to bf16:
 *   1. inverse frequencies, j = 0..rope_dim/2-1 (torch ops on fp32 tensors, one rounding each):
 *        e_j = (float)(2j) / (float)rope_dim;  pw_j = pow(base, e_j);  f_j = 1.0f / pw_j
 *      YaRN (original_seq_len > 0): low = floor(cd(beta_fast)), high = ceil(cd(beta_slow)) clamped to
 *        [0, rope_dim-1], cd(b) = rope_dim ln(original_seq_len / (2 pi b)) / (2 ln base) (binary64, host);
 *        den = (float)(high - low) (high + 0.001 when equal, as binary64 then rounded);
 *        ramp_j = clamp(((float)j - (float)low) / den, 0, 1);  s_j = 1.0f - ramp_j;
 *        ROPE_YARN_FREQ=div: fi_j = f_j / factor           (DS-ref: freqs / factor)
 *                  div_recip: ramp_j = ((float)j - (float)low) * fl(1/den), fi_j = f_j * fl(1/factor) (DS-ref on
 *                       PyTorch CUDA: a tensor divided by a host scalar is multiplied by its binary32 reciprocal)
 *                       mul: fi_j = 1.0f / (factor * pw_j) (Megatron: 1 / (scaling_factor * pos_freqs))
 *        f_j = fi_j * (1.0f - s_j) + f_j * s_j             (products first, then the sum)
 *   2. angle a = (float)pos * f_j; c = cos(a), s = sin(a) (MATH_IMPL: portable align_cosf/align_sinf/
 *      align_powf_pos, libm = the C library's cosf/sinf/powf on the CPU, cuda = libdevice cosf/sinf/powf,
 *      cuda_fast = __cosf/__sinf/__powf); inverse: s = -s (the conjugate);
 *      ROPE_COSSIN=bf16: c = F(R(c)), s = F(R(s)) (the cos/sin cache in the activation dtype).
 *   3. pair (a, b) = (x[2j], x[2j+1]) (interleaved, DS-ref / Megatron de-interleave + re-interleave) or
 *      (x[j], x[j + rope_dim/2]) (half, NeoX), both F(bf16):
 *        ROPE_ARITH=fp32: ya = R(a*c - b*s), yb = R(a*s + b*c)      (complex64 multiply; equals the
 *                          fp32 rotate-half t*cos + rot(t)*sin bit for bit: same products, + commutes)
 *        ROPE_ARITH=bf16: ya = R(R(a*c) - R(b*s)), yb = R(R(b*c) + R(a*s))   (Megatron unfused on bf16
 *                          tensors: t*cos, rotate_half(t)*sin, their sum; three roundings)
 *        ROPE_ARITH=fma_ac: ya = R(fma(a, c, -(b*s))), yb = R(fma(a, s, b*c));  fma_bd: ya = R(fma(-b, s, a*c)),
 *                          yb = R(fma(b, c, a*s)) (candidates for c10::complex<float> operator* as nvcc
 *                          contracts it in PyTorch's CUDA mul kernel; fmaf explicitly, one rounding each;
 *                          tests/gpu/torch-compare.py's rope probe says which one PyTorch computes)
 * No fused multiply-add anywhere but the explicit fmaf of fma_ac / fma_bd (both twins compiled without
 * contraction).
 * Error bound vs fp64 (the reference evaluates a cos(theta) - b sin(theta), a sin(theta) + b cos(theta) in
 * long double with theta = pos * f_j exactly, f_j the binary32 value of step 1):
 *   |y - ref| <= ulp_bf16(ref) + (|a| + |b|) (|theta| 2^-23 + 2^-21 + [cossin bf16] 2^-8 + [arith bf16] 2^-7)
 * (the angle product's rounding, cos/sin within 1 ulp, the fp32 products and sum; bf16 cos/sin and the
 * bf16 roundings of the products and sum; the final bf16 store).
 * test-ops-ref-indexer.c checks it (the angle term included).
 * Elementwise per row: batch invariant by construction; pos is an input, so rows never depend on T.
 *
 * C entry points for other ops (compressor, indexer, attn: host and device, ALIGN_HD): rope_cfg_modes
 * decodes the switches into struct rope_cfg (no tensors), rope_freq(c, j) gives f_j, rope_cos_sin(c, pos,
 * f, &cs, &sn) the (rounded) cos/sin, rope_pair(c, a, b, cs, sn, &ya, &yb) the rotated pair before the
 * final bf16 store (R(ya), R(yb) are the outputs), rope_row(c, pos, in, out) a whole bf16 head row.
 */
#ifndef ALIGN_ROPE_H
#define ALIGN_ROPE_H

#include <stdint.h>

#include "nan_host.h"
#include "numerics.h"

#ifdef __cplusplus
extern "C" {
#endif
#include "modes.h"

struct align_modes;
struct align_tensor;
struct align_err;

enum rope_pairs {
	ROPE_PAIRS_INTERLEAVED, /* (x[2j], x[2j+1]): DSv4, DS-V3.2 main MLA, DS-V3.2 GitHub indexer */
	ROPE_PAIRS_HALF,	/* (x[j], x[j + rope_dim/2]): NeoX / rotate-half (DS-V3.2 indexer as fixed) */
};

#define ROPE_MAX_DIM 256 /* rope_dim limit (even) */

struct rope_params {
	int rope_dim;	      /* rotated dims, even (64) */
	int rope_first;	      /* 1: the first rope_dim dims rotate (DS-V3.2 indexer), 0: the last (DSv4) */
	int pairs;	      /* enum rope_pairs */
	int inverse;	      /* 1: conjugate rotation (inverse RoPE of the attention output, spec 3.8) */
	float base;	      /* rope_theta 10000 / compress_rope_theta 160000 */
	float factor;	      /* YaRN rope_factor (16) */
	int original_seq_len; /* 0: plain RoPE (window-only layers); > 0: YaRN (65536) */
	float beta_fast;      /* 32 */
	float beta_slow;      /* 1 */
};

/* the decoded frequency/arith choices, shared by every op that applies RoPE */
struct rope_cfg {
	int rd;		/* rope_dim */
	int first;	/* rotated dims first */
	int half;	/* ROPE_PAIRS_HALF */
	int inverse;	/* conjugate */
	int yarn;	/* original_seq_len > 0 */
	int freq_mul;	/* ROPE_YARN_FREQ=mul */
	int freq_recip; /* ROPE_YARN_FREQ=div_recip: the divisions by host scalars as products with fl(1/scalar) */
	int cs_bf16;	/* ROPE_COSSIN=bf16 */
	int arith_bf16; /* ROPE_ARITH=bf16 */
	int arith_fma;	/* ROPE_ARITH=fma_ac: 1, fma_bd: 2, otherwise 0 */
	int math;	/* MATH_IMPL value */
	float base, factor;
	int low, high;		   /* YaRN correction range */
	float den;		   /* ramp denominator */
	float inv_den, inv_factor; /* div_recip: fl(1/den), fl(1/factor) (binary32, as torch's host reciprocal) */
};

/* what the rope op runs: dims + the shared cfg */
struct rope_op_cfg {
	int64_t T, H, D;
	struct rope_cfg r;
};

/* Decode the ROPE_* switches and MATH_IMPL for device from p (no tensors): ALIGN_ERR_INPUT for bad params
 * (rope_dim odd, <= 0, > ROPE_MAX_DIM or > D when D > 0; base <= 1 or not finite; factor <= 0 with YaRN),
 * ALIGN_ERR_UNSUPPORTED for a value device cannot run, ALIGN_ERR_INTERNAL for an unhandled value. */
int rope_cfg_modes(struct rope_cfg *c, const struct rope_params *p, int64_t D, const struct align_modes *m, int device,
		   struct align_err *err);

int rope_cfg_init(struct rope_op_cfg *c, const struct rope_params *p, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		  struct align_err *err);

int rope_fwd_cpu(const struct rope_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		 struct align_tensor *out, int n_out);

void rope_params_default(struct rope_params *p); /* DSv4 compressed layer: 64 last dims, YaRN 160000/16/65536 */

#ifdef __cplusplus
}
#endif

/* ---- the shared element code (both twins, and the ops that apply RoPE) ---- */

ALIGN_HD static inline float rope_powf(int math, float b, float e)
{
#ifdef __CUDA_ARCH__
	if (math == ALIGN_MATH_IMPL_CUDA)
		return powf(b, e);
	if (math == ALIGN_MATH_IMPL_CUDA_FAST)
		return __powf(b, e);
#else
	if (math == ALIGN_MATH_IMPL_LIBM)
		return powf(b, e);
#endif
	return align_powf_pos(b, e);
}

ALIGN_HD static inline float rope_cosf(int math, float x)
{
#ifdef __CUDA_ARCH__
	if (math == ALIGN_MATH_IMPL_CUDA)
		return cosf(x);
	if (math == ALIGN_MATH_IMPL_CUDA_FAST)
		return __cosf(x);
#else
	if (math == ALIGN_MATH_IMPL_LIBM)
		return cosf(x);
#endif
	return align_cosf(x);
}

ALIGN_HD static inline float rope_sinf(int math, float x)
{
#ifdef __CUDA_ARCH__
	if (math == ALIGN_MATH_IMPL_CUDA)
		return sinf(x);
	if (math == ALIGN_MATH_IMPL_CUDA_FAST)
		return __sinf(x);
#else
	if (math == ALIGN_MATH_IMPL_LIBM)
		return sinf(x);
#endif
	return align_sinf(x);
}

/* step 1: f_j */
ALIGN_HD static inline float rope_freq(const struct rope_cfg *c, int j)
{
	float e = (float)(2 * j) / (float)c->rd;
	float pw = rope_powf(c->math, c->base, e);
	float f = 1.0f / pw;
	if (!c->yarn)
		return f;
	float ramp = c->freq_recip ? ((float)j - (float)c->low) * c->inv_den : ((float)j - (float)c->low) / c->den;
	ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
	float s = 1.0f - ramp;
	float fi = c->freq_mul ? 1.0f / (c->factor * pw) : c->freq_recip ? f * c->inv_factor : f / c->factor;
	return fi * (1.0f - s) + f * s;
}

/* step 2: cos/sin of pos * f (rounded to bf16 when the cache is bf16; sin negated for the inverse) */
ALIGN_HD static inline void rope_cos_sin(const struct rope_cfg *c, int32_t pos, float f, float *cs, float *sn)
{
	float a = (float)pos * f;
	float co = rope_cosf(c->math, a), si = rope_sinf(c->math, a);
	if (c->inverse)
		si = -si;
	if (c->cs_bf16) {
		co = align_round_bf16(co);
		si = align_round_bf16(si);
	}
	*cs = co;
	*sn = si;
}

/* step 3 before the final store: the caller stores R(*ya), R(*yb) (bf16 arith: already bf16 values) */
ALIGN_HD static inline void rope_pair(const struct rope_cfg *c, float a, float b, float cs, float sn, float *ya,
				      float *yb)
{
	/* fmaf: correctly rounded on both twins (glibc, CUDA fma.rn); hn_fmaf takes the addend's NaN too (a
	 * NaN b * s with finite a, c: H200 run of 2026-12-03, compressor extreme fill, 0xffc0 vs 0x7fc0) */
	if (c->arith_fma == 1) {
		*ya = hn_fmaf(a, cs, hn_neg(hn_mul(b, sn)));
		*yb = hn_fmaf(a, sn, hn_mul(b, cs));
	} else if (c->arith_fma == 2) {
		*ya = hn_fmaf(hn_neg(b), sn, hn_mul(a, cs));
		*yb = hn_fmaf(b, cs, hn_mul(a, sn));
	} else if (c->arith_bf16) {
		*ya = hn_sub(align_round_bf16(hn_mul(a, cs)), align_round_bf16(hn_mul(b, sn)));
		*yb = hn_add(align_round_bf16(hn_mul(b, cs)), align_round_bf16(hn_mul(a, sn)));
	} else {
		*ya = hn_sub(hn_mul(a, cs), hn_mul(b, sn));
		*yb = hn_add(hn_mul(a, sn), hn_mul(b, cs));
	}
}

/* element indices of pair j inside a head row of D values */
ALIGN_HD static inline void rope_pair_index(const struct rope_cfg *c, int64_t D, int j, int64_t *ia, int64_t *ib)
{
	int64_t o = c->first ? 0 : D - c->rd;
	*ia = o + (c->half ? j : 2 * j);
	*ib = o + (c->half ? j + c->rd / 2 : 2 * j + 1);
}

/* one head row of D bf16 values at position pos (in and out may alias); freq: the rd/2 values of
 * rope_freq (NULL: computed here) */
ALIGN_HD static inline void rope_row(const struct rope_cfg *c, const float *freq, int32_t pos, int64_t D,
				     const align_bf16 *in, align_bf16 *out)
{
	if (in != out) {
		int64_t o = c->first ? c->rd : 0, n = D - c->rd;
		for (int64_t k = 0; k < n; k++)
			out[o + k] = in[o + k];
	}
	for (int j = 0; j < c->rd / 2; j++) {
		int64_t ia, ib;
		rope_pair_index(c, D, j, &ia, &ib);
		float cs, sn, ya, yb;
		rope_cos_sin(c, pos, freq ? freq[j] : rope_freq(c, j), &cs, &sn);
		rope_pair(c, align_bf16_to_f32(in[ia]), align_bf16_to_f32(in[ib]), cs, sn, &ya, &yb);
		out[ia] = align_f32_to_bf16(ya);
		out[ib] = align_f32_to_bf16(yb);
	}
}

#endif /* ALIGN_ROPE_H */
