/* sparse_attn_bwd.cu: CUDA twin of the sparse MQA attention backward (contract: sparse_attn_bwd.h;
 * specification: sparse_attn_bwd.c), the C twin's bytes in every portable mode: O comes from the forward
 * CUDA twin (sparse_attn_fwd_cuda, bitwise the C forward), and the row, dkv and dsink steps are the
 * shared ALIGN_HD functions of sparse_attn_bwd.h (every binary32 operation through nan_host.h).
 * Layout (a first, correct version; not tuned): kernel 1, one thread per (t, h) row: dq and the row's
 * dS, P, ds into pool buffers; kernel 2, one thread per dkv element (j, d), scanning every (t, h, k) in
 * the stated order (no atomics: the order is fixed); kernel 3, one thread per head for dsink.
 * CSA_BWD_SOFTMAX=autograd: the same three-kernel layout over sparse_attn_bwd_ag.h's steps.
 */
#include "math_cuda.cuh"
#include "rows_cuda.cuh" /* ops_cuda.h and ALIGN_CUDA_LAUNCH (the host emulator's launch too) */

#include "sparse_attn_bwd.h"

#include "op_cfg.h"

#define SAB_TMP 128 /* sa_dot's torch-order scratch: D <= 127 */

extern "C" int sparse_attn_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				    int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				    struct align_dev *dev);

struct sab_args {
	const align_bf16 *q, *kv, *dO, *o;
	const int32_t *idx;
	const float *sink;
	align_bf16 *dq;
	float *dkv, *dsink, *dS, *P, *ds;
	float *gb, *wk; /* CSA_BWD_SOFTMAX=autograd: the sink's max term [T*H] (ds holds gse), 3 N floats a row */
	struct sparse_attn_bwd_cfg b;
};

/* CSA_BWD_SOFTMAX=autograd (sparse_attn_bwd_ag.h): one thread per (t, h) row, per dkv element, per head */
__global__ void sab_ag_row_kernel(const struct sab_args a)
{
	const struct sparse_attn_cfg *c = &a.b.f;
	const long long rows = c->T * c->H, D = c->D, N = c->N;
	for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
	     r += (long long)gridDim.x * blockDim.x) {
		const long long t = r / c->H, h = r % c->H;
		sab_ag_row(&a.b.ag, a.q + r * D, a.kv, a.idx + t * N, a.sink[h], a.dO + r * D, t, h, a.dq + r * D,
			   a.dS + r * N, a.P + r * N, a.ds + r, a.gb + r, a.wk + r * 3 * N);
	}
}

__global__ void sab_ag_dkv_kernel(const struct sab_args a)
{
	const long long n = a.b.f.S * a.b.f.D, D = a.b.f.D;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x)
		a.dkv[i] = sab_ag_dkv(&a.b.ag, a.q, a.idx, a.dO, a.dS, a.P, i / D, i % D);
}

__global__ void sab_ag_dsink_kernel(const struct sab_args a)
{
	for (long long h = (long long)blockIdx.x * blockDim.x + threadIdx.x; h < a.b.f.H;
	     h += (long long)gridDim.x * blockDim.x)
		a.dsink[h] = sab_ag_dsink(&a.b.ag, a.ds, a.gb, h);
}

__global__ void sab_row_kernel(const struct sab_args a)
{
	const struct sparse_attn_cfg *c = &a.b.f;
	const long long rows = c->T * c->H, D = c->D, N = c->N;
	for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
	     r += (long long)gridDim.x * blockDim.x) {
		float tmp[SAB_TMP];
		const long long t = r / c->H, h = r % c->H;
		a.ds[r] = sab_row(&a.b, a.q + r * D, a.kv, a.idx + t * N, a.sink[h], a.o + r * D, a.dO + r * D,
				  a.dq + r * D, a.dS + r * N, a.P + r * N, tmp);
	}
}

__global__ void sab_dkv_kernel(const struct sab_args a)
{
	const long long n = a.b.f.S * a.b.f.D, D = a.b.f.D;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x)
		a.dkv[i] = sab_dkv(&a.b, a.q, a.idx, a.dO, a.dS, a.P, i / D, i % D);
}

