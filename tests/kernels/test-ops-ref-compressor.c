/* test-ops-ref-compressor.c: fp64 reference check of the compressor (compressor.h steps 1-6): the
 * projections, ape, the window softmax, the pooled sum and the RMSNorm evaluated in long double from the
 * same bf16/fp32 inputs, compared on the nope dims [0, F - rope_dim) (RoPE, rotation and QAT are other
 * ops' contracts or exact-format roundings: QAT off here) with the fp32 projection, pooling and sum (the
 * DS-ref precision column) under every norm switch value, overlapping (N = 2, K = 4) and non-overlapping
 * (N = 1, K = 16) windows, normal and special fills. Bound per element, u = 2^-24: ulp_bf16(ref) + |ref|
 * 2^-7 (the bf16 rounding of the pooled value before the norm and its effect on the factor) + |w'| r Cerr
 * (D + F + 16) u |ref| excluded: Cerr = (A (D + 2K + 4) + P (Zmax (D + 2) + 8K)) 2u, A = sum_p w_p
 * sum_d |x_d wkv_d|, P = sum_p w_p |K_p|, Zmax = max_p sum_d |x_d wgate_d| + |ape| (the GEMM and softmax
 * errors), plus |ref| (F + 16) u for the norm's binary32 steps.
 * The backward (compressor_bwd.h): every gradient against the long double gradient of the same function (fp32
 * precision switches, CSA_COMP_NORM=fp32, every norm switch and RMSNORM_BWD_FORM, the three variants, N = 1 and
 * 2, both fill sets) within n u of the absolute chain, n = (D + N*F + T*K + 2K + 2F + 64), plus a bf16 ulp
 * for dx; central differences of the forward twin (every CSA_COMP_* bf16 value, main and rotate); determinism,
 * CSA_QAT not read, dx's batch invariance. Exit status 0 = pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compressor.h"
#include "compressor_bwd.h"
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

/* ---- the backward (compressor_bwd.h) ---- */

/* one compressor_bwd case: inputs (x, wkv, wgate, ape, w, dc) filled as the forward's plus dc, outputs */
struct bcase {
	struct align_dims d;
	struct compressor_params p;
	struct align_modes m;
	struct align_tensor in[6], out[5];
};

static int bcase_init(struct bcase *b, const char *dims, int set, int variant, int rope_dim, const char *const *kv,
		      int nkv)
{
	const struct align_op *op = ops_find("compressor_bwd");
	char err[128];
	if (!op || ops_dims_parse(dims, &b->d, err, sizeof err))
		return 1;
	op->impl->params_variant(&b->p, &b->d, variant);
	if (rope_dim)
		b->p.rope.rope_dim = rope_dim;
	modes_init_default(&b->m);
	b->m.v[MODE_CSA_QAT] = ALIGN_CSA_QAT_OFF;
	b->m.v[MODE_CSA_COMP_NORM] = ALIGN_CSA_COMP_NORM_FP32;
	for (int i = 0; i + 1 < nkv; i += 2) {
		int id = modes_find(kv[i]), v = id >= 0 ? modes_value_index(id, kv[i + 1]) : -1;
		if (v < 0)
			return printf("FAIL bad mode %s=%s\n", kv[i], kv[i + 1]), 1;
		b->m.v[id] = v;
	}
	for (int i = 0; i < 6; i++) {
		ops_tensor_alloc(op, 0, i, &b->d, &b->m, &b->in[i]);
		struct align_fill f = op->impl->in[i].fill;
		if (set == 0 && f.kind == ALIGN_FILL_SPECIAL)
			f.kind = ALIGN_FILL_NORMAL;
		ops_fill_tensor(&f, "compressor_bwd", &b->in[i], 0x5eedc0ull + (uint64_t)i, 1);
	}
	for (int i = 0; i < 5; i++)
		ops_tensor_alloc(op, 1, i, &b->d, &b->m, &b->out[i]);
	return compressor_bwd_fwd_cpu(&b->p, &b->m, b->in, 6, b->out, 5) != ALIGN_OK;
}

