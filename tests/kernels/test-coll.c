/* test-coll.c: the collectives' C twins and the CPU model of NCCL's order (coll.h, coll_model.h), without
 * any GPU: fp16 conversions; exact answers on inputs built so the sum is known exactly (nccl-tests
 * style: small integers) for every engine and dtype; the fixed order's invariance over sizes, channels,
 * protocols and ring orders, and its rank order; the ring model's chunk map and chains (the rank that comes
 * first is detected from the bits); the tree model's size invariance; reduce-scatter's ring order; the
 * channel split; NCCL's btree shape; NCCL_* parsing; busbw. Exit status 0 = pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_model.h"
#include "ops.h"

static int fails, checks;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		checks++;                                                                                              \
		if (!(cond)) {                                                                                         \
			fails++;                                                                                       \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                    \
			printf(__VA_ARGS__);                                                                           \
			printf("\n");                                                                                  \
		}                                                                                                      \
	} while (0)

/* ---- fp16 ---- */
static void test_f16(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 0x10000u; h++) { /* every fp16 value round-trips */
		float f = align_f16_to_f32((align_f16)h);
		align_f16 back = align_f32_to_f16(f);
		if (f != f ? (back & 0x7c00u) != 0x7c00u || !(back & 0x3ffu) : back != h)
			bad++;
	}
	CHECK(bad == 0, "%d fp16 values do not round-trip", bad);
	/* rounding: the result is a nearest fp16, ties to even (checked against the neighbours) */
	bad = 0;
	uint64_t s = 12345;
	for (int n = 0; n < 2000000; n++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t u = (uint32_t)(s >> 32);
		if ((u & 0x7f800000u) == 0x7f800000u)
			continue;
		float f = align_bits_f32(u);
		if (fabsf(f) >= 65520.0f) {
			bad += (align_f32_to_f16(f) & 0x7fffu) != 0x7c00u;
			continue;
		}
		align_f16 h = align_f32_to_f16(f);
		double d = fabs((double)f - align_f16_to_f32(h));
		uint16_t mag = h & 0x7fffu, sg = h & 0x8000u;
		double dn = mag ? fabs((double)f - align_f16_to_f32((align_f16)(sg | (mag - 1)))) : INFINITY;
		double up = mag < 0x7bffu ? fabs((double)f - align_f16_to_f32((align_f16)(sg | (mag + 1)))) : INFINITY;
		if (d > dn || d > up || ((d == dn || d == up) && (h & 1u)))
			bad++;
	}
	CHECK(bad == 0, "%d binary32 values not rounded to the nearest fp16 (ties to even)", bad);
	CHECK(align_f32_to_f16(65519.0f) == 0x7bffu && align_f32_to_f16(65520.0f) == 0x7c00u, "fp16 overflow edge");
	CHECK(align_f32_to_f16(0x1p-25f) == 0 && align_f32_to_f16(0x1.000002p-25f) == 1, "fp16 underflow edge");
#ifdef __FLT16_MAX__
	bad = 0;
	for (int n = 0; n < 200000; n++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		float f = align_bits_f32((uint32_t)(s >> 32));
		__extension__ _Float16 g = f; /* the conversion rounds as IEEE says */
		uint16_t gb;
		memcpy(&gb, &g, 2);
		if (f == f && gb != align_f32_to_f16(f))
			bad++;
	}
	CHECK(bad == 0, "%d values differ from the compiler's _Float16", bad);
#endif
}

/* ---- running the twins ---- */
struct rig {
	const struct align_op *op;
	struct align_dims d;
	struct align_modes m;
	struct coll_params p;
	struct align_tensor x, y;
};

static void rig_init(struct rig *r, const char *op, int64_t N, int64_t D, int impl, int dtype)
{
	memset(r, 0, sizeof *r);
	r->op = ops_find(op);
	r->d.v[ALIGN_DIM_N] = N;
	r->d.v[ALIGN_DIM_D] = D;
	modes_init_default(&r->m);
	r->m.v[MODE_COLL_IMPL] = impl;
	r->m.v[MODE_COLL_DTYPE] = dtype;
	r->op->impl->params_default(&r->p, &r->d);
	ops_tensor_alloc(r->op, 0, 0, &r->d, &r->m, &r->x);
	ops_tensor_alloc(r->op, 1, 0, &r->d, &r->m, &r->y);
}

