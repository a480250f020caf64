/* sparse_attn.cu: CUDA twin of the DSv4 sparse MQA attention with sink (contract: sparse_attn.h;
 * specification: sparse_attn.c). q[T,H,D] bf16, kv[S,D] bf16, idx[T,N] i32, sink[H] f32 -> o[T,H,D] bf16,
 * the C twin's bytes in every portable mode; shapes and modes from sparse_attn_cfg_init (sparse_attn.c);
 * the scalar steps (dot product, E, max, sink, P rounding) are sparse_attn_row.h's, shared with the C twin.
 * MATH_IMPL=libm has no GPU twin (status 4); MATH_IMPL=cuda / cuda_fast (GPU only) take exp / exp2 from
 * CUDA (math_cuda.cuh).
 *
 * Two kernels. sparse_attn_fast_kernel (below, its own comment and limiter analysis) runs every mode
 * except CSA_SUM_ORDER=torch and launch.serial: a register-tiled SIMT GEMM for QK and PV with the C twin's
 * per-output reduction order; launch knobs there: rows_per_block (heads per block, default and at most
 * 32), grid_cap; block is ignored (the tile fixes 4 x heads-rounded-to-8 threads). sparse_attn_kernel
 * (the general kernel, 38 / 66 ms on the H100 at DSv4-Flash shapes before the fast path) runs torch sums,
 * serial, and shapes whose slot-major logits do not fit the fast path's shared memory:
 * Layout: one block per (token t, group of HB heads) (HB = launch.rows_per_block, default 16, at most H),
 * grid-stride over the T * ceil(H / HB) groups. Shared memory: the visiting order's kv rows js[N], the HB
 * query rows (bf16, row stride D + 2 when D = 0 mod 4: an odd number of 4-byte words, so that threads on
 * consecutive heads hit distinct banks), the logits z[HB][N] (overwritten in place by E(z - m), then by
 * P), per head and online block the running max after the block mb[HB][nb] and the rescale factor
 * a[HB][nb], and l[HB].
 *   1. every thread takes (slot, head) pairs, heads fastest: z = sa_logit(sa_dot(q, kv_j)) (the dot
 *      product is the C twin's sequential loop, one thread per dot product: bitwise by construction; a
 *      warp reads one kv row, a broadcast, for up to 32 heads).
 *   2. one thread per head: the running max in visiting order (full: m; online: mb per block, from -inf
 *      or the sink) - comparisons only.
 *   3. every thread: e = E(z - m) (online: m = mb of the slot's block; a = E(mb[b-1] - mb[b])).
 *   4. one thread per head: l in visiting order (full: seq or torch_sum_lastdim, + E(s - m); online:
 *      l = l * a + block sum, + E(s - m)), then every thread: full P = R?(e / l); online P = R?(e).
 *   5. the PV sum over the visiting order (online: acc * a at each block start), o = R(acc / l) or
 *      R(acc): one thread per (d, group of 4 heads), each kv element loaded once for the 4 accumulators
 *      (torch sums: one thread per (head, d)); coalesced kv reads across d.
 * (Before 2026-11-25: HB = 4, slots fastest in step 1 (a warp read 32 kv rows, 2 bytes each) and one
 * head per thread in step 5: 91 ms at DSv4-Flash shapes on an H100, 0.05x of PyTorch eager.)
 * Every binary32 operation is the C twin's, unfused (nvcc --fmad=false), through nan_host.h.
 * Knobs: block (threads, default 256), rows_per_block (HB), grid_cap (blocks), serial (one thread, HB = 1:
 * the same steps run by a single thread).
 *
 * Napkin maths (DSv4-Flash: H = 64, D = 512, N = 640, T = 1024): 2 T H N D = 42.9 G multiply-add pairs
 * (QK and PV; no FMA contraction: 85.9 GFLOP of binary32 issue) -> ~1.3 ms at the H100's ~67 TFLOP/s fp32
 * issue if compute bound; bytes: q 67 MB + o 67 MB + gathered kv rows 1 KB x N x T (670 MB, mostly L2
 * hits across the HB heads and the H / HB blocks of a token). The kernel uses CUDA cores, not tensor
 * cores (the bitwise contract fixes the accumulation order), so its roofline is the fp32 issue rate.
 * tests/gpu/bench-sparse-attn.cu measures it against a PyTorch-eager-equivalent cuBLAS path.
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-sparse-attn.
 */
#include "sparse_attn.h"

#include "math_cuda.cuh"
#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */
#include "sparse_attn_row.h"

#define SA_DEF_HB 16
#define SA_PV_R 4  /* heads per thread in the PV sum (one kv load feeds SA_PV_R accumulators) */
#define SA_TMP 128 /* torch order scratch: D <= 127, N <= 63 */

