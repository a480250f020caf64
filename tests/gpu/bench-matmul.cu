/* bench-matmul.cu: speed of the matmul CUDA code, each figure next to the denominator it is judged by,
 * measured in the same run on the same device.
 *
 *   1. fp32 CUDA-core peak: a microkernel of independent fmaf chains (FFMA, 2 FLOP each), and the same
 *      with a separate multiply and add (FMUL + FADD, 2 FLOP per pair: the ceiling of every portable mode
 *      with MATMUL_FMA=off, which --fmad=false keeps apart).
 *   2. the portable matmul op (matmul_fwd_cuda, bitwise == the C twin), T = F = D = 4096, f32 inputs,
 *      under the default modes (bf16 operands, seq, FMA off, bf16 out) and fp32+FMA (SGEMM-like),
 *      split16, fp64: GFLOP/s = 2 T F D / t (the same count in every mode; an FMA-off multiply-add is
 *      two instructions, so those modes are capped at the mul+add peak, ~1/2 of the FMA peak).
 *      Goal: >= 0.40 of the measured FMA peak. Also mhc_pre / mhc_head at DSv4-Flash shape
 *      (T = 4096, N = 4, D = 4096): time, mapping-GEMM GFLOP/s (2 T R N D) and x bytes / t.
 *   3. the batch-invariant tensor-core matmul (matmul_tc_fwd_cuda) against cuBLAS (cublasGemmEx, bf16 A,
 *      B, C, CUBLAS_COMPUTE_32F, default algorithm, TN layout y[M,N] = a[M,K] b[N,K]^T) on the shapes
 *      of specs/perf-anchors.md M1: 8192^3 and M = 4096 DeepSeek shapes, plus M = 1..1024 at K = 7168,
 *      N = 4096 where the fair denominator is cuBLAS without split-K (approximated here by a second
 *      handle with no workspace, cublasSetWorkspace(NULL, 0); perf-anchors M2). TFLOP/s = 2 M N K / t.
 *      Goal: >= 0.85 of cuBLAS at M >= 4096. The TC result is also checked to be identical on every
 *      call; the count of elements that differ from cuBLAS is printed (information only).
 *      cuBLAS is loaded with dlopen (libcublas.so.13, .so.12, .so): no link-time dependency, so the
 *      build directory carried to a GPU machine runs there; without the library the cuBLAS columns
 *      read n/a.
 * Method: one stream, CUDA events around each call, 3 warm-up calls, then 15 timed calls per row;
 * median, min and max. Inputs: counter-RNG normal-ish values (kernels/core/rng.h), generated on the device.
 * Exit status: 0 done, 1 a result changed between calls, 2 CUDA or host error, 77 skip (no CUDA device).
 * Run: build/tests/gpu/bench-gpu-matmul (meson test -C build --benchmark --suite gpu). */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda_check.h"
#include "gpu-build-commit.h"
#include "gpu_skip.h"
#include "matmul_tc.h"
#include "ops_cuda.h"
#include "rng.h"

#define WARMUP 3
#define REPS 15
#define SEED 0xbe4c4ull

/* ---- cuBLAS through dlopen (the few entry points used; types as in cublas_api.h) ---- */

typedef void *cublas_handle;
typedef int (*cublas_create_fn)(cublas_handle *);
typedef int (*cublas_destroy_fn)(cublas_handle);
typedef int (*cublas_set_stream_fn)(cublas_handle, cudaStream_t);
typedef int (*cublas_set_workspace_fn)(cublas_handle, void *, size_t);
typedef int (*cublas_gemm_ex_fn)(cublas_handle, int, int, int, int, int, const void *, const void *, int, int,
				 const void *, int, int, const void *, void *, int, int, int, int);
enum { CUBLAS_OP_N_ = 0, CUBLAS_OP_T_ = 1, CUDA_R_16BF_ = 14, CUBLAS_COMPUTE_32F_ = 68, CUBLAS_GEMM_DEFAULT_ = -1 };

