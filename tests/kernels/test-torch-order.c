/* test-torch-order.c: torch_order.h's torch_rowsum (ATen's CUDA x.sum(-1) / x.mean(-1) of a [rows, n]
 * binary32 tensor) follows its documented order.
 * Checks (1) the block shapes torch_rowsum_plan picks against the ones measured on an H200 with PyTorch
 * 2.11 (reports/gpu/2026-12-03-h200.md, probe_mean_aten: lanes a row for 1, 8 and 200 rows), the y split
 * and the refused shapes; (2) random rows against an independent re-implementation that assigns every
 * element to its thread and accumulator first (element-major, where torch_rowsum is thread-major) and folds
 * the trees recursively; (3) rows >= 16 with n < 128 against torch_sum_lastdim, the x.sum(-1) model that
 * tests/gpu/torch-compare.py checked on the GPU; (4) the alignment head of rows that do not start on 16
 * bytes changes the bits, and the row count changes them below 16 rows; (5) torch_rowdot_bf16 against
 * torch_rowsum of the materialised product, torch_softmax_bwd against fmaf(-y, s, g y). Exit status 0 = pass. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "torch_order.h"

#define SEED 0x70c4ull

static int fails;

static void expect_plan(int64_t rows, int64_t n, int vec, int bw, int ys, int ok)
{
	struct torch_rowsum p = torch_rowsum_plan(rows, n);
	if (p.vec != vec || p.bw != bw || p.ys != ys || p.ok != ok) {
		printf("FAIL plan rows=%" PRId64 " n=%" PRId64 ": vec %d bw %d ys %d ok %d, want %d %d %d %d\n", rows,
		       n, p.vec, p.bw, p.ys, p.ok, vec, bw, ys, ok);
		fails++;
	}
}

/* the tree "v[l] += v[l + off] for off = len/2 .. 1", folded recursively */
static void fold(float *v, int len)
{
	if (len <= 1)
		return;
	for (int l = 0; l < len / 2; l++)
		v[l] = v[l] + v[l + len / 2];
	fold(v, len / 2);
}

#define MAXN 20000

static const int *sort_thr, *sort_acc;
static const int64_t *sort_ord;

