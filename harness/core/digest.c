/* digest: CPU implementation of the xxh3t64 tree digest (see digest.h for the definition). */
#include "digest.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zlib.h>

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

static const struct {
	const char *name;
	size_t hex_len;
} algs[] = {{DIGEST_ALG, 16}, {"md5", 32}, {"crc32", 8}, {"sha256", 64}};

size_t digest_alg_hex_len(const char *alg)
{
	for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++)
		if (!strcmp(algs[i].name, alg))
			return algs[i].hex_len;
	return 0;
}

const char *digest_alg_names(void)
{
	return DIGEST_ALG ", md5, crc32, sha256";
}

/* md5 or sha256 through OpenSSL's EVP interface. */
static int evp_hex(const EVP_MD *md, const void *data, size_t bytes, char out[65])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (!EVP_Digest(data, bytes, d, &n, md, NULL) || 2 * n > 64)
		return -1;
	for (unsigned int i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
	return 0;
}

int digest_compute_hex(const char *alg, const void *data, size_t bytes, char out[65])
{
	if (!strcmp(alg, DIGEST_ALG)) {
		digest_hex(digest_xxh3t64(data, bytes), out);
		return 0;
	}
	if (!strcmp(alg, "md5"))
		return evp_hex(EVP_md5(), data, bytes, out);
	if (!strcmp(alg, "sha256"))
		return evp_hex(EVP_sha256(), data, bytes, out);
	if (!strcmp(alg, "crc32")) {
		uLong c = crc32(0L, Z_NULL, 0);
		const unsigned char *p = data;
		for (size_t done = 0; done < bytes;) { /* zlib takes uInt lengths */
			uInt n = bytes - done > (1u << 30) ? (1u << 30) : (uInt)(bytes - done);
			c = crc32(c, p + done, n);
			done += n;
		}
		snprintf(out, 65, "%08lx", (unsigned long)c);
		return 0;
	}
	return -1;
}
