/* rmsnorm.cu: CUDA twin of the weighted RMSNorm (contract: rmsnorm.h; specification: rmsnorm.c).
 * x[T,D] bf16, w[D] f32 -> y[T,D] bf16, bit for bit the C twin's bytes in every portable mode; shapes and
 * modes come from rmsnorm_cfg_init (rmsnorm.c), shared with the C twin.
 *
 * Per row, as rmsnorm.c: ss = align_reduce(RMSNORM_REDUCE, x32^2) with the association of reduce.h
 * (rows_cuda.cuh: pairwise as leaves of 8 + warp trees with carry, warp32 as warp 0's lanes and xor
 * butterfly, seq / fp64 as one thread's chain); r = rmsnorm_rsqrt(ss / (float)D + eps) (RMSNORM_RSQRT=cuda:
 * CUDA's rsqrtf, GPU only: rows_rsqrt); per element
 * y = x32 * r, w' = w or R(w), out = R(w' * y) or R(R(y) * R(w')). Every binary32 operation is the C
 * twin's, in its order, unfused (nvcc --fmad=false), through nan_host.h where a NaN can appear.
 *
 * Layout (rows_cuda.cuh; knobs: block, rows_per_block, grid_cap, serial): G threads per row (default
 * 128), rpb rows per block (default 1). When D % 8 == 0 and x, y, w are 16-byte aligned and the row fits
 * LPT = ceil(D / 8 / G) <= 8 chunks per thread, the registers layout: every 16-byte load of the row is
 * issued at once into registers, reduced from there (pairwise: leaves + warp trees, cross-warp through
 * 16 floats of shared memory; warp32 / seq / fp64: the chunks are stored to shared memory for warp 0 or
 * thread 0 of the row), then normalised from the same registers with 16-byte stores; the mode flags of
 * the output formula are template parameters of the chunk code (no per-element selects). Otherwise (G =
 * 32 at D = 4096, ragged D, unaligned pointers) the staged layout: the row is copied to shared memory,
 * reduced and normalised from there. launch.serial runs one thread per row through the C twin's loops;
 * RMSNORM_REDUCE=torch always does (torch_order.h's torch_rowsum: ATen's threads replayed one by one, a
 * GPU-mimic order whose speed is not a goal).
 *
 * Napkin maths (DSv4-Flash: T = 16384, D = 4096): bytes = 2TD (x) + 2TD (y) + 4D (w, cached) = 268 MB;
 * FLOPs ~ 2TD (squares, sum) + 3TD (scale, weight) = 0.34 GFLOP: memory bound. H100 SXM (3.35 TB/s
 * peak, ~3.0 TB/s for a device copy): ~90 us at copy speed. Little's law: ~3 TB/s x ~0.7 us = ~2 MB in
 * flight, ~16 KB per SM. Registers layout at G = 128: 4 x 16 bytes per thread issued together, 8 KB per
 * row; 56 registers -> up to 9 blocks (rows) of 128 threads per SM -> ~72 KB in flight per SM when all
 * rows are loading, and rows at other phases (reduce, store) overlap them. The old staged layout had 28
 * warps per SM of which only those in their copy phase had loads in flight, and pairwise paid 3 block
 * barriers shared by 4 rows; pairwise now pays 2 (G > 32) or 0 (G = 32). Issue: ~15 instructions per
 * element (~1900 warp instructions per row) against ~5000 issue slots per SM in the ~0.7 us a row takes
 * at copy speed. warp32 (megatron, paddle) adds a 128-step add chain per lane (~1000 cycles of latency
 * per row, hidden by the other rows of the SM).
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (GB/s vs a device copy).
 */
#include "rmsnorm.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#define RMS_DEF_G 128 /* default threads per row (registers layout, 4 chunks per thread at D = 4096) */
#define RMS_DEF_RPB 1 /* default rows per block */

struct rms_args {
	const align_bf16 *x;  /* [T, D] */
	const float *w;	      /* [D] */
	align_bf16 *y;	      /* [T, D] */
	struct rmsnorm_cfg c; /* dims and modes (rmsnorm_cfg_init) */
	int rpb;	      /* rows per block */
	int vec;	      /* 16-byte path: D % 8 == 0 and y, w 16-byte aligned */
	int regs;	      /* registers layout possible: vec and x 16-byte aligned */
	int64_t row_elems;    /* shared-memory row stride in elements (D rounded up to 8) */
	int64_t scr_floats;   /* scratch floats per row */
};