static void bcase_free(struct bcase *b)
{
	for (int i = 0; i < 6; i++)
		ops_tensor_free(&b->in[i]);
	for (int i = 0; i < 5; i++)
		ops_tensor_free(&b->out[i]);
}

/* the long double gradient of the same function (step 2's rows taken from the twin's code) and its absolute
 * counterpart; ref/abs per output: [0] dx, [1] dwkv, [2] dwgate, [3] dape, [4] dw */
static int bwd_ref_check(const char *dims, int set, int variant, const char *const *kv, int nkv)
{
	struct bcase b;
	if (bcase_init(&b, dims, set, variant, 0, kv, nkv)) {
		printf("FAIL compressor_bwd %s: run\n", dims);
		return 1;
	}
	struct compressor_bwd_cfg c;
	compressor_bwd_cfg_init(&c, &b.p, &b.m, b.in, 6, b.out, 5, ALIGN_DEVICE_CPU, NULL);
	const int64_t T = c.o.T, K = c.o.K, N = c.o.N, D = c.o.D, F = c.o.F, NF = N * F, TK = T * K;
	const float *ape = b.in[3].data, *w = b.in[4].data;
	float eps = c.o.c.f.eps;
	size_t nkz = (size_t)(TK * NF);
	ld *Kr = calloc(nkz, sizeof(ld)), *Zr = calloc(nkz, sizeof(ld)), *Ka = calloc(nkz, sizeof(ld));
	ld *Za = calloc(nkz, sizeof(ld)), *dk = calloc(nkz, sizeof(ld)), *dz = calloc(nkz, sizeof(ld));
	ld *dka = calloc(nkz, sizeof(ld)), *dza = calloc(nkz, sizeof(ld));
	ld *ref[5], *abs_[5];
	int64_t nout[5];
	for (int i = 0; i < 5; i++) {
		nout[i] = align_tensor_numel(&b.out[i]);
		ref[i] = calloc((size_t)nout[i], sizeof(ld));
		abs_[i] = calloc((size_t)nout[i], sizeof(ld));
	}
	ld *C = calloc((size_t)F, sizeof(ld)), *Ca = calloc((size_t)F, sizeof(ld)), *dC = calloc((size_t)F, sizeof(ld));
	ld *dCa = calloc((size_t)F, sizeof(ld)), *Zm = calloc((size_t)F, sizeof(ld));
	align_bf16 *gy = calloc((size_t)F, sizeof *gy);
	float *tmp = calloc((size_t)F, sizeof(float));
	for (int64_t t = 0; t < TK; t++)
		for (int64_t j = 0; j < NF; j++) {
			ld k = 0, z = 0, ka = 0, za = 0;
			for (int64_t q = 0; q < D; q++) {
				ld xv = ops_ld(&b.in[0], t * D + q);
				k += xv * ops_ld(&b.in[1], j * D + q), z += xv * ops_ld(&b.in[2], j * D + q);
				ka += fabsl(xv * ops_ld(&b.in[1], j * D + q)),
					za += fabsl(xv * ops_ld(&b.in[2], j * D + q));
			}
			ld a = ape[(t % K) * NF + j];
			Kr[t * NF + j] = k, Zr[t * NF + j] = z + a, Ka[t * NF + j] = ka, Za[t * NF + j] = za + fabsl(a);
		}
	for (int64_t g = 0; g < T; g++) {
		/* forward: C and its absolute sum; window element index of position q */
		int64_t idx[2][512], n = 0;
		for (int64_t ch = 0; ch < F; ch++) {
			n = 0;
			for (int64_t h = N == 2 ? -1 : 0; h <= 0; h++)
				for (int64_t q = 0; q < K; q++, n++)
					idx[0][n] = g + h < 0
							    ? -1
							    : ((g + h) * K + q) * NF + (N == 2 && h == 0 ? F : 0) + ch;
			ld mx = -INFINITY, s = 0, cc = 0, ca = 0, zm = 0;
			for (int64_t q = 0; q < n; q++)
				if (idx[0][q] >= 0)
					mx = Zr[idx[0][q]] > mx ? Zr[idx[0][q]] : mx,
					zm = Za[idx[0][q]] > zm ? Za[idx[0][q]] : zm;
			for (int64_t q = 0; q < n; q++)
				s += idx[0][q] >= 0 ? expl(Zr[idx[0][q]] - mx) : 0;
			for (int64_t q = 0; q < n; q++)
				if (idx[0][q] >= 0) {
					ld wp = expl(Zr[idx[0][q]] - mx) / s;
					cc += wp * Kr[idx[0][q]], ca += wp * Ka[idx[0][q]];
				}
			C[ch] = cc, Ca[ch] = ca * (1 + zm), Zm[ch] = zm;
		}
		ld ss = 0;
		for (int64_t ch = 0; ch < F; ch++)
			ss += C[ch] * C[ch];
		ld r = 1.0L / sqrtl(ss / F + eps), S = 0, Sa = 0;
		compressor_bwd_grad_row(&c, (const align_bf16 *)b.in[5].data + g * F, (int32_t)(c.o.pos0 + g * K), gy,
					tmp);
		for (int64_t j = 0; j < F; j++) {
			ld wv = c.o.c.wbf16 ? align_round_bf16(w[j]) : w[j], gv = align_bf16_to_f32(gy[j]);
			S += gv * wv * C[j], Sa += fabsl(gv * wv) * Ca[j];
			ref[4][j] += gv * C[j] * r, abs_[4][j] += fabsl(gv) * Ca[j] * r;
		}
		for (int64_t j = 0; j < F; j++) {
			ld wv = c.o.c.wbf16 ? align_round_bf16(w[j]) : w[j], gv = align_bf16_to_f32(gy[j]);
			dC[j] = r * gv * wv - r * r * r * C[j] * S / F;
			dCa[j] = r * fabsl(gv * wv) + r * r * r * Ca[j] * Sa / F;
		}
		for (int64_t ch = 0; ch < F; ch++) {
			n = 0;
			for (int64_t h = N == 2 ? -1 : 0; h <= 0; h++)
				for (int64_t q = 0; q < K; q++, n++)
					idx[0][n] = g + h < 0
							    ? -1
							    : ((g + h) * K + q) * NF + (N == 2 && h == 0 ? F : 0) + ch;
			ld mx = -INFINITY, s = 0, delta = 0, deltaa = 0;
			for (int64_t q = 0; q < n; q++)
				if (idx[0][q] >= 0)
					mx = Zr[idx[0][q]] > mx ? Zr[idx[0][q]] : mx;
			for (int64_t q = 0; q < n; q++)
				s += idx[0][q] >= 0 ? expl(Zr[idx[0][q]] - mx) : 0;
			for (int64_t q = 0; q < n; q++)
				if (idx[0][q] >= 0) {
					ld wp = expl(Zr[idx[0][q]] - mx) / s;
					delta += wp * dC[ch] * Kr[idx[0][q]], deltaa += wp * dCa[ch] * Ka[idx[0][q]];
				}
			for (int64_t q = 0; q < n; q++)
				if (idx[0][q] >= 0) {
					int64_t e = idx[0][q];
					ld wp = expl(Zr[e] - mx) / s, f = 1 + Zm[ch];
					dz[e] = wp * (dC[ch] * Kr[e] - delta),
					dza[e] = wp * f * (dCa[ch] * Ka[e] + deltaa);
					dk[e] = dC[ch] * wp, dka[e] = dCa[ch] * wp * f;
				}
		}
	}
	for (int64_t t = 0; t < TK; t++)
		for (int64_t j = 0; j < NF; j++) {
			int64_t e = t * NF + j;
			for (int64_t q = 0; q < D; q++) {
				ld xv = ops_ld(&b.in[0], t * D + q), a = ops_ld(&b.in[1], j * D + q),
				   z = ops_ld(&b.in[2], j * D + q);
				ref[0][t * D + q] += dk[e] * a + dz[e] * z;
				abs_[0][t * D + q] += dka[e] * fabsl(a) + dza[e] * fabsl(z);
				ref[1][j * D + q] += dk[e] * xv, abs_[1][j * D + q] += dka[e] * fabsl(xv);
				ref[2][j * D + q] += dz[e] * xv, abs_[2][j * D + q] += dza[e] * fabsl(xv);
			}
			ref[3][(t % K) * NF + j] += dz[e], abs_[3][(t % K) * NF + j] += dza[e];
		}
	ld nu = (D + NF + TK + 2 * K + 2 * F + 64) * 0x1p-24L, worst = 0;
	int64_t skipped = 0;
	for (int i = 0; i < 5; i++)
		for (int64_t e = 0; e < nout[i]; e++) {
			ld got = ops_ld(&b.out[i], e), tol = nu * abs_[i][e] + (i == 0 ? ulp_bf16(ref[i][e]) : 0);
			if (!isfinite((double)ref[i][e]) || !isfinite((double)tol)) {
				skipped++;
				continue;
			}
			ld x = tol > 0 ? fabsl(got - ref[i][e]) / tol : (got == ref[i][e] ? 0 : INFINITY);
			worst = x > worst || isnan((double)x) ? x : worst;
		}
	printf("compressor_bwd %-24s set %d variant %d %-28s worst %.4Lf of the bound (%lld skipped)%s\n", dims, set,
	       variant, nkv ? kv[1] : "(fp32)", worst, (long long)skipped, worst > 1 ? "  FAIL" : "");
	free(Kr), free(Zr), free(Ka), free(Za), free(dk), free(dz), free(dka), free(dza);
	for (int i = 0; i < 5; i++)
		free(ref[i]), free(abs_[i]);
	free(C), free(Ca), free(dC), free(dCa), free(Zm), free(gy), free(tmp);
	bcase_free(&b);
	return !(worst <= 1);
}

