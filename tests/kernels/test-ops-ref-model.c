/* test-ops-ref-model.c: fp64 reference checks (as test-ops-ref.c) of the model-level ops: embedding,
 * embedding_bwd (its torch order rebuilt by hand), lm_head, lm_head_bwd (as matmul_bwd), xent and xent_bwd (with finite differences of
 * the loss). Every result, under every combination of the switches the op reads
 * that the C twin runs, every parameter variant and the three fill sets of test-ops.c, is compared with a
 * long double evaluation of the op's contract written independently here, against the bound the op's
 * header states. Exit status 0 = pass; prints seed, op, modes and the worst element on failure. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedding_bwd.h"
#include "lm_head_bwd.h"
#include "ops.h"
#include "xent_bwd.h"

#define SEED 0x30de15eedull
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
	if (isinf(got) && fabsl(ref) - tol > FLT_MAX && (got > 0) == (ref > 0))
		err = 0; /* the exact value is beyond binary32: overflow to inf is the right result */
	ld r = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0);
	if (r > c->worst) {
		c->worst = r;
		c->worst_i = i;
		if (getenv("REF_DEBUG") && r > 1)
			printf("  element %" PRId64 ": got %La ref %La tol %La\n", i, got, ref, tol);
	}
}

/* y = R(w) (exact), or R(w) * scale' with scale' = scale or R(scale): half a bf16 ulp */
static void ref_embedding(struct ctx *c)
{
	const struct embedding_params *p = c->params;
	const int32_t *ids = c->in[0].data;
	const float *table = c->in[1].data;
	int64_t T = c->in[0].shape[0], D = c->in[1].shape[1];
	ld s = c->m->v[MODE_EMBED_SCALE] == ALIGN_EMBED_SCALE_BF16 ? (ld)align_round_bf16(p->scale) : (ld)p->scale;
	for (int64_t t = 0; t < T; t++)
		for (int64_t j = 0; j < D; j++) {
			ld w = align_round_bf16(table[(int64_t)ids[t] * D + j]);
			ld ref = p->scale != 0.0f ? w * s : w;
			judge(c, t * D + j, ops_ld(&c->out[0], t * D + j), ref,
			      p->scale != 0.0f ? ulp_bf16(ref) / 2 : 0);
		}
}

/* logits = x @ op(w)^T, op = bf16 rounding (bf16 logits) or exact (fp32); bound of matmul.h by accum */
static void ref_lm_head(struct ctx *c)
{
	int bf16 = c->m->v[MODE_LMHEAD_LOGITS] == ALIGN_LMHEAD_LOGITS_BF16;
	int64_t T = c->in[0].shape[0], D = c->in[0].shape[1], V = c->in[1].shape[0];
	int accum = c->m->v[MODE_MATMUL_ACCUM];
	for (int64_t t = 0; t < T; t++)
		for (int64_t v = 0; v < V; v++) {
			ld ref = 0, S = 0;
			for (int64_t k = 0; k < D; k++) {
				float w = ops_ld(&c->in[1], v * D + k);
				ld prod = (ld)ops_ld(&c->in[0], t * D + k) * (bf16 ? align_round_bf16(w) : w);
				ref += prod;
				S += fabsl(prod);
			}
			ld dot = accum == ALIGN_MATMUL_ACCUM_FP64      ? U * fabsl(ref) + D * 0x1p-53L * S
				 : accum == ALIGN_MATMUL_ACCUM_SPLIT16 ? ((D + 15) / 16 + 16) * U * S
								       : D * U * S;
			ld tol = dot + (bf16 ? ulp_bf16(fabsl(ref) + dot) / 2 : U * (fabsl(ref) + dot));
			judge(c, t * V + v, ops_ld(&c->out[0], t * V + v), ref, tol);
		}
}

/* per row: m, s = sum exp(x - m), l = log s, loss = l - (x_y - m), lse = m + l; mean of the op's own
 * losses over the valid tokens */
