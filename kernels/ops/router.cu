/* router.cu: CUDA twin of the DSv4 MoE gate (contract: router.h; specification: router.c).
 * x[T,D] bf16, w[E,D] f32, bias[E] f32, ids[T] i32, tid2eid[V,K] i32 -> idx[T,K] i32, wt[T,K] f32, the C
 * twin's bytes in every portable mode; shapes and modes come from router_cfg_init (router.c, shared with
 * the C twin; the kernels read only the config); MATH_IMPL=libm has no GPU twin and returns 4; MATH_IMPL=cuda and
 * cuda_fast (GPU only) swap the score functions for CUDA's (math_cuda.cuh). ROUTER_TOPK_ORDER=torch and
 * ROUTER_SUM=torch run torch_order.h, the same code as the C twin.
 *
 * 1. Logits (router_gemm_kernel): l[t][e] = matmul_dot(xq_t, wq_e, D, seq, no FMA) with the C twin's
 *    operand rounding (ROUTER_GEMM: none, bf16 weight, TF32 both). A 64 x 64 (tokens x experts) tile per
 *    block, 256 threads with 4 x 4 outputs each, K staged 32 at a time in shared memory; every output is
 *    accumulated by one thread over k = 0, 1, ..., D-1 in order: acc starts at -0 and adds R(x_k w_k)
 *    for every k (-0 + p == p bit for bit, so after k = 0 acc is the C twin's a0*b0), never touching
 *    k >= D (no zero padding: acc + 0 would turn -0 into +0); nvcc --fmad=false keeps mul and add apart.
 *    A NaN logit is recomputed by its thread with nan_host.h operators (the host's NaN bits).
 *    Logits go to a workspace [E][T] so that step 2's threads (one token each) read coalesced.
 * 2. Routing (router_route_kernel): one thread per token runs router.c's steps 2-8 as written (scores in
 *    place of the logits, selection scores, group mask, top-K by strict '>' from e = 0, output order,
 *    normalisation in fp32 or fp64, route scale) on strided views of the workspace, with the portable
 *    numerics.h functions and nan_host.h operators. Sequential per token: the C twin's order exactly.
 * Hash layers check ids and table entries on the device; the twin then waits for its stream to read the
 * error flag and returns 2 like the C twin (outputs of valid tokens are written, as in C only before the
 * first bad token; the test compares outputs only when both twins succeed).
 * launch.serial: step 1 by one thread per token as well (the C loop); block: threads per block of step 2
 * (and of the serial path), grid_cap: blocks of both steps (grid-stride); rows_per_block is not used.
 *
 * Napkin maths (DSv4-Flash: T = 16384, D = 4096, E = 256, K = 6): GEMM 2TDE = 34.4 GFLOP as separate
 * FMUL + FADD (no FMA by contract): an H100 SXM issues 132 SMs x 128 lanes x ~1.75 GHz = 29.6 T lane
 * ops/s, so >= 1.16 ms at full issue; per K step a thread does 16 multiply-adds for 2 LDS.128, so the
 * kernel is issue bound (expect 1.5-2 ms). Bytes: 2TD (x) + 4ED (w) + 8TK out = 138 MB (~50 us): compute
 * bound, not a bandwidth kernel. Routing: ~E (softplus + sqrt) in fp64 per token (~0.1 GFLOP fp64) and
 * K E compares: ~0.1 ms.
 *
 * Run: tests/gpu/test-ops-cuda (bytes vs the C twin), tests/gpu/bench-ops (time; GB/s is not its limit).
 */
#include "router.h"

#include "math_cuda.cuh"
#include "matmul.h"
#include "rows_cuda.cuh"
#include "op_cfg.h"
#include "torch_order.h"

#define RT_BM 64 /* tokens per GEMM tile */
#define RT_BN 64 /* experts per GEMM tile */
#define RT_BK 32 /* k per shared-memory stage */
#define RT_PAD 4
#define RT_GEMM_THREADS 256
#define RT_GEMM_SMEM (2 * RT_BK * (RT_BM + RT_PAD) * sizeof(float))

