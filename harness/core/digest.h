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

/* The digest algorithms a record may name (ATF digest_alg), with the hex length of their digests:
 * xxh3t64 16, md5 32, crc32 8 (zlib's CRC-32), sha256 64. 0 for an algorithm align does not know. */
size_t digest_alg_hex_len(const char *alg);
/* The known algorithms, comma separated (for messages). */
const char *digest_alg_names(void);
/* The digest of bytes under alg as lower-case hex (NUL-terminated, at most 64 digits); -1 for an
 * unknown algorithm or a failing hash library. */
int digest_compute_hex(const char *alg, const void *data, size_t bytes, char out[65]);

#endif
