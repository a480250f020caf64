/* mhc_project.cuh: the mapping GEMM of mhc_pre / mhc_head (mhc_pre.h steps 1-2) on a CUDA device, one
 * kernel for small R (R <= 80, i.e. N <= MHC_MAX_N = 8), fused with the sum of squares of the RMS factor:
 *
 *   mix[t, r] = dot(opd_x(x32[t]), opd_fn(fn[r]))    in the C twin's K order (MHC_PROJ_GEMM), no FMA
 *   ss[t]     = align_reduce_pairwise(x32[t], K, 1, 1)  (reduce.h PAIRWISE)
 *
 * for t < T, r < R, K = N D. x [T, K] bf16, fn [R, K] f32, device pointers. Included by mhc_pre.cu and
 * mhc_head.cu (through their launchers); include from .cu only. Written for nvcc and for the host
 * emulator (tests/emu: dynamic shared memory, launches through ALIGN_CUDA_LAUNCH, uint4 / float4, __ldg).
 *
 * Layout. Pass 0 (mhc_pj_fnt_kernel) writes fnt[k][r] = opd_fn(fn[r][k]) k-major, RP = G RG columns
 * (rows r >= R and k >= K are +0) and KP = ceil(K / KC) KC rows, into the workspace: 1.5 MiB at R = 24,
 * K = 16384, ~2 us. The GEMM kernel (mhc_pj_kernel<RG, G, TT, TPG, KC, SPLIT>): a CTA owns BT = TPG TT
 * consecutive tokens (grid-stride over token tiles when grid_cap caps the grid) and walks K in chunks
 * of KC. Per chunk it stages the x tile [BT][KC] (16-byte loads of 8 bf16 when K % 8 == 0 and x is
 * aligned; converted to f32 exactly once and passed through matmul_operand(., opd_x), the C twin's
 * xq) and the fnt tile [KC][RP] (a contiguous copy) into double-buffered shared memory; the next
 * chunk is fetched into registers while the current one is consumed, one __syncthreads per chunk.
 * Thread (g, tl), g < G row groups of RG rows, tl < TPG, owns tokens tl + i TPG (i < TT) and rows
 * g RG .. g RG + RG - 1: TT RG accumulators in registers. Per k it reads its TT x values (LDS.128,
 * 4 k at a time, rows 68 floats apart: conflict-free) and its RG weights (LDS.128, the same address
 * for the whole warp: broadcasts) and does TT RG products and sums; the rows are independent chains,
 * which hide the FADD latency.
 *
 * Why the bits are the C twin's (mhc_project, matmul_dot of matmul.h; the same argument as matmul.cu):
 *   - operands: x32 = F(bf16) exactly, then matmul_operand(., opd_x); fn with opd_fn (BF16 when
 *     MHC_PARAM=bf16: tf32(F(R(v))) == F(R(v)), see struct mhc_modes); each staged value is the C twin's
 *     xq[k] / row[k].
 *   - one thread owns each (token, row) dot for the whole of K and walks k = 0, 1, ..., K-1 in order;
 *     the tail chunk stops at K (its zero padding is never added: acc + 0 would turn -0 into +0).
 *   - seq: acc starts at -0 and does acc = acc + R(x_k w_k) for every k (-0 + p == p for every p),
 *     i.e. the C twin's acc = p0, then acc + p_k; nvcc --fmad=false keeps the multiply and the add apart
 *     (the emulator: -ffp-contract=off).
 *   - split16: c = ceil(K / 16); when k reaches a multiple of c the chunk sum is folded, tot = tot + acc
 *     (tot from -0: the first fold is tot = part, C's `first`), acc restarts at -0; the last chunk is
 *     folded at the end. The chunks [j c, min(K, (j+1) c)) are all non-empty: C's partials, C's order.
 *     A KC chunk without a split16 boundary and not cut by K runs the unchecked loop, the others the
 *     checked one (any number of boundaries).
 *   - K == 0: +0, as C. Tokens t >= T of the last tile compute on zeros and are not stored.
 *   - NaN: the device's NaN is 0x7fffffff, the host's the first NaN operand or 0xffc00000; NaN is
 *     sticky through + and *, so a dot is NaN exactly when some step was, and only those dots are
 *     recomputed with the reference dot (mm_dot_ref, nan_host.h operators) from x and fn.
 *   Sum of squares (PAIRWISE: the level-wise tree with the odd last node carried up, reduce.h; node
 *   i of level 4 covers [16 i, min(K, 16 i + 16)), an aligned range, so it is the pairwise sum of that
 *   range alone): per chunk, the CTA's threads compute the level-4 nodes of the staged x values (a
 *   balanced 16-leaf tree, left + right; a short last node by the C twin's stack loop), and after the
 *   next barrier thread (0, tl) pushes its tokens' nodes, in order, onto a binary-counter stack in
 *   shared memory (slot l holds a 2^l-node block; pushing node n merges slot l while bit l of n is set,
 *   older + newer), and at the end folds the slots of the set bits of ceil(K / 16) from the lowest up,
 *   slot + sum: exactly the C twin's merges and final fold, one level up. The staged operand is x32
 *   itself: tf32(F(h)) == F(h) for every non-NaN bf16 h (8 significant bits). A NaN sum (only from a
 *   NaN x) is recomputed with mhc_pairwise_sq_seq (host NaN bits).
 *   So neither the configuration (RG, G, TT, TPG, KC) nor the grid nor T changes a bit.
 *
 * Configurations (mhc_pj_run picks by R; `pair` = the TT = 2 variant for R <= 24, from the launch knobs):
 *   R <= 4  (mhc_head N <= 4):     RG 4, G 1,  TT 1, TPG 64, KC 128:  64 threads, 64 tokens / CTA
 *   R <= 8  (head N <= 8, pre N 2): RG 8, G 1,  TT 1, TPG 64, KC 128:  64 threads, 64 tokens
 *   R <= 24 (mhc_pre N <= 4):      RG 8, G 3,  TT 2, TPG 32, KC 64:   96 threads, 64 tokens (pair)
 *                                  RG 8, G 3,  TT 1, TPG 64, KC 64:  192 threads, 64 tokens
 *   R <= 48 (pre N 5, 6):          RG 8, G 6,  TT 1, TPG 32, KC 64:  192 threads, 32 tokens
 *   R <= 80 (pre N 7, 8):          RG 8, G 10, TT 1, TPG 32, KC 64:  320 threads, 32 tokens
 *
 * Napkin maths (H100 SXM, 132 SMs, FP32 pipe 128 lanes/clk/SM, ~1.75 GHz under load: 29.6 T instr/s;
 * HBM3 ~3 TB/s). mhc_pre, T = 16384, N = 4, K = 16384, R = 24, pair: 2 T R K = 12.9 G FMUL + FADD
 * -> 0.44 ms at the issue limit. Per thread and k: 32 FP32 instructions against 2 LDS.128 of weights
 * (broadcast, 1 wavefront each) and 0.5 LDS.128 of x (4 wavefronts): ~7 % issue overhead, shared
 * memory at ~50 % of its 128 B/clk; staging per element of x ~0.3 instructions per thread and k, the
 * sum of squares 2 FP32 instructions per element (K T 2 / (2 T R K) = 4 % of the GEMM). x is read once
 * (537 MB, 0.18 ms at 3 TB/s, overlapped with the math), fnt once per CTA from L2 (256 x 1.5 MiB).
 * 256 CTAs of 3 warps (52 KB shared memory each): one wave, ~2 per SM. Expected ~0.5 ms (~85 % of the
 * issue limit). mhc_head, R = 4: 2 T R K = 2.1 G plus the 0.5 G of the sum of squares -> 0.09 ms of
 * math under the 0.18 ms of reading x: bandwidth bound, ~0.2 ms expected; 16 KB of x in flight per CTA
 * (16 uint4 per thread), ~2 CTAs of 79 KB per SM.
 */
