/* test-matmul-impl.cu: the GPU-only engines of the matmul op, MATMUL_IMPL=tc, cublas and cublas_pinned (kernels/ops/matmul.cu,
 * semantics in kernels/ops/matmul.h "Engines"), called through matmul_fwd_cuda like `align run --device cuda`.
 * For every shape below and every engine x MATMUL_OPERAND x MATMUL_OUT x input dtype (bf16 or f32 tensors)
 * combination (the two DSv4 shapes run a subset), into outputs with GUARD bytes on both sides:
 *   1. determinism: 3 runs at T = Tmax into outputs pre-filled with 3 different bytes give identical bytes;
 *   2. agreement with the portable engine (same operand and output modes, default ACCUM=seq, FMA=off):
 *      |y - y_portable| <= tol for every element, with S = sum_k |a_k b_k| over the operands as used
 *      (computed by the portable engine on |a|, |b|), u = 2^-24, and
 *        tol = e_out (|y| + |y_portable|) + (e_engine + D u) S + 2^-140,
 *        e_out    = 1.01 2^-8 for a bf16 output (each side's round to nearest even), 0 for fp32;
 *        D u      = the portable seq bound (matmul.h);
 *        e_engine = tc:           (4 ceil(D/64) + 1) 2^-21: up to 4 fp32 ulps of S per m16n8k16 step, the
 *                                 model of test-matmul-tc.cu (tensor cores add 16 exact products and the
 *                                 accumulator with truncation and limited alignment);
 *                   cublas and cublas_pinned bf16:  (ceil(D/16) + 4) 2^-21 (the same model, any k-tile depth), plus 2^-8 for a
 *                                 bf16 output (split-K may round partial sums to bf16: PyTorch's default
 *                                 reduced-precision reduction, at most 2^-8 of each partial, <= 2^-8 S);
 *                   cublas fp32:  D u (any summation tree of D rounded fp32 operations);
 *                   cublas tf32:  2^-8 (the operands' TF32 conversions: rna here, possibly truncation in
 *                                 cuBLAS, up to 3 2^-10 of each product) + (ceil(D/8) + 4) 2^-21 (k8 mma steps).
 *      The worst err / tol is printed; the engines are not bitwise equal to portable (other orders);
 *   3. batch invariance: the rows of a[r0 : r0 + M] @ b^T against rows r0.. of the T = Tmax result, for M in a
 *      list from 1 to Tmax (r0 = 0), for row blocks of several sizes covering all rows, and for single rows
 *      alone; and the T = Tmax result written to a y one element past 16-byte alignment (tc: through a
 *      temporary). Asserted for tc and cublas_pinned; REPORTED (INFO lines, not verdicts) for cublas, whose
 *      kernel choice depends on T and on the pointers' alignment;
 *   4. guard bytes: every call of 1-3 leaves the bytes around its output untouched;
 *   5. refusals (status 4, nothing written): tc, cublas and cublas_pinned with MATMUL_ACCUM=split16 or fp64,
 *      MATMUL_FMA=on; tc and cublas_pinned with MATMUL_OPERAND=fp32 or tf32; a wrong output dtype gives 2; the enum matmul_impl order is the
 *      MATMUL_IMPL value order of modes.def.
 * Inputs: counter-RNG normal-ish values (kernels/core/rng.h), a scaled by 2^(row % 9 - 4) per row (rows of different
 * magnitudes), row 0 of a all zeros, b at scale 1/16; the bf16 inputs are the f32 ones rounded to nearest even.
 * Every fill is cudaMemsetAsync on the test's cudaStreamNonBlocking stream and every copy back follows
 * cudaStreamSynchronize (a plain cudaMemset / cudaMemcpy on the legacy stream is not ordered with it).
 * Exit status: 0 pass, 1 a check failed, 2 CUDA or host error, 77 skip (no CUDA device).
 * Run: meson test -C build-gpu --suite gpu gpu-matmul-impl, or build-gpu/tests/gpu/test-gpu-matmul-impl [--quick]
 * (--quick: the small shapes only). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "gpu-build-commit.h"
#include "gpu_skip.h"
#include "matmul.h"
#include "ops_cuda.h"
#include "rng.h"

#define GUARD 256 /* bytes before and after every output; a multiple of 16 keeps y 16-byte aligned */
#define SEED 0x3c3c5a5aull
#define NBUF 6	    /* guarded buffers: 3 determinism runs, portable, S, scratch */
#define YOFF_MAX 16 /* the largest y offset past GUARD that a call uses (an unaligned y) */

