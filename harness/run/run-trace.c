/* run-trace: ATF writer for `align run` (see run-trace.h). */
#include "run-trace.h"

#include "digest.h"
#include "err.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *run_trace_dtype(int dtype)
{
	return dtype == ALIGN_DT_BF16 ? "bf16" : dtype == ALIGN_DT_I32 ? "int32" : "fp32";
}

int run_trace_open(struct run_trace *t, const char *path, const char *op, const char *device, const char *impl,
                   const struct align_modes *m, const struct align_dims *d, unsigned long long seed, int steps,
                   int variant)
{
	memset(t, 0, sizeof *t);
	snprintf(t->path, sizeof t->path, "%s", path);
	snprintf(t->tmp, sizeof t->tmp, "%s.tmp.%ld", path, (long)getpid());
	t->f = fopen(t->tmp, "w");
	if (!t->f)
		return err_input("cannot write trace '%s': %s", t->tmp, strerror(errno));
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
		if (d->v[k])
			json_object_set_new(dims, (char[]){ALIGN_DIM_LETTERS[k], 0}, json_integer(d->v[k]));
	char run[512];
	snprintf(run, sizeof run, "%s:%s", op, m->profile[0] ? m->profile : "default");
	json_t *h = json_pack("{s:i, s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:s?, s:o, s:o, s:o, s:I, s:i, s:s, s:o, s:i}",
	                      "align_trace", 1, "run", run, "framework", "align", "rank", 0, "world_size", 1, "op", op,
	                      "device", device, "implementation", impl, "profile", m->profile[0] ? m->profile : NULL,
	                      "modes", modes, "env", env, "dims", dims, "seed", (json_int_t)seed, "steps", steps,
	                      "numerics", numerics, "gpu_only", gpu, "variant", variant);
	int rc = json_dumpf(h, t->f, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(h);
	fputc('\n', t->f);
	return rc ? err_internal("cannot write trace header") : ALIGN_OK;
}

int run_trace_tensor(struct run_trace *t, const char *op, int step, const char *phase, const struct align_tensor *x)
{
	size_t bytes = (size_t)align_tensor_numel(x) * align_dtype_size(x->dtype);
	char hex[17], name[256];
	digest_hex(digest_xxh3t64(x->data, bytes), hex);
	snprintf(name, sizeof name, "%s.%s", op, x->name);
	fprintf(t->f, "{\"rank\":0,\"step\":%d,\"micro\":0,\"seq\":%lld,\"name\":\"%s\",\"phase\":\"%s\",\"dtype\":\"%s\","
	              "\"shape\":[", step, t->seq++, name, phase, run_trace_dtype(x->dtype));
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
	return ferror(t->f) ? err_input("cannot write trace '%s'", t->tmp) : ALIGN_OK;
}

int run_trace_close(struct run_trace *t, int ok)
{
	if (!t->f)
		return ALIGN_OK;
	int bad = fclose(t->f) != 0;
	t->f = NULL;
	if (!ok || bad || rename(t->tmp, t->path) != 0) {
		unlink(t->tmp);
		return ok ? err_input("cannot write trace '%s': %s", t->path, strerror(errno)) : ALIGN_OK;
	}
	return ALIGN_OK;
}
