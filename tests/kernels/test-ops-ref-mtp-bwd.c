/* test-ops-ref-mtp-bwd.c: checks of mtp_bwd (kernels/ops/mtp_bwd.h), the MTP pre-layer's backward composed
 * on the backward ops (a file of its own: test-ops-ref-mtp.c holds the forward and the loss side).
 *   compose  every output is, byte for byte, the composition rebuilt here from the ops' own entry points:
 *            the mtp forward twin's e, en, hn and MTP ids, the stream sum written here, matmul_bwd (two
 *            GEMMs under add, one K = 2D GEMM on cat operands under concat_eh / concat_he), rmsnorm_bwd on
 *            hnorm and enorm, embedding_bwd; under each MTP_COMBINE, the defaults, every value of every
 *            other switch mtp_bwd reads one at a time and 24 random assignments of all of them, on the spec,
 *            EXTREME and constant fills of test-ops.c (the return codes must agree too: a value a sub-op
 *            refuses is refused the same way). The stream sum is also held to (N - 1) u sum|dx| plus half a
 *            bf16 ulp against long double.
 *   whole    against central differences of a long double evaluation of the exact pre-layer (no roundings:
 *            bf16-exact table, weights, h and dx, so every operand rounding is the identity) of the
 *            objective sum dx . X0, per gradient in the 2-norm within mtp_bwd.h's 2^-6 (printed: the worst
 *            ratio seen), under each MTP_COMBINE and a few switch values. The forward twin itself stores
 *            bf16 at every step, so its own differences at a small step measure its roundings, not the
 *            derivative: the long double evaluation is of the same contract (mtp.h steps 1-5).
 * Determinism, batch invariance (dh's first T/2 rows) and each switch's effect: test-ops.c.
 * Exit status 0 = pass; prints the modes and fill set of a failure. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtp_bwd.h"
#include "ops.h"

#define SEED 0x3a7b2eedull
#define NSETS 3
#define U 0x1p-24L

typedef long double ld;

static const struct align_op *OP;

static struct align_tensor view(void *data, int dtype, int ndim, int64_t a, int64_t b, int64_t c, const char *name)
{
	struct align_tensor t;
	memset(&t, 0, sizeof t);
	t.data = data;
	t.dtype = dtype;
	t.ndim = ndim;
	t.shape[0] = a;
	t.shape[1] = b;
	t.shape[2] = c;
	t.name = name;
	return t;
}

static struct align_tensor mk(int dtype, int ndim, int64_t a, int64_t b, int64_t c, const char *name)
{
	struct align_tensor t = view(NULL, dtype, ndim, a, b, c, name);
	int64_t n = align_tensor_numel(&t);
	t.data = calloc((size_t)(n > 0 ? n : 1), align_dtype_size(dtype));
	return t;
}

/* element i of a tensor as stored: copy of esize bytes */
static void cp(void *dst, int64_t di, const void *src, int64_t si, size_t es)
{
	memcpy((char *)dst + di * es, (const char *)src + si * es, es);
}

static ld worst_sum;

/* den / dep: R(sum over s of F(x[(t*N + s)*ld + off + j])) from the s = 0 term, s ascending; its bound
 * against long double recorded in worst_sum */
static void stream_sum(const struct align_tensor *x, int64_t T, int64_t N, int64_t D, int64_t ldx, int64_t off,
		       struct align_tensor *out)
{
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < D; j++) {
			float acc = 0.0f;
			ld ref = 0, abs = 0;
			for (int64_t s = 0; s < N; s++) {
				float v = ops_ld(x, (t * N + s) * ldx + off + j);
				acc = s ? acc + v : v;
				ref += v, abs += fabsl((ld)v);
			}
			ops_st(out, t * D + j, acc);
			ld got = ops_ld(out, t * D + j), tol = (N - 1) * U * abs + 0x1p-8L * fabsl(ref) + 0x1p-133L;
			if (isinf(got) && fabsl(ref) - tol > FLT_MAX && (got > 0) == (ref > 0))
				continue; /* beyond binary32: the overflow is the right result */
			if (isfinite(ref) && fabsl(got - ref) > tol) {
				if (getenv("REF_DEBUG"))
					printf("  sum %La ref %La tol %La\n", got, ref, tol);
				worst_sum = INFINITY;
			} else if (isfinite(ref) && tol > 0 && fabsl(got - ref) / tol > worst_sum)
				worst_sum = fabsl(got - ref) / tol;
		}
}