struct shape {
	int64_t t, d, f; /* Tmax, D, F */
	int big;	 /* 1: DSv4 size, the combinations marked big only */
	const char *why;
};

static const struct shape shapes[] = {
	{4096, 7168, 4096, 1, "DSv4 hidden 7168 -> 4096"},
	{4096, 4096, 7168, 1, "DSv4 4096 -> hidden 7168"},
	{515, 200, 264, 0, "D not a multiple of 64, F not of 256"},
	{257, 100, 77, 0, "D % 8 != 0 (tc stages padded operands), odd F (scalar stores)"},
	{33, 8, 1, 0, "F = 1, D = 8"},
	{5, 0, 9, 0, "D = 0: y = +0"},
};

struct combo {
	int impl, opd, out_bf16, in_bf16;
	int big; /* also on the DSv4 shapes */
};

static const struct combo combos[] = {
	{ALIGN_MATMUL_IMPL_TC, ALIGN_MATMUL_OPERAND_BF16, 1, 1, 1},
	{ALIGN_MATMUL_IMPL_TC, ALIGN_MATMUL_OPERAND_BF16, 0, 1, 1},
	{ALIGN_MATMUL_IMPL_TC, ALIGN_MATMUL_OPERAND_BF16, 1, 0, 0},
	{ALIGN_MATMUL_IMPL_TC, ALIGN_MATMUL_OPERAND_BF16, 0, 0, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_BF16, 1, 1, 1},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_BF16, 0, 1, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_BF16, 1, 0, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_BF16, 0, 0, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_FP32, 0, 0, 1},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_FP32, 1, 0, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_FP32, 0, 1, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_FP32, 1, 1, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_TF32, 0, 0, 1},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_TF32, 1, 0, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_TF32, 0, 1, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS, ALIGN_MATMUL_OPERAND_TF32, 1, 1, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS_PINNED, ALIGN_MATMUL_OPERAND_BF16, 1, 1, 1},
	{ALIGN_MATMUL_IMPL_CUBLAS_PINNED, ALIGN_MATMUL_OPERAND_BF16, 0, 1, 1},
	{ALIGN_MATMUL_IMPL_CUBLAS_PINNED, ALIGN_MATMUL_OPERAND_BF16, 1, 0, 0},
	{ALIGN_MATMUL_IMPL_CUBLAS_PINNED, ALIGN_MATMUL_OPERAND_BF16, 0, 0, 0},
};

/* engines whose batch invariance is asserted (cublas's is reported) */
static int invariant_engine(int impl)
{
	return impl == ALIGN_MATMUL_IMPL_TC || impl == ALIGN_MATMUL_IMPL_CUBLAS_PINNED;
}

struct gbuf {
	unsigned char *d; /* device: GUARD | output | GUARD */
	unsigned char *h; /* host copy of the same bytes */
};

struct ctx {
	const struct shape *sh;
	struct align_dev *dev; /* the device context */
	cudaStream_t s;	       /* dev->stream: every fill, launch and wait */
	float *a32, *b32;      /* device inputs, f32 */
	align_bf16 *a16, *b16; /* the same rounded to bf16 */
	float *abs_a, *abs_b;  /* |operand source| for S (f32) */
	struct gbuf buf[NBUF]; /* each Tmax * F * 4 + 2 GUARD bytes */
	int fails;
};

static const char *impl_name(int impl)
{
	return modes_value_name(MODE_MATMUL_IMPL, impl);
}

static const char *opd_name(int opd)
{
	return modes_value_name(MODE_MATMUL_OPERAND, opd);
}

