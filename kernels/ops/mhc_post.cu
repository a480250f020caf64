/* mhc_post.cu: CUDA twin of mHC hc_post (contract: mhc_post.h; specification: mhc_post.c).
 * x[T,N,D] bf16, f[T,D] bf16, post[T,N] f32, comb[T,N,N] f32 -> x_new[T,N,D] bf16, the C twin's bytes in
 * every mode (all portable); shapes and modes come from mhc_post_cfg_init (mhc_post.c), shared with the C
 * twin.
 *
 * Per token, as mhc_post.c: the coefficients H[j][k] (comb[j][k], or comb[k][j] when
 * MHC_HRES_TRANSPOSE=off) and P[k], rounded to bf16 for MHC_COEF=bf16 or MHC_POST_ROUND=double, one per
 * thread (threads gt < N*N + N, loaded during the previous token), stored to one of two shared-memory
 * buffers (alternating: one block barrier per token), then copied to registers. Per (k, d), with X_j =
 * F(x[t,j,d]), fo = F(f[t,d]):
 *   comb_first / double: a = H[0][k] X_0; a = a + H[j][k] X_j (j = 1..N-1);
 *                        out = R(a + P[k] fo), or R(R(P[k] fo) + R(a)) for double
 *   post_first:          o = P[k] fo; o = o + H[j][k] X_j (j = 0..N-1); out = R(o)
 * A sequential sum per output: the thread owning (k, d) runs the C twin's loop, operands in its order,
 * unfused; the formula is a template parameter of the fast path; a chunk with a NaN output is recomputed
 * out of line from global memory with the host's NaN rules (nan_host.h).
 *
 * Layout (knobs: rows_cuda.cuh): G threads per token (default 64), rpb tokens per block (default 2; picked by the H100
 * sweep); a thread owns chunks of 8 consecutive d (gt, gt + G, ...) and computes all N streams there: N + 1 16-byte
 * loads, N 16-byte stores; the next chunk's loads (possibly the next token's: they do not wait for its coefficients)
 * are issued before the current chunk is computed (scalar path when D % 8 != 0 or a pointer is unaligned). Kernels are
 * instantiated for N <= 4 and N <= 8 (MHC_MAX_N) so the stream loops unroll. launch.serial: one thread per token, the C
 * loops.
 *
 * Napkin maths (DSv4-Flash: T = 16384, N = 4, D = 4096): bytes = 2TND (x) + 2TD (f) + 2TND (out) +
 * 4T(N + N^2) (post, comb) = 1.21 GB; 2N + 2 FLOPs per output: memory bound, ~400 us at a ~3.0 TB/s
 * device copy on an H100 SXM. In flight: 80 bytes per thread for the next chunk while the current one
 * is computed; 128 registers -> 512 threads per SM -> ~40-80 KB per SM. The old kernel's thread 0 read
 * the 20 coefficients from global memory in dependent steps (each store to shared memory could alias
 * the next load) while the block waited at a barrier, twice per token pair, and each chunk's loads waited
 * for the previous chunk's stores. Issue: ~19 instructions per output, ~10K warp instructions per token
 * against ~23K issue slots per SM in the ~3.3 us a token takes at copy speed.
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (GB/s vs a device copy).
 */
#include "mhc_post.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#define MP_CO (MHC_MAX_N * MHC_MAX_N + MHC_MAX_N) /* floats of H and P per token */
#define MP_SMEM_ROW (2 * MP_CO * sizeof(float))	  /* per token slot: H and P, double-buffered */
#define MP_DEF_G 64  /* default threads per token (8 chunks each at D = 4096; H100 sweep) */
#define MP_DEF_RPB 2 /* default tokens per block */

enum { MP_COMB_FIRST, MP_POST_FIRST, MP_DOUBLE }; /* the output formula (mhc_post.h) */

struct mp_args {
	const align_bf16 *x;   /* [T, N, D] */
	const align_bf16 *f;   /* [T, D] */
	const float *post;     /* [T, N] */
	const float *comb;     /* [T, N, N] */
	align_bf16 *y;	       /* [T, N, D] */
	struct mhc_post_cfg c; /* dims and modes (mhc_post_cfg_init) */
	int rpb;	       /* rows per block */
	int vec;	       /* 16-byte path */
};

/* coefficient i of token t as mhc_post.c prepares it: i < N*N: H[i] (i = j*N + k: source j ->
 * destination k), else P[i - N*N] */
