/* test-report-elements: the element-level comparison (harness/report/report-elements.c) on tensors built
 * here so every answer is known: differing counts, max and median ULP, the multi-dimensional first
 * index, NaN/Inf counts, +0/-0, integers, 16-bit and 8-bit floats. Exit status is the verdict. */
#include "report-elements.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int fails;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                                          \
			fprintf(stderr, __VA_ARGS__);                                                                  \
			fputc('\n', stderr);                                                                           \
			fails++;                                                                                       \
		}                                                                                                      \
	} while (0)

static uint32_t f32(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

/* fp32 [2, 3, 4]: elements 5 (1 ulp), 17 (4 ulp) and 23 (9 ulp) differ; a has a NaN and an Inf that b
 * shares, b one more NaN at 20 (no ulp). */
static void test_fp32(void)
{
	float a[24], b[24];
	for (int i = 0; i < 24; i++)
		a[i] = b[i] = 0.25f * (float)i - 2;
	a[2] = b[2] = NAN;
	a[3] = b[3] = INFINITY;
	uint32_t u;
	u = f32(a[5]) + 1, memcpy(&b[5], &u, 4);
	u = f32(a[17]) + 4, memcpy(&b[17], &u, 4);
	u = f32(a[23]) + 9, memcpy(&b[23], &u, 4);
	b[20] = NAN;
	int64_t shape[3] = {2, 3, 4};
	struct report_elements e;
	int rc = report_elements_compare((const unsigned char *)a, (const unsigned char *)b, 24, "fp32", shape, 3, &e);
	CHECK(rc == 0 && e.source == REPORT_EL_PAYLOAD, "rc %d", rc);
	CHECK(e.n == 24 && e.has_total && e.total == 24, "n %llu total %llu", (unsigned long long)e.n,
	      (unsigned long long)e.total);
	CHECK(e.n_differ == 4, "differ %llu", (unsigned long long)e.n_differ);
	CHECK(e.has_ulp && e.max_ulp == 9 && e.median_ulp == 4, "ulp max %llu median %llu",
	      (unsigned long long)e.max_ulp, (unsigned long long)e.median_ulp);
	CHECK(e.has_first && e.first_flat == 5 && e.first_index[0] == 0 && e.first_index[1] == 1 &&
		      e.first_index[2] == 1,
	      "first %llu [%lld %lld %lld]", (unsigned long long)e.first_flat, (long long)e.first_index[0],
	      (long long)e.first_index[1], (long long)e.first_index[2]);
	CHECK(!strcmp(e.first_text[0], "-0.75") && !strcmp(e.first_text[1], "-0.75000006"), "values %s %s",
	      e.first_text[0], e.first_text[1]);
	CHECK(e.first_bits[0] == f32(-0.75f) && e.first_bits[1] == f32(-0.75f) + 1, "bits");
	CHECK(e.nan[0] == 1 && e.nan[1] == 2 && e.inf[0] == 1 && e.inf[1] == 1, "nan %llu/%llu inf %llu/%llu",
	      (unsigned long long)e.nan[0], (unsigned long long)e.nan[1], (unsigned long long)e.inf[0],
	      (unsigned long long)e.inf[1]);
	/* the last element differing in the index: [1, 2, 3] */
	rc = report_elements_compare((const unsigned char *)a, (const unsigned char *)a, 24, "fp32", shape, 3, &e);
	CHECK(rc == 0 && e.n_differ == 0 && !e.has_first && !e.has_ulp, "equal tensors");
}

static void test_small_floats(void)
{
	/* bf16: +0 vs -0 is 1 ulp; 1.0 (0x3f80) vs 1.0078125 (0x3f81) 1 ulp; -1 vs 1 across zero */
	uint16_t a[4] = {0x0000, 0x3f80, 0xbf80, 0x4000}, b[4] = {0x8000, 0x3f81, 0x3f80, 0x4000};
	int64_t shape[1] = {4};
	struct report_elements e;
	report_elements_compare((const unsigned char *)a, (const unsigned char *)b, 4, "bf16", shape, 1, &e);
	CHECK(e.n_differ == 3 && e.first_flat == 0 && e.first_index[0] == 0, "bf16 differ %llu",
	      (unsigned long long)e.n_differ);
	CHECK(e.max_ulp == 2 * 0x3f80 + 1 && e.median_ulp == 1, "bf16 ulp %llu %llu", (unsigned long long)e.max_ulp,
	      (unsigned long long)e.median_ulp);
	CHECK(!strcmp(e.first_text[0], "0") && !strcmp(e.first_text[1], "-0"), "bf16 text %s %s", e.first_text[0],
	      e.first_text[1]);
	/* fp16 inf and NaN; fp8 e4m3fn: 0x7f is NaN, there is no Inf */
	uint16_t h[2] = {0x7c00, 0x7e00};
	report_elements_compare((const unsigned char *)h, (const unsigned char *)h, 2, "fp16", shape, 1, &e);
	CHECK(e.inf[0] == 1 && e.nan[0] == 1 && e.n_differ == 0, "fp16 classes");
	uint8_t p[2] = {0x7f, 0x78}, q[2] = {0x7f, 0x7e};
	report_elements_compare(p, q, 2, "fp8_e4m3", shape, 1, &e);
	CHECK(e.nan[0] == 1 && e.inf[0] == 0 && e.n_differ == 1 && e.max_ulp == 6, "e4m3 nan %llu ulp %llu",
	      (unsigned long long)e.nan[0], (unsigned long long)e.max_ulp);
	CHECK(!strcmp(e.first_text[0], "256") && !strcmp(e.first_text[1], "448"), "e4m3 %s %s", e.first_text[0],
	      e.first_text[1]);
}

static void test_ints_and_heads(void)
{
	int64_t a[3] = {17, -5, 92}, b[3] = {17, 5, 95};
	int64_t shape[2] = {1, 4096};
	struct report_elements e;
	/* a head: 3 elements of a [1, 4096] tensor */
	report_elements_compare((const unsigned char *)a, (const unsigned char *)b, 3, "int64", shape, 2, &e);
	CHECK(e.n == 3 && e.total == 4096 && e.n_differ == 2 && e.max_ulp == 10 && e.median_ulp == 3,
	      "int64 n %llu total %llu differ %llu max %llu median %llu", (unsigned long long)e.n,
	      (unsigned long long)e.total, (unsigned long long)e.n_differ, (unsigned long long)e.max_ulp,
	      (unsigned long long)e.median_ulp);
	CHECK(e.first_index[0] == 0 && e.first_index[1] == 1 && !strcmp(e.first_text[0], "-5"), "int64 first");
	/* a scalar (no dimensions), an unknown dtype */
	double x = 1.5, y = 1.5000000000000002;
	report_elements_compare((const unsigned char *)&x, (const unsigned char *)&y, 1, "fp64", NULL, 0, &e);
	CHECK(e.n_differ == 1 && e.max_ulp == 1 && e.ndim == 0 && e.total == 1, "fp64 scalar");
	CHECK(report_elements_compare((const unsigned char *)&x, (const unsigned char *)&y, 1, "fp4", NULL, 0, &e) ==
			      1 &&
		      e.source == REPORT_EL_NONE && strstr(e.note, "fp4"),
	      "unknown dtype: %s", e.note);
}

int main(void)
{
	test_fp32();
	test_small_floats();
	test_ints_and_heads();
	if (fails) {
		fprintf(stderr, "%d check(s) failed\n", fails);
		return 1;
	}
	printf("all report-elements checks passed\n");
	return 0;
}