__global__ void gen_inputs(float *a32, align_bf16 *a16, int64_t t, int64_t d, float *b32, align_bf16 *b16, int64_t f)
{
	const int64_t na = t * d, n = na + f * d;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		if (i < na) {
			int64_t row = i / d;
			float v =
				row == 0 ? 0.0f
					 : align_rng_normalish(SEED, 1, (uint64_t)i) * ldexpf(1.0f, (int)(row % 9) - 4);
			a32[i] = v;
			a16[i] = align_f32_to_bf16(v);
		} else {
			float v = align_rng_normalish(SEED, 2, (uint64_t)(i - na)) * 0.0625f;
			b32[i - na] = v;
			b16[i - na] = align_f32_to_bf16(v);
		}
	}
}

/* dst[i] = |src[i]| (src bf16 or f32): the operand sources of S */
__global__ void gen_abs(const void *src, int bf16, int64_t n, float *dst)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
		dst[i] = fabsf(bf16 ? align_bf16_to_f32(((const align_bf16 *)src)[i]) : ((const float *)src)[i]);
}

/* one verdict line: the combination (k; NULL: none), the shape, what was checked */
static void verdict(struct ctx *c, int ok, const struct combo *k, const char *what)
{
	printf("%s ", ok ? "PASS" : "FAIL");
	if (k)
		printf("%s opd=%s out=%s in=%s ", impl_name(k->impl), opd_name(k->opd), k->out_bf16 ? "bf16" : "fp32",
		       k->in_bf16 ? "bf16" : "f32");
	printf("T=%lld D=%lld F=%lld %s\n", (long long)c->sh->t, (long long)c->sh->d, (long long)c->sh->f, what);
	if (!ok)
		c->fails++;
}

static void set_modes(struct align_modes *m, int impl, int opd, int out_bf16)
{
	modes_init_default(m);
	m->v[MODE_MATMUL_IMPL] = impl;
	m->v[MODE_MATMUL_OPERAND] = opd;
	m->v[MODE_MATMUL_OUT] = out_bf16 ? ALIGN_MATMUL_OUT_BF16 : ALIGN_MATMUL_OUT_FP32;
}

/* One op call on rows [r0, r0 + M) of a (abs: the |.| inputs, f32) into buffer g pre-filled with `fill`
 * (all of it), y at byte GUARD + yoff, then synchronised and copied back. *status: the op's status.
 * *guards_ok: the bytes around the output (all bytes when the op failed) still hold `fill`.
 * Returns 0, or 2 on a CUDA error. */
static int call_op(struct ctx *c, const struct align_modes *m, int in_bf16, int abs, int64_t r0, int64_t M,
		   struct gbuf *g, int fill, size_t yoff, int *status, int *guards_ok)
{
	const int64_t D = c->sh->d, F = c->sh->f;
	const int y_bf16 = m->v[MODE_MATMUL_OUT] == ALIGN_MATMUL_OUT_BF16;
	const size_t ybytes = (size_t)(M * F) * (y_bf16 ? 2 : 4), total = ybytes + 2 * GUARD + yoff;
	struct align_tensor in[2], y;
	memset(in, 0, sizeof in);
	memset(&y, 0, sizeof y);
	in[0].dtype = abs || !in_bf16 ? ALIGN_DT_F32 : ALIGN_DT_BF16;
	in[0].data = abs       ? (void *)(c->abs_a + r0 * D)
		     : in_bf16 ? (void *)(c->a16 + r0 * D)
			       : (void *)(c->a32 + r0 * D);
	in[1].dtype = in[0].dtype;
	in[1].data = abs ? (void *)c->abs_b : in_bf16 ? (void *)c->b16 : (void *)c->b32;
	in[0].ndim = in[1].ndim = y.ndim = 2;
	in[0].shape[0] = M;
	in[0].shape[1] = in[1].shape[1] = D;
	in[1].shape[0] = F;
	in[0].name = "matmul.a";
	in[1].name = "matmul.b";
	y.data = g->d + GUARD + yoff;
	y.dtype = y_bf16 ? ALIGN_DT_BF16 : ALIGN_DT_F32;
	y.shape[0] = M;
	y.shape[1] = F;
	y.name = "matmul.y";
	const struct matmul_params p = {0};
	const struct align_launch launch = {0, 0, 0, 0};
	CK(cudaMemsetAsync(g->d, fill, total, c->s));
	*status = matmul_fwd_cuda(&p, m, in, 2, &y, 1, &launch, c->dev);
	CK(cudaStreamSynchronize(c->s));
	CK(cudaMemcpy(g->h, g->d, total, cudaMemcpyDeviceToHost));
	int ok = 1;
	for (size_t i = 0; i < total && ok; i++)
		if (*status != 0 || i < GUARD + yoff || i >= GUARD + yoff + ybytes)
			ok = g->h[i] == (unsigned char)fill;
	*guards_ok = ok;
	return 0;
}

