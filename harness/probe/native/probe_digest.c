/* probe_digest: the xxh3t64 tensor digest (harness/core/digest.h has the definition) of a strided host
 * tensor, for align_probe (harness/probe/align_probe/digest.py loads this shared library with ctypes).
 * The elements are visited in row-major order of the logical shape and gathered into 65536-byte leaves,
 * so a non-contiguous tensor (a transpose, a slice) gets the digest of its contiguous copy without one
 * being made; a contiguous tensor is hashed in place by digest_xxh3t64. The leaf and root hashing is
 * harness/core/digest.c's, the same code `align ingest` checks payloads with.
 * Element sizes divide the leaf size (1, 2, 4, 8, 16 bytes), so no element straddles two leaves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "digest.h"

#define PROBE_MAX_DIMS 64

/* C linkage, exported: see digest.py for the Python side. Returns 0, or -1 for bad arguments or no
 * memory. shape and strides (in elements, may be negative) have ndim entries; strides NULL means
 * contiguous. */
int align_probe_digest_strided(const void *base, size_t elem_size, int ndim, const int64_t *shape,
			       const int64_t *strides, uint64_t *out);
int align_probe_digest_contiguous(const void *data, size_t bytes, uint64_t *out);
const char *align_probe_digest_alg(void);
int align_probe_digest_roots(const uint64_t *leaves, size_t n_tensors, const uint64_t *bytes, uint64_t *out);

int align_probe_digest_contiguous(const void *data, size_t bytes, uint64_t *out)
{
	if (!out || (!data && bytes))
		return -1;
	*out = digest_xxh3t64(data, bytes);
	return 0;
}

/* The deferred GPU digest's host half (harness/probe/native/probe_cuda.cu): out[t] = the xxh3t64 root
 * over tensor t's ceil(bytes[t] / 65536) leaf digests, which follow tensor t-1's in `leaves`. */
int align_probe_digest_roots(const uint64_t *leaves, size_t n_tensors, const uint64_t *bytes, uint64_t *out)
{
	if (n_tensors && (!bytes || !out))
		return -1;
	size_t at = 0;
	for (size_t t = 0; t < n_tensors; t++) {
		size_t n = (bytes[t] + DIGEST_LEAF_BYTES - 1) / DIGEST_LEAF_BYTES;
		if (n && !leaves)
			return -1;
		out[t] = digest_xxh3t64_root(n ? leaves + at : NULL, n, bytes[t]);
		at += n;
	}
	return 0;
}

const char *align_probe_digest_alg(void)
{
	return DIGEST_ALG;
}

/* Whether strides describe the row-major layout of shape (size-1 dimensions may have any stride). */
static int is_row_major(int ndim, const int64_t *shape, const int64_t *strides)
{
	int64_t want = 1;
	for (int d = ndim - 1; d >= 0; d--) {
		if (shape[d] != 1 && strides[d] != want)
			return 0;
		want *= shape[d];
	}
	return 1;
}

/* Gather state: the row-major odometer over all dimensions but the last. */
struct gather {
	const unsigned char *base;
	size_t esz;
	int ndim;
	const int64_t *shape, *strides;
	int64_t idx[PROBE_MAX_DIMS];
};

/* Byte offset of the current row (all indices but the last). */
static int64_t row_offset(const struct gather *g)
{
	int64_t off = 0;
	for (int d = 0; d < g->ndim - 1; d++)
		off += g->idx[d] * g->strides[d];
	return off * (int64_t)g->esz;
}

static void next_row(struct gather *g)
{
	for (int d = g->ndim - 2; d >= 0; d--) {
		if (++g->idx[d] < g->shape[d])
			return;
		g->idx[d] = 0;
	}
}

int align_probe_digest_strided(const void *base, size_t elem_size, int ndim, const int64_t *shape,
			       const int64_t *strides, uint64_t *out)
{
	if (!out || elem_size == 0 || DIGEST_LEAF_BYTES % elem_size || ndim < 0 || ndim > PROBE_MAX_DIMS)
		return -1;
	uint64_t n = 1;
	for (int d = 0; d < ndim; d++) {
		if (shape[d] < 0)
			return -1;
		n *= (uint64_t)shape[d];
	}
	size_t bytes = (size_t)n * elem_size;
	if (ndim == 0 || n == 0 || !strides || is_row_major(ndim, shape, strides))
		return align_probe_digest_contiguous(base, bytes, out);
	if (!base)
		return -1;
	size_t n_leaves = (bytes + DIGEST_LEAF_BYTES - 1) / DIGEST_LEAF_BYTES;
	uint64_t *leaves = malloc(n_leaves * sizeof *leaves);
	unsigned char *buf = malloc(DIGEST_LEAF_BYTES);
	if (!leaves || !buf) {
		free(leaves);
		free(buf);
		return -1;
	}
	struct gather g = {.base = base, .esz = elem_size, .ndim = ndim, .shape = shape, .strides = strides};
	int64_t cols = shape[ndim - 1], col = 0, step = strides[ndim - 1] * (int64_t)elem_size;
	int64_t row = row_offset(&g);
	size_t fill = 0, leaf = 0;
	for (uint64_t e = 0; e < n; e++) {
		memcpy(buf + fill, g.base + row + col * step, elem_size);
		fill += elem_size;
		if (++col == cols) {
			col = 0;
			next_row(&g);
			row = row_offset(&g);
		}
		if (fill == DIGEST_LEAF_BYTES || e + 1 == n) {
			leaves[leaf++] = XXH3_64bits(buf, fill);
			fill = 0;
		}
	}
	*out = digest_xxh3t64_root(leaves, n_leaves, bytes);
	free(leaves);
	free(buf);
	return 0;
}