struct sa_args {
	const align_bf16 *q, *kv;
	const int32_t *idx;
	const float *sink;
	align_bf16 *o;
	struct sparse_attn_cfg c;
	int hb;		/* heads per block */
	int64_t qs;	/* row stride of the q rows in shared memory (bf16 elements; odd in 4-byte words) */
	int64_t groups; /* T * ceil(H / hb) */
	int64_t nb;	/* online blocks: ceil(N / 64) (1 for full; 0 when N = 0) */
	int64_t nba;	/* nb, at least 1 (shared-memory rows) */
};

/* shared-memory carve-up; 16-byte aligned pieces */
struct sa_smem {
	int32_t *js;
	align_bf16 *q;
	float *z, *mb, *a, *l; /* z: the logits, then in place E(z - m), then P */
	int *any;
};

ALIGN_HD static inline size_t sa_al16(size_t b)
{
	return (b + 15) / 16 * 16;
}

ALIGN_HD static inline size_t sa_smem_bytes(const sa_args &a)
{
	size_t N = (size_t)(a.c.N > 0 ? a.c.N : 1), hb = (size_t)a.hb;
	return sa_al16(N * 4) + sa_al16(hb * (size_t)a.qs * 2) + sa_al16(hb * N * 4) +
	       2 * sa_al16(hb * (size_t)a.nba * 4) + sa_al16(hb * 4) + 16;
}

__device__ static inline sa_smem sa_carve(const sa_args &a)
{
	unsigned char *p = align_cuda_dyn_smem();
	size_t N = (size_t)(a.c.N > 0 ? a.c.N : 1), hb = (size_t)a.hb;
	sa_smem s;
	s.js = (int32_t *)p, p += sa_al16(N * 4);
	s.q = (align_bf16 *)p, p += sa_al16(hb * (size_t)a.qs * 2);
	s.z = (float *)p, p += sa_al16(hb * N * 4);
	s.mb = (float *)p, p += sa_al16(hb * (size_t)a.nba * 4);
	s.a = (float *)p, p += sa_al16(hb * (size_t)a.nba * 4);
	s.l = (float *)p, p += sa_al16(hb * 4);
	s.any = (int *)p;
	return s;
}