struct rt_args {
	const align_bf16 *x;	/* [T, D] */
	const float *w;		/* [E, D] */
	const float *bias;	/* [E] */
	const int32_t *ids;	/* [T] */
	const int32_t *tid2eid; /* [V, K] */
	int32_t *idx;		/* [T, K] */
	float *wt;		/* [T, K] */
	float *ls;		/* workspace [E][T]: logits, then scores */
	float *bs;		/* workspace [E][T]: selection scores */
	unsigned char *taken;	/* workspace [E][T] */
	int *err;		/* workspace: set to 1 when a hash-layer id or table entry is out of range */
	int64_t T, D, E, V, K;
	int x_opd, w_opd; /* ALIGN_MATMUL_OPERAND_* of x and w (struct router_cfg) */
	int score;	  /* enum router_score */
	int n_groups, topk_groups, hash;
	float route_scale;
	int sp_eps;	  /* ROUTER_SQRTSOFTPLUS_EPS=1e-20 */
	int norm_eps;	  /* ROUTER_NORM_EPS=1e-20 */
	int sum64;	  /* ROUTER_SUM=fp64 */
	int sum_torch;	  /* ROUTER_SUM=torch */
	int index_order;  /* ROUTER_TOPK_ORDER=index */
	int topk_torch;	  /* ROUTER_TOPK_ORDER=torch */
	int math;	  /* ALIGN_MATH_IMPL_* value (math_cuda.cuh) */
	int mask_zero;	  /* ROUTER_GROUP_MASK=zero */
	int placeholder;  /* ROUTER_HASH_TABLE=placeholder */
	int vec_x, vec_w; /* 16-byte operand loads */
};

/* ---- step 1: logits ---- */

ALIGN_HD static inline float rt_xop(const rt_args &a, float v)
{
	return matmul_operand(v, a.x_opd);
}

ALIGN_HD static inline float rt_wop(const rt_args &a, float v)
{
	return matmul_operand(v, a.w_opd);
}

/* matmul_dot(xq_t, wq_e, D, seq, no FMA) with the host's NaN rules */
ALIGN_HD static inline float rt_dot_hn(const rt_args &a, int64_t t, int64_t e)
{
	if (a.D <= 0)
		return 0.0f;
	const align_bf16 *x = a.x + t * a.D;
	const float *w = a.w + e * a.D;
	float acc = hn_mul(rt_xop(a, align_bf16_to_f32(x[0])), rt_wop(a, w[0]));
	for (int64_t k = 1; k < a.D; k++)
		acc = hn_add(acc, hn_mul(rt_xop(a, align_bf16_to_f32(x[k])), rt_wop(a, w[k])));
	return acc;
}

/* stage k0 .. k0 + RT_BK of the tile rows: As[k][m] = xq[m0 + m][k0 + k], Bs[k][n] = wq[n0 + n][k0 + k] */
__device__ static inline void rt_stage(const rt_args &a, float (*As)[RT_BM + RT_PAD], float (*Bs)[RT_BN + RT_PAD],
				       int64_t m0, int64_t n0, int64_t k0)
{
	const int r = threadIdx.x / 4, kk = (threadIdx.x % 4) * 8;
	const int64_t t = m0 + r, e = n0 + r, kb = k0 + kk;
	float xv[8], wv[8];
	if (a.vec_x && t < a.T && kb + 8 <= a.D) {
		rows_unpack8(__ldg((const uint4 *)(a.x + t * a.D + kb)), xv);
	} else {
		for (int q = 0; q < 8; q++)
			xv[q] = t < a.T && kb + q < a.D ? align_bf16_to_f32(a.x[t * a.D + kb + q]) : 0.0f;
	}
	if (a.vec_w && e < a.E && kb + 8 <= a.D) {
		float4 u = __ldg((const float4 *)(a.w + e * a.D + kb)),
		       v = __ldg((const float4 *)(a.w + e * a.D + kb) + 1);
		wv[0] = u.x, wv[1] = u.y, wv[2] = u.z, wv[3] = u.w, wv[4] = v.x, wv[5] = v.y, wv[6] = v.z, wv[7] = v.w;
	} else {
		for (int q = 0; q < 8; q++)
			wv[q] = e < a.E && kb + q < a.D ? a.w[e * a.D + kb + q] : 0.0f;
	}
#pragma unroll
	for (int q = 0; q < 8; q++) {
		As[kk + q][r] = rt_xop(a, xv[q]);
		Bs[kk + q][r] = rt_wop(a, wv[q]);
	}
}

