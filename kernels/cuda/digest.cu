/* digest.cu: the ATF v1 tensor digest "xxh3t64" on a CUDA device (API in digest_cuda.h; definition in
 * harness/core/digest.h; the CPU twin is harness/core/digest.c on libxxhash, and kernels/core/xxh3.h is the XXH3-64
 * shared by both sides of the check).
 *   digest = XXH3_64bits_withSeed(LE u64 leaf digests, seed = byte count),
 *   leaf_i = XXH3_64bits(bytes [65536 i, min(65536 (i + 1), N)))
 *
 * Algorithm
 *   1. Leaves (digest_leaf_split_kernel): 64 threads per leaf, 16 groups of 4; group g computes the
 *      stripe contributions of the leaf's blocks g, g + 16, ... as below from zero, into shared memory,
 *      and group 0 then chains them (acc = scramble(acc + contribution_b)) and finishes; one group a leaf
 *      (digest_leaf_kernel, kept for comparison: align_digest_cuda_set_split_below(0)) hashes the whole
 *      leaf itself and puts too few threads on a tensor of tens of MiB to keep the SMs busy.
 *      Per group: 4 threads per 64 KiB leaf; thread j = 0..3 owns the XXH3
 *      accumulators 2j and 2j+1 (the pair that one stripe couples: acc[i ^ 1] += data[i]) and reads
 *      its 16 bytes of every 64-byte stripe, so one warp load covers 8 leaves x 64 contiguous bytes
 *      (fully used 32-byte sectors). Per 1024-byte block each thread first issues all 16 of its
 *      loads, then accumulates and scrambles its two lanes; no communication until the end. The
 *      last block, the last stripe (the final 64 bytes, secret offset 121) and the final merge follow
 *      the specification; the merge is a sum of one term per pair, added with two warp shuffles.
 *      Leaves longer than 240 bytes (every full leaf, and a long last leaf) take this path; a last
 *      leaf of 1..240 bytes is hashed by thread 0 of its group with the length-class code of xxh3.h.
 *      Keys: thread j keeps secret words 2j..2j+17 in registers (stripe s uses words s+2j, s+2j+1;
 *      scramble 16+2j, 17+2j; the unaligned offsets 121 and 11 are funnel-shifted from them).
 *      Loads: 16-byte vector loads when the input is 16-byte aligned, two 8-byte loads when 8-byte
 *      aligned; otherwise each thread loads the aligned 16-byte chunk where its window starts and gets
 *      the following chunk from its neighbour by a shuffle, then shifts the two by the misalignment
 *      (the same for every window of a launch). Near the end of the input, chunks that would reach
 *      past it are assembled from single bytes, so no byte after the input is read (the aligned
 *      chunk holding the first byte starts up to 15 bytes before it).
 *   2. Root (digest_root_kernel, one CTA of 256 threads, on the device): XXH3-64 with seed N over the
 *      8 n bytes of leaf digests. Up to 240 bytes (n <= 30): thread 0, length classes of xxh3.h.
 *      Longer: the secret derived from the seed; a block's stripe contributions do not depend on the
 *      accumulators, so groups of 4 threads first sum each 1024-byte block's contributions in
 *      parallel (to the workspace), then 4 threads run the short serial chain
 *      acc = scramble(acc + contribution_b) over the blocks and finish as in step 1.
 *      Integer addition modulo 2^64 is associative, so any summation order gives the same bits.
 *   3. The 8-byte digest is copied to the host.
 *
 * Napkin maths (H100 SXM, N = 4 GiB)
 *   bytes read: N once; leaf digests 8 N / 65536 = N / 8192 written and read back (512 KiB at 4 GiB),
 *   root contributions 64 B per 1024 B of leaf digests. Traffic ~ N (1 + 2 / 8192).
 *   compute: per 16 bytes a thread does 2 x (64-bit xor, 32x32->64 multiply, two 64-bit adds) ~ 12-16
 *   SASS instructions, ~1 instruction per byte; 132 SMs x 4 schedulers x 32 lanes x 1.755 GHz ~ 30e12
 *   lane-instructions/s, so ~30 TB/s of hashing versus 3.35 TB/s HBM3 peak: memory bound.
 *   latency: ~3.35 TB/s x ~0.8 us ~ 2.7 MB in flight, ~20 KB per SM; a thread has 256 B in flight per
 *   block, so ~80 resident threads per SM suffice (a 4 GiB input runs 262144 threads).
 *   expected: ~2.9-3.0 TB/s of reads, ~1.45 ms for 4 GiB; the root's serial chain is 511 steps of
 *   ~30 cycles (~9 us, under 1%). cudaMemcpy device-to-device moves 2 N bytes (read + write), so
 *   the fair comparison is hash read bandwidth N / t against copy traffic 2 N / t_copy.
 *   measured (H100 80GB HBM3, bench-digest, 4 GiB, median of 20): leaves kernel 2.92 TB/s = 0.97 of
 *   the copy's 3.03 TB/s traffic (peak 3.35); align_digest_cuda_ws 2.82 TB/s (0.93), at +8 bytes
 *   2.78 (0.92), at +1 byte 2.68 (0.88); align_digest_cuda 2.44-2.64 TB/s (0.81-0.87 over four
 *   runs): its stream-ordered workspace allocation costs 0.1-0.24 ms, because the default pool
 *   returns freed memory at every synchronisation. In loops, use align_digest_cuda_ws with a
 *   workspace kept by the caller.
 *
 * Build: kernels/meson.build (nvcc --fmad=false --prec-div=true --prec-sqrt=true --ftz=false
 *        -arch=sm_90). Test: tests/gpu/test-digest-cuda.cu. Bandwidth: tests/gpu/bench-digest.cu.
 */