__global__ void sparse_attn_kernel(sa_args a)
{
	const sparse_attn_cfg &c = a.c;
	const int64_t N = c.N, D = c.D, hpg = (c.H + a.hb - 1) / a.hb;
	sa_smem s = sa_carve(a);
	const int tid = threadIdx.x, nt = blockDim.x;
	for (int64_t g = blockIdx.x; g < a.groups; g += gridDim.x) {
		const int64_t t = g / hpg, h0 = (g % hpg) * a.hb;
		const int nh = (int)(c.H - h0 < a.hb ? c.H - h0 : a.hb);
		if (tid == 0)
			*s.any = 0;
		__syncthreads();
		for (int64_t k = tid; k < N; k += nt) {
			int32_t j = a.idx[t * N + sa_slot(&c, k)];
			s.js[k] = j;
			if (sa_valid(&c, j))
				*s.any = 1; /* a benign race: every writer stores 1 */
		}
		for (int64_t i = tid; i < (int64_t)nh * D; i += nt)
			s.q[i / D * a.qs + i % D] = a.q[(t * c.H + h0) * D + i];
		__syncthreads();
		const int empty = !*s.any;
		/* 1. logits: consecutive threads take consecutive heads of one slot, so a warp reads one kv row
		 * (a broadcast) and q rows at an odd word stride (no bank conflicts) */
		float tmp[SA_TMP];
		for (int64_t w = tid; w < (int64_t)nh * N; w += nt) {
			int64_t hl = w % nh, k = w / nh;
			int32_t j = s.js[k];
			int v = sa_valid(&c, j);
			s.z[hl * N + k] = v ? sa_logit(&c, sa_dot(&c, s.q + hl * a.qs, a.kv + (int64_t)j * D, tmp), 1)
					    : -INFINITY;
		}
		__syncthreads();
		/* 2. running max per head */
		for (int hl = tid; hl < nh; hl += nt) {
			float m = c.sink_in_max ? sa_sink(&c, a.sink[h0 + hl]) : -INFINITY;
			const float *z = s.z + hl * N;
			for (int64_t b = 0; b < a.nb; b++) {
				int64_t k0 = c.online ? b * SPARSE_ATTN_BLOCK : 0;
				int64_t k1 = c.online && k0 + SPARSE_ATTN_BLOCK < N ? k0 + SPARSE_ATTN_BLOCK : N;
				for (int64_t k = k0; k < k1; k++)
					m = sa_max(m, z[k]);
				s.mb[hl * a.nba + b] = m;
			}
		}
		__syncthreads();
		/* 3. exponentials and rescale factors */
		for (int64_t w = tid; w < (int64_t)nh * N; w += nt) {
			int64_t hl = w / N, k = w % N, b = c.online ? k / SPARSE_ATTN_BLOCK : 0;
			s.z[w] = sa_e(&c, hn_sub(s.z[w], s.mb[hl * a.nba + b])); /* in place: z is not read again */
		}
		if (c.online)
			for (int64_t w = tid; w < (int64_t)nh * a.nb; w += nt) {
				int64_t hl = w / a.nb, b = w % a.nb;
				float prev = b > 0	     ? s.mb[hl * a.nba + b - 1]
					     : c.sink_in_max ? sa_sink(&c, a.sink[h0 + hl])
							     : -INFINITY;
				s.a[hl * a.nba + b] = sa_e(&c, hn_sub(prev, s.mb[hl * a.nba + b]));
			}
		__syncthreads();
		/* 4. denominators */
		for (int hl = tid; hl < nh; hl += nt) {
			const float *e = s.z + hl * N;
			float sk = sa_sink(&c, a.sink[h0 + hl]), l = 0.0f;
			float m = a.nb > 0 ? s.mb[hl * a.nba + a.nb - 1] : c.sink_in_max ? sk : -INFINITY;
			if (!c.online) {
				if (c.torch_sums)
					l = N > 0 ? torch_sum_lastdim(e, 1, N) : 0.0f;
				else
					for (int64_t k = 0; k < N; k++)
						l = hn_add(l, e[k]);
			} else {
				for (int64_t b = 0; b < a.nb; b++) {
					int64_t k0 = b * SPARSE_ATTN_BLOCK;
					int64_t k1 = k0 + SPARSE_ATTN_BLOCK < N ? k0 + SPARSE_ATTN_BLOCK : N;
					float bs = 0.0f;
					for (int64_t k = k0; k < k1; k++)
						bs = hn_add(bs, e[k]);
					l = hn_add(hn_mul(l, s.a[hl * a.nba + b]), bs);
				}
			}
			s.l[hl] = hn_add(l, sa_e(&c, hn_sub(sk, m)));
		}
		__syncthreads();
		for (int64_t w = tid; w < (int64_t)nh * N; w += nt)
			s.z[w] = c.online ? sa_p(&c, s.z[w]) : sa_p(&c, hn_div(s.z[w], s.l[w / N]));
		__syncthreads();
		/* 5. PV. torch sums: one thread per (head, d). Otherwise one thread per (d, group of SA_PV_R heads):
		 * each kv element loaded once feeds the group's accumulators, each in the contract's order. */
		if (empty && c.empty_zero) {
			for (int64_t w = tid; w < (int64_t)nh * D; w += nt)
				a.o[(t * c.H + h0) * D + w] = align_f32_to_bf16(0.0f);
		} else if (!c.online && c.torch_sums) {
			for (int64_t w = tid; w < (int64_t)nh * D; w += nt) {
				int64_t hl = w / D, d = w % D;
				const float *P = s.z + hl * N;
				for (int64_t k = 0; k < N; k++) {
					int32_t j = s.js[k];
					float v = sa_valid(&c, j) ? align_bf16_to_f32(a.kv[(int64_t)j * D + d]) : 0.0f;
					tmp[k] = hn_mul(P[k], v);
				}
				float x = N > 0 ? torch_sum_strided(tmp, 1, N) : 0.0f;
				a.o[(t * c.H + h0) * D + w] = align_f32_to_bf16(x);
			}
		} else {
			const int64_t ng = (nh + SA_PV_R - 1) / SA_PV_R;
			for (int64_t w = tid; w < ng * D; w += nt) {
				int64_t g0 = w / D * SA_PV_R, d = w % D;
				int nr = (int)(nh - g0 < SA_PV_R ? nh - g0 : SA_PV_R);
				float x[SA_PV_R];
				for (int r = 0; r < SA_PV_R; r++)
					x[r] = 0.0f;
				for (int64_t k = 0; k < N; k++) {
					if (c.online && k % SPARSE_ATTN_BLOCK == 0)
						for (int r = 0; r < nr; r++)
							x[r] = hn_mul(x[r],
								      s.a[(g0 + r) * a.nba + k / SPARSE_ATTN_BLOCK]);
					int32_t j = s.js[k];
					float v = sa_valid(&c, j) ? align_bf16_to_f32(a.kv[(int64_t)j * D + d]) : 0.0f;
					for (int r = 0; r < nr; r++)
						x[r] = hn_add(x[r], hn_mul(s.z[(g0 + r) * N + k], v));
				}
				for (int r = 0; r < nr; r++)
					a.o[(t * c.H + h0 + g0 + r) * D + d] =
						align_f32_to_bf16(c.online ? hn_div(x[r], s.l[g0 + r]) : x[r]);
			}
		}
		__syncthreads();
	}
}