struct cublas {
	void *lib;
	char name[32];
	cublas_create_fn create;
	cublas_destroy_fn destroy;
	cublas_set_stream_fn set_stream;
	cublas_set_workspace_fn set_workspace;
	cublas_gemm_ex_fn gemm;
	cublas_handle h, h_nows; /* default, and without workspace */
};

static int cublas_open(struct cublas *c, cudaStream_t s)
{
	static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !c->lib; i++)
		if ((c->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)))
			snprintf(c->name, sizeof c->name, "%s", names[i]);
	if (!c->lib)
		return -1;
	c->create = (cublas_create_fn)dlsym(c->lib, "cublasCreate_v2");
	c->destroy = (cublas_destroy_fn)dlsym(c->lib, "cublasDestroy_v2");
	c->set_stream = (cublas_set_stream_fn)dlsym(c->lib, "cublasSetStream_v2");
	c->set_workspace = (cublas_set_workspace_fn)dlsym(c->lib, "cublasSetWorkspace_v2");
	c->gemm = (cublas_gemm_ex_fn)dlsym(c->lib, "cublasGemmEx");
	if (!c->create || !c->destroy || !c->set_stream || !c->set_workspace || !c->gemm || c->create(&c->h) ||
	    c->set_stream(c->h, s) || c->create(&c->h_nows) || c->set_stream(c->h_nows, s) ||
	    c->set_workspace(c->h_nows, NULL, 0)) {
		fprintf(stderr, "warning: %s is unusable (missing symbol or handle creation failed)\n", c->name);
		c->lib = NULL;
		return -1;
	}
	return 0;
}

/* y[m,n] = a[m,k] b[n,k]^T, all bf16, fp32 compute: column-major y^T = op_T(b) op_N(a) */
static int cublas_gemm(const struct cublas *c, cublas_handle h, int64_t m, int64_t n, int64_t k, const void *a,
		       const void *b, void *y)
{
	const float one = 1.0f, zero = 0.0f;
	return c->gemm(h, CUBLAS_OP_T_, CUBLAS_OP_N_, (int)n, (int)m, (int)k, &one, b, CUDA_R_16BF_, (int)k, a,
		       CUDA_R_16BF_, (int)k, &zero, y, CUDA_R_16BF_, (int)n, CUBLAS_COMPUTE_32F_, CUBLAS_GEMM_DEFAULT_);
}

/* ---- timing ---- */

struct timing {
	double med, lo, hi; /* ms */
};