static double out_at(const struct gbuf *g, int y_bf16, size_t i)
{
	if (y_bf16) {
		align_bf16 h;
		memcpy(&h, g->h + GUARD + 2 * i, 2);
		return (double)align_bf16_to_f32(h);
	}
	float f;
	memcpy(&f, g->h + GUARD + 4 * i, 4);
	return (double)f;
}

/* the engine's own term of the agreement tolerance (header, check 2) */
static double engine_term(const struct combo *k, int64_t D)
{
	if (k->impl == ALIGN_MATMUL_IMPL_TC)
		return (4.0 * (double)((D + 63) / 64) + 1.0) * ldexp(1.0, -21);
	if (k->opd == ALIGN_MATMUL_OPERAND_BF16)
		return ((double)((D + 15) / 16) + 4.0) * ldexp(1.0, -21) + (k->out_bf16 ? ldexp(1.0, -8) : 0.0);
	if (k->opd == ALIGN_MATMUL_OPERAND_FP32)
		return (double)D * ldexp(1.0, -24);
	return ldexp(1.0, -8) + ((double)((D + 7) / 8) + 4.0) * ldexp(1.0, -21);
}

/* 1 + 4: three runs at Tmax, identical bytes, guards intact; result in buf[0] */
static int check_determinism(struct ctx *c, const struct combo *k, const struct align_modes *m)
{
	static const int fills[3] = {0x5a, 0xa5, 0xff};
	const size_t ybytes = (size_t)(c->sh->t * c->sh->f) * (k->out_bf16 ? 2 : 4);
	int guards = 1, st, gok;
	long long diff_byte = -1;
	for (int r = 0; r < 3; r++) {
		if (call_op(c, m, k->in_bf16, 0, 0, c->sh->t, &c->buf[r], fills[r], 0, &st, &gok))
			return 2;
		if (st) {
			fprintf(stderr, "error: matmul_fwd_cuda returned %d\n", st);
			verdict(c, 0, k, "the engine refused a supported combination");
			return 1;
		}
		guards &= gok;
		for (size_t i = 0; r > 0 && diff_byte < 0 && i < ybytes; i++)
			if (c->buf[0].h[GUARD + i] != c->buf[r].h[GUARD + i])
				diff_byte = (long long)i;
	}
	char msg[200];
	const long long elem = diff_byte / (k->out_bf16 ? 2 : 4), F = (long long)(c->sh->f ? c->sh->f : 1);
	if (diff_byte < 0)
		snprintf(msg, sizeof msg,
			 "determinism: 3 runs into differently pre-filled outputs, identical bytes; "
			 "guards %s",
			 guards ? "intact" : "OVERWRITTEN");
	else
		snprintf(msg, sizeof msg, "determinism: the runs differ, first at (%lld, %lld); guards %s", elem / F,
			 elem % F, guards ? "intact" : "OVERWRITTEN");
	verdict(c, diff_byte < 0 && guards, k, msg);
	return 0;
}

