/* moe_combine.cu: CUDA twin of the MoE combine (contract: moe_combine.h; specification: moe_combine.c).
 * eo[T,K,D] bf16, idx[T,K] i32, w[T,K] f32, shared[T,D] bf16 -> y[T,D] bf16, the C twin's bytes in
 * every mode (all portable).
 *
 * Per token, as moe_combine.c: the slot order (MOE_COMBINE_ORDER=expert: insertion sort by expert id,
 * equal ids keep slot order; slot: 0..K-1) is computed once by one thread into shared memory, with
 * the slot weights. Per element d: acc = +0; for each slot s in that order, c = F(eo[t,s,d]) (times
 * w[t,s] for SWIGLU_PROBS=after_w2), acc = acc + c (fp32) or R(acc + c) (bf16, MOE_COMBINE_ACC);
 * y = R(acc + F(shared[t,d])). A sequential sum per element: no reduction tree, the thread owning d
 * runs the C twin's loop; operations unfused, through nan_host.h where a NaN can appear.
 *
 * Layout: G = 128 threads per token, 2 tokens per block by default (knobs: rows_cuda.cuh); each thread
 * owns chunks of 8 consecutive d: K + 1 16-byte loads, one 16-byte store (scalar path when D % 8 != 0 or
 * a pointer is unaligned). launch.serial: one thread per token through the C twin's loops.
 *
 * Napkin maths (DSv4-Flash: T = 16384, K = 6, D = 4096): bytes = 2TKD (eo) + 2TD (shared) + 2TD (y)
 * + 8TK (idx, w) = 1.07 GB; K + 1 adds per output: memory bound, ~370 us at a ~2.9 TB/s device copy
 * on an H100 SXM.
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (GB/s vs a device copy).
 */
#include "moe_combine.h"

#include "rows_cuda.cuh"

#define MC_MAX_K 64   /* = MOE_MAX_K of moe_combine.c */
#define MC_PREFETCH 8 /* slots whose loads are issued before any arithmetic (DSv4: K = 6) */
#define MC_SMEM_ROW (MC_MAX_K * (sizeof(int64_t) + sizeof(float))) /* shared memory per token */

struct mc_args {
	const align_bf16 *eo;     /* [T, K, D] */
	const int32_t *idx;       /* [T, K] */
	const float *w;           /* [T, K] */
	const align_bf16 *shared; /* [T, D] */
	align_bf16 *y;            /* [T, D] */
	int64_t T, K, D;
	int bf16;      /* MOE_COMBINE_ACC=bf16 */
	int by_expert; /* MOE_COMBINE_ORDER=expert */
	int after;     /* SWIGLU_PROBS=after_w2 */
	int rpb;       /* rows per block */
	int vec;       /* 16-byte path */
};

/* the token's slots in summation order (moe_combine.c's insertion sort) */
ALIGN_HD static inline void mc_order(const mc_args &a, int64_t t, int *order)
{
	const int32_t *id = a.idx + t * a.K;
	for (int s = 0; s < a.K; s++)
		order[s] = s;
	if (a.by_expert)
		for (int s = 1; s < a.K; s++)
			for (int j = s; j > 0 && id[order[j]] < id[order[j - 1]]; j--) {
				int tmp = order[j];
				order[j] = order[j - 1];
				order[j - 1] = tmp;
			}
}

/* one accumulation step; H: the host's NaN rules */
template <bool H> ALIGN_HD static inline float mc_step(const mc_args &a, float acc, float eo, float w)
{
	float c = a.after ? hx_mul<H>(eo, w) : eo;
	return a.bf16 ? align_round_bf16(hx_add<H>(acc, c)) : hx_add<H>(acc, c);
}

/* output (t, d) with the host's NaN rules, from global memory (rowof: eo rows in summation order) */
ALIGN_HD static inline float mc_elem_hn(const mc_args &a, const int64_t *rowof, const float *wo, int64_t t, int64_t d)
{
	float acc = 0.0f;
	for (int s = 0; s < a.K; s++)
		acc = mc_step<true>(a, acc, align_bf16_to_f32(a.eo[rowof[s] * a.D + d]), wo[s]);
	return hn_add(acc, align_bf16_to_f32(a.shared[t * a.D + d]));
}

