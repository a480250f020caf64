/* compressor.h: DSv4 KV compressor (specs/dsv4-numerics.md 3.4; QAT emulation 3.9), main (d = 512) and
 * indexer (d = 128, rotate) compressors, overlapping (r = 4, coff = 2) and non-overlapping (r = 128).
 * x[T*K,D] bf16 (the normed attention input of T*K tokens = T whole groups of K = r tokens; the caller
 * drops the tokens past the cutoff s - s mod r), wkv[N*F,D] bf16, wgate[N*F,D] bf16 (N = coff: 2
 * overlapping, 1 not), ape[K,N*F] f32, w[F] f32 (norm weight) -> c[T,F] bf16 (compressed entry g, at
 * position pos0 + g*K). Dims: T groups, K ratio, N coff, D hidden, F = d. Saved state for the backward: none
 * beyond the inputs (the pooled value and the softmax weights are recomputed).
 *
 * Operation order (CPU twin = specification), binary32 unless stated, R = round to bf16, F = bf16 -> f32:
 *   1. projections, row t (token), column j < N*F: k = sum_d F(x[t,d]) F(wkv[j,d]), z likewise with
 *      wgate, d ascending from +0 (the bf16 products are exact in binary32: DS-ref's fp32 GEMM on bf16-exact
 *      weights and bf16 x bf16 -> fp32 GEMMs agree in this order);
 *      CSA_COMP_GEMM=fp32: K = k, Z = z;  bf16: K = R(k), Z = R(z).
 *   2. ape: CSA_COMP_APE=fp32: Z = Z + ape[t mod K, j];  bf16: Z = R(R(Z) + R(ape[t mod K, j])).
 *   3. window of group g, channel c < F, 2K positions (N = 2) or K (N = 1), ascending:
 *      N = 2: positions p < K: token (g-1)K + p, column c (for g = 0: K = 0, Z = -inf);
 *             positions K + p: token gK + p, column F + c;
 *      N = 1: position p: token gK + p, column c.
 *   4. softmax over the window positions, per channel: m = max (ascending, a NaN taken and kept);
 *      e_p = E(Z_p - m) (E = exp of MATH_IMPL: portable align_expf, libm, CUDA expf / __expf);
 *      s = sum e_p ascending from +0; w_p = e_p / s; CSA_COMP_POOL=bf16: w_p = R(w_p).
 *   5. CSA_COMP_SUM=fp32: C = sum_p w_p K_p ascending from +0;
 *      bf16: C = R(sum_p R(w_p K_p)) (bf16 products, fp32 accumulation, bf16 output).
 *   4-5 under CSA_COMP_SUM_ORDER=torch (PyTorch eager CUDA on the contiguous [groups, n, F] window tensor,
 *      n = N K: softmax(dim=2) then (kv * score).sum(dim=2); read in ATen's SoftMax.cu and Reduce.cuh):
 *      s as ATen's cunn_SpatialSoftMaxForward sums it: F > 64 or n < 64 (DSv4: F = 128, 512) one thread
 *      walks the window, ascending from +0 as above; else t threads (SpatialSoftMax_getBlockSize: the
 *      largest power of two with F t <= 1024, t <= n) each sum positions x, x + t, ... and a tree joins them
 *      (compressor_pool_stats); the sum of step 5 in torch_sum_cols's order with the step of
 *      torch_sum_cols_step_v(n, groups F, F) (torch_order.h; one thread per output, four accumulators, for
 *      the DSv4 shapes). e_p, w_p and the products as above. Refused where torch_order.h has no model.
 *   6. RMSNorm of the row C[0..F): CSA_COMP_NORM=bf16_input: x = F(R(C)); fp32: x = C;
 *      r = rsqrt(sum x^2 / F + eps) (RMSNORM_REDUCE order, RMSNORM_RSQRT, RMSNORM_EPS: rmsnorm.h;
 *      RMSNORM_REDUCE=torch: ATen's row reduction of the [T, F] entries and its mean, rmsnorm.h);
 *      w' = w or F(R(w)) (RMSNORM_WEIGHT); y = R(w' * (x * r)).
 *   7. RoPE (rope.h, ROPE_* switches, params.rope) of the bf16 row at position pos0 + g*K.
 *   8. rotate (indexer compressor): v = F(y); Hadamard over F (a power of two): CSA_HADAMARD=library:
 *      strides h = 1, 2, ..., F/2 (fast_hadamard_transform: in-thread stages first, then the warp
 *      exchanges; inference from its layout); butterfly: h = F/2, ..., 1 (inference: PaddleFleet's pure
 *      fp32 butterfly was not read); each stage (a, b) -> (a + b, a - b); then y = R(v * (float)F^-0.5).
 *   9. CSA_QAT=on (DS-ref act_quant / fp4_act_quant, ue8m0 scales, Pro kernel_tilelang semantics):
 *      main: FP8 e4m3 on the nope dims [0, F - rope_dim) in blocks of 64 (the last block shorter);
 *      rotate: FP4 e2m1 on all F dims in blocks of 32. Per block: amax = max(max |y|, floor) (floor
 *      1e-4f fp8, 6 * 2^-126 fp4; a NaN gives NaN); s = 2^ceil(log2(amax / qmax)) (qmax 448 or 6, binary32
 *      quotient); q = round_fmt(clamp(y / s, -qmax, qmax)) (round to nearest even in e4m3: 3 mantissa
 *      bits, min normal 2^-6; e2m1: 1 bit, min normal 1); y = R(q * s).
 * No fused multiply-add anywhere (both twins compiled without contraction).
 * Error bound vs fp64 (test-ops-ref-compressor.c, QAT off, fp32 projection/pool/sum, every norm switch value,
 * compared on the nope dims [0, F - rope_dim) before RoPE): with u = 2^-24, A = sum_p w_p sum_d |x_d wkv_d|,
 * P = sum_p w_p |K_p|, Zmax = max_p (sum_d |x_d wgate_d| + |ape|), Cerr = 2u (A (D + 2K + 4) + P (Zmax (D + 2)
 * + 8K)): |y - ref| <= ulp_bf16(ref) + |ref| (2^-7 + (F + 16) u) + 2 |w'| r Cerr (the bf16 rounding of C
 * before the norm and its effect on the factor; the norm's binary32 steps; the projection and softmax
 * errors scaled by the norm factor). The bf16 switch values add their stated roundings on top.
 * Groups are independent and never depend on T (batch invariant); no float atomics.
 *
 * C entry points for other ops (attn; host and device, ALIGN_HD): compressor_proj (steps 1-2 of one
 * element), compressor_window (3) and compressor_pool (4-5) of one channel, compressor_norm_row (6), compressor_hadamard (8),
 * compressor_qdq_row (9 on a row), compressor_qdq_block; struct compressor_cfg from compressor_cfg_modes;
 * compressor_pool_stats / compressor_pool_weight (4's m, s, w_p) and compressor_norm_factor (6's r) for
 * compressor_bwd, which recomputes them.
 */