/* 2: against the portable engine within tol (header) */
static int check_agreement(struct ctx *c, const struct combo *k)
{
	const int64_t T = c->sh->t, D = c->sh->d, F = c->sh->f;
	struct align_modes mp, ms;
	int st, gok, st2, gok2;
	set_modes(&mp, ALIGN_MATMUL_IMPL_PORTABLE, k->opd, k->out_bf16);
	set_modes(&ms, ALIGN_MATMUL_IMPL_PORTABLE, k->opd, 0);
	const void *src_a = k->in_bf16 ? (const void *)c->a16 : (const void *)c->a32;
	const void *src_b = k->in_bf16 ? (const void *)c->b16 : (const void *)c->b32;
	gen_abs<<<1024, 256, 0, c->s>>>(src_a, k->in_bf16, T * D, c->abs_a);
	gen_abs<<<1024, 256, 0, c->s>>>(src_b, k->in_bf16, F * D, c->abs_b);
	CK(cudaGetLastError());
	if (call_op(c, &mp, k->in_bf16, 0, 0, T, &c->buf[3], 0x33, 0, &st, &gok) ||
	    call_op(c, &ms, 0, 1, 0, T, &c->buf[4], 0x44, 0, &st2, &gok2))
		return 2;
	if (st || st2) {
		fprintf(stderr, "error: the portable engine returned %d / %d\n", st, st2);
		return 2;
	}
	/* 1.01: |x| <= |R(x)| / (1 - 2^-8) for the unrounded x of each side */
	const double e_out = k->out_bf16 ? 1.01 * ldexp(1.0, -8) : 0.0,
		     e_sum = engine_term(k, D) + (double)D * ldexp(1.0, -24);
	double worst = 0, worst_err = 0, worst_s = 0;
	int64_t wi = 0, over = 0;
	for (size_t i = 0; i < (size_t)(T * F); i++) {
		double y = out_at(&c->buf[0], k->out_bf16, i), yp = out_at(&c->buf[3], k->out_bf16, i);
		double S = out_at(&c->buf[4], 0, i), err = fabs(y - yp);
		double tol = e_out * (fabs(y) + fabs(yp)) + e_sum * S + ldexp(1.0, -140);
		double q = err == err ? err / tol : INFINITY; /* NaN: the worst */
		over += q > 1.0;
		if (q > worst) {
			worst = q;
			wi = (int64_t)i;
			worst_err = err;
			worst_s = S;
		}
	}
	char msg[320];
	snprintf(msg, sizeof msg,
		 "agreement with portable: %lld of %lld elements over tol, worst err/tol %.3g at (%lld, %lld) (err "
		 "%.3g, "
		 "S %.3g); guards %s",
		 (long long)over, (long long)(T * F), worst, (long long)(F ? wi / F : 0), (long long)(F ? wi % F : 0),
		 worst_err, worst_s, gok && gok2 ? "intact" : "OVERWRITTEN");
	verdict(c, over == 0 && gok && gok2, k, msg);
	return 0;
}

