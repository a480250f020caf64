/* test-ops.c: generic checks of every op in ops.def through the common calling convention.
 * For each op, parameter variant and fill set (spec fills; EXTREME fills; constant fills with a
 * large negative first input):
 *   - runs under the defaults, every profile and every value of every switch;
 *   - determinism: two runs give the same bytes;
 *   - batch invariance: the first T/2 rows are byte-identical when run with T/2 rows (outputs whose
 *     shape starts with T, but ops_out_not_rows's; an output reduced over the tokens, like xent's mean, is
 *     checked elsewhere);
 *   - mode effects: each switch an op reads changes its output bytes for every non-default
 *     value in at least one case (except the documented rarely-visible pairs below), and each
 *     switch it does not read leaves its bytes unchanged.
 * Exit status 0 = pass; prints the seed on failure. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

#define SEED 0xa11a5eedull
#define NSETS 3
#define MAXT 8

static int fails;

struct run {
	struct align_tensor in[MAXT], out[MAXT];
};

static void run_free(const struct align_op *op, struct run *r)
{
	for (int i = 0; i < op->impl->n_in; i++)
		ops_tensor_free(&r->in[i]);
	for (int i = 0; i < op->impl->n_out; i++)
		ops_tensor_free(&r->out[i]);
}

/* build inputs of fill set `set`, run, return rc */
static int run_op(const struct align_op *op, const void *params, const struct align_dims *d,
		  const struct align_modes *m, int set, struct run *r)
{
	memset(r, 0, sizeof *r);
	for (int i = 0; i < op->impl->n_in; i++) {
		if (ops_tensor_alloc(op, 0, i, d, m, &r->in[i]))
			return -1;
		struct align_fill f = op->impl->in[i].fill;
		if (r->in[i].dtype != ALIGN_DT_I32 && set == 1 && f.kind == ALIGN_FILL_SPECIAL)
			f.kind = ALIGN_FILL_EXTREME;
		if (r->in[i].dtype != ALIGN_DT_I32 && set == 2) {
			f.kind = ALIGN_FILL_CONST;
			f.scale = i == 0 ? -100.0f * f.scale : f.scale;
		}
		if (ops_fill_tensor(&f, op->name, &r->in[i], SEED, 0))
			return -1;
	}
	for (int i = 0; i < op->impl->n_out; i++)
		if (ops_tensor_alloc(op, 1, i, d, m, &r->out[i]))
			return -1;
	return ops_fwd_cpu(op, params, m, r->in, op->impl->n_in, r->out, op->impl->n_out);
}