/* dynamic shared memory per row: scratch, then the row (staged layout, or registers layout with a
 * chain order); 16-byte multiple */
ALIGN_HD static inline size_t rms_row_smem(const rms_args &a, int regs)
{
	int row = !regs || a.c.f.order != ALIGN_REDUCE_PAIRWISE;
	return (size_t)(a.scr_floats * 4 + (row ? a.row_elems * 2 : 0));
}

__device__ static inline float rms_factor(const rms_args &a, float ss)
{
	return rows_rsqrt(a.c.f.rsqrt, hn_add(rmsnorm_mean(&a.c.f, ss, a.c.D), a.c.f.eps));
}

template <bool H> __device__ static inline float rms_elem_f(const rms_args &a, float x32, float r, float w)
{
	float y = hx_mul<H>(x32, r);
	float wj = a.c.wbf16 ? align_round_bf16(w) : w;
	return a.c.before ? hx_mul<H>(align_round_bf16(y), align_round_bf16(wj)) : hx_mul<H>(wj, y);
}

/* one output: plain operators; a NaN result (NaN-ness does not depend on NaN bits) is recomputed with
 * the host's NaN rules */
__device__ static inline align_bf16 rms_elem(const rms_args &a, float x32, float r, float w)
{
	float o = rms_elem_f<false>(a, x32, r, w);
	if (align_isnanf(o))
		o = rms_elem_f<true>(a, x32, r, w);
	return align_f32_to_bf16(o);
}

/* 8 outputs of chunk c (x unpacked in xf) with the mode flags as template parameters, so that the
 * fast path has no per-element mode selects; the same operations as rms_elem_f<false> */
template <bool WBF16, bool BEFORE>
__device__ static inline uint4 rms_chunk_t(const rms_args &a, const float *xf, int64_t c, float r)
{
	const float4 *w4 = (const float4 *)a.w;
	float4 wa = __ldg(w4 + 2 * c), wb = __ldg(w4 + 2 * c + 1);
	float wf[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
	align_bf16 h[8];
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float y = FX_MUL(xf[i], r);
		float wj = WBF16 ? align_round_bf16(wf[i]) : wf[i];
		float o = BEFORE ? FX_MUL(align_round_bf16(y), align_round_bf16(wj)) : FX_MUL(wj, y);
		if (align_isnanf(o))
			o = rms_elem_f<true>(a, xf[i], r, wf[i]);
		h[i] = align_f32_to_bf16(o);
	}
	return rows_pack8(h);
}

__device__ static inline uint4 rms_chunk(const rms_args &a, const float *xf, int64_t c, float r)
{
	if (a.c.before)
		return a.c.wbf16 ? rms_chunk_t<true, true>(a, xf, c, r) : rms_chunk_t<false, true>(a, xf, c, r);
	return a.c.wbf16 ? rms_chunk_t<true, false>(a, xf, c, r) : rms_chunk_t<false, false>(a, xf, c, r);
}

__device__ static inline void rms_store_row(const rms_args &a, const align_bf16 *xs, int64_t row, float r,
					    const rows_geom &rg)
{
	align_bf16 *y = a.y + row * a.c.D;
	if (a.vec) {
		const uint4 *x4 = (const uint4 *)xs;
		for (int64_t c = rg.gt; c < a.c.D / 8; c += rg.G) {
			float xf[8];
			rows_unpack8(x4[c], xf);
			((uint4 *)y)[c] = rms_chunk(a, xf, c, r);
		}
		return;
	}
	for (int64_t j = rg.gt; j < a.c.D; j += rg.G)
		y[j] = rms_elem(a, align_bf16_to_f32(xs[j]), r, __ldg(a.w + j));
}

/* staged layout: the row in shared memory */
__global__ void rmsnorm_rows_kernel(rms_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	unsigned char *sm = align_cuda_dyn_smem() + (size_t)rg.g * rms_row_smem(a, 0);
	float *scr = (float *)sm;
	align_bf16 *xs = (align_bf16 *)(sm + a.scr_floats * 4);
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.c.T; r0 += (int64_t)gridDim.x * a.rpb) {
		int64_t row = r0 + rg.g;
		bool valid = row < a.c.T;
		if (valid)
			rows_stage_bf16(xs, a.x + row * a.c.D, a.c.D, rg);
		__syncthreads();
		rows_bf16_row xr = {xs};
		float ss = rows_reduce(a.c.f.order, xr, a.c.D, 1, scr, rg, valid);
		if (valid)
			rms_store_row(a, xs, row, rms_factor(a, ss), rg);
		__syncthreads();
	}
}

