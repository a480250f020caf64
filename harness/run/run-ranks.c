/* run-ranks: the collectives on several GPUs, one process per rank (README "Collectives").
 *
 *   align run OP --ranks N [options]        launch: N processes on this host, rank r on CUDA device r
 *   align run OP --nccl-id FILE [options]   one rank: RANK and WORLD_SIZE (or OMPI_COMM_WORLD_RANK and
 *                                           OMPI_COMM_WORLD_SIZE) in the environment, the GPU LOCAL_RANK
 *                                           (or OMPI_COMM_WORLD_LOCAL_RANK, else RANK): what mpirun runs
 *
 * OP is allreduce, reduce_scatter or all_gather with its single-process layout (coll.h): N = the ranks,
 * rank r's contribution is row r of x. Inputs: row r of the op's seeded input x[N,cols] (the same rows
 * `align run OP` without --ranks draws), or --inputs F: F holds x[N,cols] and rank r reads row r, or F
 * contains "{rank}" and rank r reads x[1,cols] from F with its rank number in place of "{rank}".
 * Outputs: rank r's result y[1,out_cols] (row r of the single-process y). --trace F / --outputs F: one
 * file per rank, F with "{rank}" replaced, else with ".rank<r>" before its extension (a.atf ->
 * a.rank0.atf). Each rank's ATF trace has rank = r, world_size = N, the records x (its contribution) and
 * y (its result), nccl_version, nccl_library, nccl_env (every NCCL_* variable) and nccl_set_by_align.
 * ALIGN_COLL_IMPL: fixed (coll.h's rank order; the C twin's bits) or nccl; the CPU models are refused.
 * NCCL_NVLS_ENABLE=0 is set in every rank's environment unless the user set it (NVLink multicast is not
 * deterministic and can take shared GPUs out of service), and recorded as set by align.
 *
 * The launcher touches neither CUDA nor NCCL: it re-executes this binary (/proc/self/exe) once per rank
 * with the same options and --nccl-id DIR/nccl-id (a private temporary directory), RANK, WORLD_SIZE and
 * LOCAL_RANK; rank 0 creates NCCL's unique id there and the others read it, exactly as under mpirun with a
 * shared file. Each rank's stderr passes through the launcher; when a rank fails, the launcher stops the
 * others (SIGTERM, then SIGKILL after 5 s) and fails with that rank's message and class (exit 2 or 3). */
#include "align-config.h"
#include "cmd.h"
#include "coll.h"
#include "ctx.h"
#include "err.h"
#include "ops.h"
#include "run-trace.h"
#include "run.h"
#include "safetensors.h"
#if ALIGN_HAVE_NCCL
#include "run-nccl.h"
#endif

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RANKS_ID_WAIT_S 120.0 /* how long ranks 1..N-1 wait for rank 0's id file */
#define RANKS_MAX_STEPS 64    /* --outputs keeps every step's y */

/* What a rank (and the launcher) checks before anything runs: the op is a collective, the modes run on
 * ranks, N (from --shape) is the world size. */
static int ranks_check(struct align_ctx *ctx, const struct run_opts *o, int nranks, const struct align_op **op,
		       struct align_dims *d)
{
	struct align_err *e = &ctx->err;
	*op = ops_find(o->op);
	if (!*op || !ops_op_reads_mode(*op, MODE_COLL_DTYPE))
		return fail_input(e,
				  "--ranks/--nccl-id: '%s' is not a collective (allreduce, reduce_scatter, all_gather)",
				  o->op);
	if (o->variant)
		return fail_input(e, "--variant: the parameter variants are the NCCL model's (CPU); ranks run NCCL, "
				     "which reads its own NCCL_* variables");
	if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda"))
		return fail_input(e, "--device '%s': not a device (cpu or cuda)", o->device);
	ALIGN_TRY(e, ctx_resolve_modes(ctx, &ctx->modes, o->profile, 1, o->kv, o->n_kv));
	int impl = ctx->modes.v[MODE_COLL_IMPL];
	if (ops_op_reads_mode(*op, MODE_COLL_IMPL) && impl != ALIGN_COLL_IMPL_FIXED && impl != ALIGN_COLL_IMPL_NCCL)
		return fail_input(e,
				  "ALIGN_COLL_IMPL=%s: the NCCL model runs on the CPU (align run %s without --ranks); "
				  "ranks run fixed or nccl",
				  modes_value_name(MODE_COLL_IMPL, impl), o->op);
	struct align_dims given = {0};
	ALIGN_TRY(e, run_resolve_dims(e, *op, o->shape, 0, d));
	if (o->shape && ops_dims_parse(o->shape, &given, NULL, 0) == 0 && given.v[ALIGN_DIM_N] &&
	    given.v[ALIGN_DIM_N] != nranks)
		return fail_input(e, "--shape N=%lld: N is the number of ranks, %d here (leave N out)",
				  (long long)given.v[ALIGN_DIM_N], nranks);
	d->v[ALIGN_DIM_N] = nranks;
	return ALIGN_OK;
}