ALIGN_HD static inline float mp_coef(const mp_args &a, int64_t t, int i)
{
	const int64_t N = a.c.N;
	float c;
	if (i < N * N) {
		int64_t j = i / N, k = i % N;
		c = a.c.transpose ? a.comb[t * N * N + j * N + k] : a.comb[t * N * N + k * N + j];
	} else {
		c = a.post[t * N + (i - N * N)];
	}
	return a.c.coef_bf16 ? align_round_bf16(c) : c;
}

/* H (N x N, H[j*N + k]) and P of token t (serial path) */
ALIGN_HD static inline void mp_coefs(const mp_args &a, int64_t t, float *H, float *P)
{
	const int N = a.c.N;
	for (int i = 0; i < N * N; i++)
		H[i] = mp_coef(a, t, i);
	for (int k = 0; k < N; k++)
		P[k] = mp_coef(a, t, N * N + k);
}

/* output (k, d) from X_j = xj(j) and fo, before the bf16 rounding; HN: the host's NaN rules */
template <int NMAX, bool HN, class XJ>
ALIGN_HD static inline float mp_out_f(const mp_args &a, const float *H, const float *P, int k, const XJ &xj, float fo)
{
	const int N = a.c.N;
	float o;
	if (a.c.dbl || !a.c.post_first) {
		float acc = hx_mul<HN>(H[k], xj(0));
		for (int j = 1; j < NMAX; j++)
			if (j < N)
				acc = hx_add<HN>(acc, hx_mul<HN>(H[j * N + k], xj(j)));
		o = a.c.dbl ? hx_add<HN>(align_round_bf16(hx_mul<HN>(P[k], fo)), align_round_bf16(acc))
			    : hx_add<HN>(acc, hx_mul<HN>(P[k], fo));
	} else {
		o = hx_mul<HN>(P[k], fo);
		for (int j = 0; j < NMAX; j++)
			if (j < N)
				o = hx_add<HN>(o, hx_mul<HN>(H[j * N + k], xj(j)));
	}
	return o;
}

/* output (k, d): plain operators, a NaN result recomputed with the host's NaN rules */
template <int NMAX, class XJ>
ALIGN_HD static inline align_bf16 mp_out(const mp_args &a, const float *H, const float *P, int k, const XJ &xj,
					 float fo)
{
	float o = mp_out_f<NMAX, false>(a, H, P, k, xj, fo);
	if (align_isnanf(o))
		o = mp_out_f<NMAX, true>(a, H, P, k, xj, fo);
	return align_f32_to_bf16(o);
}

/* X_j of element d of token t, from global memory */
struct mp_global_x {
	const align_bf16 *x; /* x + t*N*D + d */
	int64_t D;
	ALIGN_HD float operator()(int j) const
	{
		return align_bf16_to_f32(x[(int64_t)j * D]);
	}
};

/* The fast path of output k of one element (X[j], fo), the formula a template parameter, coefficients
 * in registers (Hr[j][k], Pr[k]); the same operations as mp_out_f<NMAX, false> */
template <int NMAX, int FORM>
__device__ static inline float mp_fast(const float (*Hr)[NMAX], const float *Pr, int N, int k, const float *X, float fo)
{
	if (FORM == MP_POST_FIRST) {
		float o = FX_MUL(Pr[k], fo);
#pragma unroll
		for (int j = 0; j < NMAX; j++)
			if (j < N)
				o = FX_ADD(o, FX_MUL(Hr[j][k], X[j]));
		return o;
	}
	float acc = FX_MUL(Hr[0][k], X[0]);
#pragma unroll
	for (int j = 1; j < NMAX; j++)
		if (j < N)
			acc = FX_ADD(acc, FX_MUL(Hr[j][k], X[j]));
	if (FORM == MP_DOUBLE)
		return FX_ADD(align_round_bf16(FX_MUL(Pr[k], fo)), align_round_bf16(acc));
	return FX_ADD(acc, FX_MUL(Pr[k], fo));
}

/* raw chunk c of token t: the N streams and f (16-byte loads, all issued before any use) */
template <int NMAX> struct mp_raw {
	uint4 x[NMAX], f;
};

template <int NMAX> __device__ static inline void mp_load(const mp_args &a, int64_t t, int64_t c, mp_raw<NMAX> &r)
{
	const int64_t D8 = a.c.D / 8;
	const uint4 *x4 = (const uint4 *)a.x + t * a.c.N * D8 + c;
#pragma unroll
	for (int j = 0; j < NMAX; j++)
		if (j < a.c.N)
			r.x[j] = __ldg(x4 + j * D8);
	r.f = __ldg((const uint4 *)a.f + t * D8 + c);
}

