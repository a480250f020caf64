/* test-ops-cuda.cu: every CUDA twin of the registry (kernels/cuda/ops_cuda.h) against its C twin, byte for byte.
 * For each op of ops.def that has a twin (the others are listed as "no CUDA twin"), each parameter
 * variant, dims (the op's defaults; T=37 with the feature dims D, F made ragged (+3); T=1), modes (the
 * defaults, every profile, every value of every switch the op reads), fill case (float inputs drawn as
 * NORMAL, SPECIAL or EXTREME through ops_fill_tensor; positive / constant / id inputs keep their spec)
 * and seed:
 *   - the C twin runs on the host into guarded buffers (bytes around every output must stay intact);
 *   - the CUDA twin runs under every launch configuration below, twice, into device buffers with
 *     guard bytes around every output and a different fill of the output itself on each run; after each
 *     launch the guards must be intact and the output must equal the C twin's bytes exactly (NaN bits
 *     included), and run 2 must equal run 1 (determinism);
 *   - batch invariance: with the first T' = (T + 1) / 2 rows as input (the RNG streams give the same
 *     rows), every output whose first dim is T must equal the first T' rows of the full run;
 *   - the twin must refuse exactly what the C twin refuses (same status), and may answer 4 (mode not
 *     supported on the GPU) only, listed at the end.
 * GPU-only mode sets (a switch the op reads holds a modes.def GPU_ONLY value, e.g. MATH_IMPL=cuda, the
 * *-cuda profiles): the C twin has no such mode, so it runs with those switches at their portable
 * defaults only to give the expected status (input refusals); the outputs are compared instead with the
 * twin's own first run: every launch configuration and both runs must give those bytes (determinism,
 * launch invariance), guards intact, and the batch-invariance check as above (reported, not asserted,
 * for MATMUL_IMPL=cublas: cuBLAS chooses its kernel by shape). Verdict "PASS-GPU".
 * One line per case (op, variant, dims, modes, fill, seed, verdict) and a summary.
 * Exit status: 0 pass, 1 any mismatch, 2 host or CUDA error, 77 skip (no CUDA device).
 * Host code only (.cu so that nvcc provides the CUDA headers; valid C++ and C).
 * Run: meson test -C build-cu2 --suite gpu, or build-cu2/tests/gpu/test-gpu-ops-cuda [--op NAME] [--quick | --sanitize]
 * [--seed HEX] [--jobs N] [--variant K]. --variant K: only parameter variant K (to split a long op over
 * calls). Without --op the ops run in parallel worker processes (--jobs, default the number of CPUs up to
 * the number of ops; each worker has its own CUDA context), outputs in op order. Without a GPU:
 * tests/emu/run-emu.sh runs it against the kernels' logic on the host. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_check.h"
#include "gpu_skip.h"
#include "ops_cuda.h"

#define MAXT 8
#define GUARD 64	/* guard bytes on each side of every output */
#define GUARD_BYTE 0xa5 /* guard pattern */
#define MAX_MODESETS 64
#define N_FILLS 3

struct opts {
	const char *only; /* --op NAME */
	int quick;	  /* --quick: fewer launch configurations, dims and seeds (emulator runs) */
	int sanitize;	  /* --sanitize: --quick, three launch configurations run once (serial: the default mode
			   * set only), no batch-invariance case, D over 1024 as 256 (compute-sanitizer runs:
			   * every mode set's code path, 10-100x slower launches) */
	uint64_t seed;	  /* base seed */
	int variant;	  /* --variant K: only parameter variant K (-1: all) */
	int part, parts;  /* --part I/N: only the mode sets whose index is I mod N (parts 1: all) */
	int fill;	  /* --fill K: only input fill K (-1: all) */
	int times;	  /* ALIGN_TEST_TIMES=1 in the environment: each launch's wall time on stderr */
};

struct tally {
	long cases, pass, fail, unsupported, launches;
	long gpu_only; /* passing cases with GPU-only modes (checked against the twin itself) */
	int errors;    /* host or CUDA errors (exit 2) */
	char unsupported_list[2048];
	char missing[512];
};

struct modeset {
	char name[96];
	struct align_modes m;
	int base; /* the default mode set (--sanitize runs the serial launch for it only) */
};

/* one case on the host: inputs, and the C twin's outputs inside guarded buffers */
struct hcase {
	struct align_tensor in[MAXT], out[MAXT];
	unsigned char *obuf[MAXT]; /* GUARD | output | GUARD */
	size_t obytes[MAXT];
	int rc;	      /* the C twin's status */
	int gpu_only; /* the modes hold GPU-only values: outputs are compared with the twin's first run */
};