#include <stdio.h>

#include "digest_cuda.h"
#include "xxh3.h"

#define DIGEST_LEAF_BYTES_CU 65536u /* = DIGEST_LEAF_BYTES of harness/core/digest.h */
#define DIGEST_GROUP 4		    /* threads per hashed input: thread j owns accumulators 2j, 2j+1 */
#define DIGEST_LEAF_CTA 256	    /* threads per CTA of the leaf kernel (64 leaves) */
#define DIGEST_ROOT_CTA 256	    /* threads of the single root CTA */
#define DIGEST_SPLIT 16		    /* digest_leaf_split_kernel: groups per leaf */
#define DIGEST_SPLIT_LEAVES (DIGEST_LEAF_CTA / (DIGEST_SPLIT * DIGEST_GROUP)) /* leaves per CTA (4) */
#define DIGEST_LEAF_BLOCKS 63 /* full 1024-byte blocks of a 64 KiB leaf: (65536 - 1) / 1024 */
/* inputs of fewer leaves than this take digest_leaf_split_kernel (16x the threads a leaf), the others
 * digest_leaf_kernel (one group a leaf). Every size: measured on an H100 (bench-digest, 2026-12-07), the
 * split kernel was as fast or faster at every size: 32 MiB 0.021 ms vs 0.072 ms (3.4x: one group a leaf
 * runs 2048 threads on 8 SMs), 256 MiB 0.111 vs 0.121 ms, 4 GiB 1.384 vs 1.470 ms (1.03 vs 0.97 of the
 * copy's DRAM traffic) */
#define DIGEST_SPLIT_BELOW UINT64_MAX

static int digest_cuda_fail(const char *call, cudaError_t e, const char *file, int line)
{
	fprintf(stderr, "error: %s failed: %s (%s) at %s:%d\n", call, cudaGetErrorString(e), cudaGetErrorName(e), file,
		line);
	return ALIGN_DIGEST_CUDA_ECUDA;
}

#define DIGEST_CUDA_TRY(call)                                                                                          \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ != cudaSuccess)                                                                                 \
			return digest_cuda_fail(#call, e_, __FILE__, __LINE__);                                        \
	} while (0)

static int digest_cuda_einval(const char *what)
{
	fprintf(stderr, "error: align_digest_cuda: %s\n", what);
	return ALIGN_DIGEST_CUDA_EINVAL;
}

/* ---- device side ---- */

/* (lo, hi) >> sh as one 64-bit word, 0 < sh < 64. */
__device__ __forceinline__ uint64_t digest_shr128(uint64_t lo, uint64_t hi, unsigned sh)
{
	return (lo >> sh) | (hi << (64 - sh));
}