/* L = sum dc * c over the forward twin's output (long double) */
static ld fd_loss(struct bcase *b, struct align_tensor *c)
{
	if (compressor_fwd_cpu(&b->p, &b->m, b->in, 5, c, 1) != ALIGN_OK)
		return NAN;
	ld L = 0;
	for (int64_t i = 0; i < align_tensor_numel(c); i++)
		L += (ld)ops_ld(&b->in[5], i) * ops_ld(c, i);
	return L;
}

/* central differences of the forward twin at a few elements of every input (bf16 inputs step to bf16
 * neighbours 2^-4 |v| apart): |fd - grad| within 10% of |grad| plus 2% of the tensor's largest gradient plus
 * the bf16 output noise sum |dc| ulp(c) / (v+ - v-) */
static int bwd_fd_check(const char *dims, int variant, const char *const *kv, int nkv)
{
	struct bcase b;
	if (bcase_init(&b, dims, 0, variant, 16, kv, nkv)) {
		printf("FAIL compressor_bwd fd %s: run\n", dims);
		return 1;
	}
	const struct align_op *fop = ops_find("compressor");
	struct align_tensor c;
	ops_tensor_alloc(fop, 1, 0, &b.d, &b.m, &c);
	ld worst = 0;
	int checked = 0;
	for (int i = 0; i < 5; i++) {
		int64_t n = align_tensor_numel(&b.in[i]);
		ld gmax = 0;
		for (int64_t e = 0; e < n; e++)
			gmax = fmaxl(gmax, fabsl(ops_ld(&b.out[i], e)));
		for (int k = 0; k < 6; k++) {
			int64_t e = (int64_t)(((uint64_t)k * 2654435761u + (uint64_t)i * 97u) % (uint64_t)n);
			float v = ops_ld(&b.in[i], e), h = fmaxf(fabsf(v), 0.0625f) * 0.0625f;
			ops_st(&b.in[i], e, v + h);
			float vp = ops_ld(&b.in[i], e);
			ld Lp = fd_loss(&b, &c), noise = 0;
			for (int64_t q = 0; q < align_tensor_numel(&c); q++)
				noise += fabsl((ld)ops_ld(&b.in[5], q)) * ulp_bf16(ops_ld(&c, q));
			ops_st(&b.in[i], e, v - h);
			float vm = ops_ld(&b.in[i], e);
			ld Lm = fd_loss(&b, &c);
			ops_st(&b.in[i], e, v);
			ld fd = (Lp - Lm) / ((ld)vp - vm), gr = ops_ld(&b.out[i], e);
			ld tol = 0.1L * fabsl(gr) + 0.02L * gmax + noise / ((ld)vp - vm);
			ld x = fabsl(fd - gr) / tol;
			worst = x > worst || isnan((double)x) ? x : worst;
			checked++;
		}
	}
	printf("compressor_bwd fd %-22s variant %d %-28s %d elements, worst %.3Lf of the tolerance%s\n", dims, variant,
	       nkv ? kv[1] : "(fp32)", checked, worst, worst > 1 ? "  FAIL" : "");
	ops_tensor_free(&c);
	bcase_free(&b);
	return !(worst <= 1);
}

