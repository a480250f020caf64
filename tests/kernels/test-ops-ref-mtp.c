/* test-ops-ref-mtp.c: fp64 reference checks of the mtp op (kernels/ops/mtp.h) and of its bad inputs, and of
 * the mtp_loss op (kernels/ops/mtp_loss.h: its scaled term and total against the header's bounds, every mode
 * pair, factors 0.1 and 0.3, K = 1 and 3; the scaling forms and combinations change bits on these inputs),
 * and of its backward mtp_loss_bwd (kernels/ops/mtp_loss_bwd.h: long double within the header's bound, the
 * signs of zeros, determinism, each switch's effect, central differences of the mtp_loss twin).
 * Every output is compared with a long double evaluation of mtp.h's contract written independently here,
 * against the bound the header states:
 *   tok      exact (the shift formulas of step 1, per sequence; MTP_SHIFT roll / roll_pos);
 *   e        exact (the bf16 parameter's row of the shifted id);
 *   en, hn   w' x / sqrt(mean(x^2) + eps), relative bound ub + (D+16) u (before_weight: 3 ub), ub = 2^-8,
 *            u = 2^-24, plus 4 u for the rsqrtf-style approximation;
 *   ep, hp   the K = D dot of the bf16 inputs with op(w) (operand rounding per MATMUL_OPERAND), matmul.h's
 *            bound per MATMUL_ACCUM, plus half a bf16 ulp;
 *   x        add: F(ep) + F(hp) exact, half a bf16 ulp; concat_eh / concat_he: the K = 2D dot of
 *            [en | hn] (or [hn | en]) with [We | Wh] (or [Wh | We]), the matmul bound, half a bf16 ulp.
 * Modes: every combination of MTP_SHIFT, MTP_COMBINE, MATMUL_OPERAND, MATMUL_ACCUM, MATMUL_FMA and
 * MATMUL_OUT (216), each with one of the 96 RMSNORM_* assignments (cycled, so every RMSNORM value is
 * seen), on the spec fills and the constant fills of test-ops-ref-model.c (its EXTREME set overflows the
 * binary32 mean of squares, which rmsnorm.h's bound leaves out, as test-ops-ref.c does).
 * Also: the combination forms differ in their bits on the default inputs (concat_eh vs add and vs
 * concat_he), a sequence's outputs do not depend on another sequence's tokens (batch invariance by
 * sequence, not only by prefix), and bad inputs are refused with ALIGN_ERR_INPUT (S not dividing T, a
 * wrong shape, an id outside [0, V)). Exit status 0 = pass; prints seed, modes and the worst element. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtp.h"
#include "mtp_loss.h"
#include "mtp_loss_bwd.h"
#include "ops.h"

#define SEED 0x3a7b1eedull
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

static ld worst;
static int64_t worst_i;
static const char *worst_what;

static void judge(const char *what, int64_t i, ld got, ld ref, ld tol)
{
	ld err = fabsl(got - ref);
	if (isnan(got) || isnan(ref))
		err = isnan(got) && isnan(ref) ? 0 : INFINITY;
	if (isinf(ref) && got == ref)
		err = 0;
	if (isinf(got) && fabsl(ref) - tol > FLT_MAX && (got > 0) == (ref > 0))
		err = 0; /* beyond binary32: overflow to inf is the right result */
	ld r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
	if (r > worst) {
		worst = r;
		worst_i = i;
		worst_what = what;
		if (getenv("REF_DEBUG") && r > 1)
			printf("  %s element %" PRId64 ": got %La ref %La tol %La\n", what, i, got, ref, tol);
	}
}

static float operand(const struct align_modes *m, float w)
{
	int v = m->v[MODE_MATMUL_OPERAND];
	return v == ALIGN_MATMUL_OPERAND_BF16	? align_round_bf16(w)
	       : v == ALIGN_MATMUL_OPERAND_TF32 ? align_round_tf32(w)
						: w;
}

/* the dot bound of matmul.h for K terms of absolute sum S and value ref */
static ld dot_bound(const struct align_modes *m, int64_t K, ld ref, ld S)
{
	int accum = m->v[MODE_MATMUL_ACCUM];
	return accum == ALIGN_MATMUL_ACCUM_FP64	     ? U * fabsl(ref) + K * 0x1p-53L * S
	       : accum == ALIGN_MATMUL_ACCUM_SPLIT16 ? ((K + 15) / 16 + 16) * U * S
						     : K * U * S;
}