/* The 16 bytes starting r bytes (0 < r < 16) into the 32 bytes lo, hi, as two words. */
__device__ __forceinline__ void digest_shift_pair(ulonglong2 lo, ulonglong2 hi, unsigned r, uint64_t *d0, uint64_t *d1)
{
	if (r < 8) {
		*d0 = digest_shr128(lo.x, lo.y, 8 * r);
		*d1 = digest_shr128(lo.y, hi.x, 8 * r);
	} else if (r == 8) {
		*d0 = lo.y;
		*d1 = hi.x;
	} else {
		*d0 = digest_shr128(lo.y, hi.x, 8 * (r - 8));
		*d1 = digest_shr128(hi.x, hi.y, 8 * (r - 8));
	}
}

/* Load the 16 bytes at q (any alignment, q + 16 <= end) as two little-endian words: the aligned
 * 16-byte chunks holding them, shifted together. The chunk after q's chunk is assembled from single
 * bytes when it would reach past `end`, so no byte after the input is read; bytes before q in q's
 * own aligned chunk are read and discarded. Used where speed does not matter (the last stripe, the
 * last block of an unaligned input). */
__device__ __forceinline__ void digest_load_any(const uint8_t *q, const uint8_t *end, uint64_t *d0, uint64_t *d1)
{
	uintptr_t a = (uintptr_t)q;
	const ulonglong2 *c = (const ulonglong2 *)(a & ~(uintptr_t)15);
	unsigned r = (unsigned)(a & 15);
	ulonglong2 lo = __ldg(c), hi;
	if (r == 0) {
		*d0 = lo.x;
		*d1 = lo.y;
		return;
	}
	if ((const uint8_t *)(c + 2) <= end) {
		hi = __ldg(c + 1);
	} else {
		const uint8_t *b = (const uint8_t *)(c + 1); /* bytes b[0 .. r-1] end at q + 16 */
		hi.x = 0;
		hi.y = 0;
		for (unsigned i = 0; i < r; i++) {
			uint64_t v = (uint64_t)__ldg(b + i) << (8 * (i & 7));
			if (i < 8)
				hi.x |= v;
			else
				hi.y |= v;
		}
	}
	digest_shift_pair(lo, hi, r, d0, d1);
}

/* Secret words 2j .. 2j+17 of the secret derived from `seed` (seed 0: the default secret). */
__device__ __forceinline__ void digest_pair_keys(uint64_t k[18], uint64_t seed, unsigned j)
{
	const uint8_t *s = align_xxh3_default_secret();
#pragma unroll
	for (unsigned m = 0; m < 18; m++)
		k[m] = align_xxh3_derived_word(s, 2 * j + m, seed);
}

/* The 64-bit secret value at byte 8 (2j + m) + r, 0 < r < 8, from the register words k[m], k[m+1]. */
__device__ __forceinline__ uint64_t digest_key_at(const uint64_t k[18], unsigned m, unsigned r)
{
	return (k[m] >> (8 * r)) | (k[m + 1] << (64 - 8 * r));
}

/* One block, unaligned input (no 8-byte alignment): thread j loads the aligned 16-byte chunk c[s]
 * where its window of stripe s starts; the chunk after it is the next thread's c[s] (thread 3: thread
 * 0's c[s + 1]), passed by a shuffle, so each input byte is loaded once as with aligned input. The
 * misalignment r is the same for every window of a launch. Near the end of the input (a chunk would
 * reach past `end`) each window is loaded on its own by digest_load_any. */
