/* hadamard.h: the Walsh-Hadamard rotation y = scale * H_n x of one row of n = 2^k binary32 values, shared by
 * every op that rotates activations (dsa_indexer: DS-V3.2 `rotate_activation`, specs/dsv4-numerics.md 4.2
 * step 4; the DSv4 indexer compressor, spec 3.4). H_n is Sylvester's matrix, H[i][j] = (-1)^popcount(i & j)
 * (fast_hadamard_transform's and scipy's). Both forms are ALIGN_HD (C and CUDA twins run this very code), and
 * every binary32 operation goes through nan_host.h. The caller rounds y (to bf16 where the library returns the
 * input dtype).
 *   ALIGN_HADAMARD_BUTTERFLY: in place, radix-2 stages with stride h = 1, 2, 4, ..., n/2 (ascending), each
 *     pair (i, i + h) with i & h == 0 becoming (x_i + x_{i+h}, x_i - x_{i+h}) in binary32; then y_i = x_i *
 *     scale (one binary32 product). The model of Dao-AILab fast_hadamard_transform (fp32 compute: per-thread
 *     chunks of 8 for the low strides, then warp shuffles, then shared memory, scale after the last stage;
 *     the stage order is read from its design, not bit-checked: inference) and of an fp32 butterfly.
 *   ALIGN_HADAMARD_DENSE: the torch replay x @ (H * scale)^T: y_i = sum_{j ascending, from +0} x_j * h_ij with
 *     h_ij = +-scale (scale already binary32), one binary32 product and one sum per term.
 *   ALIGN_HADAMARD_NONE: no rotation (y = x; MCore dsa_indexer_rotate_activation=False).
 * Error bound vs the exact scale * H x (A = scale * sum |x_j|): butterfly (log2 n + 1) 2^-24 A (each stage
 * adds at most one relative rounding of the partial sums), dense (n + 1) 2^-24 A.
 */
#ifndef ALIGN_HADAMARD_H
#define ALIGN_HADAMARD_H

#include <stdint.h>

#include "nan_host.h"
#include "numerics.h"

#define ALIGN_HADAMARD_BUTTERFLY 0
#define ALIGN_HADAMARD_DENSE 1
#define ALIGN_HADAMARD_NONE 2

/* n a power of two (>= 1); tmp: n floats (DENSE only; may be NULL otherwise) */
ALIGN_HD static inline void align_hadamard_f32(float *x, int64_t n, float scale, int impl, float *tmp)
{
	if (impl == ALIGN_HADAMARD_NONE)
		return;
	if (impl == ALIGN_HADAMARD_DENSE) {
		for (int64_t i = 0; i < n; i++) {
			float acc = 0.0f;
			for (int64_t j = 0; j < n; j++) {
				int neg = 0;
				for (uint64_t b = (uint64_t)(i & j); b; b &= b - 1)
					neg ^= 1;
				acc = hn_add(acc, hn_mul(x[j], neg ? -scale : scale));
			}
			tmp[i] = acc;
		}
		for (int64_t i = 0; i < n; i++)
			x[i] = tmp[i];
		return;
	}
	for (int64_t h = 1; h < n; h <<= 1)
		for (int64_t i = 0; i < n; i++)
			if (!(i & h)) {
				float a = x[i], b = x[i + h];
				x[i] = hn_add(a, b);
				x[i + h] = hn_sub(a, b);
			}
	for (int64_t i = 0; i < n; i++)
		x[i] = hn_mul(x[i], scale);
}

ALIGN_HD static inline int align_is_pow2(int64_t n)
{
	return n > 0 && (n & (n - 1)) == 0;
}

#endif /* ALIGN_HADAMARD_H */
