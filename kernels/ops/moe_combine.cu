/* moe_combine.cu: CUDA twin of the MoE combine (contract: moe_combine.h; specification: moe_combine.c).
 * eo[T,K,D] bf16, idx[T,K] i32, w[T,K] f32, shared[T,D] bf16 -> y[T,D] bf16, the C twin's bytes in
 * every mode (all portable); shapes and modes come from moe_combine_cfg_init (moe_combine.c), shared with
 * the C twin.
 *
 * Per token, as moe_combine.c: the slot order (MOE_COMBINE_ORDER=expert: insertion sort by expert id,
 * equal ids keep slot order; slot: 0..K-1) is computed once by one thread in shared memory from the
 * token's ids and weights, which threads gt < K loaded in parallel during the previous token. Per element
 * d: acc = +0; for each slot s in that order, c = F(eo[t,s,d]) (times w[t,s] for SWIGLU_PROBS=after_w2),
 * acc = acc + c (fp32) or R(acc + c) (bf16, MOE_COMBINE_ACC); y = R(acc + F(shared[t,d])). A sequential
 * sum per element: no reduction tree, the thread owning d runs the C twin's loop; operations unfused,
 * through nan_host.h where a NaN can appear (the fast path's flags are template parameters; an output
 * that comes out NaN is recomputed from global memory with the host's rules).
 *
 * Layout (knobs: rows_cuda.cuh): G threads per token (default 128), rpb tokens per block (default 2; picked by the H100
 * sweep); each thread owns chunks of 8 consecutive d: the first 8 slots' 16-byte loads and the shared expert's are
 * issued before any arithmetic, one 16-byte store (scalar path when D % 8 != 0 or a pointer is unaligned). Two block
 * barriers per token (ids stored, order computed). launch.serial: one thread per token through the C twin's loops.
 *
 * Napkin maths (DSv4-Flash: T = 16384, K = 6, D = 4096): bytes = 2TKD (eo) + 2TD (shared) + 2TD (y)
 * + 8TK (idx, w) = 1.07 GB; K + 1 adds per output: memory bound, ~360 us at a ~3.0 TB/s device copy
 * on an H100 SXM. In flight: 7 x 16 bytes per thread; ~92 registers -> ~700 threads per SM -> ~75 KB
 * per SM. The old kernel's thread 0 read idx and w from global memory in dependent steps while the
 * block waited; the ids now arrive a token ahead. bf16 accumulation (megatron, paddle) costs ~6 integer
 * operations per slot and element for the rounding, which is why it ran slower than fp32: the flags as
 * template parameters remove the per-element mode selects around it.
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (GB/s vs a device copy).
 */
#include "moe_combine.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#define MC_PREFETCH 8 /* slots whose loads are issued before any arithmetic (DSv4: K = 6) */
#define MC_DEF_G 128 /* default threads per token (4 chunks of 8 each at D = 4096; the H100 sweep: 0.89-0.96 of copy) */
#define MC_DEF_RPB 2 /* default tokens per block */
/* shared memory per token: expert ids and weights in slot order, the summation order, its weights */
#define MC_SMEM_ROW (MOE_MAX_K * (2 * sizeof(int32_t) + 2 * sizeof(float)))

struct mc_args {
	const align_bf16 *eo;	  /* [T, K, D] */
	const int32_t *idx;	  /* [T, K] */
	const float *w;		  /* [T, K] */
	const align_bf16 *shared; /* [T, D] */
	align_bf16 *y;		  /* [T, D] */
	struct moe_combine_cfg c; /* dims and modes (moe_combine_cfg_init) */
	int rpb;		  /* rows per block */
	int vec;		  /* 16-byte path */
};

