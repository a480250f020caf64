/* test-initcheck-cublas.cu: does compute-sanitizer's initcheck see what cuBLAS / cuBLASLt write? The
 * question behind initcheck's reports on matmul (MATMUL_IMPL=cublas_pinned: the copy out of the staged y)
 * and mtp (MATMUL_IMPL=cublas: the bf16 projection read by mtp_elem), whose tests passed bitwise.
 *
 * Usage: test-gpu-initcheck-cublas MODE, MODE one of
 *   gemmex-unmarked, gemmex-marked   C = B A^T by cublasGemmEx (bf16 A, B, C, fp32 compute, beta = 0: the
 *                                    call of matmul.cu's cublas engine)
 *   lt-unmarked, lt-marked           the same by cublasLtMatmul with the heuristic's first algorithm (the
 *                                    cublas_pinned engine's call, without its pinning)
 *   control                          copy_kernel reads a fresh buffer that nothing wrote
 * For every shape below: C is a fresh cudaMalloc'd buffer nothing else wrote; the GEMM writes it; "marked"
 * then calls align_dev_mark_written (kernels/cuda/dev.h: NVTX's nvtxMemCudaMarkInitialized) over C; then
 * copy_kernel (an align-style kernel) reads every element of C into D. The same GEMM also runs into a
 * second buffer first filled with 0xFF bytes (a bf16 NaN pattern the GEMM never produces from finite
 * inputs) and is copied the same way: both copies must be equal byte for byte and hold no 0xFFFF, so the
 * GEMM wrote every element of C (a byte it skipped would keep the fill in one and not in the other).
 * Under `compute-sanitizer --tool initcheck` (initcheck-cublas.sh): control must report (the tool sees
 * copy_kernel's reads); *-marked must not; *-unmarked reports when initcheck misses the library's stores.
 * Exit status: 0 byte check passed (control: 0), 1 it failed, 2 CUDA or cuBLAS error, 77 no CUDA device. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "gpu_skip.h"
#include "rng.h"

/* the shapes: matmul's racecheck shape, a DSv4-like projection, and a narrow one (F % 8 != 0 for GemmEx) */
static const int SHAPES[][3] = {{300, 520, 600}, {256, 1024, 512}, {40, 64, 67}}; /* T, K, F */

#define BK(call)                                                                                                       \
	do {                                                                                                           \
		cublasStatus_t bk_s_ = (call);                                                                         \
		if (bk_s_ != CUBLAS_STATUS_SUCCESS) {                                                                  \
			fprintf(stderr, "error: %s failed: %s at %s:%d\n", #call, cublasGetStatusString(bk_s_),        \
				__FILE__, __LINE__);                                                                   \
			return 2;                                                                                      \
		}                                                                                                      \
	} while (0)

__global__ void copy_kernel(const uint16_t *c, uint16_t *d, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		d[i] = c[i];
}

struct ctx {
	struct align_dev dev;
	cudaStream_t stream;
	cublasHandle_t blas;
	cublasLtHandle_t lt;
	void *ws;
	size_t ws_bytes;
};

/* bf16 bits of a counter-RNG value in [-2, 2) (finite, so the product never makes the 0xFFFF fill) */
static uint16_t rnd_bf16(uint64_t i)
{
	float f = 4.0f * align_rng_uniform(0x1c0ffeeu, 7, i) - 2.0f;
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static int gemm_ex(struct ctx *x, const void *a, const void *b, void *c, int T, int K, int F)
{
	const float one = 1.0f, zero = 0.0f;
	BK(cublasGemmEx(x->blas, CUBLAS_OP_T, CUBLAS_OP_N, F, T, K, &one, b, CUDA_R_16BF, K, a, CUDA_R_16BF, K, &zero,
			c, CUDA_R_16BF, F, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
	return 0;
}

static int gemm_lt(struct ctx *x, const void *a, const void *b, void *c, int T, int K, int F)
{
	const float one = 1.0f, zero = 0.0f;
	const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulPreference_t pref;
	cublasLtMatmulHeuristicResult_t res;
	int n = 0;
	BK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	BK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
	BK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
	BK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, (uint64_t)K, (uint64_t)F, K));
	BK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, (uint64_t)K, (uint64_t)T, K));
	BK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, (uint64_t)F, (uint64_t)T, F));
	BK(cublasLtMatmulPreferenceCreate(&pref));
	BK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &x->ws_bytes,
						sizeof x->ws_bytes));
	BK(cublasLtMatmulAlgoGetHeuristic(x->lt, desc, la, lb, lc, lc, pref, 1, &res, &n));
	if (n < 1) {
		fprintf(stderr, "error: cuBLASLt has no algorithm for T=%d K=%d F=%d\n", T, K, F);
		return 2;
	}
	BK(cublasLtMatmul(x->lt, desc, &one, b, la, a, lb, &zero, c, lc, c, lc, &res.algo, x->ws, x->ws_bytes,
			  x->stream));
	cublasLtMatmulPreferenceDestroy(pref);
	cublasLtMatrixLayoutDestroy(lc);
	cublasLtMatrixLayoutDestroy(lb);
	cublasLtMatrixLayoutDestroy(la);
	cublasLtMatmulDescDestroy(desc);
	return 0;
}