/* rows of x[rows, D] normalised with weight w: out */
static void ref_norm(const char *what, const struct align_modes *m, const struct align_tensor *x, const float *w,
		     const struct align_tensor *out, int64_t rows, int64_t D)
{
	int wbf16 = m->v[MODE_RMSNORM_WEIGHT] == ALIGN_RMSNORM_WEIGHT_BF16;
	int before = m->v[MODE_RMSNORM_CAST] == ALIGN_RMSNORM_CAST_BEFORE_WEIGHT;
	ld eps = m->v[MODE_RMSNORM_EPS] == ALIGN_RMSNORM_EPS_1E_5 ? (ld)1e-5f : (ld)1e-6f;
	ld rel = (before ? 3 : 1) * 0x1p-8L + (D + 16) * U +
		 (m->v[MODE_RMSNORM_RSQRT] == ALIGN_RMSNORM_RSQRT_APPROX ? 4 * U : 0);
	for (int64_t r = 0; r < rows; r++) {
		ld ss = 0;
		for (int64_t j = 0; j < D; j++) {
			ld v = ops_ld(x, r * D + j);
			ss += v * v;
		}
		ld f = 1.0L / sqrtl(ss / D + eps);
		for (int64_t j = 0; j < D; j++) {
			ld wj = wbf16 ? (ld)align_round_bf16(w[j]) : (ld)w[j];
			ld ref = wj * (ld)ops_ld(x, r * D + j) * f;
			judge(what, r * D + j, ops_ld(out, r * D + j), ref, fabsl(ref) * rel + 0x1p-133L);
		}
	}
}

/* out[r, f] = R(a-row(r) . op(w[f])) with a-row = [a0 row | a1 row] (a1 NULL: K = D) */
static void ref_dot(const char *what, const struct align_modes *m, const struct align_tensor *a0, int64_t div0,
		    const struct align_tensor *a1, int64_t div1, const float *w0, const float *w1,
		    const struct align_tensor *out, int64_t rows, int64_t D)
{
	int64_t K = a1 ? 2 * D : D;
	for (int64_t r = 0; r < rows; r++)
		for (int64_t f = 0; f < D; f++) {
			ld ref = 0, S = 0;
			for (int64_t k = 0; k < K; k++) {
				ld av = k < D ? ops_ld(a0, (r / div0) * D + k) : ops_ld(a1, (r / div1) * D + (k - D));
				float wv = k < D ? w0[f * D + k] : w1[f * D + (k - D)];
				ld prod = av * (ld)operand(m, wv);
				ref += prod;
				S += fabsl(prod);
			}
			ld dot = dot_bound(m, K, ref, S);
			judge(what, r * D + f, ops_ld(out, r * D + f), ref, dot + ulp_bf16(fabsl(ref) + dot) / 2);
		}
}

static void check_all(const struct align_modes *m, const struct align_tensor *in, const struct align_tensor *out,
		      int64_t S)
{
	int64_t T = in[0].shape[0], D = in[2].shape[1], N = in[3].shape[1];
	const int32_t *ids = in[0].data, *pos = in[1].data, *tok = out[0].data;
	int roll_pos = m->v[MODE_MTP_SHIFT] == ALIGN_MTP_SHIFT_ROLL_POS;
	for (int64_t t = 0; t < T; t++) {
		int64_t p = t % S;
		judge("tok.ids", t, tok[t], p + 1 < S ? ids[t + 1] : 0, 0);
		judge("tok.labels", t, tok[T + t], p + 2 < S ? ids[t + 2] : -1, 0);
		judge("tok.pos", t, tok[2 * T + t], roll_pos ? (p + 1 < S ? pos[t + 1] : 0) : pos[t], 0);
		for (int64_t j = 0; j < D; j++)
			judge("e", t * D + j, ops_ld(&out[1], t * D + j),
			      align_round_bf16(((const float *)in[2].data)[(int64_t)tok[t] * D + j]), 0);
	}
	const float *wn = in[4].data, *we = in[5].data, *wh = we + D * D;
	ref_norm("en", m, &out[1], wn, &out[2], T, D);
	struct align_tensor h = in[3];
	h.ndim = 2, h.shape[0] = T * N, h.shape[1] = D;
	ref_norm("hn", m, &h, wn + D, &out[3], T * N, D);
	ref_dot("ep", m, &out[2], 1, NULL, 1, we, NULL, &out[4], T, D);
	ref_dot("hp", m, &out[3], 1, NULL, 1, wh, NULL, &out[5], T * N, D);
	switch (m->v[MODE_MTP_COMBINE]) {
	case ALIGN_MTP_COMBINE_ADD:
		for (int64_t i = 0; i < T * N * D; i++) {
			ld ref = (ld)ops_ld(&out[4], (i / (N * D)) * D + i % D) + (ld)ops_ld(&out[5], i);
			judge("x", i, ops_ld(&out[6], i), ref, ulp_bf16(ref) / 2);
		}
		break;
	case ALIGN_MTP_COMBINE_CONCAT_EH:
		ref_dot("x", m, &out[2], N, &out[3], 1, we, wh, &out[6], T * N, D);
		break;
	default:
		ref_dot("x", m, &out[3], 1, &out[2], N, wh, we, &out[6], T * N, D);
		break;
	}
}

static const struct align_op *OP;

static int fill(const struct align_dims *d, struct align_tensor *t, int i, int set, unsigned long long seed)
{
	struct align_fill f = OP->impl->in[i].fill;
	if (f.dim) /* ids in [0, V), positions in [0, S) of these dims */
		f.limit = (float)d->v[strchr(ALIGN_DIM_LETTERS, f.dim) - ALIGN_DIM_LETTERS];
	if (t->dtype != ALIGN_DT_I32 && set == 1 && f.kind == ALIGN_FILL_SPECIAL)
		f.kind = ALIGN_FILL_EXTREME;
	if (t->dtype != ALIGN_DT_I32 && set == 2) {
		f.kind = ALIGN_FILL_CONST;
		f.scale = i == 3 ? -100.0f * f.scale : f.scale;
	}
	return ops_fill_tensor(&f, OP->name, t, seed, 0);
}

