/* bench-ops-cpu: CPU time of every C twin at DSv4-Flash sizes in the portable (deepseek-ref) modes.
 *
 * Sizes: tokens T=4096 (matmul, router and mhc_pre/mhc_head: fewer rows, noted, because their
 * sequential K loops are O(T*D*F)), hidden D=4096, 256 experts, top-6, ffn F=2048 (the
 * moe_inter_dim), 4 residual streams, 64 heads of 512. Inputs come from the op's RNG fill.
 * Timing: one warm-up, then the median and min/max of 5 runs (CLOCK_MONOTONIC), one thread.
 * Derived figures: MB/s = (bytes of all inputs + outputs) / median time; ns/token = median / T.
 * Run: build/tests/bench/bench-ops-cpu  (or meson test --benchmark) */
#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bench_case {
	const char *op;
	const char *dims;
	const char *note;
};

static const struct bench_case cases[] = {
	{"rmsnorm", "T=4096,D=4096", ""},
	{"qnorm", "T=4096,H=64,D=512", ""},
	{"swiglu", "T=4096,F=2048", ""},
	{"moe_combine", "T=4096,K=6,D=4096,E=256", ""},
	{"mhc_post", "T=4096,N=4,D=4096", ""},
	{"mhc_pre", "T=512,N=4,D=4096", "T=512: mapping GEMM 24 x 16384 per token"},
	{"mhc_head", "T=512,N=4,D=4096", "T=512"},
	{"router", "T=512,D=4096,E=256,K=6,V=129280", "T=512: gating GEMM 256 x 4096 per token"},
	{"matmul", "T=256,D=4096,F=2048", "T=256: 2.1 GFLOP, sequential K"},
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int bench_one(const struct bench_case *bc)
{
	const struct align_op *op = ops_find(bc->op);
	struct align_modes m;
	struct align_dims d = {0};
	char err[256];
	modes_init_default(&m);
	if (!op || ops_dims_parse(bc->dims, &d, err, sizeof err)) {
		fprintf(stderr, "bench: bad case %s %s\n", bc->op, bc->dims);
		return 1;
	}
	const struct align_op_impl *im = op->impl;
	struct align_tensor in[8] = {{0}}, out[8] = {{0}};
	void *params = calloc(1, im->params_size + 1);
	im->params_default(params, &d);
	double bytes = 0;
	for (int i = 0; i < im->n_in; i++) {
		if (ops_tensor_alloc(op, 0, i, &d, &m, &in[i]) || ops_fill_input(op, i, &in[i], 1, 1))
			return 1;
		bytes += (double)align_tensor_numel(&in[i]) * align_dtype_size(in[i].dtype);
	}
	for (int k = 0; k < im->n_out; k++) {
		if (ops_tensor_alloc(op, 1, k, &d, &m, &out[k]))
			return 1;
		bytes += (double)align_tensor_numel(&out[k]) * align_dtype_size(out[k].dtype);
	}
	double t[6];
	for (int r = 0; r < 6; r++) {
		double t0 = now();
		if (ops_fwd_cpu(op, params, &m, in, im->n_in, out, im->n_out)) {
			fprintf(stderr, "bench: %s failed\n", bc->op);
			return 1;
		}
		t[r] = now() - t0;
	}
	qsort(t + 1, 5, sizeof t[0], cmp_double); /* t[0] is the warm-up */
	double med = t[3];
	printf("| %-11s | %-32s | %9.1f | %8.1f | %8.1f | %9.0f | %7.0f | %s |\n", bc->op, bc->dims, med * 1e3,
	       t[1] * 1e3, t[5] * 1e3, bytes / med / 1e6, med * 1e9 / (double)d.v[ALIGN_DIM_T], bc->note);
	for (int i = 0; i < im->n_in; i++)
		ops_tensor_free(&in[i]);
	for (int k = 0; k < im->n_out; k++)
		ops_tensor_free(&out[k]);
	free(params);
	return 0;
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	printf("C twins, portable (deepseek-ref) modes, one thread; median of 5 after 1 warm-up\n");
	printf("| op          | dims                             | median ms |   min ms |   max ms | in+out MB/s | "
	       "ns/token | note |\n");
	printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n");
	int rc = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!only || !strcmp(only, cases[i].op))
			rc |= bench_one(&cases[i]);
	return rc;
}