typedef int (*bench_fn)(void *ctx, cudaStream_t s);

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* WARMUP untimed calls, then REPS calls each between two events; fn returns 0 or an error status */
static int time_it(bench_fn fn, void *ctx, cudaStream_t s, struct timing *t)
{
	cudaEvent_t e0, e1;
	double ms[REPS];
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	int rc = 0;
	for (int i = 0; i < WARMUP && !rc; i++)
		rc = fn(ctx, s);
	for (int i = 0; i < REPS && !rc; i++) {
		float f = 0;
		if (cudaEventRecord(e0, s) != cudaSuccess || (rc = fn(ctx, s)) ||
		    cudaEventRecord(e1, s) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
		    cudaEventElapsedTime(&f, e0, e1) != cudaSuccess) {
			rc = rc ? rc : 2;
			break;
		}
		ms[i] = f;
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	if (rc) {
		fprintf(stderr, "error: a timed call failed (status %d)\n", rc);
		return 2;
	}
	qsort(ms, REPS, sizeof ms[0], cmp_double);
	t->med = ms[REPS / 2];
	t->lo = ms[0];
	t->hi = ms[REPS - 1];
	return 0;
}

/* ---- 1. fp32 peak ---- */

#define PEAK_CHAINS 16
#define PEAK_ITERS 4096

/* fma = 1: a_i = fmaf(a_i, b, c); fma = 0: a_i = a_i * b + c as FMUL then FADD (--fmad=false) */
template <int FMA> __global__ void peak_kernel(float *out, float b, float c)
{
	float a[PEAK_CHAINS];
#pragma unroll
	for (int i = 0; i < PEAK_CHAINS; i++)
		a[i] = (float)(threadIdx.x + i);
	for (int it = 0; it < PEAK_ITERS; it++)
#pragma unroll
		for (int i = 0; i < PEAK_CHAINS; i++)
			a[i] = FMA ? fmaf(a[i], b, c) : a[i] * b + c;
	float s = 0;
#pragma unroll
	for (int i = 0; i < PEAK_CHAINS; i++)
		s += a[i];
	out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

struct peak_ctx {
	int fma, blocks;
	float *out;
};

static int peak_run(void *v, cudaStream_t s)
{
	struct peak_ctx *p = (struct peak_ctx *)v;
	if (p->fma)
		peak_kernel<1><<<p->blocks, 256, 0, s>>>(p->out, 0.999f, 0.001f);
	else
		peak_kernel<0><<<p->blocks, 256, 0, s>>>(p->out, 0.999f, 0.001f);
	return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

/* ---- inputs ---- */

__global__ void gen_kernel(void *p, int bf16, int64_t n, uint64_t stream, float scale)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		float v = align_rng_normalish(SEED, stream, (uint64_t)i) * scale;
		if (bf16)
			((align_bf16 *)p)[i] = align_f32_to_bf16(v);
		else
			((float *)p)[i] = v;
	}
}

static int gen(void *p, int bf16, int64_t n, uint64_t stream, float scale, cudaStream_t s)
{
	gen_kernel<<<2048, 256, 0, s>>>(p, bf16, n, stream, scale);
	CK(cudaGetLastError());
	return 0;
}

/* ---- 2. portable ops ---- */

struct op_ctx {
	const struct align_op *op;
	align_fwd_cuda_fn fwd;
	const void *params;
	struct align_modes m;
	struct align_tensor in[4], out[4];
	struct align_dev *dev; /* the device context; time_it's stream is dev->stream */
};

static int op_run(void *v, cudaStream_t s)
{
	struct op_ctx *o = (struct op_ctx *)v;
	(void)s; /* the twin runs on o->dev->stream, the same stream */
	return o->fwd(o->params, &o->m, o->in, o->op->impl->n_in, o->out, o->op->impl->n_out, NULL, o->dev);
}

static void tensor(struct align_tensor *t, void *data, int dtype, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
	memset(t, 0, sizeof *t);
	t->data = data;
	t->dtype = dtype;
	t->ndim = ndim;
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->shape[2] = d2;
}

static int bench_portable(double peak_fma, double peak_muladd, struct align_dev *dev)
{
	cudaStream_t s = (cudaStream_t)dev->stream;
	const int64_t T = 4096, F = 4096, D = 4096;
	static const struct {
		const char *name;
		int operand, accum, fma, out;
	} rows[] = {
		{"default: bf16 operands, seq, FMA off, bf16 out", ALIGN_MATMUL_OPERAND_BF16, ALIGN_MATMUL_ACCUM_SEQ,
		 ALIGN_MATMUL_FMA_OFF, ALIGN_MATMUL_OUT_BF16},
		{"fp32 operands, seq, FMA on, fp32 out (SGEMM-like)", ALIGN_MATMUL_OPERAND_FP32, ALIGN_MATMUL_ACCUM_SEQ,
		 ALIGN_MATMUL_FMA_ON, ALIGN_MATMUL_OUT_FP32},
		{"bf16 operands, split16, FMA off, bf16 out", ALIGN_MATMUL_OPERAND_BF16, ALIGN_MATMUL_ACCUM_SPLIT16,
		 ALIGN_MATMUL_FMA_OFF, ALIGN_MATMUL_OUT_BF16},
		{"bf16 operands, fp64 accumulation, bf16 out", ALIGN_MATMUL_OPERAND_BF16, ALIGN_MATMUL_ACCUM_FP64,
		 ALIGN_MATMUL_FMA_OFF, ALIGN_MATMUL_OUT_BF16},
	};
	struct op_ctx o;
	memset(&o, 0, sizeof o);
	o.op = ops_find("matmul");
	o.fwd = o.op ? ops_cuda_fwd(o.op) : NULL;
	o.dev = dev;
	if (!o.fwd) {
		fprintf(stderr, "error: matmul has no CUDA twin in the registry\n");
		return 2;
	}
	void *a = NULL, *b = NULL, *y = NULL;
	CK(cudaMalloc(&a, (size_t)(T * D) * 4));
	CK(cudaMalloc(&b, (size_t)(F * D) * 4));
	CK(cudaMalloc(&y, (size_t)(T * F) * 4));
	if (gen(a, 0, T * D, 1, 1.0f, s) || gen(b, 0, F * D, 2, 0.03f, s))
		return 2;
	int params = 0;
	o.params = &params;
	tensor(&o.in[0], a, ALIGN_DT_F32, 2, T, D, 0);
	tensor(&o.in[1], b, ALIGN_DT_F32, 2, F, D, 0);
	double flop = 2.0 * T * F * D;
	printf("## portable matmul (matmul_fwd_cuda, bitwise == C twin), T = F = D = 4096, f32 inputs\n\n");
	printf("| modes | median ms | min ms | max ms | GFLOP/s (2TFD/median) | of FMA peak | of mul+add peak |\n");
	printf("|---|---|---|---|---|---|---|\n");
	double best_default = 0;
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		modes_init_default(&o.m);
		o.m.v[MODE_MATMUL_OPERAND] = rows[i].operand;
		o.m.v[MODE_MATMUL_ACCUM] = rows[i].accum;
		o.m.v[MODE_MATMUL_FMA] = rows[i].fma;
		o.m.v[MODE_MATMUL_OUT] = rows[i].out;
		tensor(&o.out[0], y, rows[i].out == ALIGN_MATMUL_OUT_FP32 ? ALIGN_DT_F32 : ALIGN_DT_BF16, 2, T, F, 0);
		struct timing t;
		if (time_it(op_run, &o, s, &t))
			return 2;
		double gf = flop / (t.med * 1e-3) / 1e9;
		if (i == 0)
			best_default = gf;
		printf("| %s | %.3f | %.3f | %.3f | %.0f | %.3f | %.3f |\n", rows[i].name, t.med, t.lo, t.hi, gf,
		       gf / peak_fma, gf / peak_muladd);
	}
	printf("\ngoal: default modes >= 0.40 of the measured FMA peak (%.0f GFLOP/s): %s (%.3f); the FMA-off "
	       "ceiling is the mul+add peak, %.3f of the FMA peak\n\n",
	       peak_fma, best_default >= 0.40 * peak_fma ? "met" : "NOT met", best_default / peak_fma,
	       peak_muladd / peak_fma);
	cudaFree(a);
	cudaFree(b);
	cudaFree(y);
	return 0;
}