#ifndef ALIGN_MHC_PROJECT_CUH
#define ALIGN_MHC_PROJECT_CUH

#include "mhc_cuda.cuh"

/* kernel arguments */
struct mhc_pj_args {
	const align_bf16 *x; /* [T, K] */
	const float *fn;     /* [R, K] as stored (the NaN recompute) */
	const float *fnt;    /* [KP, RP] staged operands (pass 0) */
	float *mix;	     /* [T, R] */
	float *ss;	     /* [T] */
	long long T;
	int K, R;
	int opd_x, opd_fn; /* ALIGN_MATMUL_OPERAND_* */
	int accum;	   /* ALIGN_MATMUL_ACCUM_SEQ or _SPLIT16 */
	long long chunk;   /* split16: ceil(K / 16) */
	int x_vec;	   /* 1: rows of x may be read 8 bf16 at a time (K % 8 == 0, x 16-byte aligned) */
	int lv;		   /* slots of the sum-of-squares stack: floor(log2(ceil(K / 16))) + 1 */
};

/* pass 0: fnt[k * rp + r] = opd(fn[r, k]) for r < R and k < K, +0 elsewhere, k < kp */
static __global__ void mhc_pj_fnt_kernel(const float *fn, float *fnt, int K, int R, int rp, long long kp, int opd)
{
	const long long n = kp * rp;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (long long)gridDim.x * blockDim.x) {
		long long k = i / rp;
		int r = (int)(i % rp);
		fnt[i] = k < K && r < R ? matmul_operand(fn[(long long)r * K + k], opd) : 0.0f;
	}
}