/* inputs and outputs of dims d, filled (set) */
static int setup(const struct align_dims *d, const struct align_modes *m, int set, struct align_tensor *in,
		 struct align_tensor *out, unsigned long long seed)
{
	const struct align_op_impl *im = OP->impl;
	for (int i = 0; i < im->n_in; i++)
		if (ops_tensor_alloc(OP, 0, i, d, m, &in[i]) || fill(d, &in[i], i, set, seed))
			return 1;
	for (int i = 0; i < im->n_out; i++)
		if (ops_tensor_alloc(OP, 1, i, d, m, &out[i]))
			return 1;
	return 0;
}

static void teardown(struct align_tensor *in, struct align_tensor *out)
{
	for (int i = 0; i < OP->impl->n_in; i++)
		ops_tensor_free(&in[i]);
	for (int i = 0; i < OP->impl->n_out; i++)
		ops_tensor_free(&out[i]);
}

static int check_refs(void)
{
	static const int rms[] = {MODE_RMSNORM_WEIGHT, MODE_RMSNORM_CAST, MODE_RMSNORM_RSQRT, MODE_RMSNORM_REDUCE,
				  MODE_RMSNORM_EPS};
	static const int main_modes[] = {MODE_MTP_SHIFT,    MODE_MTP_COMBINE, MODE_MATMUL_OPERAND,
					 MODE_MATMUL_ACCUM, MODE_MATMUL_FMA,  MODE_MATMUL_OUT};
	struct align_dims d;
	char err[128];
	if (ops_dims_parse("T=8,S=4,V=64,N=2,D=64", &d, err, sizeof err))
		return printf("FAIL mtp: dims %s\n", err), 1;
	struct mtp_params p;
	OP->impl->params_default(&p, &d);
	int combos = 1, nrms = 1, fails = 0, runs = 0;
	for (size_t q = 0; q < 6; q++)
		combos *= modes_value_count(main_modes[q]);
	for (size_t q = 0; q < 5; q++)
		nrms *= modes_value_count(rms[q]);
	ld all = 0;
	for (int set = 0; set < NSETS; set += 2) /* spec fills, constants (EXTREME: rmsnorm.h bounds no overflow) */
		for (int cmb = 0; cmb < combos; cmb++) {
			struct align_modes m;
			modes_init_default(&m);
			int rest = cmb;
			for (size_t q = 0; q < 6; q++) {
				m.v[main_modes[q]] = rest % modes_value_count(main_modes[q]);
				rest /= modes_value_count(main_modes[q]);
			}
			rest = (cmb * 7 + set * 31) % nrms; /* every RMSNORM value over the combinations */
			for (size_t q = 0; q < 5; q++) {
				m.v[rms[q]] = rest % modes_value_count(rms[q]);
				rest /= modes_value_count(rms[q]);
			}
			if (modes_gpu_only_in(&m, NULL) >= 0)
				continue;
			struct align_tensor in[6], out[7];
			if (setup(&d, &m, set, in, out, SEED)) {
				printf("FAIL mtp: setup\n");
				return fails + 1;
			}
			worst = 0;
			worst_i = -1;
			worst_what = "";
			if (OP->impl->fwd_cpu(&p, &m, in, 6, out, 7) != ALIGN_OK) {
				printf("FAIL mtp set %d: run failed\n", set);
				fails++;
			} else {
				check_all(&m, in, out, p.S);
				runs++;
				all = worst > all ? worst : all;
				if (worst > 1) {
					char buf[2048];
					modes_format(&m, buf, sizeof buf);
					printf("FAIL mtp set %d %s element %" PRId64
					       ": error %.3Lg x bound (seed 0x%llx) modes %s\n",
					       set, worst_what, worst_i, worst, (unsigned long long)SEED, buf);
					fails++;
				}
			}
			teardown(in, out);
		}
	printf("mtp          %4d runs: worst error %.3Lf of the stated bound%s\n", runs, all, fails ? "  FAIL" : "");
	return fails;
}

/* the forms give other bits (on the default dims and inputs), and a sequence's outputs do not depend on the
 * other sequences: sequence 1 of a batch equals sequence 0 of a batch whose sequence 0 is it */