static int rig_run(struct rig *r)
{
	return ops_fwd_cpu(r->op, &r->p, &r->m, &r->x, 1, &r->y, 1);
}

static void rig_free(struct rig *r)
{
	ops_tensor_free(&r->x);
	ops_tensor_free(&r->y);
}

static const int impls[] = {ALIGN_COLL_IMPL_FIXED, ALIGN_COLL_IMPL_NCCL_MODEL_RING, ALIGN_COLL_IMPL_NCCL_MODEL_TREE};
static const int dtypes[] = {ALIGN_COLL_DTYPE_FP32, ALIGN_COLL_DTYPE_BF16, ALIGN_COLL_DTYPE_FP16};

/* x[k,i] = small integers (|sum| < 256: exact in every dtype and order) */
static float exact_val(int64_t k, int64_t i)
{
	return (float)((int)((k * 7 + i * 13) % 11) - 5);
}

static void test_exact(void)
{
	const char *ops[] = {"allreduce", "reduce_scatter"};
	for (int o = 0; o < 2; o++)
		for (int a = 0; a < 3; a++)
			for (int t = 0; t < 3; t++)
				for (int v = 0; v < 4; v++) {
					struct rig r;
					rig_init(&r, ops[o], 8, 3000, impls[a], dtypes[t]);
					r.op->impl->params_variant(&r.p, &r.d, v);
					int64_t cols = r.x.shape[1];
					for (int64_t k = 0; k < 8; k++)
						for (int64_t i = 0; i < cols; i++)
							ops_st(&r.x, k * cols + i, exact_val(k, i));
					int rc = rig_run(&r), bad = 0;
					for (int64_t e = 0; !rc && e < align_tensor_numel(&r.y); e++) {
						int64_t i = o == 0 ? e % 3000 : e; /* column of the sum */
						float want = 0;
						for (int64_t k = 0; k < 8; k++)
							want += exact_val(k, i);
						bad += ops_ld(&r.y, e) != want;
					}
					CHECK(rc == 0 && bad == 0, "%s impl %d dtype %d variant %d: rc %d, %d wrong",
					      ops[o], impls[a], dtypes[t], v, rc, bad);
					rig_free(&r);
				}
}

/* fill with the RNG (the op's spec fill), seed s */
static void fill(struct rig *r, uint64_t s)
{
	ops_fill_input(r->op, 0, &r->x, s, 1);
}

/* the fixed order: rank order with one final rounding, and the same bits for any D, params */
static void test_fixed(void)
{
	for (int t = 0; t < 3; t++) {
		struct rig a, b;
		rig_init(&a, "allreduce", 5, 1000, ALIGN_COLL_IMPL_FIXED, dtypes[t]);
		rig_init(&b, "allreduce", 5, 70000, ALIGN_COLL_IMPL_FIXED, dtypes[t]);
		fill(&a, 3);
		for (int64_t k = 0; k < 5; k++) /* b's first 1000 columns = a's */
			for (int64_t i = 0; i < 70000; i++)
				ops_st(&b.x, k * 70000 + i, i < 1000 ? ops_ld(&a.x, k * 1000 + i) : (float)i);
		int bad = 0, badv = 0;
		CHECK(rig_run(&a) == 0, "fixed run");
		for (int v = 0; v < 4; v++) {
			b.op->impl->params_variant(&b.p, &b.d, v);
			CHECK(rig_run(&b) == 0, "fixed run");
			for (int64_t i = 0; i < 1000; i++)
				for (int64_t r = 0; r < 5; r++)
					badv += ops_ld(&b.y, r * 70000 + i) != ops_ld(&a.y, i);
		}
		for (int64_t i = 0; i < 1000; i++) {
			float acc = ops_ld(&a.x, i);
			for (int64_t k = 1; k < 5; k++)
				acc = acc + ops_ld(&a.x, k * 1000 + i);
			float want = t == 1 ? align_round_bf16(acc) : t == 2 ? align_round_f16(acc) : acc;
			for (int64_t r = 0; r < 5; r++)
				bad += ops_ld(&a.y, r * 1000 + i) != want;
		}
		CHECK(bad == 0, "dtype %d: fixed is not the rank-order sum with one rounding (%d)", t, bad);
		CHECK(badv == 0, "dtype %d: fixed changed with the size or the NCCL parameters (%d)", t, badv);
		rig_free(&a);
		rig_free(&b);
	}
}