/* the pairwise sum of squares of 16 staged values (16-byte aligned): the balanced tree, left + right */
__device__ __forceinline__ float mhc_pj_sq16(const float *v)
{
	float e[16];
#pragma unroll
	for (int q = 0; q < 4; q++) {
		float4 f = *(const float4 *)(v + 4 * q);
		e[4 * q] = f.x * f.x;
		e[4 * q + 1] = f.y * f.y;
		e[4 * q + 2] = f.z * f.z;
		e[4 * q + 3] = f.w * f.w;
	}
#pragma unroll
	for (int w = 1; w < 16; w *= 2)
#pragma unroll
		for (int i = 0; i < 16; i += 2 * w)
			e[i] = e[i] + e[i + w];
	return e[0];
}

/* the pairwise sum of squares of n < 16 staged values: the C twin's stack loop (binary counter) */
__device__ __forceinline__ float mhc_pj_sq_short(const float *v, int n)
{
	float st[4];
	for (int i = 0; i < n; i++) {
		float e = v[i] * v[i];
		int l = 0;
		while ((i >> l) & 1) {
			e = st[l] + e;
			l++;
		}
		st[l] = e;
	}
	int l = 0;
	while (!((n >> l) & 1))
		l++;
	float s = st[l];
	for (l++; l < 4; l++)
		if ((n >> l) & 1)
			s = st[l] + s;
	return s;
}

/* push node v, the node number n of its sum, onto the binary-counter stack st */
__device__ __forceinline__ void mhc_pj_push(float *st, float v, long long n)
{
	int l = 0;
	while ((n >> l) & 1) {
		v = st[l] + v;
		l++;
	}
	st[l] = v;
}

/* the final fold of a stack holding n nodes: the slots of the set bits of n, lowest first */
__device__ __forceinline__ float mhc_pj_fold(const float *st, long long n, int lv)
{
	int l = 0;
	while (!((n >> l) & 1))
		l++;
	float s = st[l];
	for (l++; l < lv; l++)
		if ((n >> l) & 1)
			s = st[l] + s;
	return s;
}

/* the NaN recomputes, out of line (they would cost the main loop registers and stack) */
static __device__ MM_NOINLINE float mhc_pj_sumsq_ref(const align_bf16 *x, long long K)
{
	return mhc_pairwise_sq_seq(x, K);
}

