/* test-swiglu-table.cu: the SwiGLU CUDA twin on every bf16 pattern of g (all 65536, so every table
 * slot and both closed-form ranges of kernels/ops/swiglu.cu are hit), for every MATH_IMPL the GPU has
 * (portable, cuda, cuda_fast), both silu formulas (SWIGLU_SILU div / mul), both clamp settings (routed
 * expert with limit 10; shared expert, no clamp) and two layouts (F = 256: 16-byte path; F = 1: the
 * scalar path). Checks, byte for byte:
 *   - the table kernel (default launch) equals the serial path, which computes silu directly;
 *   - for portable math, the C twin's bytes (ops_fwd_cpu);
 *   - guard bytes around the output stay intact.
 * u = 1 and p = 1 on the first pass (the output is R(silu(g)) itself), random bf16 u and p on the second.
 * Exit status: 0 pass, 1 mismatch, 2 host or CUDA error, 77 skip (no CUDA device).
 * Run: build-gpu/tests/gpu/test-gpu-swiglu-table (suite gpu). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "gpu_skip.h"
#include "ops_cuda.h"
#include "swiglu.h"

#define GUARD 64
#define NPAT 65536

static uint32_t rng(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

/* one GPU run into a guarded device buffer; out receives the bytes; 0, 1 (guards), 2 (error) */
static int gpu_run(align_fwd_cuda_fn fwd, const struct swiglu_params *p, const struct align_modes *m,
		   struct align_tensor *din, const struct align_tensor *hout, const struct align_launch *L,
		   struct align_dev *dev, uint16_t *out, int *rc)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	size_t bytes = (size_t)NPAT * 2;
	unsigned char *buf = NULL, *back = (unsigned char *)malloc(bytes + 2 * GUARD);
	if (!back)
		return 2;
	CK(cudaMalloc((void **)&buf, bytes + 2 * GUARD));
	CK(cudaMemsetAsync(buf, 0xa5, bytes + 2 * GUARD, stream));
	struct align_tensor o = *hout;
	o.data = buf + GUARD;
	*rc = fwd(p, m, din, 3, &o, 1, L, dev);
	CK(cudaStreamSynchronize(stream));
	CK(cudaMemcpy(back, buf, bytes + 2 * GUARD, cudaMemcpyDeviceToHost));
	CK(cudaFree(buf));
	int bad = 0;
	for (int i = 0; i < GUARD; i++)
		bad |= back[i] != 0xa5 || back[GUARD + bytes + i] != 0xa5;
	memcpy(out, back + GUARD, bytes);
	free(back);
	return bad;
}

static long count_diff(const uint16_t *a, const uint16_t *b, int *first)
{
	long n = 0;
	*first = -1;
	for (int i = 0; i < NPAT; i++)
		if (a[i] != b[i]) {
			if (*first < 0)
				*first = i;
			n++;
		}
	return n;
}

