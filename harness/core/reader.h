/* reader: one input file, plain or gzip (detected by the magic bytes 1f 8b, not the name), read as
 * lines or whole, with the SHA-256 of the decompressed content.
 * Contract: lines are returned without their '\n'; a line longer than READER_MAX_LINE, a NUL byte in a
 * text line, a corrupt or truncated gzip stream are errors naming the file and line. The last line
 * without a '\n' is returned with *terminated == 0 so parsers can report it as truncated. */
#ifndef ALIGN_READER_H
#define ALIGN_READER_H

#include <stddef.h>
#include <stdint.h>

#define READER_MAX_LINE (1u << 20)    /* 1 MiB: the longest line unless a format allows more */
#define READER_MAX_SLURP (1ull << 31) /* 2 GiB: the most reader_slurp returns */

struct reader;

struct align_err;

/* Open path ("-" is not supported: ingest needs a name); returns an exit-code class. Every failure of
 * this reader (here and in the calls below) sets its message in e, which must outlive the reader
 * (NULL e: the message is printed on stderr at once). */
int reader_open_err(const char *path, struct align_err *e, struct reader **out);
/* TRANSITIONAL: reader_open_err(path, NULL, out), for callers not yet on struct align_err. */
int reader_open(const char *path, struct reader **out);
void reader_close(struct reader *r);
/* Accept lines up to max_line bytes (a multiple of 1 MiB; only ever raised): for formats whose
 * records carry bulk data on one line (ATF payloads). The buffer grows only when a line needs it. */
void reader_set_max_line(struct reader *r, size_t max_line);
/* First bytes of the decompressed content (up to 64 KiB) for format detection; does not consume. */
int reader_peek(struct reader *r, const char **buf, size_t *len);
/* Next line: 1 with a line, 0 at end of input, else an exit-code class (message in the reader's e). */
int reader_next_line(struct reader *r, char **line, size_t *len, int *terminated);
/* Fail at once ("file too large to read whole") when the content is known to exceed READER_MAX_SLURP
 * before reading it: a plain file by its size. A gzip file's content size is only found by reading it
 * (reader_slurp fails then). Call it before reader_slurp to fail before any work. */
int reader_check_whole(struct reader *r);
/* The whole remaining content, NUL-terminated (owned by the reader); exit-code class. */
int reader_slurp(struct reader *r, char **buf, size_t *len);
/* Read (and hash) the rest of the content without keeping it, in constant memory: after it,
 * reader_bytes and reader_sha256 describe the whole file; exit-code class. */
int reader_drain(struct reader *r);
/* 1-based number of the line last returned. */
int64_t reader_lineno(const struct reader *r);
const char *reader_path(const struct reader *r);
int reader_is_gzip(const struct reader *r);
/* After end of input: decompressed byte count and SHA-256 hex (65 bytes with the NUL). */
uint64_t reader_bytes(const struct reader *r);
void reader_sha256(struct reader *r, char hex[65]);

#endif
