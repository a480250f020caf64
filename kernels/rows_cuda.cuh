/* rows_cuda.cuh: shared machinery of the row-wise CUDA twins (rmsnorm, qnorm, swiglu, moe_combine,
 * mhc_post): the launch plan from struct align_launch, row staging in shared memory, and the named
 * reduction orders of reduce.h computed by a group of threads with EXACTLY the association of the C twin.
 *
 * Layout. A block of `block` threads processes rpb rows at once, G = block / rpb threads per row (a
 * multiple of 32). Rows advance by grid-stride so every thread of a block runs the same number of
 * iterations and reaches the same barriers (rows past the end run no loads, stores or arithmetic).
 *
 * Reductions (sum of e(i), e(i) = x(i) or x(i) * x(i), i < n), same bits as reduce.h:
 *   SEQ      thread 0 of the group runs the chain e0 + e1 + ... from shared memory.
 *   F64      thread 0 of the group runs the binary64 chain.
 *   WARP32   warp 0 of the group IS reduce.h's 32 lanes: lane l sums e(l), e(l+32), ... from +0, then
 *            the xor butterfly with __shfl_xor_sync (off = 16 .. 1). Lane l < off computes
 *            v[l] + v[l + off] as in reduce.h; lane 0 only ever reads such values.
 *   PAIRWISE the split "left part = largest power of two strictly below n" is the same tree as
 *            bottom-up adjacent pairs, level by level, an odd last value carried up unchanged (reduce.h).
 *            So: leaves of 8 consecutive elements (a full leaf is ((e0+e1)+(e2+e3))+((e4+e5)+(e6+e7)),
 *            the last, partial leaf is align_reduce_pairwise of its r < 8 elements, the same subtree
 *            because the full part before it has an even count at every level); leaf k is handled by
 *            thread k mod G, and each warp combines its 32 consecutive leaves level by level with
 *            __shfl_down_sync (lane L takes lane L + off when L % 2off == 0 and that lane holds a value:
 *            the carry rule); warp results (aligned groups of 32 leaves) go to shared memory and are
 *            combined 32 at a time the same way until one value is left. Nothing depends on G or on
 *            the pass structure: every value is the sum of the same aligned power-of-two block.
 * NaN: the fast paths use the plain operators; when a sum comes out NaN (NaN-ness does not depend on
 * the NaN payload rules), thread 0 recomputes it with hnr_* (the reduce.h loops with nan_host.h
 * operators) so the payload is the host's.
 *
 * Emulation: tests/gpu/emu compiles these files as C++ with ALIGN_CUDA_EMU (launch through
 * ALIGN_CUDA_LAUNCH, dynamic shared memory through align_cuda_dyn_smem) to run the kernels' logic on a
 * machine without a GPU.
 */
#ifndef ALIGN_ROWS_CUDA_CUH
#define ALIGN_ROWS_CUDA_CUH

#include "ops_cuda.h"

#include "nan_host.h"
#include "reduce.h"

#ifdef ALIGN_CUDA_EMU
#define ALIGN_CUDA_LAUNCH(k, grid, block, smem, stream, ...) align_emu_launch(k, grid, block, smem, stream, __VA_ARGS__)
__device__ static inline unsigned char *align_cuda_dyn_smem(void)
{
	return align_emu_cur()->smem;
}
#else
#define ALIGN_CUDA_LAUNCH(k, grid, block, smem, stream, ...) k<<<grid, block, smem, stream>>>(__VA_ARGS__)
__device__ static inline unsigned char *align_cuda_dyn_smem(void)
{
	extern __shared__ __align__(16) unsigned char align_dyn_smem[];
	return align_dyn_smem;
}
#endif

#define ROWS_FULL_MASK 0xffffffffu
#define ROWS_LEAF 8 /* elements per pairwise leaf: one 16-byte load of bf16 */

/* ---- the reduce.h orders, one thread, with the host's NaN rules (slow path and serial path) ---- */

template <class X> ALIGN_HD static inline float hnr_elt(const X &x, int64_t i, int square)
{
	float v = x(i);
	return square ? hn_mul(v, v) : v;
}