/* one k of a thread: acc[i][r] += x[i] * w[r] (products rounded, then added) */
template <int RG, int TT>
__device__ __forceinline__ void mhc_pj_step(float (&acc)[TT][RG], const float (&xv)[TT], const float *w)
{
	float wv[RG];
#pragma unroll
	for (int q = 0; q < RG / 4; q++) {
		float4 f = *(const float4 *)(w + 4 * q);
		wv[4 * q] = f.x;
		wv[4 * q + 1] = f.y;
		wv[4 * q + 2] = f.z;
		wv[4 * q + 3] = f.w;
	}
#pragma unroll
	for (int i = 0; i < TT; i++)
#pragma unroll
		for (int r = 0; r < RG; r++)
			acc[i][r] = acc[i][r] + xv[i] * wv[r];
}

/* 16 bytes of row t of x at column k (8 bf16), zeros past T or K */
__device__ __forceinline__ uint4 mhc_pj_ldx(const struct mhc_pj_args &a, long long t, long long k)
{
	uint4 v = make_uint4(0u, 0u, 0u, 0u);
	if (t >= a.T || k >= a.K)
		return v;
	const align_bf16 *p = a.x + t * a.K + k;
	if (a.x_vec)
		return __ldg((const uint4 *)p);
	unsigned h[8];
#pragma unroll
	for (int e = 0; e < 8; e++)
		h[e] = k + e < a.K ? (unsigned)p[e] : 0u;
	v.x = h[0] | h[1] << 16;
	v.y = h[2] | h[3] << 16;
	v.z = h[4] | h[5] << 16;
	v.w = h[6] | h[7] << 16;
	return v;
}

/* 8 bf16 (one uint4) -> F(.) -> opd, stored as two float4 at dst (16-byte aligned) */
__device__ __forceinline__ void mhc_pj_stx(float *dst, uint4 u, int opd)
{
	const unsigned w[4] = {u.x, u.y, u.z, u.w};
	float f[8];
#pragma unroll
	for (int q = 0; q < 4; q++) {
		f[2 * q] = matmul_operand(align_bits_f32(w[q] << 16), opd);
		f[2 * q + 1] = matmul_operand(align_bits_f32(w[q] & 0xffff0000u), opd);
	}
	*(float4 *)dst = make_float4(f[0], f[1], f[2], f[3]);
	*(float4 *)(dst + 4) = make_float4(f[4], f[5], f[6], f[7]);
}

/* shared memory of one configuration, floats: xs[2][BT][KC + 4] | ws[2][KC][RP] | sn[2][KC / 16][BT] | st[BT][lv] */
#define MHC_PJ_SMEM_FLOATS(BT, KC, RP, LV)                                                                             \
	(2 * (BT) * ((KC) + 4) + 2 * (KC) * (RP) + 2 * ((KC) / 16) * (BT) + (BT) * (LV))

