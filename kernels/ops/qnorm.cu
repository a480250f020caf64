/* qnorm.cu: CUDA twin of the weightless per-head Q RMSNorm (contract: qnorm.h; specification: qnorm.c).
 * q[T,H,D] bf16 -> y[T,H,D] bf16 (f32 for QNORM_MODE=fp32_out), the C twin's bytes in every portable mode;
 * shapes and modes come from qnorm_cfg_init (qnorm.c), shared with the C twin.
 *
 * Each of the T*H rows of D elements, as qnorm.c (x = F(q)):
 *   bf16_eager: ss = align_reduce(order, R(x*x)) (the rounded squares are the summands, square = 0);
 *               ms = R(ss / D); a = R(ms + eps); r = R(rsqrt(a)); y = R(x * r)
 *   otherwise:  ss = align_reduce(order, x*x); r = rsqrt(ss / D + eps); factor_bf16: r = R(r);
 *               y = R(x * r), or x * r as f32 for fp32_out.
 * The reduction keeps reduce.h's association on a block (rows_cuda.cuh); every binary32 operation is the
 * C twin's, unfused, through nan_host.h where a NaN can appear.
 *
 * Layout (rows_cuda.cuh; knobs: block, rows_per_block, grid_cap, serial): G threads per row (default 32:
 * one warp), rpb rows per block (default 8). When D % 8 == 0, q and y 16-byte aligned and the row fits
 * LPT = ceil(D / 8 / G) <= 8 chunks per thread, the registers layout: the row's 16-byte loads are all
 * issued at once into registers, reduced from there and normalised from the same registers (16-byte
 * bf16 stores, 2 x 16-byte f32 stores); with G = 32 a row needs no block barrier at all (warp shuffles;
 * the chain orders stage the row in the warp's shared memory behind a __syncwarp). Otherwise the staged
 * layout (the row copied to shared memory). launch.serial runs one thread per row through the C loops.
 * RMSNORM_RSQRT=cuda calls CUDA's rsqrtf (GPU only, rows_rsqrt).
 *
 * Napkin maths (DSv4-Flash q: H = 64 heads of D = 512; T = 4096 tokens for the benchmark): bytes =
 * 2THD in + 2THD out (4THD for fp32_out) = 537 MB (805 MB); ~5 FLOPs per element: memory bound,
 * ~180 us at a ~3.0 TB/s device copy on an H100 SXM. Default G = 32: 2 chunks (32 bytes) per thread in
 * flight, 1 KB per row, ~48 registers -> up to 40 warps (rows) per SM, ~40 KB in flight per SM, and no
 * block barrier couples the 8 rows of a block (the old layout: 3 block barriers per row for pairwise).
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (GB/s vs a device copy).
 */
#include "qnorm.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#define QN_DEF_G 32  /* default threads per row: one warp, no block barrier (registers layout, D <= 2048) */
#define QN_DEF_RPB 8 /* default rows per block */

struct qn_args {
	const align_bf16 *q; /* [R, D], R = T*H */
	void *y;	     /* [R, D] bf16, or f32 for fp32_out */
	struct qnorm_cfg c;  /* dims and modes (qnorm_cfg_init) */
	int rpb;	     /* rows per block */
	int vec;	     /* 16-byte stores: D % 8 == 0 and y 16-byte aligned */
	int regs;	     /* registers layout possible: vec and q 16-byte aligned */
	int64_t row_elems;   /* shared-memory row stride in elements */
	int64_t scr_floats;  /* scratch floats per row */
};

/* bf16_eager summands: R(x * x) */
struct qn_sq_row {
	const align_bf16 *p;
	ALIGN_HD float operator()(int64_t i) const
	{
		float x = align_bf16_to_f32(p[i]);
		return align_round_bf16(hn_mul(x, x));
	}
	__device__ void unpack8(const uint4 &v, float e[8]) const
	{
		rows_unpack8(v, e);
#pragma unroll
		for (int q = 0; q < 8; q++)
			e[q] = align_round_bf16(hn_mul(e[q], e[q]));
	}
	__device__ void load8(int64_t i0, float e[8]) const
	{
		unpack8(*(const uint4 *)(p + i0), e);
	}
};

/* dynamic shared memory per row: scratch, then the row (staged layout, or registers layout with a
 * chain order); 16-byte multiple */