template <class X> ALIGN_HD static inline float hnr_seq(const X &x, int64_t n, int square)
{
	if (n <= 0)
		return 0.0f;
	float s = hnr_elt(x, 0, square);
	for (int64_t i = 1; i < n; i++)
		s = hn_add(s, hnr_elt(x, i, square));
	return s;
}

template <class X> ALIGN_HD static inline float hnr_pairwise(const X &x, int64_t n, int square)
{
	float val[64];
	int64_t cnt[64];
	int top = 0;
	if (n <= 0)
		return 0.0f;
	for (int64_t i = 0; i < n; i++) {
		float v = hnr_elt(x, i, square);
		int64_t c = 1;
		while (top > 0 && cnt[top - 1] == c) {
			v = hn_add(val[top - 1], v);
			c *= 2;
			top--;
		}
		val[top] = v;
		cnt[top] = c;
		top++;
	}
	float s = val[top - 1];
	for (int j = top - 2; j >= 0; j--)
		s = hn_add(val[j], s);
	return s;
}

template <class X> ALIGN_HD static inline float hnr_warp32(const X &x, int64_t n, int square)
{
	float v[32];
	for (int l = 0; l < 32; l++) {
		float s = 0.0f;
		for (int64_t i = l; i < n; i += 32)
			s = hn_add(s, hnr_elt(x, i, square));
		v[l] = s;
	}
	for (int off = 16; off >= 1; off /= 2)
		for (int l = 0; l < off; l++)
			v[l] = hn_add(v[l], v[l + off]);
	return v[0];
}

template <class X> ALIGN_HD static inline float hnr_f64(const X &x, int64_t n, int square)
{
	if (n <= 0)
		return 0.0f;
	double v0 = hn_f2d(x(0));
	double s = square ? hn_muld(v0, v0) : v0;
	for (int64_t i = 1; i < n; i++) {
		double v = hn_f2d(x(i));
		s = hn_addd(s, square ? hn_muld(v, v) : v);
	}
	return hn_d2f(s);
}

/* align_reduce(order, ...) with the host's NaN rules (ALIGN_REDUCE_CHUNKED is not used by these ops) */
template <class X> ALIGN_HD static inline float hnr_reduce(int order, const X &x, int64_t n, int square)
{
	switch (order) {
	case ALIGN_REDUCE_PAIRWISE:
		return hnr_pairwise(x, n, square);
	case ALIGN_REDUCE_WARP32:
		return hnr_warp32(x, n, square);
	case ALIGN_REDUCE_F64:
		return hnr_f64(x, n, square);
	default:
		return hnr_seq(x, n, square);
	}
}

/* ---- element accessors ---- */

/* Accessors give x(i); rows_reduce also calls x.load8(i0, e), e[q] = x(i0 + q) for a full leaf (i0 a
 * multiple of 8), which may use one vector load. */

/* bf16 row read as binary32; load8 needs p 16-byte aligned (rows staged in shared memory are) */
struct rows_bf16_row {
	const align_bf16 *p;
	ALIGN_HD float operator()(int64_t i) const { return align_bf16_to_f32(p[i]); }
	__device__ void load8(int64_t i0, float e[8]) const;
};

/* ---- binary32 operators: plain (fast path) or with the host's NaN bits (H = true) ---- */

/* The emulator gives the fast paths the GPU's canonical NaN (0x7fffffff), so that the tests run the
 * NaN recompute paths on the host as they run on a GPU. */
#ifdef ALIGN_CUDA_EMU
ALIGN_HD static inline float hx_gpu(float r)
{
	return align_isnanf(r) ? align_bits_f32(0x7fffffffu) : r;
}
#else
#define hx_gpu(r) (r)
#endif

template <bool H> ALIGN_HD static inline float hx_add(float a, float b)
{
	return H ? hn_add(a, b) : hx_gpu(a + b);
}

template <bool H> ALIGN_HD static inline float hx_sub(float a, float b)
{
	return H ? hn_sub(a, b) : hx_gpu(a - b);
}

template <bool H> ALIGN_HD static inline float hx_mul(float a, float b)
{
	return H ? hn_mul(a, b) : hx_gpu(a * b);
}

template <bool H> ALIGN_HD static inline float hx_div(float a, float b)
{
	return H ? hn_div(a, b) : hx_gpu(a / b);
}

