/* moe_combine_bwd.cu: CUDA twin of the MoE combine backward and gradient fan-in (contract: moe_combine_bwd.h;
 * specification: moe_combine_bwd.c). The C twin's bytes in the portable orders (expert, slot); shapes and
 * modes come from moe_combine_bwd_cfg_init, shared with the C twin.
 *
 * Kernels: (1) one thread per (t, d): d_shared, d_eo of the K slots, and dx as the C twin's loop (the
 * token's slot order from mcb_order, the fp32 chain, then the shared term, one rounding); (2) one thread per
 * (t, s): d_w's sequential sum over d (the fan-in rounds per add under MOE_COMBINE_ACC=bf16, as the C twin). Operations through nan_host.h (hn_*), so NaN results carry the host's
 * bits. ORDER=atomic (GPU only, NON-DETERMINISTIC; the one float-atomic path of align, never in a profile):
 * kernel (1) skips dx; a kernel zeroes an fp32 scratch [T, D], a kernel with one thread per (t, s, d) and per
 * (t, d) does atomicAdd of F(dxe) and F(dxs) (hardware order), a last kernel rounds it to dx.
 * launch.serial: one thread per token through the C twin's loops (portable orders; atomic ignores it).
 * Not run on a GPU yet (no device this session): compiled only.
 */
#include "moe_combine_bwd.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

struct mcb_args {
	const align_bf16 *eo, *shared, *dy, *dxe, *dxs;
	const int32_t *idx;
	const float *w;
	align_bf16 *d_eo, *d_shared, *dx;
	float *d_w;
	float *acc; /* [T, D] fp32 scratch (atomic only) */
	struct moe_combine_bwd_cfg c;
};

ALIGN_HD static inline void mcb_order(const mcb_args &a, int64_t t, int *order)
{
	const int32_t *id = a.idx + t * a.c.K;
	for (int s = 0; s < a.c.K; s++)
		order[s] = s;
	if (a.c.by_expert)
		for (int s = 1; s < a.c.K; s++)
			for (int j = s; j > 0 && id[order[j]] < id[order[j - 1]]; j--) {
				int tmp = order[j];
				order[j] = order[j - 1];
				order[j - 1] = tmp;
			}
}

/* element (t, d): d_shared, d_eo of every slot, dx (portable orders) */
ALIGN_HD static inline void mcb_td(const mcb_args &a, const int *order, int64_t t, int64_t d)
{
	const int64_t K = a.c.K, D = a.c.D;
	float x = align_bf16_to_f32(a.dy[t * D + d]);
	a.d_shared[t * D + d] = align_f32_to_bf16(x);
	for (int64_t s = 0; s < K; s++)
		a.d_eo[(t * K + s) * D + d] = align_f32_to_bf16(a.c.after ? hn_mul(x, a.w[t * K + s]) : x);
	if (a.c.atomic)
		return;
	float acc = 0.0f;
	for (int s = 0; s < K; s++) {
		float v = hn_add(acc, align_bf16_to_f32(a.dxe[(t * K + order[s]) * D + d]));
		acc = a.c.bf16 ? align_round_bf16(v) : v;
	}
	acc = hn_add(acc, align_bf16_to_f32(a.dxs[t * D + d]));
	a.dx[t * D + d] = align_f32_to_bf16(acc);
}

/* d_w[t, s] */
ALIGN_HD static inline void mcb_dw(const mcb_args &a, int64_t t, int64_t s)
{
	const int64_t K = a.c.K, D = a.c.D;
	float acc = 0.0f;
	if (a.c.after)
		for (int64_t d = 0; d < D; d++) {
			float term = hn_mul(align_bf16_to_f32(a.dy[t * D + d]),
					    align_bf16_to_f32(a.eo[(t * K + s) * D + d]));
			acc = d == 0 ? term : hn_add(acc, term);
		}
	a.d_w[t * K + s] = acc;
}

__global__ void mcb_td_kernel(mcb_args a)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.c.T * a.c.D; i += stride) {
		int64_t t = i / a.c.D;
		int order[MOE_MAX_K];
		mcb_order(a, t, order);
		mcb_td(a, order, t, i % a.c.D);
	}
}