/* ---- the tiled fast path (every mode but CSA_SUM_ORDER=torch and launch.serial) ----
 * One block per (token t, group of HB <= 32 heads), HP = HB rounded up to 8, HP / 8 warps (4 HP threads:
 * launch.block is ignored here). Thread (hg = tid / 32, sg = tid % 32) owns a register tile of 8 heads
 * (hg * 8 ..) x 4 columns (sg * 4 ..): columns are slots in QK, d's in PV; a warp shares its heads, so the
 * q / P operands are smem broadcasts and the kv / v operands one LDS.128 per thread.
 *   QK: passes of 128 slots; per pass the d loop runs in tiles of 16 (= the bf16_tc chunk), staged in
 *     shared memory as binary32 (fp32) or binary64 (bf16_tc) values: qT[16][HP], kT[16][128 + pad].
 *     Each accumulator is the C twin's loop: fp32: acc = acc + q_d * kv_d for d = 0..D-1 in order;
 *     bf16_tc: s = +0, s = s + q_d * kv_d over the chunk's d's in order (binary64), acc = acc + (float)s.
 *   softmax: the old kernel's steps 2-4 (per head in visiting order), on z[N][HP] (slot-major).
 *   PV: passes of 128 d's; the slot loop in tiles of 16 staged as vT[16][128 + pad] (invalid rows 0), P
 *     read from z; acc = acc + P_k * v_k,d in visiting order, online: acc = acc * a at each 64-slot block.
 * The tiles use the plain operators (--fmad=false: no contraction); a NaN can only come out of an
 * accumulation that met a NaN (NaN propagates through + and *), and a NaN-free result equals the hn_
 * helpers' bit for bit, so an accumulator that ends as NaN is recomputed by the serial hn_ loop (the host's
 * NaN bits); the scalar epilogue ops (logit * c, / l) go through hn_ directly.
 * Limiter (DSv4-Flash T = 1024, H = 64, D = 512, N = 640): 4 T H N D = 85.9 G binary32 issue slots
 *   (mul and add separate) -> 2.6 ms at an H100/H200's 132 SMs x 128 lanes x 1.98 GHz = 33.4 T ops/s;
 *   bf16_tc does the QK half in binary64 (half the fp32 lane rate: ~3.9 ms bound). Bytes: q + o 134 MB,
 *   kv rows gathered once per (token, head group) per pass = T * (H / HB) * N * D * 2 = 1.3 GB, mostly
 *   L2 hits (kv is 0.7 MB): ~0.5 ms of L2 bandwidth. Shared memory per FP op: 3 LDS.128 per 64 binary32
 *   ops per thread. Expected bound: fp32 issue (compute), not memory. */
#define SAF_TS 4     /* columns per thread */
#define SAF_TH 8     /* heads per thread */
#define SAF_COLS 128 /* columns per pass: 32 lanes x SAF_TS */
#define SAF_KT 16    /* reduction tile (d in QK, slots in PV) */
#define SAF_MAXH 32  /* heads per block at most */

struct saf_args {
	const align_bf16 *q, *kv;
	const int32_t *idx;
	const float *sink;
	align_bf16 *o;
	struct sparse_attn_cfg c;
	int hb, hp;	/* heads per block; hb rounded up to 8 */
	int vec;	/* 16-byte loads of 8 bf16 (D = 0 mod 8, aligned pointers) */
	int64_t groups; /* T * ceil(H / hb) */
	int64_t nb, nba;
};

template <class A> static inline size_t saf_tile_bytes(int hp)
{
	size_t qk = sa_al16((size_t)SAF_KT * hp * sizeof(A)) + sa_al16((size_t)SAF_KT * (SAF_COLS + 4) * sizeof(A));
	size_t pv = sa_al16((size_t)SAF_KT * (SAF_COLS + 4) * 4);
	return qk > pv ? qk : pv;
}

static inline size_t saf_smem_bytes(const saf_args &a)
{
	size_t N = (size_t)(a.c.N > 0 ? a.c.N : 1), hp = (size_t)a.hp;
	size_t tile = a.c.qk_tc ? saf_tile_bytes<double>(a.hp) : saf_tile_bytes<float>(a.hp);
	return sa_al16(N * 4) + sa_al16(N * hp * 4) + 2 * sa_al16(hp * (size_t)a.nba * 4) + sa_al16(hp * 4) + 16 + tile;
}