#define FX_ADD(a, b) hx_add<false>(a, b) /* fast-path + */
#define FX_MUL(a, b) hx_mul<false>(a, b) /* fast-path * */

/* ---- block geometry and the launch plan ---- */

struct rows_geom {
	int G;  /* threads per row: a multiple of 32 */
	int g;  /* row slot of this thread in the block */
	int gt; /* index of this thread in its row group */
};

__device__ static inline rows_geom rows_geom_make(int rpb)
{
	rows_geom r;
	r.G = (int)blockDim.x / rpb;
	r.g = (int)threadIdx.x / r.G;
	r.gt = (int)threadIdx.x % r.G;
	return r;
}

/* floats of per-row scratch for rows_reduce over n elements (16-byte multiple) */
ALIGN_HD static inline int64_t rows_scratch_floats(int64_t n)
{
	int64_t nl = (n + ROWS_LEAF - 1) / ROWS_LEAF, ng = (nl + 31) / 32;
	return (4 + ng + (ng + 31) / 32 + 3) / 4 * 4;
}

struct rows_plan {
	int serial;  /* 1: one thread per row (launch.serial, or a row too long for shared memory) */
	int G;       /* threads per row */
	int rpb;     /* rows per block */
	int block;   /* threads per block = G * rpb (serial: threads per block) */
	int grid;    /* blocks */
	size_t smem; /* dynamic shared memory bytes per block */
};

/* Threads per block `kernel` can be launched with (its registers allow it), a multiple of 32, in *n. 0 or 3. */
template <class K> static inline int rows_max_block(K kernel, int *n)
{
	struct cudaFuncAttributes fa;
	OPS_CUDA_TRY(cudaFuncGetAttributes(&fa, kernel));
	*n = fa.maxThreadsPerBlock / 32 * 32;
	if (*n < 32)
		*n = 32;
	return ALIGN_OK;
}

/* Plan a row-wise launch: `rows` rows needing `row_smem` bytes of shared memory each. Knobs (0 =
 * default): G = block / rows_per_block rounded up to a multiple of 32 (at least 32, at most max_rows:
 * the row kernel's threads-per-block limit), rows_per_block lowered until G * rpb <= max_rows and
 * rpb * row_smem fits the device's opt-in shared memory; a row that does not fit alone runs the serial
 * path (at most max_serial threads per block). grid = ceil(rows / rpb), capped by grid_cap
 * (grid-stride loops cover the rest). Returns 0, 2 (negative knob) or 3 (CUDA query failed). */
static inline int rows_plan_make(const char *op, const struct align_launch *L, int64_t rows, size_t row_smem, int def_G,
                                 int def_rpb, int max_rows, int max_serial, struct rows_plan *p)
{
	struct align_launch none = {0, 0, 0, 0};
	if (!L)
		L = &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input(op, "negative launch knob");
	int dev = 0, optin = 0;
	OPS_CUDA_TRY(cudaGetDevice(&dev));
	OPS_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
	p->serial = L->serial > 0 || row_smem > (size_t)optin;
	int64_t blocks;
	if (p->serial) {
		p->G = 1;
		p->rpb = 1;
		p->block = L->block > 0 ? (L->block + 31) / 32 * 32 : 128;
		p->block = p->block > max_serial ? max_serial : p->block;
		p->smem = 0;
		blocks = (rows + p->block - 1) / p->block;
	} else {
		int rpb = L->rows_per_block > 0 ? L->rows_per_block : def_rpb;
		int block = L->block > 0 ? L->block : def_G * rpb;
		int G = (block / rpb + 31) / 32 * 32;
		G = G < 32 ? 32 : G > max_rows ? max_rows : G;
		if (rpb > max_rows / G)
			rpb = max_rows / G;
		while (rpb > 1 && (size_t)rpb * row_smem > (size_t)optin)
			rpb--;
		p->G = G;
		p->rpb = rpb;
		p->block = G * rpb;
		p->smem = (size_t)rpb * row_smem;
		blocks = (rows + rpb - 1) / rpb;
	}
	if (L->grid_cap > 0 && blocks > L->grid_cap)
		blocks = L->grid_cap;
	if (blocks > 0x7fffffff)
		blocks = 0x7fffffff;
	p->grid = (int)(blocks > 0 ? blocks : 0);
	return ALIGN_OK;
}

