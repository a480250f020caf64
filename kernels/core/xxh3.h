/* xxh3.h: XXH3-64, the 64-bit XXH3 hash of xxHash >= 0.8 (XXH3_64bits, XXH3_64bits_withSeed), for
 * the host (C11) and CUDA devices: every function is `ALIGN_HD static inline`, so the GPU tree digest
 * (digest.cu) and its CPU check call the very same code.
 *
 * Written from the xxHash specification (doc/xxhash_spec.md of github.com/Cyan4973/xxHash, "XXH3
 * algorithm description"); the constants and the 192-byte default secret are the specification's.
 * Length classes, exactly as specified:
 *   0           avalanche64(seed ^ secret[56:64] ^ secret[64:72])
 *   1..3        one 32-bit word (last byte, length, first byte, middle byte) keyed with secret[0:8]
 *   4..8        first and last 4 bytes, rrmxmx, secret[8:24], seed mixed with its byte-swapped low half
 *   9..16       first and last 8 bytes, 64x64->128 multiply folded, secret[24:56]
 *   17..128     pairs of 16-byte chunks from both ends, secret[0:128]
 *   129..240    16-byte chunks, avalanche after the first 8, secret offsets 3 and 119
 *   241..       8 accumulators over 64-byte stripes, 16 stripes a 1024-byte block (secret offset 8 per
 *               stripe), scramble after each block except the last, the last 64 bytes as one more
 *               stripe (secret offset 121), merge with secret offset 11 and len * PRIME64_1.
 *               With a seed, this class uses the secret derived from the seed (64-bit words of the
 *               default secret, + seed on even words, - seed on odd ones); the others use the seed
 *               directly with the default secret.
 * All arithmetic is modulo 2^64 on unsigned integers, so the result does not depend on the order in
 * which the additive stripe contributions are summed: the GPU sums them lane-pair by lane-pair.
 *
 * Lane pairs: the large-input primitives are written per pair of accumulators (2j, 2j+1), j = 0..3,
 * because the accumulation of a stripe couples exactly those two (acc[i ^ 1] += data[i]). One GPU
 * thread owns one pair and reads 16 contiguous bytes per stripe; the CPU loop calls the same
 * functions for j = 0..3.
 *
 * Input bytes are read one by one and assembled little-endian, so the code is endian-independent
 * and needs no alignment (compilers merge the byte loads on the host).
 *
 * Test: tests/kernels/test-xxh3.c compares with libxxhash (meson test -C build kernels-xxh3).
 */
#ifndef ALIGN_XXH3_H
#define ALIGN_XXH3_H

#include <stddef.h>
#include <stdint.h>

/* Same definition as numerics.h (identical redefinition is allowed), kept here so that this header
 * stands alone. */
#ifndef ALIGN_HD
#ifdef __CUDACC__
#define ALIGN_HD __host__ __device__
#else
#define ALIGN_HD
#endif
#endif

#define ALIGN_XXH3_PRIME32_1 0x9E3779B1u
#define ALIGN_XXH3_PRIME32_2 0x85EBCA77u
#define ALIGN_XXH3_PRIME32_3 0xC2B2AE3Du
#define ALIGN_XXH3_PRIME64_1 0x9E3779B185EBCA87ull
#define ALIGN_XXH3_PRIME64_2 0xC2B2AE3D27D4EB4Full
#define ALIGN_XXH3_PRIME64_3 0x165667B19E3779F9ull
#define ALIGN_XXH3_PRIME64_4 0x85EBCA77C2B2AE63ull
#define ALIGN_XXH3_PRIME64_5 0x27D4EB2F165667C5ull
#define ALIGN_XXH3_PRIME_MX1 0x165667919E3779F9ull
#define ALIGN_XXH3_PRIME_MX2 0x9FB21C651E98DF25ull

