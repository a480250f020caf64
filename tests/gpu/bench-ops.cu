/* bench-ops.cu: time of every CUDA twin of the registry (kernels/cuda/ops_cuda.h) at DSv4-Flash sizes, against a
 * device-to-device cudaMemcpy measured in the same run.
 *
 * Sizes (DSv4-Flash: hidden 4096, 16384 tokens; specs/dsv4-numerics.md): rmsnorm T=16384 D=4096; qnorm
 * T=4096 H=64 D=512; swiglu T=16384 F=2048; moe_combine T=16384 K=6 D=4096; mhc_post, mhc_pre, mhc_head
 * T=16384 N=4 D=4096; router T=16384 D=4096 E=256 K=6; matmul T=4096 D=4096 F=4096. Inputs from
 * ops_fill_input (the ops' own fills), outputs allocated per ops_tensor_alloc. When an op's input bytes are
 * below twice the L2 size, several copies of the inputs are made and the timed calls rotate through them
 * (every timed call reads from DRAM).
 * Modes: the defaults (deepseek-ref), profile:megatron, profile:paddle.
 * Method: one stream, CUDA events around each call; 3 warm-up calls, then 20 timed calls; median, min and
 * max. The copy: 1 GiB, same method. The first and the last timed outputs must be equal (determinism).
 * Derived figures (GB = 1e9 bytes):
 *   bytes      = sum of the input and output tensor sizes (each read or written once: the napkin traffic)
 *   GB/s       = bytes / t_median
 *   copy GB/s  = 2 N / t_copy (DRAM traffic of the copy: it reads N and writes N bytes)
 *   of copy    = (bytes / t_op) / (2 N / t_copy): the fraction of copy bandwidth; goal >= 0.80 for the
 *                memory-bound ops (all but router and matmul, which are compute bound: see their .cu).
 * Output: one line per (op, modes) with the device name and the commit of the build ("bench <op>
 * <profile> <dims>: ... % of copy", the default launch); ops without a twin are listed.
 * Launch sweep (row-wise ops: rmsnorm, qnorm, mhc_post, moe_combine, and swiglu; off with --no-sweep): after each
 * bench line, one line per candidate launch configuration of sweeps[] below ("sweep <op> <profile>
 * block=B rows_per_block=R grid_cap=C: ... GB/s, ...% of copy"), same method and formulas, so that one
 * GPU run tells which default to pick (rows_cuda.cuh says how the knobs map to threads per row and
 * layout); each configuration's output must also equal the default launch's bytes ("DIFFERS" otherwise).
 * Exit status: 0 done, 1 nondeterministic output or a sweep output that differs, 2 CUDA or host error,
 * 77 skip (no device).
 * Run: build-cu2/tests/gpu/bench-gpu-ops [--op NAME] [--no-sweep] (meson test -C build-cu2 --benchmark
 * --suite gpu). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "gpu-build-commit.h"
#include "gpu_skip.h"
#include "ops_cuda.h"

#define WARMUP 3
#define REPS 20
#define MAXT 8
#define MAXCOPIES 8

static const struct {
	const char *op;
	const char *dims;
} bench_dims[] = {
	{"matmul", "T=4096,D=4096,F=4096"},
	{"rmsnorm", "T=16384,D=4096"},
	{"qnorm", "T=4096,H=64,D=512"},
	{"swiglu", "T=16384,F=2048"},
	{"router", "T=16384,D=4096,E=256,K=6,V=1024"},
	{"mhc_pre", "T=16384,N=4,D=4096"},
	{"mhc_post", "T=16384,N=4,D=4096"},
	{"mhc_head", "T=16384,N=4,D=4096"},
	{"moe_combine", "T=16384,K=6,D=4096,E=256"},
};

static const char *profiles[] = {NULL, "megatron", "paddle"};

/* Candidate launches per row-wise op: block, rows_per_block, grid_cap in blocks per SM (0: none). G =
 * block / rows_per_block threads per row. The comment names what each one runs at the benchmark size. */
