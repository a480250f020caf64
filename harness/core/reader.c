/* reader: buffered line reader over zlib's gz interface (which reads plain files transparently). */
#include "reader.h"

#include "err.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define CHUNK (1u << 18)

struct reader {
	gzFile gz;
	char *path;
	int gzip;  /* 1 when the content is gzip */
	char *buf; /* decompressed bytes [start, end) not yet consumed */
	size_t cap, start, end;
	size_t max_line; /* the longest line accepted (READER_MAX_LINE unless reader_set_max_line) */
	int eof;	 /* the gz stream is exhausted */
	int64_t lineno;
	uint64_t bytes; /* decompressed bytes read so far */
	EVP_MD_CTX *sha;
	char *slurp;	     /* whole content after reader_slurp */
	struct align_err *e; /* where failures go (NULL: printed at once, the transitional reader_open) */
};

int reader_open_err(const char *path, struct align_err *e, struct reader **out)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail_input(e, "cannot open '%s': %s", path, strerror(errno));
	unsigned char magic[2] = {0, 0};
	size_t got = fread(magic, 1, 2, f);
	fclose(f);
	struct reader *r = calloc(1, sizeof *r);
	if (!r)
		return fail_internal(e, "out of memory");
	r->e = e;
	r->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
	r->path = strdup(path);
	r->max_line = READER_MAX_LINE;
	r->cap = READER_MAX_LINE + 2 * CHUNK;
	r->buf = malloc(r->cap + 1); /* +1: room for the NUL after a last line */
	r->sha = EVP_MD_CTX_new();
	r->gz = gzopen(path, "rb");
	if (!r->path || !r->buf || !r->sha || !r->gz || !EVP_DigestInit_ex(r->sha, EVP_sha256(), NULL)) {
		int rc = r->gz ? fail_internal(e, "out of memory")
			       : fail_input(e, "cannot open '%s': %s", path, strerror(errno));
		reader_close(r);
		return rc;
	}
	gzbuffer(r->gz, CHUNK);
	*out = r;
	return ALIGN_OK;
}

void reader_set_max_line(struct reader *r, size_t max_line)
{
	if (max_line > r->max_line)
		r->max_line = max_line; /* the buffer grows when a line needs it (fill) */
}

int reader_open(const char *path, struct reader **out)
{
	return reader_open_err(path, NULL, out);
}

void reader_close(struct reader *r)
{
	if (!r)
		return;
	if (r->gz)
		gzclose(r->gz);
	EVP_MD_CTX_free(r->sha);
	free(r->buf);
	free(r->slurp);
	free(r->path);
	free(r);
}

/* Read more decompressed bytes after end; returns 0, or an exit-code class. */
static int fill(struct reader *r)
{
	if (r->eof)
		return ALIGN_OK;
	if (r->start > 0 && r->end - r->start < r->cap / 2) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	if (r->cap - r->end < CHUNK && r->cap < r->max_line + 2 * CHUNK) {
		/* a long line (reader_set_max_line): grow up to the longest line accepted */
		size_t cap = 2 * r->cap < r->max_line + 2 * CHUNK ? 2 * r->cap : r->max_line + 2 * CHUNK;
		char *grown = realloc(r->buf, cap + 1);
		if (!grown)
			return fail_internal(r->e, "out of memory reading a long line of '%s'", r->path);
		r->buf = grown, r->cap = cap;
	}
	size_t room = r->cap - r->end;
	if (room > CHUNK)
		room = CHUNK;
	int n = gzread(r->gz, r->buf + r->end, (unsigned)room);
	int zerr = 0;
	const char *zmsg = gzerror(r->gz, &zerr);
	if (n < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR))
		return fail_input(r->e, "%s: corrupt gzip data after %llu bytes: %s", r->path,
				  (unsigned long long)r->bytes, zmsg);
	if (n == 0) {
		/* Z_BUF_ERROR at the end means the gzip stream stopped before its trailer */
		if (zerr == Z_BUF_ERROR)
			return fail_input(r->e, "%s: truncated gzip file (unexpected end after %llu bytes)", r->path,
					  (unsigned long long)r->bytes);
		r->eof = 1;
		return ALIGN_OK;
	}
	EVP_DigestUpdate(r->sha, r->buf + r->end, (size_t)n);
	r->end += (size_t)n;
	r->bytes += (uint64_t)n;
	return ALIGN_OK;
}

