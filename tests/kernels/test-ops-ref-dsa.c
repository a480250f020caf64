/* test-ops-ref-dsa.c: fp64 (long double) reference checks of the DeepSeek-V3.2 DSA ops (dsa_indexer, sparse_mla)
 * and of their shared helpers (kernels/core/hadamard.h, fp8.h), as test-ops-ref-indexer.c does for the DSv4 ops.
 *   hadamard.h: every q/k row of every run, rotated by each implementation, against the exact scale * H x
 *     (H built here from popcount parity) within the header's bound.
 *   fp8.h: align_round_e4m3 against a nearest search over the 256 e4m3 encodings decoded here (ties to the even
 *     encoding), on every binary32 pattern step; the block scale rules against frexp-based formulas.
 *   dsa_indexer: the score against the exact weighted relu sum on the contract's operands (rotated rows and
 *     FP8 codes from dsa_indexer_prep_row, whose pieces are checked above), -inf exactly where masked; idx as the
 *     indexer: min(K, S) slots, -1 for masked keys, a top set of the op's own scores in the stated order.
 *   sparse_mla: the exact softmax-weighted latent sum over the slots the contract visits (multiplicity in gather,
 *     distinct rows in mask) within the header's bound; empty rows and non-finite references are skipped.
 *   sparse_mla_bwd: dq and dkv against the exact sums of the contract's terms (exact p and O over the same slots)
 *     within sparse_mla_bwd.h's bound; dq = +0 on rows with no valid slot, NaN where the online statistics give
 *     it; and against central differences of the long double loss do . o (mask and gather, default and fp32 modes).
 * Every combination of the switches each op reads (MATH_IMPL portable), every parameter variant and the three
 * fill sets of test-ops.c. Exit status 0 = pass; prints seed, op, modes and the worst element on failure. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsa_indexer_bwd.h"
#include "fp8.h"
#include "hadamard.h"
#include "ops.h"
#include "sparse_mla.h"
#include "sparse_mla_bwd.h"

#define SEED 0xd5a5eedull
#define NSETS 3
#define U 0x1p-24L

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

struct ctx {
	const struct align_modes *m;
	const struct align_tensor *in, *out;
	const void *params;
	ld worst;
	int64_t worst_i;
};

static void judge(struct ctx *c, int64_t i, ld got, ld ref, ld tol)
{
	ld err = fabsl(got - ref);
	if (isnan(got) || isnan(ref))
		err = isnan(got) && isnan(ref) ? 0 : INFINITY;
	if (isinf(ref) && got == ref)
		err = 0;
	ld r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
	if (r > c->worst) {
		c->worst = r;
		c->worst_i = i;
		if (getenv("REF_DEBUG") && r > 1)
			printf("  element %" PRId64 ": got %La ref %La tol %La\n", i, got, ref, tol);
	}
}

/* ---- fp8.h ------------------------------------------------------------------------------------------ */

static float e4m3_decode(int code) /* 0..255, float8_e4m3fn; NaN for S.1111.111 */
{
	int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
	if (e == 15 && m == 7)
		return NAN;
	float v = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
	return s ? -v : v;
}

/* nearest e4m3 value to x (finite), ties to the even encoding, saturating at +-448 */
static float e4m3_nearest(float x)
{
	float best = 0;
	int bc = -1;
	for (int code = 0; code < 256; code++) {
		float v = e4m3_decode(code);
		if (isnan(v) || (signbit(v) != signbit(x)))
			continue;
		ld d = fabsl((ld)v - x), db = fabsl((ld)best - x);
		if (bc < 0 || d < db || (d == db && !(code & 1) && (bc & 1))) {
			best = v;
			bc = code;
		}
	}
	return best;
}

static int check_fp8(void)
{
	int fails = 0;
	for (uint64_t u = 0; u < 0x100000000ull; u += 0x1001) { /* ~1M patterns of every exponent */
		uint32_t b = (uint32_t)u;
		float x;
		memcpy(&x, &b, 4);
		float got = align_round_e4m3(x);
		if (isnan(x)) {
			fails += !isnan(got);
			continue;
		}
		float want = fabsf(x) >= 448.0f ? copysignf(448.0f, x) : e4m3_nearest(x);
		if (memcmp(&got, &want, 4) != 0 && !(got == 0 && want == 0 && signbit(got) == signbit(x))) {
			if (fails++ < 5)
				printf("FAIL e4m3(%a) = %a, want %a\n", (double)x, (double)got, (double)want);
		}
	}
	const float amaxs[] = {0.0f, 1e-5f, 1e-4f, 0.0123f, 1.0f, 3.5f, 448.0f, 449.0f, 1e30f, 0x1.fffffep127f};
	for (size_t i = 0; i < sizeof amaxs / sizeof amaxs[0]; i++) {
		float a = amaxs[i] > 1e-4f ? amaxs[i] : 1e-4f, p = a * (float)(1.0 / 448.0);
		int e;
		float fr = frexpf(p, &e); /* p = fr 2^e, fr in [0.5, 1): ceil(log2 p) = e, or e - 1 when fr == 0.5 */
		float want = ldexpf(1.0f, fr == 0.5f ? e - 1 : e);
		fails += align_fp8_scale(amaxs[i], ALIGN_FP8_SCALE_UE8M0) != want;
		fails += align_fp8_scale(amaxs[i], ALIGN_FP8_SCALE_MUL) != p;
		fails += align_fp8_scale(amaxs[i], ALIGN_FP8_SCALE_DIV) != a / 448.0f;
	}
	printf("fp8          e4m3 rounding and block scales: %s\n", fails ? "FAIL" : "ok");
	return fails;
}