/* the token's slots in summation order (moe_combine.c's insertion sort) from its K expert ids */
ALIGN_HD static inline void mc_order(const mc_args &a, const int32_t *id, int *order)
{
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

/* one accumulation step; H: the host's NaN rules */
template <bool H> ALIGN_HD static inline float mc_step(const mc_args &a, float acc, float eo, float w)
{
	float c = a.c.after ? hx_mul<H>(eo, w) : eo;
	return a.c.bf16 ? align_round_bf16(hx_add<H>(acc, c)) : hx_add<H>(acc, c);
}

/* the same step with the mode flags as template parameters (fast path, no per-element mode selects) */
template <bool BF16, bool AFTER> __device__ static inline float mc_step_t(float acc, float eo, float w)
{
	float c = AFTER ? FX_MUL(eo, w) : eo;
	return BF16 ? align_round_bf16(FX_ADD(acc, c)) : FX_ADD(acc, c);
}

/* output (t, d) with the host's NaN rules, from global memory (ord: slots in summation order, wo: their
 * weights) */
ALIGN_HD static inline float mc_elem_hn(const mc_args &a, const int *ord, const float *wo, int64_t t, int64_t d)
{
	float acc = 0.0f;
	for (int s = 0; s < a.c.K; s++)
		acc = mc_step<true>(a, acc, align_bf16_to_f32(a.eo[(t * a.c.K + ord[s]) * a.c.D + d]), wo[s]);
	return hn_add(acc, align_bf16_to_f32(a.shared[t * a.c.D + d]));
}

/* 16-byte path: chunk c (elements 8c .. 8c+7) of token t; the first MC_PREFETCH slots' loads and the
 * shared expert's load are issued before any arithmetic */
template <bool BF16, bool AFTER>
__device__ static inline void mc_chunk(const mc_args &a, const int *ord, const float *wo, int64_t t, int64_t c)
{
	const int64_t D8 = a.c.D / 8;
	const uint4 *eo4 = (const uint4 *)a.eo + t * a.c.K * D8 + c;
	float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, e[8], sh[8];
	uint4 ev[MC_PREFETCH];
	uint4 shv = __ldg((const uint4 *)a.shared + t * D8 + c);
#pragma unroll
	for (int s = 0; s < MC_PREFETCH; s++)
		if (s < a.c.K)
			ev[s] = __ldg(eo4 + ord[s] * D8);
#pragma unroll
	for (int s = 0; s < MC_PREFETCH; s++) {
		if (s >= a.c.K)
			break;
		rows_unpack8(ev[s], e);
		float ws = wo[s];
#pragma unroll
		for (int i = 0; i < 8; i++)
			acc[i] = mc_step_t<BF16, AFTER>(acc[i], e[i], ws);
	}
	for (int s = MC_PREFETCH; s < a.c.K; s++) {
		rows_unpack8(__ldg(eo4 + ord[s] * D8), e);
		float ws = wo[s];
#pragma unroll
		for (int i = 0; i < 8; i++)
			acc[i] = mc_step_t<BF16, AFTER>(acc[i], e[i], ws);
	}
	rows_unpack8(shv, sh);
	align_bf16 h[8];
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float o = FX_ADD(acc[i], sh[i]);
		if (align_isnanf(o))
			o = mc_elem_hn(a, ord, wo, t, 8 * c + i);
		h[i] = align_f32_to_bf16(o);
	}
	((uint4 *)a.y)[t * D8 + c] = rows_pack8(h);
}

/* G threads per token. Threads gt < K hold the next token's expert ids and weights in registers (loaded
 * while the current token is summed), store them to shared memory at the top of the iteration; thread
 * 0 sorts them there; then every thread sums its chunks gt, gt + G, ... Two barriers per token. */