/* The chain sum of column i of x (fp32 rows of cols) along ring order `order` from position `start`,
 * computed here independently of the model. */
static float chain_at(const struct rig *r, int64_t cols, int64_t i, const int *order, int start)
{
	int64_t N = r->x.shape[0];
	float acc = ops_ld(&r->x, order[start % N] * cols + i);
	for (int64_t k = 1; k < N; k++)
		acc = acc + ops_ld(&r->x, order[(start + k) % N] * cols + i);
	return acc;
}

/* output element e equals the chain from `start` (and, over the calls, some other start differs: the
 * data tells the orders apart) */
static int chain_ok(const struct rig *r, int64_t cols, int64_t col, int64_t e, const int *order, int start,
		    int *distinct)
{
	float got = ops_ld(&r->y, e);
	for (int s2 = 0; s2 < r->x.shape[0]; s2++)
		if (s2 != start && chain_at(r, cols, col, order, s2) != got)
			(*distinct)++;
	return got == chain_at(r, cols, col, order, start);
}

static void test_ring_chunks(void)
{
	/* one channel, Simple, 4 MiB buffer: chunk 2 MiB = 524288 fp32; N = 4, D = 4 * 524288 + 1000 (a short
	 * second loop of 4 chunks of alignUp(250, 4) = 252): chunk j starts at ring position j+1 */
	const int64_t cc = 524288, N = 4, D = 4 * cc + 1000;
	int ident[4] = {0, 1, 2, 3}, rev[4] = {3, 2, 1, 0};
	for (int o = 0; o < 2; o++) {
		struct rig r;
		rig_init(&r, "allreduce", N, D, ALIGN_COLL_IMPL_NCCL_MODEL_RING, ALIGN_COLL_DTYPE_FP32);
		if (o) { /* NCCL_RINGS "3 2 1 0" */
			r.p.nrings = 1;
			for (int k = 0; k < N; k++)
				r.p.ring[0][k] = (uint8_t)rev[k];
		}
		fill(&r, 5);
		CHECK(rig_run(&r) == 0, "ring run");
		int bad = 0, distinct = 0;
		for (int64_t e = 0; e < D; e += 997) {
			int64_t j = e < 4 * cc ? e / cc : (e - 4 * cc) / 252;
			bad += !chain_ok(&r, D, e, e, o ? rev : ident, (int)((j + 1) % N), &distinct);
		}
		CHECK(bad == 0 && distinct > 100, "ring %d: %d elements not the documented chain (%d distinct)", o, bad,
		      distinct);
		rig_free(&r);
	}
}

/* the documented hazard: the same data sent as 2 MiB or 16 MiB gives other ring bits; fixed and (one
 * node) tree give the same */