/* 3 + 4: rows of smaller batches against the Tmax rows in buf[0] */
static int check_invariance(struct ctx *c, const struct combo *k, const struct align_modes *m)
{
	static const int64_t ms_list[] = {1,   2,   3,	 7,    8,    9,	   15,	 16,   17,  31,
					  33,  63,  64,	 65,   127,  128,  129,	 255,  256, 257,
					  333, 511, 512, 1000, 2047, 2048, 2049, 3000, 4095};
	static const int64_t blocks[] = {129, 1000, 7};
	const int64_t T = c->sh->t, F = c->sh->f;
	const size_t row = (size_t)F * (k->out_bf16 ? 2 : 4);
	long batches = 0, differ = 0, calls = 0, unaligned_differ = 0;
	int guards = 1, st, gok;
	char first[96] = "";
	struct gbuf *g = &c->buf[5];
	/* (r0, M) pairs: prefixes, row blocks covering all rows, single rows alone, all T rows into a y one
	 * element past 16-byte alignment (the engines' unaligned-output path) */
	for (int pass = 0; pass < 4; pass++) {
		size_t n = pass == 0   ? sizeof ms_list / sizeof ms_list[0]
			   : pass == 1 ? sizeof blocks / sizeof blocks[0]
			   : pass == 2 ? 8
				       : 1;
		const size_t yoff = pass == 3 ? (k->out_bf16 ? 2 : 4) : 0;
		for (size_t j = 0; j < n; j++) {
			int64_t bs = pass == 1 ? blocks[j] : 0;
			if (pass == 0 && ms_list[j] >= T)
				continue;
			if (pass == 1 && (bs >= T || (c->sh->big && bs < 100)))
				continue; /* 7-row blocks of 4096 rows: too many calls for the DSv4 shapes */
			for (int64_t r0 = 0; r0 < T; r0 = pass == 1 ? r0 + bs : T) {
				int64_t M = pass == 0	? ms_list[j]
					    : pass == 1 ? (T - r0 < bs ? T - r0 : bs)
					    : pass == 2 ? 1
							: T;
				int64_t at = pass == 1	 ? r0
					     : pass == 2 ? (int64_t)((j * 0x9e3779b97f4a7c15ull) % (uint64_t)T)
							 : 0;
				if (call_op(c, m, k->in_bf16, 0, at, M, g, 0x6c, yoff, &st, &gok))
					return 2;
				calls++;
				guards &= gok;
				if (st) {
					fprintf(stderr, "error: matmul_fwd_cuda returned %d at M = %lld\n", st,
						(long long)M);
					verdict(c, 0, k, "the engine refused a smaller batch");
					return 1;
				}
				int same = memcmp(g->h + GUARD + yoff, c->buf[0].h + GUARD + (size_t)at * row,
						  (size_t)M * row) == 0;
				if (pass == 3) {
					unaligned_differ += !same;
					continue;
				}
				batches++;
				if (!same) {
					if (!differ++)
						snprintf(first, sizeof first,
							 "first: rows %lld..%lld computed as a batch of %lld",
							 (long long)at, (long long)(at + M - 1), (long long)M);
				}
			}
		}
	}
	char msg[320];
	snprintf(msg, sizeof msg,
		 "batch invariance: %ld of %ld batches (prefixes M < %lld, row blocks of 7/129/1000, 8 single rows) "
		 "differ from the T = %lld rows%s%s",
		 differ, batches, (long long)T, (long long)T, differ ? "; " : "", first);
	if (invariant_engine(k->impl))
		verdict(c, differ == 0, k, msg);
	else
		printf("INFO %s opd=%s out=%s in=%s T=%lld D=%lld F=%lld %s (reported, not asserted)\n",
		       impl_name(k->impl), opd_name(k->opd), k->out_bf16 ? "bf16" : "fp32", k->in_bf16 ? "bf16" : "f32",
		       (long long)T, (long long)c->sh->d, (long long)F, msg);
	snprintf(msg, sizeof msg, "all T rows into a y one element past 16-byte alignment: %s the aligned result",
		 unaligned_differ ? "DIFFER from" : "equal to");
	if (invariant_engine(k->impl))
		verdict(c, !unaligned_differ, k, msg);
	else
		printf("INFO %s opd=%s out=%s in=%s T=%lld D=%lld F=%lld %s (reported, not asserted)\n",
		       impl_name(k->impl), opd_name(k->opd), k->out_bf16 ? "bf16" : "fp32", k->in_bf16 ? "bf16" : "f32",
		       (long long)T, (long long)c->sh->d, (long long)F, msg);
	snprintf(msg, sizeof msg, "guard bytes around %ld smaller-batch and unaligned outputs %s", calls,
		 guards ? "intact" : "OVERWRITTEN");
	verdict(c, guards, k, msg);
	return 0;
}