template <int RG, int G, int TT, int TPG, int KC, int SPLIT>
__global__ void __launch_bounds__(TPG *G) mhc_pj_kernel(const struct mhc_pj_args a)
{
	constexpr int NT = TPG * G, BT = TPG * TT, RP = RG * G, XS = KC + 4, SUB = KC / 16;
	constexpr int XQ = KC / 8, X_SLOTS = BT * XQ, X_PER = (X_SLOTS + NT - 1) / NT;
	constexpr int W_SLOTS = KC * RP / 4, W_PER = (W_SLOTS + NT - 1) / NT;
	static_assert(KC % 16 == 0 && RG % 4 == 0, "KC: whole 16-element nodes; RG: whole float4");
	float *xs = (float *)align_cuda_dyn_smem();
	float *ws = xs + 2 * BT * XS;
	float *sn = ws + 2 * KC * RP;
	float *st = sn + 2 * SUB * BT;
	const int tid = threadIdx.x, g = tid / TPG, tl = tid % TPG;
	const long long K = a.K, tiles = (a.T + BT - 1) / BT, nch = (K + KC - 1) / KC, nsub = (K + 15) / 16;
	for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
		const long long t0 = tile * BT;
		float acc[TT][RG], tot[SPLIT ? TT : 1][SPLIT ? RG : 1];
#pragma unroll
		for (int i = 0; i < TT; i++)
#pragma unroll
			for (int r = 0; r < RG; r++)
				acc[i][r] = -0.0f;
#pragma unroll
		for (int i = 0; i < (SPLIT ? TT : 1); i++)
#pragma unroll
			for (int r = 0; r < (SPLIT ? RG : 1); r++)
				tot[i][r] = -0.0f;
		uint4 xr[X_PER];
		float4 wr[W_PER];
		/* fetch chunk c into registers; stage them into buffer b */
		auto fetch = [&](long long c) {
#pragma unroll
			for (int q = 0; q < X_PER; q++) {
				int s = tid + q * NT;
				if (X_SLOTS % NT == 0 || s < X_SLOTS)
					xr[q] = mhc_pj_ldx(a, t0 + s / XQ, c * KC + 8 * (s % XQ));
			}
			const float4 *src = (const float4 *)(a.fnt + c * KC * RP);
#pragma unroll
			for (int q = 0; q < W_PER; q++) {
				int s = tid + q * NT;
				if (W_SLOTS % NT == 0 || s < W_SLOTS)
					wr[q] = __ldg(src + s);
			}
		};
		auto stage = [&](int b) {
#pragma unroll
			for (int q = 0; q < X_PER; q++) {
				int s = tid + q * NT;
				if (X_SLOTS % NT == 0 || s < X_SLOTS)
					mhc_pj_stx(xs + (b * BT + s / XQ) * XS + 8 * (s % XQ), xr[q], a.opd_x);
			}
#pragma unroll
			for (int q = 0; q < W_PER; q++) {
				int s = tid + q * NT;
				if (W_SLOTS % NT == 0 || s < W_SLOTS)
					*(float4 *)(ws + b * KC * RP + 4 * s) = wr[q];
			}
		};
		/* thread (0, tl) pushes its tokens' level-4 nodes of chunk c (buffer c & 1) */
		auto push = [&](long long c) {
			const int ns = (int)(((K - c * KC < KC ? K - c * KC : KC) + 15) / 16);
			if (g == 0)
#pragma unroll
				for (int i = 0; i < TT; i++) {
					const int row = tl + i * TPG;
					for (int s = 0; s < ns; s++)
						mhc_pj_push(st + row * a.lv, sn[((c & 1) * SUB + s) * BT + row],
							    c * SUB + s);
				}
		};
		if (nch > 0) {
			fetch(0);
			stage(0);
		}
		__syncthreads();
		long long bnd = a.chunk; /* split16: the next chunk boundary */
		for (long long c = 0; c < nch; c++) {
			const int cur = (int)(c & 1);
			const long long k0 = c * KC;
			const int kmax = K - k0 < KC ? (int)(K - k0) : KC;
			if (c + 1 < nch)
				fetch(c + 1);
			if (c > 0)
				push(c - 1);
			const float *xb = xs + (cur * BT + tl) * XS, *wb = ws + cur * KC * RP + g * RG;
			if (kmax == KC && (!SPLIT || bnd >= k0 + KC)) { /* a full chunk without a boundary */
#pragma unroll 2
				for (int k4 = 0; k4 < KC; k4 += 4) {
					float xq[TT][4];
#pragma unroll
					for (int i = 0; i < TT; i++) {
						float4 f = *(const float4 *)(xb + i * TPG * XS + k4);
						xq[i][0] = f.x, xq[i][1] = f.y, xq[i][2] = f.z, xq[i][3] = f.w;
					}
#pragma unroll
					for (int kk = 0; kk < 4; kk++) {
						float xv[TT];
#pragma unroll
						for (int i = 0; i < TT; i++)
							xv[i] = xq[i][kk];
						mhc_pj_step<RG, TT>(acc, xv, wb + (k4 + kk) * RP);
					}
				}
			} else { /* the tail chunk, or a split16 boundary inside this chunk */
				for (int k4 = 0; k4 < kmax; k4 += 4) {
					float xq[TT][4];
#pragma unroll
					for (int i = 0; i < TT; i++) {
						float4 f = *(const float4 *)(xb + i * TPG * XS + k4);
						xq[i][0] = f.x, xq[i][1] = f.y, xq[i][2] = f.z, xq[i][3] = f.w;
					}
#pragma unroll
					for (int kk = 0; kk < 4; kk++) {
						if (k4 + kk >= kmax)
							break;
						if (SPLIT && k0 + k4 + kk == bnd) { /* close the chunk [bnd - c, bnd) */
#pragma unroll
							for (int i = 0; i < TT; i++)
#pragma unroll
								for (int r = 0; r < RG; r++) {
									tot[i % (SPLIT ? TT : 1)]
									   [r % (SPLIT ? RG : 1)] =
										   tot[i % (SPLIT ? TT : 1)]
										      [r % (SPLIT ? RG : 1)] +
										   acc[i][r];
									acc[i][r] = -0.0f;
								}
							bnd += a.chunk;
						}
						float xv[TT];
#pragma unroll
						for (int i = 0; i < TT; i++)
							xv[i] = xq[i][kk];
						mhc_pj_step<RG, TT>(acc, xv, wb + (k4 + kk) * RP);
					}
				}
			}
			/* the level-4 sum-of-squares nodes of this chunk, spread over the CTA */
			const int ns = (kmax + 15) / 16;
			for (int idx = tid; idx < ns * BT; idx += NT) {
				const int s = idx / BT, row = idx % BT, len = kmax - 16 * s < 16 ? kmax - 16 * s : 16;
				const float *v = xs + (cur * BT + row) * XS + 16 * s;
				sn[(cur * SUB + s) * BT + row] = len == 16 ? mhc_pj_sq16(v) : mhc_pj_sq_short(v, len);
			}
			if (c + 1 < nch)
				stage(cur ^ 1);
			__syncthreads();
		}
		if (g == 0) { /* the last chunk's nodes, the fold, ss */
			if (nch > 0)
				push(nch - 1);
#pragma unroll
			for (int i = 0; i < TT; i++) {
				const long long t = t0 + tl + i * TPG;
				if (t >= a.T)
					continue;
				float s = nsub > 0 ? mhc_pj_fold(st + (tl + i * TPG) * a.lv, nsub, a.lv) : 0.0f;
				if (align_isnanf(s))
					s = mhc_pj_sumsq_ref(a.x + t * K, K);
				a.ss[t] = s;
			}
		}
#pragma unroll
		for (int i = 0; i < TT; i++) {
			const long long t = t0 + tl + i * TPG;
			if (t >= a.T)
				continue;
#pragma unroll
			for (int r = 0; r < RG; r++) {
				const int row = g * RG + r;
				if (row >= a.R)
					continue;
				float v =
					SPLIT ? tot[i % (SPLIT ? TT : 1)][r % (SPLIT ? RG : 1)] + acc[i][r] : acc[i][r];
				if (K == 0)
					v = 0.0f;
				if (align_isnanf(v))
					v = mm_dot_ref(a.x + t * K, 1, a.fn + (long long)row * K, 0, K, a.opd_x,
						       a.opd_fn, a.accum, 0);
				a.mix[t * a.R + row] = v;
			}
		}
	}
}