__global__ void sab_dsink_kernel(const struct sab_args a)
{
	for (long long h = (long long)blockIdx.x * blockDim.x + threadIdx.x; h < a.b.f.H;
	     h += (long long)gridDim.x * blockDim.x)
		a.dsink[h] = sab_dsink(&a.b, a.ds, h);
}

static unsigned sab_grid(long long work, int threads)
{
	long long n = (work + threads - 1) / threads;
	return (unsigned)(n < 1 ? 1 : n > 65535 ? 65535 : n);
}

extern "C" int sparse_attn_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
					int n_in, struct align_tensor *out, int n_out,
					const struct align_launch *launch, struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	struct sab_args a;
	const struct sparse_attn_params *p = (const struct sparse_attn_params *)params;
	ALIGN_TRY(dev->err, sparse_attn_bwd_cfg_init(&a.b, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "sparse_attn_bwd", in, n_in, out, n_out));
	const struct sparse_attn_cfg *c = &a.b.f;
	const long long rows = c->T * c->H, N = c->N, D = c->D;
	if (c->D > SAB_TMP - 1 && c->torch_sums)
		return align_fail(dev->err, ALIGN_ERR_INPUT, "sparse_attn_bwd: torch sums with D > %d", SAB_TMP - 1);
	void *o = NULL, *w = NULL;
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(rows * D + 1) * sizeof(align_bf16), &o));
	const long long ag = a.b.autograd ? rows + rows * 3 * N : 0; /* gb and the rows' 3 N floats */
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(2 * rows * N + rows + ag + 1) * sizeof(float), &w));
	struct align_tensor ot = out[0];
	ot.data = o;
	if (!a.b.autograd) /* autograd does not read O */
		ALIGN_TRY(dev->err, sparse_attn_fwd_cuda(params, m, in, 4, &ot, 1, launch, dev)); /* O as stored */
	a.q = (const align_bf16 *)in[0].data;
	a.kv = (const align_bf16 *)in[1].data;
	a.idx = (const int32_t *)in[2].data;
	a.sink = (const float *)in[3].data;
	a.dO = (const align_bf16 *)in[4].data;
	a.o = (const align_bf16 *)o;
	a.dq = (align_bf16 *)out[0].data;
	a.dkv = (float *)out[1].data;
	a.dsink = (float *)out[2].data;
	a.dS = (float *)w;
	a.P = a.dS + rows * N;
	a.ds = a.P + rows * N;
	a.gb = a.ds + rows;
	a.wk = a.gb + rows;
	const int th = launch && launch->serial ? 1 : 64;
	if (a.b.autograd) {
		if (rows > 0) {
			ALIGN_CUDA_LAUNCH(sab_ag_row_kernel, sab_grid(rows, th), th, 0, stream, a);
			OPS_CUDA_TRY(cudaGetLastError()); /* the launch of sab_ag_row_kernel */
		}
		if (c->S * D > 0) {
			ALIGN_CUDA_LAUNCH(sab_ag_dkv_kernel, sab_grid(c->S * D, th), th, 0, stream, a);
			OPS_CUDA_TRY(cudaGetLastError()); /* the launch of sab_ag_dkv_kernel */
		}
		if (c->H > 0) {
			ALIGN_CUDA_LAUNCH(sab_ag_dsink_kernel, sab_grid(c->H, th), th, 0, stream, a);
			OPS_CUDA_TRY(cudaGetLastError()); /* the launch of sab_ag_dsink_kernel */
		}
		return 0;
	}
	if (rows > 0) {
		ALIGN_CUDA_LAUNCH(sab_row_kernel, sab_grid(rows, th), th, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of sab_row_kernel */
	}
	if (c->S * D > 0) {
		ALIGN_CUDA_LAUNCH(sab_dkv_kernel, sab_grid(c->S * D, th), th, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of sab_dkv_kernel */
	}
	if (c->H > 0) {
		ALIGN_CUDA_LAUNCH(sab_dsink_kernel, sab_grid(c->H, th), th, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of sab_dsink_kernel */
	}
	return 0;
}