/* ---- hadamard.h ------------------------------------------------------------------------------------- */

static void check_hadamard_row(struct ctx *c, const align_bf16 *row, int64_t n, float scale, int impl, int64_t at)
{
	float x[DSA_INDEXER_D_MAX], tmp[DSA_INDEXER_D_MAX];
	for (int64_t d = 0; d < n; d++)
		x[d] = align_bf16_to_f32(row[d]);
	align_hadamard_f32(x, n, scale, impl, tmp);
	ld A = 0;
	for (int64_t j = 0; j < n; j++)
		A += fabsl((ld)align_bf16_to_f32(row[j]));
	A *= scale;
	int lg = 0;
	while ((1 << lg) < n)
		lg++;
	for (int64_t i = 0; i < n; i++) {
		ld ref = 0;
		for (int64_t j = 0; j < n; j++)
			ref += (__builtin_popcountll((unsigned long long)(i & j)) & 1 ? -1.0L : 1.0L) *
			       align_bf16_to_f32(row[j]);
		ref = impl == ALIGN_HADAMARD_NONE ? align_bf16_to_f32(row[i]) : ref * (ld)scale;
		if (!isfinite(ref) || !(A <= FLT_MAX))
			continue;
		ld tol = impl == ALIGN_HADAMARD_BUTTERFLY ? (lg + 1) * U * A
			 : impl == ALIGN_HADAMARD_DENSE	  ? (n + 1) * U * A
							  : 0;
		judge(c, at + i, x[i], ref, tol + 0x1p-140L);
	}
}

/* ---- dsa_indexer -------------------------------------------------------------------------------------- */

static void ref_dsa_indexer(struct ctx *c)
{
	struct dsa_indexer_cfg ic;
	if (dsa_indexer_cfg_init(&ic, c->params, c->m, c->in, 3, c->out, 2, ALIGN_DEVICE_CPU, NULL)) {
		judge(c, -1, 1, 0, 0);
		return;
	}
	const int64_t T = ic.T, H = ic.H, D = ic.D, S = ic.S, K = ic.K, kk = K < S ? K : S;
	const align_bf16 *q = c->in[0].data, *k = c->in[1].data, *w = c->in[2].data;
	const int32_t *idx = c->out[0].data;
	const float *score = c->out[1].data;
	align_bf16 *qp = malloc(sizeof(align_bf16) * (size_t)(T * H * D)),
		   *kp = malloc(sizeof(align_bf16) * (size_t)(S * D));
	float *qs = malloc(sizeof(float) * (size_t)(T * H)), *ks = malloc(sizeof(float) * (size_t)S),
	      tmp[2 * DSA_INDEXER_D_MAX];
	for (int64_t r = 0; r < T * H + S; r++) { /* the rotation, then the codes against the nearest search */
		const align_bf16 *row = r < T * H ? q + r * D : k + (r - T * H) * D;
		align_bf16 *pr = r < T * H ? qp + r * D : kp + (r - T * H) * D;
		check_hadamard_row(c, row, D, ic.hscale, ic.hadamard, -1000000 - r * D);
		float s = dsa_indexer_prep_row(&ic, row, pr, tmp);
		if (r < T * H)
			qs[r] = s;
		else
			ks[r - T * H] = s;
		if (!ic.fp8)
			continue;
		struct dsa_indexer_cfg nofp8 = ic;
		nofp8.fp8 = 0;
		align_bf16 rot[DSA_INDEXER_D_MAX];
		dsa_indexer_prep_row(&nofp8, row, rot, tmp);
		for (int64_t d = 0; d < D; d++) {
			float v = align_bf16_to_f32(rot[d]) / s, got = align_bf16_to_f32(pr[d]);
			if (isnan(v))
				continue;
			float want = fabsf(v) >= 448.0f ? copysignf(448.0f, v) : e4m3_nearest(v);
			if (got != want)
				judge(c, -2000000 - r * D - d, 1, 0, 0);
		}
	}
	for (int64_t t = 0; t < T; t++) {
		const int64_t last = ic.start + t;
		ld wt[256];
		for (int64_t h = 0; h < H && h < 256; h++)
			wt[h] = dsa_indexer_weight(&ic, w[t * H + h], qs[t * H + h]);
		for (int64_t j = 0; j < S; j++) {
			int64_t e = t * S + j;
			if (j > last) {
				if (!(isinf(score[e]) && score[e] < 0))
					judge(c, e, 1, 0, 0);
				continue;
			}
			ld ref = 0, A = 0, kf = ic.fp8 ? ks[j] : 1;
			for (int64_t h = 0; h < H; h++) {
				ld dot = 0, ab = 0;
				for (int64_t d = 0; d < D; d++) {
					ld pr = (ld)align_bf16_to_f32(qp[(t * H + h) * D + d]) *
						align_bf16_to_f32(kp[j * D + d]);
					dot += pr;
					ab += fabsl(pr);
				}
				ref += (dot > 0 ? dot : 0) * wt[h];
				A += fabsl(wt[h]) * ab;
			}
			ref *= kf;
			A *= kf;
			if (!(fabsl(ref) <= FLT_MAX && A <= FLT_MAX))
				continue; /* outside the bound's domain (binary32 overflow) */
			judge(c, e, score[e], ref, (D + H + 2) * U * A + 0x1p-140L);
		}
		int64_t nsel = 0, vis = last + 1 < S ? last + 1 : S;
		for (int64_t j = 0; j < K; j++) {
			int32_t v = idx[t * K + j];
			if (j >= kk || (v >= 0 && v > last) || (v < 0 && v != -1))
				judge(c, t * K + j, v == -1 ? 0 : 1, 0, 0);
			if (v >= 0)
				nsel++;
		}
		if (nsel != (kk < vis ? kk : vis))
			judge(c, t * K, 1, 0, 0);
		float minsel = INFINITY;
		for (int64_t j = 0; j < kk; j++) {
			int32_t v = idx[t * K + j];
			if (v < 0)
				continue;
			float sv = score[t * S + v];
			minsel = sv < minsel ? sv : minsel;
			if (j > 0 && idx[t * K + j - 1] >= 0) {
				int32_t u = idx[t * K + j - 1];
				float su = score[t * S + u];
				if (ic.ix.order == ALIGN_INDEXER_TOPK_ORDER_SORTED && !indexer_before(su, u, sv, v))
					judge(c, t * K + j, 1, 0, 0);
				if (ic.ix.order == ALIGN_INDEXER_TOPK_ORDER_INDEX && !(u < v))
					judge(c, t * K + j, 1, 0, 0);
			}
		}
		for (int64_t j = 0; j < vis; j++) { /* an unselected visible key never beats a selected one */
			int sel = 0;
			for (int64_t u = 0; u < kk && !sel; u++)
				sel = idx[t * K + u] == j;
			if (!sel && score[t * S + j] > minsel)
				judge(c, t * S + j, 1, 0, 0);
		}
	}
	free(qp);
	free(kp);
	free(qs);
	free(ks);
}