#define ALIGN_XXH3_SECRET_BYTES 192    /* default secret; 24 little-endian 64-bit words */
#define ALIGN_XXH3_STRIPE_BYTES 64     /* 8 lanes of 8 bytes */
#define ALIGN_XXH3_BLOCK_STRIPES 16    /* (secret bytes - 64) / 8 */
#define ALIGN_XXH3_BLOCK_BYTES 1024    /* stripes per block * 64 */
#define ALIGN_XXH3_MIDSIZE_MAX 240     /* longest input of the 129..240 class */
#define ALIGN_XXH3_SCRAMBLE_OFFSET 128 /* secret bytes - 64 */
#define ALIGN_XXH3_LASTACC_OFFSET 121  /* secret bytes - 64 - 7 */
#define ALIGN_XXH3_MERGE_OFFSET 11

#define ALIGN_XXH3_SECRET_INIT                                                                                         \
	{                                                                                                              \
		0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, 0xde,  \
			0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,      \
			0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72,      \
			0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a,      \
			0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b,      \
			0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46,      \
			0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb,      \
			0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f,      \
			0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5,      \
			0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49,      \
			0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1,      \
			0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16,      \
			0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,                                    \
	}

#ifdef __CUDACC__
/* Device copy of the default secret (one per translation unit; read-only). */
static __constant__ uint8_t align_xxh3_secret_dev[ALIGN_XXH3_SECRET_BYTES] = ALIGN_XXH3_SECRET_INIT;
#endif

/* The 192-byte default secret, in the memory space of the caller. */
ALIGN_HD static inline const uint8_t *align_xxh3_default_secret(void)
{
#ifdef __CUDA_ARCH__
	return align_xxh3_secret_dev;
#else
	static const uint8_t secret[ALIGN_XXH3_SECRET_BYTES] = ALIGN_XXH3_SECRET_INIT;
	return secret;
#endif
}