__device__ __forceinline__ void digest_block_pairs_unaligned(uint64_t *a0, uint64_t *a1, const uint8_t *q,
							     const uint8_t *end, unsigned ns, const uint64_t k[18],
							     unsigned j, unsigned mask)
{
	uintptr_t qa = (uintptr_t)q;
	unsigned r = (unsigned)(qa & 15);
	const ulonglong2 *c = (const ulonglong2 *)(qa & ~(uintptr_t)15);
	const uint8_t *c0 = (const uint8_t *)c - 16 * j; /* thread 0's chunk of stripe 0 */
	if (c0 + ALIGN_XXH3_STRIPE_BYTES * ns + 16 > end) {
#pragma unroll
		for (unsigned s = 0; s < ALIGN_XXH3_BLOCK_STRIPES; s++) { /* unrolled: k stays in registers */
			if (s < ns) {
				uint64_t d0, d1;
				digest_load_any(q + ALIGN_XXH3_STRIPE_BYTES * s, end, &d0, &d1);
				align_xxh3_accumulate_pair(a0, a1, d0, d1, k[s], k[s + 1]);
			}
		}
		return;
	}
	ulonglong2 lo[ALIGN_XXH3_BLOCK_STRIPES + 1];
#pragma unroll
	for (unsigned s = 0; s <= ALIGN_XXH3_BLOCK_STRIPES; s++) {
		lo[s] = make_ulonglong2(0, 0);
		if (s < ns || (s == ns && j == 0))
			lo[s] = __ldg(c + 4 * s);
	}
#pragma unroll
	for (unsigned s = 0; s < ALIGN_XXH3_BLOCK_STRIPES; s++) {
		if (s < ns) { /* ns is the same for the 4 threads of the group (shuffle partners) */
			ulonglong2 send = j == 0 ? lo[s + 1] : lo[s], hi;
			hi.x = __shfl_sync(mask, send.x, (j + 1) % DIGEST_GROUP, DIGEST_GROUP);
			hi.y = __shfl_sync(mask, send.y, (j + 1) % DIGEST_GROUP, DIGEST_GROUP);
			uint64_t d0, d1;
			digest_shift_pair(lo[s], hi, r, &d0, &d1);
			align_xxh3_accumulate_pair(a0, a1, d0, d1, k[s], k[s + 1]);
		}
	}
}

/* digest_block_pairs for q aligned to A = 16 or 8 bytes. */
template <int A>
__device__ __forceinline__ void digest_block_pairs_aligned(uint64_t *a0, uint64_t *a1, const uint8_t *q, unsigned ns,
							   const uint64_t k[18])
{
	uint64_t d0[ALIGN_XXH3_BLOCK_STRIPES], d1[ALIGN_XXH3_BLOCK_STRIPES];
#pragma unroll
	for (unsigned s = 0; s < ALIGN_XXH3_BLOCK_STRIPES; s++) {
		d0[s] = 0;
		d1[s] = 0;
		if (s >= ns)
			continue;
		const uint8_t *w = q + ALIGN_XXH3_STRIPE_BYTES * s;
		if (A == 16) {
			ulonglong2 v = __ldg((const ulonglong2 *)w);
			d0[s] = v.x;
			d1[s] = v.y;
		} else {
			d0[s] = __ldg((const unsigned long long *)w);
			d1[s] = __ldg((const unsigned long long *)w + 1);
		}
	}
#pragma unroll
	for (unsigned s = 0; s < ALIGN_XXH3_BLOCK_STRIPES; s++)
		if (s < ns)
			align_xxh3_accumulate_pair(a0, a1, d0[s], d1[s], k[s], k[s + 1]);
}

/* Accumulate the first `ns` (<= 16) stripes of one block into the pair (a0, a1); q = block + 16 j,
 * end = the end of the whole input. A: what the caller guarantees about q's alignment, 16, 8 or 1
 * (none). All loads are issued before the arithmetic so that a thread has up to 256 bytes in
 * flight. */
template <int A>
__device__ __forceinline__ void digest_block_pairs(uint64_t *a0, uint64_t *a1, const uint8_t *q, const uint8_t *end,
						   unsigned ns, const uint64_t k[18], unsigned j, unsigned mask)
{
	if (A == 1)
		digest_block_pairs_unaligned(a0, a1, q, end, ns, k, j, mask);
	else
		digest_block_pairs_aligned<A>(a0, a1, q, ns, k);
}

/* After the `nb` full blocks of the len bytes at p: the last block's stripes, the last stripe, the
 * merge (sum of the four pairs' terms through the group's shuffles). end: the end of the whole
 * input. Every thread of the group returns the hash. */