__global__ void __launch_bounds__(RT_GEMM_THREADS) router_gemm_kernel(rt_args a)
{
	float(*As)[RT_BM + RT_PAD] = (float(*)[RT_BM + RT_PAD]) align_cuda_dyn_smem();
	float(*Bs)[RT_BN + RT_PAD] = As + RT_BK;
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	const int64_t tiles_m = (a.T + RT_BM - 1) / RT_BM, tiles = tiles_m * ((a.E + RT_BN - 1) / RT_BN);
	for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
		const int64_t m0 = tile % tiles_m * RT_BM, n0 = tile / tiles_m * RT_BN;
		float acc[4][4];
#pragma unroll
		for (int i = 0; i < 4; i++)
#pragma unroll
			for (int j = 0; j < 4; j++)
				acc[i][j] = -0.0f;
		for (int64_t k0 = 0; k0 < a.D; k0 += RT_BK) {
			const int kn = a.D - k0 < RT_BK ? (int)(a.D - k0) : RT_BK;
			rt_stage(a, As, Bs, m0, n0, k0);
			__syncthreads();
			for (int kk = 0; kk < kn; kk++) {
				float4 av = *(const float4 *)&As[kk][ty * 4], bv = *(const float4 *)&Bs[kk][tx * 4];
				float xa[4] = {av.x, av.y, av.z, av.w}, wb[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
				for (int i = 0; i < 4; i++)
#pragma unroll
					for (int j = 0; j < 4; j++)
						acc[i][j] = FX_ADD(acc[i][j], FX_MUL(xa[i], wb[j]));
			}
			__syncthreads();
		}
#pragma unroll
		for (int i = 0; i < 4; i++)
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const int64_t t = m0 + ty * 4 + i, e = n0 + tx * 4 + j;
				if (t >= a.T || e >= a.E)
					continue;
				float v = a.D > 0 ? acc[i][j] : 0.0f;
				if (align_isnanf(v))
					v = rt_dot_hn(a, t, e);
				a.ls[e * a.T + t] = v;
			}
	}
}

/* ---- step 2: routing, one thread per token on strided views of the workspace ---- */

/* step 5 of router.c: k largest of b[0..n) (stride bs) by strict '>' from e = 0, skipping taken ones */
ALIGN_HD static inline void rt_topk(const float *b, int64_t bs, int64_t n, int64_t k, int32_t *sel,
				    unsigned char *taken, int64_t ts)
{
	for (int64_t e = 0; e < n; e++)
		taken[e * ts] = 0;
	for (int64_t j = 0; j < k; j++) {
		int64_t best = -1;
		float bb = 0.0f;
		for (int64_t e = 0; e < n; e++) {
			if (taken[e * ts])
				continue;
			float be = b[e * bs];
			if (best < 0 || be > bb || (align_isnanf(bb) && !align_isnanf(be))) {
				best = e;
				bb = be;
			}
		}
		taken[best * ts] = 1;
		sel[j] = (int32_t)best;
	}
}

/* step 4: group-limited masking of the token's b (stride T) in place */
ALIGN_HD static inline void rt_group_mask(const rt_args &a, float *b, unsigned char *taken)
{
	float gscore[ROUTER_MAX_K];
	int32_t sel[ROUTER_MAX_K], keep[ROUTER_MAX_K];
	const int64_t G = a.n_groups, gs = a.E / G, T = a.T;
	const int64_t per = a.K / a.topk_groups > 0 ? a.K / a.topk_groups : 1;
	for (int64_t g = 0; g < G; g++) {
		if (a.topk_torch) {
			float v[ROUTER_MAX_K];
			torch_topk(b + g * gs * T, T, gs, per, sel, taken, T);
			for (int64_t j = 0; j < per; j++)
				v[j] = b[(g * gs + sel[j]) * T];
			gscore[g] = torch_sum_lastdim(v, 1, per);
			continue;
		}
		rt_topk(b + g * gs * T, T, gs, per, sel, taken, T);
		float s = b[(g * gs + sel[0]) * T];
		for (int64_t j = 1; j < per; j++)
			s = hn_add(s, b[(g * gs + sel[j]) * T]);
		gscore[g] = s;
	}
	if (a.topk_torch)
		torch_topk(gscore, 1, G, a.topk_groups, keep, taken, T);
	else
		rt_topk(gscore, 1, G, a.topk_groups, keep, taken, T);
	for (int64_t g = 0; g < G; g++) {
		int kept = 0;
		for (int j = 0; j < a.topk_groups; j++)
			kept |= keep[j] == g;
		if (kept)
			continue;
		for (int64_t e = g * gs; e < (g + 1) * gs; e++)
			b[e * T] = a.mask_zero ? hn_mul(b[e * T], 0.0f) : -1.0f / 0.0f;
	}
}