static void ref_xent(struct ctx *c)
{
	int64_t T = c->in[0].shape[0], V = c->in[0].shape[1];
	const int32_t *labels = c->in[1].data;
	const float *loss = c->out[0].data, *lse = c->out[1].data;
	ld k = c->m->v[MODE_MATH_IMPL] == ALIGN_MATH_IMPL_LIBM ? 2 : 1;
	ld msum = 0, mabs = 0;
	int64_t count = 0;
	for (int64_t t = 0; t < T; t++) {
		ld m = -INFINITY;
		int bad = 0;
		for (int64_t v = 0; v < V; v++) {
			ld x = ops_ld(&c->in[0], t * V + v);
			bad |= isnan(x) != 0;
			m = x > m ? x : m;
		}
		bad |= !isfinite(m);
		ld s = 0;
		for (int64_t v = 0; v < V && !bad; v++)
			s += expl((ld)ops_ld(&c->in[0], t * V + v) - m);
		ld l = logl(s), xy = labels[t] >= 0 ? (ld)ops_ld(&c->in[0], t * V + labels[t]) : 0;
		ld tol = k * ((V + 4) * U + 4 * U * (fabsl(m) + fabsl(l) + fabsl(xy)));
		judge(c, t, lse[t], bad ? NAN : m + l, tol);
		judge(c, T + t, loss[t], labels[t] < 0 ? 0 : bad ? NAN : l - (xy - m), tol);
		if (labels[t] >= 0) {
			msum += loss[t];
			mabs += fabsl(loss[t]);
			count++;
		}
	}
	ld ref = count ? msum / count : NAN;
	judge(c, 2 * T, ((const float *)c->out[2].data)[0], ref, count ? (T + 1) * U * mabs / count : 0);
}

/* embedding_bwd: per row and column the exact sum of the contributions g (the op's own g: F(dy), or the
 * bf16 product with the scale, which is part of the contract), within embedding_bwd.h's bound */
static void ref_embedding_bwd(struct ctx *c)
{
	const int32_t *ids = c->in[0].data;
	int64_t T = c->in[0].shape[0], V = c->in[1].shape[0], D = c->in[1].shape[1];
	const struct embedding_params *p = c->params;
	int bf16 = c->out[0].dtype == ALIGN_DT_BF16,
	    torch = c->m->v[MODE_EMBED_BWD_ORDER] == ALIGN_EMBED_BWD_ORDER_TORCH;
	float sc = c->m->v[MODE_EMBED_SCALE] == ALIGN_EMBED_SCALE_BF16 ? align_round_bf16(p->scale) : p->scale;
	for (int64_t r = 0; r < V; r++)
		for (int64_t j = 0; j < D; j++) {
			ld ref = 0, S = 0;
			int64_t n = 0, k = 0, last = -1;
			for (int64_t t = 0; t < T; t++) {
				if (ids[t] != r)
					continue;
				float g = ops_ld(&c->in[2], t * D + j);
				if (p->scale != 0.0f)
					g = align_round_bf16(g * sc);
				ref += g;
				S += fabsl((ld)g);
				n++;
				if (t / 32 != last)
					k++, last = t / 32;
			}
			if (!torch || T > 3072 || !bf16)
				k = 0;
			ld tol = (n > 0 ? n - 1 : 0) * U * S + k * 0x1p-8L * S;
			if (bf16)
				tol += ulp_bf16(fabsl(ref) + tol) / 2;
			judge(c, r * D + j, ops_ld(&c->out[0], r * D + j), ref, tol);
		}
}

/* xent_bwd: per row, p_v = exp(x_v - m) / sum exactly, g_v = (p_v - [v = y]) * d, ignored rows 0 (every form:
 * the lsm forms' gO - p * sum(gO) is the same real number), NaN for the rows xent calls bad (an ignored bad
 * row: 0 under XENT_BWD_FORM=scale, NaN in the lsm forms); against xent_bwd.h's bound */