/* ---- block-level pieces (every thread of the block calls them: barriers inside) ---- */

/* Copy n bf16 of a row to shared memory (dst 16-byte aligned): 16-byte loads when src is aligned. */
__device__ static inline void rows_stage_bf16(align_bf16 *dst, const align_bf16 *src, int64_t n, const rows_geom &rg)
{
	if (((uintptr_t)src & 15u) == 0) {
		const uint4 *s4 = (const uint4 *)src;
		uint4 *d4 = (uint4 *)dst;
		int64_t nv = n / 8, c = rg.gt, G = rg.G;
		for (; c + 7 * G < nv; c += 8 * G) { /* 8 loads in flight per thread */
			uint4 v[8];
#pragma unroll
			for (int q = 0; q < 8; q++)
				v[q] = __ldg(s4 + c + q * G);
#pragma unroll
			for (int q = 0; q < 8; q++)
				d4[c + q * G] = v[q];
		}
		for (; c < nv; c += G)
			d4[c] = __ldg(s4 + c);
		for (int64_t i = nv * 8 + rg.gt; i < n; i += G)
			dst[i] = __ldg(src + i);
	} else {
		for (int64_t i = rg.gt; i < n; i += rg.G)
			dst[i] = __ldg(src + i);
	}
}

/* Leaf k of the pairwise tree: elements [8k, min(8k + 8, n)). */
template <class X> __device__ static inline float rows_leaf(const X &x, int64_t k, int64_t n, int square)
{
	int64_t i0 = k * ROWS_LEAF;
	float e[ROWS_LEAF];
	if (i0 + ROWS_LEAF <= n) {
		x.load8(i0, e);
		if (square)
#pragma unroll
			for (int i = 0; i < ROWS_LEAF; i++)
				e[i] = FX_MUL(e[i], e[i]);
		return FX_ADD(FX_ADD(FX_ADD(e[0], e[1]), FX_ADD(e[2], e[3])),
		              FX_ADD(FX_ADD(e[4], e[5]), FX_ADD(e[6], e[7])));
	}
	int r = (int)(n - i0);
	for (int i = 0; i < r; i++)
		e[i] = x(i0 + i);
	return hx_gpu(align_reduce_pairwise(e, r, 1, square));
}

/* Level-by-level adjacent pairs with carry over the cnt (>= 1) values held by lanes 0..cnt-1; the
 * result is in lane 0. Every lane of the warp must call it. */
__device__ static inline float rows_warp_tree(float v, int lane, int64_t cnt)
{
#pragma unroll
	for (int off = 1; off < 32; off <<= 1) {
		float o = __shfl_down_sync(ROWS_FULL_MASK, v, off);
		if ((lane & (2 * off - 1)) == 0 && lane + off < cnt)
			v = FX_ADD(v, o);
	}
	return v;
}

template <class X>
__device__ static inline float rows_pairwise(const X &x, int64_t n, int square, float *scr, const rows_geom &rg,
                                             bool valid)
{
	const int64_t nl = (n + ROWS_LEAF - 1) / ROWS_LEAF, ng = (nl + 31) / 32;
	float *src = scr + 4, *dst = src + ng;
	const int lane = rg.gt & 31;
	for (int64_t base = 0; base < nl; base += rg.G) {
		int64_t wbase = base + (rg.gt - lane), cnt = nl - wbase;
		if (valid && cnt > 0) {
			float v = lane < cnt ? rows_leaf(x, wbase + lane, n, square) : 0.0f;
			v = rows_warp_tree(v, lane, cnt);
			if (lane == 0)
				src[wbase / 32] = v;
		}
	}
	__syncthreads();
	for (int64_t c = ng; c > 1; c = (c + 31) / 32) {
		for (int64_t base = 0; base < c; base += rg.G) {
			int64_t wbase = base + (rg.gt - lane), cnt = c - wbase;
			if (valid && cnt > 0) {
				float v = lane < cnt ? src[wbase + lane] : 0.0f;
				v = rows_warp_tree(v, lane, cnt);
				if (lane == 0)
					dst[wbase / 32] = v;
			}
		}
		__syncthreads();
		float *t = src;
		src = dst;
		dst = t;
	}
	if (valid && rg.gt == 0) {
		float s = src[0];
		if (align_isnanf(s))
			s = hnr_pairwise(x, n, square);
		scr[0] = s;
	}
	__syncthreads();
	return scr[0];
}