/* 5: refusals on the current shape (status 4, nothing written) and a wrong output dtype (status 2) */
static int check_refusals(struct ctx *c)
{
	struct refusal {
		int impl, mode, value;
	};
	static const struct refusal rs[] = {
		{ALIGN_MATMUL_IMPL_TC, MODE_MATMUL_ACCUM, ALIGN_MATMUL_ACCUM_SPLIT16},
		{ALIGN_MATMUL_IMPL_TC, MODE_MATMUL_ACCUM, ALIGN_MATMUL_ACCUM_FP64},
		{ALIGN_MATMUL_IMPL_TC, MODE_MATMUL_FMA, ALIGN_MATMUL_FMA_ON},
		{ALIGN_MATMUL_IMPL_TC, MODE_MATMUL_OPERAND, ALIGN_MATMUL_OPERAND_FP32},
		{ALIGN_MATMUL_IMPL_TC, MODE_MATMUL_OPERAND, ALIGN_MATMUL_OPERAND_TF32},
		{ALIGN_MATMUL_IMPL_CUBLAS, MODE_MATMUL_ACCUM, ALIGN_MATMUL_ACCUM_SPLIT16},
		{ALIGN_MATMUL_IMPL_CUBLAS, MODE_MATMUL_ACCUM, ALIGN_MATMUL_ACCUM_FP64},
		{ALIGN_MATMUL_IMPL_CUBLAS, MODE_MATMUL_FMA, ALIGN_MATMUL_FMA_ON},
		{ALIGN_MATMUL_IMPL_CUBLAS_PINNED, MODE_MATMUL_ACCUM, ALIGN_MATMUL_ACCUM_SPLIT16},
		{ALIGN_MATMUL_IMPL_CUBLAS_PINNED, MODE_MATMUL_FMA, ALIGN_MATMUL_FMA_ON},
		{ALIGN_MATMUL_IMPL_CUBLAS_PINNED, MODE_MATMUL_OPERAND, ALIGN_MATMUL_OPERAND_FP32},
		{ALIGN_MATMUL_IMPL_CUBLAS_PINNED, MODE_MATMUL_OPERAND, ALIGN_MATMUL_OPERAND_TF32},
	};
	int ok = 1, st, gok;
	for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
		struct align_modes m;
		set_modes(&m, rs[i].impl, ALIGN_MATMUL_OPERAND_BF16, 1);
		m.v[rs[i].mode] = rs[i].value;
		if (call_op(c, &m, 1, 0, 0, c->sh->t, &c->buf[5], 0x77, 0, &st, &gok))
			return 2;
		if (st != ALIGN_ERR_UNSUPPORTED || !gok) {
			printf("FAIL refusal: %s with %s=%s gave status %d (want 4), output %s\n",
			       impl_name(rs[i].impl), modes_info(rs[i].mode)->env,
			       modes_value_name(rs[i].mode, rs[i].value), st, gok ? "untouched" : "WRITTEN");
			ok = 0;
		}
	}
	verdict(c, ok, NULL,
		"refusals: ACCUM split16/fp64 and FMA=on (tc, cublas), OPERAND fp32/tf32 (tc) give 4, write nothing");
	/* a wrong output dtype: the shape checks run before the engine */
	for (int impl = ALIGN_MATMUL_IMPL_TC; impl <= ALIGN_MATMUL_IMPL_CUBLAS_PINNED; impl++) {
		struct align_modes m;
		set_modes(&m, impl, ALIGN_MATMUL_OPERAND_BF16, 1);
		struct align_tensor in[2], y;
		memset(in, 0, sizeof in);
		memset(&y, 0, sizeof y);
		in[0] = {c->a16, ALIGN_DT_BF16, 2, {c->sh->t, c->sh->d, 0, 0}, "matmul.a"};
		in[1] = {c->b16, ALIGN_DT_BF16, 2, {c->sh->f, c->sh->d, 0, 0}, "matmul.b"};
		y = {c->buf[5].d + GUARD, ALIGN_DT_F32, 2, {c->sh->t, c->sh->f, 0, 0}, "matmul.y"};
		const struct matmul_params p = {0};
		st = matmul_fwd_cuda(&p, &m, in, 2, &y, 1, NULL, c->dev);
		CK(cudaStreamSynchronize(c->s));
		char msg[120];
		snprintf(msg, sizeof msg, "refusal: %s with an f32 y where MATMUL_OUT=bf16 gives %d (want 2)",
			 impl_name(impl), st);
		verdict(c, st == ALIGN_ERR_INPUT, NULL, msg);
	}
	int order = modes_value_index(MODE_MATMUL_IMPL, "portable") == ALIGN_MATMUL_IMPL_PORTABLE &&
		    modes_value_index(MODE_MATMUL_IMPL, "tc") == ALIGN_MATMUL_IMPL_TC &&
		    modes_value_index(MODE_MATMUL_IMPL, "cublas") == ALIGN_MATMUL_IMPL_CUBLAS &&
		    modes_value_index(MODE_MATMUL_IMPL, "cublas_pinned") == ALIGN_MATMUL_IMPL_CUBLAS_PINNED;
	verdict(c, order, NULL, "enum matmul_impl follows the MATMUL_IMPL values of modes.def");
	return 0;
}