/* ---- sparse_mla --------------------------------------------------------------------------------------- */

static void ref_sparse_mla(struct ctx *c)
{
	struct sparse_mla_cfg mc;
	if (sparse_mla_cfg_init(&mc, c->params, c->m, c->in, 3, c->out, 1, ALIGN_DEVICE_CPU, NULL)) {
		judge(c, -1, 1, 0, 0);
		return;
	}
	const struct sparse_mla_params *p = c->params;
	const int64_t T = mc.T, H = mc.H, D = mc.D, F = mc.F, S = mc.S, N = mc.N;
	const int32_t *idx = c->in[2].data;
	ld *sc = malloc(sizeof(ld) * (size_t)N), *ds = malloc(sizeof(ld) * (size_t)N);
	int32_t *rows = malloc(sizeof(int32_t) * (size_t)N);
	for (int64_t t = 0; t < T; t++) {
		int64_t n = 0; /* the visited valid rows: all valid slots (gather) or the distinct ones (mask) */
		for (int64_t k = 0; k < N; k++) {
			int32_t j = idx[t * N + k];
			int dup = 0;
			for (int64_t u = 0; u < n && !mc.gather; u++)
				dup |= rows[u] == j;
			if (j >= 0 && j < S && !dup)
				rows[n++] = j;
		}
		if (!n)
			continue;
		for (int64_t h = 0; h < H; h++) {
			const int64_t qr = (t * H + h) * D;
			ld m = -INFINITY;
			for (int64_t k = 0; k < n; k++) {
				ld dot = 0, ab = 0;
				for (int64_t d = 0; d < D; d++) {
					ld pr = (ld)ops_ld(&c->in[0], qr + d) *
						ops_ld(&c->in[1], (int64_t)rows[k] * D + d);
					dot += pr;
					ab += fabsl(pr);
				}
				sc[k] = (ld)p->scale * dot;
				ds[k] = (ld)p->scale * D * U * ab;
				m = sc[k] > m ? sc[k] : m;
			}
			ld den = 0, dsmax = 0;
			for (int64_t k = 0; k < n; k++) {
				den += expl(sc[k] - m);
				ld e = ds[k] + 4 * U * (fabsl(sc[k]) + fabsl(m));
				dsmax = e > dsmax ? e : dsmax;
			}
			for (int64_t d = 0; d < F; d++) {
				ld ref = 0, A = 0;
				for (int64_t k = 0; k < n; k++) {
					ld pk = expl(sc[k] - m) / den, v = ops_ld(&c->in[1], (int64_t)rows[k] * D + d);
					ref += pk * v;
					A += pk * fabsl(v);
				}
				if (!isfinite(ref))
					continue;
				ld tol = ulp_bf16(ref) + (mc.sa.p_bf16 ? 0x1p-8L * A : 0) +
					 (4 * dsmax + (N + D + 16) * U) * 2 * A;
				int64_t i = (t * H + h) * F + d;
				judge(c, i, ops_ld(&c->out[0], i), ref, tol + 0x1p-133L);
			}
		}
	}
	free(sc);
	free(ds);
	free(rows);
}

struct ref_entry {
	const char *op;
	void (*fn)(struct ctx *);
};

/* ---- dsa_indexer_bwd ---------------------------------------------------------------------------------- */

/* one row's rotation backward against the exact gradient sums g[0..D) (with their errors e[] before the
 * bf16 rounding of the sum): ref = scale * H g (or g, none); tol = the sums' errors through the rotation (an
 * l1 bound: the matrix is +-1), its arithmetic (hadamard.h's), half a bf16 ulp twice (the sum's and the
 * output's rounding) */
