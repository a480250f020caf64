/* rmsnorm.cu: CUDA twin of the weighted RMSNorm (contract: rmsnorm.h; specification: rmsnorm.c).
 * x[T,D] bf16, w[D] f32 -> y[T,D] bf16, bit for bit the C twin's bytes in every mode (all are portable).
 *
 * Per row, as rmsnorm.c: ss = align_reduce(RMSNORM_REDUCE, x32^2) with the association of reduce.h
 * (rows_cuda.cuh: pairwise as leaves of 8 + warp trees with carry, warp32 as warp 0's lanes and xor
 * butterfly, seq / fp64 as one thread's chain); r = rmsnorm_rsqrt(ss / (float)D + eps); per element
 * y = x32 * r, w' = w or R(w), out = R(w' * y) or R(R(y) * R(w')). Every binary32 operation is the C
 * twin's, in its order, unfused (nvcc --fmad=false), through nan_host.h where a NaN can appear.
 *
 * Layout: G = 32 threads (one warp) per row, 4 rows per block by default (launch knobs: rows_cuda.cuh);
 * the row is staged in shared memory with 16-byte loads, reduced, then normalised from shared memory
 * with 16-byte stores (scalar paths when D % 8 != 0 or a pointer is not 16-byte aligned). launch.serial
 * (or a row longer than shared memory) runs one thread per row through the C twin's loops.
 *
 * Napkin maths (DSv4-Flash: T = 16384, D = 4096): bytes = 2TD (x) + 2TD (y) + 4D (w, cached) = 268 MB;
 * FLOPs ~ 2TD (squares, sum) + 3TD (scale, weight) = 0.34 GFLOP: memory bound. H100 SXM (3.35 TB/s
 * peak, ~2.9 TB/s for a device copy): ~90 us at copy speed. Per row a warp runs ~500 instructions for
 * the pairwise tree and ~100 per 8 outputs: ~35 us of issue time for the whole call, hidden under memory.
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (GB/s vs a device copy).
 */
#include "rmsnorm.h"

#include "rows_cuda.cuh"

struct rms_args {
	const align_bf16 *x; /* [T, D] */
	const float *w;      /* [D] */
	align_bf16 *y;       /* [T, D] */
	int64_t T, D;
	int order;   /* enum align_reduce_order */
	int rsqrt_v; /* RMSNORM_RSQRT value */
	int wbf16;   /* RMSNORM_WEIGHT=bf16 */
	int before;  /* RMSNORM_CAST=before_weight */
	float eps;
	int rpb;            /* rows per block */
	int vec;            /* 16-byte path: D % 8 == 0 and y, w 16-byte aligned */
	int64_t row_elems;  /* shared-memory row stride in elements (D rounded up to 8) */
	int64_t scr_floats; /* scratch floats per row */
};

/* rmsnorm_rsqrt with the host's NaN bits (1.0f / NaN is a NaN operation on the GPU) */
__device__ static inline float rms_rsqrt(int v, float a)
{
	if (align_isnanf(a))
		return align_quiet_nanf(a);
	if (a < 0.0f)
		return align_canonical_nanf();
	return rmsnorm_rsqrt(v, a);
}

__device__ static inline float rms_factor(const rms_args &a, float ss)
{
	return rms_rsqrt(a.rsqrt_v, hn_add(hn_div(ss, (float)a.D), a.eps));
}