static int check_forms_and_sequences(void)
{
	struct align_dims d;
	ops_dims_default(OP, &d);
	struct mtp_params p;
	OP->impl->params_default(&p, &d);
	struct align_modes m[3];
	struct align_tensor in[3][6], out[3][7];
	int fails = 0;
	for (int k = 0; k < 3; k++) {
		modes_init_default(&m[k]);
		m[k].v[MODE_MTP_COMBINE] = k == 0   ? ALIGN_MTP_COMBINE_ADD
					   : k == 1 ? ALIGN_MTP_COMBINE_CONCAT_EH
						    : ALIGN_MTP_COMBINE_CONCAT_HE;
		if (setup(&d, &m[k], 0, in[k], out[k], SEED) || OP->impl->fwd_cpu(&p, &m[k], in[k], 6, out[k], 7))
			return printf("FAIL mtp: forms run\n"), 1;
	}
	size_t xb = (size_t)align_tensor_numel(&out[0][6]) * 2;
	if (!memcmp(out[0][6].data, out[1][6].data, xb) || !memcmp(out[1][6].data, out[2][6].data, xb)) {
		printf("FAIL mtp: add, concat_eh and concat_he give the same x\n");
		fails++;
	}
	for (int k = 0; k < 3; k++)
		teardown(in[k], out[k]);
	/* sequences: T = 2S, sequence 1's inputs copied into sequence 0 of a second batch */
	struct align_modes dm;
	modes_init_default(&dm);
	dm.v[MODE_MTP_SHIFT] = ALIGN_MTP_SHIFT_ROLL_POS;
	struct align_dims d2 = d;
	d2.v[ALIGN_DIM_T] = 2 * p.S;
	struct align_tensor a[6], ao[7], b[6], bo[7];
	if (setup(&d2, &dm, 0, a, ao, SEED) || setup(&d2, &dm, 0, b, bo, SEED ^ 0x55))
		return printf("FAIL mtp: sequence setup\n"), fails + 1;
	int64_t S = p.S, N = a[3].shape[1], D = a[3].shape[2];
	memcpy(b[0].data, (int32_t *)a[0].data + S, S * 4);
	memcpy(b[1].data, (int32_t *)a[1].data + S, S * 4);
	memcpy(b[3].data, (align_bf16 *)a[3].data + S * N * D, S * N * D * 2);
	memcpy(b[2].data, a[2].data, (size_t)align_tensor_numel(&a[2]) * 4);
	memcpy(b[4].data, a[4].data, (size_t)align_tensor_numel(&a[4]) * 4);
	memcpy(b[5].data, a[5].data, (size_t)align_tensor_numel(&a[5]) * 4);
	if (OP->impl->fwd_cpu(&p, &dm, a, 6, ao, 7) || OP->impl->fwd_cpu(&p, &dm, b, 6, bo, 7))
		return printf("FAIL mtp: sequence run\n"), fails + 1;
	const int64_t rows[7] = {0, 1, 1, N, 1, N, N}; /* per-token rows of each output (tok: by hand) */
	for (int k = 1; k < 7; k++) {
		size_t n = (size_t)(S * rows[k] * D) * 2;
		if (memcmp((const char *)ao[k].data + n, bo[k].data, n)) {
			printf("FAIL mtp: output %d of sequence 1 depends on sequence 0\n", k);
			fails++;
		}
	}
	for (int r = 0; r < 3; r++)
		if (memcmp((const int32_t *)ao[0].data + r * 2 * S + S, (const int32_t *)bo[0].data + r * 2 * S,
			   S * 4)) {
			printf("FAIL mtp: tok row %d of sequence 1 depends on sequence 0\n", r);
			fails++;
		}
	teardown(a, ao);
	teardown(b, bo);
	return fails;
}

/* bad inputs: ALIGN_ERR_INPUT, nothing else */
static int check_refusals(void)
{
	struct align_dims d;
	char err[128];
	int fails = 0;
	ops_dims_parse("T=8,S=4,V=16,N=2,D=8", &d, err, sizeof err);
	struct mtp_params p;
	OP->impl->params_default(&p, &d);
	struct align_modes m;
	modes_init_default(&m);
	struct align_tensor in[6], out[7];
	if (setup(&d, &m, 0, in, out, SEED))
		return printf("FAIL mtp: refusal setup\n"), 1;
	p.S = 3; /* does not divide T = 8 */
	if (OP->impl->fwd_cpu(&p, &m, in, 6, out, 7) != ALIGN_ERR_INPUT)
		printf("FAIL mtp: S = 3 with T = 8 not refused\n"), fails++;
	p.S = 4;
	in[5].shape[0]--; /* proj [2D-1, D] */
	if (OP->impl->fwd_cpu(&p, &m, in, 6, out, 7) != ALIGN_ERR_INPUT)
		printf("FAIL mtp: a proj of the wrong shape not refused\n"), fails++;
	in[5].shape[0]++;
	((int32_t *)in[0].data)[5] = 16; /* read as the MTP id of token 4 */
	if (OP->impl->fwd_cpu(&p, &m, in, 6, out, 7) != ALIGN_ERR_INPUT)
		printf("FAIL mtp: id 16 with V = 16 not refused\n"), fails++;
	((int32_t *)in[0].data)[5] = 1;
	if (OP->impl->fwd_cpu(&p, &m, in, 6, out, 7) != ALIGN_OK)
		printf("FAIL mtp: good inputs refused\n"), fails++;
	teardown(in, out);
	return fails;
}

/* mtp_loss against fp64 (mtp_loss.h's bounds), every mode pair, both factors, K = 1 and 3, spec and constant
 * fills; and on the default inputs the scaling forms and the combinations give other bits somewhere */