#ifndef ALIGN_COMPRESSOR_H
#define ALIGN_COMPRESSOR_H

#include <math.h>
#include <stdint.h>

#include "nan_host.h"
#include "numerics.h"
#include "rmsnorm.h"
#include "rope.h"

#ifdef __cplusplus
extern "C" {
#endif

struct align_modes;
struct align_tensor;
struct align_err;

#define COMPRESSOR_MAX_F 4096 /* output dim limit (the CUDA row code keeps no per-row arrays) */

struct compressor_params {
	int rotate;		 /* 1: indexer compressor (Hadamard, FP4 QDQ); 0: main (FP8 QDQ of the nope dims) */
	struct rope_params rope; /* compressed-layer RoPE (YaRN, compress_rope_theta) */
	int32_t pos0;		 /* position of token 0 (entry g sits at pos0 + g*K); 0 in prefill */
};

/* every decoded choice (no dims): shared with attn */
struct compressor_cfg {
	int gemm_bf16;	  /* CSA_COMP_GEMM=bf16 */
	int ape_bf16;	  /* CSA_COMP_APE=bf16 */
	int pool_bf16;	  /* CSA_COMP_POOL=bf16 */
	int sum_bf16;	  /* CSA_COMP_SUM=bf16 */
	int sum_torch;	  /* CSA_COMP_SUM_ORDER=torch */
	int64_t sum_step; /* torch: the torch_sum_cols step of the window sum (compressor_cfg_dims; 1 before) */
	int sm_threads;	  /* torch: ATen's spatial-softmax threads over one window (1: one thread walks it) */
	int norm_fp32;	  /* CSA_COMP_NORM=fp32 */
	int butterfly;	  /* CSA_HADAMARD=butterfly */
	int qat;	  /* CSA_QAT=on */
	int wbf16;	  /* RMSNORM_WEIGHT=bf16 */
	int math;	  /* MATH_IMPL value */
	int rotate;	  /* params.rotate */
	float hscale;	  /* (float)F^-0.5 (binary64 host) */
	struct rmsnorm_factor_cfg f;
	struct rope_cfg r;
};

/* what the compressor op runs */
struct compressor_op_cfg {
	int64_t T, K, N, D, F;
	int32_t pos0;
	struct compressor_cfg c;
};

/* Decode the switches for device (rope: params.rope with the row length F; rows: the entries [rows, F] the
 * norm sees, for RMSNORM_REDUCE=torch's plan, or -1 where the caller does not model it: refused). Then
 * compressor_cfg_dims before the window code runs. ALIGN_ERR_INPUT for bad params, ALIGN_ERR_UNSUPPORTED
 * for a value device cannot run, ALIGN_ERR_INTERNAL for an unhandled value. */
int compressor_cfg_modes(struct compressor_cfg *c, const struct compressor_params *p, int64_t F, int64_t rows,
			 const struct align_modes *m, int device, struct align_err *err);

/* CSA_COMP_SUM_ORDER=torch's plans for `groups` windows of n positions and F channels (the [groups, n, F]
 * softmax input and product of PyTorch's compressor): the step of the window sum (torch_sum_cols_step_v(n,
 * groups F, F)) and the spatial softmax's threads per window (ATen's SpatialSoftMax_getBlockSize: F > 64 or
 * n < 64: one). ALIGN_ERR_UNSUPPORTED where torch_order.h has no model; nothing to do under seq. */
int compressor_cfg_dims(struct compressor_cfg *c, int64_t groups, int64_t n, int64_t F, struct align_err *err);

int compressor_cfg_init(struct compressor_op_cfg *c, const struct compressor_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
			struct align_err *err);

int compressor_fwd_cpu(const struct compressor_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out);

void compressor_params_default(struct compressor_params *p); /* main compressor, DSv4 compressed-layer RoPE */

#ifdef __cplusplus
}
#endif