template <int A>
__device__ uint64_t digest_group_finish(const uint8_t *p, uint64_t len, const uint8_t *end, uint64_t nb, uint64_t a0,
					uint64_t a1, const uint64_t k[18], unsigned j, unsigned mask)
{
	uint64_t rest = (len - 1) - nb * ALIGN_XXH3_BLOCK_BYTES;
	digest_block_pairs<A>(&a0, &a1, p + nb * ALIGN_XXH3_BLOCK_BYTES + 16 * j, end,
			      (unsigned)(rest / ALIGN_XXH3_STRIPE_BYTES), k, j, mask);
	uint64_t d0, d1;
	digest_load_any(p + len - ALIGN_XXH3_STRIPE_BYTES + 16 * j, end, &d0, &d1);
	/* secret offset 121 + 16 j = 8 (15 + 2j) + 1 */
	align_xxh3_accumulate_pair(&a0, &a1, d0, d1, digest_key_at(k, 15, 1), digest_key_at(k, 16, 1));
	/* secret offset 11 + 16 j = 8 (1 + 2j) + 3 */
	uint64_t t = align_xxh3_merge_pair(a0, a1, digest_key_at(k, 1, 3), digest_key_at(k, 2, 3));
	t += __shfl_xor_sync(mask, t, 1, DIGEST_GROUP);
	t += __shfl_xor_sync(mask, t, 2, DIGEST_GROUP);
	return align_xxh3_avalanche(len * ALIGN_XXH3_PRIME64_1 + t);
}

/* XXH3-64 (seed 0) of the len > 240 bytes at p by the 4 threads of a group; end: the end of the
 * whole input (reads past p + len, up to end, are allowed). */
template <int A>
__device__ uint64_t digest_group_long(const uint8_t *p, uint64_t len, const uint8_t *end, unsigned j, unsigned mask)
{
	uint64_t k[18];
	digest_pair_keys(k, 0, j);
	uint64_t a0 = align_xxh3_acc_init(2 * j), a1 = align_xxh3_acc_init(2 * j + 1);
	uint64_t nb = (len - 1) / ALIGN_XXH3_BLOCK_BYTES;
	const uint8_t *q = p + 16 * j;
	for (uint64_t b = 0; b < nb; b++, q += ALIGN_XXH3_BLOCK_BYTES) {
		digest_block_pairs<A>(&a0, &a1, q, end, ALIGN_XXH3_BLOCK_STRIPES, k, j, mask);
		a0 = align_xxh3_scramble_acc(a0, k[16]);
		a1 = align_xxh3_scramble_acc(a1, k[17]);
	}
	return digest_group_finish<A>(p, len, end, nb, a0, a1, k, j, mask);
}

/* leaves[i] = XXH3_64bits(leaf i); 4 threads per leaf (blockDim.x a multiple of 32). */
template <int A>
__global__ void __launch_bounds__(DIGEST_LEAF_CTA)
	digest_leaf_kernel(const uint8_t *p, uint64_t bytes, uint64_t n_leaves, uint64_t *leaves)
{
	uint64_t leaf = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / DIGEST_GROUP;
	unsigned j = threadIdx.x % DIGEST_GROUP;
	unsigned mask = 0xfu << (threadIdx.x & 28u);
	if (leaf >= n_leaves)
		return; /* whole groups leave together */
	const uint8_t *q = p + leaf * DIGEST_LEAF_BYTES_CU;
	uint64_t len = bytes - leaf * DIGEST_LEAF_BYTES_CU;
	if (len > DIGEST_LEAF_BYTES_CU)
		len = DIGEST_LEAF_BYTES_CU;
	if (len > ALIGN_XXH3_MIDSIZE_MAX) {
		uint64_t h = digest_group_long<A>(q, len, p + bytes, j, mask);
		if (j == 0)
			leaves[leaf] = h;
	} else if (j == 0) {
		leaves[leaf] = align_xxh3_64_seed(q, (size_t)len, 0);
	}
}