__global__ void moe_combine_rows_kernel(mc_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	unsigned char *sm = align_cuda_dyn_smem() + (size_t)rg.g * MC_SMEM_ROW;
	int64_t *rowof = (int64_t *)sm;          /* eo row (t*K + slot) of each summand, in summation order */
	float *wo = (float *)(rowof + MC_MAX_K); /* their weights */
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.T; r0 += (int64_t)gridDim.x * a.rpb) {
		int64_t t = r0 + rg.g;
		bool valid = t < a.T;
		if (valid && rg.gt == 0) {
			int order[MC_MAX_K];
			mc_order(a, t, order);
			for (int s = 0; s < a.K; s++) {
				rowof[s] = t * a.K + order[s];
				wo[s] = a.w[rowof[s]];
			}
		}
		__syncthreads();
		if (valid) {
			if (a.vec) {
				const uint4 *sh4 = (const uint4 *)(a.shared + t * a.D);
				for (int64_t c = rg.gt; c < a.D / 8; c += rg.G) {
					float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, e[8], sh[8];
					uint4 ev[MC_PREFETCH];
#pragma unroll
					for (int s = 0; s < MC_PREFETCH; s++) /* the first slots' loads all in flight */
						if (s < a.K)
							ev[s] = __ldg((const uint4 *)(a.eo + rowof[s] * a.D) + c);
#pragma unroll
					for (int s = 0; s < MC_PREFETCH; s++) {
						if (s >= a.K)
							break;
						rows_unpack8(ev[s], e);
#pragma unroll
						for (int i = 0; i < 8; i++)
							acc[i] = mc_step<false>(a, acc[i], e[i], wo[s]);
					}
					for (int s = MC_PREFETCH; s < a.K; s++) {
						rows_unpack8(__ldg((const uint4 *)(a.eo + rowof[s] * a.D) + c), e);
#pragma unroll
						for (int i = 0; i < 8; i++)
							acc[i] = mc_step<false>(a, acc[i], e[i], wo[s]);
					}
					rows_unpack8(__ldg(sh4 + c), sh);
					align_bf16 h[8];
#pragma unroll
					for (int i = 0; i < 8; i++) {
						float o = FX_ADD(acc[i], sh[i]);
						if (align_isnanf(o))
							o = mc_elem_hn(a, rowof, wo, t, 8 * c + i);
						h[i] = align_f32_to_bf16(o);
					}
					((uint4 *)(a.y + t * a.D))[c] = rows_pack8(h);
				}
			} else {
				for (int64_t d = rg.gt; d < a.D; d += rg.G)
					a.y[t * a.D + d] = align_f32_to_bf16(mc_elem_hn(a, rowof, wo, t, d));
			}
		}
		__syncthreads();
	}
}

/* launch.serial: one thread per token, the loops of moe_combine.c */
__global__ void moe_combine_serial_kernel(mc_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		int order[MC_MAX_K];
		int64_t rowof[MC_MAX_K];
		float wo[MC_MAX_K];
		mc_order(a, t, order);
		for (int s = 0; s < a.K; s++) {
			rowof[s] = t * a.K + order[s];
			wo[s] = a.w[rowof[s]];
		}
		for (int64_t d = 0; d < a.D; d++)
			a.y[t * a.D + d] = align_f32_to_bf16(mc_elem_hn(a, rowof, wo, t, d));
	}
}

extern "C" int moe_combine_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
                                    int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
                                    cudaStream_t stream)
{
	(void)params; /* struct moe_combine_params has no field the kernel reads */
	if (!m || !in || !out || n_in != 4 || n_out != 1 || in[0].ndim != 3)
		return ops_cuda_bad_input("moe_combine", "want eo[T,K,D], idx[T,K], w[T,K], shared[T,D] -> y[T,D]");
	int64_t T = in[0].shape[0], K = in[0].shape[1], D = in[0].shape[2];
	int64_t es[3] = {T, K, D}, ks[2] = {T, K}, ys[2] = {T, D};
	if (K > MC_MAX_K || ops_check(&in[0], ALIGN_DT_BF16, 3, es) || ops_check(&in[1], ALIGN_DT_I32, 2, ks) ||
	    ops_check(&in[2], ALIGN_DT_F32, 2, ks) || ops_check(&in[3], ALIGN_DT_BF16, 2, ys) ||
	    ops_check(&out[0], ALIGN_DT_BF16, 2, ys))
		return ops_cuda_bad_input("moe_combine", "shape or dtype mismatch (want eo[T,K,D] bf16, idx[T,K] i32, "
		                                         "w[T,K] f32, shared[T,D] bf16, y[T,D] bf16, K <= 64)");
	mc_args a;
	a.eo = (const align_bf16 *)in[0].data;
	a.idx = (const int32_t *)in[1].data;
	a.w = (const float *)in[2].data;
	a.shared = (const align_bf16 *)in[3].data;
	a.y = (align_bf16 *)out[0].data;
	a.T = T;
	a.K = K;
	a.D = D;
	a.bf16 = m->v[MODE_MOE_COMBINE_ACC] == 1;
	a.by_expert = m->v[MODE_MOE_COMBINE_ORDER] == 0;
	a.after = m->v[MODE_SWIGLU_PROBS] == 1;
	a.vec = D % 8 == 0 && rows_al16(a.eo) && rows_al16(a.shared) && rows_al16(a.y);
	if (T <= 0 || D <= 0)
		return ALIGN_OK;
	struct rows_plan p = {0, 0, 0, 0, 0, 0};
	int mr = 0, ms = 0, rc = rows_max_block(moe_combine_rows_kernel, &mr);
	if (!rc)
		rc = rows_max_block(moe_combine_serial_kernel, &ms);
	if (!rc)
		rc = rows_plan_make("moe_combine", launch, T, MC_SMEM_ROW, 128, 2, mr, ms, &p);
	if (rc)
		return rc;
	a.rpb = p.rpb;
	if (p.grid == 0)
		return ALIGN_OK;
	if (p.serial) {
		ALIGN_CUDA_LAUNCH(moe_combine_serial_kernel, p.grid, p.block, 0, stream, a);
	} else {
		OPS_CUDA_TRY(rows_smem_optin(moe_combine_rows_kernel, p.smem));
		ALIGN_CUDA_LAUNCH(moe_combine_rows_kernel, p.grid, p.block, p.smem, stream, a);
	}
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
