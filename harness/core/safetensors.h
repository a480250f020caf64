/* safetensors: read and write the tensor files frameworks already write (huggingface safetensors):
 * 8-byte little-endian header length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets"},
 * "__metadata__": {str: str}}, then the raw row-major little-endian bytes.
 * Reading validates everything (header bounds, dtype, offsets inside the data, size = product of the
 * shape x element size, no overlaps) and names the file and tensor in each message; writing is atomic
 * (temp file + rename). Dtype names are align's (fp32, bf16, ...; see dtype.h). */
#ifndef ALIGN_SAFETENSORS_H
#define ALIGN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

struct st_tensor {
	char name[256];
	char dtype[16]; /* align dtype name */
	int ndim;
	int64_t shape[ST_MAX_DIMS];
	void *data; /* points into the file's blob (read) or caller memory (write) */
	size_t bytes;
};

struct st_file {
	struct st_tensor *t; /* in file order of data_offsets */
	size_t n;
	char *metadata; /* JSON object text of __metadata__, or NULL */
	void *blob;	/* whole file contents (owned) */
};

struct align_err;

/* Read path; returns an exit-code class, the message in e (NULL e: printed on stderr at once). */
int safetensors_read_err(const char *path, struct st_file *out, struct align_err *e);
/* TRANSITIONAL: safetensors_read_err(path, out, NULL), for callers not yet on struct align_err. */
int safetensors_read(const char *path, struct st_file *out);
/* Find a tensor by name, or NULL. */
const struct st_tensor *safetensors_find(const struct st_file *f, const char *name);
void safetensors_free(struct st_file *f);
/* Write tensors (in the given order) with optional __metadata__ (JSON object text); message in e. */
int safetensors_write_err(const char *path, const struct st_tensor *t, size_t n, const char *metadata_json,
			  struct align_err *e);
/* TRANSITIONAL: safetensors_write_err(..., NULL). */
int safetensors_write(const char *path, const struct st_tensor *t, size_t n, const char *metadata_json);

#endif