/* The same leaves, 64 threads per leaf (DIGEST_SPLIT groups of 4): group g sums the stripe contributions
 * of the leaf's full blocks g, g + 16, g + 32, g + 48 (from zero: a block's contribution does not depend on
 * the accumulators, as in the root kernel) into shared memory; after the barrier group 0 runs the chain
 * acc = scramble(acc + contribution_b) over the blocks in order and finishes as digest_group_long.
 * Integer addition modulo 2^64 is associative: the bits are digest_leaf_kernel's. For inputs of fewer
 * leaves than the GPU has thread groups (a 32 MiB tensor is 512 leaves: 8 CTAs of digest_leaf_kernel on
 * 132 SMs), so that every SM has loads in flight. */
template <int A>
__global__ void __launch_bounds__(DIGEST_LEAF_CTA)
	digest_leaf_split_kernel(const uint8_t *p, uint64_t bytes, uint64_t n_leaves, uint64_t *leaves)
{
	__shared__ uint64_t contrib[DIGEST_SPLIT_LEAVES][DIGEST_LEAF_BLOCKS][8];
	const unsigned per = DIGEST_SPLIT * DIGEST_GROUP; /* threads per leaf */
	unsigned ll = threadIdx.x / per, g = (threadIdx.x % per) / DIGEST_GROUP, j = threadIdx.x % DIGEST_GROUP;
	unsigned mask = 0xfu << (threadIdx.x & 28u);
	uint64_t leaf = (uint64_t)blockIdx.x * DIGEST_SPLIT_LEAVES + ll;
	const uint8_t *q = p + leaf * DIGEST_LEAF_BYTES_CU;
	uint64_t len = 0, nb = 0;
	if (leaf < n_leaves) {
		len = bytes - leaf * DIGEST_LEAF_BYTES_CU;
		if (len > DIGEST_LEAF_BYTES_CU)
			len = DIGEST_LEAF_BYTES_CU;
	}
	uint64_t k[18];
	int lng = len > ALIGN_XXH3_MIDSIZE_MAX;
	if (lng) {
		digest_pair_keys(k, 0, j);
		nb = (len - 1) / ALIGN_XXH3_BLOCK_BYTES; /* <= DIGEST_LEAF_BLOCKS */
		for (uint64_t b = g; b < nb; b += DIGEST_SPLIT) {
			uint64_t c0 = 0, c1 = 0;
			digest_block_pairs<A>(&c0, &c1, q + b * ALIGN_XXH3_BLOCK_BYTES + 16 * j, p + bytes,
					      ALIGN_XXH3_BLOCK_STRIPES, k, j, mask);
			contrib[ll][b][2 * j] = c0;
			contrib[ll][b][2 * j + 1] = c1;
		}
	}
	__syncthreads();
	if (g != 0 || len == 0)
		return;
	if (!lng) {
		if (j == 0)
			leaves[leaf] = align_xxh3_64_seed(q, (size_t)len, 0);
		return;
	}
	uint64_t a0 = align_xxh3_acc_init(2 * j), a1 = align_xxh3_acc_init(2 * j + 1);
	for (uint64_t b = 0; b < nb; b++) {
		a0 = align_xxh3_scramble_acc(a0 + contrib[ll][b][2 * j], k[16]);
		a1 = align_xxh3_scramble_acc(a1 + contrib[ll][b][2 * j + 1], k[17]);
	}
	uint64_t h = digest_group_finish<A>(q, len, p + bytes, nb, a0, a1, k, j, mask);
	if (j == 0)
		leaves[leaf] = h;
}

/* *out = XXH3_64bits_withSeed(leaves as 8 n bytes, total); one CTA of DIGEST_ROOT_CTA threads;
 * contrib: 8 words per full 1024-byte block of the leaf digests. */