static int same_bytes(const struct align_tensor *a, const struct align_tensor *b, int64_t n)
{
	return memcmp(a->data, b->data, (size_t)n * align_dtype_size(a->dtype)) == 0;
}

/* determinism, CSA_QAT not read, and dx's batch invariance (compressor_bwd.h: the first T' - 1 (N = 2) or
 * T' (N = 1) groups' rows of a T' = T/2 run) */
static int bwd_invariance(const char *dims, const char *half, int variant)
{
	static const char *const qat[] = {"ALIGN_CSA_QAT", "on"};
	struct bcase a, b, q, h;
	int fails = bcase_init(&a, dims, 1, variant, 0, NULL, 0) | bcase_init(&b, dims, 1, variant, 0, NULL, 0) |
		    bcase_init(&q, dims, 1, variant, 0, qat, 2) | bcase_init(&h, half, 1, variant, 0, NULL, 0);
	for (int i = 0; i < 5 && !fails; i++) {
		int64_t n = align_tensor_numel(&a.out[i]);
		fails |= !same_bytes(&a.out[i], &b.out[i], n) || !same_bytes(&a.out[i], &q.out[i], n);
	}
	int64_t Th = h.d.v[ALIGN_DIM_T], rows = (h.d.v[ALIGN_DIM_N] == 2 ? Th - 1 : Th) * h.d.v[ALIGN_DIM_K];
	fails |= !same_bytes(&a.out[0], &h.out[0], rows * h.d.v[ALIGN_DIM_D]);
	printf("compressor_bwd %s variant %d: deterministic, CSA_QAT not read, dx batch invariant (%lld rows): %s\n",
	       dims, variant, (long long)rows, fails ? "FAIL" : "ok");
	bcase_free(&a), bcase_free(&b), bcase_free(&q), bcase_free(&h);
	return fails;
}