/* ---- the launcher ---- */

struct rank_proc {
	pid_t pid;	 /* 0 once reaped */
	int err_fd;	 /* read end of its stderr, -1 at EOF */
	char line[4096]; /* the partial line being forwarded */
	size_t len;	 /* bytes in line */
	char msg[1024];	 /* its last "error: " line, without the prefix */
	int status;	 /* waitpid status once reaped */
};

/* Forward complete lines of a rank's stderr to ours, keeping "error: " lines (the launcher's own error
 * repeats the first failing rank's) */
static void forward_line(struct rank_proc *p, const char *s, size_t n)
{
	if (n >= 7 && !strncmp(s, "error: ", 7)) {
		size_t k = n - 7 < sizeof p->msg - 1 ? n - 7 : sizeof p->msg - 1;
		memcpy(p->msg, s + 7, k);
		p->msg[k] = 0;
		if (k && p->msg[k - 1] == '\n')
			p->msg[k - 1] = 0;
		return;
	}
	fwrite(s, 1, n, stderr);
}

static void drain(struct rank_proc *p)
{
	char buf[4096];
	ssize_t got = read(p->err_fd, buf, sizeof buf);
	if (got <= 0) {
		if (p->len)
			forward_line(p, p->line, p->len);
		p->len = 0;
		close(p->err_fd);
		p->err_fd = -1;
		return;
	}
	for (ssize_t i = 0; i < got; i++) {
		p->line[p->len++] = buf[i];
		if (buf[i] == '\n' || p->len == sizeof p->line) {
			forward_line(p, p->line, p->len);
			p->len = 0;
		}
	}
}

/* The options of the run again, for a rank: op, every option given, --nccl-id id */
static int rank_argv(const struct run_opts *o, const char *id, char **argv, char seed[32], char steps[32])
{
	int k = 0;
	argv[k++] = "align";
	argv[k++] = "run";
	argv[k++] = (char *)o->op;
	for (int i = 0; i < o->n_kv; i++)
		argv[k++] = "--mode", argv[k++] = (char *)o->kv[i];
	const char *pairs[][2] = {{"--profile", o->profile}, {"--shape", o->shape}, {"--inputs", o->inputs},
				  {"--outputs", o->outputs}, {"--trace", o->trace}, {"--nccl-id", id}};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
		if (pairs[i][1])
			argv[k++] = (char *)pairs[i][0], argv[k++] = (char *)pairs[i][1];
	snprintf(seed, 32, "%llu", o->seed);
	snprintf(steps, 32, "%lld", o->steps);
	argv[k++] = "--seed", argv[k++] = seed;
	argv[k++] = "--steps", argv[k++] = steps;
	argv[k] = NULL;
	return k;
}

static pid_t spawn_rank(int rank, int nranks, char **argv, int *err_fd)
{
	int fds[2];
	if (pipe(fds))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		char r[16], n[16];
		snprintf(r, sizeof r, "%d", rank);
		snprintf(n, sizeof n, "%d", nranks);
		setenv("RANK", r, 1);
		setenv("LOCAL_RANK", r, 1);
		setenv("WORLD_SIZE", n, 1);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		execv("/proc/self/exe", argv);
		fprintf(stderr, "error: rank %d: cannot execute /proc/self/exe: %s\n", rank, strerror(errno));
		_exit(ALIGN_ERR_INTERNAL);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -1;
	}
	*err_fd = fds[0];
	return pid;
}