static void ref_xent_bwd(struct ctx *c)
{
	int64_t T = c->in[0].shape[0], V = c->in[0].shape[1];
	const int32_t *labels = c->in[1].data;
	const float *dloss = c->in[2].data;
	int bf16 = c->out[0].dtype == ALIGN_DT_BF16, scale = c->m->v[MODE_XENT_BWD_FORM] == ALIGN_XENT_BWD_FORM_SCALE;
	int div = c->m->v[MODE_XENT_BWD_PROB] == ALIGN_XENT_BWD_PROB_DIV;
	ld k = c->m->v[MODE_MATH_IMPL] == ALIGN_MATH_IMPL_LIBM ? 2 : 1;
	for (int64_t t = 0; t < T; t++) {
		ld m = -INFINITY, d = dloss[t];
		int bad = 0;
		for (int64_t v = 0; v < V; v++) {
			ld x = ops_ld(&c->in[0], t * V + v);
			bad |= isnan(x) != 0;
			m = x > m ? x : m;
		}
		bad |= !isfinite(m);
		ld s = 0;
		for (int64_t v = 0; v < V && !bad; v++)
			s += expl((ld)ops_ld(&c->in[0], t * V + v) - m);
		ld l = bad ? 0 : logl(s);
		for (int64_t v = 0; v < V; v++) {
			int64_t i = t * V + v;
			ld got = ops_ld(&c->out[0], i);
			if (labels[t] < 0 && (scale || !bad)) {
				judge(c, i, got, 0, 0);
				continue;
			}
			if (bad) {
				judge(c, i, got, NAN, 0);
				continue;
			}
			ld z = (ld)ops_ld(&c->in[0], i) - m, p = expl(z) / s;
			ld ref = (p - (v == labels[t] ? 1 : 0)) * d;
			ld eps = div ? (V + 3) * U + U * fabsl(z) : (V + 4) * U + 2 * U * fabsl(z) + 2 * U * fabsl(l);
			ld tol = (k * eps + 3 * U) * p * fabsl(d) + 2 * U * fabsl(d) + 0x1p-149L;
			if (bf16)
				tol += ulp_bf16(fabsl(ref) + tol) / 2;
			judge(c, i, got, ref, tol);
		}
	}
}

struct ref_entry {
	const char *op;
	void (*fn)(struct ctx *);
};