/* mhc_pre and mhc_head at T = 4096, N = 4, D = 4096 under the default modes */
static int bench_mhc(struct align_dev *dev)
{
	cudaStream_t s = (cudaStream_t)dev->stream;
	const int64_t T = 4096, N = 4, D = 4096, K = N * D, R = (2 + N) * N;
	void *x = NULL, *fn = NULL, *base = NULL, *scale = NULL, *y = NULL, *pre = NULL, *post = NULL, *comb = NULL;
	CK(cudaMalloc(&x, (size_t)(T * K) * 2));
	CK(cudaMalloc(&fn, (size_t)(R * K) * 4));
	CK(cudaMalloc(&base, (size_t)R * 4));
	CK(cudaMalloc(&scale, 3 * 4));
	CK(cudaMalloc(&y, (size_t)(T * D) * 2));
	CK(cudaMalloc(&pre, (size_t)(T * N) * 4));
	CK(cudaMalloc(&post, (size_t)(T * N) * 4));
	CK(cudaMalloc(&comb, (size_t)(T * N * N) * 4));
	if (gen(x, 1, T * K, 3, 1.0f, s) || gen(fn, 0, R * K, 4, 0.02f, s) || gen(base, 0, R, 5, 0.5f, s))
		return 2;
	const float sc[3] = {0.5f, 0.75f, 1.0f};
	CK(cudaMemcpy(scale, sc, sizeof sc, cudaMemcpyHostToDevice));
	printf("## mHC at DSv4-Flash shape (T = 4096, N = 4, D = 4096), default modes\n\n");
	printf("| op | median ms | min ms | max ms | mapping GEMM GFLOP/s (2 T R K / median) | x GB/s (2 T K / median) "
	       "|\n");
	printf("|---|---|---|---|---|---|\n");
	for (int head = 0; head < 2; head++) {
		struct op_ctx o;
		memset(&o, 0, sizeof o);
		o.op = ops_find(head ? "mhc_head" : "mhc_pre");
		o.fwd = o.op ? ops_cuda_fwd(o.op) : NULL;
		o.dev = dev;
		if (!o.fwd) {
			printf("| %s | n/a (no CUDA twin registered) | | | | |\n", head ? "mhc_head" : "mhc_pre");
			continue;
		}
		union {
			char bytes[64];
			double align;
		} params; /* the op's params struct (params_size <= 64) */
		struct align_dims d;
		memset(&d, 0, sizeof d);
		if (o.op->impl->params_size > sizeof params.bytes) {
			fprintf(stderr, "error: %s params larger than the buffer\n", o.op->name);
			return 2;
		}
		o.op->impl->params_default(params.bytes, &d);
		o.params = params.bytes;
		modes_init_default(&o.m);
		int64_t rows = head ? N : R;
		tensor(&o.in[0], x, ALIGN_DT_BF16, 3, T, N, D);
		tensor(&o.in[1], fn, ALIGN_DT_F32, 2, rows, K, 0);
		tensor(&o.in[2], base, ALIGN_DT_F32, 1, rows, 0, 0);
		tensor(&o.in[3], scale, ALIGN_DT_F32, 1, head ? 1 : 3, 0, 0);
		tensor(&o.out[0], y, ALIGN_DT_BF16, 2, T, D, 0);
		tensor(&o.out[1], pre, ALIGN_DT_F32, 2, T, N, 0);
		tensor(&o.out[2], post, ALIGN_DT_F32, 2, T, N, 0);
		tensor(&o.out[3], comb, ALIGN_DT_F32, 3, T, N, N);
		struct timing t;
		if (time_it(op_run, &o, s, &t))
			return 2;
		printf("| %s | %.3f | %.3f | %.3f | %.0f | %.0f |\n", o.op->name, t.med, t.lo, t.hi,
		       2.0 * T * rows * K / (t.med * 1e-3) / 1e9, 2.0 * T * K / (t.med * 1e-3) / 1e9);
	}
	printf("\n");
	void *ps[] = {x, fn, base, scale, y, pre, post, comb};
	for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
		cudaFree(ps[i]);
	return 0;
}