__global__ void __launch_bounds__(DIGEST_ROOT_CTA)
	digest_root_kernel(const uint64_t *leaves, uint64_t n, uint64_t total, uint64_t *contrib, uint64_t *out)
{
	const uint8_t *p = (const uint8_t *)leaves;
	uint64_t len = 8 * n;
	unsigned j = threadIdx.x % DIGEST_GROUP;
	if (len <= ALIGN_XXH3_MIDSIZE_MAX) {
		if (threadIdx.x == 0)
			*out = align_xxh3_64_seed(p, (size_t)len, total);
		return;
	}
	uint64_t k[18];
	digest_pair_keys(k, total, j);
	uint64_t nb = (len - 1) / ALIGN_XXH3_BLOCK_BYTES;
	for (uint64_t b = threadIdx.x / DIGEST_GROUP; b < nb; b += DIGEST_ROOT_CTA / DIGEST_GROUP) {
		uint64_t c0 = 0, c1 = 0;
		digest_block_pairs<16>(&c0, &c1, p + b * ALIGN_XXH3_BLOCK_BYTES + 16 * j, p + len,
				       ALIGN_XXH3_BLOCK_STRIPES, k, j, 0);
		contrib[8 * b + 2 * j] = c0;
		contrib[8 * b + 2 * j + 1] = c1;
	}
	__syncthreads();
	if (threadIdx.x >= DIGEST_GROUP)
		return;
	uint64_t a0 = align_xxh3_acc_init(2 * j), a1 = align_xxh3_acc_init(2 * j + 1);
#pragma unroll 8
	for (uint64_t b = 0; b < nb; b++) {
		a0 = align_xxh3_scramble_acc(a0 + contrib[8 * b + 2 * j], k[16]);
		a1 = align_xxh3_scramble_acc(a1 + contrib[8 * b + 2 * j + 1], k[17]);
	}
	uint64_t h = digest_group_finish<16>(p, len, p + len, nb, a0, a1, k, j, 0xfu);
	if (j == 0)
		*out = h;
}

/* ---- host side ---- */

static uint64_t digest_leaf_count(size_t bytes)
{
	return ((uint64_t)bytes + DIGEST_LEAF_BYTES_CU - 1) / DIGEST_LEAF_BYTES_CU;
}

/* Full 1024-byte blocks of the root input (0 when it is 240 bytes or shorter). */
static uint64_t digest_root_blocks(uint64_t n)
{
	return 8 * n > ALIGN_XXH3_MIDSIZE_MAX ? (8 * n - 1) / ALIGN_XXH3_BLOCK_BYTES : 0;
}

/* Workspace: leaves (8 n bytes, rounded to 16) | root contributions (64 per block) | digest (16). */
static size_t digest_leaves_span(uint64_t n)
{
	return (size_t)((8 * n + 15) / 16 * 16);
}

extern "C" size_t align_digest_cuda_workspace_bytes(size_t bytes)
{
	uint64_t n = digest_leaf_count(bytes);
	return digest_leaves_span(n) + (size_t)(64 * digest_root_blocks(n)) + 16;
}

/* the leaf count below which the split kernel runs; tests and bench-digest set it (0: never split,
 * UINT64_MAX: always) through align_digest_cuda_set_split_below to check and time both kernels */
static uint64_t align_digest_split_below = DIGEST_SPLIT_BELOW;

extern "C" uint64_t align_digest_cuda_set_split_below(uint64_t leaves)
{
	uint64_t old = align_digest_split_below;
	align_digest_split_below = leaves;
	return old;
}

extern "C" int align_digest_leaves_cuda(const void *device_ptr, size_t bytes, uint64_t *device_leaves,
					cudaStream_t stream)
{
	if (bytes == 0)
		return 0;
	if (!device_ptr || !device_leaves)
		return digest_cuda_einval("device_ptr or device_leaves is NULL");
	uint64_t n = digest_leaf_count(bytes);
	uint64_t ctas = (n * DIGEST_GROUP + DIGEST_LEAF_CTA - 1) / DIGEST_LEAF_CTA;
	if (ctas > 0x7fffffffu)
		return digest_cuda_einval("input too large for one grid");
	const uint8_t *p = (const uint8_t *)device_ptr;
	uintptr_t a = (uintptr_t)device_ptr;
	if (n < align_digest_split_below) {
		unsigned sc = (unsigned)((n + DIGEST_SPLIT_LEAVES - 1) / DIGEST_SPLIT_LEAVES);
		if (a % 16 == 0)
			digest_leaf_split_kernel<16><<<sc, DIGEST_LEAF_CTA, 0, stream>>>(p, bytes, n, device_leaves);
		else if (a % 8 == 0)
			digest_leaf_split_kernel<8><<<sc, DIGEST_LEAF_CTA, 0, stream>>>(p, bytes, n, device_leaves);
		else
			digest_leaf_split_kernel<1><<<sc, DIGEST_LEAF_CTA, 0, stream>>>(p, bytes, n, device_leaves);
		DIGEST_CUDA_TRY(cudaGetLastError()); /* the launch of digest_leaf_split_kernel */
		return 0;
	}
	if (a % 16 == 0)
		digest_leaf_kernel<16><<<(unsigned)ctas, DIGEST_LEAF_CTA, 0, stream>>>(p, bytes, n, device_leaves);
	else if (a % 8 == 0)
		digest_leaf_kernel<8><<<(unsigned)ctas, DIGEST_LEAF_CTA, 0, stream>>>(p, bytes, n, device_leaves);
	else
		digest_leaf_kernel<1><<<(unsigned)ctas, DIGEST_LEAF_CTA, 0, stream>>>(p, bytes, n, device_leaves);
	DIGEST_CUDA_TRY(cudaGetLastError()); /* the launch of digest_leaf_kernel */
	return 0;
}