/* visit order of the elements: by thread, accumulator, the thread's pass, index */
static int by_visit(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	if (sort_thr[a] != sort_thr[b])
		return sort_thr[a] < sort_thr[b] ? -1 : 1;
	if (sort_acc[a] != sort_acc[b])
		return sort_acc[a] < sort_acc[b] ? -1 : 1;
	if (sort_ord[a] != sort_ord[b])
		return sort_ord[a] < sort_ord[b] ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* element-major: every element's (thread, accumulator) first, then the sums in visit order */
static float ref_rowsum(const float *x, int64_t n, int64_t rows, int64_t row)
{
	struct torch_rowsum p = torch_rowsum_plan(rows, n);
	const int bw = p.bw, ys = p.ys, nt = bw * ys;
	const int64_t step = nt;
	static int thr[MAXN], acc[MAXN];
	static int64_t ord[MAXN];
	int64_t h = p.vec ? (row * n) % 4 : 0, start = h ? 4 - h : 0, end = h ? n + h - 4 : n;
	for (int64_t e = 0; e < n; e++) {
		if (!p.vec) {
			thr[e] = (int)(e % step);
			acc[e] = (int)((e / step) % 4);
			ord[e] = e / step;
			continue;
		}
		if (e < start) { /* the head: lane e + h of y = 0, before everything */
			thr[e] = (int)(e + h);
			acc[e] = 0;
			ord[e] = -1;
			continue;
		}
		int64_t f = e - start, full = end - end % 4;
		if (f < full) {
			int64_t v = f / 4;
			thr[e] = (int)(v % step);
			acc[e] = (int)(f % 4);
			ord[e] = v / step;
		} else { /* the tail: lane f - full of y = 0, after everything */
			thr[e] = (int)(f - full);
			acc[e] = 0;
			ord[e] = INT64_MAX;
		}
	}
	static int64_t idx[MAXN];
	for (int64_t e = 0; e < n; e++)
		idx[e] = e;
	sort_thr = thr, sort_acc = acc, sort_ord = ord;
	qsort(idx, (size_t)n, sizeof idx[0], by_visit);
	float a[TORCH_ROWSUM_MAX_THREADS][4];
	memset(a, 0, sizeof a); /* +0 starts */
	for (int64_t k = 0; k < n; k++) {
		int64_t e = idx[k];
		a[thr[e]][acc[e]] = a[thr[e]][acc[e]] + x[e];
	}
	float v[TORCH_ROWSUM_MAX_THREADS];
	for (int t = 0; t < nt; t++)
		v[t] = ((a[t][0] + a[t][1]) + a[t][2]) + a[t][3];
	/* block.x first: thread (x, y) at x + y bw; each row of threads folds over x (a shared tree down to
	 * 32 lanes, the first levels of the same fold), then the row sums fold over y */
	float col[TORCH_ROWSUM_MAX_THREADS];
	for (int y = 0; y < ys; y++) {
		float *w = v + y * bw;
		int len = bw;
		while (len > 32) {
			for (int l = 0; l < len / 2; l++)
				w[l] = w[l] + w[l + len / 2];
			len /= 2;
		}
		fold(w, len);
		col[y] = w[0];
	}
	fold(col, ys);
	return col[0];
}

static void random_rows(void)
{
	static const int64_t shapes[][2] = {
		{1, 1},	    {1, 5},	{1, 64},    {1, 127},	 {1, 128},    {1, 129},	   {1, 132},   {1, 300},
		{1, 1024},  {1, 4096},	{1, 7168},  {1, 8192},	 {1, 9000},   {2, 129},	   {3, 257},   {8, 64},
		{8, 129},   {8, 256},	{8, 4096},  {8, 8192},	 {16, 96},    {16, 130},   {16, 4096}, {16, 8200},
		{200, 127}, {200, 129}, {200, 300}, {200, 7168}, {600, 8195}, {4096, 513},
	};
	uint64_t k = 0;
	static float x[MAXN];
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int64_t rows = shapes[s][0], n = shapes[s][1];
		struct torch_rowsum p = torch_rowsum_plan(rows, n);
		if (!p.ok) { /* every shape listed is modelled */
			printf("FAIL rows=%" PRId64 " n=%" PRId64 ": refused\n", rows, n);
			fails++;
			continue;
		}
		for (int trial = 0; trial < 5;
		     trial++) { /* rows 0..3 (every head shift where n % 4 != 0), one random */
			int64_t row =
				trial < 4 ? trial % rows : (int64_t)(align_rng_u64(SEED, 1, k++) % (uint64_t)rows);
			for (int64_t i = 0; i < n; i++) /* magnitudes 2^-6 .. 2^6: most associations differ */
				x[i] = (float)(align_rng_uniform(SEED, 2, k++) * 4.0 - 2.0) *
				       (float)(1 << ((i * 5) % 13)) * 0x1p-6f;
			float got = torch_rowsum(x, 0, &p, row, 0), want = ref_rowsum(x, n, rows, row);
			if (align_f32_bits(got) != align_f32_bits(want)) {
				printf("FAIL rowsum rows=%" PRId64 " n=%" PRId64 " row %" PRId64 ": %a, reference %a\n",
				       rows, n, row, got, want);
				fails++;
			}
			/* the squares: the same as summing the squared row */
			static float sq[MAXN];
			for (int64_t i = 0; i < n; i++)
				sq[i] = x[i] * x[i];
			if (align_f32_bits(torch_rowsum(x, 0, &p, row, 1)) !=
			    align_f32_bits(torch_rowsum(sq, 0, &p, row, 0))) {
				printf("FAIL rowsum rows=%" PRId64 " n=%" PRId64 ": square != sum of squares\n", rows,
				       n);
				fails++;
			}
			if (rows >= 16 && n < 128) {
				float lastdim = torch_sum_lastdim(x, 1, n);
				if (align_f32_bits(got) != align_f32_bits(lastdim)) {
					printf("FAIL rows=%" PRId64 " n=%" PRId64 ": %a, torch_sum_lastdim %a\n", rows,
					       n, got, lastdim);
					fails++;
				}
			}
		}
	}
}

/* the head of an unaligned row and the row count both show in the bits for some input */
static void effects(void)
{
	uint64_t k = 1u << 30;
	static float x[MAXN];
	int head = 0, count = 0;
	struct torch_rowsum p129 = torch_rowsum_plan(200, 129), p1 = torch_rowsum_plan(1, 4096),
			    p200 = torch_rowsum_plan(200, 4096);
	for (int trial = 0; trial < 50 && (!head || !count); trial++) {
		for (int64_t i = 0; i < 4096; i++)
			x[i] = (float)(align_rng_uniform(SEED, 2, k++) * 2.0 - 1.0);
		/* rows 0 and 1 of n = 129: offsets 0 and 129 (mod 4: 1) */
		head |= align_f32_bits(torch_rowsum(x, 0, &p129, 0, 0)) !=
			align_f32_bits(torch_rowsum(x, 0, &p129, 1, 0));
		count |= align_f32_bits(torch_rowsum(x, 0, &p1, 0, 0)) !=
			 align_f32_bits(torch_rowsum(x, 0, &p200, 0, 0));
	}
	if (!head || !count) {
		printf("FAIL effects: unaligned head %s, row count %s\n", head ? "seen" : "never seen",
		       count ? "seen" : "never seen");
		fails++;
	}
	/* mean factor: fl(fl(rows) / fl(rows n)) */
	struct torch_rowsum p = torch_rowsum_plan(3, 7168);
	if (align_f32_bits(p.mean) != align_f32_bits(3.0f / 21504.0f)) {
		printf("FAIL mean factor %a\n", p.mean);
		fails++;
	}
	/* bf16 input: the widened values */
	align_bf16 b[300];
	for (int i = 0; i < 300; i++) {
		b[i] = align_f32_to_bf16((float)(align_rng_uniform(SEED, 2, k++) * 8.0 - 4.0));
		x[i] = align_bf16_to_f32(b[i]);
	}
	struct torch_rowsum q = torch_rowsum_plan(5, 300);
	if (align_f32_bits(torch_rowsum(b, 1, &q, 3, 1)) != align_f32_bits(torch_rowsum(x, 0, &q, 3, 1))) {
		printf("FAIL bf16 input\n");
		fails++;
	}
}