/* bf16 element i (0..7) of a raw chunk, widened */
__device__ static inline float mp_elt(const uint4 &v, int i)
{
	uint32_t w = i < 2 ? v.x : i < 4 ? v.y : i < 6 ? v.z : v.w;
	return align_bf16_to_f32((align_bf16)(i % 2 ? w >> 16 : w & 0xffffu));
}

/* output (k, d) of token t from global memory: fast path, recomputed with the host's NaN rules when NaN
 * (out of line: the chunks' NaN path) */
template <int NMAX>
__device__ ROWS_NOINLINE static float mp_elem_slow(const mp_args &a, const float *H, const float *P, int64_t t,
						   int64_t d, int k)
{
	mp_global_x xj = {a.x + t * a.c.N * a.c.D + d, a.c.D};
	float fo = align_bf16_to_f32(a.f[t * a.c.D + d]);
	float o = mp_out_f<NMAX, false>(a, H, P, k, xj, fo);
	return align_isnanf(o) ? mp_out_f<NMAX, true>(a, H, P, k, xj, fo) : o;
}

/* the N output chunks of chunk c of token t from its raw inputs, element by element (the N + 1 inputs of
 * one element unpacked at a time, outputs packed as they come: fewer live registers). A chunk with a NaN
 * output is recomputed out of line, element by element. */
template <int NMAX, int FORM>
__device__ static inline void mp_chunk(const mp_args &a, const float *H, const float *P, const float (*Hr)[NMAX],
				       const float *Pr, int64_t t, int64_t c, const mp_raw<NMAX> &r)
{
	const int N = a.c.N;
	uint32_t hp[NMAX][4];
	bool nan = false;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float X[NMAX];
#pragma unroll
		for (int j = 0; j < NMAX; j++)
			X[j] = j < N ? mp_elt(r.x[j], i) : 0.0f;
		float fo = mp_elt(r.f, i);
#pragma unroll
		for (int k = 0; k < NMAX; k++) {
			if (k >= N)
				continue;
			float o = mp_fast<NMAX, FORM>(Hr, Pr, N, k, X, fo);
			nan |= align_isnanf(o);
			uint32_t h = align_f32_to_bf16(o);
			hp[k][i / 2] = i % 2 ? hp[k][i / 2] | h << 16 : h;
		}
	}
	uint4 *y4 = (uint4 *)a.y + t * N * (a.c.D / 8) + c;
	if (nan) {
		for (int k = 0; k < N; k++) {
			align_bf16 h[8];
			for (int i = 0; i < 8; i++)
				h[i] = align_f32_to_bf16(mp_elem_slow<NMAX>(a, H, P, t, 8 * c + i, k));
			y4[(int64_t)k * (a.c.D / 8)] = rows_pack8(h);
		}
		return;
	}
#pragma unroll
	for (int k = 0; k < NMAX; k++)
		if (k < N)
			y4[(int64_t)k * (a.c.D / 8)] = make_uint4(hp[k][0], hp[k][1], hp[k][2], hp[k][3]);
}

/* G threads per token. Threads gt < N*N + N each hold one coefficient of the next token in a register
 * (loaded while the current token is computed) and store it to the token's H/P buffer at the top of the
 * iteration (two buffers, alternating: one barrier per token). 16-byte path: each thread walks its
 * chunks gt, gt + G, ... of its tokens with the next chunk's N + 1 loads in flight while the current one
 * is computed (the next chunk may be the next token's: its loads do not wait for its coefficients). */