/* ---- the shared element code (both twins, and attn) ---- */

#ifdef __CUDACC__
#define COMP_EXPF(math, x) dm_expf(math, x)
#else
/* CPU: portable, or glibc (MATH_IMPL=libm) */
static inline float compressor_cpu_expf(int math, float x)
{
	return math == ALIGN_MATH_IMPL_LIBM ? expf(x) : align_expf(x);
}
#define COMP_EXPF(math, x) compressor_cpu_expf(math, x)
#endif

/* steps 1-2 for token row x (D bf16) and weight rows wk, wz (D bf16), ape value a: *K, *Z */
ALIGN_HD static inline void compressor_proj(const struct compressor_cfg *c, const align_bf16 *x, const align_bf16 *wk,
					    const align_bf16 *wz, int64_t D, float a, float *K, float *Z)
{
	float k = 0.0f, z = 0.0f;
	for (int64_t d = 0; d < D; d++) {
		float xv = align_bf16_to_f32(x[d]);
		k = hn_add(k, hn_mul(xv, align_bf16_to_f32(wk[d])));
		z = hn_add(z, hn_mul(xv, align_bf16_to_f32(wz[d])));
	}
	if (c->gemm_bf16) {
		k = align_round_bf16(k);
		z = align_round_bf16(z);
	}
	z = c->ape_bf16 ? align_round_bf16(hn_add(align_round_bf16(z), align_round_bf16(a))) : hn_add(z, a);
	*K = k;
	*Z = z;
}

/* max in ascending order: a NaN operand is taken and kept */
ALIGN_HD static inline float compressor_max(float m, float z)
{
	return align_isnanf(m) ? m : (align_isnanf(z) || z > m) ? z : m;
}

/* window position p of one channel: the previous half (np positions; Kp NULL: K = 0, Z = -inf, the first
 * group) then the own half, both with the given stride */
