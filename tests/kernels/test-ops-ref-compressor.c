/* test-ops-ref-compressor.c: fp64 reference check of the compressor (compressor.h steps 1-6): the
 * projections, ape, the window softmax, the pooled sum and the RMSNorm evaluated in long double from the
 * same bf16/fp32 inputs, compared on the nope dims [0, F - rope_dim) (RoPE, rotation and QAT are other
 * ops' contracts or exact-format roundings: QAT off here) with the fp32 projection, pooling and sum (the
 * DS-ref precision column) under every norm switch value, overlapping (N = 2, K = 4) and non-overlapping
 * (N = 1, K = 16) windows, normal and special fills. Bound per element, u = 2^-24: ulp_bf16(ref) + |ref|
 * 2^-7 (the bf16 rounding of the pooled value before the norm and its effect on the factor) + |w'| r Cerr
 * (D + F + 16) u |ref| excluded: Cerr = (A (D + 2K + 4) + P (Zmax (D + 2) + 8K)) 2u, A = sum_p w_p
 * sum_d |x_d wkv_d|, P = sum_p w_p |K_p|, Zmax = max_p sum_d |x_d wgate_d| + |ape| (the GEMM and softmax
 * errors), plus |ref| (F + 16) u for the norm's binary32 steps. Exit status 0 = pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compressor.h"
#include "ops.h"

typedef long double ld;

static ld ulp_bf16(ld v)
{
	v = fabsl(v);
	if (v < 0x1p-126L)
		return 0x1p-133L;
	int e;
	frexpl(v, &e);
	return ldexpl(1.0L, e - 8);
}

static int check(const char *dims, int set, const char *const *kv, int nkv)
{
	const struct align_op *op = ops_find("compressor");
	struct align_dims d;
	char err[128];
	if (ops_dims_parse(dims, &d, err, sizeof err))
		return 1;
	struct compressor_params p;
	compressor_params_default(&p);
	struct align_modes m;
	modes_init_default(&m);
	m.v[MODE_CSA_QAT] = ALIGN_CSA_QAT_OFF;
	for (int i = 0; i + 1 < nkv; i += 2) {
		int id = modes_find(kv[i]), v = id >= 0 ? modes_value_index(id, kv[i + 1]) : -1;
		if (v < 0)
			return printf("FAIL bad mode %s=%s\n", kv[i], kv[i + 1]), 1;
		m.v[id] = v;
	}
	struct align_tensor in[5], out[1];
	for (int i = 0; i < 5; i++) {
		ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
		struct align_fill f = op->impl->in[i].fill;
		if (set == 0 && f.kind == ALIGN_FILL_SPECIAL)
			f.kind = ALIGN_FILL_NORMAL;
		ops_fill_tensor(&f, "compressor", &in[i], 0x5eedc0ull, 1);
	}
	ops_tensor_alloc(op, 1, 0, &d, &m, &out[0]);
	if (compressor_fwd_cpu(&p, &m, in, 5, out, 1) != ALIGN_OK) {
		printf("FAIL %s: run\n", dims);
		return 1;
	}
	const int64_t T = d.v[ALIGN_DIM_T], K = d.v[ALIGN_DIM_K], N = d.v[ALIGN_DIM_N], D = d.v[ALIGN_DIM_D];
	const int64_t F = d.v[ALIGN_DIM_F], NF = N * F, nope = F - p.rope.rope_dim;
	int wbf16 = m.v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_BF16;
	float eps = m.v[MODE_RMSNORM_EPS] == ALIGN_RMSNORM_EPS_1E_5 ? 1e-5f : 1e-6f;
	ld *Kr = calloc((size_t)(T * K * NF), sizeof(ld)), *Zr = calloc((size_t)(T * K * NF), sizeof(ld));
	ld *Ka = calloc((size_t)(T * K * NF), sizeof(ld)), *Za = calloc((size_t)(T * K * NF), sizeof(ld));
	ld *C = calloc((size_t)F, sizeof(ld)), *Cerr = calloc((size_t)F, sizeof(ld));
	const float *ape = in[3].data, *w = in[4].data;
	for (int64_t t = 0; t < T * K; t++)
		for (int64_t j = 0; j < NF; j++) {
			ld k = 0, z = 0, ka = 0, za = 0;
			for (int64_t q = 0; q < D; q++) {
				ld xv = ops_ld(&in[0], t * D + q);
				k += xv * ops_ld(&in[1], j * D + q);
				z += xv * ops_ld(&in[2], j * D + q);
				ka += fabsl(xv * ops_ld(&in[1], j * D + q));
				za += fabsl(xv * ops_ld(&in[2], j * D + q));
			}
			ld a = ape[(t % K) * NF + j];
			Kr[t * NF + j] = k, Zr[t * NF + j] = z + a, Ka[t * NF + j] = ka, Za[t * NF + j] = za + fabsl(a);
		}
	ld worst = 0;
	for (int64_t g = 0; g < T; g++) {
		for (int64_t ch = 0; ch < F; ch++) {
			ld zs[512], ks[512], kas[512], zas[512];
			int64_t n = 0;
			for (int64_t h = N == 2 ? -1 : 0; h <= 0; h++) {
				if (g + h < 0)
					continue;
				for (int64_t q = 0; q < K; q++, n++) {
					int64_t idx = ((g + h) * K + q) * NF + (N == 2 && h == 0 ? F : 0) + ch;
					zs[n] = Zr[idx], ks[n] = Kr[idx], kas[n] = Ka[idx], zas[n] = Za[idx];
				}
			}
			ld mx = -INFINITY, s = 0, c = 0, A = 0, P = 0, Zmax = 0;
			for (int64_t q = 0; q < n; q++)
				mx = zs[q] > mx ? zs[q] : mx;
			for (int64_t q = 0; q < n; q++)
				s += expl(zs[q] - mx);
			for (int64_t q = 0; q < n; q++) {
				ld wp = expl(zs[q] - mx) / s;
				c += wp * ks[q], A += wp * kas[q], P += wp * fabsl(ks[q]);
				Zmax = zas[q] > Zmax ? zas[q] : Zmax;
			}
			C[ch] = c;
			Cerr[ch] = (A * (D + 2 * K + 4) + P * (Zmax * (D + 2) + 8 * K)) * 2 * 0x1p-24L;
		}
		ld ss = 0;
		for (int64_t ch = 0; ch < F; ch++)
			ss += C[ch] * C[ch];
		ld r = 1.0L / sqrtl(ss / F + eps);
		for (int64_t ch = 0; ch < nope; ch++) {
			ld wv = wbf16 ? align_round_bf16(w[ch]) : w[ch];
			ld ref = wv * C[ch] * r, got = ops_ld(&out[0], g * F + ch);
			ld tol = ulp_bf16(ref) + fabsl(ref) * (0x1p-7L + (F + 16) * 0x1p-24L) +
				 fabsl(wv) * r * Cerr[ch] * 2;
			ld e = fabsl(got - ref) / tol;
			worst = e > worst ? e : worst;
		}
	}
	for (int i = 0; i < 5; i++)
		ops_tensor_free(&in[i]);
	ops_tensor_free(&out[0]);
	free(Kr), free(Zr), free(Ka), free(Za), free(C), free(Cerr);
	printf("compressor %-26s set %d %-40s worst %.3Lf of the bound%s\n", dims, set, nkv ? kv[0] : "(defaults)",
	       worst, worst > 1 ? "  FAIL" : "");
	return worst > 1 || isnan((double)worst);
}

int main(void)
{
	static const char *const sets[][4] = {
		{NULL},
		{"ALIGN_CSA_COMP_NORM", "fp32", NULL},
		{"ALIGN_RMSNORM_WEIGHT", "bf16", NULL},
		{"ALIGN_RMSNORM_REDUCE", "fp64", "ALIGN_RMSNORM_EPS", "1e-5"},
	};
	static const char *const dims[] = {"T=8,K=4,N=2,D=64,F=128", "T=4,K=16,N=1,D=64,F=128"};
	int fails = 0;
	for (size_t di = 0; di < 2; di++)
		for (int set = 0; set < 2; set++)
			for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
				int n = 0;
				while (n < 4 && sets[s][n])
					n++;
				fails += check(dims[di], set, sets[s], n);
			}
	printf("test-ops-ref-compressor: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