/* 8 bf16 from p[d0 ..] as binary32, zeros past D (n = D - d0 valid) */
__device__ static inline void saf_ld8(const align_bf16 *p, int64_t n, int vec, float *f)
{
	if (vec && n >= 8) {
		uint4 u = *(const uint4 *)p;
		unsigned w[4] = {u.x, u.y, u.z, u.w};
		for (int e = 0; e < 4; e++) {
			f[2 * e] = align_bf16_to_f32((align_bf16)(w[e] & 0xffffu));
			f[2 * e + 1] = align_bf16_to_f32((align_bf16)(w[e] >> 16));
		}
		return;
	}
	for (int e = 0; e < 8; e++)
		f[e] = e < n ? align_bf16_to_f32(p[e]) : 0.0f;
}

template <class A> __global__ void sparse_attn_fast_kernel(saf_args a)
{
	const sparse_attn_cfg &c = a.c;
	const int64_t N = c.N, D = c.D, hpg = (c.H + a.hb - 1) / a.hb;
	const int hp = a.hp, tid = threadIdx.x, nt = blockDim.x, hg = tid / 32, sg = tid % 32;
	const int KS = SAF_COLS + 4; /* tile row stride: 16-byte aligned rows, fewer store conflicts */
	unsigned char *p = align_cuda_dyn_smem();
	const size_t Nz = (size_t)(N > 0 ? N : 1);
	int32_t *js = (int32_t *)p;
	p += sa_al16(Nz * 4);
	float *z = (float *)p; /* z[k * hp + h]: logits, then E(z - m), then P */
	p += sa_al16(Nz * hp * 4);
	float *mb = (float *)p;
	p += sa_al16((size_t)hp * a.nba * 4);
	float *ra = (float *)p;
	p += sa_al16((size_t)hp * a.nba * 4);
	float *ls = (float *)p;
	p += sa_al16((size_t)hp * 4);
	int *any = (int *)p;
	p += 16;
	A *qT = (A *)p;						     /* [SAF_KT][hp] */
	A *kT = (A *)(p + sa_al16((size_t)SAF_KT * hp * sizeof(A))); /* [SAF_KT][KS] */
	float *vT = (float *)p;					     /* [SAF_KT][KS] (PV) */
	for (int64_t g = blockIdx.x; g < a.groups; g += gridDim.x) {
		const int64_t t = g / hpg, h0 = (g % hpg) * a.hb;
		const int nh = (int)(c.H - h0 < a.hb ? c.H - h0 : a.hb);
		const align_bf16 *qb = a.q + (t * c.H + h0) * D;
		if (tid == 0)
			*any = 0;
		__syncthreads();
		for (int64_t k = tid; k < N; k += nt) {
			int32_t j = a.idx[t * N + sa_slot(&c, k)];
			js[k] = j;
			if (sa_valid(&c, j))
				*any = 1; /* a benign race: every writer stores 1 */
		}
		__syncthreads();
		const int empty = !*any;
		if (empty && c.empty_zero) {
			for (int64_t w = tid; w < (int64_t)nh * D; w += nt)
				a.o[(t * c.H + h0) * D + w] = align_f32_to_bf16(0.0f);
			__syncthreads();
			continue;
		}
		/* QK */
		for (int64_t s0 = 0; s0 < N; s0 += SAF_COLS) {
			float acc[SAF_TH][SAF_TS];
			for (int i = 0; i < SAF_TH; i++)
				for (int jj = 0; jj < SAF_TS; jj++)
					acc[i][jj] = 0.0f;
			for (int64_t d0 = 0; d0 < D; d0 += SAF_KT) {
				const int64_t nd = D - d0 < SAF_KT ? D - d0 : SAF_KT;
				__syncthreads();			 /* the previous tile is consumed */
				for (int w = tid; w < hp * 2; w += nt) { /* q: (head, half of 16 d's) */
					int h = w / 2, half = w % 2;
					float f[8];
					if (h < nh)
						saf_ld8(qb + (int64_t)h * D + d0 + half * 8, nd - half * 8, a.vec, f);
					else
						for (int e = 0; e < 8; e++)
							f[e] = 0.0f;
					for (int e = 0; e < 8; e++)
						qT[(half * 8 + e) * hp + h] = (A)f[e];
				}
				for (int w = tid; w < SAF_COLS * 2; w += nt) { /* kv: (slot, half) */
					int s = w / 2, half = w % 2;
					int64_t k = s0 + s;
					float f[8];
					int32_t j = k < N ? js[k] : -1;
					if (sa_valid(&c, j))
						saf_ld8(a.kv + (int64_t)j * D + d0 + half * 8, nd - half * 8, a.vec, f);
					else
						for (int e = 0; e < 8; e++)
							f[e] = 0.0f;
					for (int e = 0; e < 8; e++)
						kT[(half * 8 + e) * KS + s] = (A)f[e];
				}
				__syncthreads();
				if (hg * SAF_TH < hp) {
					A sd[SAF_TH][SAF_TS];
					const int ck = sizeof(A) == 8; /* bf16_tc: this tile is one chunk */
					for (int i = 0; i < SAF_TH; i++)
						for (int jj = 0; jj < SAF_TS; jj++)
							sd[i][jj] = ck ? (A)0 : (A)acc[i][jj];
					for (int dd = 0; dd < nd; dd++) {
						A qa[SAF_TH], kb[SAF_TS];
						for (int i = 0; i < SAF_TH; i++)
							qa[i] = qT[dd * hp + hg * SAF_TH + i];
						for (int jj = 0; jj < SAF_TS; jj++)
							kb[jj] = kT[dd * KS + sg * SAF_TS + jj];
						for (int i = 0; i < SAF_TH; i++)
							for (int jj = 0; jj < SAF_TS; jj++)
								sd[i][jj] = sd[i][jj] + qa[i] * kb[jj];
					}
					for (int i = 0; i < SAF_TH; i++)
						for (int jj = 0; jj < SAF_TS; jj++)
							acc[i][jj] =
								ck ? acc[i][jj] + (float)sd[i][jj] : (float)sd[i][jj];
				}
			}
			if (hg * SAF_TH < hp)
				for (int i = 0; i < SAF_TH; i++)
					for (int jj = 0; jj < SAF_TS; jj++) {
						int h = hg * SAF_TH + i;
						int64_t k = s0 + sg * SAF_TS + jj;
						if (h >= nh || k >= N)
							continue;
						int32_t j = js[k];
						int v = sa_valid(&c, j);
						float dot = acc[i][jj];
						if (v && align_isnanf(dot)) /* the host's NaN: the serial hn_ loop */
							dot = sa_dot(&c, qb + (int64_t)h * D, a.kv + (int64_t)j * D,
								     NULL);
						z[k * hp + h] = v ? sa_logit(&c, dot, 1) : -INFINITY;
					}
		}
		__syncthreads();
		/* softmax: running max per head */
		for (int hl = tid; hl < nh; hl += nt) {
			float m = c.sink_in_max ? sa_sink(&c, a.sink[h0 + hl]) : -INFINITY;
			for (int64_t b = 0; b < a.nb; b++) {
				int64_t k0 = c.online ? b * SPARSE_ATTN_BLOCK : 0;
				int64_t k1 = c.online && k0 + SPARSE_ATTN_BLOCK < N ? k0 + SPARSE_ATTN_BLOCK : N;
				for (int64_t k = k0; k < k1; k++)
					m = sa_max(m, z[k * hp + hl]);
				mb[hl * a.nba + b] = m;
			}
		}
		__syncthreads();
		for (int64_t w = tid; w < (int64_t)nh * N; w += nt) {
			int64_t k = w / nh, hl = w % nh, b = c.online ? k / SPARSE_ATTN_BLOCK : 0;
			z[k * hp + hl] = sa_e(&c, hn_sub(z[k * hp + hl], mb[hl * a.nba + b]));
		}
		if (c.online)
			for (int64_t w = tid; w < (int64_t)nh * a.nb; w += nt) {
				int64_t hl = w / a.nb, b = w % a.nb;
				float prev = b > 0	     ? mb[hl * a.nba + b - 1]
					     : c.sink_in_max ? sa_sink(&c, a.sink[h0 + hl])
							     : -INFINITY;
				ra[hl * a.nba + b] = sa_e(&c, hn_sub(prev, mb[hl * a.nba + b]));
			}
		__syncthreads();
		for (int hl = tid; hl < nh; hl += nt) {
			float sk = sa_sink(&c, a.sink[h0 + hl]), l = 0.0f;
			float m = a.nb > 0 ? mb[hl * a.nba + a.nb - 1] : c.sink_in_max ? sk : -INFINITY;
			if (!c.online) {
				for (int64_t k = 0; k < N; k++)
					l = hn_add(l, z[k * hp + hl]);
			} else {
				for (int64_t b = 0; b < a.nb; b++) {
					int64_t k0 = b * SPARSE_ATTN_BLOCK;
					int64_t k1 = k0 + SPARSE_ATTN_BLOCK < N ? k0 + SPARSE_ATTN_BLOCK : N;
					float bs = 0.0f;
					for (int64_t k = k0; k < k1; k++)
						bs = hn_add(bs, z[k * hp + hl]);
					l = hn_add(hn_mul(l, ra[hl * a.nba + b]), bs);
				}
			}
			ls[hl] = hn_add(l, sa_e(&c, hn_sub(sk, m)));
		}
		__syncthreads();
		for (int64_t w = tid; w < (int64_t)nh * N; w += nt) {
			int64_t k = w / nh, hl = w % nh;
			float e = z[k * hp + hl];
			z[k * hp + hl] = c.online ? sa_p(&c, e) : sa_p(&c, hn_div(e, ls[hl]));
		}
		/* PV */
		for (int64_t e0 = 0; e0 < D; e0 += SAF_COLS) {
			float acc[SAF_TH][SAF_TS];
			for (int i = 0; i < SAF_TH; i++)
				for (int jj = 0; jj < SAF_TS; jj++)
					acc[i][jj] = 0.0f;
			for (int64_t k0 = 0; k0 < N; k0 += SAF_KT) {
				const int64_t nk = N - k0 < SAF_KT ? N - k0 : SAF_KT;
				__syncthreads(); /* the previous tile (or P) is ready / consumed */
				for (int w = tid; w < SAF_KT * (SAF_COLS / 8); w += nt) { /* (slot, 8 d's) */
					int kk = w / (SAF_COLS / 8), c8 = w % (SAF_COLS / 8);
					int64_t d = e0 + c8 * 8;
					float f[8];
					int32_t j = kk < nk ? js[k0 + kk] : -1;
					if (sa_valid(&c, j) && d < D)
						saf_ld8(a.kv + (int64_t)j * D + d, D - d, a.vec, f);
					else
						for (int e = 0; e < 8; e++)
							f[e] = 0.0f;
					for (int e = 0; e < 8; e++)
						vT[kk * KS + c8 * 8 + e] = f[e];
				}
				__syncthreads();
				if (hg * SAF_TH < hp)
					for (int kk = 0; kk < nk; kk++) {
						const int64_t k = k0 + kk;
						if (c.online && k % SPARSE_ATTN_BLOCK == 0)
							for (int i = 0; i < SAF_TH; i++) {
								int h = hg * SAF_TH + i;
								float r = h < nh ? ra[h * a.nba + k / SPARSE_ATTN_BLOCK]
										 : 0.0f;
								for (int jj = 0; jj < SAF_TS; jj++)
									acc[i][jj] = acc[i][jj] * r;
							}
						float pa[SAF_TH], vb[SAF_TS];
						for (int i = 0; i < SAF_TH; i++)
							pa[i] = z[k * hp + hg * SAF_TH + i];
						for (int jj = 0; jj < SAF_TS; jj++)
							vb[jj] = vT[kk * KS + sg * SAF_TS + jj];
						for (int i = 0; i < SAF_TH; i++)
							for (int jj = 0; jj < SAF_TS; jj++)
								acc[i][jj] = acc[i][jj] + pa[i] * vb[jj];
					}
			}
			if (hg * SAF_TH < hp)
				for (int i = 0; i < SAF_TH; i++)
					for (int jj = 0; jj < SAF_TS; jj++) {
						int h = hg * SAF_TH + i;
						int64_t d = e0 + sg * SAF_TS + jj;
						if (h >= nh || d >= D)
							continue;
						float x = acc[i][jj];
						if (align_isnanf(x)) { /* the host's NaN: the serial hn_ loop */
							x = 0.0f;
							for (int64_t k = 0; k < N; k++) {
								if (c.online && k % SPARSE_ATTN_BLOCK == 0)
									x = hn_mul(
										x,
										ra[h * a.nba + k / SPARSE_ATTN_BLOCK]);
								int32_t j = js[k];
								float v = sa_valid(&c, j)
										  ? align_bf16_to_f32(
											    a.kv[(int64_t)j * D + d])
										  : 0.0f;
								x = hn_add(x, hn_mul(z[k * hp + h], v));
							}
						}
						a.o[(t * c.H + h0 + h) * D + d] =
							align_f32_to_bf16(c.online ? hn_div(x, ls[h]) : x);
					}
		}
		__syncthreads();
	}
}