/* CSA_COMP_SUM_ORDER=torch on one window: compressor_pool (and its stats) against the window's terms
 * materialised and summed by torch_order.h's torch_sum_cols with torch_sum_cols_step_v (the model of ATen's
 * strided-dim sum checked against PyTorch on a GPU for sparse_attn_bwd) and the softmax denominator by
 * ATen's cunn_SpatialSoftMaxForward loop written out here (blockDim.x threads over the window, then
 * spatialBlockReduceX's tree). Shapes: one thread per output (n = 8), the block.y split (n = 128, step 4),
 * and F <= 64 with n >= 64 (the softmax split over 32 and 64 threads). Also: the torch order differs from
 * seq somewhere (else this check would prove nothing). */
static int torch_order_check(void)
{
	static const struct {
		int64_t groups, K, N, F, want_t;
	} cs[] = {{8, 4, 2, 128, 1}, {4, 128, 1, 128, 1}, {3, 128, 1, 32, 32}, {2, 64, 1, 16, 64}, {5, 32, 2, 24, 32}};
	static const char *const sw[][2] = {{NULL, NULL}, {"ALIGN_CSA_COMP_POOL=bf16", "ALIGN_CSA_COMP_SUM=bf16"}};
	int fails = 0;
	uint64_t seed = 0x5eed;
	for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
		for (size_t si = 0; si < 2; si++) {
			const int64_t G = cs[ci].groups, K = cs[ci].K, N = cs[ci].N, F = cs[ci].F, NF = N * F,
				      n = N * K;
			struct align_modes m, mseq;
			char e[256];
			modes_init_default(&m);
			for (int k = 0; k < 2; k++)
				if (sw[si][k] && modes_apply_kv(&m, sw[si][k], e, sizeof e)) {
					printf("FAIL torch order: %s\n", e);
					return 1;
				}
			mseq = m;
			modes_apply_kv(&m, "ALIGN_CSA_COMP_SUM_ORDER=torch", e, sizeof e);
			struct compressor_params p;
			compressor_params_default(&p);
			if (p.rope.rope_dim > F) /* the window code does not read RoPE; its check wants rope_dim <= F */
				p.rope.rope_dim = 8;
			struct compressor_cfg c, cq;
			if (compressor_cfg_modes(&c, &p, F, G, &m, ALIGN_DEVICE_CPU, NULL) ||
			    compressor_cfg_dims(&c, G, n, F, NULL) ||
			    compressor_cfg_modes(&cq, &p, F, G, &mseq, ALIGN_DEVICE_CPU, NULL) ||
			    compressor_cfg_dims(&cq, G, n, F, NULL)) {
				printf("FAIL torch order: cfg for G=%lld K=%lld N=%lld F=%lld\n", (long long)G,
				       (long long)K, (long long)N, (long long)F);
				return 1;
			}
			if (c.sm_threads != cs[ci].want_t) {
				printf("FAIL torch order: F=%lld n=%lld: %d softmax threads, ATen's block has %lld\n",
				       (long long)F, (long long)n, c.sm_threads, (long long)cs[ci].want_t);
				fails++;
			}
			float *Kv = malloc(sizeof(float) * (size_t)(G * K * NF)),
			      *Zv = malloc(sizeof(float) * (size_t)(G * K * NF));
			float *pr = malloc(sizeof(float) * (size_t)n), *ev = malloc(sizeof(float) * (size_t)n);
			for (int64_t i = 0; i < G * K * NF; i++) {
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				Kv[i] = (float)((int64_t)(seed >> 40) - (1 << 23)) * 0x1p-21f;
				Zv[i] = (float)((int64_t)((seed >> 8) & 0xffffff) - (1 << 23)) * 0x1p-20f;
			}
			const int64_t step = torch_sum_cols_step_v(n, G * F, F);
			int bad = 0, differ = 0;
			for (int64_t g = 0; g < G; g++)
				for (int64_t ch = 0; ch < F; ch++) {
					struct compressor_win w = compressor_window(Kv, Zv, g, ch, K, N, F);
					float mx = -INFINITY;
					for (int64_t q = 0; q < n; q++)
						mx = compressor_max(mx, compressor_win_z(&w, q));
					for (int64_t q = 0; q < n; q++)
						ev[q] = align_expf(compressor_win_z(&w, q) - mx);
					float lane[1024] = {0.0f}, sum;
					const int t = (int)cs[ci].want_t;
					for (int x = 0; x < t; x++) {
						float a = 0.0f;
						for (int64_t q = x; q < n; q += t)
							a += ev[q];
						lane[x] = a;
					}
					for (int o = t / 2; o > 0; o /= 2)
						for (int x = 0; x < o; x++)
							lane[x] = lane[x] + lane[x + o];
					sum = lane[0];
					for (int64_t q = 0; q < n; q++) {
						float wq = ev[q] / sum;
						if (c.pool_bf16)
							wq = align_round_bf16(wq);
						pr[q] = wq * compressor_win_k(&w, q);
						if (c.sum_bf16)
							pr[q] = align_round_bf16(pr[q]);
					}
					float want = torch_sum_cols(pr, 1, n, step);
					if (c.sum_bf16)
						want = align_round_bf16(want);
					float got = compressor_pool(&c, &w), seq = compressor_pool(&cq, &w), ms, ss;
					compressor_pool_stats(&c, &w, &ms, &ss);
					if (memcmp(&got, &want, 4) || memcmp(&ss, &sum, 4)) {
						if (bad++ < 3)
							printf("FAIL torch order G=%lld K=%lld N=%lld F=%lld set %zu g "
							       "%lld ch %lld: "
							       "C %a (model %a), s %a (model %a)\n",
							       (long long)G, (long long)K, (long long)N, (long long)F,
							       si, (long long)g, (long long)ch, got, want, ss, sum);
					}
					differ += memcmp(&got, &seq, 4) != 0;
				}
			if (ci == 0 && si == 0 && differ == 0) {
				printf("FAIL torch order: no window of G=8 K=4 N=2 F=128 differs from the seq order\n");
				fails++;
			}
			printf("torch order G=%lld K=%lld N=%lld F=%lld set %zu: step %lld, %d softmax threads, %lld "
			       "windows, "
			       "%d differ from seq, %d from the model\n",
			       (long long)G, (long long)K, (long long)N, (long long)F, si, (long long)step,
			       c.sm_threads, (long long)(G * F), differ, bad);
			fails += bad != 0;
			free(Kv);
			free(Zv);
			free(pr);
			free(ev);
		}
	return fails;
}