static const struct align_launch launches[] = {
	{0, 0, 0, 0},	 /* defaults */
	{32, 1, 0, 0},	 /* one warp per row */
	{1024, 2, 0, 0}, /* 512 threads per row */
	{96, 1, 3, 0},	 /* 96 threads per row (not a power of two), 3 blocks: grid-stride */
	{256, 8, 1, 0},	 /* 8 rows per block, one block */
	{64, 0, 0, 0},	 /* block size only */
	{0, 0, 0, 1},	 /* the serial reference path */
	{64, 0, 2, 1},	 /* serial, 2 blocks */
};
#define N_LAUNCH (sizeof launches / sizeof launches[0])
static const int quick_launches[] = {0, 1, 3, 6};
static const int sanitize_launches[] = {0, 3, 6}; /* defaults, grid-stride non-power-of-two, serial */

static const char *fill_name[N_FILLS] = {"normal", "special", "extreme"};

static size_t tensor_bytes(const struct align_tensor *t)
{
	return (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
}

static void launch_name(const struct align_launch *L, char *buf, size_t len)
{
	snprintf(buf, len, "block=%d rows_per_block=%d grid_cap=%d serial=%d", L->block, L->rows_per_block, L->grid_cap,
		 L->serial);
}

/* ---- mode sets ---- */

static int build_modesets(const struct align_op *op, struct modeset *ms)
{
	int n = 0;
	modes_init_default(&ms[n].m);
	ms[n].base = 1;
	snprintf(ms[n++].name, sizeof ms[0].name, "default");
	for (const char *const *p = modes_profiles(); *p && n < MAX_MODESETS; p++) {
		modes_init_default(&ms[n].m);
		if (modes_apply_profile(&ms[n].m, *p, NULL, 0))
			continue;
		ms[n].base = 0;
		snprintf(ms[n++].name, sizeof ms[0].name, "profile:%s", *p);
	}
	struct align_modes def;
	modes_init_default(&def);
	for (const int *s = op->impl->modes; *s >= 0; s++)
		for (int v = 0; v < modes_value_count(*s) && n < MAX_MODESETS; v++) {
			if (v == def.v[*s])
				continue;
			ms[n].m = def;
			ms[n].m.v[*s] = v;
			ms[n].base = 0;
			snprintf(ms[n++].name, sizeof ms[0].name, "%s=%s", modes_info(*s)->id, modes_value_name(*s, v));
		}
	return n;
}

/* ---- host side ---- */

static void hcase_free(const struct align_op *op, struct hcase *h)
{
	for (int i = 0; i < op->impl->n_in; i++)
		ops_tensor_free(&h->in[i]);
	for (int i = 0; i < op->impl->n_out; i++) {
		free(h->obuf[i]);
		h->obuf[i] = NULL;
		h->out[i].data = NULL;
	}
}

static struct align_fill case_fill(const struct align_tensor_spec *sp, int fill)
{
	struct align_fill f = sp->fill;
	if (sp->dtype == ALIGN_DT_I32)
		return f;
	if (f.kind == ALIGN_FILL_NORMAL || f.kind == ALIGN_FILL_SPECIAL || f.kind == ALIGN_FILL_EXTREME)
		f.kind = fill == 0 ? ALIGN_FILL_NORMAL : fill == 1 ? ALIGN_FILL_SPECIAL : ALIGN_FILL_EXTREME;
	return f;
}

/* inputs, guarded outputs and the C twin's run; 0 or 2 (host error) */
static int hcase_make(const struct align_op *op, const void *params, const struct align_dims *d,
		      const struct align_modes *m, int fill, uint64_t seed, struct hcase *h)
{
	const struct align_op_impl *im = op->impl;
	memset(h, 0, sizeof *h);
	for (int i = 0; i < im->n_in; i++) {
		struct align_fill f = case_fill(&im->in[i], fill);
		if (ops_tensor_alloc(op, 0, i, d, m, &h->in[i]) || ops_fill_tensor(&f, op->name, &h->in[i], seed, 0)) {
			fprintf(stderr, "error: %s: cannot build input %s\n", op->name, im->in[i].name);
			return 2;
		}
	}
	for (int i = 0; i < im->n_out; i++) {
		if (ops_tensor_alloc(op, 1, i, d, m, &h->out[i])) {
			fprintf(stderr, "error: %s: cannot allocate output %s\n", op->name, im->out[i].name);
			return 2;
		}
		free(h->out[i].data);
		h->obytes[i] = tensor_bytes(&h->out[i]);
		h->obuf[i] = (unsigned char *)malloc(h->obytes[i] + 2 * GUARD);
		if (!h->obuf[i]) {
			fprintf(stderr, "error: out of memory\n");
			return 2;
		}
		memset(h->obuf[i], GUARD_BYTE, h->obytes[i] + 2 * GUARD);
		h->out[i].data = h->obuf[i] + GUARD;
	}
	struct align_modes mc = *m, def;
	modes_init_default(&def);
	for (const int *sw = im->modes; *sw >= 0; sw++)
		if (modes_value_gpu_only(*sw, mc.v[*sw])) {
			mc.v[*sw] = def.v[*sw];
			h->gpu_only = 1;
		}
	h->rc = ops_fwd_cpu(op, params, &mc, h->in, im->n_in, h->out, im->n_out);
	return 0;
}

static int guards_ok(const unsigned char *buf, size_t bytes)
{
	for (size_t i = 0; i < GUARD; i++)
		if (buf[i] != GUARD_BYTE || buf[GUARD + bytes + i] != GUARD_BYTE)
			return 0;
	return 1;
}

/* ---- device side ---- */

struct dcase {
	struct align_tensor in[MAXT], out[MAXT];
	unsigned char *obuf[MAXT]; /* device: GUARD | output | GUARD */
	unsigned char *back[MAXT]; /* host copy of obuf after a run */
};

static void dcase_free(const struct align_op *op, struct dcase *g)
{
	for (int i = 0; i < op->impl->n_in; i++)
		cudaFree(g->in[i].data);
	for (int i = 0; i < op->impl->n_out; i++) {
		cudaFree(g->obuf[i]);
		free(g->back[i]);
	}
	memset(g, 0, sizeof *g);
}

static int dcase_make(const struct align_op *op, const struct hcase *h, struct dcase *g)
{
	memset(g, 0, sizeof *g);
	for (int i = 0; i < op->impl->n_in; i++) {
		g->in[i] = h->in[i];
		g->in[i].data = NULL;
		size_t b = tensor_bytes(&h->in[i]);
		CK(cudaMalloc(&g->in[i].data, b ? b : 1));
		CK(cudaMemcpy(g->in[i].data, h->in[i].data, b, cudaMemcpyHostToDevice));
	}
	for (int i = 0; i < op->impl->n_out; i++) {
		g->out[i] = h->out[i];
		CK(cudaMalloc((void **)&g->obuf[i], h->obytes[i] + 2 * GUARD));
		g->out[i].data = g->obuf[i] + GUARD;
		g->back[i] = (unsigned char *)malloc(h->obytes[i] + 2 * GUARD);
		if (!g->back[i]) {
			fprintf(stderr, "error: out of memory\n");
			return 2;
		}
	}
	return 0;
}

/* One launch: guards + prefill, run, wait, copy back. *rc = the twin's status. 0 or 2 (CUDA error). */
static int dcase_run(const struct align_op *op, align_fwd_cuda_fn fwd, const void *params, const struct align_modes *m,
		     const struct hcase *h, struct dcase *g, const struct align_launch *L, int prefill,
		     struct align_dev *dev, int *rc)
{
	const struct align_op_impl *im = op->impl;
	cudaStream_t stream = (cudaStream_t)dev->stream;
	for (int i = 0; i < im->n_out; i++) {
		CK(cudaMemsetAsync(g->obuf[i], GUARD_BYTE, h->obytes[i] + 2 * GUARD, stream));
		CK(cudaMemsetAsync(g->obuf[i] + GUARD, prefill, h->obytes[i], stream));
	}
	*rc = fwd(params, m, g->in, im->n_in, g->out, im->n_out, L, dev);
	CK(cudaStreamSynchronize(stream));
	/* the twin's pool blocks (align_dev_alloc) are per call, as `align run` releases them after each step:
	 * without this, ops that take pool blocks filled the pool after 16 calls (router_bwd, sparse_attn_bwd:
	 * "device pool full", status 3, H100 2026-11-28) */
	align_dev_release_all(dev);
	if (dev->err && dev->err->status != ALIGN_OK) { /* the twin's message, shown where its status differs */
		if (*rc != h->rc && *rc != ALIGN_ERR_UNSUPPORTED)
			fprintf(stderr, "note: %s (cuda) status %d: %s\n", op->name, *rc, dev->err->msg);
		dev->err->status = ALIGN_OK;
		dev->err->msg[0] = dev->err->trace[0] = 0;
	}
	CK(cudaGetLastError());
	for (int i = 0; i < im->n_out; i++)
		CK(cudaMemcpy(g->back[i], g->obuf[i], h->obytes[i] + 2 * GUARD, cudaMemcpyDeviceToHost));
	return 0;
}

/* first differing element of output i: "y[123] got 0x.. want 0x.." */
static int describe_diff(const struct align_op *op, int i, const struct align_tensor *t, const unsigned char *got,
			 const unsigned char *want, size_t bytes, char *msg, size_t len)
{
	size_t es = align_dtype_size(t->dtype);
	for (size_t k = 0; k < bytes; k += es)
		if (memcmp(got + k, want + k, es)) {
			uint32_t a = 0, b = 0;
			memcpy(&a, got + k, es);
			memcpy(&b, want + k, es);
			size_t n = 0;
			for (size_t j = k; j < bytes; j += es)
				n += memcmp(got + j, want + j, es) != 0;
			snprintf(msg, len,
				 "%s[%zu] got 0x%0*" PRIx32 " want 0x%0*" PRIx32 " (%zu of %zu elements differ)",
				 op->impl->out[i].name, k / es, (int)(2 * es), a, (int)(2 * es), b, n, bytes / es);
			return 1;
		}
	return 0;
}

/* ---- one case ---- */

struct ctx {
	const struct opts *o;
	struct tally *t;
	struct align_dev *dev; /* the device context: its stream runs every launch */
};

/* Check the twin under every launch configuration; 0 (verdict in msg / *verdict), 2 on CUDA error.
 * *verdict: 0 pass, 1 fail, 4 unsupported. */
static int check_launches(struct ctx *c, const struct align_op *op, align_fwd_cuda_fn fwd, const void *params,
			  const struct align_modes *m, int base, struct hcase *h, struct dcase *g, int *verdict,
			  char *msg, size_t len, unsigned char **first)
{
	const struct align_op_impl *im = op->impl;
	const int *pick = c->o->sanitize ? sanitize_launches : c->o->quick ? quick_launches : NULL;
	int nl = c->o->sanitize ? (int)(sizeof sanitize_launches / sizeof sanitize_launches[0])
		 : c->o->quick	? (int)(sizeof quick_launches / sizeof quick_launches[0])
				: (int)N_LAUNCH;
	int runs = c->o->sanitize ? 1 : 2;
	unsigned char *prev[MAXT] = {0};
	*verdict = 0;
	for (int li = 0; li < nl && *verdict == 0; li++) {
		const struct align_launch *L = &launches[pick ? pick[li] : li];
		/* --sanitize: the serial launch (one thread through the op: 99% of a sanitizer run's time, e.g. 87 s
		 * of attn's 88 s a case under memcheck on the H200) runs for the default mode set only; the profiles
		 * and one-switch mode sets run the parallel launches. For most twins serial is the same kernels with
		 * one thread (the grid-stride launch covers their loops); router's and the row ops' serial kernels
		 * are the C twin's loops, which the CPU sanitizer build runs under ASan/UBSan for every mode set. */
		if (c->o->sanitize && L->serial && !base)
			continue;
		char ln[96];
		launch_name(L, ln, sizeof ln);
		for (int run = 0; run < runs && *verdict == 0; run++) {
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
#ifdef ALIGN_CUDA_EMU
			/* the host emulator runs the second run's blocks and threads in reverse order: a result that
			 * depends on the order (a missing barrier) then differs from the C twin's in one of the runs */
			align_emu_set_reverse(run & 1);
#endif
			int rc, e = dcase_run(op, fwd, params, m, h, g, L, run ? 0x3c : 0xcd, c->dev, &rc);
#ifdef ALIGN_CUDA_EMU
			align_emu_set_reverse(0);
#endif
			if (e)
				return e;
			if (c->o->times) { /* ALIGN_TEST_TIMES=1: what each launch costs (sizing sanitizer runs) */
				clock_gettime(CLOCK_MONOTONIC, &t1);
				fprintf(stderr, "@@time %s [%s] %.3f s\n", op->name, ln,
					(double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
			}
			c->t->launches++;
			if (rc == ALIGN_ERR_UNSUPPORTED && h->rc == 0) {
				*verdict = 4;
				snprintf(msg, len, "not supported on the GPU (status 4)");
				break;
			}
			if (rc != h->rc) {
				*verdict = 1;
				snprintf(msg, len, "status %d, C twin %d [%s]", rc, h->rc, ln);
				break;
			}
			if (rc)
				continue;			/* both refused: nothing to compare */
			if (h->gpu_only && li == 0 && run == 0) /* GPU-only modes: the first run is the reference */
				for (int i = 0; i < im->n_out; i++)
					memcpy(h->out[i].data, g->back[i] + GUARD, h->obytes[i]);
			for (int i = 0; i < im->n_out && *verdict == 0; i++) {
				const unsigned char *got = g->back[i] + GUARD;
				char d[200];
				if (!guards_ok(g->back[i], h->obytes[i])) {
					*verdict = 1;
					snprintf(msg, len, "wrote outside output %s [%s, run %d]", im->out[i].name, ln,
						 run + 1);
				} else if (describe_diff(op, i, &h->out[i], got, (const unsigned char *)h->out[i].data,
							 h->obytes[i], d, sizeof d)) {
					*verdict = 1;
					snprintf(msg, len, "%s [%s, run %d]", d, ln, run + 1);
				} else if (prev[i] && memcmp(prev[i], got, h->obytes[i])) {
					*verdict = 1;
					snprintf(msg, len, "not deterministic: output %s [%s]", im->out[i].name, ln);
				}
			}
			for (int i = 0; i < im->n_out && *verdict == 0; i++) {
				if (!prev[i])
					prev[i] = (unsigned char *)malloc(h->obytes[i] ? h->obytes[i] : 1);
				if (!prev[i]) {
					fprintf(stderr, "error: out of memory\n");
					return 2;
				}
				memcpy(prev[i], g->back[i] + GUARD, h->obytes[i]);
			}
		}
	}
	for (int i = 0; i < im->n_out; i++) {
		if (first)
			first[i] = prev[i];
		else
			free(prev[i]);
	}
	return 0;
}

/* Batch invariance: the first (T + 1) / 2 rows alone give the same leading rows (default launch). */
static int check_invariance(struct ctx *c, const struct align_op *op, align_fwd_cuda_fn fwd, const void *params,
			    const struct align_dims *d, const struct align_modes *m, int fill, uint64_t seed,
			    unsigned char **full, int *bad, char *msg, size_t len)
{
	const struct align_op_impl *im = op->impl;
	int64_t T = d->v[ALIGN_DIM_T];
	*bad = 0;
	if (T < 2)
		return 0;
	struct align_dims dh = *d;
	dh.v[ALIGN_DIM_T] = (T + 1) / 2;
	struct hcase h;
	struct dcase g;
	memset(&g, 0, sizeof g);
	int e = hcase_make(op, params, &dh, m, fill, seed, &h);
	if (!e)
		e = dcase_make(op, &h, &g);
	int rc = 0;
	if (!e)
		e = dcase_run(op, fwd, params, m, &h, &g, &launches[0], 0xcd, c->dev, &rc);
	if (!e && rc == 0 && h.rc == 0)
		for (int i = 0; i < im->n_out && !*bad; i++) {
			if (im->out[i].shape[0] != 'T' || h.out[i].shape[0] != dh.v[ALIGN_DIM_T] || !full[i] ||
			    ops_out_not_rows(op, i))
				continue; /* not a per-row output (attn_bwd's dwo_b is D rows: D = T happens) */
			if (memcmp(g.back[i] + GUARD, full[i], h.obytes[i])) {
				*bad = 1;
				snprintf(msg, len,
					 "not batch invariant: output %s with T=%" PRId64
					 " differs from the first rows with T=%" PRId64,
					 im->out[i].name, dh.v[ALIGN_DIM_T], T);
			}
		}
	else if (!e && rc != h.rc) {
		*bad = 1;
		snprintf(msg, len, "status %d with T=%" PRId64 ", C twin %d", rc, dh.v[ALIGN_DIM_T], h.rc);
	}
	dcase_free(op, &g);
	hcase_free(op, &h);
	return e;
}

/* mode sets whose engine does not promise batch invariance (MATMUL_IMPL=cublas: cuBLAS picks its kernel
 * by shape; RMSNORM_REDUCE=torch: ATen's block shape follows the row count, rmsnorm.h): the
 * batch-invariance check is reported for them, not asserted */
static int not_invariant_by_design(const struct align_op *op, const struct align_modes *m)
{
	if (ops_op_reads_mode(op, MODE_RMSNORM_REDUCE) && m->v[MODE_RMSNORM_REDUCE] == ALIGN_RMSNORM_REDUCE_TORCH)
		return 1;
	return ops_op_reads_mode(op, MODE_MATMUL_IMPL) &&
	       m->v[MODE_MATMUL_IMPL] == modes_value_index(MODE_MATMUL_IMPL, "cublas");
}

static void note_unsupported(struct tally *t, const char *op, const char *modes)
{
	char item[160];
	snprintf(item, sizeof item, "%s %s", op, modes);
	if (strstr(t->unsupported_list, item))
		return;
	size_t n = strlen(t->unsupported_list);
	if (n + strlen(item) + 3 < sizeof t->unsupported_list)
		snprintf(t->unsupported_list + n, sizeof t->unsupported_list - n, "%s%s", n ? "; " : "", item);
}

static int run_case(struct ctx *c, const struct align_op *op, align_fwd_cuda_fn fwd, const void *params, int var,
		    const struct align_dims *d, const char *dname, const struct modeset *ms, int fill, uint64_t seed)
{
	struct hcase h;
	struct dcase g;
	char msg[400] = "", line[700];
	int nd = modes_nondet_in(&ms->m, op->impl->modes);
	if (nd >=
	    0) { /* GPU_NONDET (float atomics): no reference, no determinism; tests/gpu/moe-atomic.sh reports it */
		printf("SKIP-NONDET %s v%d %s %s: %s=%s is non-deterministic by design\n", op->name, var, dname,
		       ms->name, modes_info(nd)->env, modes_value_name(nd, ms->m.v[nd]));
		return 0;
	}
	int verdict = 0, e = hcase_make(op, params, d, &ms->m, fill, seed, &h);
	unsigned char *first[MAXT] = {0};
	if (!e) {
		for (int i = 0; i < op->impl->n_out; i++)
			if (!guards_ok(h.obuf[i], h.obytes[i])) {
				verdict = 1;
				snprintf(msg, sizeof msg, "the C twin wrote outside output %s", op->impl->out[i].name);
			}
	}
	if (!e && !verdict)
		e = dcase_make(op, &h, &g);
	if (!e && !verdict) {
		e = check_launches(c, op, fwd, params, &ms->m, ms->base, &h, &g, &verdict, msg, sizeof msg, first);
		dcase_free(op, &g);
	}
	char note[420] = "";
	if (!e && verdict == 0 && h.rc == 0 && !c->o->sanitize) {
		int bad = 0;
		e = check_invariance(c, op, fwd, params, d, &ms->m, fill, seed, first, &bad, msg, sizeof msg);
		if (bad && not_invariant_by_design(op, &ms->m)) { /* reported, not asserted */
			snprintf(note, sizeof note, " (INFO: %s; %s)", msg,
				 ms->m.v[MODE_RMSNORM_REDUCE] == ALIGN_RMSNORM_REDUCE_TORCH
					 ? "ATen's row order follows the row count"
					 : "cuBLAS promises no batch invariance");
			msg[0] = '\0';
			bad = 0;
		}
		verdict = bad;
	}
	for (int i = 0; i < MAXT; i++)
		free(first[i]);
	hcase_free(op, &h);
	if (e) {
		c->t->errors++;
		return e;
	}
	c->t->cases++;
	snprintf(line, sizeof line, "%s %s v%d %s %s %s seed=0x%" PRIx64,
		 verdict == 0	? "PASS"
		 : verdict == 4 ? "UNSUPPORTED"
				: "FAIL",
		 op->name, var, dname, ms->name, fill_name[fill], seed);
	if (verdict == 0) {
		c->t->pass++;
		c->t->gpu_only += h.gpu_only;
		printf("%s%s%s%s\n", h.gpu_only ? "PASS-GPU" : "", h.gpu_only ? line + 4 : line,
		       h.rc	    ? " (both twins refuse the input)"
		       : note[0]    ? " (GPU-only modes: deterministic, launch invariant)"
		       : h.gpu_only ? " (GPU-only modes: deterministic, launch and batch invariant)"
				    : "",
		       note);
	} else if (verdict == 4) {
		c->t->unsupported++;
		note_unsupported(c->t, op->name, ms->name);
		printf("%s: %s\n", line, msg);
	} else {
		c->t->fail++;
		printf("%s: %s\n", line, msg);
	}
	fflush(stdout);
	return 0;
}

/* dims variants: the op's defaults; T=37 with D and F made ragged; T=1 */
static int build_dims(const struct align_op *op, struct align_dims *dv, char names[][96], int quick, int sanitize)
{
	int n = 0;
	if (ops_dims_default(op, &dv[n]))
		return 0;
	snprintf(names[n++], 96, "%s", op->impl->dims);
	/* --sanitize: a reduction dim D over 1024 (router, matmul, rmsnorm, allreduce: 4096) runs as 256, which
	 * keeps every path the kernels choose by D (D % 4, D % 8 vector loads, whole K tiles; D + 3 below gives
	 * the ragged ones) at 1/16 of the instrumented loads (router's 4096-wide GEMM took > 2000 s under memcheck) */
	if (sanitize && dv[0].v[ALIGN_DIM_D] > 1024) {
		dv[0].v[ALIGN_DIM_D] = 256;
		snprintf(names[0], 96, "%s with D=256", op->impl->dims);
	}
	dv[n] = dv[0];
	dv[n].v[ALIGN_DIM_T] = 37;
	if (dv[n].v[ALIGN_DIM_D])
		dv[n].v[ALIGN_DIM_D] += 3;
	if (dv[n].v[ALIGN_DIM_F])
		dv[n].v[ALIGN_DIM_F] += 3;
	snprintf(names[n++], 96, "T=37,D%+d,F%+d", dv[1].v[ALIGN_DIM_D] ? 3 : 0, dv[1].v[ALIGN_DIM_F] ? 3 : 0);
	if (!quick) {
		dv[n] = dv[0];
		dv[n].v[ALIGN_DIM_T] = 1;
		snprintf(names[n++], 96, "T=1");
	}
	return n;
}

static int check_op(struct ctx *c, const struct align_op *op)
{
	align_fwd_cuda_fn fwd = ops_cuda_fwd(op);
	if (!fwd) {
		printf("NO-TWIN %s: no CUDA twin\n", op->name);
		size_t n = strlen(c->t->missing);
		snprintf(c->t->missing + n, sizeof c->t->missing - n, "%s%s", n ? ", " : "", op->name);
		return 0;
	}
	static struct modeset ms[MAX_MODESETS];
	int nms = build_modesets(op, ms);
	struct align_dims dv[3];
	char dn[3][96];
	int nd = build_dims(op, dv, dn, c->o->quick, c->o->sanitize);
	void *params = calloc(1, op->impl->params_size ? op->impl->params_size : 1);
	if (!params || nd == 0) {
		free(params);
		fprintf(stderr, "error: %s: no params or dims\n", op->name);
		return 2;
	}
	int e = 0;
	for (int var = 0; !e && op->impl->params_variant(params, &dv[0], var); var++)
		for (int di = 0; !e && di < nd && (c->o->variant < 0 || c->o->variant == var); di++) {
			op->impl->params_variant(params, &dv[di], var);
			int nseeds = di == 0 && !c->o->quick ? 2 : 1;
			for (int mi = 0; !e && mi < nms; mi++)
				for (int fill = 0; !e && fill < N_FILLS && mi % c->o->parts == c->o->part; fill++)
					if (c->o->fill < 0 || c->o->fill == fill)
						for (int s = 0; !e && s < nseeds; s++)
							e = run_case(c, op, fwd, params, var, &dv[di], dn[di], &ms[mi],
								     fill,
								     c->o->seed + (uint64_t)s * 0x9e3779b97f4a7c15ull);
		}
	free(params);
	return e;
}

/* The checks of the selected ops in this process. Prints the summary (or, for a worker, one "@@tally"
 * line the parent adds up); returns the exit status. */
static int run_ops(const struct opts *o, int worker)
{
	if (gpu_none())
		return 77;
	struct align_err err = {0, "", ""};
	struct align_dev dev;
	if (gpu_dev_open(&dev, &err))
		return 2;
	static struct tally t;
	struct ctx c = {o, &t, &dev};
	int rc = 0;
	for (int i = 0; i < ALIGN_OP_COUNT && !rc; i++) {
		const struct align_op *op = ops_at(i);
		if (!o->only || !strcmp(o->only, op->name))
			rc = check_op(&c, op);
	}
	if (worker) {
		printf("@@tally %ld %ld %ld %ld %ld %ld %d %d|%s|%s|%s\n", t.cases, t.launches, t.pass, t.gpu_only,
		       t.fail, t.unsupported, t.errors, rc, dev.name, t.unsupported_list, t.missing);
	} else {
		printf("ops-cuda on %s: %ld cases (%ld launches): %ld pass (%ld of them GPU-only modes, checked for "
		       "determinism and invariance), %ld fail, %ld not supported on the GPU%s (seed 0x%" PRIx64 "%s)\n",
		       dev.name, t.cases, t.launches, t.pass, t.gpu_only, t.fail, t.unsupported,
		       rc ? ", stopped by an error" : "", o->seed,
		       o->sanitize ? ", sanitize"
		       : o->quick  ? ", quick"
				   : "");
		if (t.unsupported)
			printf("not supported on the GPU (status 4): %s\n", t.unsupported_list);
		if (t.missing[0])
			printf("no CUDA twin: %s\n", t.missing);
	}
	fflush(stdout);
	align_dev_close(&dev);
	if (rc || t.errors)
		return 2;
	return t.fail ? 1 : 0;
}

/* --jobs N: one worker process per op (forked before any CUDA call, so each has its own context), at
 * most N at a time; their outputs are printed in registry order and their tallies added up. */
static int run_parallel(const struct opts *o, int jobs)
{
	FILE *logs[ALIGN_OP_COUNT];
	pid_t pids[ALIGN_OP_COUNT];
	int status[ALIGN_OP_COUNT], running = 0;
	for (int i = 0; i < ALIGN_OP_COUNT; i++) {
		if (running == jobs) { /* wait for one worker */
			int st;
			pid_t w = wait(&st);
			for (int k = 0; k < i; k++)
				if (pids[k] == w)
					status[k] = st;
			running--;
		}
		logs[i] = tmpfile();
		if (!logs[i]) {
			perror("error: tmpfile");
			return 2;
		}
		fflush(stdout);
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("error: fork");
			return 2;
		}
		if (pids[i] == 0) {
			struct opts mine = *o;
			mine.only = ops_at(i)->name;
			if (dup2(fileno(logs[i]), 1) < 0)
				_exit(2);
			_exit(run_ops(&mine, 1));
		}
		status[i] = -1;
		running++;
	}
	while (running > 0) {
		int st;
		pid_t w = wait(&st);
		if (w < 0)
			break;
		for (int k = 0; k < ALIGN_OP_COUNT; k++)
			if (pids[k] == w)
				status[k] = st;
		running--;
	}
	struct tally t;
	memset(&t, 0, sizeof t);
	char dev[256] = "?";
	int rc = 0, skips = 0;
	for (int i = 0; i < ALIGN_OP_COUNT; i++) {
		int code = WIFEXITED(status[i]) ? WEXITSTATUS(status[i]) : 2;
		char line[8192];
		rewind(logs[i]);
		int tallied = 0;
		while (fgets(line, sizeof line, logs[i])) {
			if (strncmp(line, "@@tally ", 8)) {
				fputs(line, stdout);
				continue;
			}
			long v[6];
			int errs, wrc;
			char *bar = strchr(line, '|');
			if (!bar || sscanf(line + 8, "%ld %ld %ld %ld %ld %ld %d %d", &v[0], &v[1], &v[2], &v[3], &v[4],
					   &v[5], &errs, &wrc) != 8)
				continue;
			tallied = 1;
			t.cases += v[0], t.launches += v[1], t.pass += v[2], t.gpu_only += v[3], t.fail += v[4];
			t.unsupported += v[5], t.errors += errs;
			char *name = bar + 1, *uns = strchr(name, '|'), *miss = uns ? strchr(uns + 1, '|') : NULL;
			if (!uns || !miss)
				continue;
			*uns++ = '\0';
			*miss++ = '\0';
			miss[strcspn(miss, "\n")] = '\0';
			snprintf(dev, sizeof dev, "%s", name);
			size_t n = strlen(t.unsupported_list);
			if (*uns)
				snprintf(t.unsupported_list + n, sizeof t.unsupported_list - n, "%s%s", n ? "; " : "",
					 uns);
			n = strlen(t.missing);
			if (*miss)
				snprintf(t.missing + n, sizeof t.missing - n, "%s%s", n ? ", " : "", miss);
		}
		fclose(logs[i]);
		if (code == 77)
			skips++;
		else if (code == 2 || !tallied)
			rc = 2;
	}
	if (skips == ALIGN_OP_COUNT) {
		printf("skip: no CUDA device\n");
		return 77;
	}
	printf("ops-cuda on %s: %ld cases (%ld launches): %ld pass (%ld of them GPU-only modes, checked for "
	       "determinism and invariance), %ld fail, %ld not supported on the GPU%s (seed 0x%" PRIx64
	       "%s, %d worker processes)\n",
	       dev, t.cases, t.launches, t.pass, t.gpu_only, t.fail, t.unsupported,
	       rc ? ", a worker stopped on an error" : "", o->seed,
	       o->sanitize ? ", sanitize"
	       : o->quick  ? ", quick"
			   : "",
	       jobs);
	if (t.unsupported)
		printf("not supported on the GPU (status 4): %s\n", t.unsupported_list);
	if (t.missing[0])
		printf("no CUDA twin: %s\n", t.missing);
	if (rc || t.errors)
		return 2;
	return t.fail ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct opts o = {NULL, 0, 0, 0xa11a5eedull, -1, 0, 1, -1, 0};
	o.times = getenv("ALIGN_TEST_TIMES") && !strcmp(getenv("ALIGN_TEST_TIMES"), "1");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	const long nops = ALIGN_OP_COUNT;
	int jobs = cpus > 1 ? (int)(cpus < nops ? cpus : nops) : 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--op") && i + 1 < argc)
			o.only = argv[++i];
		else if (!strcmp(argv[i], "--quick"))
			o.quick = 1;
		else if (!strcmp(argv[i], "--fill") && i + 1 < argc && atoi(argv[i + 1]) >= 0 &&
			 atoi(argv[i + 1]) < N_FILLS)
			o.fill = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--sanitize"))
			o.quick = o.sanitize = 1;
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			o.seed = strtoull(argv[++i], NULL, 16);
		else if (!strcmp(argv[i], "--jobs") && i + 1 < argc && atoi(argv[i + 1]) >= 1)
			jobs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--variant") && i + 1 < argc && atoi(argv[i + 1]) >= 0)
			o.variant = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--part") && i + 1 < argc &&
			 sscanf(argv[i + 1], "%d/%d", &o.part, &o.parts) == 2 && o.parts >= 1 && o.part >= 0 &&
			 o.part < o.parts)
			i++;
		else {
			fprintf(stderr,
				"usage: %s [--op NAME] [--variant K] [--part I/N] [--quick | --sanitize] [--fill K] "
				"[--seed HEX] [--jobs N]\n",
				argv[0]);
			return 2;
		}
	}
	if (o.only && !ops_find(o.only)) {
		fprintf(stderr, "error: unknown op '%s'\n", o.only);
		return 2;
	}
	if (o.only || jobs == 1)
		return run_ops(&o, 0);
	return run_parallel(&o, jobs);
}