struct compressor_win {
	const float *Kp, *Zp, *Ko, *Zo;
	int64_t np, no, stride;
};

ALIGN_HD static inline float compressor_win_z(const struct compressor_win *w, int64_t p)
{
	return p < w->np ? (w->Zp ? w->Zp[p * w->stride] : -INFINITY) : w->Zo[(p - w->np) * w->stride];
}

ALIGN_HD static inline float compressor_win_k(const struct compressor_win *w, int64_t p)
{
	return p < w->np ? (w->Kp ? w->Kp[p * w->stride] : 0.0f) : w->Ko[(p - w->np) * w->stride];
}

#define COMPRESSOR_SM_MAX_THREADS 1024 /* ATen's max_threads: the spatial softmax's block */

/* step 4's max m and sum s of one channel's window (compressor_bwd recomputes them with this code).
 * CSA_COMP_SUM_ORDER=torch with sm_threads t > 1 (ATen's cunn_SpatialSoftMaxForward with blockDim.x = t):
 * thread x sums the positions x, x + t, ... ascending from +0, then the tree of spatialBlockReduceX
 * (lane[x] = lane[x] + lane[x + o] for o = t/2, t/4, ..., 1). The max is the same for every order but a
 * NaN's (ATen's max skips NaNs, this one keeps the first; either way every weight is then NaN). */
ALIGN_HD static inline void compressor_pool_stats(const struct compressor_cfg *c, const struct compressor_win *w,
						  float *m_out, float *s_out)
{
	const int64_t n = w->np + w->no;
	float m = -INFINITY;
	for (int64_t p = 0; p < n; p++)
		m = compressor_max(m, compressor_win_z(w, p));
	float s = 0.0f;
	if (c->sum_torch && c->sm_threads > 1) {
		float lane[COMPRESSOR_SM_MAX_THREADS];
		const int t = c->sm_threads;
		for (int x = 0; x < t; x++) {
			float a = 0.0f;
			for (int64_t p = x; p < n; p += t)
				a = hn_add(a, COMP_EXPF(c->math, hn_sub(compressor_win_z(w, p), m)));
			lane[x] = a;
		}
		for (int o = t / 2; o > 0; o /= 2)
			for (int x = 0; x < o; x++)
				lane[x] = hn_add(lane[x], lane[x + o]);
		s = lane[0];
	} else {
		for (int64_t p = 0; p < n; p++)
			s = hn_add(s, COMP_EXPF(c->math, hn_sub(compressor_win_z(w, p), m)));
	}
	*m_out = m;
	*s_out = s;
}

/* step 4's w_p before the CSA_COMP_POOL rounding */
ALIGN_HD static inline float compressor_pool_weight(const struct compressor_cfg *c, const struct compressor_win *w,
						    int64_t p, float m, float s)
{
	return hn_div(COMP_EXPF(c->math, hn_sub(compressor_win_z(w, p), m)), s);
}

/* step 5's term of position p: R?(w_p) K_p, bf16-rounded under CSA_COMP_SUM=bf16 */
ALIGN_HD static inline float compressor_pool_term(const struct compressor_cfg *c, const struct compressor_win *w,
						  int64_t p, float m, float s)
{
	float e = compressor_pool_weight(c, w, p, m, s);
	if (c->pool_bf16)
		e = align_round_bf16(e);
	float pr = hn_mul(e, compressor_win_k(w, p));
	return c->sum_bf16 ? align_round_bf16(pr) : pr;
}

/* torch_sum_strided (torch_order.h) over the terms of positions y, y + st, y + 2 st, ... < n */
ALIGN_HD static inline float compressor_pool_lane(const struct compressor_cfg *c, const struct compressor_win *w,
						  float m, float s, int64_t y, int64_t st, int64_t n)
{
	const int64_t cnt = (n - y + st - 1) / st;
	float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	int64_t idx = 0;
	while (idx + 3 < cnt) {
		for (int i = 0; i < 4; i++)
			a[i] = hn_add(a[i], compressor_pool_term(c, w, y + (idx + i) * st, m, s));
		idx += 4;
	}
	for (int i = 0; i < 4 && idx + i < cnt; i++)
		a[i] = hn_add(a[i], compressor_pool_term(c, w, y + (idx + i) * st, m, s));
	return hn_add(hn_add(hn_add(a[0], a[1]), a[2]), a[3]);
}