/* launch one configuration: pass 0 into fnt, then the GEMM */
template <int RG, int G, int TT, int TPG, int KC>
static int mhc_pj_launch(struct mhc_pj_args a, float *fnt, int grid_cap, cudaStream_t stream)
{
	constexpr int BT = TPG * TT, RP = RG * G;
	const long long kp = ((long long)a.K + KC - 1) / KC * KC;
	ALIGN_CUDA_LAUNCH(mhc_pj_fnt_kernel, mhc_grid((kp * RP + 255) / 256, grid_cap > 0 ? grid_cap : 4096), 256, 0,
			  stream, a.fn, fnt, a.K, a.R, RP, kp, a.opd_fn);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_pj_fnt_kernel */
	a.fnt = fnt;
	const size_t smem = (size_t)MHC_PJ_SMEM_FLOATS(BT, KC, RP, a.lv) * sizeof(float);
	void (*k)(const struct mhc_pj_args) = a.accum == ALIGN_MATMUL_ACCUM_SPLIT16
						      ? mhc_pj_kernel<RG, G, TT, TPG, KC, 1>
						      : mhc_pj_kernel<RG, G, TT, TPG, KC, 0>;
	if (smem > 48 * 1024)
		OPS_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
	ALIGN_CUDA_LAUNCH(k, mhc_grid((a.T + BT - 1) / BT, grid_cap), TPG * G, smem, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of mhc_pj_kernel */
	return 0;
}

/* the fnt columns RP = RG G of the configuration mhc_cuda_project picks for R */
static inline int64_t mhc_pj_rp(int64_t R)
{
	return R <= 4 ? 4 : R <= 8 ? 8 : R <= 24 ? 24 : R <= 48 ? 48 : 80;
}

/* the fnt workspace of mhc_cuda_project, floats: KP <= ceil(K / 128) 128 rows of RP, rounded up to a
 * multiple of 64 (the next piece stays 256-byte aligned) */
static inline size_t mhc_pj_fnt_floats(int64_t R, int64_t K)
{
	return (size_t)(((K + 127) / 128 * 128) * mhc_pj_rp(R) + 63) / 64 * 64;
}

/* The mapping GEMM and the sums of squares of all T tokens (top of this file): mix[t * R + r], ss[t]; x
 * [T, K] bf16, fn [R, K] f32 as stored; fnt: mhc_pj_fnt_floats(R, K) floats of workspace; c: the decoded
 * switches (accum SEQ or SPLIT16, opd_x, opd_fn); pair: the two-tokens-per-thread variant for R <= 24.
 * Device pointers, asynchronous on stream. 0, ALIGN_ERR_INPUT (R > 80), ALIGN_ERR_INTERNAL. */
static inline int mhc_cuda_project(const align_bf16 *x, const float *fn, float *fnt, float *mix, float *ss, int64_t T,
				   int64_t R, int64_t K, const struct mhc_modes *c, int pair, int grid_cap,
				   cudaStream_t stream)
{
	struct mhc_pj_args a;
	a.x = x;
	a.fn = fn;
	a.fnt = fnt;
	a.mix = mix;
	a.ss = ss;
	a.T = T;
	a.K = (int)K;
	a.R = (int)R;
	a.opd_x = c->opd_x;
	a.opd_fn = c->opd_fn;
	a.accum = c->accum;
	a.chunk = (K + 15) / 16;
	a.x_vec = K % 8 == 0 && (uintptr_t)x % 16 == 0;
	a.lv = 1;
	while (((long long)1 << a.lv) <= (K + 15) / 16)
		a.lv++;
	if (c->accum != ALIGN_MATMUL_ACCUM_SEQ && c->accum != ALIGN_MATMUL_ACCUM_SPLIT16)
		return ops_cuda_bad_input("mhc_cuda_project", "accumulation order other than seq / split16");
	if (R <= 4)
		return mhc_pj_launch<4, 1, 1, 64, 128>(a, fnt, grid_cap, stream);
	if (R <= 8)
		return mhc_pj_launch<8, 1, 1, 64, 128>(a, fnt, grid_cap, stream);
	if (R <= 24)
		return pair ? mhc_pj_launch<8, 3, 2, 32, 64>(a, fnt, grid_cap, stream)
			    : mhc_pj_launch<8, 3, 1, 64, 64>(a, fnt, grid_cap, stream);
	if (R <= 48)
		return mhc_pj_launch<8, 6, 1, 32, 64>(a, fnt, grid_cap, stream);
	if (R <= 80)
		return mhc_pj_launch<8, 10, 1, 32, 64>(a, fnt, grid_cap, stream);
	return ops_cuda_bad_input("mhc_cuda_project", "more than 80 mapping rows");
}

#endif /* ALIGN_MHC_PROJECT_CUH */