/* ---- 3. tensor cores vs cuBLAS ---- */

struct tc_ctx {
	int64_t m, n, k;
	void *a, *b, *y;
	const struct cublas *cb;
	cublas_handle h;
};

static int tc_run(void *v, cudaStream_t s)
{
	struct tc_ctx *c = (struct tc_ctx *)v;
	struct matmul_tc_params p = {c->m, c->n, c->k};
	return matmul_tc_fwd_cuda(&p, c->a, c->b, c->y, s);
}

static int cublas_run(void *v, cudaStream_t s)
{
	struct tc_ctx *c = (struct tc_ctx *)v;
	(void)s; /* the handles were bound to the stream by cublas_open */
	return cublas_gemm(c->cb, c->h, c->m, c->n, c->k, c->a, c->b, c->y) ? 2 : 0;
}

/* host copy of y (bf16, m x n) once the work queued on s is done: s is cudaStreamNonBlocking, so a plain
 * cudaMemcpy (legacy default stream) would not wait for the kernel that writes y */
static int fetch(const void *y, size_t bytes, unsigned short **h, cudaStream_t s)
{
	*h = (unsigned short *)malloc(bytes);
	if (!*h) {
		fprintf(stderr, "error: out of memory (%zu bytes)\n", bytes);
		return 2;
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaMemcpy(*h, y, bytes, cudaMemcpyDeviceToHost));
	return 0;
}