/* steps 4-5 for one channel's window -> C (binary32; bf16-valued under CSA_COMP_SUM=bf16). Under
 * CSA_COMP_SUM_ORDER=torch the terms are summed as torch_sum_cols sums a column (ATen's reduction of the
 * strided window dim: sum_step lanes of torch_sum_strided, lane y over positions y, y + sum_step, ..., then
 * the lanes' tree), else ascending from +0. */
ALIGN_HD static inline float compressor_pool(const struct compressor_cfg *c, const struct compressor_win *w)
{
	const int64_t n = w->np + w->no;
	float m, s;
	compressor_pool_stats(c, w, &m, &s);
	float acc = 0.0f;
	if (c->sum_torch && n > 0) {
		const int64_t st = c->sum_step > 1 ? c->sum_step : 1;
		if (st == 1) {
			acc = compressor_pool_lane(c, w, m, s, 0, 1, n);
		} else {
			float lane[TORCH_COLS_MAX_STEP];
			for (int64_t y = 0; y < st; y++)
				lane[y] = y < n ? compressor_pool_lane(c, w, m, s, y, st, n) : 0.0f;
			for (int64_t off = st / 2; off > 0; off /= 2)
				for (int64_t y = 0; y < off; y++)
					lane[y] = hn_add(lane[y], lane[y + off]);
			acc = lane[0];
		}
	} else {
		for (int64_t p = 0; p < n; p++)
			acc = hn_add(acc, compressor_pool_term(c, w, p, m, s));
	}
	return c->sum_bf16 ? align_round_bf16(acc) : acc;
}

/* step 3: the window of group g, channel ch over K and Z of every token ([tokens][N*F], row stride N*F) */
ALIGN_HD static inline struct compressor_win compressor_window(const float *Kv, const float *Zv, int64_t g, int64_t ch,
							       int64_t K, int64_t N, int64_t F)
{
	const int64_t NF = N * F;
	struct compressor_win w;
	w.stride = NF;
	w.no = K;
	w.Ko = Kv + g * K * NF + (N - 1) * F + ch;
	w.Zo = Zv + g * K * NF + (N - 1) * F + ch;
	w.np = N == 2 ? K : 0;
	w.Kp = N == 2 && g > 0 ? Kv + (g - 1) * K * NF + ch : (const float *)0;
	w.Zp = N == 2 && g > 0 ? Zv + (g - 1) * K * NF + ch : (const float *)0;
	return w;
}

/* rsqrt of RMSNORM_RSQRT (CUDA's rsqrtf for the GPU-only value) */
ALIGN_HD static inline float compressor_rsqrt(const struct rmsnorm_factor_cfg *f, float x)
{
#ifdef __CUDA_ARCH__
	if (f->rsqrt == ALIGN_RMSNORM_RSQRT_CUDA)
		return rsqrtf(x);
#endif
	return rmsnorm_rsqrt(f->rsqrt, x);
}

/* step 6's factor r of the norm input x[0..F), entry `row` (compressor_bwd recomputes it with this code);
 * RMSNORM_REDUCE=torch: ATen's row reduction of the [rows, F] entries (rmsnorm.h's plan, its mean) */
ALIGN_HD static inline float compressor_norm_factor(const struct compressor_cfg *c, const float *x, int64_t F,
						    int64_t row)
{
	float ss = rmsnorm_rowsum(&c->f, x, F, row, 1, 1); /* host NaN bits on the device too */
	return compressor_rsqrt(&c->f, hn_add(rmsnorm_mean(&c->f, ss, F), c->f.eps));
}

/* step 6: C[0..F) (binary32, overwritten with the norm input x) of entry `row` -> y[0..F) bf16 */
ALIGN_HD static inline void compressor_norm_row(const struct compressor_cfg *c, float *C, const float *w, int64_t F,
						int64_t row, align_bf16 *y)
{
	if (!c->norm_fp32)
		for (int64_t i = 0; i < F; i++)
			C[i] = align_round_bf16(C[i]);
	float r = compressor_norm_factor(c, C, F, row);
	for (int64_t i = 0; i < F; i++) {
		float wv = c->wbf16 ? align_round_bf16(w[i]) : w[i];
		y[i] = align_f32_to_bf16(hn_mul(wv, hn_mul(C[i], r)));
	}
}

