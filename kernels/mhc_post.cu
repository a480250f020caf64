/* mhc_post.cu: CUDA twin of mHC hc_post (contract: mhc_post.h; specification: mhc_post.c).
 * x[T,N,D] bf16, f[T,D] bf16, post[T,N] f32, comb[T,N,N] f32 -> x_new[T,N,D] bf16, the C twin's bytes in
 * every mode (all portable).
 *
 * Per token, as mhc_post.c: the coefficients H[j][k] (comb[j][k], or comb[k][j] when
 * MHC_HRES_TRANSPOSE=off) and P[k], rounded to bf16 for MHC_COEF=bf16 or MHC_POST_ROUND=double, are
 * prepared once in shared memory. Per (k, d), with X_j = F(x[t,j,d]), fo = F(f[t,d]):
 *   comb_first / double: a = H[0][k] X_0; a = a + H[j][k] X_j (j = 1..N-1);
 *                        out = R(a + P[k] fo), or R(R(P[k] fo) + R(a)) for double
 *   post_first:          o = P[k] fo; o = o + H[j][k] X_j (j = 0..N-1); out = R(o)
 * A sequential sum per output: the thread owning (k, d) runs the C twin's loop, operands in its order,
 * unfused, through nan_host.h where a NaN can appear.
 *
 * Layout: G = 128 threads per token, 2 tokens per block by default (knobs: rows_cuda.cuh); a thread owns
 * chunks of 8 consecutive d and computes all N streams there: N + 1 16-byte loads, N 16-byte stores
 * (scalar path when D % 8 != 0 or a pointer is unaligned). Kernels are instantiated for N <= 4 and
 * N <= 8 (MHC_MAX_N) so the stream loops unroll. launch.serial: one thread per token, the C loops.
 *
 * Napkin maths (DSv4-Flash: T = 16384, N = 4, D = 4096): bytes = 2TND (x) + 2TD (f) + 2TND (out) +
 * 4T(N + N^2) (post, comb) = 1.21 GB; 2N + 2 FLOPs per output: memory bound, ~415 us at a ~2.9 TB/s
 * device copy on an H100 SXM.
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (GB/s vs a device copy).
 */
#include "mhc_post.h"

#include "rows_cuda.cuh"

#define MP_SMEM_ROW ((MHC_MAX_N * MHC_MAX_N + MHC_MAX_N) * sizeof(float)) /* H and P per token */

struct mp_args {
	const align_bf16 *x; /* [T, N, D] */
	const align_bf16 *f; /* [T, D] */
	const float *post;   /* [T, N] */
	const float *comb;   /* [T, N, N] */
	align_bf16 *y;       /* [T, N, D] */
	int64_t T, D;
	int N;
	int transpose;  /* MHC_HRES_TRANSPOSE=on: H[j][k] = comb[j][k] */
	int dbl;        /* MHC_POST_ROUND=double */
	int coef_bf16;  /* MHC_COEF=bf16 or double */
	int post_first; /* MHC_POST_ORDER=post_first */
	int rpb;        /* rows per block */
	int vec;        /* 16-byte path */
};

/* H (N x N, H[j*N + k]: source j -> destination k) and P of token t, as mhc_post.c */
ALIGN_HD static inline void mp_coefs(const mp_args &a, int64_t t, float *H, float *P)
{
	const int64_t N = a.N;
	for (int64_t j = 0; j < N; j++)
		for (int64_t k = 0; k < N; k++) {
			float c = a.transpose ? a.comb[t * N * N + j * N + k] : a.comb[t * N * N + k * N + j];
			H[j * N + k] = a.coef_bf16 ? align_round_bf16(c) : c;
		}
	for (int64_t k = 0; k < N; k++)
		P[k] = a.coef_bf16 ? align_round_bf16(a.post[t * N + k]) : a.post[t * N + k];
}