static int run_op(const char *name, const void *p, const struct align_modes *m, struct align_tensor *in, int n_in,
		  struct align_tensor *out, int n_out)
{
	return ops_find(name)->impl->fwd_cpu(p, m, in, n_in, out, n_out);
}

/* step 2 by hand under add: dproj rows and den, dhn */
static int compose_add(const struct align_modes *mm, int64_t T, int64_t S, int64_t N, int64_t D,
		       const struct align_tensor *in, const struct align_tensor *fo, struct align_tensor *den,
		       struct align_tensor *dhn, struct align_tensor *dproj)
{
	int wdt = in[6].dtype, rc = 0;
	size_t ws = align_dtype_size(wdt);
	struct align_tensor dep = mk(ALIGN_DT_BF16, 2, T, D, 0, "dep");
	stream_sum(&in[5], T, N, D, D, 0, &dep);
	for (int k = 0; k < 2 && !rc; k++) { /* e_proj, h_proj */
		int64_t rows = k ? T * N : T;
		struct align_tensor mi[4] = {mk(ALIGN_DT_F32, 2, rows, D, 0, "a"), mk(ALIGN_DT_F32, 2, D, D, 0, "b"),
					     mk(ALIGN_DT_F32, 2, rows, D, 0, "dy"), mk(wdt, 2, D, D, 0, "main_grad")};
		struct align_tensor mo[2] = {k ? *dhn : *den, mk(wdt, 2, D, D, 0, "db")};
		const struct align_tensor *a = k ? &fo[3] : &fo[2], *dy = k ? &in[5] : &dep;
		for (int64_t i = 0; i < rows * D; i++) {
			ops_st(&mi[0], i, ops_ld(a, i));
			ops_st(&mi[2], i, ops_ld(dy, i));
		}
		for (int64_t i = 0; i < D * D; i++) {
			ops_st(&mi[1], i, ops_ld(&in[4], k * D * D + i));
			cp(mi[3].data, i, in[6].data, k * D * D + i, ws);
		}
		struct matmul_bwd_params mp = {k ? S * N : S};
		rc = run_op("matmul_bwd", &mp, mm, mi, 4, mo, 2);
		for (int64_t i = 0; i < D * D; i++)
			cp(dproj->data, k * D * D + i, mo[1].data, i, ws);
		for (int i = 0; i < 4; i++)
			ops_tensor_free(&mi[i]);
		ops_tensor_free(&mo[1]);
	}
	ops_tensor_free(&dep);
	return rc;
}

/* step 2 by hand under concat: one matmul_bwd on [en | hn] (eh) or [hn | en] */
static int compose_cat(const struct align_modes *mm, int eh, int64_t T, int64_t S, int64_t N, int64_t D,
		       const struct align_tensor *in, const struct align_tensor *fo, struct align_tensor *den,
		       struct align_tensor *dhn, struct align_tensor *dproj)
{
	int wdt = in[6].dtype;
	size_t ws = align_dtype_size(wdt);
	int64_t R = T * N, K = 2 * D, oe = eh ? 0 : D, oh = eh ? D : 0;
	struct align_tensor mi[4] = {mk(ALIGN_DT_F32, 2, R, K, 0, "a"), mk(ALIGN_DT_F32, 2, D, K, 0, "b"),
				     mk(ALIGN_DT_F32, 2, R, D, 0, "dy"), mk(wdt, 2, D, K, 0, "main_grad")};
	struct align_tensor mo[2] = {mk(ALIGN_DT_BF16, 2, R, K, 0, "da"), mk(wdt, 2, D, K, 0, "db")};
	for (int64_t r = 0; r < R; r++)
		for (int64_t j = 0; j < D; j++) {
			ops_st(&mi[0], r * K + oe + j, ops_ld(&fo[2], (r / N) * D + j));
			ops_st(&mi[0], r * K + oh + j, ops_ld(&fo[3], r * D + j));
			ops_st(&mi[2], r * D + j, ops_ld(&in[5], r * D + j));
		}
	for (int64_t f = 0; f < D; f++)
		for (int64_t j = 0; j < D; j++) {
			ops_st(&mi[1], f * K + oe + j, ops_ld(&in[4], f * D + j));
			ops_st(&mi[1], f * K + oh + j, ops_ld(&in[4], (D + f) * D + j));
			cp(mi[3].data, f * K + oe + j, in[6].data, f * D + j, ws);
			cp(mi[3].data, f * K + oh + j, in[6].data, (D + f) * D + j, ws);
		}
	struct matmul_bwd_params mp = {S * N};
	int rc = run_op("matmul_bwd", &mp, mm, mi, 4, mo, 2);
	stream_sum(&mo[0], T, N, D, K, oe, den);
	for (int64_t r = 0; r < R; r++)
		for (int64_t j = 0; j < D; j++)
			cp(dhn->data, r * D + j, mo[0].data, r * K + oh + j, 2);
	for (int64_t f = 0; f < D; f++)
		for (int64_t j = 0; j < D; j++) {
			cp(dproj->data, f * D + j, mo[1].data, f * K + oe + j, ws);
			cp(dproj->data, (D + f) * D + j, mo[1].data, f * K + oh + j, ws);
		}
	for (int i = 0; i < 4; i++)
		ops_tensor_free(&mi[i]);
	ops_tensor_free(&mo[0]);
	ops_tensor_free(&mo[1]);
	return rc;
}