int main(void)
{
	gpu_skip_if_none();
	struct align_err err = {0, "", ""};
	struct align_dev dev;
	if (gpu_dev_open(&dev, &err))
		return 2;
	const struct align_op *op = ops_find("swiglu");
	align_fwd_cuda_fn fwd = op ? ops_cuda_fwd(op) : NULL;
	if (!fwd) {
		fprintf(stderr, "error: no swiglu CUDA twin\n");
		return 2;
	}
	static uint16_t g[NPAT], u[NPAT], want[NPAT], got_t[NPAT], got_s[NPAT];
	static float pr[NPAT];
	static const char *math_names[] = {"portable", "cuda", "cuda_fast"};
	const int layouts[2][2] = {{256, 256}, {NPAT, 1}}; /* T, F */
	int fails = 0, cases = 0;
	for (int i = 0; i < NPAT; i++)
		g[i] = (uint16_t)i;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t s = 0x5eed0000u + (uint64_t)pass;
		for (int i = 0; i < NPAT; i++) {
			u[i] = pass ? (uint16_t)(0x3c00u + (rng(&s) & 0x0fffu)) ^ (uint16_t)(rng(&s) & 0x8000u)
				    : 0x3f80u;
			pr[i] = pass ? (float)(rng(&s) & 0xffffu) / 65536.0f : 1.0f;
		}
		for (int lay = 0; lay < 2; lay++) {
			int64_t T = layouts[lay][0], F = layouts[lay][1];
			struct align_tensor hin[3] = {
				{g, ALIGN_DT_BF16, 2, {T, F}, "swiglu.g"},
				{u, ALIGN_DT_BF16, 2, {T, F}, "swiglu.u"},
				{pr, ALIGN_DT_F32, 1, {T}, "swiglu.p"},
			};
			struct align_tensor hout = {want, ALIGN_DT_BF16, 2, {T, F}, "swiglu.a"};
			struct align_tensor din[3];
			for (int k = 0; k < 3; k++) {
				din[k] = hin[k];
				size_t b = (size_t)align_tensor_numel(&hin[k]) * align_dtype_size(hin[k].dtype);
				CK(cudaMalloc(&din[k].data, b));
				CK(cudaMemcpy(din[k].data, hin[k].data, b, cudaMemcpyHostToDevice));
			}
			for (int math = 0; math < 3; math++)
				for (int mul = 0; mul < 2; mul++)
					for (int shared = 0; shared < 2; shared++) {
						struct align_modes m;
						modes_init_default(&m);
						m.v[MODE_MATH_IMPL] =
							modes_value_index(MODE_MATH_IMPL, math_names[math]);
						m.v[MODE_SWIGLU_SILU] =
							mul ? ALIGN_SWIGLU_SILU_MUL : ALIGN_SWIGLU_SILU_DIV;
						struct swiglu_params p = {10.0f, shared};
						struct align_launch def = {0, 0, 0, 0}, ser = {0, 0, 0, 1};
						int rc1, rc2;
						int e1 = gpu_run(fwd, &p, &m, din, &hout, &def, &dev, got_t, &rc1);
						int e2 = gpu_run(fwd, &p, &m, din, &hout, &ser, &dev, got_s, &rc2);
						if (e1 == 2 || e2 == 2)
							return 2;
						char name[160];
						snprintf(name, sizeof name,
							 "pass %d T=%lld F=%lld MATH_IMPL=%s SILU=%s %s", pass,
							 (long long)T, (long long)F, math_names[math],
							 mul ? "mul" : "div",
							 shared ? "shared (no clamp)" : "routed (limit 10)");
						cases++;
						int first;
						if (rc1 || rc2 || e1 || e2) {
							printf("FAIL %s: status %d / %d, guards %s\n", name, rc1, rc2,
							       e1 || e2 ? "overwritten" : "ok");
							fails++;
							continue;
						}
						long d = count_diff(got_t, got_s, &first);
						if (d) {
							printf("FAIL %s: table path != direct path on %ld patterns "
							       "(first g=0x%04x: "
							       "0x%04x vs 0x%04x)\n",
							       name, d, g[first], got_t[first], got_s[first]);
							fails++;
							continue;
						}
						if (math == 0) {
							int rc = ops_fwd_cpu(op, &p, &m, hin, 3, &hout, 1);
							d = rc ? -1 : count_diff(got_t, want, &first);
							if (d) {
								printf("FAIL %s: CUDA != C twin on %ld patterns (first "
								       "g=0x%04x: 0x%04x "
								       "vs 0x%04x)\n",
								       name, d, d > 0 ? g[first] : 0,
								       d > 0 ? got_t[first] : 0,
								       d > 0 ? want[first] : 0);
								fails++;
								continue;
							}
						}
						printf("PASS %s: 65536 patterns, table == direct%s\n", name,
						       math == 0 ? " == C twin" : "");
					}
			for (int k = 0; k < 3; k++)
				CK(cudaFree(din[k].data));
		}
	}
	align_dev_close(&dev);
	printf("swiglu-table: %d cases, %d failed\n", cases, fails);
	return fails ? 1 : 0;
}