#define MAXSWEEP 10
struct sweep_cfg {
	int block, rpb, per_sm;
};
static const struct {
	const char *op;
	struct sweep_cfg c[MAXSWEEP]; /* ends at block 0 */
} sweeps[] = {
	/* D = 4096: G = 32 staged (the old layout), G = 64 registers LPT 8, 128 LPT 4, 256 LPT 2, 512 LPT 1 */
	{"rmsnorm",
	 {{32, 1, 0},
	  {128, 4, 0},
	  {64, 1, 0},
	  {128, 1, 0},
	  {256, 2, 0},
	  {256, 1, 0},
	  {512, 1, 0},
	  {128, 1, 16},
	  {256, 1, 8}}},
	/* D = 512: G = 32 registers LPT 2 (no block barrier), G = 64 LPT 1 */
	{"qnorm",
	 {{256, 8, 0},
	  {128, 4, 0},
	  {512, 16, 0},
	  {64, 2, 0},
	  {64, 1, 0},
	  {128, 2, 0},
	  {256, 4, 0},
	  {512, 8, 0},
	  {256, 8, 8}}},
	/* D = 4096: 512 chunks of 8 per token; G chunks at a time */
	{"mhc_post", {{256, 2, 0}, {128, 1, 0}, {128, 2, 0}, {256, 1, 0}, {512, 1, 0}, {64, 2, 0}, {256, 1, 4}}},
	{"moe_combine", {{256, 2, 0}, {128, 2, 0}, {128, 1, 0}, {256, 1, 0}, {512, 1, 0}, {512, 2, 0}, {256, 2, 4}}},
	/* elementwise (grid-stride over 16-byte chunks): block size and grid cap only */
	{"swiglu", {{128, 1, 0}, {256, 1, 0}, {512, 1, 0}, {256, 1, 8}, {256, 1, 32}}},
};

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

