/* sparse_mla_bwd.cu: CUDA twin of the sparse MLA attention backward (contract: sparse_mla_bwd.h; specification:
 * sparse_mla_bwd.c), the C twin's bytes in every portable mode: O comes from the forward CUDA twin
 * (sparse_mla_fwd_cuda, bitwise the C forward), and the row and dkv steps are the shared ALIGN_HD functions of
 * sparse_mla_bwd.h (every binary32 operation through nan_host.h).
 * Layout (a first, correct version; not tuned): kernel 1, one thread per (t, h) row: dq and the row's slot
 * list, count, dS and P into pool buffers; kernel 2, one thread per dkv element (j, d), scanning every (t, h, k)
 * in the stated order (no atomics: the order is fixed).
 * Cost: kernel 2 scans T H N slots per element, O(S D T H N): a reference kernel, not tuned.
 */
#include "math_cuda.cuh"
#include "rows_cuda.cuh" /* ops_cuda.h and ALIGN_CUDA_LAUNCH (the host emulator's launch too) */

#include "sparse_mla_bwd.h"

#include "op_cfg.h"

extern "C" int sparse_mla_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				   int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				   struct align_dev *dev);

struct smb_args {
	const align_bf16 *q, *kv, *dO, *o;
	const int32_t *idx;
	align_bf16 *dq;
	float *dkv, *dS, *P;
	int32_t *list;
	int64_t *cnt;
	struct sparse_mla_bwd_cfg b;
};

__global__ void smb_row_kernel(const struct smb_args a)
{
	const struct sparse_mla_cfg *c = &a.b.f;
	const long long rows = c->T * c->H, D = c->D, F = c->F, N = c->N;
	for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
	     r += (long long)gridDim.x * blockDim.x)
		a.cnt[r] = smb_row(&a.b, a.q + r * D, a.kv, a.idx + (r / c->H) * N, a.o + (a.b.delta_o ? r * F : 0),
				   a.dO + r * F, a.dq + r * D, a.list + r * N, a.dS + r * N, a.P + r * N);
}

__global__ void smb_dkv_kernel(const struct smb_args a)
{
	const long long n = a.b.f.S * a.b.f.D, D = a.b.f.D;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x)
		a.dkv[i] = smb_dkv(&a.b, a.q, a.dO, a.list, a.cnt, a.dS, a.P, i / D, i % D);
}

static unsigned smb_grid(long long work, int threads)
{
	long long n = (work + threads - 1) / threads;
	return (unsigned)(n < 1 ? 1 : n > 65535 ? 65535 : n);
}

extern "C" int sparse_mla_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				       int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				       struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	struct smb_args a;
	const struct sparse_mla_params *p = (const struct sparse_mla_params *)params;
	ALIGN_TRY(dev->err, sparse_mla_bwd_cfg_init(&a.b, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "sparse_mla_bwd", in, n_in, out, n_out));
	const struct sparse_mla_cfg *c = &a.b.f;
	const long long rows = c->T * c->H, N = c->N, F = c->F;
	void *o = NULL, *w = NULL, *li = NULL;
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(a.b.delta_o ? rows * F + 1 : 1) * sizeof(align_bf16), &o));
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(2 * rows * N + 1) * sizeof(float), &w));
	ALIGN_TRY(dev->err,
		  align_dev_alloc(dev, (size_t)(rows + 1) * sizeof(int64_t) + (size_t)(rows * N + 1) * sizeof(int32_t),
				  &li));
	if (a.b.delta_o) {
		struct align_tensor ot = in[3];
		ot.data = o;
		ALIGN_TRY(dev->err, sparse_mla_fwd_cuda(params, m, in, 3, &ot, 1, launch, dev)); /* O as stored */
	}
	a.q = (const align_bf16 *)in[0].data;
	a.kv = (const align_bf16 *)in[1].data;
	a.idx = (const int32_t *)in[2].data;
	a.dO = (const align_bf16 *)in[3].data;
	a.o = (const align_bf16 *)o;
	a.dq = (align_bf16 *)out[0].data;
	a.dkv = (float *)out[1].data;
	a.dS = (float *)w;
	a.P = a.dS + rows * N;
	a.cnt = (int64_t *)li; /* the counts first: 8-byte aligned */
	a.list = (int32_t *)(a.cnt + rows + 1);
	const int th = launch && launch->serial ? 1 : 64;
	if (rows > 0) {
		ALIGN_CUDA_LAUNCH(smb_row_kernel, smb_grid(rows, th), th, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of smb_row_kernel */
	}
	if (c->S * c->D > 0) {
		ALIGN_CUDA_LAUNCH(smb_dkv_kernel, smb_grid(c->S * c->D, th), th, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of smb_dkv_kernel */
	}
	return 0;
}
