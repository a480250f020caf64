/* safetensors: parser and atomic writer (format in safetensors.h). */
#include "safetensors.h"

#include "dtype.h"
#include "err.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
	const char *st;
	const char *align;
} dtype_map[] = {
	{"F64", "fp64"},	 {"F32", "fp32"},	  {"BF16", "bf16"}, {"F16", "fp16"},
	{"F8_E4M3", "fp8_e4m3"}, {"F8_E5M2", "fp8_e5m2"}, {"I64", "int64"}, {"I32", "int32"},
	{"I16", "int16"},	 {"I8", "int8"},	  {"U8", "uint8"},  {"BOOL", "bool"},
};

static const char *to_align(const char *st)
{
	for (size_t i = 0; i < sizeof dtype_map / sizeof dtype_map[0]; i++)
		if (!strcmp(dtype_map[i].st, st))
			return dtype_map[i].align;
	return NULL;
}

static const char *to_st(const char *al)
{
	for (size_t i = 0; i < sizeof dtype_map / sizeof dtype_map[0]; i++)
		if (!strcmp(dtype_map[i].align, al))
			return dtype_map[i].st;
	return NULL;
}

static int read_all(const char *path, unsigned char **buf, size_t *len, struct align_err *e)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail_input(e, "cannot open '%s': %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (*len = (size_t)ftell(f), fseek(f, 0, SEEK_SET))) {
		fclose(f);
		return fail_input(e, "cannot read '%s': %s", path, strerror(errno));
	}
	*buf = malloc(*len ? *len : 1);
	if (!*buf || fread(*buf, 1, *len, f) != *len) {
		fclose(f);
		free(*buf);
		return fail_input(e, "cannot read '%s': %s", path, strerror(errno));
	}
	fclose(f);
	return ALIGN_OK;
}

static int cmp_offset(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;
	return (char *)x->data < (char *)y->data ? -1 : (char *)x->data > (char *)y->data;
}

static int parse_entry(const char *path, const char *name, json_t *v, unsigned char *data, uint64_t dlen,
		       struct st_tensor *t, struct align_err *e)
{
	json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
	json_t *off = json_object_get(v, "data_offsets");
	if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(off) || json_array_size(off) != 2)
		return fail_input(e, "%s: tensor '%s': needs dtype, shape and data_offsets [begin, end]", path, name);
	const char *al = to_align(json_string_value(dt));
	if (!al)
		return fail_input(e, "%s: tensor '%s': unsupported dtype '%s'", path, name, json_string_value(dt));
	if (strlen(name) >= sizeof t->name)
		return fail_input(e, "%s: tensor name too long: '%.40s...'", path, name);
	snprintf(t->name, sizeof t->name, "%s", name);
	snprintf(t->dtype, sizeof t->dtype, "%s", al);
	if (json_array_size(shape) > ST_MAX_DIMS)
		return fail_input(e, "%s: tensor '%s': more than %d dimensions", path, name, ST_MAX_DIMS);
	t->ndim = (int)json_array_size(shape);
	uint64_t count = 1;
	for (int d = 0; d < t->ndim; d++) {
		json_t *s = json_array_get(shape, (size_t)d);
		if (!json_is_integer(s) || json_integer_value(s) < 0)
			return fail_input(e, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, d);
		t->shape[d] = json_integer_value(s);
		count *= (uint64_t)t->shape[d];
	}
	json_t *b = json_array_get(off, 0), *end = json_array_get(off, 1);
	if (!json_is_integer(b) || !json_is_integer(end) || json_integer_value(b) < 0 ||
	    json_integer_value(end) < json_integer_value(b) || (uint64_t)json_integer_value(end) > dlen)
		return fail_input(e, "%s: tensor '%s': data_offsets outside the %llu data bytes", path, name,
				  (unsigned long long)dlen);
	t->bytes = (size_t)(json_integer_value(end) - json_integer_value(b));
	if (t->bytes != count * dtype_size(al))
		return fail_input(e, "%s: tensor '%s': %zu bytes, but %s x shape needs %llu", path, name, t->bytes, al,
				  (unsigned long long)(count * dtype_size(al)));
	t->data = data + json_integer_value(b);
	return ALIGN_OK;
}