template <bool BF16, bool AFTER> __global__ void moe_combine_rows_kernel(mc_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	unsigned char *sm = align_cuda_dyn_smem() + (size_t)rg.g * MC_SMEM_ROW;
	int32_t *ids = (int32_t *)sm;		/* expert id of each slot */
	float *ws = (float *)(ids + MOE_MAX_K); /* weight of each slot */
	int *ord = (int *)(ws + MOE_MAX_K);	/* slots in summation order */
	float *wo = (float *)(ord + MOE_MAX_K); /* their weights */
	const int64_t step = (int64_t)gridDim.x * a.rpb;
	int64_t t = (int64_t)blockIdx.x * a.rpb + rg.g;
	int32_t id_next = 0;
	float w_next = 0.0f;
	if (t < a.c.T && rg.gt < a.c.K) {
		id_next = __ldg(a.idx + t * a.c.K + rg.gt);
		w_next = __ldg(a.w + t * a.c.K + rg.gt);
	}
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.c.T; r0 += step) {
		t = r0 + rg.g;
		bool valid = t < a.c.T;
		if (valid && rg.gt < a.c.K) {
			ids[rg.gt] = id_next;
			ws[rg.gt] = w_next;
			int64_t tn = t + step;
			if (tn < a.c.T) { /* in flight while this token is summed */
				id_next = __ldg(a.idx + tn * a.c.K + rg.gt);
				w_next = __ldg(a.w + tn * a.c.K + rg.gt);
			}
		}
		__syncthreads();
		if (valid && rg.gt == 0) {
			int order[MOE_MAX_K];
			mc_order(a, ids, order);
			for (int s = 0; s < a.c.K; s++) {
				ord[s] = order[s];
				wo[s] = ws[order[s]];
			}
		}
		__syncthreads();
		if (!valid)
			continue;
		if (a.vec) {
			for (int64_t c = rg.gt; c < a.c.D / 8; c += rg.G)
				mc_chunk<BF16, AFTER>(a, ord, wo, t, c);
		} else {
			for (int64_t d = rg.gt; d < a.c.D; d += rg.G)
				a.y[t * a.c.D + d] = align_f32_to_bf16(mc_elem_hn(a, ord, wo, t, d));
		}
	}
}

/* launch.serial: one thread per token, the loops of moe_combine.c */
__global__ void moe_combine_serial_kernel(mc_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		int order[MOE_MAX_K];
		float wo[MOE_MAX_K];
		mc_order(a, a.idx + t * a.c.K, order);
		for (int s = 0; s < a.c.K; s++)
			wo[s] = a.w[t * a.c.K + order[s]];
		for (int64_t d = 0; d < a.c.D; d++)
			a.y[t * a.c.D + d] = align_f32_to_bf16(mc_elem_hn(a, order, wo, t, d));
	}
}

/* rows_op.pick: the kernel of the mode flags */
static void mc_pick(const mc_args &a, int G, void (**k)(mc_args), size_t *row_smem)
{
	(void)G;
	*k = a.c.bf16 ? (a.c.after ? moe_combine_rows_kernel<true, true> : moe_combine_rows_kernel<true, false>)
		      : (a.c.after ? moe_combine_rows_kernel<false, true> : moe_combine_rows_kernel<false, false>);
	*row_smem = MC_SMEM_ROW;
}

extern "C" int moe_combine_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				    int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				    struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	mc_args a;
	ALIGN_TRY(dev->err, moe_combine_cfg_init(&a.c, (const struct moe_combine_params *)params, m, in, n_in, out,
						 n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "moe_combine", in, n_in, out, n_out));
	a.eo = (const align_bf16 *)in[0].data;
	a.idx = (const int32_t *)in[1].data;
	a.w = (const float *)in[2].data;
	a.shared = (const align_bf16 *)in[3].data;
	a.y = (align_bf16 *)out[0].data;
	a.rpb = 1;
	a.vec = a.c.D % 8 == 0 && rows_al16(a.eo) && rows_al16(a.shared) && rows_al16(a.y);
	if (a.c.T <= 0 || a.c.D <= 0)
		return ALIGN_OK;
	const rows_op<mc_args> op = {"moe_combine", a.c.T, MC_DEF_G, MC_DEF_RPB, moe_combine_serial_kernel, mc_pick};
	return rows_launch(op, launch, a, stream);
}