/* Stop the ranks still running: SIGTERM, then SIGKILL to those alive after 5 s; reap them all. */
static void stop_ranks(struct rank_proc *p, int n)
{
	for (int r = 0; r < n; r++)
		if (p[r].pid > 0)
			kill(p[r].pid, SIGTERM);
	struct timespec tick = {0, 50 * 1000 * 1000};
	for (int waited = 0; waited <= 100; waited++) {
		int alive = 0;
		for (int r = 0; r < n; r++)
			if (p[r].pid > 0 && waitpid(p[r].pid, &p[r].status, WNOHANG) == p[r].pid)
				p[r].pid = 0;
			else if (p[r].pid > 0)
				alive = 1;
		if (!alive)
			return;
		if (waited == 100)
			for (int r = 0; r < n; r++)
				if (p[r].pid > 0)
					kill(p[r].pid, SIGKILL);
		nanosleep(&tick, NULL);
	}
	for (int r = 0; r < n; r++)
		if (p[r].pid > 0 && waitpid(p[r].pid, &p[r].status, 0) == p[r].pid)
			p[r].pid = 0;
}

/* Forward the ranks' stderr until every rank has exited or one has failed: the failing rank, or -1. */
static int watch_ranks(struct rank_proc *p, int n)
{
	for (;;) {
		struct pollfd fds[COLL_MAX_RANKS];
		int map[COLL_MAX_RANKS], k = 0, running = 0;
		for (int r = 0; r < n; r++) {
			if (p[r].err_fd >= 0) {
				fds[k].fd = p[r].err_fd, fds[k].events = POLLIN, fds[k].revents = 0;
				map[k++] = r;
			}
			if (p[r].pid > 0 && waitpid(p[r].pid, &p[r].status, WNOHANG) == p[r].pid)
				p[r].pid = 0;
			running += p[r].pid > 0;
		}
		for (int r = 0; r < n; r++)
			if (p[r].pid == 0 && p[r].err_fd < 0 &&
			    (!WIFEXITED(p[r].status) || WEXITSTATUS(p[r].status) != 0))
				return r;
		if (!running && !k)
			return -1;
		if (poll(fds, (nfds_t)k, 100) > 0)
			for (int i = 0; i < k; i++)
				if (fds[i].revents)
					drain(&p[map[i]]);
	}
}

