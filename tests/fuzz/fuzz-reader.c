/* fuzz-reader: the plain/gzip reader (reader.c) three ways over the same file: peek then line by line
 * (checking each line's length and that no line holds '\n'), whole (reader_slurp) and drained
 * (reader_drain). Where two ways both succeed they must agree on the decompressed size and SHA-256. */
#include "err.h"
#include "fuzz.h"
#include "reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	int ok;
	uint64_t bytes;
	char sha[65];
};

static void by_lines(const char *path, struct seen *s)
{
	struct align_err e = {0};
	struct reader *r;
	if (reader_open_err(path, &e, &r))
		return;
	const char *head;
	size_t head_len;
	int rc = reader_peek(r, &head, &head_len);
	uint64_t sum = 0;
	char *line;
	size_t len;
	int terminated;
	while (!rc && (rc = reader_next_line(r, &line, &len, &terminated)) == 1) {
		if (len > READER_MAX_LINE || memchr(line, '\n', len) || line[len] != '\0')
			abort(); /* the contract: a line without its '\n', NUL-terminated, at most READER_MAX_LINE */
		sum += len + (terminated ? 1 : 0);
		rc = 0;
	}
	if (!rc) {
		s->ok = 1;
		s->bytes = reader_bytes(r);
		reader_sha256(r, s->sha);
		/* the lines and their '\n' are the whole content */
		if (sum != s->bytes)
			abort();
	}
	reader_close(r);
}

static void whole(const char *path, struct seen *s)
{
	struct align_err e = {0};
	struct reader *r;
	if (reader_open_err(path, &e, &r))
		return;
	char *buf;
	size_t len;
	if (!reader_check_whole(r) && !reader_slurp(r, &buf, &len)) {
		if (buf[len] != '\0')
			abort();
		s->ok = 1;
		s->bytes = reader_bytes(r);
		reader_sha256(r, s->sha);
		if (s->bytes != len)
			abort();
	}
	reader_close(r);
}

static void drained(const char *path, struct seen *s)
{
	struct align_err e = {0};
	struct reader *r;
	if (reader_open_err(path, &e, &r))
		return;
	if (!reader_drain(r)) {
		s->ok = 1;
		s->bytes = reader_bytes(r);
		reader_sha256(r, s->sha);
	}
	reader_close(r);
}

static void agree(const struct seen *a, const struct seen *b)
{
	if (a->ok && b->ok && (a->bytes != b->bytes || strcmp(a->sha, b->sha))) {
		fprintf(stderr, "fuzz-reader: %llu bytes %s vs %llu bytes %s\n", (unsigned long long)a->bytes, a->sha,
			(unsigned long long)b->bytes, b->sha);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file("input", data, size);
	if (!path)
		return 0;
	struct seen l = {0}, w = {0}, d = {0};
	by_lines(path, &l);
	whole(path, &w);
	drained(path, &d);
	agree(&l, &d);
	agree(&w, &d);
	return 0;
}