/* the fast path's launch; 1 when it does not apply (the caller runs sparse_attn_kernel) */
static int sparse_attn_fast_launch(const sa_args &o, const struct align_launch *L, struct align_dev *dev,
				   cudaStream_t stream, int *rc)
{
	*rc = ALIGN_OK;
	if (o.c.torch_sums || L->serial > 0)
		return 1;
	saf_args a;
	a.q = o.q, a.kv = o.kv, a.idx = o.idx, a.sink = o.sink, a.o = o.o, a.c = o.c;
	int hb = L->rows_per_block > 0 ? L->rows_per_block : SAF_MAXH;
	hb = hb > SAF_MAXH ? SAF_MAXH : hb;
	a.hb = (int)(hb > a.c.H ? a.c.H : hb);
	a.nb = o.nb, a.nba = o.nba;
	a.vec = a.c.D % 8 == 0 && (uintptr_t)a.q % 16 == 0 && (uintptr_t)a.kv % 16 == 0;
	int maxs = dev->max_smem_optin > 0 ? dev->max_smem_optin : 48 * 1024;
	size_t smem;
	for (;;) {
		a.hp = (a.hb + 7) / 8 * 8;
		a.groups = a.c.T * ((a.c.H + a.hb - 1) / a.hb);
		smem = saf_smem_bytes(a);
		if (smem <= (size_t)maxs || a.hb <= 8)
			break;
		a.hb = (a.hb + 1) / 2;
	}
	if (smem > (size_t)maxs)
		return 1; /* N too large for the slot-major logits: the general kernel */
	void (*k)(saf_args) = a.c.qk_tc ? sparse_attn_fast_kernel<double> : sparse_attn_fast_kernel<float>;
	if (smem > 48 * 1024) {
		cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
		if (e != cudaSuccess) {
			*rc = ops_cuda_fail("cudaFuncSetAttribute", e, __FILE__, __LINE__);
			return 0;
		}
	}
	int block = 4 * a.hp, maxb = 0;
	if ((*rc = rows_max_block(k, &maxb)) != 0)
		return 0;
	if (block > maxb)
		return 1;
	int64_t grid = a.groups, cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 32;
	if (grid > cap)
		grid = cap;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(k, (unsigned)grid, block, smem, stream, a);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		*rc = ops_cuda_fail("sparse_attn_fast_kernel launch", e, __FILE__, __LINE__);
	return 0;
}