static int check_loss(void)
{
	const struct align_op *op = ops_find("mtp_loss");
	int fails = 0, runs = 0, diff_scale = 0, diff_detach = 0;
	ld all = 0;
	for (int kk = 0; kk < 2; kk++) {
		struct align_dims d;
		char err[64];
		ops_dims_parse(kk ? "T=64,K=3" : "T=16,K=1", &d, err, sizeof err);
		for (int var = 0; var < 2; var++)
			for (int set = 0; set < NSETS; set += 2)
				for (int sc = 0; sc < 2; sc++)
					for (int cb = 0; cb < 3; cb++) {
						struct mtp_loss_params p;
						op->impl->params_variant(&p, &d, var);
						struct align_modes m;
						modes_init_default(&m);
						m.v[MODE_MTP_LOSS_SCALE] = sc;
						m.v[MODE_MTP_LOSS_COMBINE] = cb;
						struct align_tensor in[2], out[2];
						for (int i = 0; i < 2; i++) {
							ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
							struct align_fill f = op->impl->in[i].fill;
							if (set == 2)
								f.kind = ALIGN_FILL_CONST;
							ops_fill_tensor(&f, op->name, &in[i], SEED + (unsigned)i, 0);
						}
						for (int i = 0; i < 2; i++)
							ops_tensor_alloc(op, 1, i, &d, &m, &out[i]);
						if (op->impl->fwd_cpu(&p, &m, in, 2, out, 2)) {
							printf("FAIL mtp_loss: run failed\n");
							return fails + 1;
						}
						runs++;
						worst = 0;
						int64_t T = in[1].shape[0], K = in[1].shape[1];
						const float *lm = in[0].data, *L = in[1].data, *sd = out[0].data,
							    *tot = out[1].data;
						for (int64_t t = 0; t < T; t++) {
							ld A = 0, f = (ld)p.factor / K;
							for (int64_t k = 0; k < K; k++)
								A += L[t * K + k];
							ld ref = f * A, tol = (K + 3) * U * f * A;
							judge("scaled", t, sd[t], ref, tol);
							ld big = fabsl((ld)lm[t]) + fabsl((ld)sd[t]);
							switch (m.v[MODE_MTP_LOSS_COMBINE]) {
							case ALIGN_MTP_LOSS_COMBINE_AUTOSCALER:
								judge("total", t, tot[t], lm[t], 0);
								break;
							case ALIGN_MTP_LOSS_COMBINE_ADD_DETACH:
								judge("total", t, tot[t], lm[t], 2 * U * big);
								diff_detach += tot[t] != lm[t];
								break;
							default:
								judge("total", t, tot[t], lm[t] + ref, U * big + tol);
								break;
							}
							if (sc == ALIGN_MTP_LOSS_SCALE_SUM_THEN_SCALE) {
								struct mtp_loss_cfg c;
								mtp_loss_cfg_init(&c, &p, &m, in, 2, out, 2,
										  ALIGN_DEVICE_CPU, NULL);
								c.sum_first = 0;
								float s2, t2;
								mtp_loss_row(&c, lm[t], L + t * K, &s2, &t2);
								diff_scale += s2 != sd[t];
							}
						}
						all = worst > all ? worst : all;
						if (worst > 1) {
							printf("FAIL mtp_loss K=%lld variant %d set %d scale %d "
							       "combine %d %s row %" PRId64 ": error %.3Lg x bound\n",
							       (long long)K, var, set, sc, cb, worst_what, worst_i,
							       worst);
							fails++;
						}
						for (int i = 0; i < 2; i++) {
							ops_tensor_free(&in[i]);
							ops_tensor_free(&out[i]);
						}
					}
	}
	printf("mtp_loss     %4d runs: worst error %.3Lf of the stated bound; rows where sum_then_scale != per_depth: "
	       "%d, add_detach != lm: %d%s\n",
	       runs, all, diff_scale, diff_detach, fails ? "  FAIL" : "");
	if (!diff_scale || !diff_detach) {
		printf("FAIL mtp_loss: a form never changes the bits on these inputs\n");
		fails++;
	}
	return fails;
}

/* ---- mtp_loss_bwd -------------------------------------------------------------------------------------- */

static uint32_t f32_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

/* run mtp_loss_bwd at dims ds under (sc, cb) with params variant var, dtotal from fill set `set` (0: the
 * spec's SPECIAL fill, 1: EXTREME, 2: constant -0.75); in[2], out[2] allocated here */
static int bwd_run(const char *ds, int var, int set, int sc, int cb, struct mtp_loss_bwd_params *p,
		   struct align_tensor *in, struct align_tensor *out)
{
	const struct align_op *op = ops_find("mtp_loss_bwd");
	struct align_dims d;
	char err[64];
	ops_dims_parse(ds, &d, err, sizeof err);
	op->impl->params_variant(p, &d, var);
	struct align_modes m;
	modes_init_default(&m);
	m.v[MODE_MTP_LOSS_SCALE] = sc;
	m.v[MODE_MTP_LOSS_COMBINE] = cb;
	for (int i = 0; i < 2; i++) {
		ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
		struct align_fill f = op->impl->in[i].fill;
		if (i == 1 && set == 1)
			f.kind = ALIGN_FILL_EXTREME;
		if (i == 1 && set == 2)
			f.kind = ALIGN_FILL_CONST, f.scale = -0.75f;
		ops_fill_tensor(&f, op->name, &in[i], SEED + 7 + (unsigned)i, 0);
		ops_tensor_alloc(op, 1, i, &d, &m, &out[i]);
	}
	return op->impl->fwd_cpu(p, &m, in, 2, out, 2);
}