template <int NMAX, int FORM> __global__ void mhc_post_rows_kernel(mp_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	float *Hb = (float *)(align_cuda_dyn_smem() + (size_t)rg.g * MP_SMEM_ROW);
	const int N = a.c.N, nco = N * N + N;
	const int64_t step = (int64_t)gridDim.x * a.rpb, nch = a.c.D / 8;
	int64_t t = (int64_t)blockIdx.x * a.rpb + rg.g;
	float co = t < a.c.T && rg.gt < nco ? mp_coef(a, t, rg.gt) : 0.0f;
	mp_raw<NMAX> cur;
	if (a.vec && t < a.c.T && rg.gt < nch)
		mp_load<NMAX>(a, t, rg.gt, cur);
	int buf = 0;
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.c.T; r0 += step, buf ^= 1) {
		t = r0 + rg.g;
		bool valid = t < a.c.T;
		float *H = Hb + buf * MP_CO, *P = H + MHC_MAX_N * MHC_MAX_N;
		const int64_t tn = t + step;
		if (valid && rg.gt < nco) {
			if (rg.gt < N * N)
				H[rg.gt] = co;
			else
				P[rg.gt - N * N] = co;
			if (tn < a.c.T)
				co = mp_coef(a, tn, rg.gt);
		}
		__syncthreads();
		if (!valid)
			continue;
		if (!a.vec) {
			const align_bf16 *xt = a.x + t * N * a.c.D, *ft = a.f + t * a.c.D;
			align_bf16 *yt = a.y + t * N * a.c.D;
			for (int64_t d = rg.gt; d < a.c.D; d += rg.G) {
				mp_global_x xj = {xt + d, a.c.D};
				float fo = align_bf16_to_f32(ft[d]);
				for (int k = 0; k < N; k++)
					yt[(int64_t)k * a.c.D + d] = mp_out<NMAX>(a, H, P, k, xj, fo);
			}
			continue;
		}
		float Hr[NMAX][NMAX], Pr[NMAX];
#pragma unroll
		for (int j = 0; j < NMAX; j++) {
			Pr[j] = j < N ? P[j] : 0.0f;
#pragma unroll
			for (int k = 0; k < NMAX; k++)
				Hr[j][k] = j < N && k < N ? H[j * N + k] : 0.0f;
		}
		for (int64_t c = rg.gt; c < nch; c += rg.G) {
			int64_t cn = c + rg.G, tl = t;
			if (cn >= nch) {
				cn = rg.gt;
				tl = tn;
			}
			mp_raw<NMAX> nxt;
			if (tl < a.c.T)
				mp_load<NMAX>(a, tl, cn, nxt);
			mp_chunk<NMAX, FORM>(a, H, P, Hr, Pr, t, c, cur);
			cur = nxt;
		}
	}
}

/* launch.serial: one thread per token, the loops of mhc_post.c */
__global__ void mhc_post_serial_kernel(mp_args a)
{
	const int N = a.c.N;
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.c.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		float H[MHC_MAX_N * MHC_MAX_N], P[MHC_MAX_N];
		mp_coefs(a, t, H, P);
		for (int k = 0; k < N; k++)
			for (int64_t d = 0; d < a.c.D; d++) {
				mp_global_x xj = {a.x + t * N * a.c.D + d, a.c.D};
				a.y[(t * N + k) * a.c.D + d] =
					mp_out<MHC_MAX_N>(a, H, P, k, xj, align_bf16_to_f32(a.f[t * a.c.D + d]));
			}
	}
}

template <int NMAX> static void (*mp_kernel(const mp_args &a))(mp_args)
{
	return a.c.dbl		? mhc_post_rows_kernel<NMAX, MP_DOUBLE>
	       : a.c.post_first ? mhc_post_rows_kernel<NMAX, MP_POST_FIRST>
				: mhc_post_rows_kernel<NMAX, MP_COMB_FIRST>;
}

/* rows_op.pick: the kernel of N (streams unrolled up to 4 or 8) and of the formula */
static void mp_pick(const mp_args &a, int G, void (**k)(mp_args), size_t *row_smem)
{
	(void)G;
	*k = a.c.N <= 4 ? mp_kernel<4>(a) : mp_kernel<MHC_MAX_N>(a);
	*row_smem = MP_SMEM_ROW;
}

extern "C" int mhc_post_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				 int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				 struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	mp_args a;
	ALIGN_TRY(dev->err, mhc_post_cfg_init(&a.c, (const struct mhc_params *)params, m, in, n_in, out, n_out,
					      ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "mhc_post", in, n_in, out, n_out));
	a.x = (const align_bf16 *)in[0].data;
	a.f = (const align_bf16 *)in[1].data;
	a.post = (const float *)in[2].data;
	a.comb = (const float *)in[3].data;
	a.y = (align_bf16 *)out[0].data;
	a.rpb = 1;
	a.vec = a.c.D % 8 == 0 && rows_al16(a.x) && rows_al16(a.f) && rows_al16(a.y);
	if (a.c.T <= 0 || a.c.N <= 0 || a.c.D <= 0)
		return ALIGN_OK;
	const rows_op<mp_args> op = {"mhc_post", a.c.T, MP_DEF_G, MP_DEF_RPB, mhc_post_serial_kernel, mp_pick};
	return rows_launch(op, launch, a, stream);
}