template <class X>
__device__ static inline float rows_warp32(const X &x, int64_t n, int square, float *scr, const rows_geom &rg,
                                           bool valid)
{
	if (valid && rg.gt < 32) {
		float s = 0.0f;
		for (int64_t i = rg.gt; i < n; i += 32) {
			float v = x(i);
			s = FX_ADD(s, square ? FX_MUL(v, v) : v);
		}
#pragma unroll
		for (int off = 16; off >= 1; off >>= 1)
			s = FX_ADD(s, __shfl_xor_sync(ROWS_FULL_MASK, s, off));
		if (rg.gt == 0) {
			if (align_isnanf(s))
				s = hnr_warp32(x, n, square);
			scr[0] = s;
		}
	}
	__syncthreads();
	return scr[0];
}

template <class X>
__device__ static inline float rows_serial_order(int order, const X &x, int64_t n, int square, float *scr,
                                                 const rows_geom &rg, bool valid)
{
	if (valid && rg.gt == 0) {
		float r;
		if (order == ALIGN_REDUCE_F64) {
			double v0 = (double)x(0);
			double s = square ? v0 * v0 : v0;
			for (int64_t i = 1; i < n; i++) {
				double v = (double)x(i);
				s += square ? v * v : v;
			}
			r = hx_gpu((float)s);
		} else {
			float v0 = x(0);
			r = square ? FX_MUL(v0, v0) : v0;
			for (int64_t i = 1; i < n; i++) {
				float v = x(i);
				r = FX_ADD(r, square ? FX_MUL(v, v) : v);
			}
		}
		if (align_isnanf(r))
			r = hnr_reduce(order, x, n, square);
		scr[0] = r;
	}
	__syncthreads();
	return scr[0];
}

/* align_reduce(order, e, n, 1, 0, square) for the group's row, n >= 1; returned to every thread of the
 * group (unspecified when !valid). scr: rows_scratch_floats(n) floats of this row group; it may be
 * reused after the next __syncthreads. */
template <class X>
__device__ static inline float rows_reduce(int order, const X &x, int64_t n, int square, float *scr,
                                           const rows_geom &rg, bool valid)
{
	if (order == ALIGN_REDUCE_PAIRWISE)
		return rows_pairwise(x, n, square, scr, rg, valid);
	if (order == ALIGN_REDUCE_WARP32)
		return rows_warp32(x, n, square, scr, rg, valid);
	return rows_serial_order(order, x, n, square, scr, rg, valid);
}

/* ---- bf16 vectors ---- */

__device__ static inline void rows_unpack8(uint4 v, float f[8])
{
	uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
		f[2 * i] = align_bf16_to_f32((align_bf16)(w[i] & 0xffffu));
		f[2 * i + 1] = align_bf16_to_f32((align_bf16)(w[i] >> 16));
	}
}

__device__ static inline uint4 rows_pack8(const align_bf16 h[8])
{
	uint4 v;
	v.x = (uint32_t)h[0] | (uint32_t)h[1] << 16;
	v.y = (uint32_t)h[2] | (uint32_t)h[3] << 16;
	v.z = (uint32_t)h[4] | (uint32_t)h[5] << 16;
	v.w = (uint32_t)h[6] | (uint32_t)h[7] << 16;
	return v;
}

__device__ inline void rows_bf16_row::load8(int64_t i0, float e[8]) const
{
	rows_unpack8(*(const uint4 *)(p + i0), e);
}

/* 16-byte aligned? */
ALIGN_HD static inline int rows_al16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

/* Raise the kernel's dynamic shared memory limit when a launch needs more than the 48 KiB default. */
template <class K> static inline cudaError_t rows_smem_optin(K kernel, size_t smem)
{
	if (smem <= 48 * 1024)
		return cudaSuccess;
	return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

#endif /* ALIGN_ROWS_CUDA_CUH */