/* mtp_bwd rebuilt from the ops' entry points; out as mtp_bwd's outputs */
static int compose(const struct align_dims *d, const struct align_modes *m, const struct mtp_params *p,
		   struct align_tensor *in, struct align_tensor *out)
{
	int64_t T = d->v[ALIGN_DIM_T], S = p->S, N = d->v[ALIGN_DIM_N], D = d->v[ALIGN_DIM_D];
	struct align_tensor pos = mk(ALIGN_DT_I32, 1, T, 0, 0, "pos");
	struct align_tensor fi[6] = {in[0], pos, in[1], in[2], in[3], in[4]};
	struct align_tensor fo[7] = {mk(ALIGN_DT_I32, 2, 3, T, 0, "tok"), mk(ALIGN_DT_BF16, 2, T, D, 0, "e"),
				     mk(ALIGN_DT_BF16, 2, T, D, 0, "en"), mk(ALIGN_DT_BF16, 2, T * N, D, 0, "hn"),
				     mk(ALIGN_DT_BF16, 2, T, D, 0, "ep"), mk(ALIGN_DT_BF16, 2, T * N, D, 0, "hp"),
				     mk(ALIGN_DT_BF16, 3, T, N, D, "x")};
	int rc = run_op("mtp", p, m, fi, 6, fo, 7);
	struct align_modes mm = *m;
	mm.v[MODE_MATMUL_OUT] = ALIGN_MATMUL_OUT_BF16;
	struct align_tensor den = mk(ALIGN_DT_BF16, 2, T, D, 0, "den"), dhn = mk(ALIGN_DT_BF16, 2, T * N, D, 0, "dhn");
	struct align_tensor de = mk(ALIGN_DT_BF16, 2, T, D, 0, "de"), dw = mk(out[2].dtype, 1, D, 0, 0, "dw");
	int comb = m->v[MODE_MTP_COMBINE];
	if (!rc)
		rc = comb == ALIGN_MTP_COMBINE_ADD ? compose_add(&mm, T, S, N, D, in, fo, &den, &dhn, &out[3])
						   : compose_cat(&mm, comb == ALIGN_MTP_COMBINE_CONCAT_EH, T, S, N, D,
								 in, fo, &den, &dhn, &out[3]);
	size_t es = align_dtype_size(out[2].dtype);
	struct rmsnorm_bwd_params rp = {0};
	for (int k = 1; k >= 0 && !rc; k--) { /* hnorm, then enorm */
		int64_t rows = k ? T * N : T;
		struct align_tensor ri[3] = {view(k ? in[2].data : fo[1].data, ALIGN_DT_BF16, 2, rows, D, 0, "x"),
					     view((float *)in[3].data + k * D, ALIGN_DT_F32, 1, D, 0, 0, "w"),
					     k ? view(dhn.data, ALIGN_DT_BF16, 2, rows, D, 0, "dy") : den};
		struct align_tensor ro[2] = {k ? view(out[1].data, ALIGN_DT_BF16, 2, rows, D, 0, "dx") : de, dw};
		rc = run_op("rmsnorm_bwd", &rp, m, ri, 3, ro, 2);
		for (int64_t j = 0; j < D; j++)
			cp(out[2].data, k * D + j, dw.data, j, es);
	}
	struct embedding_params ep = {0.0f};
	struct align_tensor ei[3] = {view(fo[0].data, ALIGN_DT_I32, 1, T, 0, 0, "ids"), in[1], de};
	if (!rc)
		rc = run_op("embedding_bwd", &ep, m, ei, 3, &out[0], 1);
	for (int i = 0; i < 7; i++)
		ops_tensor_free(&fo[i]);
	ops_tensor_free(&pos);
	ops_tensor_free(&den);
	ops_tensor_free(&dhn);
	ops_tensor_free(&de);
	ops_tensor_free(&dw);
	return rc;
}