/* step 2: scores in place of the token's logits l (stride T) */
ALIGN_HD static inline void rt_scores(const rt_args &a, float *l)
{
	const int64_t E = a.E, T = a.T;
	if (a.score == ROUTER_SCORE_SOFTMAX) {
		float mx = l[0];
		for (int64_t e = 1; e < E; e++)
			mx = l[e * T] > mx ? l[e * T] : mx;
		float z = 0.0f;
		for (int64_t e = 0; e < E; e++) {
			float s = dm_expf(a.math, hn_sub(l[e * T], mx));
			l[e * T] = s;
			z = e ? hn_add(z, s) : s;
		}
		for (int64_t e = 0; e < E; e++)
			l[e * T] = hn_div(l[e * T], z);
		return;
	}
	for (int64_t e = 0; e < E; e++) {
		float v = l[e * T];
		if (a.score == ROUTER_SCORE_SIGMOID) {
			l[e * T] = dm_sigmoidf(a.math, v);
		} else {
			float sp = dm_softplusf(a.math, v);
			if (a.sp_eps)
				sp = hn_add(sp, 1e-20f);
			l[e * T] = align_sqrtf(sp);
		}
	}
}

/* steps 2-8 for token t; returns 0, or 1 when a hash-layer id or table entry is out of range */
ALIGN_HD static inline int rt_route_token(const rt_args &a, int64_t t)
{
	const int64_t E = a.E, T = a.T, K = a.K, V = a.V;
	float *s = a.ls + t, *b = a.bs + t;
	unsigned char *taken = a.taken + t;
	int32_t sel[ROUTER_MAX_K];
	float wt[ROUTER_MAX_K];
	rt_scores(a, s);
	if (a.hash) {
		int32_t id = a.ids[t];
		if (id < 0 || id >= V)
			return 1;
		for (int64_t j = 0; j < K; j++) {
			int32_t e = !a.placeholder ? a.tid2eid[id * K + j] : (int32_t)((id + j) % E);
			if (e < 0 || e >= E)
				return 1;
			sel[j] = e;
		}
	} else {
		for (int64_t e = 0; e < E; e++)
			b[e * T] = hn_add(s[e * T], a.bias[e]);
		if (a.n_groups > 1)
			rt_group_mask(a, b, taken);
		if (a.topk_torch)
			torch_topk(b, T, E, K, sel, taken, T);
		else
			rt_topk(b, T, E, K, sel, taken, T);
	}
	if (a.index_order)
		for (int64_t j = 1; j < K; j++)
			for (int64_t i = j; i > 0 && sel[i] < sel[i - 1]; i--) {
				int32_t tmp = sel[i];
				sel[i] = sel[i - 1];
				sel[i - 1] = tmp;
			}
	for (int64_t j = 0; j < K; j++)
		wt[j] = s[sel[j] * T];
	if (a.score != ROUTER_SCORE_SOFTMAX) {
		float sum;
		if (a.sum_torch) {
			sum = torch_sum_lastdim(wt, 1, K);
		} else if (a.sum64) {
			double d = 0.0;
			for (int64_t j = 0; j < K; j++)
				d = hn_addd(d, hn_f2d(wt[j]));
			sum = hn_d2f(d);
		} else {
			sum = wt[0];
			for (int64_t j = 1; j < K; j++)
				sum = hn_add(sum, wt[j]);
		}
		if (a.norm_eps)
			sum = hn_add(sum, 1e-20f);
		for (int64_t j = 0; j < K; j++)
			wt[j] = hn_div(wt[j], sum);
	}
	for (int64_t j = 0; j < K; j++) {
		a.idx[t * K + j] = sel[j];
		a.wt[t * K + j] = hn_mul(wt[j], a.route_scale);
	}
	return 0;
}

__global__ void router_route_kernel(rt_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.T; t += (int64_t)gridDim.x * blockDim.x)
		if (rt_route_token(a, t))
			*a.err = 1;
}

/* launch.serial: one thread per token computes its logits with the C loop, then routes */
__global__ void router_serial_kernel(rt_args a)
{
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < a.T;
	     t += (int64_t)gridDim.x * blockDim.x) {
		for (int64_t e = 0; e < a.E; e++)
			a.ls[e * a.T + t] = rt_dot_hn(a, t, e);
		if (rt_route_token(a, t))
			*a.err = 1;
	}
}

static int64_t rt_grid(int64_t work, int per_block, int cap)
{
	int64_t g = (work + per_block - 1) / per_block;
	if (cap > 0 && g > cap)
		g = cap;
	return g > 0x7fffffff ? 0x7fffffff : g;
}