static void judge_rot(struct ctx *c, const struct dsa_indexer_cfg *dc, const ld *g, const ld *e, const align_bf16 *got,
		      int64_t at)
{
	int64_t D = dc->D;
	int lg = 0;
	while ((1 << lg) < D)
		lg++;
	ld sc = dc->hscale, E = 0, A = 0;
	for (int64_t d = 0; d < D; d++) {
		ld ed = e[d] + ulp_bf16(fabsl(g[d]) + e[d]) / 2;
		E += ed;
		A += fabsl(g[d]) + ed;
	}
	for (int64_t i = 0; i < D; i++) {
		ld ref = 0, tol;
		if (dc->hadamard == ALIGN_HADAMARD_NONE) {
			ref = g[i];
			tol = e[i] + ulp_bf16(fabsl(g[i]) + e[i]) / 2;
		} else {
			for (int64_t j = 0; j < D; j++)
				ref += (__builtin_popcountll((unsigned long long)(i & j)) & 1 ? -g[j] : g[j]);
			ref *= sc;
			tol = sc * E + (dc->hadamard == ALIGN_HADAMARD_BUTTERFLY ? lg + 1 : D + 1) * U * sc * A;
		}
		tol += ulp_bf16(fabsl(ref) + tol) / 2 + 0x1p-140L;
		if (isfinite(ref) && A <= FLT_MAX)
			judge(c, at + i, align_bf16_to_f32(got[i]), ref, tol);
	}
}

/* dsa_indexer_bwd: the exact sums of the contract's fp32 terms on the op's own rotated rows and dots (the
 * masks from its binary32 dots), through judge_rot; dw as indexer_bwd.h */
static void ref_dsa_indexer_bwd(struct ctx *c)
{
	struct dsa_indexer_cfg dc;
	if (dsa_indexer_bwd_cfg_init(&dc, c->params, c->m, c->in, 4, c->out, 3, ALIGN_DEVICE_CPU, NULL)) {
		judge(c, -1, 1, 0, 0);
		return;
	}
	int64_t T = dc.T, H = dc.H, D = dc.D, S = dc.S;
	const align_bf16 *w = c->in[2].data;
	const float *ds = c->in[3].data;
	align_bf16 *rq = malloc((size_t)(T * H * D + S * D) * sizeof *rq), *rk = rq + T * H * D;
	float tmp[2 * DSA_INDEXER_D_MAX];
	for (int64_t i = 0; i < T * H; i++)
		dsa_indexer_prep_row(&dc, (const align_bf16 *)c->in[0].data + i * D, rq + i * D, tmp);
	for (int64_t j = 0; j < S; j++)
		dsa_indexer_prep_row(&dc, (const align_bf16 *)c->in[1].data + j * D, rk + j * D, tmp);
	ld *dd = malloc((size_t)(T * H * S) * sizeof *dd), g[DSA_INDEXER_D_MAX], e[DSA_INDEXER_D_MAX];
	for (int64_t t = 0; t < T; t++)
		for (int64_t h = 0; h < H; h++) {
			float wb = dsa_indexer_weight(&dc, w[t * H + h], 1.0f);
			ld acc = 0, A = 0;
			for (int64_t j = 0; j < S; j++) {
				ld v = 0;
				if (dsa_indexer_bwd_visible(&dc, t, j)) {
					float dot = indexer_bwd_dot(&dc.ix, rq + t * H * D, rk + j * D, h);
					ld term = (ld)ds[t * S + j] * indexer_relu(dot);
					v = dot > 0 ? (ld)ds[t * S + j] * wb : 0;
					acc += term;
					A += fabsl(term);
				}
				dd[(t * H + h) * S + j] = v;
			}
			ld sc = (ld)dc.ix.s2 * dc.ix.s1, ref = acc * sc;
			ld tol = (S * U * A + 0x1p-8L * fabsl(acc)) * fabsl(sc) + 2 * 0x1p-8L * fabsl(ref) +
				 ulp_bf16(fabsl(ref)) + 0x1p-140L;
			if (fabsl(ref) <= FLT_MAX && A <= FLT_MAX)
				judge(c, 2 * T * H * D + t * H + h, ops_ld(&c->out[2], t * H + h), ref, tol);
		}
	for (int64_t i = 0; i < T * H; i++) {
		int64_t t = i / H;
		for (int64_t d = 0; d < D; d++) {
			ld a = 0, A = 0;
			for (int64_t j = 0; j < S; j++)
				if (dsa_indexer_bwd_visible(&dc, t, j)) {
					ld pr = dd[i * S + j] * (ld)align_bf16_to_f32(rk[j * D + d]);
					a += pr;
					A += fabsl(pr);
				}
			g[d] = a;
			e[d] = (S + 1) * U * A;
		}
		judge_rot(c, &dc, g, e, (const align_bf16 *)c->out[0].data + i * D, i * D);
	}
	for (int64_t j = 0; j < S; j++) {
		for (int64_t d = 0; d < D; d++) {
			ld a = 0, A = 0;
			for (int64_t t = 0; t < T; t++)
				if (dsa_indexer_bwd_visible(&dc, t, j))
					for (int64_t h = 0; h < H; h++) {
						ld pr = dd[(t * H + h) * S + j] *
							(ld)align_bf16_to_f32(rq[(t * H + h) * D + d]);
						a += pr;
						A += fabsl(pr);
					}
			g[d] = a;
			e[d] = (T * H + 1) * U * A;
		}
		judge_rot(c, &dc, g, e, (const align_bf16 *)c->out[1].data + j * D, T * H * D + j * D);
	}
	free(rq);
	free(dd);
}

/* ---- sparse_mla_bwd ----------------------------------------------------------------------------------- */