static int fill(const struct align_dims *d, struct align_tensor *t, int i, int set)
{
	struct align_fill f = OP->impl->in[i].fill;
	if (f.dim)
		f.limit = (float)d->v[strchr(ALIGN_DIM_LETTERS, f.dim) - ALIGN_DIM_LETTERS];
	if (t->dtype != ALIGN_DT_I32 && set == 1 && f.kind == ALIGN_FILL_SPECIAL)
		f.kind = ALIGN_FILL_EXTREME;
	if (t->dtype != ALIGN_DT_I32 && set == 2) {
		f.kind = ALIGN_FILL_CONST;
		f.scale = i == 2 ? -100.0f * f.scale : f.scale;
	}
	return ops_fill_tensor(&f, OP->name, t, SEED, 0);
}

/* one assignment on one fill set: mtp_bwd against the composition */
static int compare(const struct align_dims *d, const struct align_modes *m, int set)
{
	const struct align_op_impl *im = OP->impl;
	struct mtp_params p;
	im->params_default(&p, d);
	struct align_tensor in[7], a[4], b[4];
	for (int i = 0; i < 7; i++)
		if (ops_tensor_alloc(OP, 0, i, d, m, &in[i]) || fill(d, &in[i], i, set))
			return 1;
	for (int i = 0; i < 4; i++)
		if (ops_tensor_alloc(OP, 1, i, d, m, &a[i]) || ops_tensor_alloc(OP, 1, i, d, m, &b[i]))
			return 1;
	int ra = im->fwd_cpu(&p, m, in, 7, a, 4), rb = compose(d, m, &p, in, b), fails = 0;
	for (int i = 0; i < 4 && !ra && !rb; i++) {
		size_t n = (size_t)align_tensor_numel(&a[i]) * align_dtype_size(a[i].dtype);
		fails += memcmp(a[i].data, b[i].data, n) != 0;
	}
	if (ra != rb || fails) {
		char buf[2048];
		modes_format(m, buf, sizeof buf);
		printf("FAIL mtp_bwd (set %d, rc %d vs composed %d, %d outputs differ): %s\n", set, ra, rb, fails, buf);
		fails++;
	}
	for (int i = 0; i < 7; i++)
		ops_tensor_free(&in[i]);
	for (int i = 0; i < 4; i++) {
		ops_tensor_free(&a[i]);
		ops_tensor_free(&b[i]);
	}
	return fails ? 1 : 0;
}