static int bench_tc(const struct cublas *cb, cudaStream_t s, int *changed)
{
	static const struct {
		int64_t m, k, n;
		int big; /* counts for the >= 4096 goal */
	} shapes[] = {
		{8192, 8192, 8192, 1}, {4096, 4096, 4096, 1}, {4096, 7168, 18432, 1}, {4096, 18432, 7168, 1},
		{4096, 7168, 4096, 1}, {4096, 2048, 7168, 1}, {4096, 7168, 1536, 1},  {8192, 7168, 4096, 1},
		{1024, 7168, 4096, 0}, {256, 7168, 4096, 0},  {64, 7168, 4096, 0},    {8, 7168, 4096, 0},
		{1, 7168, 4096, 0},
	};
	int64_t max_a = 0, max_b = 0, max_y = 0;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		max_a = shapes[i].m * shapes[i].k > max_a ? shapes[i].m * shapes[i].k : max_a;
		max_b = shapes[i].n * shapes[i].k > max_b ? shapes[i].n * shapes[i].k : max_b;
		max_y = shapes[i].m * shapes[i].n > max_y ? shapes[i].m * shapes[i].n : max_y;
	}
	void *a = NULL, *b = NULL, *y = NULL, *yc = NULL;
	CK(cudaMalloc(&a, (size_t)max_a * 2));
	CK(cudaMalloc(&b, (size_t)max_b * 2));
	CK(cudaMalloc(&y, (size_t)max_y * 2));
	CK(cudaMalloc(&yc, (size_t)max_y * 2));
	if (gen(a, 1, max_a, 6, 1.0f, s) || gen(b, 1, max_b, 7, 0.03f, s))
		return 2;
	printf("## batch-invariant tensor-core matmul (matmul_tc_fwd_cuda) vs cuBLAS (%s)\n\n",
	       cb->lib ? cb->name : "not available");
	printf("| M x K x N | TC median ms | min | max | TC TFLOP/s | cuBLAS median ms | cuBLAS TFLOP/s | TC / cuBLAS "
	       "| "
	       "cuBLAS no-workspace TFLOP/s | TC / no-ws | elements != cuBLAS |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
	double worst_big = 1e30;
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		struct tc_ctx c = {shapes[i].m, shapes[i].n, shapes[i].k, a, b, y, cb, NULL};
		double flop = 2.0 * c.m * c.n * c.k;
		size_t ybytes = (size_t)(c.m * c.n) * 2;
		struct timing t, tc = {0, 0, 0}, tn = {0, 0, 0};
		unsigned short *h1 = NULL, *h2 = NULL;
		if (tc_run(&c, s) || fetch(y, ybytes, &h1, s) || time_it(tc_run, &c, s, &t) || fetch(y, ybytes, &h2, s))
			return 2;
		int same = memcmp(h1, h2, ybytes) == 0;
		if (!same)
			(*changed)++;
		long long diff = -1;
		if (cb->lib) {
			struct tc_ctx cc = c;
			cc.y = yc;
			cc.h = cb->h;
			if (time_it(cublas_run, &cc, s, &tc))
				return 2;
			free(h2);
			if (fetch(yc, ybytes, &h2, s))
				return 2;
			diff = 0;
			for (size_t j = 0; j < ybytes / 2; j++)
				diff += h1[j] != h2[j];
			if (!shapes[i].big) {
				cc.h = cb->h_nows;
				if (time_it(cublas_run, &cc, s, &tn))
					return 2;
			}
		}
		free(h1);
		free(h2);
		double tf = flop / (t.med * 1e-3) / 1e12;
		char cbs[96] = "n/a | n/a | n/a", nws[64] = "- | -", dif[32] = "n/a";
		if (tc.med > 0) {
			double tfc = flop / (tc.med * 1e-3) / 1e12;
			snprintf(cbs, sizeof cbs, "%.3f | %.0f | %.3f", tc.med, tfc, tf / tfc);
			if (shapes[i].big && tf / tfc < worst_big)
				worst_big = tf / tfc;
			snprintf(dif, sizeof dif, "%lld", diff);
		}
		if (tn.med > 0) {
			double tfn = flop / (tn.med * 1e-3) / 1e12;
			snprintf(nws, sizeof nws, "%.0f | %.3f", tfn, tf / tfn);
		}
		printf("| %lld x %lld x %lld%s | %.3f | %.3f | %.3f | %.0f | %s | %s | %s |\n", (long long)c.m,
		       (long long)c.k, (long long)c.n, same ? "" : " (CHANGED between calls)", t.med, t.lo, t.hi, tf,
		       cbs, nws, dif);
	}
	if (cb->lib)
		printf("\ngoal: TC >= 0.85 of cuBLAS at M >= 4096 (worst over those shapes): %s (%.3f)\n",
		       worst_big >= 0.85 ? "met" : "NOT met", worst_big);
	printf("TC results identical on every call: %s\n\n", *changed ? "NO" : "yes");
	cudaFree(a);
	cudaFree(b);
	cudaFree(y);
	cudaFree(yc);
	return 0;
}