/* the valid rows token t's slots visit (gather: every valid slot, duplicates included; mask: the distinct ones)
 * into rows; returns their count */
static int64_t smb_ref_rows(const int32_t *idx, int64_t N, int64_t S, int gather, int32_t *rows)
{
	int64_t n = 0;
	for (int64_t k = 0; k < N; k++) {
		int32_t j = idx[k];
		int dup = 0;
		for (int64_t u = 0; u < n && !gather; u++)
			dup |= rows[u] == j;
		if (j >= 0 && j < S && !dup)
			rows[n++] = j;
	}
	return n;
}

/* gather with online blocks: a first block without a valid slot gives NaN statistics (sparse_mla.h) */
static int smb_ref_nan_row(const struct sparse_mla_cfg *mc, const int32_t *idx)
{
	if (!mc->gather || !mc->block)
		return 0;
	for (int64_t k = 0; k < mc->N && k < mc->block; k++)
		if (idx[k] >= 0 && idx[k] < mc->S)
			return 0;
	return 1;
}

/* the exact sums of sparse_mla_bwd.h's terms (exact p and O) within its bound */
static void ref_sparse_mla_bwd(struct ctx *c)
{
	struct sparse_mla_bwd_cfg b;
	if (sparse_mla_bwd_cfg_init(&b, c->params, c->m, c->in, 4, c->out, 2, ALIGN_DEVICE_CPU, NULL)) {
		judge(c, -1, 1, 0, 0);
		return;
	}
	const struct sparse_mla_cfg *mc = &b.f;
	const int64_t T = mc->T, H = mc->H, D = mc->D, F = mc->F, S = mc->S, N = mc->N;
	const int32_t *idx = c->in[2].data;
	const ld sc = b.scale, big = 0x1p100L;
	ld *z = malloc(sizeof(ld) * (size_t)(5 * N + F + 1)), *p = z + N, *dP = p + N, *dS = dP + N, *M = dS + N,
	   *A = M + N;
	ld *dkv = calloc((size_t)(2 * S * D + 1), sizeof(ld)), *Mkv = dkv + S * D;
	char *skip = calloc((size_t)(S + 1), 1);
	int32_t *rows = malloc(sizeof(int32_t) * (size_t)(N + 1));
	for (int64_t t = 0; t < T; t++) {
		const int64_t n = smb_ref_rows(idx + t * N, N, S, mc->gather, rows);
		const int nanrow = n > 0 && smb_ref_nan_row(mc, idx + t * N);
		for (int64_t h = 0; h < H; h++) {
			const int64_t r = t * H + h;
			int ok = !nanrow;
			ld m = -INFINITY, dzmax = 0, den = 0;
			for (int64_t k = 0; k < n; k++) {
				ld dot = 0, ab = 0;
				for (int64_t d = 0; d < D; d++) {
					ld pr = (ld)ops_ld(&c->in[0], r * D + d) *
						ops_ld(&c->in[1], (int64_t)rows[k] * D + d);
					dot += pr;
					ab += fabsl(pr);
				}
				z[k] = sc * dot;
				dS[k] = sc * D * U * ab; /* the logit's error, for now */
				ok = ok && ab <= big;
				m = z[k] > m ? z[k] : m;
			}
			for (int64_t k = 0; k < n; k++) {
				den += expl(z[k] - m);
				ld e = dS[k] + 4 * U * (fabsl(z[k]) + fabsl(m));
				dzmax = e > dzmax ? e : dzmax;
			}
			const ld eps = 4 * dzmax + (n + D + 16) * U, w = 0x1p-7L + 4 * eps;
			ld delta = 0, pdp = 0, dsum = 0;
			for (int64_t k = 0; k < n; k++) {
				p[k] = expl(z[k] - m) / den;
				ld s = 0, ab = 0;
				for (int64_t d = 0; d < F; d++) {
					ld pr = (ld)ops_ld(&c->in[3], r * F + d) *
						ops_ld(&c->in[1], (int64_t)rows[k] * D + d);
					s += pr;
					ab += fabsl(pr);
				}
				dP[k] = s;
				ok = ok && ab <= big;
				delta += p[k] * s;
				pdp += p[k] * fabsl(s);
			}
			for (int64_t d = 0; d < F; d++) {
				A[d] = 0;
				for (int64_t k = 0; k < n; k++)
					A[d] += p[k] * fabsl((ld)ops_ld(&c->in[1], (int64_t)rows[k] * D + d));
				dsum += fabsl((ld)ops_ld(&c->in[3], r * F + d)) * A[d];
			}
			ok = ok && isfinite(delta) && dsum <= big && isfinite(m);
			for (int64_t k = 0; k < n; k++) {
				dS[k] = p[k] * (dP[k] - delta) * sc;
				M[k] = p[k] * (fabsl(dP[k]) + fabsl(delta) + dsum + pdp) * sc * w;
			}
			if (nanrow) { /* the contract's NaN */
				for (int64_t d = 0; d < D; d++)
					judge(c, r * D + d, ops_ld(&c->out[0], r * D + d), NAN, 0);
			}
			if (!ok || n == 0) {
				for (int64_t k = 0; k < n; k++)
					skip[rows[k]] = 1;
				for (int64_t d = 0; d < D && n == 0; d++) /* no valid slot: dq = +0 */
					judge(c, r * D + d, ops_ld(&c->out[0], r * D + d), 0, 0x1p-140L);
				continue;
			}
			for (int64_t d = 0; d < D; d++) {
				ld s = 0, tol = 0;
				const ld qd = ops_ld(&c->in[0], r * D + d),
					 dod = d < F ? ops_ld(&c->in[3], r * F + d) : 0;
				for (int64_t k = 0; k < n; k++) {
					const int64_t e = (int64_t)rows[k] * D + d;
					const ld v = ops_ld(&c->in[1], e);
					s += dS[k] * v;
					tol += M[k] * fabsl(v);
					dkv[e] += dS[k] * qd + p[k] * dod;
					Mkv[e] += M[k] * fabsl(qd) + (0x1p-7L + 2 * eps) * p[k] * fabsl(dod);
				}
				judge(c, r * D + d, ops_ld(&c->out[0], r * D + d), s, ulp_bf16(s) + tol + 0x1p-133L);
			}
		}
	}
	for (int64_t i = 0; i < S * D; i++)
		if (!skip[i / D])
			judge(c, T * H * D + i, ops_ld(&c->out[1], i), dkv[i], Mkv[i] + 0x1p-140L);
	free(z);
	free(dkv);
	free(skip);
	free(rows);
}