static int check_compose(void)
{
	struct align_dims d;
	char err[128];
	ops_dims_parse("T=8,S=4,V=16,N=2,D=16", &d, err, sizeof err);
	int fails = 0, runs = 0;
	uint64_t rng = SEED;
	for (int set = 0; set < NSETS; set++)
		for (int cb = 0; cb < modes_value_count(MODE_MTP_COMBINE); cb++) {
			struct align_modes def;
			modes_init_default(&def);
			def.v[MODE_MTP_COMBINE] = cb;
			fails += compare(&d, &def, set), runs++;
			for (const int *s = OP->impl->modes; *s >= 0; s++)
				for (int v = 0; v < modes_value_count(*s); v++) {
					if (*s == MODE_MTP_COMBINE || v == def.v[*s] || modes_value_gpu_only(*s, v))
						continue;
					struct align_modes m = def;
					m.v[*s] = v;
					fails += compare(&d, &m, set), runs++;
				}
			for (int k = 0; k < 24; k++) {
				struct align_modes m = def;
				for (const int *s = OP->impl->modes; *s >= 0; s++) {
					rng = rng * 6364136223846793005ull + 1442695040888963407ull;
					int v = (int)((rng >> 33) % (uint64_t)modes_value_count(*s));
					if (*s != MODE_MTP_COMBINE && !modes_value_gpu_only(*s, v))
						m.v[*s] = v;
				}
				fails += compare(&d, &m, set), runs++;
			}
		}
	printf("compose  %4d runs: the bytes of mtp -> stream sum -> matmul_bwd -> rmsnorm_bwd -> embedding_bwd; "
	       "stream sum worst %.3Lf of its bound%s\n",
	       runs, worst_sum, fails || worst_sum > 1 ? "  FAIL" : "");
	return fails + (worst_sum > 1);
}

/* ---- whole: central differences of the exact pre-layer in long double ---- */

struct whole {
	int64_t T, S, V, N, D;
	int32_t *ids;
	ld *tab, *h, *nrm, *prj, *dx; /* the parameters (bf16-exact values) and dX0 */
};

/* rmsnorm of n values with weight w into y (exact, eps the binary32 1e-6 of RMSNORM_EPS's default) */
static void norm_ld(const ld *x, const ld *w, int64_t n, ld *y)
{
	ld ms = 0;
	for (int64_t j = 0; j < n; j++)
		ms += x[j] * x[j];
	ld r = 1.0L / sqrtl(ms / n + (ld)1e-6f);
	for (int64_t j = 0; j < n; j++)
		y[j] = x[j] * r * w[j];
}

/* the objective sum dx . X0 of the exact pre-layer (add and concat are the same function without roundings) */
static ld objective(const struct whole *w)
{
	const int64_t T = w->T, S = w->S, N = w->N, D = w->D;
	ld en[64], hn[64], L = 0;
	for (int64_t t = 0; t < T; t++) {
		int64_t id = t % S + 1 < S ? w->ids[t + 1] : 0;
		norm_ld(w->tab + id * D, w->nrm, D, en);
		for (int64_t s = 0; s < N; s++) {
			norm_ld(w->h + (t * N + s) * D, w->nrm + D, D, hn);
			for (int64_t f = 0; f < D; f++) {
				ld x = 0;
				for (int64_t j = 0; j < D; j++)
					x += en[j] * w->prj[f * D + j] + hn[j] * w->prj[(D + f) * D + j];
				L += w->dx[(t * N + s) * D + f] * x;
			}
		}
	}
	return L;
}

/* 2-norm ratio |got - fd| / |fd| over n parameters p[0..n) (the gradient of the objective by central
 * differences) against output got */
static ld grad_ratio(struct whole *w, ld *p, int64_t n, const struct align_tensor *got)
{
	ld num = 0, den = 0;
	for (int64_t i = 0; i < n; i++) {
		ld v = p[i], h = 0x1p-20L * (1 + fabsl(v));
		p[i] = v + h;
		ld lp = objective(w);
		p[i] = v - h;
		ld lm = objective(w);
		p[i] = v;
		ld ref = (lp - lm) / (2 * h), g = ops_ld(got, i);
		num += (g - ref) * (g - ref);
		den += ref * ref;
	}
	return den > 0 ? sqrtl(num / den) : sqrtl(num);
}

static ld uni(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (ld)(int64_t)((*s >> 11) & ((1ull << 52) - 1)) / 0x1p51L - 1; /* [-1, 1) */
}