ALIGN_HD static inline size_t qn_row_smem(const qn_args &a, int regs)
{
	int row = !regs || a.c.f.order != ALIGN_REDUCE_PAIRWISE;
	return (size_t)(a.scr_floats * 4 + (row ? a.row_elems * 2 : 0));
}

/* the factor r from the row's sum ss */
__device__ static inline float qn_factor(const qn_args &a, float ss)
{
	if (a.c.mode == ALIGN_QNORM_MODE_BF16_EAGER) {
		float ms = align_round_bf16(hn_div(ss, (float)a.c.D));
		float s = align_round_bf16(hn_add(ms, a.c.f.eps));
		return align_round_bf16(rows_rsqrt(a.c.f.rsqrt, s));
	}
	float r = rows_rsqrt(a.c.f.rsqrt, hn_add(hn_div(ss, (float)a.c.D), a.c.f.eps));
	return a.c.mode == ALIGN_QNORM_MODE_FACTOR_BF16 ? align_round_bf16(r) : r;
}

/* x * r, with the host's NaN bits */
__device__ static inline float qn_mul(float x, float r)
{
	float o = FX_MUL(x, r);
	return align_isnanf(o) ? hn_mul(x, r) : o;
}

__device__ static inline float qn_sum(const qn_args &a, const align_bf16 *row, float *scr, const rows_geom &rg,
				      bool valid)
{
	if (a.c.mode == ALIGN_QNORM_MODE_BF16_EAGER) {
		qn_sq_row e = {row};
		return rows_reduce(a.c.f.order, e, a.c.D, 0, scr, rg, valid);
	}
	rows_bf16_row x = {row};
	return rows_reduce(a.c.f.order, x, a.c.D, 1, scr, rg, valid);
}

/* chunk c (8 elements, raw bf16 in xv) of row `row`, 16-byte stores */
__device__ static inline void qn_store_chunk(const qn_args &a, const uint4 &xv, int64_t row, int64_t c, float r)
{
	float xf[8], o[8];
	rows_unpack8(xv, xf);
#pragma unroll
	for (int i = 0; i < 8; i++)
		o[i] = qn_mul(xf[i], r);
	if (a.c.mode == ALIGN_QNORM_MODE_FP32_OUT) {
		float4 *y4 = (float4 *)((float *)a.y + row * a.c.D) + 2 * c;
		y4[0] = make_float4(o[0], o[1], o[2], o[3]);
		y4[1] = make_float4(o[4], o[5], o[6], o[7]);
	} else {
		align_bf16 h[8];
#pragma unroll
		for (int i = 0; i < 8; i++)
			h[i] = align_f32_to_bf16(o[i]);
		((uint4 *)((align_bf16 *)a.y + row * a.c.D))[c] = rows_pack8(h);
	}
}

__device__ static inline void qn_store_row(const qn_args &a, const align_bf16 *xs, int64_t row, float r,
					   const rows_geom &rg)
{
	if (a.vec) {
		for (int64_t c = rg.gt; c < a.c.D / 8; c += rg.G)
			qn_store_chunk(a, ((const uint4 *)xs)[c], row, c, r);
		return;
	}
	int f32 = a.c.mode == ALIGN_QNORM_MODE_FP32_OUT;
	for (int64_t j = rg.gt; j < a.c.D; j += rg.G) {
		float o = qn_mul(align_bf16_to_f32(xs[j]), r);
		if (f32)
			((float *)a.y)[row * a.c.D + j] = o;
		else
			((align_bf16 *)a.y)[row * a.c.D + j] = align_f32_to_bf16(o);
	}
}

/* staged layout: the row in shared memory */
__global__ void qnorm_rows_kernel(qn_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	unsigned char *sm = align_cuda_dyn_smem() + (size_t)rg.g * qn_row_smem(a, 0);
	float *scr = (float *)sm;
	align_bf16 *xs = (align_bf16 *)(sm + a.scr_floats * 4);
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.c.R; r0 += (int64_t)gridDim.x * a.rpb) {
		int64_t row = r0 + rg.g;
		bool valid = row < a.c.R;
		if (valid)
			rows_stage_bf16(xs, a.q + row * a.c.D, a.c.D, rg);
		__syncthreads();
		float ss = qn_sum(a, xs, scr, rg, valid);
		if (valid)
			qn_store_row(a, xs, row, qn_factor(a, ss), rg);
		__syncthreads();
	}
}