/* sparse_mla_bwd against central differences (h = 2^-14 max(|x|, 1)) of the long double loss L = sum do . o
 * (exact softmax over the visited valid rows, o over the latent columns), T = 4, H = 2, D = 8, F = 6, S = 12,
 * N = 6, both slot forms: in the default modes (bf16 P and O: within ulp_bf16 (dq) + 2^-6 of the largest
 * quotient of the tensor) and with fp32 logits and P, delta from P (within ulp_bf16 (dq) + 2^-12 |fd| + 2^-14
 * of the largest quotient) */
static ld smb_loss(const struct align_tensor *in, const ld *q, const ld *kv, ld scale, int gather)
{
	const int64_t T = in[0].shape[0], H = in[0].shape[1], D = in[0].shape[2], S = in[1].shape[0],
		      N = in[2].shape[1], F = in[3].shape[2];
	int32_t rows[64];
	ld z[64], L = 0;
	for (int64_t t = 0; t < T; t++) {
		const int64_t n = smb_ref_rows((const int32_t *)in[2].data + t * N, N, S, gather, rows);
		for (int64_t h = 0; h < H && n > 0; h++) {
			const int64_t r = t * H + h;
			ld m = -INFINITY, den = 0;
			for (int64_t k = 0; k < n; k++) {
				z[k] = 0;
				for (int64_t d = 0; d < D; d++)
					z[k] += q[r * D + d] * kv[(int64_t)rows[k] * D + d];
				z[k] *= scale;
				m = z[k] > m ? z[k] : m;
			}
			for (int64_t k = 0; k < n; k++)
				den += expl(z[k] - m);
			for (int64_t d = 0; d < F; d++) {
				ld o = 0;
				for (int64_t k = 0; k < n; k++)
					o += expl(z[k] - m) / den * kv[(int64_t)rows[k] * D + d];
				L += (ld)ops_ld(&in[3], r * F + d) * o;
			}
		}
	}
	return L;
}

static int check_sparse_mla_bwd_fd(void)
{
	const struct align_op *op = ops_find("sparse_mla_bwd");
	struct align_dims dm;
	ops_dims_default(op, &dm);
	ops_dims_parse("T=4,H=2,D=8,F=6,S=12,N=6", &dm, NULL, 0);
	int fails = 0;
	for (int cfg = 0; cfg < 4; cfg++) {
		struct align_modes m;
		modes_init_default(&m);
		m.v[MODE_DSA_MLA_SLOTS] = cfg & 1 ? ALIGN_DSA_MLA_SLOTS_GATHER : ALIGN_DSA_MLA_SLOTS_MASK;
		if (cfg & 2) {
			m.v[MODE_DSA_MLA_QK] = ALIGN_DSA_MLA_QK_FP32;
			m.v[MODE_DSA_MLA_P] = ALIGN_DSA_MLA_P_FP32;
			m.v[MODE_CSA_BWD_DELTA] = ALIGN_CSA_BWD_DELTA_P;
		}
		struct align_tensor in[4], out[2];
		for (int i = 0; i < 4; i++) {
			ops_tensor_alloc(op, 0, i, &dm, &m, &in[i]);
			ops_fill_input_dims(op, i, &in[i], &dm, SEED, 0);
		}
		for (int i = 0; i < 2; i++)
			ops_tensor_alloc(op, 1, i, &dm, &m, &out[i]);
		struct sparse_mla_params prm;
		op->impl->params_default(&prm, &dm);
		const int64_t nq = align_tensor_numel(&in[0]), nk = align_tensor_numel(&in[1]);
		ld *x = malloc(sizeof(ld) * (size_t)(nq + nk)), *fd = malloc(sizeof(ld) * (size_t)(nq + nk));
		for (int64_t i = 0; i < nq + nk; i++)
			x[i] = i < nq ? ops_ld(&in[0], i) : ops_ld(&in[1], i - nq);
		int f = op->impl->fwd_cpu(&prm, &m, in, 4, out, 2) != ALIGN_OK;
		ld mx[2] = {0, 0}, worst = 0;
		for (int64_t i = 0; i < nq + nk && !f; i++) {
			ld keep = x[i], hh = 0x1p-14L * (fabsl(keep) > 1 ? fabsl(keep) : 1);
			x[i] = keep + hh;
			ld lp = smb_loss(in, x, x + nq, prm.scale, cfg & 1);
			x[i] = keep - hh;
			ld lm = smb_loss(in, x, x + nq, prm.scale, cfg & 1);
			x[i] = keep;
			fd[i] = (lp - lm) / (2 * hh);
			mx[i >= nq] = fabsl(fd[i]) > mx[i >= nq] ? fabsl(fd[i]) : mx[i >= nq];
		}
		for (int64_t i = 0; i < nq + nk && !f; i++) {
			ld got = i < nq ? ops_ld(&out[0], i) : ops_ld(&out[1], i - nq);
			ld tol = (i < nq ? ulp_bf16(fd[i]) : 0) +
				 (cfg & 2 ? 0x1p-12L * fabsl(fd[i]) + 0x1p-14L * mx[i >= nq] : 0x1p-6L * mx[i >= nq]);
			ld r = fabsl(got - fd[i]) / tol;
			worst = r > worst ? r : worst;
			if (!(r <= 1) && f++ < 5)
				printf("FAIL sparse_mla_bwd finite difference (case %d): gradient %" PRId64
				       ": op %.9Lg, central difference %.9Lg\n",
				       cfg, i, got, fd[i]);
		}
		if (!(mx[0] > 0 && mx[1] > 0) && !f++)
			printf("FAIL sparse_mla_bwd finite difference (case %d): a zero gradient tests nothing\n", cfg);
		printf("sparse_mla_bwd finite differences (%s, %s, %" PRId64 " gradients): worst %.3Lf of the bound\n",
		       cfg & 1 ? "gather" : "mask", cfg & 2 ? "fp32 QK and P, delta from P" : "defaults", nq + nk,
		       worst);
		fails += f;
		free(x);
		free(fd);
		for (int i = 0; i < 4; i++)
			ops_tensor_free(&in[i]);
		for (int i = 0; i < 2; i++)
			ops_tensor_free(&out[i]);
	}
	return fails;
}

