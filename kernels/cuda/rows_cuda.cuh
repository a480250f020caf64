/* rows_cuda.cuh: shared machinery of the row-wise CUDA twins (rmsnorm, qnorm, swiglu, moe_combine,
 * mhc_post): the launch plan from struct align_launch, row staging in shared memory, and the named
 * reduction orders of reduce.h computed by a group of threads with EXACTLY the association of the C twin.
 *
 * Layout. A block of `block` threads processes rpb rows at once, G = block / rpb threads per row (a
 * multiple of 32, W = G / 32 warps per row). Rows advance by grid-stride so every thread of a block runs
 * the same number of iterations and reaches the same barriers (rows past the end run no loads, stores or
 * arithmetic). Two ways to hold a bf16 row of n elements (n % 8 == 0 for the second):
 *   staged     rows_stage_bf16 copies the row to shared memory (8 16-byte loads in flight per thread),
 *              the reduction and the second pass read it there. Any n, any alignment.
 *   registers  rows_regs_load: thread gt of the group holds chunks (8 elements, one 16-byte load) gt,
 *              gt + G, ..., gt + (LPT-1) G in registers, every load of the row issued before any use
 *              (LPT = ceil(n / 8 / G) <= ROWS_MAX_LPT, a template parameter); rows_regs_sum reduces
 *              from the registers (pairwise: no shared-memory copy of the row; other orders: the chunks
 *              are stored to shared memory for the one thread or warp that runs the chain) and the
 *              second pass reads the registers. With W = 1 (G = 32) a row never touches a block
 *              barrier: warp shuffles and __syncwarp only, so the warps of a block run freely.
 * rows_launch plans a launch from struct align_launch (rows_plan_make), asks the op for the rows kernel
 * that fits G (its `pick`), caps G by the kernel's register limit, opts in to the shared memory it needs
 * and launches; launch.serial (or a row too long for shared memory) runs the op's serial kernel.
 *
 * Reductions (sum of e(i), e(i) = x(i) or x(i) * x(i), i < n), same bits as reduce.h:
 *   SEQ      thread 0 of the group runs the chain e0 + e1 + ... from shared memory.
 *   F64      thread 0 of the group runs the binary64 chain.
 *   WARP32   warp 0 of the group IS reduce.h's 32 lanes: lane l sums e(l), e(l+32), ... from +0, then
 *            the xor butterfly with __shfl_xor_sync (off = 16 .. 1). Lane l < off computes
 *            v[l] + v[l + off] as in reduce.h; lane 0 only ever reads such values.
 *            From registers with W = 1 the chain, butterfly and broadcast are warp-synchronous.
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
 *            From registers: chunk c is leaf c; the warp holding leaves [32 q, 32 q + 32) (q = m W + w
 *            for warp w at step m) reduces them to group value q. W = 1: lane 0 holds all the group
 *            values (q = m) and combines them with the same carry rule in registers (rows_small_tree);
 *            W > 1: they go to shared memory and warp 0 of the group combines them (one block barrier
 *            before, one after, for n <= 8192).
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
#include "rmsnorm.h" /* rmsnorm_rsqrt, for rows_rsqrt */

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

#ifdef ALIGN_CUDA_EMU
#define ROWS_NOINLINE __attribute__((noinline))
#else
#define ROWS_NOINLINE __noinline__
#endif
/* ROWS_NOINLINE: the NaN recompute paths are out of line, so that the unrolled fast paths stay small
 * and light on registers */

#define ROWS_FULL_MASK 0xffffffffu
#define ROWS_LEAF 8    /* elements per pairwise leaf: one 16-byte load of bf16 */
#define ROWS_MAX_LPT 8 /* most 16-byte chunks a thread holds in registers (registers layout) */

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
	case ALIGN_REDUCE_TORCH:
		return align_bits_f32(0x7fc00000u); /* torch_rowsum's (torch_order.h): never reached here */
	default:
		return hnr_seq(x, n, square);
	}
}

/* ---- element accessors ---- */

/* Accessors give x(i); rows_reduce also calls x.load8(i0, e), e[q] = x(i0 + q) for a full leaf (i0 a
 * multiple of 8), which may use one vector load. */