int reader_peek(struct reader *r, const char **buf, size_t *len)
{
	while (!r->eof && r->end - r->start < 65536) {
		int rc = fill(r);
		if (rc)
			return rc;
	}
	*buf = r->buf + r->start;
	*len = r->end - r->start;
	if (*len > 65536)
		*len = 65536;
	return ALIGN_OK;
}

int reader_next_line(struct reader *r, char **line, size_t *len, int *terminated)
{
	size_t scanned = 0;
	for (;;) {
		char *p = r->buf + r->start;
		size_t avail = r->end - r->start;
		char *nl = memchr(p + scanned, '\n', avail - scanned);
		if (nl || (r->eof && avail > 0)) {
			size_t n = nl ? (size_t)(nl - p) : avail;
			r->lineno++;
			if (n > r->max_line)
				return fail_input(r->e, "%s:%lld: line longer than %zu MiB (%zu bytes)", r->path,
						  (long long)r->lineno, r->max_line >> 20, n);
			if (memchr(p, '\0', n))
				return fail_input(r->e, "%s:%lld: binary data (NUL byte) in a text line", r->path,
						  (long long)r->lineno);
			p[n] = '\0'; /* overwrites the '\n', or the spare byte after a last line */
			*line = p;
			*len = n;
			*terminated = nl != NULL;
			r->start += nl ? n + 1 : n;
			return 1;
		}
		if (r->eof)
			return 0;
		scanned = avail;
		if (avail > r->max_line)
			return fail_input(r->e, "%s:%lld: line longer than %zu MiB", r->path, (long long)r->lineno + 1,
					  r->max_line >> 20);
		int rc = fill(r);
		if (rc)
			return rc;
	}
}

static int too_large(struct reader *r)
{
	return fail_input(r->e, "%s: file too large to read whole (over 2 GiB)", r->path);
}

int reader_check_whole(struct reader *r)
{
	struct stat st;
	if (!r->gzip && stat(r->path, &st) == 0 && (unsigned long long)st.st_size > READER_MAX_SLURP)
		return too_large(r);
	return ALIGN_OK;
}

int reader_slurp(struct reader *r, char **buf, size_t *len)
{
	size_t cap = (r->end - r->start) + CHUNK, n = r->end - r->start;
	char *out = malloc(cap + 1);
	if (!out)
		return fail_internal(r->e, "out of memory");
	memcpy(out, r->buf + r->start, n);
	r->start = r->end = 0;
	while (!r->eof) {
		int rc = fill(r);
		if (rc) {
			free(out);
			return rc;
		}
		size_t more = r->end - r->start;
		if (n + more > READER_MAX_SLURP) { /* the content, not the buffer's capacity, is limited */
			free(out);
			return too_large(r);
		}
		if (n + more + 1 > cap) {
			cap = 2 * cap + more;
			if (cap > READER_MAX_SLURP)
				cap = READER_MAX_SLURP;
			char *grown = realloc(out, cap + 1);
			if (!grown) {
				free(out);
				return fail_internal(r->e, "out of memory");
			}
			out = grown;
		}
		memcpy(out + n, r->buf + r->start, r->end - r->start);
		n += r->end - r->start;
		r->start = r->end = 0;
	}
	out[n] = '\0';
	if (memchr(out, '\0', n)) {
		free(out);
		return fail_input(r->e, "%s: binary data (NUL byte) in a text file", r->path);
	}
	free(r->slurp);
	r->slurp = out;
	*buf = out;
	*len = n;
	return ALIGN_OK;
}

int reader_drain(struct reader *r)
{
	while (!r->eof) {
		r->start = r->end = 0; /* nothing is kept: the bytes only feed the count and the hash */
		int rc = fill(r);
		if (rc)
			return rc;
	}
	r->start = r->end = 0;
	return ALIGN_OK;
}

int64_t reader_lineno(const struct reader *r)
{
	return r->lineno;
}
const char *reader_path(const struct reader *r)
{
	return r->path;
}
int reader_is_gzip(const struct reader *r)
{
	return r->gzip;
}
uint64_t reader_bytes(const struct reader *r)
{
	return r->bytes;
}

void reader_sha256(struct reader *r, char hex[65])
{
	unsigned char md[32];
	unsigned int n = 0;
	EVP_MD_CTX *copy = EVP_MD_CTX_new();
	EVP_MD_CTX_copy_ex(copy, r->sha);
	EVP_DigestFinal_ex(copy, md, &n);
	EVP_MD_CTX_free(copy);
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}