int main(void)
{
	gpu_skip_if_none();
	struct align_err err = {0, "", ""};
	struct align_dev dev;
	if (gpu_dev_open(&dev, &err))
		return 2;
	int clock_khz = 0, sms = dev.sm_count;
	cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev.ordinal);
	printf("bench-matmul: %s (sm_%d%d, %d SMs, max clock %.0f MHz), warm-up %d, %d timed runs per row, CUDA "
	       "events; built from %s\n\n",
	       dev.name, dev.cc_major, dev.cc_minor, sms, clock_khz / 1e3, WARMUP, REPS, ALIGN_GPU_BUILD_COMMIT);
	cudaStream_t s = (cudaStream_t)dev.stream;

	struct peak_ctx pk = {1, sms * 8, NULL};
	CK(cudaMalloc((void **)&pk.out, (size_t)pk.blocks * 256 * sizeof(float)));
	double flop = 2.0 * pk.blocks * 256.0 * PEAK_ITERS * PEAK_CHAINS, peak[2];
	printf("## fp32 CUDA-core peak (%d CTAs x 256 threads x %d chains x %d steps)\n\n", pk.blocks, PEAK_CHAINS,
	       PEAK_ITERS);
	printf("| kernel | median ms | GFLOP/s (2 FLOP per step) | arithmetic peak (SMs x 128 x 2 x clock) "
	       "|\n|---|---|---|---|\n");
	for (int f = 1; f >= 0; f--) {
		struct timing t;
		pk.fma = f;
		if (time_it(peak_run, &pk, s, &t))
			return 2;
		peak[f] = flop / (t.med * 1e-3) / 1e9;
		printf("| %s | %.3f | %.0f | %.0f |\n", f ? "fmaf chains (FFMA)" : "mul then add (FMUL + FADD)", t.med,
		       peak[f], sms * 128.0 * 2.0 * clock_khz / 1e6);
	}
	printf("\n");
	cudaFree(pk.out);

	int rc = bench_portable(peak[1], peak[0], &dev);
	if (!rc)
		rc = bench_mhc(&dev);
	struct cublas cb;
	if (cublas_open(&cb, s))
		printf("note: cuBLAS could not be loaded (dlopen libcublas.so.13/.12/.so): no comparison\n\n");
	int changed = 0;
	if (!rc)
		rc = bench_tc(&cb, s, &changed);
	if (cb.lib) {
		cb.destroy(cb.h);
		cb.destroy(cb.h_nows);
	}
	align_dev_close(&dev);
	if (rc)
		return rc;
	return changed ? 1 : 0;
}