ALIGN_HD static inline uint64_t align_xxh3_read64(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
	       (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

ALIGN_HD static inline uint32_t align_xxh3_read32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

ALIGN_HD static inline uint32_t align_xxh3_swap32(uint32_t x)
{
	return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

ALIGN_HD static inline uint64_t align_xxh3_swap64(uint64_t x)
{
	return (uint64_t)align_xxh3_swap32((uint32_t)x) << 32 | align_xxh3_swap32((uint32_t)(x >> 32));
}

/* Rotate left by 0 < s < 64. */
ALIGN_HD static inline uint64_t align_xxh3_rotl64(uint64_t x, unsigned s)
{
	return (x << s) | (x >> (64 - s));
}

/* Low and high halves of the 128-bit product a * b, XORed: 32x32 schoolbook, any platform. */
ALIGN_HD static inline uint64_t align_xxh3_mul128_fold64_portable(uint64_t a, uint64_t b)
{
	uint64_t lo_lo = (a & 0xffffffffu) * (b & 0xffffffffu);
	uint64_t hi_lo = (a >> 32) * (b & 0xffffffffu);
	uint64_t lo_hi = (a & 0xffffffffu) * (b >> 32);
	uint64_t hi_hi = (a >> 32) * (b >> 32);
	uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffu) + lo_hi;
	uint64_t upper = (hi_lo >> 32) + (cross >> 32) + hi_hi;
	uint64_t lower = (cross << 32) | (lo_lo & 0xffffffffu);
	return lower ^ upper;
}

/* Low and high halves of the 128-bit product a * b, XORed (the specification's fold). */
ALIGN_HD static inline uint64_t align_xxh3_mul128_fold64(uint64_t a, uint64_t b)
{
#if defined(__CUDA_ARCH__)
	return (a * b) ^ __umul64hi(a, b);
#elif defined(__SIZEOF_INT128__)
	__extension__ typedef unsigned __int128 align_xxh3_u128;
	align_xxh3_u128 p = (align_xxh3_u128)a * b;
	return (uint64_t)p ^ (uint64_t)(p >> 64);
#else
	return align_xxh3_mul128_fold64_portable(a, b);
#endif
}

/* avalanche_XXH64 of the specification. */
ALIGN_HD static inline uint64_t align_xxh3_avalanche64(uint64_t h)
{
	h ^= h >> 33;
	h *= ALIGN_XXH3_PRIME64_2;
	h ^= h >> 29;
	h *= ALIGN_XXH3_PRIME64_3;
	return h ^ (h >> 32);
}

/* avalanche (XXH3) of the specification. */
ALIGN_HD static inline uint64_t align_xxh3_avalanche(uint64_t h)
{
	h ^= h >> 37;
	h *= ALIGN_XXH3_PRIME_MX1;
	return h ^ (h >> 32);
}

ALIGN_HD static inline uint64_t align_xxh3_len_1to3(const uint8_t *p, size_t len, const uint8_t *secret, uint64_t seed)
{
	uint32_t combined =
		(uint32_t)p[len - 1] | (uint32_t)len << 8 | (uint32_t)p[0] << 16 | (uint32_t)p[len >> 1] << 24;
	uint64_t key = (uint64_t)(align_xxh3_read32(secret) ^ align_xxh3_read32(secret + 4)) + seed;
	return align_xxh3_avalanche64(key ^ combined);
}

ALIGN_HD static inline uint64_t align_xxh3_len_4to8(const uint8_t *p, size_t len, const uint8_t *secret, uint64_t seed)
{
	uint64_t mseed = seed ^ (uint64_t)align_xxh3_swap32((uint32_t)seed) << 32;
	uint64_t first = align_xxh3_read32(p), last = align_xxh3_read32(p + len - 4);
	uint64_t key = (align_xxh3_read64(secret + 8) ^ align_xxh3_read64(secret + 16)) - mseed;
	uint64_t v = (last | first << 32) ^ key;
	v ^= align_xxh3_rotl64(v, 49) ^ align_xxh3_rotl64(v, 24);
	v *= ALIGN_XXH3_PRIME_MX2;
	v ^= (v >> 35) + len;
	v *= ALIGN_XXH3_PRIME_MX2;
	return v ^ (v >> 28);
}

ALIGN_HD static inline uint64_t align_xxh3_len_9to16(const uint8_t *p, size_t len, const uint8_t *secret, uint64_t seed)
{
	uint64_t lo = ((align_xxh3_read64(secret + 24) ^ align_xxh3_read64(secret + 32)) + seed) ^ align_xxh3_read64(p);
	uint64_t hi = ((align_xxh3_read64(secret + 40) ^ align_xxh3_read64(secret + 48)) - seed) ^
		      align_xxh3_read64(p + len - 8);
	uint64_t v = (uint64_t)len + align_xxh3_swap64(lo) + hi + align_xxh3_mul128_fold64(lo, hi);
	return align_xxh3_avalanche(v);
}

ALIGN_HD static inline uint64_t align_xxh3_len_0to16(const uint8_t *p, size_t len, const uint8_t *secret, uint64_t seed)
{
	if (len > 8)
		return align_xxh3_len_9to16(p, len, secret, seed);
	if (len >= 4)
		return align_xxh3_len_4to8(p, len, secret, seed);
	if (len > 0)
		return align_xxh3_len_1to3(p, len, secret, seed);
	return align_xxh3_avalanche64(seed ^ align_xxh3_read64(secret + 56) ^ align_xxh3_read64(secret + 64));
}

/* mixStep of the specification: 16 input bytes, 16 secret bytes, the seed. */
ALIGN_HD static inline uint64_t align_xxh3_mix16(const uint8_t *p, const uint8_t *secret, uint64_t seed)
{
	return align_xxh3_mul128_fold64(align_xxh3_read64(p) ^ (align_xxh3_read64(secret) + seed),
					align_xxh3_read64(p + 8) ^ (align_xxh3_read64(secret + 8) - seed));
}

ALIGN_HD static inline uint64_t align_xxh3_len_17to128(const uint8_t *p, size_t len, const uint8_t *secret,
						       uint64_t seed)
{
	uint64_t acc = (uint64_t)len * ALIGN_XXH3_PRIME64_1;
	size_t rounds = ((len - 1) >> 5) + 1;
	for (size_t i = 0; i < rounds; i++) {
		acc += align_xxh3_mix16(p + 16 * i, secret + 32 * i, seed);
		acc += align_xxh3_mix16(p + len - 16 * i - 16, secret + 32 * i + 16, seed);
	}
	return align_xxh3_avalanche(acc);
}

ALIGN_HD static inline uint64_t align_xxh3_len_129to240(const uint8_t *p, size_t len, const uint8_t *secret,
							uint64_t seed)
{
	uint64_t acc = (uint64_t)len * ALIGN_XXH3_PRIME64_1;
	size_t chunks = len >> 4;
	for (size_t i = 0; i < 8; i++)
		acc += align_xxh3_mix16(p + 16 * i, secret + 16 * i, seed);
	acc = align_xxh3_avalanche(acc);
	for (size_t i = 8; i < chunks; i++)
		acc += align_xxh3_mix16(p + 16 * i, secret + 16 * (i - 8) + 3, seed);
	acc += align_xxh3_mix16(p + len - 16, secret + 119, seed);
	return align_xxh3_avalanche(acc);
}

/* Initial value of accumulator i (0..7) for inputs longer than 240 bytes. */
ALIGN_HD static inline uint64_t align_xxh3_acc_init(unsigned i)
{
	switch (i) {
	case 0:
		return ALIGN_XXH3_PRIME32_3;
	case 1:
		return ALIGN_XXH3_PRIME64_1;
	case 2:
		return ALIGN_XXH3_PRIME64_2;
	case 3:
		return ALIGN_XXH3_PRIME64_3;
	case 4:
		return ALIGN_XXH3_PRIME64_4;
	case 5:
		return ALIGN_XXH3_PRIME32_2;
	case 6:
		return ALIGN_XXH3_PRIME64_5;
	default:
		return ALIGN_XXH3_PRIME32_1;
	}
}

/* One stripe's contribution to the accumulator pair (2j, 2j+1): d0, d1 are the stripe's
 * little-endian words 2j and 2j+1, k0, k1 the secret words at the stripe's secret offset + 16j and
 * + 16j + 8. (acc[i ^ 1] += d_i; acc[i] += low32(d_i ^ k_i) * high32(d_i ^ k_i).) */
ALIGN_HD static inline void align_xxh3_accumulate_pair(uint64_t *a0, uint64_t *a1, uint64_t d0, uint64_t d1,
						       uint64_t k0, uint64_t k1)
{
	uint64_t x0 = d0 ^ k0, x1 = d1 ^ k1;
	*a0 += d1 + (uint64_t)(uint32_t)x0 * (uint32_t)(x0 >> 32); /* 32x32->64 (one wide multiply) */
	*a1 += d0 + (uint64_t)(uint32_t)x1 * (uint32_t)(x1 >> 32);
}

/* Scramble of one accumulator with its secret word (secret offset 128 + 8i). */
ALIGN_HD static inline uint64_t align_xxh3_scramble_acc(uint64_t a, uint64_t k)
{
	return (a ^ (a >> 47) ^ k) * ALIGN_XXH3_PRIME32_1;
}

/* The final merge's term of the accumulator pair (2j, 2j+1): s0, s1 are the secret words at offset
 * 11 + 16j and 19 + 16j. The digest is avalanche(len * PRIME64_1 + sum of the four terms). */
ALIGN_HD static inline uint64_t align_xxh3_merge_pair(uint64_t a0, uint64_t a1, uint64_t s0, uint64_t s1)
{
	return align_xxh3_mul128_fold64(a0 ^ s0, a1 ^ s1);
}

ALIGN_HD static inline void align_xxh3_accumulate_stripe(uint64_t acc[8], const uint8_t *p, const uint8_t *secret)
{
	for (unsigned j = 0; j < 4; j++)
		align_xxh3_accumulate_pair(&acc[2 * j], &acc[2 * j + 1], align_xxh3_read64(p + 16 * j),
					   align_xxh3_read64(p + 16 * j + 8), align_xxh3_read64(secret + 16 * j),
					   align_xxh3_read64(secret + 16 * j + 8));
}

/* Inputs longer than 240 bytes, with a 192-byte secret (default or derived). */
ALIGN_HD static inline uint64_t align_xxh3_long(const uint8_t *p, size_t len, const uint8_t *secret)
{
	uint64_t acc[8];
	for (unsigned i = 0; i < 8; i++)
		acc[i] = align_xxh3_acc_init(i);
	size_t blocks = (len - 1) / ALIGN_XXH3_BLOCK_BYTES;
	for (size_t b = 0; b < blocks; b++) {
		const uint8_t *q = p + b * ALIGN_XXH3_BLOCK_BYTES;
		for (unsigned s = 0; s < ALIGN_XXH3_BLOCK_STRIPES; s++)
			align_xxh3_accumulate_stripe(acc, q + s * ALIGN_XXH3_STRIPE_BYTES, secret + 8 * s);
		for (unsigned i = 0; i < 8; i++)
			acc[i] = align_xxh3_scramble_acc(
				acc[i], align_xxh3_read64(secret + ALIGN_XXH3_SCRAMBLE_OFFSET + 8 * i));
	}
	const uint8_t *q = p + blocks * ALIGN_XXH3_BLOCK_BYTES;
	size_t stripes = ((len - 1) - blocks * ALIGN_XXH3_BLOCK_BYTES) / ALIGN_XXH3_STRIPE_BYTES;
	for (size_t s = 0; s < stripes; s++)
		align_xxh3_accumulate_stripe(acc, q + s * ALIGN_XXH3_STRIPE_BYTES, secret + 8 * s);
	align_xxh3_accumulate_stripe(acc, p + len - ALIGN_XXH3_STRIPE_BYTES, secret + ALIGN_XXH3_LASTACC_OFFSET);
	uint64_t h = (uint64_t)len * ALIGN_XXH3_PRIME64_1;
	for (unsigned j = 0; j < 4; j++)
		h += align_xxh3_merge_pair(acc[2 * j], acc[2 * j + 1],
					   align_xxh3_read64(secret + ALIGN_XXH3_MERGE_OFFSET + 16 * j),
					   align_xxh3_read64(secret + ALIGN_XXH3_MERGE_OFFSET + 16 * j + 8));
	return align_xxh3_avalanche(h);
}

/* 64-bit word i (0..23) of the secret derived from `seed`, as a value. */
ALIGN_HD static inline uint64_t align_xxh3_derived_word(const uint8_t *default_secret, unsigned i, uint64_t seed)
{
	uint64_t w = align_xxh3_read64(default_secret + 8 * i);
	return (i & 1) ? w - seed : w + seed;
}

/* The secret derived from `seed` (the large-input class of the seeded hash), as 192 bytes. */
ALIGN_HD static inline void align_xxh3_derive_secret(uint8_t out[ALIGN_XXH3_SECRET_BYTES], uint64_t seed)
{
	const uint8_t *s = align_xxh3_default_secret();
	for (unsigned i = 0; i < ALIGN_XXH3_SECRET_BYTES / 8; i++) {
		uint64_t w = align_xxh3_derived_word(s, i, seed);
		for (unsigned b = 0; b < 8; b++)
			out[8 * i + b] = (uint8_t)(w >> (8 * b));
	}
}

/* XXH3_64bits_withSeed(data, len, seed). `data` may be NULL when len is 0. */
ALIGN_HD static inline uint64_t align_xxh3_64_seed(const void *data, size_t len, uint64_t seed)
{
	const uint8_t *p = (const uint8_t *)data;
	const uint8_t *secret = align_xxh3_default_secret();
	if (len <= 16)
		return align_xxh3_len_0to16(p, len, secret, seed);
	if (len <= 128)
		return align_xxh3_len_17to128(p, len, secret, seed);
	if (len <= ALIGN_XXH3_MIDSIZE_MAX)
		return align_xxh3_len_129to240(p, len, secret, seed);
	if (seed == 0)
		return align_xxh3_long(p, len, secret);
	uint8_t derived[ALIGN_XXH3_SECRET_BYTES];
	align_xxh3_derive_secret(derived, seed);
	return align_xxh3_long(p, len, derived);
}

/* XXH3_64bits(data, len). */
ALIGN_HD static inline uint64_t align_xxh3_64(const void *data, size_t len)
{
	return align_xxh3_64_seed(data, len, 0);
}

#endif
