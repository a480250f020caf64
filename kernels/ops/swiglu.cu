/* swiglu.cu: CUDA twin of the DSv4 SwiGLU activation (contract: swiglu.h; specification: swiglu.c).
 * g[T,F] bf16, u[T,F] bf16, p[T] f32 -> a[T,F] bf16, the C twin's bytes in every portable mode; shapes
 * and modes come from swiglu_cfg_init (swiglu.c), shared with the C twin;
 * MATH_IMPL=libm (glibc expf) has no GPU twin and returns 4; MATH_IMPL=cuda / cuda_fast (GPU only) take
 * exp from CUDA (math_cuda.cuh): silu = g / (1 + expf(-g)) as torch's CUDA silu.
 *
 * Per element, as swiglu.c: clamp (u to [-L, L], g to <= L, NaN passes); s = silu(g) with
 * e = align_expf(-g): div g / (1 + e), mul g * (1 / (1 + e)); a = s * u; out = R(q * a), R(R(a) * q)
 * or R(a) (SWIGLU_ROUND, SWIGLU_PROBS), q = p[t] or R(p[t]) (SWIGLU_SCALE). Operand order and roundings
 * are the C twin's, unfused, through nan_host.h where a NaN can appear.
 *
 * silu table: s depends on g only, and g is a bf16 value (65536 bit patterns) or, after the clamp, L.
 * A first kernel evaluates s for every bf16 pattern and for L with the very operations above (65537
 * exp evaluations into 256 KiB of the device context's workspace, align_dev_scratch: stream-ordered); the
 * main kernel reads s = table[bits(g)] (table[65536] when the clamp replaced g by L). Memoisation: each output has the
 * same operation sequence as in the C twin. It takes the binary64 exp (~40 fp64 operations per element, ~100 us of fp64
 * issue at DSv4 sizes, more than the memory time) off the critical path. launch.serial computes silu directly, one
 * thread per row, so the test compares the two.
 *
 * Layout: grid-stride over chunks of 8 elements (16-byte loads of g and u, 16-byte stores) when F % 8 == 0
 * and the pointers are 16-byte aligned, single elements otherwise. Knobs: block (default 256 threads),
 * grid_cap (default: at most 16 blocks per SM, dev->sm_count, grid-stride beyond); rows_per_block is
 * not used (elementwise); serial: direct silu, one thread per row.
 *
 * Napkin maths (DSv4-Flash shared expert: T = 16384, F = moe_inter_dim 2048): bytes = 2TF (g) + 2TF (u)
 * + 2TF (out) + 4T (p) = 201 MB, plus table reads that hit L1/L2; ~15 instructions per element:
 * memory bound, ~70 us at a ~2.9 TB/s device copy on an H100 SXM.
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (GB/s vs a device copy).
 */
#include "swiglu.h"

#include "math_cuda.cuh"
#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#define SW_TABLE 65537 /* every bf16 pattern, then silu(L) */

struct sw_args {
	const align_bf16 *g, *u; /* [T, F] */
	const float *p;		 /* [T] */
	align_bf16 *y;		 /* [T, F] */
	const float *table;	 /* SW_TABLE silu values (NULL in the serial path) */
	struct swiglu_cfg c;	 /* dims and modes (swiglu_cfg_init) */
	int vec;		 /* 16-byte path */
};

/* silu(g) in binary32 as swiglu.c; exp per MATH_IMPL (portable: the C twin's) */
ALIGN_HD static inline float sw_silu(float g, int mul, int math)
{
	float e = dm_expf(math, hn_neg(g));
	float d = hn_add(1.0f, e);
	return mul ? hn_mul(g, hn_div(1.0f, d)) : hn_div(g, d);
}

/* everything after silu, for one element */
template <bool H> ALIGN_HD static inline float sw_finish_f(const sw_args &a, float s, float u, float q)
{
	if (a.c.clamp)
		u = u < -a.c.L ? -a.c.L : (u > a.c.L ? a.c.L : u);
	float x = hx_mul<H>(s, u);
	return a.c.after ? x : a.c.dbl ? hx_mul<H>(align_round_bf16(x), q) : hx_mul<H>(q, x);
}

/* plain operators; a NaN result is recomputed with the host's NaN rules (the clamp passes NaN) */
ALIGN_HD static inline align_bf16 sw_finish(const sw_args &a, float s, float u, float q)
{
	float o = sw_finish_f<false>(a, s, u, q);
	if (align_isnanf(o))
		o = sw_finish_f<true>(a, s, u, q);
	return align_f32_to_bf16(o);
}