static const struct ref_entry refs[] = {
	{"dsa_indexer", ref_dsa_indexer},
	{"dsa_indexer_bwd", ref_dsa_indexer_bwd},
	{"sparse_mla", ref_sparse_mla},
	{"sparse_mla_bwd", ref_sparse_mla_bwd},
};

static int fill(const struct align_op *op, struct align_tensor *t, int i, int set)
{
	struct align_fill f = op->impl->in[i].fill;
	if (t->dtype != ALIGN_DT_I32 && set == 1 && f.kind == ALIGN_FILL_SPECIAL)
		f.kind = ALIGN_FILL_EXTREME;
	if (t->dtype != ALIGN_DT_I32 && set == 2) {
		f.kind = ALIGN_FILL_CONST;
		f.scale = i == 0 ? -100.0f * f.scale : f.scale;
	}
	return ops_fill_tensor(&f, op->name, t, SEED, 0);
}

static int check_op(const struct align_op *op, void (*fn)(struct ctx *))
{
	const struct align_op_impl *im = op->impl;
	int ids[16], nm = 0, fails = 0, combos = 1, runs = 0;
	for (const int *p = im->modes; *p >= 0; p++)
		if (*p != MODE_MATH_IMPL) {
			ids[nm++] = *p;
			combos *= modes_value_count(*p);
		}
	struct align_dims d;
	ops_dims_default(op, &d);
	void *params = calloc(1, im->params_size);
	ld worst = 0;
	for (int var = 0; im->params_variant(params, &d, var); var++)
		for (int set = 0; set < NSETS; set++)
			for (int cmb = 0; cmb < combos; cmb++) {
				struct align_modes m;
				modes_init_default(&m);
				for (int q = 0, rest = cmb; q < nm; q++) {
					m.v[ids[q]] = rest % modes_value_count(ids[q]);
					rest /= modes_value_count(ids[q]);
				}
				struct align_tensor in[8], out[8];
				for (int i = 0; i < im->n_in; i++) {
					ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
					fill(op, &in[i], i, set);
				}
				for (int i = 0; i < im->n_out; i++)
					ops_tensor_alloc(op, 1, i, &d, &m, &out[i]);
				struct ctx c = {&m, in, out, params, 0, -1};
				if (im->fwd_cpu(params, &m, in, im->n_in, out, im->n_out) != ALIGN_OK) {
					printf("FAIL %s: run failed\n", op->name);
					fails++;
				} else {
					fn(&c);
					runs++;
					worst = c.worst > worst ? c.worst : worst;
					if (c.worst > 1) {
						char buf[2048];
						modes_format(&m, buf, sizeof buf);
						printf("FAIL %s variant %d set %d element %" PRId64
						       ": error %.3Lg x bound (seed 0x%llx) modes %s\n",
						       op->name, var, set, c.worst_i, c.worst, (unsigned long long)SEED,
						       buf);
						fails++;
					}
				}
				for (int i = 0; i < im->n_in; i++)
					ops_tensor_free(&in[i]);
				for (int i = 0; i < im->n_out; i++)
					ops_tensor_free(&out[i]);
			}
	printf("%-12s %4d runs: worst error %.3Lf of the stated bound%s\n", op->name, runs, worst,
	       fails ? "  FAIL" : "");
	free(params);
	return fails;
}

/* dsa_indexer_bwd against central differences (h = 2^-12) of the long double loss L = sum over visible
 * (t, j) of dscore * sum_h relu((scale H q_th) . (scale H k_j)) wb_th (the rotation unrounded, wb at the
 * contract's bf16 value), butterfly rotation, T = 4, H = 2, D = 4, S = 4, inputs multiples of 1/8 in
 * [-2, 2] (so the forward's rotated rows, scale 1/2, are exact in bf16), the first seed whose dots all keep
 * 1/16 from relu's kink: dq and dk within 2^-6 |fd| + 2^-10
 * (the backward's bf16 roundings); this checks the rotation's backward as the transpose (H is symmetric) */