static void bwd_free(struct align_tensor *in, struct align_tensor *out)
{
	for (int i = 0; i < 2; i++) {
		ops_tensor_free(&in[i]);
		ops_tensor_free(&out[i]);
	}
}

/* mtp_loss_bwd against long double (mtp_loss_bwd.h's bound), every mode pair, the three parameter variants,
 * K = 1 and 3, SPECIAL, EXTREME and constant dtotal: dlm is dtotal's bits; dmtp is c * factor / K (c = dtotal,
 * or R32(main_scale) under autoscaler) within the bound, and a zero is -0 only from per_depth's product of a
 * -0 or underflowing negative c (sum_then_scale's + 0.0f gives +0); every depth of a row has the same bits.
 * Determinism: a second run gives the same bytes. Switch effects: sum_then_scale differs from per_depth and
 * autoscaler from add somewhere, and add_detach equals add bit for bit (the detached term has no gradient). */
static int check_loss_bwd(void)
{
	int fails = 0, runs = 0, diff_scale = 0, diff_auto = 0, diff_detach = 0, zeros_neg = 0, zeros_pos = 0;
	ld all = 0;
	for (int kk = 0; kk < 2; kk++)
		for (int var = 0; var < 3; var++)
			for (int set = 0; set < 3; set++)
				for (int sc = 0; sc < modes_value_count(MODE_MTP_LOSS_SCALE); sc++)
					for (int cb = 0; cb < modes_value_count(MODE_MTP_LOSS_COMBINE); cb++) {
						const char *ds = kk ? "T=64,K=3" : "T=16,K=1";
						struct mtp_loss_bwd_params p;
						/* the op, a second run, the other scaling, and add under this scaling */
						struct align_tensor in[4][2], out[4][2];
						int rc = bwd_run(ds, var, set, sc, cb, &p, in[0], out[0]);
						rc |= bwd_run(ds, var, set, sc, cb, &p, in[1], out[1]);
						rc |= bwd_run(ds, var, set,
							      sc == ALIGN_MTP_LOSS_SCALE_PER_DEPTH
								      ? ALIGN_MTP_LOSS_SCALE_SUM_THEN_SCALE
								      : ALIGN_MTP_LOSS_SCALE_PER_DEPTH,
							      cb, &p, in[2], out[2]);
						rc |= bwd_run(ds, var, set, sc, ALIGN_MTP_LOSS_COMBINE_ADD, &p, in[3],
							      out[3]);
						if (rc) {
							printf("FAIL mtp_loss_bwd: run failed\n");
							return fails + 1;
						}
						runs++;
						worst = 0;
						int64_t T = in[0][0].shape[0], K = in[0][0].shape[1];
						const float *dt = in[0][1].data, *dlm = out[0][0].data,
							    *dL = out[0][1].data;
						const float *other = out[2][1].data, *add = out[3][1].data;
						int auto_ = cb == ALIGN_MTP_LOSS_COMBINE_AUTOSCALER;
						int sum_first = sc == ALIGN_MTP_LOSS_SCALE_SUM_THEN_SCALE;
						ld e = sum_first ? 5 * U : 3 * U,
						   z = sum_first ? (1 + fabsl((ld)p.factor)) * 0x1p-150L : 0x1p-150L;
						if (memcmp(out[0][0].data, out[1][0].data, (size_t)T * 4) ||
						    memcmp(out[0][1].data, out[1][1].data, (size_t)(T * K) * 4)) {
							printf("FAIL mtp_loss_bwd: two runs differ (%s, scale %d, "
							       "combine %d)\n",
							       ds, sc, cb);
							fails++;
						}
						for (int64_t t = 0; t < T; t++) {
							if (f32_bits(dlm[t]) != f32_bits(dt[t]))
								judge("dlm", t, INFINITY, 0, 0);
							float c = auto_ ? (float)p.main_scale : dt[t];
							ld ref = (ld)c * (ld)p.factor / (ld)K;
							for (int64_t k = 0; k < K; k++) {
								float g = dL[t * K + k];
								judge("dmtp", t * K + k, g, ref, e * fabsl(ref) + z);
								if (f32_bits(g) != f32_bits(dL[t * K]))
									judge("dmtp depth", t * K + k, INFINITY, 0, 0);
							}
							float g = dL[t * K];
							if (g == 0) {
								int want_neg = !sum_first &&
									       (signbit(c) != 0) != (p.factor < 0);
								if ((signbit(g) != 0) != want_neg)
									judge("dmtp zero sign", t * K, INFINITY, 0, 0);
								zeros_neg += signbit(g) != 0;
								zeros_pos += signbit(g) == 0;
							}
							diff_scale +=
								!sum_first && f32_bits(g) != f32_bits(other[t * K]);
							diff_auto += auto_ && f32_bits(g) != f32_bits(add[t * K]);
							diff_detach += cb == ALIGN_MTP_LOSS_COMBINE_ADD_DETACH &&
								       f32_bits(g) != f32_bits(add[t * K]);
						}
						all = worst > all ? worst : all;
						if (worst > 1) {
							printf("FAIL mtp_loss_bwd %s variant %d set %d scale %d "
							       "combine %d %s "
							       "element %" PRId64 ": error %.3Lg x bound\n",
							       ds, var, set, sc, cb, worst_what, worst_i, worst);
							fails++;
						}
						for (int r = 0; r < 4; r++)
							bwd_free(in[r], out[r]);
					}
	printf("mtp_loss_bwd %4d runs: worst error %.3Lf of the stated bound; rows where sum_then_scale != "
	       "per_depth: %d, autoscaler != add: %d, add_detach != add: %d; zeros -0 %d, +0 %d%s\n",
	       runs, all, diff_scale, diff_auto, diff_detach, zeros_neg, zeros_pos, fails ? "  FAIL" : "");
	if (!diff_scale || !diff_auto || diff_detach || !zeros_neg || !zeros_pos) {
		printf("FAIL mtp_loss_bwd: a form's effect is not as the contract says on these inputs\n");
		fails++;
	}
	return fails;
}