static const struct ref_entry refs[] = {
	{"embedding", ref_embedding}, {"lm_head", ref_lm_head},	  {"embedding_bwd", ref_embedding_bwd},
	{"xent", ref_xent},	      {"xent_bwd", ref_xent_bwd},
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
	for (const int *p = im->modes; *p >= 0; p++) {
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
				if (modes_gpu_only_in(&m, NULL) >= 0)
					continue; /* GPU-only values: the C twin refuses them */
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

/* xent's token orders, by hand on 6 tokens of S = 3 (B = 2): the orders visit the same tokens, a label
 * >= V is refused, a label < 0 is left out of the mean, and a sequence-first sum visits t = 0, 3, 1, 4,
 * 2, 5 (checked on values whose float sums depend on the order) */
static int check_xent_orders(void)
{
	struct xent_cfg c = {6, 1, 3, 0, ALIGN_XENT_SUM_SEQ, 0, ALIGN_XENT_MEAN_TOKEN, ALIGN_MATH_IMPL_PORTABLE};
	const float loss[6] = {0x1p24f, 1.0f, 1.0f, -0x1p24f, 1.0f, 1.0f};
	const int32_t labels[6] = {0, 0, 0, 0, 0, -1};
	int fails = 0;
	float tok = xent_mean(&c, loss, labels);
	c.mean = ALIGN_XENT_MEAN_SEQ_FIRST;
	float sf = xent_mean(&c, loss, labels);
	/* token: ((2^24 + 1) + 1) = 2^24 + 2 (2^24 + 1 rounds to 2^24, + 1 again), - 2^24 = 0?; by hand:
	 * 2^24 + 1 -> 2^24 (tie to even), + 1 -> 2^24, - 2^24 -> 0, + 1 -> 1; 1 / 5 */
	if (tok != 1.0f / 5.0f) {
		printf("FAIL xent token mean %a, want %a\n", tok, 1.0f / 5.0f);
		fails++;
	}
	/* seq_first: 2^24 - 2^24 = 0, + 1 + 1 + 1 = 3 (token 5 ignored); 3 / 5 */
	if (sf != 3.0f / 5.0f) {
		printf("FAIL xent seq_first mean %a, want %a\n", sf, 3.0f / 5.0f);
		fails++;
	}
	return fails;
}

/* xent_bwd against central differences (h = 2^-10) of the long double loss L = sum_t dloss_t * loss_t
 * (loss_t = log sum_v exp(x_tv) - x_ty; ignored tokens contribute 0), every XENT_BWD_FORM and PROB (T = 3,
 * V = 7, f32 logits in (-4, 4)): |op - fd| <= 2^-16 |fd| + 2^-18 (binary32 + O(h^2)) */
static ld xent_fd_loss(const ld *x, const int32_t *y, const ld *d, int T, int V)
{
	ld L = 0;
	for (int t = 0; t < T; t++) {
		if (y[t] < 0)
			continue;
		ld s = 0;
		for (int v = 0; v < V; v++)
			s += expl(x[t * V + v]);
		L += d[t] * (logl(s) - x[t * V + y[t]]);
	}
	return L;
}

static int check_xent_bwd_fd(void)
{
	const struct align_op *op = ops_find("xent_bwd");
	enum { T = 3, V = 7 };
	struct align_dims d;
	ops_dims_parse("T=3,V=7", &d, NULL, 0);
	int fails = 0;
	for (int form = 0; form < modes_value_count(MODE_XENT_BWD_FORM); form++)
		for (int prob = 0; prob < modes_value_count(MODE_XENT_BWD_PROB); prob++) {
			struct align_modes m;
			modes_init_default(&m);
			m.v[MODE_LMHEAD_LOGITS] = ALIGN_LMHEAD_LOGITS_FP32;
			m.v[MODE_XENT_BWD_FORM] = form;
			m.v[MODE_XENT_BWD_PROB] = prob;
			struct align_tensor in[3], out[1];
			for (int i = 0; i < 3; i++)
				ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
			ops_tensor_alloc(op, 1, 0, &d, &m, &out[0]);
			ld x[T * V], dl[T] = {0.5L, 0.3L, -1.25L};
			int32_t *y = in[1].data;
			y[0] = 2, y[1] = -1, y[2] = 6;
			uint64_t st = 777;
			for (int i = 0; i < T * V; i++) {
				st = st * 6364136223846793005ull + 1442695040888963407ull;
				x[i] = ((float *)in[0].data)[i] = (float)((int)(st >> 40) % 8000 - 4000) / 1000.0f;
			}
			for (int t = 0; t < T; t++)
				((float *)in[2].data)[t] = (float)dl[t];
			struct xent_params prm = {0};
			if (op->impl->fwd_cpu(&prm, &m, in, 3, out, 1)) {
				printf("FAIL xent_bwd finite differences: run failed\n");
				fails++;
			}
			const ld h = 0x1p-10L;
			ld worst = 0;
			for (int i = 0; i < T * V && !fails; i++) {
				ld keep = x[i];
				x[i] = keep + h;
				ld lp = xent_fd_loss(x, y, dl, T, V);
				x[i] = keep - h;
				ld lm = xent_fd_loss(x, y, dl, T, V);
				x[i] = keep;
				ld fd = (lp - lm) / (2 * h), got = ((float *)out[0].data)[i];
				ld q = fabsl(got - fd) / (0x1p-16L * fabsl(fd) + 0x1p-18L);
				worst = q > worst ? q : worst;
				if (q > 1) {
					printf("FAIL xent_bwd finite difference (form %d, prob %d): logit %d: op "
					       "%.9Lg, "
					       "central difference %.9Lg\n",
					       form, prob, i, got, fd);
					fails++;
				}
			}
			printf("xent_bwd     finite differences (form %d, prob %d, %d logits): worst %.3Lf of the "
			       "bound\n",
			       form, prob, T * V, worst);
			for (int i = 0; i < 3; i++)
				ops_tensor_free(&in[i]);
			ops_tensor_free(&out[0]);
		}
	return fails;
}

/* embedding_bwd's torch order rebuilt from PyTorch's kernels as they run (independently of
 * embedding_bwd_elem): the feature kernel's loop over chunks of 32 tokens with a leader per row (T <=
 * 3072), and a stable sort with partials of 10 rows per segment (T > 3072); bytes compared with the op's,
 * bf16 and fp32, at T = 100 and T = 3100 (V = 7, D = 5; dy small, 8-bit values below 2^-4, and every
 * 29th token near 2^20, so that a sequential sum loses what the chunks and partials keep: the sequential
 * order differs from the rebuilt kernels in 8, 9, 34 and 0 of the 35 elements of the four cases) */
static float rb(float x, int bf16)
{
	return bf16 ? align_round_bf16(x) : x;
}

static int check_embedding_bwd_torch(void)
{
	const struct align_op *op = ops_find("embedding_bwd");
	int fails = 0;
	for (int big = 0; big < 2; big++)
		for (int bf16 = 0; bf16 < 2; bf16++) {
			int T = big ? 3100 : 100, V = 7, D = 5;
			char dims[64];
			snprintf(dims, sizeof dims, "T=%d,V=%d,D=%d", T, V, D);
			struct align_dims d;
			ops_dims_parse(dims, &d, NULL, 0);
			struct align_modes m;
			modes_init_default(&m);
			m.v[MODE_EMBED_BWD_ORDER] = ALIGN_EMBED_BWD_ORDER_TORCH;
			m.v[MODE_EMBED_BWD_DTYPE] = bf16 ? ALIGN_EMBED_BWD_DTYPE_BF16 : ALIGN_EMBED_BWD_DTYPE_FP32;
			struct align_tensor in[3], out[1];
			for (int i = 0; i < 3; i++)
				ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
			ops_tensor_alloc(op, 1, 0, &d, &m, &out[0]);
			int32_t *ids = in[0].data;
			align_bf16 *dy = in[2].data;
			uint64_t st = 4242 + (uint64_t)T;
			for (int t = 0; t < T; t++) {
				st = st * 6364136223846793005ull + 1442695040888963407ull;
				ids[t] = (int32_t)((st >> 33) % (uint64_t)V);
				for (int j = 0; j < D; j++) {
					st = st * 6364136223846793005ull + 1442695040888963407ull;
					float v = ldexpf((float)((int)(st >> 40 & 0xff) - 128) / 64.0f,
							 t % 29 == 0 ? 20 : (int)(st >> 20 & 3) - 6);
					dy[t * D + j] = align_f32_to_bf16(v);
				}
			}
			struct embedding_params prm = {0};
			float want[7 * 5] = {0};
			if (!big) { /* embedding_backward_feature_kernel */
				for (int c0 = 0; c0 < T; c0 += 32) {
					int n = T - c0 < 32 ? T - c0 : 32;
					for (int y = 0; y < n; y++) {
						int leader = 1;
						for (int q = 0; q < y; q++)
							leader &= ids[c0 + q] != ids[c0 + y];
						if (!leader)
							continue;
						for (int j = 0; j < D; j++) {
							float sm = align_bf16_to_f32(dy[(c0 + y) * D + j]);
							for (int q = y + 1; q < n; q++)
								if (ids[c0 + q] == ids[c0 + y])
									sm += align_bf16_to_f32(dy[(c0 + q) * D + j]);
							float *w = &want[ids[c0 + y] * D + j];
							*w = rb(*w + rb(sm, bf16), bf16);
						}
					}
				}
			} else { /* radix sort (stable), compute_grad_weight on partials of 10, sum_and_scatter */
				int *ord = malloc((size_t)T * sizeof *ord), n = 0;
				for (int r = 0; r < V; r++)
					for (int t = 0; t < T; t++)
						if (ids[t] == r)
							ord[n++] = t;
				for (int s0 = 0; s0 < T;) {
					int s1 = s0;
					while (s1 < T && ids[ord[s1]] == ids[ord[s0]])
						s1++;
					for (int j = 0; j < D; j++) {
						float tot = 0.0f;
						for (int p0 = s0; p0 < s1; p0 += 10) {
							float part = 0.0f;
							for (int q = p0; q < s1 && q < p0 + 10; q++)
								part += align_bf16_to_f32(dy[ord[q] * D + j]);
							tot += part;
						}
						want[ids[ord[s0]] * D + j] = rb(tot, bf16);
					}
					s0 = s1;
				}
				free(ord);
			}
			int ran = op->impl->fwd_cpu(&prm, &m, in, 3, out, 1) == ALIGN_OK;
			if (!ran) {
				printf("FAIL embedding_bwd torch order: run failed\n");
				fails++;
			}
			int bad = 0;
			for (int i = 0; i < V * D && ran; i++) {
				float got = ops_ld(&out[0], i);
				if (memcmp(&got, &want[i], sizeof got) != 0 && bad++ < 3)
					printf("FAIL embedding_bwd torch order (T=%d, %s): element %d: op %a, rebuilt "
					       "%a\n",
					       T, bf16 ? "bf16" : "fp32", i, got, want[i]);
			}
			fails += bad > 0;
			printf("embedding_bwd torch order T=%-5d %s: %d of %d elements differ from the rebuilt "
			       "kernels\n",
			       T, bf16 ? "bf16" : "fp32", bad, V * D);
			for (int i = 0; i < 3; i++)
				ops_tensor_free(&in[i]);
			ops_tensor_free(&out[0]);
		}
	return fails;
}

/* lm_head_bwd is matmul_bwd on x and dlogits widened to binary32 with MATMUL_OPERAND per LMHEAD_LOGITS and
 * MATMUL_OUT=bf16: the bytes of both ops compared under every LMHEAD_LOGITS, MATMUL_FMA, WGRAD_ORDER,
 * WGRAD_ACCUM and WGRAD_DTYPE, on the three fill sets (matmul_bwd's own bound is test-ops-ref-bwd.c's) */
static int check_lm_head_bwd(void)
{
	const struct align_op *op = ops_find("lm_head_bwd"), *mb = ops_find("matmul_bwd");
	struct align_dims d;
	ops_dims_default(op, &d);
	int fails = 0, runs = 0;
	const int ids[] = {MODE_LMHEAD_LOGITS, MODE_MATMUL_FMA, MODE_WGRAD_ORDER, MODE_WGRAD_ACCUM, MODE_WGRAD_DTYPE};
	int combos = 1;
	for (int q = 0; q < 5; q++)
		combos *= modes_value_count(ids[q]);
	for (int set = 0; set < NSETS; set++)
		for (int cmb = 0; cmb < combos; cmb++) {
			struct align_modes m;
			modes_init_default(&m);
			for (int q = 0, rest = cmb; q < 5; q++) {
				m.v[ids[q]] = rest % modes_value_count(ids[q]);
				rest /= modes_value_count(ids[q]);
			}
			struct matmul_bwd_params prm;
			op->impl->params_default(&prm, &d);
			struct align_tensor in[4], out[2], mi[4], mo[2];
			for (int i = 0; i < 4; i++) {
				ops_tensor_alloc(op, 0, i, &d, &m, &in[i]);
				fill(op, &in[i], i, set);
			}
			for (int i = 0; i < 2; i++)
				ops_tensor_alloc(op, 1, i, &d, &m, &out[i]);
			struct align_modes mm = m;
			mm.v[MODE_MATMUL_OPERAND] = m.v[MODE_LMHEAD_LOGITS] == ALIGN_LMHEAD_LOGITS_BF16
							    ? ALIGN_MATMUL_OPERAND_BF16
							    : ALIGN_MATMUL_OPERAND_FP32;
			mm.v[MODE_MATMUL_OUT] = ALIGN_MATMUL_OUT_BF16;
			struct align_dims md = d;
			md.v[ALIGN_DIM_F] = d.v[ALIGN_DIM_V];
			for (int i = 0; i < 4; i++) {
				ops_tensor_alloc(mb, 0, i, &md, &mm, &mi[i]);
				for (int64_t k = 0; k < align_tensor_numel(&mi[i]); k++)
					ops_st(&mi[i], k, ops_ld(&in[i], k));
			}
			for (int i = 0; i < 2; i++)
				ops_tensor_alloc(mb, 1, i, &md, &mm, &mo[i]);
			int ra = op->impl->fwd_cpu(&prm, &m, in, 4, out, 2),
			    rb2 = mb->impl->fwd_cpu(&prm, &mm, mi, 4, mo, 2);
			runs++;
			for (int i = 0; i < 2; i++) {
				size_t n = (size_t)align_tensor_numel(&out[i]) * align_dtype_size(out[i].dtype);
				if (ra || rb2 || out[i].dtype != mo[i].dtype || memcmp(out[i].data, mo[i].data, n)) {
					char buf[2048];
					modes_format(&m, buf, sizeof buf);
					printf("FAIL lm_head_bwd output %d (set %d) is not matmul_bwd's (rc %d, %d): "
					       "%s\n",
					       i, set, ra, rb2, buf);
					fails++;
				}
			}
			for (int i = 0; i < 4; i++) {
				ops_tensor_free(&in[i]);
				ops_tensor_free(&mi[i]);
			}
			for (int i = 0; i < 2; i++) {
				ops_tensor_free(&out[i]);
				ops_tensor_free(&mo[i]);
			}
		}
	printf("lm_head_bwd  %4d runs: the bytes of matmul_bwd on the widened inputs%s\n", runs, fails ? "  FAIL" : "");
	return fails;
}

int main(void)
{
	int fails = check_xent_orders() + check_xent_bwd_fd() + check_embedding_bwd_torch() + check_lm_head_bwd();
	for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
		fails += check_op(ops_find(refs[k].op), refs[k].fn);
	printf("test-ops-ref-model: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