__global__ void mcb_dw_kernel(mcb_args a)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.c.T * a.c.K; i += stride)
		mcb_dw(a, i / a.c.K, i % a.c.K);
}

/* ORDER=atomic: zero, float atomicAdd in hardware order (NON-DETERMINISTIC), round */
__global__ void mcb_atomic_zero_kernel(mcb_args a)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.c.T * a.c.D; i += stride)
		a.acc[i] = 0.0f;
}

__global__ void mcb_atomic_add_kernel(mcb_args a)
{
	const int64_t K1 = a.c.K + 1, n = a.c.T * K1 * a.c.D;
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		int64_t d = i % a.c.D, s = (i / a.c.D) % K1, t = i / (a.c.D * K1);
		float v = s < a.c.K ? align_bf16_to_f32(a.dxe[(t * a.c.K + s) * a.c.D + d])
				    : align_bf16_to_f32(a.dxs[t * a.c.D + d]);
		atomicAdd(a.acc + t * a.c.D + d, v);
	}
}

__global__ void mcb_atomic_round_kernel(mcb_args a)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.c.T * a.c.D; i += stride)
		a.dx[i] = align_f32_to_bf16(a.acc[i]);
}

/* launch.serial: one thread per token, the loops of moe_combine_bwd.c */
__global__ void mcb_serial_kernel(mcb_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		int order[MOE_MAX_K];
		mcb_order(a, t, order);
		for (int64_t s = 0; s < a.c.K; s++)
			mcb_dw(a, t, s);
		for (int64_t d = 0; d < a.c.D; d++)
			mcb_td(a, order, t, d);
	}
}

static int64_t mcb_grid(int64_t work, int block, const struct align_launch *L, const struct align_dev *dev)
{
	int64_t grid = (work + block - 1) / block, cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (grid > cap)
		grid = cap;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	return grid < 1 ? 1 : grid;
}

extern "C" int moe_combine_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
					int n_in, struct align_tensor *out, int n_out,
					const struct align_launch *launch, struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	mcb_args a;
	ALIGN_TRY(dev->err, moe_combine_bwd_cfg_init(&a.c, (const struct moe_combine_params *)params, m, in, n_in, out,
						     n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "moe_combine_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("moe_combine_bwd", "negative launch knob");
	a.eo = (const align_bf16 *)in[0].data;
	a.idx = (const int32_t *)in[1].data;
	a.w = (const float *)in[2].data;
	a.shared = (const align_bf16 *)in[3].data;
	a.dy = (const align_bf16 *)in[4].data;
	a.dxe = (const align_bf16 *)in[5].data;
	a.dxs = (const align_bf16 *)in[6].data;
	a.d_eo = (align_bf16 *)out[0].data;
	a.d_w = (float *)out[1].data;
	a.d_shared = (align_bf16 *)out[2].data;
	a.dx = (align_bf16 *)out[3].data;
	a.acc = NULL;
	const int64_t T = a.c.T, K = a.c.K, D = a.c.D;
	if (T <= 0)
		return ALIGN_OK;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	int rc = rows_max_block(L->serial > 0 ? mcb_serial_kernel : mcb_td_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block;
	if (L->serial > 0 && !a.c.atomic) {
		ALIGN_CUDA_LAUNCH(mcb_serial_kernel, (unsigned)mcb_grid(T, block, L, dev), block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
		return ALIGN_OK;
	}
	ALIGN_CUDA_LAUNCH(mcb_td_kernel, (unsigned)mcb_grid(T * D, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	ALIGN_CUDA_LAUNCH(mcb_dw_kernel, (unsigned)mcb_grid(T * K, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	if (!a.c.atomic || D <= 0)
		return ALIGN_OK;
	void *acc = NULL; /* the shared workspace: stream-ordered, this call's kernels only */
	ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)T * (size_t)D * sizeof(float), &acc));
	a.acc = (float *)acc;
	ALIGN_CUDA_LAUNCH(mcb_atomic_zero_kernel, (unsigned)mcb_grid(T * D, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	ALIGN_CUDA_LAUNCH(mcb_atomic_add_kernel, (unsigned)mcb_grid(T * (K + 1) * D, block, L, dev), block, 0, stream,
			  a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	ALIGN_CUDA_LAUNCH(mcb_atomic_round_kernel, (unsigned)mcb_grid(T * D, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
