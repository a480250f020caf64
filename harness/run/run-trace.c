/* run-trace: ATF writer for `align run` (see run-trace.h). */
#include "run-trace.h"

#include "run-commit.h"

#include "digest.h"
#include "err.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *run_trace_dtype(int dtype)
{
	return dtype == ALIGN_DT_BF16  ? "bf16"
	       : dtype == ALIGN_DT_I32 ? "int32"
	       : dtype == ALIGN_DT_F16 ? "fp16"
				       : "fp32";
}

/* Provenance: the build's commit and the device with its driver, runtime and vendor-library versions
 * (the versions only when non-zero: a CPU run has none, cuBLAS versions only when a vendor GEMM ran). */
static void put_provenance(json_t *h, const struct align_dev *dev)
{
	json_object_set_new(h, "align_commit", json_string(ALIGN_COMMIT));
	json_object_set_new(h, "device", json_string(dev ? dev->name : "cpu"));
	if (!dev)
		return;
	json_object_set_new(h, "driver_version", json_integer(dev->driver_version));
	json_object_set_new(h, "cuda_runtime_version", json_integer(dev->runtime_version));
	if (dev->cublas_version)
		json_object_set_new(h, "cublas_version", json_integer(dev->cublas_version));
	if (dev->cublaslt_version)
		json_object_set_new(h, "cublaslt_version", json_integer((json_int_t)dev->cublaslt_version));
}

extern char **environ;

/* Every NCCL_* variable in force (the collectives' NCCL and its CPU model read them), as "nccl_env". */
static void put_nccl_env(json_t *h)
{
	json_t *env = json_object();
	for (char **v = environ; v && *v; v++) {
		const char *eq = strchr(*v, '=');
		if (strncmp(*v, "NCCL_", 5) || !eq)
			continue;
		char name[128];
		snprintf(name, sizeof name, "%.*s", (int)(eq - *v), *v);
		json_object_set_new(env, name, json_string(eq + 1));
	}
	json_object_set_new(h, "nccl_env", env);
}

int run_trace_open(struct run_trace *t, const char *path, const struct run_trace_head *hd, struct align_err *err)
{
	memset(t, 0, sizeof *t);
	t->err = err;
	snprintf(t->path, sizeof t->path, "%s", path);
	snprintf(t->tmp, sizeof t->tmp, "%s.tmp.%ld", path, (long)getpid());
	t->f = fopen(t->tmp, "w");
	if (!t->f)
		return fail_input(err, "cannot write trace '%s': %s", t->tmp, strerror(errno));
	const struct align_modes *m = hd->m;
	json_t *modes = json_object(), *env = json_object(), *dims = json_object(), *gpu = json_object();
	for (int id = 0; id < MODE_COUNT; id++) {
		const struct align_mode_info *in = modes_info(id);
		json_object_set_new(modes, in->id, json_string(modes_value_name(id, m->v[id])));
		if (m->src[id] == MODE_SRC_ENV)
			json_object_set_new(env, in->env, json_string(modes_value_name(id, m->v[id])));
		if (modes_value_gpu_only(id, m->v[id])) /* framework-mimic values with no CPU twin */
			json_object_set_new(gpu, in->env, json_string(modes_value_name(id, m->v[id])));
	}
	const char *numerics = json_object_size(gpu) ? "gpu-mimic" : "portable";
	for (int k = 0; k < ALIGN_DIM_COUNT; k++)
		if (hd->d->v[k])
			json_object_set_new(dims, (char[]){ALIGN_DIM_LETTERS[k], 0}, json_integer(hd->d->v[k]));
	char run[512];
	snprintf(run, sizeof run, "%s:%s", hd->op, m->profile[0] ? m->profile : "default");
	json_t *h = json_pack("{s:i, s:s, s:s, s:i, s:i, s:s, s:s, s:s?, s:o, s:o, s:o, s:I, s:i, s:s, s:o, s:i}",
			      "align_trace", 1, "run", run, "framework", "align", "rank", hd->rank, "world_size",
			      hd->world_size > 0 ? hd->world_size : 1, "op", hd->op, "implementation", hd->impl,
			      "profile", m->profile[0] ? m->profile : NULL, "modes", modes, "env", env, "dims", dims,
			      "seed", (json_int_t)hd->seed, "steps", hd->steps, "numerics", numerics, "gpu_only", gpu,
			      "variant", hd->variant);
	put_provenance(h, hd->dev);
	put_nccl_env(h);
	t->rank = hd->rank;
	if (hd->nccl_version)
		json_object_set_new(h, "nccl_version", json_integer(hd->nccl_version));
	if (hd->nccl_library)
		json_object_set_new(h, "nccl_library", json_string(hd->nccl_library));
	if (hd->nccl_set)
		json_object_set_new(h, "nccl_set_by_align", json_string(hd->nccl_set));
	int rc = json_dumpf(h, t->f, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(h);
	fputc('\n', t->f);
	return rc ? fail_internal(err, "cannot write trace header") : ALIGN_OK;
}

int run_trace_tensor(struct run_trace *t, const char *op, int step, const char *phase, const struct align_tensor *x)
{
	size_t bytes = (size_t)align_tensor_numel(x) * align_dtype_size(x->dtype);
	char hex[17], name[256];
	digest_hex(digest_xxh3t64(x->data, bytes), hex);
	snprintf(name, sizeof name, "%s.%s", op, x->name);
	fprintf(t->f,
		"{\"rank\":%d,\"step\":%d,\"micro\":0,\"seq\":%lld,\"name\":\"%s\",\"phase\":\"%s\",\"dtype\":\"%s\","
		"\"shape\":[",
		t->rank, step, t->seq++, name, phase, run_trace_dtype(x->dtype));
	for (int i = 0; i < x->ndim; i++)
		fprintf(t->f, "%s%lld", i ? "," : "", (long long)x->shape[i]);
	fprintf(t->f, "],\"digest\":\"%s\",\"digest_alg\":\"%s\",\"head\":[", hex, DIGEST_ALG);
	int64_t n = align_tensor_numel(x);
	for (int64_t i = 0; i < n && i < 4; i++) {
		if (x->dtype == ALIGN_DT_I32)
			fprintf(t->f, "%s%d", i ? "," : "", ((const int32_t *)x->data)[i]);
		else {
			float v = ops_ld(x, i);
			if (v != v || v - v != 0)
				fprintf(t->f, "%s\"%s\"", i ? "," : "", v != v ? "nan" : v > 0 ? "inf" : "-inf");
			else
				fprintf(t->f, "%s%.9g", i ? "," : "", v);
		}
	}
	fputs("]}\n", t->f);
	return ferror(t->f) ? fail_input(t->err, "cannot write trace '%s'", t->tmp) : ALIGN_OK;
}

int run_trace_close(struct run_trace *t, int ok)
{
	if (!t->f)
		return ALIGN_OK;
	int bad = fclose(t->f) != 0;
	t->f = NULL;
	if (!ok || bad || rename(t->tmp, t->path) != 0) {
		unlink(t->tmp);
		return ok ? fail_input(t->err, "cannot write trace '%s': %s", t->path, strerror(errno)) : ALIGN_OK;
	}
	return ALIGN_OK;
}