/* registers layout: thread gt holds chunks gt + m G (m < LPT) of its row; the second pass reads them */
template <int LPT> __global__ void rmsnorm_regs_kernel(rms_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	unsigned char *sm = align_cuda_dyn_smem() + (size_t)rg.g * rms_row_smem(a, 1);
	float *scr = (float *)sm;
	align_bf16 *xs = (align_bf16 *)(sm + a.scr_floats * 4);
	const int64_t nch = a.c.D / 8;
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.c.T; r0 += (int64_t)gridDim.x * a.rpb) {
		int64_t row = r0 + rg.g;
		bool valid = row < a.c.T;
		rows_bf16_row xg = {a.x + (valid ? row : 0) * a.c.D};
		uint4 v[LPT];
		rows_regs_load<LPT>(v, xg.p, nch, rg, valid);
		float ss = rows_regs_sum<LPT>(a.c.f.order, v, xg, a.c.D, 1, scr, xs, rg, valid);
		if (!valid)
			continue;
		float r = rms_factor(a, ss);
		uint4 *y4 = (uint4 *)(a.y + row * a.c.D);
#pragma unroll
		for (int m = 0; m < LPT; m++) {
			int64_t c = rg.gt + (int64_t)m * rg.G;
			if (c < nch) {
				float xf[8];
				rows_unpack8(v[m], xf);
				y4[c] = rms_chunk(a, xf, c, r);
			}
		}
	}
}

/* launch.serial: one thread per row, the loops of rmsnorm.c */
__global__ void rmsnorm_serial_kernel(rms_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		rows_bf16_row xr = {a.x + t * a.c.D};
		float ss = a.c.f.order == ALIGN_REDUCE_TORCH ? torch_rowsum(xr.p, 1, &a.c.f.tr, t, 1)
							     : hnr_reduce(a.c.f.order, xr, a.c.D, 1);
		float r = rms_factor(a, ss);
		for (int64_t j = 0; j < a.c.D; j++)
			a.y[t * a.c.D + j] = rms_elem(a, xr(j), r, a.w[j]);
	}
}

/* rows_op.pick: the registers layout when the row fits LPT <= ROWS_MAX_LPT chunks per thread */
static void rms_pick(const rms_args &a, int G, void (**k)(rms_args), size_t *row_smem)
{
	int lpt = a.regs ? rows_regs_lpt(a.c.D, G) : 0;
	*k = lpt == 1	? rmsnorm_regs_kernel<1>
	     : lpt == 2 ? rmsnorm_regs_kernel<2>
	     : lpt == 4 ? rmsnorm_regs_kernel<4>
	     : lpt == 8 ? rmsnorm_regs_kernel<8>
			: rmsnorm_rows_kernel;
	*row_smem = rms_row_smem(a, lpt != 0);
}

extern "C" int rmsnorm_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	rms_args a;
	ALIGN_TRY(dev->err, rmsnorm_cfg_init(&a.c, (const struct rmsnorm_params *)params, m, in, n_in, out, n_out,
					     ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "rmsnorm", in, n_in, out, n_out));
	const int64_t T = a.c.T, D = a.c.D;
	a.x = (const align_bf16 *)in[0].data;
	a.w = (const float *)in[1].data;
	a.y = (align_bf16 *)out[0].data;
	a.rpb = 1;
	a.vec = D % 8 == 0 && rows_al16(a.y) && rows_al16(a.w);
	a.regs = a.vec && rows_al16(a.x);
	a.row_elems = (D + 7) / 8 * 8;
	a.scr_floats = rows_scratch_floats(D);
	if (T <= 0 || D <= 0)
		return ALIGN_OK;
	const rows_op<rms_args> op = {"rmsnorm", T, RMS_DEF_G, RMS_DEF_RPB, rmsnorm_serial_kernel, rms_pick};
	if (a.c.f.order == ALIGN_REDUCE_TORCH) { /* ATen's threads replayed by one thread a row: the serial kernel */
		struct align_launch ser = {0, 0, 0, 0};
		if (launch)
			ser = *launch;
		ser.serial = ser.serial < 0 ? ser.serial : 1;
		return rows_launch(op, &ser, a, stream);
	}
	return rows_launch(op, launch, a, stream);
}