static int ranks_launch(struct align_ctx *ctx, const struct run_opts *o)
{
	struct align_err *e = &ctx->err;
	int n = (int)o->ranks;
	/* NCCL_NVLS_ENABLE: each rank sets it (the launcher runs no NCCL), so each records it as set by align */
	const char *tmpdir = getenv("TMPDIR");
	char dirbuf[4096];
	snprintf(dirbuf, sizeof dirbuf, "%s/align-ranks-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	char *made = mkdtemp(dirbuf);
	if (!made)
		return fail_internal(e, "--ranks: cannot make a temporary directory in '%s': %s",
				     tmpdir && *tmpdir ? tmpdir : "/tmp", strerror(errno));
	char idpath[4200];
	snprintf(idpath, sizeof idpath, "%s/nccl-id", made);
	char *argv[2 * RUN_MAX_KV + 32], seed[32], steps[32];
	rank_argv(o, idpath, argv, seed, steps);
	struct rank_proc p[COLL_MAX_RANKS];
	memset(p, 0, sizeof p);
	int rc = ALIGN_OK;
	for (int r = 0; r < n; r++) {
		p[r].err_fd = -1;
		if ((p[r].pid = spawn_rank(r, n, argv, &p[r].err_fd)) < 0) {
			p[r].pid = 0;
			rc = fail_internal(e, "--ranks: cannot start rank %d: %s", r, strerror(errno));
			n = r;
			break;
		}
	}
	int bad = rc ? -1 : watch_ranks(p, n);
	if (rc || bad >= 0)
		stop_ranks(p, n);
	for (int r = 0; r < n; r++) /* what the stopped ranks still had to say */
		while (p[r].err_fd >= 0)
			drain(&p[r]);
	unlink(idpath);
	rmdir(made);
	if (rc)
		return rc;
	if (bad < 0) {
		fprintf(ctx->out, "%s: %d ranks, %lld step%s on GPUs 0-%d (ALIGN_COLL_IMPL=%s)%s%s\n", o->op, n,
			o->steps, o->steps == 1 ? "" : "s", n - 1,
			modes_value_name(MODE_COLL_IMPL, ctx->modes.v[MODE_COLL_IMPL]), o->trace ? ", traces " : "",
			o->trace ? o->trace : "");
		return ALIGN_OK;
	}
	int st = p[bad].status;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
	char how[64];
	if (WIFEXITED(st))
		snprintf(how, sizeof how, "exit %d", code);
	else
		snprintf(how, sizeof how, "killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return align_fail(e, code == ALIGN_ERR_INPUT ? ALIGN_ERR_INPUT : ALIGN_ERR_INTERNAL,
			  "rank %d of %d failed (%s): %s; the other ranks were stopped", bad, n, how,
			  p[bad].msg[0] ? p[bad].msg : "(no message)");
}

/* ---- one rank ---- */

/* RANK / WORLD_SIZE / LOCAL_RANK, or Open MPI's names */
static int env_rank(struct align_err *e, const char *name, const char *ompi, int min, int max, int dflt, int *v)
{
	const char *s = getenv(name), *used = name;
	if (!s || !*s)
		s = getenv(ompi), used = ompi;
	if (!s || !*s) {
		if (dflt >= 0) {
			*v = dflt;
			return ALIGN_OK;
		}
		return fail_input(e, "--nccl-id: %s (or %s) is not set: run the ranks with --ranks N or under mpirun",
				  name, ompi);
	}
	char *end;
	long x = strtol(s, &end, 10);
	if (*end || x < min || x > max)
		return fail_input(e, "%s='%s': expected an integer in [%d, %d]", used, s, min, max);
	*v = (int)x;
	return ALIGN_OK;
}

#if ALIGN_HAVE_NCCL
/* F with the rank in it: "{rank}" replaced, else ".rank<r>" before the extension of the last component */
static void rank_path(char *buf, size_t n, const char *path, int rank)
{
	const char *mark = strstr(path, "{rank}");
	if (mark) {
		snprintf(buf, n, "%.*s%d%s", (int)(mark - path), path, rank, mark + 6);
		return;
	}
	const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
	if (dot && dot > (slash ? slash + 1 : path))
		snprintf(buf, n, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
	else
		snprintf(buf, n, "%s.rank%d", path, rank);
}

/* One rank's state: its op, tensors (the whole x and y, of which it owns row rank) and NCCL. */
struct rank_run {
	struct align_ctx *ctx;
	const struct run_opts *o;
	const struct align_op *op;
	struct align_dims d;
	int rank, nranks;
	struct align_tensor x, y;   /* x[N,cols], y[N,out_cols] */
	struct align_tensor xr, yr; /* row rank of each: [1,cols], [1,out_cols] */
	struct st_file inputs;
	struct st_tensor saved[RANKS_MAX_STEPS];
	void *saved_data[RANKS_MAX_STEPS];
	int n_saved;
};

static struct align_tensor row_of(const struct align_tensor *t, int r)
{
	struct align_tensor v = *t;
	size_t row = (size_t)t->shape[1] * align_dtype_size(t->dtype);
	v.data = (char *)t->data + (size_t)r * row;
	v.shape[0] = 1;
	return v;
}

/* This step's contribution into rr->xr */
static int rank_input(struct rank_run *rr, int step)
{
	struct align_err *e = &rr->ctx->err;
	if (!rr->o->inputs)
		return ops_fill_input(rr->op, 0, &rr->x, rr->o->seed, step)
			       ? fail_internal(e, "cannot fill input '%s'", rr->x.name)
			       : ALIGN_OK;
	if (strstr(rr->o->inputs, "{rank}")) {
		char path[4200];
		rank_path(path, sizeof path, rr->o->inputs, rr->rank);
		return run_load_input(e, &rr->inputs, path, &rr->xr);
	}
	return run_load_input(e, &rr->inputs, rr->o->inputs, &rr->x);
}

static int rank_save(struct rank_run *rr, int step)
{
	if (rr->n_saved == RANKS_MAX_STEPS)
		return fail_input(&rr->ctx->err, "--outputs: at most %d steps", RANKS_MAX_STEPS);
	struct st_tensor *s = &rr->saved[rr->n_saved];
	if (rr->o->steps > 1)
		snprintf(s->name, sizeof s->name, "step%d.y", step);
	else
		snprintf(s->name, sizeof s->name, "y");
	snprintf(s->dtype, sizeof s->dtype, "%s", run_trace_dtype(rr->yr.dtype));
	s->ndim = 2;
	s->shape[0] = 1;
	s->shape[1] = rr->yr.shape[1];
	s->bytes = (size_t)rr->yr.shape[1] * align_dtype_size(rr->yr.dtype);
	s->data = rr->saved_data[rr->n_saved] = malloc(s->bytes ? s->bytes : 1);
	if (!s->data)
		return fail_internal(&rr->ctx->err, "out of memory");
	memcpy(s->data, rr->yr.data, s->bytes);
	rr->n_saved++;
	return ALIGN_OK;
}

static int rank_steps(struct rank_run *rr, struct run_nccl *nc, struct align_dev *dev, struct run_trace *tr)
{
	struct align_err *e = &rr->ctx->err;
	struct coll_cfg c;
	struct align_tensor in[1] = {rr->x}, out[1] = {rr->y};
	const char *name = rr->op->name;
	int kind = !strcmp(name, "allreduce")	     ? COLL_ALLREDUCE
		   : !strcmp(name, "reduce_scatter") ? COLL_REDUCE_SCATTER
						     : COLL_ALL_GATHER;
	ALIGN_TRY(e, coll_cfg_init(&c, kind, NULL, &rr->ctx->modes, in, 1, out, 1, ALIGN_DEVICE_CUDA, e));
	for (int step = 1; step <= rr->o->steps; step++) {
		ALIGN_TRY(e, rank_input(rr, step));
		if (tr->f)
			ALIGN_TRY(e, run_trace_tensor(tr, rr->op->name, step, "input", &rr->xr));
		ALIGN_TRY(e, run_nccl_coll(nc, dev, &c, rr->xr.data, rr->yr.data));
		if (tr->f)
			ALIGN_TRY(e, run_trace_tensor(tr, rr->op->name, step, "fwd", &rr->yr));
		if (rr->o->outputs)
			ALIGN_TRY(e, rank_save(rr, step));
	}
	return ALIGN_OK;
}

/* Tensors, NCCL, the trace, every step, the outputs file. */
static int rank_body(struct rank_run *rr, struct run_nccl *nc, struct align_dev *dev, struct run_trace *tr,
		     const char *set_nvls)
{
	struct align_ctx *ctx = rr->ctx;
	const struct run_opts *o = rr->o;
	struct align_err *e = &ctx->err;
	if (ops_tensor_alloc(rr->op, 0, 0, &rr->d, &ctx->modes, &rr->x) ||
	    ops_tensor_alloc(rr->op, 1, 0, &rr->d, &ctx->modes, &rr->y))
		return fail_input(e, "op '%s': bad dims", rr->op->name);
	rr->xr = row_of(&rr->x, rr->rank);
	rr->yr = row_of(&rr->y, rr->rank);
	if (o->inputs) {
		char path[4200];
		rank_path(path, sizeof path, o->inputs, rr->rank);
		ALIGN_TRY(e, safetensors_read_err(strstr(o->inputs, "{rank}") ? path : o->inputs, &rr->inputs, e));
	}
	ALIGN_TRY(e, run_nccl_load(nc, e));
	int local = rr->rank;
	ALIGN_TRY(e, env_rank(e, "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", 0, 1 << 16, rr->rank, &local));
	ALIGN_TRY(e, run_nccl_init(nc, dev, local, rr->rank, rr->nranks, o->nccl_id, RANKS_ID_WAIT_S));
	char trace[4200];
	const char *t = o->trace ? o->trace : getenv("ALIGN_TRACE");
	if (t && *t) {
		rank_path(trace, sizeof trace, t, rr->rank);
		struct run_trace_head h = {.op = o->op,
					   .impl = "cuda-ranks",
					   .m = &ctx->modes,
					   .d = &rr->d,
					   .seed = o->seed,
					   .steps = (int)o->steps,
					   .dev = dev,
					   .rank = rr->rank,
					   .world_size = rr->nranks,
					   .nccl_version = nc->version,
					   .nccl_library = nc->path,
					   .nccl_set = set_nvls};
		ALIGN_TRY(e, run_trace_open(tr, trace, &h, e));
	}
	int rc = rank_steps(rr, nc, dev, tr);
	int trc = run_trace_close(tr, rc == ALIGN_OK);
	if (!rc)
		rc = trc;
	if (!rc && o->outputs) {
		char path[4200];
		rank_path(path, sizeof path, o->outputs, rr->rank);
		rc = safetensors_write_err(path, rr->saved, (size_t)rr->n_saved, NULL, e);
	}
	if (!rc)
		fprintf(ctx->out, "%s: rank %d of %d, %lld step%s on %s (device %d, NCCL %d.%d.%d)%s%s\n", o->op,
			rr->rank, rr->nranks, o->steps, o->steps == 1 ? "" : "s", dev->name, local, nc->version / 10000,
			nc->version / 100 % 100, nc->version % 100, t && *t ? ", trace " : "", t && *t ? trace : "");
	return rc;
}
#endif

static int ranks_worker(struct align_ctx *ctx, const struct run_opts *o)
{
	struct align_err *e = &ctx->err;
	int nranks, rank;
	ALIGN_TRY(e, env_rank(e, "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", 1, COLL_MAX_RANKS, -1, &nranks));
	ALIGN_TRY(e, env_rank(e, "RANK", "OMPI_COMM_WORLD_RANK", 0, nranks - 1, -1, &rank));
	const struct align_op *op;
	struct align_dims d;
	ALIGN_TRY(e, ranks_check(ctx, o, nranks, &op, &d));
#if ALIGN_HAVE_NCCL
	const char *set_nvls = NULL;
	if (!getenv("NCCL_NVLS_ENABLE"))
		setenv("NCCL_NVLS_ENABLE", "0", 1), set_nvls = "NCCL_NVLS_ENABLE";
	struct rank_run rr = {.ctx = ctx, .o = o, .op = op, .d = d, .rank = rank, .nranks = nranks};
	struct run_nccl nc;
	struct align_dev dev;
	struct run_trace tr;
	memset(&nc, 0, sizeof nc);
	memset(&dev, 0, sizeof dev);
	memset(&tr, 0, sizeof tr);
	int rc = rank_body(&rr, &nc, &dev, &tr, set_nvls);
	if (tr.f)
		run_trace_close(&tr, 0);
	run_nccl_close(&nc, &dev);
	ops_tensor_free(&rr.x);
	ops_tensor_free(&rr.y);
	safetensors_free(&rr.inputs);
	for (int i = 0; i < rr.n_saved; i++)
		free(rr.saved_data[i]);
	if (rc && strncmp(e->msg, "rank ", 5)) { /* every rank's message names its rank */
		char m[sizeof e->msg];
		snprintf(m, sizeof m, "rank %d: %.2000s", rank, e->msg);
		snprintf(e->msg, sizeof e->msg, "%s", m);
	}
	return rc;
#else
	(void)rank;
	return fail_input(e, "--nccl-id: this build has no CUDA and NCCL headers (the ranks run NCCL on GPUs)");
#endif
}

int run_ranks(struct align_ctx *ctx, struct run_opts *o)
{
	if (o->ranks && o->nccl_id)
		return fail_input(&ctx->err, "--ranks launches the ranks, --nccl-id is one rank: give one of them");
	if (o->nccl_id)
		return ranks_worker(ctx, o);
	const struct align_op *op;
	struct align_dims d;
	ALIGN_TRY(&ctx->err, ranks_check(ctx, o, (int)o->ranks, &op, &d));
	if (!ALIGN_HAVE_NCCL)
		return fail_input(&ctx->err,
				  "--ranks: this build has no CUDA and NCCL headers (the ranks run NCCL on GPUs)");
	return ranks_launch(ctx, o);
}
