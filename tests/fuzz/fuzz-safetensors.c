/* fuzz-safetensors: the safetensors reader (safetensors.c): header length, the JSON header, dtypes,
 * shapes, data offsets. What it accepts must hold together: every tensor's bytes inside the blob and
 * equal to the product of its shape times the element size, and safetensors_find returns each. */
#include "dtype.h"
#include "err.h"
#include "fuzz.h"
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file("input.safetensors", data, size);
	if (!path)
		return 0;
	struct align_err e = {0};
	struct st_file f = {0};
	if (safetensors_read_err(path, &f, &e))
		return 0;
	volatile uint8_t sink = 0;
	for (size_t i = 0; i < f.n; i++) {
		const struct st_tensor *t = &f.t[i];
		if (t->ndim < 0 || t->ndim > ST_MAX_DIMS)
			abort();
		size_t el = dtype_size(t->dtype);
		uint64_t want = el;
		int over = 0;
		for (int d = 0; d < t->ndim; d++)
			over |= t->shape[d] < 0 || __builtin_mul_overflow(want, (uint64_t)t->shape[d], &want);
		if (el && (over || want != t->bytes)) {
			fprintf(stderr, "fuzz-safetensors: tensor '%s': %zu bytes, shape x %zu wants more or less\n",
				t->name, t->bytes, el);
			abort();
		}
		/* touch the first and last byte: both must be inside the blob */
		if (t->bytes)
			sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->bytes - 1];
		if (!safetensors_find(&f, t->name))
			abort();
	}
	(void)sink;
	safetensors_free(&f);
	return 0;
}