static int check_whole(void)
{
	struct align_dims d;
	char err[128];
	ops_dims_parse("T=4,S=2,V=8,N=2,D=8", &d, err, sizeof err);
	struct whole w = {4, 2, 8, 2, 8, NULL, NULL, NULL, NULL, NULL, NULL};
	const int64_t T = w.T, V = w.V, N = w.N, D = w.D;
	struct {
		int mode, value;
	} vars[] = {{-1, 0},
		    {MODE_RMSNORM_BWD_FORM, ALIGN_RMSNORM_BWD_FORM_TE},
		    {MODE_RMSNORM_BWD_FORM, ALIGN_RMSNORM_BWD_FORM_APEX},
		    {MODE_WGRAD_DTYPE, ALIGN_WGRAD_DTYPE_FP32},
		    {MODE_EMBED_BWD_DTYPE, ALIGN_EMBED_BWD_DTYPE_FP32},
		    {MODE_RMSNORM_BWD_DW_DTYPE, ALIGN_RMSNORM_BWD_DW_DTYPE_BF16},
		    {MODE_MATMUL_OPERAND, ALIGN_MATMUL_OPERAND_FP32}};
	int fails = 0, runs = 0;
	ld worst = 0;
	uint64_t rng = SEED;
	for (int cb = 0; cb < modes_value_count(MODE_MTP_COMBINE); cb++)
		for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
			struct align_modes m;
			modes_init_default(&m);
			m.v[MODE_MTP_COMBINE] = cb;
			if (vars[k].mode >= 0)
				m.v[vars[k].mode] = vars[k].value;
			struct mtp_params p;
			OP->impl->params_default(&p, &d);
			struct align_tensor in[7], out[4];
			for (int i = 0; i < 7; i++)
				ops_tensor_alloc(OP, 0, i, &d, &m, &in[i]);
			for (int i = 0; i < 4; i++)
				ops_tensor_alloc(OP, 1, i, &d, &m, &out[i]);
			ld *buf = calloc((size_t)(V * D + 2 * T * N * D + 2 * D + 2 * D * D), sizeof *buf);
			w.ids = in[0].data, w.tab = buf, w.h = w.tab + V * D, w.nrm = w.h + T * N * D;
			w.prj = w.nrm + 2 * D, w.dx = w.prj + 2 * D * D;
			for (int64_t t = 0; t < T; t++)
				w.ids[t] = (int32_t)((uint64_t)((uni(&rng) + 1) * 4) % (uint64_t)V);
			/* bf16-exact values, stored and mirrored in long double */
			ld *dst[5] = {w.tab, w.h, w.nrm, w.prj, w.dx};
			const int src[5] = {1, 2, 3, 4, 5};
			const ld scale[5] = {1, 2, 0.5L, 0.3L, 0.1L}, base[5] = {0, 0, 1, 0, 0};
			for (int q = 0; q < 5; q++)
				for (int64_t i = 0; i < align_tensor_numel(&in[src[q]]); i++) {
					float v = align_round_bf16((float)(base[q] + scale[q] * uni(&rng)));
					ops_st(&in[src[q]], i, v);
					dst[q][i] = v;
				}
			int rc = OP->impl->fwd_cpu(&p, &m, in, 7, out, 4);
			ld r[4] = {grad_ratio(&w, w.tab, V * D, &out[0]), grad_ratio(&w, w.h, T * N * D, &out[1]),
				   grad_ratio(&w, w.nrm, 2 * D, &out[2]), grad_ratio(&w, w.prj, 2 * D * D, &out[3])};
			runs++;
			for (int i = 0; i < 4; i++) {
				worst = r[i] > worst ? r[i] : worst;
				if (rc || !(r[i] <= 0x1p-6L)) {
					char mb[2048];
					modes_format(&m, mb, sizeof mb);
					printf("FAIL mtp_bwd %s: 2-norm ratio %.3Lg to the central differences (rc "
					       "%d): "
					       "%s\n",
					       OP->impl->out[i].name, r[i], rc, mb);
					fails++;
				}
			}
			free(buf);
			for (int i = 0; i < 7; i++)
				ops_tensor_free(&in[i]);
			for (int i = 0; i < 4; i++)
				ops_tensor_free(&out[i]);
		}
	printf("whole    %4d runs: central differences of the exact pre-layer, worst 2-norm ratio %.3Lg (bound "
	       "2^-6)%s\n",
	       runs, worst, fails ? "  FAIL" : "");
	return fails;
}

int main(void)
{
	OP = ops_find("mtp_bwd");
	int fails = check_compose() + check_whole();
	printf("test-ops-ref-mtp-bwd: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