static size_t tbytes(const struct align_tensor *t)
{
	return (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
}

struct timing {
	float med, lo, hi; /* milliseconds */
};

static void summarize(float *ms, int n, struct timing *t)
{
	qsort(ms, (size_t)n, sizeof *ms, cmp_float);
	t->med = n % 2 ? ms[n / 2] : 0.5f * (ms[n / 2 - 1] + ms[n / 2]);
	t->lo = ms[0];
	t->hi = ms[n - 1];
}

static int bench_copy(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, size_t n, struct timing *t)
{
	void *a = NULL, *b = NULL;
	float ms[REPS];
	CK(cudaMalloc(&a, n));
	CK(cudaMalloc(&b, n));
	CK(cudaMemsetAsync(a, 0x5a, n, s));
	for (int i = 0; i < WARMUP + REPS; i++) {
		CK(cudaEventRecord(e0, s));
		CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
		CK(cudaEventRecord(e1, s));
		CK(cudaEventSynchronize(e1));
		if (i >= WARMUP)
			CK(cudaEventElapsedTime(&ms[i - WARMUP], e0, e1));
	}
	summarize(ms, REPS, t);
	cudaFree(a);
	cudaFree(b);
	return 0;
}

struct opbench {
	const struct align_op *op;
	align_fwd_cuda_fn fwd;
	void *params;
	struct align_tensor hin[MAXT];		  /* host inputs */
	struct align_tensor din[MAXCOPIES][MAXT]; /* device inputs, ncopies sets */
	struct align_tensor dout[MAXT];		  /* device outputs */
	int ncopies;
	size_t in_bytes, out_bytes;
};

static void opbench_free(struct opbench *b)
{
	const struct align_op_impl *im = b->op->impl;
	for (int i = 0; i < im->n_in; i++) {
		ops_tensor_free(&b->hin[i]);
		for (int c = 0; c < b->ncopies; c++)
			cudaFree(b->din[c][i].data);
	}
	for (int i = 0; i < im->n_out; i++)
		cudaFree(b->dout[i].data);
	free(b->params);
}

/* inputs (ncopies device copies) and outputs for dims d under modes m */
static int opbench_make(struct opbench *b, const struct align_dims *d, const struct align_modes *m, size_t l2)
{
	const struct align_op_impl *im = b->op->impl;
	b->params = calloc(1, im->params_size ? im->params_size : 1);
	if (!b->params)
		return 2;
	im->params_default(b->params, d);
	b->in_bytes = b->out_bytes = 0;
	for (int i = 0; i < im->n_in; i++) {
		if (ops_tensor_alloc(b->op, 0, i, d, m, &b->hin[i]) ||
		    ops_fill_input(b->op, i, &b->hin[i], 0xbe0c, 0)) {
			fprintf(stderr, "error: %s: cannot build input %s\n", b->op->name, im->in[i].name);
			return 2;
		}
		b->in_bytes += tbytes(&b->hin[i]);
	}
	b->ncopies = 1;
	while (b->ncopies < MAXCOPIES && (size_t)b->ncopies * b->in_bytes < 2 * l2)
		b->ncopies++;
	for (int c = 0; c < b->ncopies; c++)
		for (int i = 0; i < im->n_in; i++) {
			b->din[c][i] = b->hin[i];
			b->din[c][i].data = NULL;
			CK(cudaMalloc(&b->din[c][i].data, tbytes(&b->hin[i])));
			CK(cudaMemcpy(b->din[c][i].data, b->hin[i].data, tbytes(&b->hin[i]), cudaMemcpyHostToDevice));
		}
	for (int i = 0; i < im->n_out; i++) {
		struct align_tensor t;
		if (ops_tensor_alloc(b->op, 1, i, d, m, &t))
			return 2;
		free(t.data);
		b->dout[i] = t;
		b->dout[i].data = NULL;
		CK(cudaMalloc(&b->dout[i].data, tbytes(&t)));
		b->out_bytes += tbytes(&t);
	}
	return 0;
}

/* copy of every output to one host buffer */
static int outputs_to_host(const struct opbench *b, unsigned char *h)
{
	for (int i = 0; i < b->op->impl->n_out; i++) {
		CK(cudaMemcpy(h, b->dout[i].data, tbytes(&b->dout[i]), cudaMemcpyDeviceToHost));
		h += tbytes(&b->dout[i]);
	}
	return 0;
}

/* time one (op, modes, launch); prints its line. L == NULL: the default launch, the "bench" line, and
 * *ref receives its output (malloc'd); else a "sweep" line, its output compared with *ref.
 * 0, 1 (nondeterministic or different from the default), 2 (error), 4 (unsupported) */
static int bench_one(struct opbench *b, const struct align_modes *m, const char *mname, const char *dims,
		     const struct align_launch *L, struct align_dev *dev, cudaEvent_t e0, cudaEvent_t e1,
		     double copy_bw, unsigned char **ref)
{
	cudaStream_t s = (cudaStream_t)dev->stream;
	const struct align_op_impl *im = b->op->impl;
	float ms[REPS];
	char label[96];
	if (L)
		snprintf(label, sizeof label, "block=%d rows_per_block=%d grid_cap=%d", L->block, L->rows_per_block,
			 L->grid_cap);
	for (int i = 0; i < WARMUP + REPS; i++) {
		int c = i % b->ncopies;
		CK(cudaEventRecord(e0, s));
		int rc = b->fwd(b->params, m, b->din[c], im->n_in, b->dout, im->n_out, L, dev);
		align_dev_release_all(dev); /* the twin's pool blocks are per call (stream-ordered reuse) */
		CK(cudaEventRecord(e1, s));
		CK(cudaEventSynchronize(e1));
		if (rc == ALIGN_ERR_UNSUPPORTED) {
			if (L)
				printf("sweep %-11s %-17s %s: not supported on the GPU\n", b->op->name, mname, label);
			else
				printf("bench %-11s %-17s %s: not supported on the GPU\n", b->op->name, mname, dims);
			return 4;
		}
		if (rc) {
			fprintf(stderr, "error: %s under %s%s%s: status %d\n", b->op->name, mname, L ? ", " : "",
				L ? label : "", rc);
			return 2;
		}
		if (i >= WARMUP)
			CK(cudaEventElapsedTime(&ms[i - WARMUP], e0, e1));
	}
	struct timing t;
	summarize(ms, REPS, &t);
	/* determinism: rerun on the first input copy and compare with a second run on it */
	size_t ob = b->out_bytes;
	unsigned char *h1 = (unsigned char *)malloc(ob ? ob : 1), *h2 = (unsigned char *)malloc(ob ? ob : 1);
	int same = 0, differs = 0;
	if (h1 && h2 && b->fwd(b->params, m, b->din[0], im->n_in, b->dout, im->n_out, L, dev) == 0 &&
	    cudaStreamSynchronize(s) == cudaSuccess && outputs_to_host(b, h1) == 0 &&
	    b->fwd(b->params, m, b->din[0], im->n_in, b->dout, im->n_out, L, dev) == 0 &&
	    cudaStreamSynchronize(s) == cudaSuccess && outputs_to_host(b, h2) == 0)
		same = memcmp(h1, h2, ob) == 0;
	if (L)
		differs = ref && *ref && h1 && memcmp(*ref, h1, ob) != 0;
	double bytes = (double)(b->in_bytes + b->out_bytes), gbs = bytes / (t.med * 1e-3) / 1e9;
	if (L)
		printf("sweep %-11s %-17s %s: median %9.1f us (min %9.1f, max %9.1f), %7.1f GB/s, %5.1f%% of "
		       "copy%s%s\n",
		       b->op->name, mname, label, t.med * 1e3, t.lo * 1e3, t.hi * 1e3, gbs, 100.0 * gbs / copy_bw,
		       same ? "" : "  NONDETERMINISTIC", differs ? "  DIFFERS from the default launch" : "");
	else
		printf("bench %-11s %-17s %s: median %9.1f us (min %9.1f, max %9.1f), %8.1f MB, %7.1f GB/s, %5.1f%% of "
		       "copy (%d input cop%s)%s\n",
		       b->op->name, mname, dims, t.med * 1e3, t.lo * 1e3, t.hi * 1e3, bytes / 1e6, gbs,
		       100.0 * gbs / copy_bw, b->ncopies, b->ncopies == 1 ? "y" : "ies",
		       same ? "" : "  NONDETERMINISTIC");
	fflush(stdout);
	if (!L && ref && same) {
		*ref = h1;
		h1 = NULL;
	}
	free(h1);
	free(h2);
	return same && !differs ? 0 : 1;
}

/* the sweep of op (after its default launch): 0, 1 (a nondeterministic or different output) or 2 */
static int bench_sweep(struct opbench *b, const struct align_modes *m, const char *mname, struct align_dev *dev,
		       cudaEvent_t e0, cudaEvent_t e1, double copy_bw, unsigned char **ref)
{
	int worst = 0;
	for (size_t j = 0; j < sizeof sweeps / sizeof sweeps[0]; j++) {
		if (strcmp(sweeps[j].op, b->op->name))
			continue;
		for (int i = 0; i < MAXSWEEP && sweeps[j].c[i].block; i++) {
			const struct sweep_cfg *c = &sweeps[j].c[i];
			struct align_launch L = {c->block, c->rpb, c->per_sm * dev->sm_count, 0};
			int rc = bench_one(b, m, mname, "", &L, dev, e0, e1, copy_bw, ref);
			if (rc == 2)
				return 2;
			if (rc == 1)
				worst = 1;
		}
	}
	return worst;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int sweep = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--op") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--no-sweep"))
			sweep = 0;
		else {
			fprintf(stderr, "usage: %s [--op NAME] [--no-sweep]\n", argv[0]);
			return 2;
		}
	}
	gpu_skip_if_none();
	struct align_err err = {0, "", ""};
	struct align_dev dev;
	if (gpu_dev_open(&dev, &err))
		return 2;
	cudaStream_t s = (cudaStream_t)dev.stream;
	int l2_bytes = 0;
	CK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, dev.ordinal));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	const size_t copy_n = (size_t)1 << 30;
	struct timing ct = {0.0f, 0.0f, 0.0f};
	if (bench_copy(s, e0, e1, copy_n, &ct))
		return 2;
	double copy_bw = 2.0 * (double)copy_n / (ct.med * 1e-3) / 1e9;
	printf("bench-ops on %s (%d SMs, L2 %zu MiB), commit %s; %d warm-up + %d timed calls, median (min, max)\n",
	       dev.name, dev.sm_count, (size_t)l2_bytes >> 20, ALIGN_GPU_BUILD_COMMIT, WARMUP, REPS);
	printf("bench copy        cudaMemcpy D2D 1 GiB: median %9.1f us (min %9.1f, max %9.1f), copy traffic 2N/t = "
	       "%.1f GB/s\n",
	       ct.med * 1e3, ct.lo * 1e3, ct.hi * 1e3, copy_bw);
	int worst = 0;
	char missing[512] = "";
	for (int k = 0; k < ALIGN_OP_COUNT; k++) {
		const struct align_op *op = ops_at(k);
		if (only && strcmp(only, op->name))
			continue;
		align_fwd_cuda_fn fwd = ops_cuda_fwd(op);
		if (!fwd) {
			size_t n = strlen(missing);
			snprintf(missing + n, sizeof missing - n, "%s%s", n ? ", " : "", op->name);
			continue;
		}
		const char *dims = op->impl->dims;
		for (size_t j = 0; j < sizeof bench_dims / sizeof bench_dims[0]; j++)
			if (!strcmp(bench_dims[j].op, op->name))
				dims = bench_dims[j].dims;
		struct align_dims d;
		memset(&d, 0, sizeof d);
		if (ops_dims_parse(dims, &d, NULL, 0)) {
			fprintf(stderr, "error: %s: bad dims '%s'\n", op->name, dims);
			return 2;
		}
		for (size_t pi = 0; pi < sizeof profiles / sizeof profiles[0]; pi++) {
			struct align_modes m;
			modes_init_default(&m);
			if (profiles[pi] && modes_apply_profile(&m, profiles[pi], NULL, 0))
				continue;
			char mname[48];
			snprintf(mname, sizeof mname, "%s", profiles[pi] ? profiles[pi] : "default");
			struct opbench b;
			memset(&b, 0, sizeof b);
			b.op = op;
			b.fwd = fwd;
			unsigned char *ref = NULL;
			int rc = opbench_make(&b, &d, &m, (size_t)l2_bytes);
			if (!rc)
				rc = bench_one(&b, &m, mname, dims, NULL, &dev, e0, e1, copy_bw, &ref);
			if (sweep && (rc == 0 || rc == 1)) {
				int r2 = bench_sweep(&b, &m, mname, &dev, e0, e1, copy_bw, &ref);
				rc = r2 == 2 ? 2 : rc > r2 ? rc : r2;
			}
			free(ref);
			opbench_free(&b);
			if (rc == 2)
				return 2;
			if (rc == 1)
				worst = 1;
		}
	}
	if (missing[0])
		printf("no CUDA twin: %s\n", missing);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	align_dev_close(&dev);
	return worst;
}