int safetensors_read_err(const char *path, struct st_file *out, struct align_err *e)
{
	memset(out, 0, sizeof *out);
	unsigned char *buf = NULL;
	size_t len = 0;
	int rc = read_all(path, &buf, &len, e);
	if (rc)
		return rc;
	uint64_t hlen = 0;
	for (int i = 0; i < 8 && (size_t)i < len; i++)
		hlen |= (uint64_t)buf[i] << (8 * i);
	if (len < 8 || hlen > len - 8 || hlen > (100u << 20)) {
		free(buf);
		return fail_input(e, "%s: not a safetensors file (header length %llu, file %zu bytes)", path,
				  (unsigned long long)hlen, len);
	}
	json_error_t je;
	json_t *h = json_loadb((const char *)buf + 8, hlen, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(h)) {
		json_decref(h);
		free(buf);
		return fail_input(e, "%s: safetensors header is not a JSON object: %s", path, je.text);
	}
	out->blob = buf;
	out->t = calloc(json_object_size(h) + 1, sizeof *out->t);
	unsigned char *data = buf + 8 + hlen;
	uint64_t dlen = len - 8 - hlen;
	const char *key;
	json_t *v;
	json_object_foreach(h, key, v)
	{
		if (!strcmp(key, "__metadata__")) {
			out->metadata = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
			continue;
		}
		if ((rc = parse_entry(path, key, v, data, dlen, &out->t[out->n], e)))
			break;
		out->n++;
	}
	json_decref(h);
	if (!rc) {
		if (out->n > 1) /* t is NULL in a file of no tensor: never NULL to qsort */
			qsort(out->t, out->n, sizeof *out->t, cmp_offset);
		for (size_t i = 1; i < out->n; i++)
			if ((char *)out->t[i - 1].data + out->t[i - 1].bytes > (char *)out->t[i].data) {
				rc = fail_input(e, "%s: tensors '%s' and '%s' overlap", path, out->t[i - 1].name,
						out->t[i].name);
				break;
			}
	}
	if (rc)
		safetensors_free(out);
	return rc;
}

const struct st_tensor *safetensors_find(const struct st_file *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

void safetensors_free(struct st_file *f)
{
	free(f->t);
	free(f->metadata);
	free(f->blob);
	memset(f, 0, sizeof *f);
}

int safetensors_write_err(const char *path, const struct st_tensor *t, size_t n, const char *metadata_json,
			  struct align_err *e)
{
	json_t *h = json_object();
	uint64_t off = 0;
	if (metadata_json) {
		json_error_t je;
		json_t *m = json_loads(metadata_json, 0, &je);
		if (!json_is_object(m)) {
			json_decref(m);
			json_decref(h);
			return fail_internal(e, "safetensors metadata is not a JSON object");
		}
		json_object_set_new(h, "__metadata__", m);
	}
	for (size_t i = 0; i < n; i++) {
		const char *st = to_st(t[i].dtype);
		if (!st) {
			json_decref(h);
			return fail_internal(e, "dtype '%s' has no safetensors name", t[i].dtype);
		}
		json_t *shape = json_array();
		for (int d = 0; d < t[i].ndim; d++)
			json_array_append_new(shape, json_integer(t[i].shape[d]));
		json_object_set_new(h, t[i].name,
				    json_pack("{s:s, s:o, s:[I,I]}", "dtype", st, "shape", shape, "data_offsets",
					      (json_int_t)off, (json_int_t)(off + t[i].bytes)));
		off += t[i].bytes;
	}
	char *text = json_dumps(h, JSON_COMPACT);
	json_decref(h);
	size_t hl = strlen(text), pad = (8 - hl % 8) % 8; /* data starts 8-byte aligned */
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "wb");
	if (!f) {
		free(text);
		return fail_input(e, "cannot write '%s': %s", tmp, strerror(errno));
	}
	unsigned char le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)((uint64_t)(hl + pad) >> (8 * i));
	int ok = fwrite(le, 1, 8, f) == 8 && fwrite(text, 1, hl, f) == hl && fwrite("        ", 1, pad, f) == pad;
	for (size_t i = 0; ok && i < n; i++)
		ok = fwrite(t[i].data, 1, t[i].bytes, f) == t[i].bytes;
	free(text);
	if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return fail_input(e, "cannot write '%s': %s", path, strerror(errno));
	}
	return ALIGN_OK;
}

/* TRANSITIONAL wrappers for callers outside ingest (harness/run): the message is printed at once. */
int safetensors_read(const char *path, struct st_file *out)
{
	return safetensors_read_err(path, out, NULL);
}

int safetensors_write(const char *path, const struct st_tensor *t, size_t n, const char *metadata_json)
{
	return safetensors_write_err(path, t, n, metadata_json, NULL);
}