/* registers layout: thread gt holds chunks gt + m G (m < LPT) of its row; the second pass reads them */
template <int LPT> __global__ void qnorm_regs_kernel(qn_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	unsigned char *sm = align_cuda_dyn_smem() + (size_t)rg.g * qn_row_smem(a, 1);
	float *scr = (float *)sm;
	align_bf16 *xs = (align_bf16 *)(sm + a.scr_floats * 4);
	const int64_t nch = a.c.D / 8;
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.c.R; r0 += (int64_t)gridDim.x * a.rpb) {
		int64_t row = r0 + rg.g;
		bool valid = row < a.c.R;
		const align_bf16 *qr = a.q + (valid ? row : 0) * a.c.D;
		uint4 v[LPT];
		rows_regs_load<LPT>(v, qr, nch, rg, valid);
		float ss;
		if (a.c.mode == ALIGN_QNORM_MODE_BF16_EAGER) {
			qn_sq_row e = {qr};
			ss = rows_regs_sum<LPT>(a.c.f.order, v, e, a.c.D, 0, scr, xs, rg, valid);
		} else {
			rows_bf16_row x = {qr};
			ss = rows_regs_sum<LPT>(a.c.f.order, v, x, a.c.D, 1, scr, xs, rg, valid);
		}
		if (!valid)
			continue;
		float r = qn_factor(a, ss);
#pragma unroll
		for (int m = 0; m < LPT; m++) {
			int64_t c = rg.gt + (int64_t)m * rg.G;
			if (c < nch)
				qn_store_chunk(a, v[m], row, c, r);
		}
	}
}

/* launch.serial: one thread per row, the loops of qnorm.c */
__global__ void qnorm_serial_kernel(qn_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.R;
	     t += (int64_t)gridDim.x * blockDim.x) {
		const align_bf16 *row = a.q + t * a.c.D;
		float ss;
		if (a.c.mode == ALIGN_QNORM_MODE_BF16_EAGER) {
			qn_sq_row e = {row};
			ss = hnr_reduce(a.c.f.order, e, a.c.D, 0);
		} else {
			rows_bf16_row x = {row};
			ss = hnr_reduce(a.c.f.order, x, a.c.D, 1);
		}
		float r = qn_factor(a, ss);
		for (int64_t j = 0; j < a.c.D; j++) {
			float o = qn_mul(align_bf16_to_f32(row[j]), r);
			if (a.c.mode == ALIGN_QNORM_MODE_FP32_OUT)
				((float *)a.y)[t * a.c.D + j] = o;
			else
				((align_bf16 *)a.y)[t * a.c.D + j] = align_f32_to_bf16(o);
		}
	}
}

/* rows_op.pick: the registers layout when the row fits LPT <= ROWS_MAX_LPT chunks per thread */
static void qn_pick(const qn_args &a, int G, void (**k)(qn_args), size_t *row_smem)
{
	int lpt = a.regs ? rows_regs_lpt(a.c.D, G) : 0;
	*k = lpt == 1	? qnorm_regs_kernel<1>
	     : lpt == 2 ? qnorm_regs_kernel<2>
	     : lpt == 4 ? qnorm_regs_kernel<4>
	     : lpt == 8 ? qnorm_regs_kernel<8>
			: qnorm_rows_kernel;
	*row_smem = qn_row_smem(a, lpt != 0);
}

extern "C" int qnorm_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			      struct align_tensor *out, int n_out, const struct align_launch *launch,
			      struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	qn_args a;
	ALIGN_TRY(dev->err, qnorm_cfg_init(&a.c, (const struct qnorm_params *)params, m, in, n_in, out, n_out,
					   ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "qnorm", in, n_in, out, n_out));
	const int64_t D = a.c.D;
	a.q = (const align_bf16 *)in[0].data;
	a.y = out[0].data;
	a.rpb = 1;
	a.vec = D % 8 == 0 && rows_al16(a.y);
	a.regs = a.vec && rows_al16(a.q);
	a.row_elems = (D + 7) / 8 * 8;
	a.scr_floats = rows_scratch_floats(D);
	if (a.c.R <= 0 || D <= 0)
		return ALIGN_OK;
	const rows_op<qn_args> op = {"qnorm", a.c.R, QN_DEF_G, QN_DEF_RPB, qnorm_serial_kernel, qn_pick};
	return rows_launch(op, launch, a, stream);
}
