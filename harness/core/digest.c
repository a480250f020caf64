/* digest: CPU implementation of the xxh3t64 tree digest (see digest.h for the definition). */
#include "digest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t digest_xxh3t64_root(const uint64_t *leaves, size_t n_leaves, uint64_t total_bytes)
{
	/* leaves are hashed as little-endian u64; convert on big-endian hosts */
	const union {
		uint16_t u;
		uint8_t b[2];
	} probe = {1};
	if (probe.b[0] == 1)
		return XXH3_64bits_withSeed(leaves, n_leaves * 8, total_bytes);
	uint8_t *le = malloc(n_leaves * 8 + 1);
	for (size_t i = 0; i < n_leaves; i++)
		for (int k = 0; k < 8; k++)
			le[8 * i + k] = (uint8_t)(leaves[i] >> (8 * k));
	uint64_t d = XXH3_64bits_withSeed(le, n_leaves * 8, total_bytes);
	free(le);
	return d;
}

uint64_t digest_xxh3t64(const void *data, size_t bytes)
{
	size_t n = (bytes + DIGEST_LEAF_BYTES - 1) / DIGEST_LEAF_BYTES;
	uint64_t stack[64] = {0};
	uint64_t *leaves = n <= 64 ? stack : malloc(n * sizeof *leaves);
	const unsigned char *p = data;
	for (size_t i = 0; i < n; i++) {
		size_t len = bytes - i * DIGEST_LEAF_BYTES;
		if (len > DIGEST_LEAF_BYTES)
			len = DIGEST_LEAF_BYTES;
		leaves[i] = XXH3_64bits(p + i * DIGEST_LEAF_BYTES, len);
	}
	uint64_t d = digest_xxh3t64_root(leaves, n, bytes);
	if (leaves != stack)
		free(leaves);
	return d;
}

void digest_hex(uint64_t d, char out[17])
{
	snprintf(out, 17, "%016llx", (unsigned long long)d);
}