/* one shape: the GEMM into a fresh and into a 0xFF-filled buffer, both copied out and compared */
static int run_shape(struct ctx *x, int lt, int marked, int T, int K, int F)
{
	const size_t na = (size_t)T * K, nb = (size_t)F * K, nc = (size_t)T * F;
	uint16_t *h = (uint16_t *)malloc((na + nb) * 2), *d0 = (uint16_t *)malloc(nc * 2),
		 *d1 = (uint16_t *)malloc(nc * 2);
	void *a, *b, *c0, *c1, *d;
	int rc = 2;
	if (!h || !d0 || !d1)
		goto out;
	for (size_t i = 0; i < na + nb; i++)
		h[i] = rnd_bf16(i);
	CK(cudaMalloc(&a, na * 2));
	CK(cudaMalloc(&b, nb * 2));
	CK(cudaMalloc(&c0, nc * 2));
	CK(cudaMalloc(&c1, nc * 2));
	CK(cudaMalloc(&d, nc * 2));
	CK(cudaMemcpyAsync(a, h, na * 2, cudaMemcpyHostToDevice, x->stream));
	CK(cudaMemcpyAsync(b, h + na, nb * 2, cudaMemcpyHostToDevice, x->stream));
	CK(cudaMemsetAsync(c1, 0xff, nc * 2, x->stream));
	for (int pass = 0; pass < 2; pass++) {
		void *c = pass ? c1 : c0;
		if ((lt ? gemm_lt(x, a, b, c, T, K, F) : gemm_ex(x, a, b, c, T, K, F)) != 0)
			goto out;
		if (marked)
			align_dev_mark_written(&x->dev, c, nc * 2);
		copy_kernel<<<64, 256, 0, x->stream>>>((const uint16_t *)c, (uint16_t *)d, nc);
		CK(cudaGetLastError());
		CK(cudaMemcpyAsync(pass ? d1 : d0, d, nc * 2, cudaMemcpyDeviceToHost, x->stream));
		CK(cudaStreamSynchronize(x->stream));
	}
	{
		size_t diff = 0, fill = 0;
		for (size_t i = 0; i < nc; i++) {
			diff += d0[i] != d1[i];
			fill += d1[i] == 0xffffu;
		}
		printf("%s %s T=%d K=%d F=%d: %zu elements, %zu differ between the fresh and the 0xFF-filled C, %zu "
		       "still 0xFFFF: %s\n",
		       lt ? "cublasLtMatmul" : "cublasGemmEx", marked ? "marked" : "unmarked", T, K, F, nc, diff, fill,
		       diff == 0 && fill == 0 ? "every element written" : "FAIL");
		rc = diff == 0 && fill == 0 ? 0 : 1;
	}
	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(c0));
	CK(cudaFree(c1));
	CK(cudaFree(d));
out:
	free(h);
	free(d0);
	free(d1);
	return rc;
}

/* control: copy_kernel over a buffer that nothing wrote (initcheck must report these reads) */
static int run_control(struct ctx *x)
{
	const size_t n = 4096;
	void *c, *d;
	CK(cudaMalloc(&c, n * 2));
	CK(cudaMalloc(&d, n * 2));
	copy_kernel<<<16, 256, 0, x->stream>>>((const uint16_t *)c, (uint16_t *)d, n);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(x->stream));
	CK(cudaFree(c));
	CK(cudaFree(d));
	printf("control: copied %zu elements of a buffer nothing wrote\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc == 2 ? argv[1] : "";
	const int control = !strcmp(mode, "control"), lt = !strncmp(mode, "lt-", 3);
	const int marked = strstr(mode, "-marked") != NULL;
	if (!control && strcmp(mode, "gemmex-unmarked") && strcmp(mode, "gemmex-marked") &&
	    strcmp(mode, "lt-unmarked") && strcmp(mode, "lt-marked")) {
		fprintf(stderr, "usage: test-gpu-initcheck-cublas gemmex-unmarked|gemmex-marked|lt-unmarked|lt-marked|"
				"control\n");
		return 2;
	}
	gpu_skip_if_none();
	struct align_err err;
	struct ctx x;
	memset(&x, 0, sizeof x);
	if (gpu_dev_open(&x.dev, &err) != 0)
		return 2;
	x.stream = (cudaStream_t)x.dev.stream;
	if (control)
		return run_control(&x);
	void *hv = NULL;
	if ((lt ? align_dev_cublaslt(&x.dev, &hv) : align_dev_cublas(&x.dev, &hv)) != 0) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 2;
	}
	if (lt) {
		x.lt = (cublasLtHandle_t)hv;
		x.ws_bytes = 32u << 20;
		CK(cudaMalloc(&x.ws, x.ws_bytes));
	} else {
		x.blas = (cublasHandle_t)hv;
		BK(cublasSetStream(x.blas, x.stream));
	}
	int rc = 0;
	for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
		if (lt && SHAPES[s][2] % 8 != 0)
			continue; /* cuBLASLt's bf16 kernels want 16-byte rows (matmul.cu pads F for them) */
		int r = run_shape(&x, lt, marked, SHAPES[s][0], SHAPES[s][1], SHAPES[s][2]);
		if (r > rc)
			rc = r;
	}
	if (x.ws)
		CK(cudaFree(x.ws));
	align_dev_close(&x.dev);
	return rc;
}