__device__ static inline float sw_lookup(const sw_args &a, align_bf16 gb)
{
	float g = align_bf16_to_f32(gb);
	return a.c.clamp && g > a.c.L ? __ldg(a.table + 65536) : __ldg(a.table + gb);
}

__global__ void swiglu_table_kernel(float *table, float L, int mul, int math)
{
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < SW_TABLE; i += gridDim.x * blockDim.x)
		table[i] = sw_silu(i < 65536 ? align_bf16_to_f32((align_bf16)i) : L, mul, math);
}

__global__ void swiglu_kernel(sw_args a)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x, i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (a.vec) {
		const uint4 *g4 = (const uint4 *)a.g, *u4 = (const uint4 *)a.u;
		for (int64_t c = i0; c < a.c.T * a.c.F / 8; c += stride) {
			int64_t t = c * 8 / a.c.F;
			float pq = __ldg(a.p + t), q = a.c.scale_bf16 ? align_round_bf16(pq) : pq;
			uint4 gv = __ldg(g4 + c), uv = __ldg(u4 + c);
			uint32_t gw[4] = {gv.x, gv.y, gv.z, gv.w};
			float uf[8];
			rows_unpack8(uv, uf);
			align_bf16 h[8];
#pragma unroll
			for (int k = 0; k < 8; k++) {
				align_bf16 gb = (align_bf16)(k & 1 ? gw[k / 2] >> 16 : gw[k / 2] & 0xffffu);
				h[k] = sw_finish(a, sw_lookup(a, gb), uf[k], q);
			}
			((uint4 *)a.y)[c] = rows_pack8(h);
		}
		return;
	}
	for (int64_t i = i0; i < a.c.T * a.c.F; i += stride) {
		int64_t t = i / a.c.F;
		float pq = __ldg(a.p + t), q = a.c.scale_bf16 ? align_round_bf16(pq) : pq;
		a.y[i] = sw_finish(a, sw_lookup(a, a.g[i]), align_bf16_to_f32(a.u[i]), q);
	}
}

/* launch.serial: one thread per row, the loops of swiglu.c, silu computed directly */
__global__ void swiglu_serial_kernel(sw_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		float q = a.c.scale_bf16 ? align_round_bf16(a.p[t]) : a.p[t];
		for (int64_t f = 0; f < a.c.F; f++) {
			int64_t i = t * a.c.F + f;
			float g = align_bf16_to_f32(a.g[i]);
			if (a.c.clamp)
				g = g > a.c.L ? a.c.L : g;
			a.y[i] = sw_finish(a, sw_silu(g, a.c.mul, a.c.math), align_bf16_to_f32(a.u[i]), q);
		}
	}
}

extern "C" int swiglu_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			       struct align_tensor *out, int n_out, const struct align_launch *launch,
			       struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	sw_args a;
	ALIGN_TRY(dev->err, swiglu_cfg_init(&a.c, (const struct swiglu_params *)params, m, in, n_in, out, n_out,
					    ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "swiglu", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("swiglu", "negative launch knob");
	const int64_t T = a.c.T, F = a.c.F;
	a.g = (const align_bf16 *)in[0].data;
	a.u = (const align_bf16 *)in[1].data;
	a.p = (const float *)in[2].data;
	a.y = (align_bf16 *)out[0].data;
	a.table = NULL;
	a.vec = F % 8 == 0 && rows_al16(a.g) && rows_al16(a.u) && rows_al16(a.y);
	if (T <= 0 || F <= 0)
		return ALIGN_OK;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 256, maxb = 0;
	int rc = rows_max_block(L->serial > 0 ? swiglu_serial_kernel : swiglu_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block; /* what the kernel's registers allow */
	if (L->serial > 0) {
		int64_t grid = (T + block - 1) / block;
		if (L->grid_cap > 0 && grid > L->grid_cap)
			grid = L->grid_cap;
		ALIGN_CUDA_LAUNCH(swiglu_serial_kernel, (unsigned)grid, block, 0, stream, a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
		return ALIGN_OK;
	}
	void *table = NULL; /* the shared workspace: stream-ordered, this call's kernels only */
	ALIGN_TRY(dev->err, align_dev_scratch(dev, SW_TABLE * sizeof(float), &table));
	a.table = (const float *)table;
	ALIGN_CUDA_LAUNCH(swiglu_table_kernel, (SW_TABLE + 255) / 256, 256, 0, stream, (float *)table, a.c.L, a.c.mul,
			  a.c.math);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	int64_t work = a.vec ? T * F / 8 : T * F, grid = (work + block - 1) / block;
	int64_t cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (grid > cap)
		grid = cap; /* grid-stride beyond 16 blocks per SM */
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(swiglu_kernel, (unsigned)grid, block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