/* step 8 on v[0..n) in place (n a power of two), before the scale */
ALIGN_HD static inline void compressor_hadamard(int butterfly, float *v, int64_t n)
{
	for (int64_t h = butterfly ? n / 2 : 1; butterfly ? h >= 1 : h < n; h = butterfly ? h / 2 : h * 2)
		for (int64_t i = 0; i < n; i += 2 * h)
			for (int64_t j = i; j < i + h; j++) {
				float a = v[j], b = v[j + h];
				v[j] = hn_add(a, b);
				v[j + h] = hn_sub(a, b);
			}
}

/* round |a| (finite, <= qmax) to nearest even with mbits mantissa bits and min normal exponent emin */
ALIGN_HD static inline float compressor_round_fmt(float a, int mbits, int emin)
{
	if (align_isnanf(a) || a == 0.0f)
		return a;
	double d = a < 0.0f ? -(double)a : (double)a;
	int e;
	(void)frexp(d, &e); /* d = m 2^e, m in [0.5, 1): floor(log2 d) = e - 1 */
	int q = (e - 1 > emin ? e - 1 : emin) - mbits;
	double n = rint(ldexp(d, -q)); /* exact scaling; rint: nearest, ties to even */
	double r = ldexp(n, q);
	return a < 0.0f ? -(float)r : (float)r;
}

/* step 9 on one block y[0..n) (bf16, in place): fp4 = e2m1 with qmax 6, else e4m3 with qmax 448 */
ALIGN_HD static inline void compressor_qdq_block(align_bf16 *y, int64_t n, int fp4)
{
	const float qmax = fp4 ? 6.0f : 448.0f, floor_ = fp4 ? 6.0f * 0x1p-126f : 1e-4f;
	float amax = floor_;
	for (int64_t i = 0; i < n; i++) {
		float v = align_bf16_to_f32(y[i]);
		float a = v < 0.0f ? hn_neg(v) : v;
		amax = compressor_max(amax, a);
	}
	float s;
	if (align_isnanf(amax)) {
		s = amax;
	} else {
		int e;
		double mant = frexp((double)hn_div(amax, qmax), &e); /* v = mant 2^e */
		s = (float)ldexp(1.0, mant == 0.5 ? e - 1 : e);
	}
	for (int64_t i = 0; i < n; i++) {
		float v = hn_div(align_bf16_to_f32(y[i]), s);
		v = align_isnanf(v) ? v : v > qmax ? qmax : v < -qmax ? -qmax : v;
		float q = compressor_round_fmt(v, fp4 ? 1 : 3, fp4 ? 0 : -6);
		y[i] = align_f32_to_bf16(hn_mul(q, s));
	}
}

/* step 9 on a row of F (rope_dim: the trailing RoPE dims the FP8 QDQ skips) */
ALIGN_HD static inline void compressor_qdq_row(int fp4, align_bf16 *y, int64_t F, int64_t rope_dim)
{
	int64_t n = fp4 ? F : F - rope_dim, b = fp4 ? 32 : 64;
	for (int64_t i = 0; i < n; i += b)
		compressor_qdq_block(y + i, n - i < b ? n - i : b, fp4);
}

/* steps 6-9 of entry `row`: C[0..F) (binary32 scratch, overwritten) -> y[0..F) bf16 at position pos */
ALIGN_HD static inline void compressor_finish_row(const struct compressor_cfg *c, float *C, const float *w, int64_t F,
						  int64_t row, int32_t pos, align_bf16 *y)
{
	compressor_norm_row(c, C, w, F, row, y);
	rope_row(&c->r, NULL, pos, F, y, y);
	if (c->rotate) {
		for (int64_t i = 0; i < F; i++)
			C[i] = align_bf16_to_f32(y[i]);
		compressor_hadamard(c->butterfly, C, F);
		for (int64_t i = 0; i < F; i++)
			y[i] = align_f32_to_bf16(hn_mul(C[i], c->hscale));
	}
	if (c->qat)
		compressor_qdq_row(c->rotate, y, F, c->r.rd);
}

#endif /* ALIGN_COMPRESSOR_H */