template <bool H> __device__ static inline float rms_elem_f(const rms_args &a, float x32, float r, float w)
{
	float y = hx_mul<H>(x32, r);
	float wj = a.wbf16 ? align_round_bf16(w) : w;
	return a.before ? hx_mul<H>(align_round_bf16(y), align_round_bf16(wj)) : hx_mul<H>(wj, y);
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

__device__ static inline void rms_store_row(const rms_args &a, const align_bf16 *xs, int64_t row, float r,
                                            const rows_geom &rg)
{
	align_bf16 *y = a.y + row * a.D;
	if (a.vec) {
		const uint4 *x4 = (const uint4 *)xs;
		const float4 *w4 = (const float4 *)a.w;
		for (int64_t c = rg.gt; c < a.D / 8; c += rg.G) {
			float xf[8];
			rows_unpack8(x4[c], xf);
			float4 wa = __ldg(w4 + 2 * c), wb = __ldg(w4 + 2 * c + 1);
			float wf[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
			align_bf16 h[8];
#pragma unroll
			for (int i = 0; i < 8; i++)
				h[i] = rms_elem(a, xf[i], r, wf[i]);
			((uint4 *)y)[c] = rows_pack8(h);
		}
		return;
	}
	for (int64_t j = rg.gt; j < a.D; j += rg.G)
		y[j] = rms_elem(a, align_bf16_to_f32(xs[j]), r, __ldg(a.w + j));
}

__global__ void rmsnorm_rows_kernel(rms_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	unsigned char *sm = align_cuda_dyn_smem() + (size_t)rg.g * (size_t)(a.row_elems * 2 + a.scr_floats * 4);
	align_bf16 *xs = (align_bf16 *)sm;
	float *scr = (float *)(sm + a.row_elems * 2);
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.T; r0 += (int64_t)gridDim.x * a.rpb) {
		int64_t row = r0 + rg.g;
		bool valid = row < a.T;
		if (valid)
			rows_stage_bf16(xs, a.x + row * a.D, a.D, rg);
		__syncthreads();
		rows_bf16_row xr = {xs};
		float ss = rows_reduce(a.order, xr, a.D, 1, scr, rg, valid);
		if (valid)
			rms_store_row(a, xs, row, rms_factor(a, ss), rg);
		__syncthreads();
	}
}

/* launch.serial: one thread per row, the loops of rmsnorm.c */
__global__ void rmsnorm_serial_kernel(rms_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		rows_bf16_row xr = {a.x + t * a.D};
		float r = rms_factor(a, hnr_reduce(a.order, xr, a.D, 1));
		for (int64_t j = 0; j < a.D; j++)
			a.y[t * a.D + j] = rms_elem(a, xr(j), r, a.w[j]);
	}
}

extern "C" int rmsnorm_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
                                int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
                                cudaStream_t stream)
{
	(void)params; /* struct rmsnorm_params has no field the kernel reads */
	if (!m || !in || !out || n_in != 2 || n_out != 1 || in[0].ndim != 2)
		return ops_cuda_bad_input("rmsnorm", "want inputs x[T,D] bf16, w[D] f32 and output y[T,D] bf16");
	int64_t T = in[0].shape[0], D = in[0].shape[1];
	int64_t xs[2] = {T, D}, ws[1] = {D};
	if (ops_check(&in[0], ALIGN_DT_BF16, 2, xs) || ops_check(&in[1], ALIGN_DT_F32, 1, ws) ||
	    ops_check(&out[0], ALIGN_DT_BF16, 2, xs))
		return ops_cuda_bad_input("rmsnorm",
		                          "shape or dtype mismatch (want x[T,D] bf16, w[D] f32, y[T,D] bf16)");
	rms_args a;
	a.x = (const align_bf16 *)in[0].data;
	a.w = (const float *)in[1].data;
	a.y = (align_bf16 *)out[0].data;
	a.T = T;
	a.D = D;
	a.order = rmsnorm_order(m->v[MODE_RMSNORM_REDUCE]);
	a.rsqrt_v = m->v[MODE_RMSNORM_RSQRT];
	a.wbf16 = m->v[MODE_RMSNORM_WEIGHT] == 1;
	a.before = m->v[MODE_RMSNORM_CAST] == 1;
	a.eps = rmsnorm_eps(m->v[MODE_RMSNORM_EPS]);
	a.vec = D % 8 == 0 && rows_al16(a.y) && rows_al16(a.w);
	a.row_elems = (D + 7) / 8 * 8;
	a.scr_floats = rows_scratch_floats(D);
	if (T <= 0 || D <= 0)
		return ALIGN_OK;
	struct rows_plan p = {0, 0, 0, 0, 0, 0};
	int mr = 0, ms = 0, rc = rows_max_block(rmsnorm_rows_kernel, &mr);
	if (!rc)
		rc = rows_max_block(rmsnorm_serial_kernel, &ms);
	if (!rc)
		rc = rows_plan_make("rmsnorm", launch, T, (size_t)(a.row_elems * 2 + a.scr_floats * 4), 32, 4, mr, ms,
		                    &p);
	if (rc)
		return rc;
	a.rpb = p.rpb;
	if (p.grid == 0)
		return ALIGN_OK;
	if (p.serial) {
		ALIGN_CUDA_LAUNCH(rmsnorm_serial_kernel, p.grid, p.block, 0, stream, a);
	} else {
		OPS_CUDA_TRY(rows_smem_optin(rmsnorm_rows_kernel, p.smem));
		ALIGN_CUDA_LAUNCH(rmsnorm_rows_kernel, p.grid, p.block, p.smem, stream, a);
	}
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