extern "C" int sparse_attn_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				    int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				    struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	sa_args a;
	ALIGN_TRY(dev->err, sparse_attn_cfg_init(&a.c, (const struct sparse_attn_params *)params, m, in, n_in, out,
						 n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "sparse_attn", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("sparse_attn", "negative launch knob");
	a.q = (const align_bf16 *)in[0].data;
	a.kv = (const align_bf16 *)in[1].data;
	a.idx = (const int32_t *)in[2].data;
	a.sink = (const float *)in[3].data;
	a.o = (align_bf16 *)out[0].data;
	if (a.c.T <= 0 || a.c.H <= 0 || a.c.D <= 0)
		return ALIGN_OK;
	a.nb = a.c.online ? (a.c.N + SPARSE_ATTN_BLOCK - 1) / SPARSE_ATTN_BLOCK : 1;
	a.nba = a.nb > 0 ? a.nb : 1;
	{
		int frc;
		if (!sparse_attn_fast_launch(a, L, dev, stream, &frc))
			return frc;
	}
	int hb = L->serial > 0 ? 1 : L->rows_per_block > 0 ? L->rows_per_block : SA_DEF_HB;
	a.hb = (int)(hb > a.c.H ? a.c.H : hb);
	a.qs = a.c.D % 4 == 0 ? a.c.D + 2 : a.c.D; /* D = 0 mod 4: D / 2 words is even; + 2 makes it odd */
	a.nb = a.c.online ? (a.c.N + SPARSE_ATTN_BLOCK - 1) / SPARSE_ATTN_BLOCK : 1;
	a.nba = a.nb > 0 ? a.nb : 1;
	a.groups = a.c.T * ((a.c.H + a.hb - 1) / a.hb);
	size_t smem = sa_smem_bytes(a);
	int maxs = dev->max_smem_optin > 0 ? dev->max_smem_optin : 48 * 1024;
	while (smem > (size_t)maxs && a.hb > 1) { /* fewer heads per block until the rows fit */
		a.hb = (a.hb + 1) / 2;
		a.groups = a.c.T * ((a.c.H + a.hb - 1) / a.hb);
		smem = sa_smem_bytes(a);
	}
	if (smem > (size_t)maxs)
		return ops_cuda_bad_input("sparse_attn", "N and D need more shared memory than the device has");
	if (smem > 48 * 1024)
		OPS_CUDA_TRY(cudaFuncSetAttribute(sparse_attn_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
						  (int)smem));
	int block = L->serial > 0 ? 1 : L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 512, maxb = 0;
	int rc = rows_max_block(sparse_attn_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block;
	int64_t grid = a.groups, cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 32;
	if (grid > cap)
		grid = cap;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(sparse_attn_kernel, (unsigned)grid, block, smem, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