/* Enqueue leaves, root and the 8-byte copy to *host_digest (pageable: the copy waits for the root). */
static int digest_enqueue(const void *device_ptr, size_t bytes, void *ws, uint64_t *host_digest, cudaStream_t stream)
{
	uint64_t n = digest_leaf_count(bytes);
	uint64_t *leaves = (uint64_t *)ws;
	uint64_t *contrib = (uint64_t *)((char *)ws + digest_leaves_span(n));
	uint64_t *dout = contrib + 8 * digest_root_blocks(n);
	int rc = align_digest_leaves_cuda(device_ptr, bytes, leaves, stream);
	if (rc)
		return rc;
	digest_root_kernel<<<1, DIGEST_ROOT_CTA, 0, stream>>>(leaves, n, (uint64_t)bytes, contrib, dout);
	DIGEST_CUDA_TRY(cudaGetLastError()); /* the launch of digest_root_kernel */
	DIGEST_CUDA_TRY(cudaMemcpyAsync(host_digest, dout, sizeof *host_digest, cudaMemcpyDeviceToHost, stream));
	return 0;
}

extern "C" int align_digest_cuda_ws(const void *device_ptr, size_t bytes, void *device_workspace, uint64_t *digest_out,
				    cudaStream_t stream)
{
	if (!digest_out)
		return digest_cuda_einval("digest_out is NULL");
	if (bytes == 0) {
		*digest_out = align_xxh3_64_seed(NULL, 0, 0);
		return 0;
	}
	if (!device_ptr || !device_workspace)
		return digest_cuda_einval("device_ptr or device_workspace is NULL");
	if ((uintptr_t)device_workspace % 16)
		return digest_cuda_einval("device_workspace is not 16-byte aligned");
	uint64_t d = 0;
	int rc = digest_enqueue(device_ptr, bytes, device_workspace, &d, stream);
	if (rc)
		return rc;
	DIGEST_CUDA_TRY(cudaStreamSynchronize(stream));
	*digest_out = d;
	return 0;
}

extern "C" int align_digest_cuda(const void *device_ptr, size_t bytes, uint64_t *digest_out, cudaStream_t stream)
{
	if (!digest_out)
		return digest_cuda_einval("digest_out is NULL");
	if (bytes == 0) {
		*digest_out = align_xxh3_64_seed(NULL, 0, 0);
		return 0;
	}
	if (!device_ptr)
		return digest_cuda_einval("device_ptr is NULL");
	void *ws = NULL;
	DIGEST_CUDA_TRY(cudaMallocAsync(&ws, align_digest_cuda_workspace_bytes(bytes), stream));
	uint64_t d = 0;
	int rc = digest_enqueue(device_ptr, bytes, ws, &d, stream);
	cudaError_t e = cudaFreeAsync(ws, stream);
	if (rc)
		return rc;
	if (e != cudaSuccess)
		return digest_cuda_fail("cudaFreeAsync(ws, stream)", e, __FILE__, __LINE__);
	DIGEST_CUDA_TRY(cudaStreamSynchronize(stream));
	*digest_out = d;
	return 0;
}
