/* digest: the ATF v1 tensor digest "xxh3t64", defined over the tensor's bytes in row-major order of its
 * logical shape and dtype (little-endian elements):
 *   leaves  = consecutive 65536-byte blocks of the bytes (the last one may be shorter; none if empty)
 *   leaf_i  = XXH3_64bits(block_i)                       (seed 0)
 *   digest  = XXH3_64bits_withSeed(leaf_0 .. leaf_{n-1} as little-endian u64, 8n bytes, seed = byte count)
 * written as 16 lower-case hex digits. Position-aware (a permutation or sign flip changes it), and the
 * leaves are independent, so a GPU can hash them in parallel and get the same value. */
#ifndef ALIGN_DIGEST_H
#define ALIGN_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DIGEST_LEAF_BYTES 65536u
#define DIGEST_ALG "xxh3t64"

uint64_t digest_xxh3t64(const void *data, size_t bytes);
/* Combine already computed leaf digests (as the GPU path does). */
uint64_t digest_xxh3t64_root(const uint64_t *leaves, size_t n_leaves, uint64_t total_bytes);
void digest_hex(uint64_t d, char out[17]);

#endif