/* mtp_loss_bwd refuses bad inputs with ALIGN_ERR_INPUT: dtotal of another length, K = 0, a non-finite
 * main_scale or factor */
static int check_loss_bwd_refusals(void)
{
	const struct align_op *op = ops_find("mtp_loss_bwd");
	struct mtp_loss_bwd_params p;
	struct align_tensor in[2], out[2];
	int fails = 0;
	if (bwd_run("T=4,K=2", 0, 0, ALIGN_MTP_LOSS_SCALE_PER_DEPTH, ALIGN_MTP_LOSS_COMBINE_ADD, &p, in, out))
		printf("FAIL mtp_loss_bwd: good inputs refused\n"), fails++;
	struct align_modes m;
	modes_init_default(&m);
	in[1].shape[0] = 3;
	if (op->impl->fwd_cpu(&p, &m, in, 2, out, 2) != ALIGN_ERR_INPUT)
		printf("FAIL mtp_loss_bwd: dtotal [3] with T = 4 not refused\n"), fails++;
	in[1].shape[0] = 4;
	p.main_scale = NAN;
	if (op->impl->fwd_cpu(&p, &m, in, 2, out, 2) != ALIGN_ERR_INPUT)
		printf("FAIL mtp_loss_bwd: main_scale NaN not refused\n"), fails++;
	p.main_scale = 1.0, p.factor = INFINITY;
	if (op->impl->fwd_cpu(&p, &m, in, 2, out, 2) != ALIGN_ERR_INPUT)
		printf("FAIL mtp_loss_bwd: factor inf not refused\n"), fails++;
	p.factor = 0.1;
	in[0].shape[1] = out[1].shape[1] = 0;
	if (op->impl->fwd_cpu(&p, &m, in, 2, out, 2) != ALIGN_ERR_INPUT)
		printf("FAIL mtp_loss_bwd: K = 0 not refused\n"), fails++;
	in[0].shape[1] = out[1].shape[1] = 2;
	bwd_free(in, out);
	return fails;
}

/* the objective whose gradient mtp_loss_bwd is, from the mtp_loss twin's outputs at (lm, L): add: sum_t
 * dt_t total_t; add_detach: sum_t dt_t (lm_t + scaled_t) (the `- loss.detach()` term carries no gradient,
 * so total's value, lm up to roundings, is not it); autoscaler: sum_t dt_t total_t (= lm) + c scaled_t with
 * c = R32(main_scale). Its error is the twin's: at most (K + 4) u (|lm| + |scaled|) a row, times the weight. */
static ld fd_objective(const struct align_op *fop, const struct mtp_loss_params *fp, const struct align_modes *m,
		       struct align_tensor *fin, struct align_tensor *fout, const float *dt, float c)
{
	if (fop->impl->fwd_cpu(fp, m, fin, 2, fout, 2))
		return NAN;
	const float *lm = fin[0].data, *sd = fout[0].data, *tot = fout[1].data;
	ld J = 0;
	for (int64_t t = 0; t < fin[0].shape[0]; t++)
		switch (m->v[MODE_MTP_LOSS_COMBINE]) {
		case ALIGN_MTP_LOSS_COMBINE_ADD_DETACH:
			J += (ld)dt[t] * ((ld)lm[t] + sd[t]);
			break;
		case ALIGN_MTP_LOSS_COMBINE_AUTOSCALER:
			J += (ld)dt[t] * tot[t] + (ld)c * sd[t];
			break;
		default:
			J += (ld)dt[t] * tot[t];
			break;
		}
	return J;
}