static int run_shape(const struct shape *sh, struct align_dev *dev, int *fails)
{
	struct ctx c;
	memset(&c, 0, sizeof c);
	c.sh = sh;
	c.dev = dev;
	c.s = (cudaStream_t)dev->stream;
	cudaStream_t s = c.s;
	const size_t na = (size_t)(sh->t * sh->d) + 8, nb = (size_t)(sh->f * sh->d) + 8; /* + 8: never 0 bytes */
	const size_t nbuf = (size_t)(sh->t * sh->f) * 4 + 2 * GUARD + YOFF_MAX;
	int rc = 2;
	printf("shape T=%lld D=%lld F=%lld: %s\n", (long long)sh->t, (long long)sh->d, (long long)sh->f, sh->why);
	if (cudaMalloc((void **)&c.a32, na * 4) != cudaSuccess || cudaMalloc((void **)&c.b32, nb * 4) != cudaSuccess ||
	    cudaMalloc((void **)&c.a16, na * 2) != cudaSuccess || cudaMalloc((void **)&c.b16, nb * 2) != cudaSuccess ||
	    cudaMalloc((void **)&c.abs_a, na * 4) != cudaSuccess ||
	    cudaMalloc((void **)&c.abs_b, nb * 4) != cudaSuccess) {
		fprintf(stderr, "error: device allocation failed\n");
		goto out;
	}
	for (int i = 0; i < NBUF; i++)
		if (cudaMalloc((void **)&c.buf[i].d, nbuf) != cudaSuccess ||
		    !(c.buf[i].h = (unsigned char *)malloc(nbuf))) {
			fprintf(stderr, "error: allocation of %zu bytes failed\n", nbuf);
			goto out;
		}
	gen_inputs<<<1024, 256, 0, s>>>(c.a32, c.a16, sh->t, sh->d, c.b32, c.b16, sh->f);
	if (cudaGetLastError() != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) {
		fprintf(stderr, "error: input generation failed\n");
		goto out;
	}
	for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
		const struct combo *k = &combos[i];
		if (sh->big && !k->big)
			continue;
		struct align_modes m;
		set_modes(&m, k->impl, k->opd, k->out_bf16);
		int r = check_determinism(&c, k, &m);
		if (r == 1)
			continue;
		if (r || check_agreement(&c, k) || check_invariance(&c, k, &m))
			goto out;
	}
	if (!sh->big && check_refusals(&c))
		goto out;
	rc = 0;
out:
	cudaStreamSynchronize(s);
	cudaFree(c.a32);
	cudaFree(c.b32);
	cudaFree(c.a16);
	cudaFree(c.b16);
	cudaFree(c.abs_a);
	cudaFree(c.abs_b);
	for (int i = 0; i < NBUF; i++) {
		cudaFree(c.buf[i].d);
		free(c.buf[i].h);
	}
	*fails += c.fails;
	return rc;
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed at its timeout keeps its verdict lines */
	gpu_skip_if_none();
	struct align_err err = {0, "", ""};
	struct align_dev dev;
	if (gpu_dev_open(&dev, &err))
		return 2;
	printf("test-matmul-impl: %s (sm_%d%d, %d SMs); built from %s\n", dev.name, dev.cc_major, dev.cc_minor,
	       dev.sm_count, ALIGN_GPU_BUILD_COMMIT);
	int fails = 0, rc = 0;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && rc == 0; i++)
		if (!(quick && shapes[i].big))
			rc = run_shape(&shapes[i], &dev, &fails);
	align_dev_close(&dev);
	if (rc)
		return rc;
	printf("%s: %d check(s) failed\n", fails ? "FAIL" : "PASS", fails);
	return fails ? 1 : 0;
}
