/* cpu_models.c: small C models of what the CPU libraries behind PyTorch and Paddle do in the DSv4
 * block's ops, for tests/probe/explain_diag.py (loaded with ctypes; built by the test with
 * -ffp-contract=off so that each fmaf and each separate multiply and add is what is written here).
 * None of this is an align mode: it shows *why* `align explain` finds no mode for an output, by
 * reproducing the framework's bits with the library behaviour that the modes do not model.
 *
 *   cm_gemm      y[t,e] = sum_k x[t,k] w[e,k] in fp32: `lanes` accumulators (k mod lanes, each in k
 *                order, separate multiply and add or fmaf), then folded by halving (lane i += lane
 *                i + lanes/2, ...): the order of a SIMD GEMM micro-kernel that keeps lanes partial
 *                sums over K and reduces them at the end. lanes = 1 is the sequential dot product.
 *   cm_exp_vec   the vectorised single-precision exp of SIMD math libraries (the 1-ulp class):
 *                q = rint(x / ln2); s = x - q ln2 with ln2 split in two parts (Cody-Waite, fmaf);
 *                e^s ~ 1 + s + s^2 P(s) with a degree-5 minimax P evaluated by fmaf (Horner);
 *                scaled by 2^q. The coefficients are those of the published 1-ulp expf of SLEEF
 *                (Shibata and Petrogalli, IEEE TPDS 31(6), 2020), which ATen's Vectorized<float>::exp
 *                calls; the code is written here from that algorithm.
 *   cm_exp_cr    exp in binary64 rounded to binary32 (correctly rounded but for double-rounding
 *                ties): the class of glibc's expf and MKL VML's vsExp at high accuracy.
 */
#include <math.h>
#include <stdint.h>

#define CM_MAX_LANES 64

void cm_gemm(const float *x, const float *w, int T, int D, int E, int fma_on, int lanes, float *y)
{
	if (lanes < 1 || lanes > CM_MAX_LANES)
		lanes = 1;
	for (int t = 0; t < T; t++)
		for (int e = 0; e < E; e++) {
			float acc[CM_MAX_LANES] = {0};
			for (int k = 0; k < D; k++) {
				float a = x[(int64_t)t * D + k], b = w[(int64_t)e * D + k];
				int l = k % lanes;
				acc[l] = fma_on ? fmaf(a, b, acc[l]) : acc[l] + a * b;
			}
			for (int half = lanes / 2; half >= 1; half /= 2)
				for (int i = 0; i < half; i++)
					acc[i] = acc[i] + acc[i + half];
			y[(int64_t)t * E + e] = acc[0];
		}
}

float cm_exp_vec(float x)
{
	const float log2e = 1.442695040888963407359924681001892137426645954152985934135449406931f;
	const float ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187045e-06f;
	float q = rintf(x * log2e);
	float s = fmaf(q, -ln2_hi, x);
	s = fmaf(q, -ln2_lo, s);
	float u = 0.000198527617612853646278381f;
	u = fmaf(u, s, 0.00139304355252534151077271f);
	u = fmaf(u, s, 0.00833336077630519866943359f);
	u = fmaf(u, s, 0.0416664853692054748535156f);
	u = fmaf(u, s, 0.166666671633720397949219f);
	u = fmaf(u, s, 0.5f);
	u = 1.0f + fmaf(s * s, u, s);
	u = ldexpf(u, (int)q);
	if (x < -104.0f)
		u = 0.0f;
	if (x > 104.0f)
		u = INFINITY;
	return u;
}

float cm_exp_cr(float x)
{
	return (float)exp((double)x);
}

/* n values at once (ctypes calls per element are slow) */
void cm_exp_many(const float *x, float *y, int64_t n, int vec)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = vec ? cm_exp_vec(x[i]) : cm_exp_cr(x[i]);
}