static void test_size_dependence(void)
{
	const int64_t N = 4, small = 512 * 1024, big = 4 * 1024 * 1024; /* fp32: 2 MiB and 16 MiB */
	for (int a = 0; a < 3; a++) {
		struct rig s, b;
		rig_init(&s, "allreduce", N, small, impls[a], ALIGN_COLL_DTYPE_FP32);
		rig_init(&b, "allreduce", N, big, impls[a], ALIGN_COLL_DTYPE_FP32);
		s.p.nchannels = b.p.nchannels = 4;
		fill(&s, 9);
		for (int64_t k = 0; k < N; k++)
			for (int64_t i = 0; i < big; i++)
				ops_st(&b.x, k * big + i, i < small ? ops_ld(&s.x, k * small + i) : 0.5f);
		CHECK(rig_run(&s) == 0 && rig_run(&b) == 0, "size runs");
		int64_t diff = 0;
		for (int64_t i = 0; i < small; i++)
			diff += ops_ld(&s.y, i) != ops_ld(&b.y, i);
		if (impls[a] == ALIGN_COLL_IMPL_NCCL_MODEL_RING)
			CHECK(diff > small / 10, "ring: 2 MiB vs 16 MiB should differ in many elements, %lld did",
			      (long long)diff);
		else
			CHECK(diff == 0, "impl %d: 2 MiB vs 16 MiB differ in %lld elements", impls[a], (long long)diff);
		printf("2 MiB vs 16 MiB, 4 ranks, 4 channels, impl %s: %.1f%% of elements differ\n",
		       modes_value_name(MODE_COLL_IMPL, impls[a]), 100.0 * (double)diff / (double)small);
		rig_free(&s);
		rig_free(&b);
	}
}

static void test_tree(void)
{
	/* one node: the chain from the last rank to the first, every element and size */
	int back[4] = {3, 2, 1, 0};
	for (int64_t D = 10; D <= 100000; D *= 100) {
		struct rig r;
		rig_init(&r, "allreduce", 4, D, ALIGN_COLL_IMPL_NCCL_MODEL_TREE, ALIGN_COLL_DTYPE_FP32);
		r.p.nchannels = 2;
		fill(&r, 6);
		CHECK(rig_run(&r) == 0, "tree run");
		int bad = 0, distinct = 0;
		for (int64_t e = 0; e < D; e++)
			bad += !chain_ok(&r, D, e, e, back, 0, &distinct);
		CHECK(bad == 0 && distinct > 0, "tree D=%lld: %d elements not the chain 3,2,1,0", (long long)D, bad);
		rig_free(&r);
	}
	/* NCCL's btree for 14 nodes (trees.cc's illustration): root 0 -> 8; 12 -> 10, 13; 13's parent 12 */
	int u, d0, d1;
	coll_model_btree(14, 0, &u, &d0, &d1);
	CHECK(u == -1 && d0 == -1 && d1 == 8, "btree root");
	coll_model_btree(14, 12, &u, &d0, &d1);
	CHECK(u == 8 && d0 == 10 && d1 == 13, "btree 12: up %d down %d %d", u, d0, d1);
	coll_model_btree(14, 13, &u, &d0, &d1);
	CHECK(u == 12 && d0 == -1 && d1 == -1, "btree 13: up %d", u);
	coll_model_btree(14, 6, &u, &d0, &d1);
	CHECK(u == 4 && d0 == 5 && d1 == 7, "btree 6");
}

/* reduce-scatter ring: rank at position p's block is summed from position p+1, whatever the size */
static void test_rs_ring(void)
{
	int ident[4] = {0, 1, 2, 3};
	for (int64_t D = 100; D <= 900000; D *= 30) {
		struct rig r;
		rig_init(&r, "reduce_scatter", 4, D, ALIGN_COLL_IMPL_NCCL_MODEL_RING, ALIGN_COLL_DTYPE_FP32);
		r.p.nchannels = 3;
		fill(&r, 7);
		CHECK(rig_run(&r) == 0, "rs run");
		int bad = 0, distinct = 0;
		for (int b = 0; b < 4; b++)
			for (int64_t i = 0; i < D; i += 7)
				bad += !chain_ok(&r, 4 * D, b * D + i, b * D + i, ident, (b + 1) % 4, &distinct);
		CHECK(bad == 0 && distinct > 0, "rs D=%lld: %d elements off the chain", (long long)D, bad);
		rig_free(&r);
	}
}