/* torch_rowdot_bf16 is torch_rowsum of the materialised product; torch_softmax_bwd is tmp = g y, s the
 * butterfly sum of tmp (torch_softmax_sum), fmaf(-y, s, tmp), and differs from the unfused tmp - y s */
static void rowdot_softmax(void)
{
	uint64_t k = 1u << 31;
	static align_bf16 a[MAXN], b[MAXN];
	static float pr[MAXN];
	const int64_t shapes[][2] = {{1, 64}, {8, 257}, {12, 8192}, {200, 300}, {3, 129}};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int64_t rows = shapes[s][0], n = shapes[s][1];
		struct torch_rowsum p = torch_rowsum_plan(rows, n);
		for (int64_t i = 0; i < n; i++) {
			a[i] = align_f32_to_bf16((float)(align_rng_uniform(SEED, 3, k++) * 4.0 - 2.0));
			b[i] = align_f32_to_bf16((float)(align_rng_uniform(SEED, 3, k++) * 4.0 - 2.0));
			pr[i] = align_bf16_to_f32(a[i]) * align_bf16_to_f32(b[i]);
		}
		int64_t row = rows - 1;
		if (align_f32_bits(torch_rowdot_bf16(a, b, &p, row)) !=
		    align_f32_bits(torch_rowsum(pr, 0, &p, row, 0))) {
			printf("FAIL rowdot rows=%" PRId64 " n=%" PRId64 "\n", rows, n);
			fails++;
		}
	}
	int fused_differs = 0;
	for (int trial = 0; trial < 200; trial++) {
		float g[24], y[24], gi[24], tmp[24];
		int n = trial % 2 ? 4 : 24;
		for (int i = 0; i < n; i++) {
			g[i] = (float)(align_rng_uniform(SEED, 4, k++) * 2.0 - 1.0);
			y[i] = (float)align_rng_uniform(SEED, 4, k++);
			tmp[i] = g[i] * y[i];
		}
		float sm = torch_softmax_sum(tmp, 1, n);
		torch_softmax_bwd(g, y, n, gi);
		for (int i = 0; i < n; i++) {
			float want = fmaf(-y[i], sm, tmp[i]);
			if (align_f32_bits(gi[i]) != align_f32_bits(want)) {
				printf("FAIL softmax_bwd n=%d i=%d: %a, want %a\n", n, i, gi[i], want);
				fails++;
			}
			fused_differs |= align_f32_bits(gi[i]) != align_f32_bits(tmp[i] - y[i] * sm);
		}
	}
	if (!fused_differs) {
		printf("FAIL softmax_bwd: the fmaf never differed from tmp - y s\n");
		fails++;
	}
}

int main(void)
{
	/* measured lanes a row (H200, PyTorch 2.11): 200 rows 32, 8 rows 64, one row the power of two at or
	 * below n/4 up to 512 (1024 -> 256, 4096 -> 512, 300 -> 64, 132 -> 32); scalar rows below 129 */
	expect_plan(200, 4096, 1, 32, 1, 1);
	expect_plan(200, 64, 0, 32, 1, 1);
	expect_plan(8, 4096, 1, 64, 1, 1);
	expect_plan(1, 1024, 1, 256, 1, 1);
	expect_plan(1, 4096, 1, 512, 1, 1);
	expect_plan(1, 7168, 1, 512, 1, 1);
	expect_plan(1, 300, 1, 64, 1, 1);
	expect_plan(1, 132, 1, 32, 1, 1);
	expect_plan(1, 128, 0, 128, 1, 1);
	expect_plan(1, 100, 0, 64, 1, 1);
	/* the y split: ceil(n / bw) >= min(16 bh, 256) */
	expect_plan(16, 8160, 1, 32, 1, 1);
	expect_plan(16, 8200, 1, 32, 16, 1);
	expect_plan(1, 8192, 1, 512, 1, 1);
	expect_plan(8, 8192, 1, 64, 8, 1);
	/* refused: >= 256 values a thread after the split (a cross-CTA reduce), past 2^31 bytes */
	expect_plan(1, 1 << 17, 1, 512, 1, 0);
	expect_plan(16, 1 << 17, 1, 32, 16, 0);
	expect_plan(1 << 20, 1024, 1, 1, 1, 0);
	random_rows();
	effects();
	rowdot_softmax();
	printf("test-torch-order: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