/* launches after the workspace exists; 0 or 3 */
static int rt_launch(const rt_args &a, const struct align_launch *L, cudaStream_t stream)
{
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, maxb = 0;
	int rc = rows_max_block(L->serial > 0 ? router_serial_kernel : router_route_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block; /* what the kernel's registers allow */
	OPS_CUDA_TRY(cudaMemsetAsync(a.err, 0, sizeof(int), stream));
	if (L->serial > 0) {
		ALIGN_CUDA_LAUNCH(router_serial_kernel, (unsigned)rt_grid(a.T, block, L->grid_cap), block, 0, stream,
				  a);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch of router_serial_kernel */
		return ALIGN_OK;
	}
	int64_t tiles = ((a.T + RT_BM - 1) / RT_BM) * ((a.E + RT_BN - 1) / RT_BN);
	ALIGN_CUDA_LAUNCH(router_gemm_kernel, (unsigned)rt_grid(tiles, 1, L->grid_cap), RT_GEMM_THREADS, RT_GEMM_SMEM,
			  stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of router_gemm_kernel */
	ALIGN_CUDA_LAUNCH(router_route_kernel, (unsigned)rt_grid(a.T, block, L->grid_cap), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch of router_route_kernel */
	return ALIGN_OK;
}

extern "C" int router_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			       struct align_tensor *out, int n_out, const struct align_launch *launch,
			       struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	struct router_cfg c;
	ALIGN_TRY(dev->err, router_cfg_init(&c, (const struct router_params *)params, m, in, n_in, out, n_out,
					    ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "router", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return align_fail(dev->err, ALIGN_ERR_INPUT, "router (cuda): negative launch knob");
	rt_args a;
	memset(&a, 0, sizeof a);
	a.x = (const align_bf16 *)in[0].data;
	a.w = (const float *)in[1].data;
	a.bias = (const float *)in[2].data;
	a.ids = (const int32_t *)in[3].data;
	a.tid2eid = (const int32_t *)in[4].data;
	a.idx = (int32_t *)out[0].data;
	a.wt = (float *)out[1].data;
	a.T = c.T;
	a.D = c.D;
	a.E = c.E;
	a.V = c.V;
	a.K = c.K;
	a.x_opd = c.x_opd;
	a.w_opd = c.w_opd;
	a.score = c.p.score;
	a.n_groups = c.p.n_groups;
	a.topk_groups = c.p.topk_groups;
	a.hash = c.p.hash;
	a.route_scale = c.p.route_scale;
	a.sp_eps = c.sp_eps;
	a.norm_eps = c.norm_eps;
	a.sum64 = c.sum == ALIGN_ROUTER_SUM_FP64;
	a.sum_torch = c.sum == ALIGN_ROUTER_SUM_TORCH;
	a.index_order = c.topk_order == ALIGN_ROUTER_TOPK_ORDER_INDEX;
	a.topk_torch = c.topk_order == ALIGN_ROUTER_TOPK_ORDER_TORCH;
	a.math = c.math;
	a.mask_zero = c.mask_zero;
	a.placeholder = c.placeholder;
	a.vec_x = a.D % 8 == 0 && rows_al16(a.x);
	a.vec_w = a.D % 4 == 0 && rows_al16(a.w);
	if (a.T <= 0 || a.E <= 0)
		return ALIGN_OK;
	/* the workspace: ls [E][T], bs [E][T], taken [E][T] (16-byte padded), err */
	size_t n = (size_t)(a.E * a.T), bytes = 2 * n * sizeof(float) + (n + 15) / 16 * 16 + 16;
	void *ws = NULL;
	ALIGN_TRY(dev->err, align_dev_scratch(dev, bytes, &ws));
	a.ls = (float *)ws;
	a.bs = a.ls + n;
	a.taken = (unsigned char *)(a.bs + n);
	a.err = (int *)(a.taken + (n + 15) / 16 * 16);
	int flag = 0;
	ALIGN_TRY(dev->err, rt_launch(a, L, stream));
	if (a.hash) {
		cudaError_t e = cudaMemcpyAsync(&flag, a.err, sizeof flag, cudaMemcpyDeviceToHost, stream);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(stream);
		if (e != cudaSuccess)
			return align_dev_fail(dev, "cudaMemcpyAsync / cudaStreamSynchronize (hash-layer check)", (int)e,
					      __FILE__, __LINE__);
	}
	if (flag)
		return align_fail(dev->err, ALIGN_ERR_INPUT,
				  "router (cuda): a token id or tid2eid entry is out of range (hash layer)");
	return ALIGN_OK;
}