int main(void)
{
	static const char *const sets[][4] = {
		{NULL},
		{"ALIGN_CSA_COMP_NORM", "fp32", NULL},
		{"ALIGN_RMSNORM_WEIGHT", "bf16", NULL},
		{"ALIGN_RMSNORM_REDUCE", "fp64", "ALIGN_RMSNORM_EPS", "1e-5"},
		{"ALIGN_CSA_COMP_SUM_ORDER", "torch", "ALIGN_RMSNORM_REDUCE", "torch"},
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
	/* the backward: long double bound (fp32 switches, CSA_COMP_NORM=fp32), every norm switch and form */
	static const char *const bsets[][4] = {
		{NULL},
		{"ALIGN_RMSNORM_WEIGHT", "bf16", NULL},
		{"ALIGN_RMSNORM_BWD_FORM", "te", NULL},
		{"ALIGN_RMSNORM_BWD_FORM", "apex", NULL},
		{"ALIGN_RMSNORM_REDUCE", "fp64", "ALIGN_RMSNORM_EPS", "1e-5"},
	};
	static const char *const bdims[] = {"T=6,K=4,N=2,D=32,F=128", "T=3,K=8,N=1,D=32,F=128"};
	for (size_t di = 0; di < 2; di++)
		for (int set = 0; set < 2; set++)
			for (int var = 0; var < 3; var++)
				for (size_t s = 0; s < sizeof bsets / sizeof bsets[0]; s++) {
					int n = 0;
					while (n < 4 && bsets[s][n])
						n++;
					fails += bwd_ref_check(bdims[di], set, var, bsets[s], n);
				}
	/* central differences: fp32 switches, then each bf16 precision switch value */
	static const char *const fsets[][2] = {
		{NULL},
		{"ALIGN_CSA_COMP_GEMM", "bf16"},
		{"ALIGN_CSA_COMP_APE", "bf16"},
		{"ALIGN_CSA_COMP_POOL", "bf16"},
		{"ALIGN_CSA_COMP_SUM", "bf16"},
		{"ALIGN_CSA_COMP_NORM", "bf16_input"},
	};
	static const char *const fdims[] = {"T=3,K=2,N=2,D=16,F=32", "T=3,K=4,N=1,D=16,F=32"};
	for (size_t di = 0; di < 2; di++)
		for (int var = 0; var < 2; var++)
			for (size_t s = 0; s < sizeof fsets / sizeof fsets[0]; s++)
				fails += bwd_fd_check(fdims[di], var, fsets[s], fsets[s][0] ? 2 : 0);
	fails += bwd_invariance("T=8,K=4,N=2,D=32,F=128", "T=4,K=4,N=2,D=32,F=128", 0);
	fails += bwd_invariance("T=8,K=4,N=1,D=32,F=128", "T=4,K=4,N=1,D=32,F=128", 1);
	fails += torch_order_check();
	printf("test-ops-ref-compressor: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