static size_t bytes(const struct align_tensor *t)
{
	return (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
}

static int same_out(const struct align_op *op, const struct run *a, const struct run *b)
{
	for (int i = 0; i < op->impl->n_out; i++)
		if (a->out[i].dtype != b->out[i].dtype || bytes(&a->out[i]) != bytes(&b->out[i]) ||
		    memcmp(a->out[i].data, b->out[i].data, bytes(&a->out[i])) != 0)
			return 0;
	return 1;
}

/* (op, switch) pairs whose effect is real but too rare to show on the test inputs */
static int rarely_visible(const char *op, int mode)
{
	/* glibc expf is not correctly rounded on ~5e-5 of inputs (test-math); after a bf16 store
	 * or a handful of exps per token the difference rarely reaches the output bytes; glibc's cosf, sinf
	 * and powf and the portable ones were both correctly rounded on every rope input (test-math; rope_bwd is
	 * rope's kernel); xent's
	 * exp and log terms are summed and logged, which hides a last-bit difference of one term */
	if (mode == MODE_MATH_IMPL &&
	    (!strcmp(op, "swiglu") || !strcmp(op, "mhc_pre") || !strcmp(op, "mhc_head") || !strcmp(op, "sparse_attn") ||
	     !strcmp(op, "rope") || !strcmp(op, "rope_bwd") || !strcmp(op, "xent") || !strcmp(op, "sparse_mla")))
		return 1;
	/* swiglu_bwd: the same exp of the forward, after a bf16 store of dg and du or inside an fp32 sum of F terms */
	if (mode == MODE_MATH_IMPL && !strcmp(op, "swiglu_bwd"))
		return 1;
	/* the compressor's norm runs over F = 128 values of a few rows: the orders and the rsqrt forms differ in
	 * the last bits of a binary32 factor that a bf16 store rarely shows (the rmsnorm op shows each); the YaRN
	 * frequency forms differ in a last bit of a few frequencies, which its 8 rows at positions g*K do not
	 * show (the rope op does); exp as above */
	/* CSA_COMP_SUM_ORDER: the window sums' orders differ in a last bit of the binary32 pooled value, which the
	 * bf16 norm input and the bf16 output after the norm rarely keep at 8 x 128 entries (compressor_bwd shows it
	 * through its fp32 gradients, test-ops-ref-compressor checks the order itself) */
	if (!strcmp(op, "compressor") &&
	    (mode == MODE_MATH_IMPL || mode == MODE_RMSNORM_REDUCE || mode == MODE_CSA_COMP_SUM_ORDER ||
	     mode == MODE_RMSNORM_RSQRT || mode == MODE_ROPE_YARN_FREQ ||
	     mode == MODE_ROPE_ARITH)) /* fma_ac/fma_bd: a last bit before a bf16 store */
		return 1;
	/* compressor_bwd recomputes the compressor and applies RoPE's backward to dc's rows at the same 4 positions
	 * g*K: the YaRN frequency forms and the fma forms differ in a last bit the bf16 store of those rows rarely
	 * keeps, as in the forward (rope_bwd and rope show each); the Hadamard of dc's bf16 rows (variant 1) adds and
	 * subtracts bf16 values whose partial sums stay exact in binary32 unless a row spans ~16 binades, so the
	 * library and butterfly stage orders give the same bits on these fills */
	if (!strcmp(op, "compressor_bwd") &&
	    (mode == MODE_ROPE_YARN_FREQ || mode == MODE_ROPE_ARITH || mode == MODE_CSA_HADAMARD))
		return 1;
	/* attn at its small default dims (32 window slots + 8 compressed): the same norm and frequency choices;
	 * the indexer's score precision, weight scaling, tie order and Hadamard order change which or in what
	 * order 8 compressed entries follow 32 window slots (rarely the output bits); the torch sum order and
	 * the empty-row rule reach no row here (every row has its own token). Each is shown by its own op, and
	 * the search at 16x the rows would take minutes on the layer. */
	/* mtp rounds its projections to bf16 itself: a bf16 output of the portable engine is the same single
	 * rounding of the fp32 accumulator (mtp.h step 4); MATMUL_OUT reaches the vendor GEMM engines (GPU only) */
	if (!strcmp(op, "mtp") && mode == MODE_MATMUL_OUT)
		return 1;
	/* never visible, by the contract: mtp_loss_bwd's add_detach is add's backward bit for bit (the detached
	 * term has no gradient; mtp_loss_bwd.h step 2); its autoscaler value does change the bits, and
	 * test-ops-ref-mtp checks both */
	if (!strcmp(op, "mtp_loss_bwd") && mode == MODE_MTP_LOSS_COMBINE)
		return 1;
	/* attn_bwd: attn's own (its recomputed forward), plus two of matmul_bwd's that its contract makes near
	 * invisible (attn_bwd.h): the layer is one sequence (S = T), so WGRAD_ORDER=sb visits the bs order;
	 * main_grad is +0, so WGRAD_ACCUM=main_grad is fresh but for a -0 wgrad, and add's bf16 .grad rounding
	 * is the default WGRAD_DTYPE=bf16's own (it shows under fp32). Each is shown by matmul_bwd itself. */
	if (!strcmp(op, "attn_bwd") && (mode == MODE_WGRAD_ORDER || mode == MODE_WGRAD_ACCUM))
		return 1;
	return (!strcmp(op, "attn") || !strcmp(op, "attn_bwd")) &&
	       (mode == MODE_MATH_IMPL || mode == MODE_RMSNORM_REDUCE || mode == MODE_RMSNORM_RSQRT ||
		mode == MODE_ROPE_YARN_FREQ || mode == MODE_CSA_HADAMARD || mode == MODE_INDEXER_SCORE ||
		mode == MODE_INDEXER_WEIGHT_SCALE || mode == MODE_INDEXER_TOPK_ORDER || mode == MODE_CSA_SUM_ORDER ||
		mode == MODE_CSA_EMPTY_ROW);
}

/* A switch whose effect did not show with everything else at its default: look for a case
 * (16x more rows; another switch of the same op set to one of its values) where it does, e.g.
 * RMSNORM_EPS under QNORM_MODE=fp32_fused (the bf16_eager chain rounds eps away). */
static int search_effect(const struct align_op *op, void *params, const struct align_dims *d0, int s, int v)
{
	const struct align_op_impl *im = op->impl;
	struct align_modes def;
	modes_init_default(&def);
	for (int big = 0; big < 2; big++) {
		struct align_dims d = *d0;
		d.v[ALIGN_DIM_T] *= big ? 16 : 1;
		for (const int *p2 = im->modes; *p2 >= 0; p2++)
			for (int v2 = 0; v2 < modes_value_count(*p2); v2++) {
				if (*p2 == s || (big == 0 && v2 == def.v[*p2]) || modes_value_gpu_only(*p2, v2))
					continue;
				for (int var = 0; im->params_variant(params, &d, var); var++)
					for (int set = 0; set < NSETS; set++) {
						struct align_modes a = def, b;
						a.v[*p2] = v2;
						b = a;
						b.v[s] = v;
						struct run ra, rb;
						int rc = run_op(op, params, &d, &a, set, &ra) |
							 run_op(op, params, &d, &b, set, &rb);
						int differ = rc == 0 && !same_out(op, &ra, &rb);
						run_free(op, &ra);
						run_free(op, &rb);
						if (differ) {
							printf("  %s: %s=%s shows with %s=%s, T=%" PRId64
							       ", variant %d, set %d\n",
							       op->name, modes_info(s)->env, modes_value_name(s, v),
							       modes_info(*p2)->env, modes_value_name(*p2, v2),
							       d.v[ALIGN_DIM_T], var, set);
							im->params_variant(params, d0, 0);
							return 1;
						}
					}
			}
	}
	im->params_variant(params, d0, 0);
	return 0;
}

/* TEST_OPS_SKIP_UNREAD=1 (tools/test.sh sets it in the sanitizer build): the runs under switches the op
 * does not read are left out. They take the default's code path, so under ASan and UBSan they add nothing
 * but time (about 90% of this test's); the build without sanitizers keeps them, where they check that
 * each such switch leaves every byte unchanged (the op's declared switch list is complete). */
static int skip_unread;

static void check_op(const struct align_op *op)
{
	const struct align_op_impl *im = op->impl;
	struct align_dims d;
	void *params = calloc(1, im->params_size);
	if (!params || ops_dims_default(op, &d)) {
		printf("FAIL %s: dims '%s'\n", op->name, im->dims);
		fails++;
		free(params);
		return;
	}
	struct align_modes def;
	modes_init_default(&def);
	/* seen[mode][value]: a difference from the default was observed */
	static char seen[MODE_COUNT][MODES_MAX_VALUES];
	memset(seen, 0, sizeof seen);
	int nvar = 0;
	for (int var = 0; im->params_variant(params, &d, var); var++, nvar++) {
		for (int set = 0; set < NSETS; set++) {
			struct run base, again;
			int rc = run_op(op, params, &d, &def, set, &base);
			int rc2 = run_op(op, params, &d, &def, set, &again);
			if (rc || rc2) {
				printf("FAIL %s variant %d set %d: rc %d\n", op->name, var, set, rc);
				fails++;
			} else if (!same_out(op, &base, &again)) {
				printf("FAIL %s variant %d set %d: not deterministic (seed 0x%llx)\n", op->name, var,
				       set, (unsigned long long)SEED);
				fails++;
			}
			run_free(op, &again);
			/* batch invariance: first T/2 rows */
			struct align_dims dh = d;
			dh.v[ALIGN_DIM_T] = d.v[ALIGN_DIM_T] / 2;
			struct run half;
			if (run_op(op, params, &dh, &def, set, &half) == 0) {
				for (int i = 0; i < im->n_out; i++)
					if (im->out[i].shape[0] == 'T' && !ops_out_not_rows(op, i) &&
					    (im->out[i].shape[1] == ',' || im->out[i].shape[1] == 0) &&
					    memcmp(half.out[i].data, base.out[i].data, bytes(&half.out[i])) != 0) {
						printf("FAIL %s variant %d set %d: output %s not batch invariant\n",
						       op->name, var, set, im->out[i].name);
						fails++;
					}
			} else {
				printf("FAIL %s: half batch run\n", op->name);
				fails++;
			}
			run_free(op, &half);
			for (int s = 0; s < MODE_COUNT; s++)
				for (int v = 0; v < modes_value_count(s); v++) {
					if (v == def.v[s] || (skip_unread && !ops_op_reads_mode(op, s)))
						continue;
					if (modes_value_gpu_only(s, v)) { /* the C twin refuses it: status 4 */
						struct align_modes m = def;
						m.v[s] = v;
						struct run r;
						rc = run_op(op, params, &d, &m, set, &r);
						run_free(op, &r);
						if (rc !=
						    (ops_op_reads_mode(op, s) ? ALIGN_ERR_UNSUPPORTED : ALIGN_OK)) {
							printf("FAIL %s %s=%s (GPU only): CPU rc %d\n", op->name,
							       modes_info(s)->env, modes_value_name(s, v), rc);
							fails++;
						}
						continue;
					}
					struct align_modes m = def;
					m.v[s] = v;
					struct run r;
					rc = run_op(op, params, &d, &m, set, &r);
					if (ops_op_refuses(op, s, v)) { /* refused by design on both twins */
						if (rc != ALIGN_ERR_UNSUPPORTED) {
							printf("FAIL %s %s=%s (refused by the op): rc %d, want %d\n",
							       op->name, modes_info(s)->env, modes_value_name(s, v), rc,
							       ALIGN_ERR_UNSUPPORTED);
							fails++;
						}
						run_free(op, &r);
						continue;
					}
					if (rc) {
						printf("FAIL %s %s=%s: rc %d\n", op->name, modes_info(s)->env,
						       modes_value_name(s, v), rc);
						fails++;
					} else if (!same_out(op, &base, &r)) {
						seen[s][v] = 1;
						if (!ops_op_reads_mode(op, s)) {
							printf("FAIL %s: %s=%s changes bits but the op does not read "
							       "it\n",
							       op->name, modes_info(s)->env, modes_value_name(s, v));
							fails++;
						}
					}
					run_free(op, &r);
				}
			run_free(op, &base);
		}
	}
	for (const int *p = im->modes; *p >= 0; p++)
		for (int v = 0; v < modes_value_count(*p); v++)
			if (v != def.v[*p] && !seen[*p][v] && !modes_value_gpu_only(*p, v) &&
			    !ops_op_refuses(op, *p, v) && !rarely_visible(op->name, *p))
				seen[*p][v] = search_effect(op, params, &d, *p, v);
	for (const int *p = im->modes; *p >= 0; p++)
		for (int v = 0; v < modes_value_count(*p); v++)
			if (v != def.v[*p] && !seen[*p][v] && !modes_value_gpu_only(*p, v) &&
			    !ops_op_refuses(op, *p, v)) {
				if (rarely_visible(op->name, *p)) {
					printf("note %s: %s=%s left the bytes unchanged (documented as rarely "
					       "visible)\n",
					       op->name, modes_info(*p)->env, modes_value_name(*p, v));
					continue;
				}
				printf("FAIL %s: %s=%s never changed the bits (seed 0x%llx)\n", op->name,
				       modes_info(*p)->env, modes_value_name(*p, v), (unsigned long long)SEED);
				fails++;
			}
	/* profiles run */
	for (const char *const *pr = modes_profiles(); *pr; pr++) {
		struct align_modes m;
		char err[256];
		modes_init_default(&m);
		modes_apply_profile(&m, *pr, err, sizeof err);
		im->params_variant(params, &d, 0);
		struct run r;
		int want = modes_gpu_only_in(&m, im->modes) >= 0 ? ALIGN_ERR_UNSUPPORTED : ALIGN_OK;
		if (run_op(op, params, &d, &m, 0, &r) != want) {
			printf("FAIL %s under profile %s (want rc %d)\n", op->name, *pr, want);
			fails++;
		}
		run_free(op, &r);
	}
	printf("%-12s %d variants x %d fill sets: %s\n", op->name, nvar, NSETS, fails ? "failures so far" : "ok");
	free(params);
}

/* argv: op names to check (default: every op), or --shard I/N: the ops whose registry index is I-1
 * modulo N (meson runs kernels-ops-1..N, each with its own time limit, so a new op cannot push the one
 * test past it) */
int main(int argc, char **argv)
{
	int shard = 0, nshards = 0;
	const char *su = getenv("TEST_OPS_SKIP_UNREAD");
	skip_unread = su && !strcmp(su, "1");
	if (skip_unread)
		printf("test-ops: TEST_OPS_SKIP_UNREAD=1: switches an op does not read are not run\n");
	if (argc == 3 && !strcmp(argv[1], "--shard") &&
	    (sscanf(argv[2], "%d/%d", &shard, &nshards) != 2 || shard < 1 || shard > nshards)) {
		printf("FAIL --shard %s: want I/N with 1 <= I <= N\n", argv[2]);
		return 2;
	}
	for (int i = 0; i < ALIGN_OP_COUNT; i++) {
		int pick = nshards ? i % nshards == shard - 1 : argc < 2;
		for (int a = 1; a < argc && !nshards; a++)
			pick |= !strcmp(argv[a], ops_at(i)->name);
		if (pick)
			check_op(ops_at(i));
	}
	if (ops_find("nope") || !ops_find("router"))
		fails++;
	int64_t shape[4];
	int nd;
	struct align_dims d = {{0}};
	d.v[ALIGN_DIM_N] = 4;
	d.v[ALIGN_DIM_D] = 8;
	if (ops_shape_eval("(2+N)*N,N*D", &d, shape, &nd) || nd != 2 || shape[0] != 24 || shape[1] != 32) {
		printf("FAIL shape expressions\n");
		fails++;
	}
	printf("test-ops: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