static ld dib_loss(const ld *q, const ld *k, const ld *wb, const float *ds, ld sc, int T, int H, int D, int S)
{
	ld L = 0, rq[4], rk[4];
	for (int t = 0; t < T; t++)
		for (int j = 0; j <= t && j < S; j++)
			for (int h = 0; h < H; h++) {
				for (int i = 0; i < D; i++) {
					rq[i] = rk[i] = 0;
					for (int m = 0; m < D; m++) {
						ld sg = __builtin_popcount((unsigned)(i & m)) & 1 ? -1 : 1;
						rq[i] += sg * q[(t * H + h) * D + m] * sc;
						rk[i] += sg * k[j * D + m] * sc;
					}
				}
				ld dot = 0;
				for (int i = 0; i < D; i++)
					dot += rq[i] * rk[i];
				L += ds[t * S + j] * (dot > 0 ? dot : 0) * wb[t * H + h];
			}
	return L;
}

static int check_dsa_indexer_bwd_fd(void)
{
	const struct align_op *op = ops_find("dsa_indexer_bwd");
	enum { T = 4, H = 2, D = 4, S = 4 };
	struct align_dims dm;
	ops_dims_parse("T=4,H=2,D=4,S=4", &dm, NULL, 0);
	struct align_modes m;
	modes_init_default(&m);
	m.v[MODE_DSA_HADAMARD] = ALIGN_HADAMARD_BUTTERFLY;
	struct align_tensor in[4], out[3];
	for (int i = 0; i < 4; i++)
		ops_tensor_alloc(op, 0, i, &dm, &m, &in[i]);
	for (int i = 0; i < 3; i++)
		ops_tensor_alloc(op, 1, i, &dm, &m, &out[i]);
	ld q[T * H * D], k[S * D], wb[T * H];
	uint64_t st = 5150, seed = 5150;
retry: /* the first seed whose dots (= q . k: the rotation is orthonormal) all keep 1/16 from relu's kink */
	st = ++seed;
	for (int i = 0; i < T * H * D + S * D + T * H + T * S; i++) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		float v = (float)((int)(st >> 40) % 33 - 16) / 8.0f;
		if (i < T * H * D)
			((align_bf16 *)in[0].data)[i] = align_f32_to_bf16(v), q[i] = v;
		else if (i < T * H * D + S * D)
			((align_bf16 *)in[1].data)[i - T * H * D] = align_f32_to_bf16(v), k[i - T * H * D] = v;
		else if (i < T * H * D + S * D + T * H)
			((align_bf16 *)in[2].data)[i - T * H * D - S * D] = align_f32_to_bf16(v);
		else
			((float *)in[3].data)[i - T * H * D - S * D - T * H] = v;
	}
	for (int i = 0; i < T * H; i++)
		for (int j = 0; j < S; j++) {
			ld dot = 0;
			for (int d = 0; d < D; d++)
				dot += q[i * D + d] * k[j * D + d];
			if (fabsl(dot) < 0.0625L && seed < 6150)
				goto retry;
		}
	struct dsa_indexer_params prm;
	op->impl->params_default(&prm, &dm);
	struct dsa_indexer_cfg dc;
	int fails = dsa_indexer_bwd_cfg_init(&dc, &prm, &m, in, 4, out, 3, ALIGN_DEVICE_CPU, NULL) != ALIGN_OK;
	for (int i = 0; i < T * H; i++)
		wb[i] = dsa_indexer_weight(&dc, ((align_bf16 *)in[2].data)[i], 1.0f);
	fails += op->impl->fwd_cpu(&prm, &m, in, 4, out, 3) != ALIGN_OK;
	ld worst = 0;
	for (int i = 0; i < T * H * D + S * D && !fails; i++) {
		ld *v = i < T * H * D ? &q[i] : &k[i - T * H * D], keep = *v, hh = 0x1p-12L;
		*v = keep + hh;
		ld lp = dib_loss(q, k, wb, in[3].data, dc.hscale, T, H, D, S);
		*v = keep - hh;
		ld lm = dib_loss(q, k, wb, in[3].data, dc.hscale, T, H, D, S);
		*v = keep;
		ld fd = (lp - lm) / (2 * hh), got = i < T * H * D ? ops_ld(&out[0], i) : ops_ld(&out[1], i - T * H * D);
		ld r = fabsl(got - fd) / (0x1p-6L * fabsl(fd) + 0x1p-10L);
		worst = r > worst ? r : worst;
		if (r > 1) {
			printf("FAIL dsa_indexer_bwd finite difference: gradient %d: op %.9Lg, central difference "
			       "%.9Lg\n",
			       i, got, fd);
			fails++;
		}
	}
	printf("dsa_indexer_bwd finite differences (butterfly, %d gradients): worst %.3Lf of the bound\n",
	       T * H * D + S * D, worst);
	for (int i = 0; i < 4; i++)
		ops_tensor_free(&in[i]);
	for (int i = 0; i < 3; i++)
		ops_tensor_free(&out[i]);
	return fails;
}

int main(void)
{
	int fails = check_fp8() + check_dsa_indexer_bwd_fd() + check_sparse_mla_bwd_fd();
	for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
		fails += check_op(ops_find(refs[k].op), refs[k].fn);
	printf("test-ops-ref-dsa: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