/* mtp_loss_bwd against central differences (h = 2^-1) of fd_objective through the mtp_loss twin (T = 4,
 * K = 3, lm and L multiples of 2^-10 in [1, 8), so L +- h is exact), every mode pair and parameter variant.
 * The objective is linear, so the exact difference quotient is the exact gradient: |op - fd| <= (the
 * twin's error of two evaluations) / (2h) + the op's bound, (K + 4) u (|lm| + |scaled| + 1) (|dt| + |c|) / h
 * + 5 u |op| a gradient. */
static int check_loss_bwd_fd(void)
{
	enum { T = 4, K = 3 };
	const struct align_op *op = ops_find("mtp_loss_bwd"), *fop = ops_find("mtp_loss");
	struct align_dims d;
	ops_dims_parse("T=4,K=3", &d, NULL, 0);
	const float dtv[T] = {0.5f, -1.25f, 0.3f, 2.0f};
	const ld h = 0.5L;
	int fails = 0, n = 0;
	ld all = 0;
	for (int var = 0; var < 3; var++)
		for (int sc = 0; sc < modes_value_count(MODE_MTP_LOSS_SCALE); sc++)
			for (int cb = 0; cb < modes_value_count(MODE_MTP_LOSS_COMBINE); cb++) {
				struct align_modes m;
				modes_init_default(&m);
				m.v[MODE_MTP_LOSS_SCALE] = sc;
				m.v[MODE_MTP_LOSS_COMBINE] = cb;
				struct mtp_loss_bwd_params p;
				op->impl->params_variant(&p, &d, var);
				struct mtp_loss_params fp = {p.factor};
				float c = (float)p.main_scale;
				struct align_tensor in[2], out[2], fin[2], fout[2];
				for (int i = 0; i < 2; i++) {
					ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
					ops_tensor_alloc(op, 1, i, &d, &m, &out[i]);
					ops_tensor_alloc(fop, 0, i, &d, &m, &fin[i]);
					ops_tensor_alloc(fop, 1, i, &d, &m, &fout[i]);
				}
				float *lm = fin[0].data, *L = fin[1].data;
				uint64_t st = 4242 + (uint64_t)var;
				for (int i = 0; i < T + T * K; i++) {
					st = st * 6364136223846793005ull + 1442695040888963407ull;
					float v = 1.0f + (float)((st >> 40) % 7168) * 0x1p-10f;
					if (i < T)
						lm[i] = v;
					else
						L[i - T] = v;
				}
				memcpy(in[0].data, L, sizeof(float) * T * K);
				memcpy(in[1].data, dtv, sizeof dtv);
				if (op->impl->fwd_cpu(&p, &m, in, 2, out, 2) ||
				    fop->impl->fwd_cpu(&fp, &m, fin, 2, fout, 2)) {
					printf("FAIL mtp_loss_bwd finite differences: run failed\n");
					return fails + 1;
				}
				ld mag[T];
				for (int t = 0; t < T; t++)
					mag[t] = fabsl((ld)lm[t]) + fabsl((ld)((const float *)fout[0].data)[t]) + 1;
				for (int i = 0; i < T + T * K; i++) {
					float *x = i < T ? &lm[i] : &L[i - T];
					int t = i < T ? i : (i - T) / K;
					float keep = *x;
					*x = (float)(keep + h);
					ld jp = fd_objective(fop, &fp, &m, fin, fout, dtv, c);
					*x = (float)(keep - h);
					ld jm = fd_objective(fop, &fp, &m, fin, fout, dtv, c);
					*x = keep;
					ld fd = (jp - jm) / (2 * h);
					ld got = i < T ? ((const float *)out[0].data)[i]
						       : ((const float *)out[1].data)[i - T];
					ld tol = (K + 4) * U * mag[t] * (fabsl((ld)dtv[t]) + fabsl((ld)c)) / h +
						 5 * U * fabsl(got);
					ld q = fabsl(got - fd) / tol;
					q = isnan(q) ? INFINITY : q;
					all = q > all ? q : all;
					n++;
					if (q > 1) {
						printf("FAIL mtp_loss_bwd finite difference (variant %d, scale %d, "
						       "combine %d): "
						       "%s %d: op %.9Lg, central difference %.9Lg\n",
						       var, sc, cb, i < T ? "dlm" : "dmtp", i < T ? i : i - T, got, fd);
						fails++;
					}
				}
				for (int i = 0; i < 2; i++) {
					ops_tensor_free(&in[i]);
					ops_tensor_free(&out[i]);
					ops_tensor_free(&fin[i]);
					ops_tensor_free(&fout[i]);
				}
			}
	printf("mtp_loss_bwd finite differences of the mtp_loss twin (%d gradients, every mode pair and variant): "
	       "worst %.3Lf of the bound%s\n",
	       n, all, fails ? "  FAIL" : "");
	return fails;
}

int main(void)
{
	OP = ops_find("mtp");
	if (!OP)
		return printf("FAIL: no mtp op\n"), 1;
	int fails = check_refusals();
	fails += check_forms_and_sequences();
	fails += check_refs();
	fails += check_loss();
	fails += check_loss_bwd();
	fails += check_loss_bwd_fd();
	fails += check_loss_bwd_refusals();
	printf("test-ops-ref-mtp: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