static void test_parts(void)
{
	struct coll_params p;
	struct align_dims d = {{0}};
	ops_find("allreduce")->impl->params_default(&p, &d);
	struct coll_part parts[COLL_MODEL_MAX_PARTS];
	int64_t counts[] = {1, 100, 8192, 1000003, 50000000};
	for (int c = 1; c <= 16; c *= 2)
		for (int k = 0; k < 5; k++) {
			p.nchannels = c;
			int n = coll_model_parts(COLL_ALLREDUCE, counts[k], 4, 8, &p, parts);
			int64_t off = 0;
			int ok = n >= 1 && n <= c;
			for (int j = 0; j < n; j++) {
				ok &= parts[j].offset == off && parts[j].count > 0 && parts[j].chunk_count == 524288;
				off += parts[j].count;
			}
			CHECK(ok && off == counts[k], "parts: %lld elements over %d channels: %d parts, covered %lld",
			      (long long)counts[k], c, n, (long long)off);
		}
	p.nchannels = 4; /* big messages use every channel */
	CHECK(coll_model_parts(COLL_ALLREDUCE, 50000000, 4, 8, &p, parts) == 4, "4 channels used");
}

static const char *env_vals[8][2];
static const char *fake_env(const char *name)
{
	for (int i = 0; i < 8 && env_vals[i][0]; i++)
		if (!strcmp(env_vals[i][0], name))
			return env_vals[i][1];
	return NULL;
}

static void test_env(void)
{
	struct coll_params p;
	struct align_dims d = {{0}};
	struct align_err err = {0};
	ops_find("allreduce")->impl->params_default(&p, &d);
	env_vals[0][0] = "NCCL_PROTO", env_vals[0][1] = "LL";
	env_vals[1][0] = "NCCL_MAX_NCHANNELS", env_vals[1][1] = "8";
	env_vals[2][0] = "NCCL_RINGS", env_vals[2][1] = "0 1 2 3|3 2 1 0";
	CHECK(coll_params_from_env(&p, 4, fake_env, &err) == 0 && p.proto == COLL_PROTO_LL && p.nchannels == 8 &&
		      p.nrings == 2 && p.ring[1][0] == 3 && p.buffsize == 256 << 10,
	      "NCCL env: %s", err.msg);
	env_vals[2][1] = "0 1 2";
	CHECK(coll_params_from_env(&p, 4, fake_env, &err) == ALIGN_ERR_INPUT && strstr(err.msg, "NCCL_RINGS"),
	      "short ring refused: %s", err.msg);
	env_vals[2][1] = "0 1 2 3";
	env_vals[0][1] = "LL,Simple";
	memset(&err, 0, sizeof err); /* the error record keeps its first message */
	CHECK(coll_params_from_env(&p, 4, fake_env, &err) == ALIGN_ERR_INPUT &&
		      strstr(err.msg, "NCCL_PROTO='LL,Simple'"),
	      "two protocols refused: %s", err.msg);
}

static void test_busbw(void)
{
	CHECK(coll_busbw(COLL_ALLREDUCE, 8, 1e9, 1.0) == 1.75e9, "allreduce busbw = algbw * 2(n-1)/n");
	CHECK(coll_busbw(COLL_REDUCE_SCATTER, 4, 1e9, 2.0) == 0.375e9, "reduce_scatter busbw = algbw * (n-1)/n");
	CHECK(coll_busbw(COLL_ALL_GATHER, 2, 1e9, 1.0) == 0.5e9, "all_gather busbw");
	CHECK(coll_algbw(1e9, 0.5) == 2e9, "algbw = bytes / seconds");
}

static void test_all_gather(void)
{
	struct rig r;
	rig_init(&r, "all_gather", 3, 10, ALIGN_COLL_IMPL_FIXED, ALIGN_COLL_DTYPE_BF16);
	fill(&r, 4);
	CHECK(rig_run(&r) == 0, "all_gather run");
	int bad = 0;
	for (int64_t q = 0; q < 3; q++)
		bad += memcmp((char *)r.y.data + q * 60, r.x.data, 60) != 0;
	CHECK(bad == 0, "all_gather: every rank's row is the rows in rank order");
	rig_free(&r);
}

int main(void)
{
	test_f16();
	test_exact();
	test_fixed();
	test_ring_chunks();
	test_size_dependence();
	test_tree();
	test_rs_ring();
	test_parts();
	test_env();
	test_busbw();
	test_all_gather();
	printf("%d checks, %d failed\n", checks, fails);
	return fails ? 1 : 0;
}