/* output (k, d) from X_j = xj(j) and fo, before the bf16 rounding; HN: the host's NaN rules */
template <int NMAX, bool HN, class XJ>
ALIGN_HD static inline float mp_out_f(const mp_args &a, const float *H, const float *P, int k, const XJ &xj, float fo)
{
	const int N = a.N;
	float o;
	if (a.dbl || !a.post_first) {
		float acc = hx_mul<HN>(H[k], xj(0));
		for (int j = 1; j < NMAX; j++)
			if (j < N)
				acc = hx_add<HN>(acc, hx_mul<HN>(H[j * N + k], xj(j)));
		o = a.dbl ? hx_add<HN>(align_round_bf16(hx_mul<HN>(P[k], fo)), align_round_bf16(acc))
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

/* X_j of element i of an unpacked chunk: xs[j][i] */
struct mp_chunk_x {
	const float (*xs)[8];
	int i;
	ALIGN_HD float operator()(int j) const { return xs[j][i]; }
};

/* X_j of element d of token t, from global memory */
struct mp_global_x {
	const align_bf16 *x; /* x + t*N*D + d */
	int64_t D;
	ALIGN_HD float operator()(int j) const { return align_bf16_to_f32(x[(int64_t)j * D]); }
};

template <int NMAX> __global__ void mhc_post_rows_kernel(mp_args a)
{
	rows_geom rg = rows_geom_make(a.rpb);
	float *H = (float *)(align_cuda_dyn_smem() + (size_t)rg.g * MP_SMEM_ROW), *P = H + MHC_MAX_N * MHC_MAX_N;
	const int N = a.N;
	for (int64_t r0 = (int64_t)blockIdx.x * a.rpb; r0 < a.T; r0 += (int64_t)gridDim.x * a.rpb) {
		int64_t t = r0 + rg.g;
		bool valid = t < a.T;
		if (valid && rg.gt == 0)
			mp_coefs(a, t, H, P);
		__syncthreads();
		if (valid) {
			const align_bf16 *xt = a.x + t * N * a.D, *ft = a.f + t * a.D;
			align_bf16 *yt = a.y + t * N * a.D;
			if (a.vec) {
				for (int64_t c = rg.gt; c < a.D / 8; c += rg.G) {
					float xs[NMAX][8], fo[8];
#pragma unroll
					for (int j = 0; j < NMAX; j++)
						if (j < N)
							rows_unpack8(__ldg((const uint4 *)(xt + (int64_t)j * a.D) + c),
							             xs[j]);
					rows_unpack8(__ldg((const uint4 *)ft + c), fo);
#pragma unroll
					for (int k = 0; k < NMAX; k++) {
						if (k >= N)
							continue;
						align_bf16 h[8];
#pragma unroll
						for (int i = 0; i < 8; i++) {
							mp_chunk_x xj = {xs, i};
							h[i] = mp_out<NMAX>(a, H, P, k, xj, fo[i]);
						}
						((uint4 *)(yt + (int64_t)k * a.D))[c] = rows_pack8(h);
					}
				}
			} else {
				for (int64_t d = rg.gt; d < a.D; d += rg.G) {
					mp_global_x xj = {xt + d, a.D};
					float fo = align_bf16_to_f32(ft[d]);
					for (int k = 0; k < N; k++)
						yt[(int64_t)k * a.D + d] = mp_out<NMAX>(a, H, P, k, xj, fo);
				}
			}
		}
		__syncthreads();
	}
}

/* launch.serial: one thread per token, the loops of mhc_post.c */
__global__ void mhc_post_serial_kernel(mp_args a)
{
	const int N = a.N;
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		float H[MHC_MAX_N * MHC_MAX_N], P[MHC_MAX_N];
		mp_coefs(a, t, H, P);
		for (int k = 0; k < N; k++)
			for (int64_t d = 0; d < a.D; d++) {
				mp_global_x xj = {a.x + t * N * a.D + d, a.D};
				a.y[(t * N + k) * a.D + d] =
				    mp_out<MHC_MAX_N>(a, H, P, k, xj, align_bf16_to_f32(a.f[t * a.D + d]));
			}
	}
}

extern "C" int mhc_post_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
                                 int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
                                 cudaStream_t stream)
{
	(void)params; /* hc_post reads no field of struct mhc_params */
	if (!m || !in || !out || n_in != 4 || n_out != 1 || in[0].ndim != 3)
		return ops_cuda_bad_input("mhc_post", "want x[T,N,D], f[T,D], post[T,N], comb[T,N,N] -> x_new[T,N,D]");
	int64_t T = in[0].shape[0], N = in[0].shape[1], D = in[0].shape[2];
	int64_t xs[3] = {T, N, D}, fs[2] = {T, D}, ns[2] = {T, N}, cs[3] = {T, N, N};
	if (N > MHC_MAX_N || ops_check(&in[0], ALIGN_DT_BF16, 3, xs) || ops_check(&in[1], ALIGN_DT_BF16, 2, fs) ||
	    ops_check(&in[2], ALIGN_DT_F32, 2, ns) || ops_check(&in[3], ALIGN_DT_F32, 3, cs) ||
	    ops_check(&out[0], ALIGN_DT_BF16, 3, xs))
		return ops_cuda_bad_input("mhc_post",
		                          "shape or dtype mismatch (want x[T,N,D] bf16, f[T,D] bf16, post[T,N] "
		                          "f32, comb[T,N,N] f32, x_new[T,N,D] bf16, N <= 8)");
	mp_args a;
	a.x = (const align_bf16 *)in[0].data;
	a.f = (const align_bf16 *)in[1].data;
	a.post = (const float *)in[2].data;
	a.comb = (const float *)in[3].data;
	a.y = (align_bf16 *)out[0].data;
	a.T = T;
	a.D = D;
	a.N = (int)N;
	a.transpose = m->v[MODE_MHC_HRES_TRANSPOSE] == 0;
	a.dbl = m->v[MODE_MHC_POST_ROUND] == 1;
	a.coef_bf16 = a.dbl || m->v[MODE_MHC_COEF] == 1;
	a.post_first = m->v[MODE_MHC_POST_ORDER] == 1;
	a.vec = D % 8 == 0 && rows_al16(a.x) && rows_al16(a.f) && rows_al16(a.y);
	if (T <= 0 || N <= 0 || D <= 0)
		return ALIGN_OK;
	struct rows_plan p = {0, 0, 0, 0, 0, 0};
	void (*rows_kernel)(mp_args) = N <= 4 ? mhc_post_rows_kernel<4> : mhc_post_rows_kernel<MHC_MAX_N>;
	int mr = 0, ms = 0, rc = rows_max_block(rows_kernel, &mr);
	if (!rc)
		rc = rows_max_block(mhc_post_serial_kernel, &ms);
	if (!rc)
		rc = rows_plan_make("mhc_post", launch, T, MP_SMEM_ROW, 128, 2, mr, ms, &p);
	if (rc)
		return rc;
	a.rpb = p.rpb;
	if (p.grid == 0)
		return ALIGN_OK;
	if (p.serial) {
		ALIGN_CUDA_LAUNCH(mhc_post_serial_kernel, p.grid, p.block, 0, stream, a);
	} else {
		OPS_CUDA_TRY(rows_smem_optin(rows_kernel, p.smem));
		ALIGN_CUDA_LAUNCH(rows_kernel, p.grid, p.block, p.smem, stream, a);
	}
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