/* bf16 row read as binary32; load8 needs p 16-byte aligned (rows staged in shared memory are).
 * unpack8(v, e): e[q] = the accessor's value of element q of the 8 raw bf16 in v (the registers layout
 * reads chunks itself and asks the accessor what they mean). */
struct rows_bf16_row {
	const align_bf16 *p;
	ALIGN_HD float operator()(int64_t i) const
	{
		return align_bf16_to_f32(p[i]);
	}
	__device__ void load8(int64_t i0, float e[8]) const;
	__device__ void unpack8(const uint4 &v, float e[8]) const;
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
	int G;	/* threads per row: a multiple of 32 */
	int g;	/* row slot of this thread in the block */
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
	int G;	     /* threads per row */
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

/* What rows_launch needs from a row-wise op; A is the kernels' argument struct (it has an int field rpb). */
template <class A> struct rows_op {
	const char *name;   /* op name for messages */
	int64_t rows;	    /* rows (tokens, heads) */
	int def_G, def_rpb; /* defaults: threads per row, rows per block */
	void (*serial)(A);  /* launch.serial: one thread per row, the C twin's loops */
	/* the rows kernel for G threads per row, and the dynamic shared memory it needs per row (bytes) */
	void (*pick)(const A &a, int G, void (**k)(A), size_t *row_smem);
};

/* Plan a row-wise launch. Knobs (0 = default): G = block / rows_per_block rounded up to a multiple of 32
 * (at least 32, at most what the picked kernel's registers allow: the kernel is picked again for the
 * capped G), rows_per_block lowered until G * rpb fits the kernel and rpb rows of shared memory fit the
 * device's opt-in limit; a row that does not fit alone runs the serial kernel (at most as many threads
 * per block as its registers allow; block knob, default 128). grid = ceil(rows / rpb), capped by
 * grid_cap (grid-stride loops cover the rest). *k: the kernel to launch. Returns 0, 2 (negative knob)
 * or 3 (CUDA query failed). */
template <class A>
static inline int rows_plan_make(const rows_op<A> &op, const struct align_launch *L, const A &a, struct rows_plan *p,
				 void (**k)(A))
{
	struct align_launch none = {0, 0, 0, 0};
	if (!L)
		L = &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input(op.name, "negative launch knob");
	int dev = 0, optin = 0, rc;
	OPS_CUDA_TRY(cudaGetDevice(&dev));
	OPS_CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
	p->serial = L->serial > 0;
	int64_t blocks = 0;
	if (!p->serial) {
		int rpb = L->rows_per_block > 0 ? L->rows_per_block : op.def_rpb;
		int block = L->block > 0 ? L->block : op.def_G * rpb;
		int G = (block / rpb + 31) / 32 * 32, mr = 0;
		G = G < 32 ? 32 : G > 1024 ? 1024 : G;
		size_t rs = 0;
		for (;;) { /* G only decreases, and mr >= 32 */
			op.pick(a, G, k, &rs);
			if ((rc = rows_max_block(*k, &mr)) != 0)
				return rc;
			if (G <= mr)
				break;
			G = mr;
		}
		if (rs > (size_t)optin) {
			p->serial = 1;
		} else {
			if (rpb > mr / G)
				rpb = mr / G;
			while (rpb > 1 && (size_t)rpb * rs > (size_t)optin)
				rpb--;
			p->G = G;
			p->rpb = rpb;
			p->block = G * rpb;
			p->smem = (size_t)rpb * rs;
			blocks = (op.rows + rpb - 1) / rpb;
		}
	}
	if (p->serial) {
		int ms = 0;
		if ((rc = rows_max_block(op.serial, &ms)) != 0)
			return rc;
		*k = op.serial;
		p->G = 1;
		p->rpb = 1;
		p->block = L->block > 0 ? (L->block + 31) / 32 * 32 : 128;
		p->block = p->block > ms ? ms : p->block;
		p->smem = 0;
		blocks = (op.rows + p->block - 1) / p->block;
	}
	if (L->grid_cap > 0 && blocks > L->grid_cap)
		blocks = L->grid_cap;
	if (blocks > 0x7fffffff)
		blocks = 0x7fffffff;
	p->grid = (int)(blocks > 0 ? blocks : 0);
	return ALIGN_OK;
}

/* Raise the kernel's dynamic shared memory limit when a launch needs more than the 48 KiB default. */
template <class K> static inline cudaError_t rows_smem_optin(K kernel, size_t smem)
{
	if (smem <= 48 * 1024)
		return cudaSuccess;
	return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

/* The launch block every row-wise twin shares: plan (rows_plan_make), set a.rpb, opt in to the shared
 * memory, launch the picked kernel (or the serial one) on `stream`, check the launch. 0, 2 or 3. */
template <class A>
static inline int rows_launch(const rows_op<A> &op, const struct align_launch *L, A &a, cudaStream_t stream)
{
	struct rows_plan p = {0, 0, 0, 0, 0, 0};
	void (*k)(A) = NULL;
	int rc = rows_plan_make(op, L, a, &p, &k);
	if (rc)
		return rc;
	a.rpb = p.rpb;
	if (p.grid == 0)
		return ALIGN_OK;
	OPS_CUDA_TRY(rows_smem_optin(k, p.smem));
	ALIGN_CUDA_LAUNCH(k, p.grid, p.block, p.smem, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
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

/* Phase 1 of the pairwise tree from an accessor: leaves -> warp trees -> group value q (aligned block of
 * 32 leaves) in src[q]. No barrier. */
template <class X>
__device__ static inline void rows_pairwise_groups(const X &x, int64_t n, int square, float *src, const rows_geom &rg,
						   bool valid)
{
	const int64_t nl = (n + ROWS_LEAF - 1) / ROWS_LEAF;
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
}

/* Top of the pairwise tree: the group values src = scr + 4 (written before a barrier the caller ran)
 * combined into one value, NaN recomputed from x with the host's rules, returned to every thread of the
 * group. ng <= 32 (n <= 8192): warp 0 of the group, one barrier; more: 32 at a time, a barrier per level. */
template <class X>
__device__ static inline float rows_pairwise_top(const X &x, int64_t n, int square, float *scr, const rows_geom &rg,
						 bool valid)
{
	const int64_t nl = (n + ROWS_LEAF - 1) / ROWS_LEAF, ng = (nl + 31) / 32;
	float *src = scr + 4, *dst = src + ng;
	const int lane = rg.gt & 31;
	if (ng <= 32) {
		if (valid && rg.gt < 32) {
			float v = lane < ng ? src[lane] : 0.0f;
			v = rows_warp_tree(v, lane, ng);
			if (lane == 0) {
				if (align_isnanf(v))
					v = hnr_pairwise(x, n, square);
				scr[0] = v;
			}
		}
		__syncthreads();
		return scr[0];
	}
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
__device__ static inline float rows_pairwise(const X &x, int64_t n, int square, float *scr, const rows_geom &rg,
					     bool valid)
{
	rows_pairwise_groups(x, n, square, scr + 4, rg, valid);
	__syncthreads();
	return rows_pairwise_top(x, n, square, scr, rg, valid);
}

/* reduce.h's warp32 for one warp (lane = its lane): lane chains of e(lane), e(lane + 32), ... from +0
 * (8 loads issued before their 8 adds, the adds in chain order), then the xor butterfly; every lane
 * returns the result (fast-path NaN bits). Every lane of the warp must call it. */
template <class X> __device__ static inline float rows_warp32_lanes(const X &x, int64_t n, int square, int lane)
{
	float s = 0.0f;
	int64_t i = lane;
	for (; i + 7 * 32 < n; i += 8 * 32) {
		float e[8];
#pragma unroll
		for (int q = 0; q < 8; q++)
			e[q] = x(i + 32 * q);
#pragma unroll
		for (int q = 0; q < 8; q++)
			s = FX_ADD(s, square ? FX_MUL(e[q], e[q]) : e[q]);
	}
	for (; i < n; i += 32) {
		float v = x(i);
		s = FX_ADD(s, square ? FX_MUL(v, v) : v);
	}
#pragma unroll
	for (int off = 16; off >= 1; off >>= 1)
		s = FX_ADD(s, __shfl_xor_sync(ROWS_FULL_MASK, s, off));
	return s;
}

template <class X>
__device__ static inline float rows_warp32(const X &x, int64_t n, int square, float *scr, const rows_geom &rg,
					   bool valid)
{
	if (valid && rg.gt < 32) {
		float s = rows_warp32_lanes(x, n, square, rg.gt);
		if (rg.gt == 0) {
			if (align_isnanf(s))
				s = hnr_warp32(x, n, square);
			scr[0] = s;
		}
	}
	__syncthreads();
	return scr[0];
}

/* SEQ or F64 chain of one thread (fast path, then the host's NaN bits) */
template <class X> __device__ static inline float rows_chain(int order, const X &x, int64_t n, int square)
{
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
	return r;
}

template <class X>
__device__ static inline float rows_serial_order(int order, const X &x, int64_t n, int square, float *scr,
						 const rows_geom &rg, bool valid)
{
	if (valid && rg.gt == 0)
		scr[0] = rows_chain(order, x, n, square);
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

__device__ inline void rows_bf16_row::unpack8(const uint4 &v, float e[8]) const
{
	rows_unpack8(v, e);
}

/* 16-byte aligned? */
ALIGN_HD static inline int rows_al16(const void *p)
{
	return ((uintptr_t)p & 15u) == 0;
}

/* ---- RMSNORM_RSQRT on the device (rmsnorm, qnorm) ---- */

/* rmsnorm_rsqrt(v, a) with the host's NaN bits (1.0f / NaN is a NaN operation on the GPU); v =
 * ALIGN_RMSNORM_RSQRT_CUDA (modes.def: GPU only, the C twins' config refuses it) is
 * CUDA's rsqrtf (MUFU.RSQ, what torch.rsqrt and TE call) for a >= 0 or +inf, NaN and negative inputs as
 * the other values. The emulator has no MUFU.RSQ: it uses 1.0f / sqrtf(a) there (GPU-only values are
 * checked for determinism and batch invariance, not against the C twin). */
__device__ static inline float rows_rsqrt(int v, float a)
{
	if (align_isnanf(a))
		return align_quiet_nanf(a);
	if (a < 0.0f)
		return align_canonical_nanf();
	if (v == ALIGN_RMSNORM_RSQRT_CUDA)
#ifdef ALIGN_CUDA_EMU
		return 1.0f / sqrtf(a);
#else
		return rsqrtf(a);
#endif
	return rmsnorm_rsqrt(v, a);
}

/* ---- registers layout (see the top of the file) ---- */

/* v[m] = chunk gt + m G of the row (16-byte aligned, nch chunks of 8 bf16), every load issued before
 * any use; zeros past the end or when !valid. */
template <int LPT>
__device__ static inline void rows_regs_load(uint4 *v, const align_bf16 *row, int64_t nch, const rows_geom &rg,
					     bool valid)
{
	const uint4 *r4 = (const uint4 *)row;
#pragma unroll
	for (int m = 0; m < LPT; m++) {
		int64_t c = rg.gt + (int64_t)m * rg.G;
		v[m] = make_uint4(0u, 0u, 0u, 0u);
		if (valid && c < nch)
			v[m] = __ldg(r4 + c);
	}
}

/* Adjacent pairs level by level with carry over gv[0 .. cnt), cnt <= LPT: rows_warp_tree's rule in one
 * thread's registers. Result in gv[0]. */
template <int LPT> __device__ static inline float rows_small_tree(float *gv, int64_t cnt)
{
#pragma unroll
	for (int w = 1; w < LPT; w *= 2)
#pragma unroll
		for (int i = 0; i + w < LPT; i += 2 * w)
			if (i + w < cnt)
				gv[i] = FX_ADD(gv[i], gv[i + w]);
	return gv[0];
}

/* A full pairwise leaf from a chunk in registers: ((e0+e1)+(e2+e3))+((e4+e5)+(e6+e7)) */
template <class X> __device__ static inline float rows_leaf_regs(const X &x, const uint4 &v, int square)
{
	float e[ROWS_LEAF];
	x.unpack8(v, e);
	if (square)
#pragma unroll
		for (int i = 0; i < ROWS_LEAF; i++)
			e[i] = FX_MUL(e[i], e[i]);
	return FX_ADD(FX_ADD(FX_ADD(e[0], e[1]), FX_ADD(e[2], e[3])), FX_ADD(FX_ADD(e[4], e[5]), FX_ADD(e[6], e[7])));
}

/* align_reduce(order, e, n, 1, 0, square) of the group's row held in registers by rows_regs_load<LPT>
 * (n % 8 == 0, LPT * G * 8 >= n), returned to every thread of the group (unspecified when !valid).
 * xg: the accessor over the row in global memory (NaN recompute; its field p is pointed at xs for the
 * staged orders); scr: rows_scratch_floats(n) floats; xs: n bf16 of shared memory (16-byte aligned)
 * for orders other than PAIRWISE (unused by PAIRWISE). Every thread of the block calls it (barriers
 * inside when G > 32; with G = 32 only warp-synchronous operations). */
template <int LPT, class X>
__device__ static inline float rows_regs_sum(int order, const uint4 *v, const X &xg, int64_t n, int square, float *scr,
					     align_bf16 *xs, const rows_geom &rg, bool valid)
{
	const int lane = rg.gt & 31;
	const int64_t nl = n / ROWS_LEAF;
	if (order != ALIGN_REDUCE_PAIRWISE) {
		/* G = 32: the previous row's reads of xs (other lanes of this warp) before this row's writes;
		 * __shfl_sync, the only warp operation between them, does not order shared memory */
		if (rg.G == 32)
			__syncwarp();
		if (valid)
#pragma unroll
			for (int m = 0; m < LPT; m++) {
				int64_t c = rg.gt + (int64_t)m * rg.G;
				if (c < nl)
					((uint4 *)xs)[c] = v[m];
			}
		X xa = xg;
		xa.p = xs;
		if (rg.G > 32) {
			__syncthreads();
			if (order == ALIGN_REDUCE_WARP32)
				return rows_warp32(xa, n, square, scr, rg, valid);
			return rows_serial_order(order, xa, n, square, scr, rg, valid);
		}
		if (!valid)
			return 0.0f; /* the whole warp: W = 1 */
		__syncwarp();
		float s = 0.0f;
		if (order == ALIGN_REDUCE_WARP32) {
			s = rows_warp32_lanes(xa, n, square, lane);
			if (lane == 0 && align_isnanf(s))
				s = hnr_warp32(xa, n, square);
		} else if (lane == 0) {
			s = rows_chain(order, xa, n, square);
		}
		return __shfl_sync(ROWS_FULL_MASK, s, 0); /* every lane has read xs once this returns */
	}
	float gv[LPT];
#pragma unroll
	for (int m = 0; m < LPT; m++) {
		int64_t wbase = (int64_t)m * rg.G + (rg.gt - lane), cnt = nl - wbase;
		gv[m] = 0.0f;
		if (valid && cnt > 0)
			gv[m] = rows_warp_tree(rows_leaf_regs(xg, v[m], square), lane, cnt);
	}
	if (rg.G == 32) {
		if (!valid)
			return 0.0f;
		float s = rows_small_tree<LPT>(gv, (nl + 31) / 32);
		if (lane == 0 && align_isnanf(s))
			s = hnr_pairwise(xg, n, square);
		return __shfl_sync(ROWS_FULL_MASK, s, 0);
	}
	if (valid && lane == 0)
#pragma unroll
		for (int m = 0; m < LPT; m++) {
			int64_t wbase = (int64_t)m * rg.G + rg.gt;
			if (wbase < nl)
				scr[4 + wbase / 32] = gv[m];
		}
	__syncthreads();
	return rows_pairwise_top(xg, n, square, scr, rg, valid);
}

/* LPT for a registers-layout kernel: chunks per thread (n / 8 over G) rounded up to 1, 2, 4 or 8; 0 when
 * more than ROWS_MAX_LPT (the row does not fit: use the staged layout). */
ALIGN_HD static inline int rows_regs_lpt(int64_t n, int G)
{
	int64_t need = (n / ROWS_LEAF + G - 1) / G;
	return need <= 1 ? 1 : need <= 2 ? 2 : need <= 4 ? 4 : need <= ROWS_MAX_LPT ? ROWS_MAX_LPT : 0;
}

#endif /* ALIGN_ROWS_CUDA_CUH */
