/* ingest-torchtitan-log: torchtitan training stdout, the metrics line of its logger:
 *   [rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - step: 14  loss:  3.24405  grad_norm:  0.8319
 *       memory:  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%
 * and its validation line ("validate step: N  loss: X ..."). Launcher prefixes: torchrun's "[rankN]:" or
 * "[defaultN]:", srun -l's "N: ", or none (every rank printing the same line into one stream); ANSI colour
 * codes are stripped, '\r' segments read one by one, every other line (GC, profiler, checkpoint, warnings,
 * tracebacks) skipped.
 *
 * What a step line becomes, at step N (torchtitan counts steps from 1):
 *   loss       the fp32 global average loss printed "{:7.4f}" or "{:8.5f}": PREC_TEXT (an interval at the
 *              last printed digit), dtype fp32, phase loss, rank ALIGN_NO_RANK (every rank prints the same
 *              mean; the core keeps one copy)
 *   grad_norm  "{:.4f}", PREC_TEXT, dtype unknown (the norm's dtype follows the gradients'), phase optim,
 *              global
 *   memory     "9.46GiB(64.99%)": memory_gib and memory_pct; tps ("7,282": thousands separators
 *              dropped), tflops, mfu ("0.17%"), and any other "key: number" of the line: phase meta,
 *              dtype fp64, PREC_TEXT, at the printing rank (ALIGN_NO_RANK without a prefix)
 * A validation line's loss is eval_loss (phase eval), its other fields meta.
 * A step that does not move forward on a stream: the same step with the same loss is another rank's copy
 * of the line (skipped, its per-rank timings with it: without a prefix they name no rank); otherwise a rerun appended to the file, which supersedes the earlier records from
 * that step on (warning). */
#include "anchor.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TT_MAX_FIELDS 32
#define TT_MAX_STREAMS 1024

struct tt_field {
	const char *key, *val;
	size_t key_len, val_len;
};

struct tt_stream {
	int64_t rank; /* from the prefix, ALIGN_NO_RANK without one */
	int64_t last_step;
	uint64_t last_hash; /* hash of the last step line's loss text */
};

struct ttl {
	char *buf;
	size_t cap;
	struct tt_stream streams[TT_MAX_STREAMS];
	size_t n_streams;
	int64_t lines;		 /* step and validation lines read */
	int64_t first_titan;	 /* first "[titan]" logger line (0: none) */
	int64_t first_candidate; /* first line with "step:" and "loss:" that did not parse (0: none) */
};

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The launcher's rank prefix: "[rankN]:", "[defaultN]:" (any "[wordN]:"), or srun's "N: ". Returns the
 * rank or ALIGN_NO_RANK. */
static int64_t prefix_rank(const char *s, size_t n)
{
	size_t i = 0;
	int64_t r = 0;
	if (n && s[0] == '[') {
		for (i = 1; i < n && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')); i++)
			;
		size_t d = i;
		for (; i < n && is_digit(s[i]) && i - d < 9; i++)
			r = r * 10 + (s[i] - '0');
		return i > d && i + 1 < n && s[i] == ']' && s[i + 1] == ':' ? r : ALIGN_NO_RANK;
	}
	for (; i < n && is_digit(s[i]) && i < 9; i++)
		r = r * 10 + (s[i] - '0');
	return i && i + 1 < n && s[i] == ':' && s[i + 1] == ' ' ? r : ALIGN_NO_RANK;
}

/* Where "step: N" starts in s (after start, a blank or "- "), *validate set for "validate step:"; NULL if
 * none is followed by a number and a "loss:" field. */
static const char *find_step(const char *s, size_t n, int *validate)
{
	for (const char *p = memmem(s, n, "step:", 5); p; p = memmem(p + 1, (size_t)(s + n - p - 1), "step:", 5)) {
		if (p > s && p[-1] != ' ')
			continue;
		const char *q = p + 5, *end = s + n;
		while (q < end && *q == ' ')
			q++;
		if (q == end || !is_digit(*q))
			continue;
		if (!memmem(q, (size_t)(end - q), "loss:", 5))
			continue;
		*validate = p - s >= 9 && !memcmp(p - 9, "validate ", 9);
		return *validate ? p - 9 : p;
	}
	return NULL;
}

/* "key: value  key: value ..." after the step: keys are words, values run to the next blank. */
static size_t split_fields(const char *s, size_t n, struct tt_field *f, size_t max)
{
	size_t k = 0, i = 0;
	while (i < n && k < max) {
		while (i < n && s[i] == ' ')
			i++;
		size_t ks = i;
		while (i < n && s[i] != ':' && s[i] != ' ')
			i++;
		if (i == n || s[i] != ':' || i == ks)
			break;
		size_t kl = i - ks;
		i++;
		while (i < n && s[i] == ' ')
			i++;
		size_t vs = i;
		while (i < n && s[i] != ' ')
			i++;
		if (i == vs)
			break;
		f[k++] = (struct tt_field){s + ks, s + vs, kl, i - vs};
	}
	return k;
}

static int field_is(const struct tt_field *f, const char *k)
{
	return f->key_len == strlen(k) && !memcmp(f->key, k, f->key_len);
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static struct tt_stream *stream_for(struct ttl *t, int64_t rank)
{
	for (size_t i = 0; i < t->n_streams; i++)
		if (t->streams[i].rank == rank)
			return &t->streams[i];
	if (t->n_streams == TT_MAX_STREAMS)
		return NULL;
	t->streams[t->n_streams] = (struct tt_stream){.rank = rank};
	return &t->streams[t->n_streams++];
}

static int emit_num(struct ingest *ig, int64_t rank, int64_t step, int64_t line, const char *name, const char *phase,
		    const char *dtype, const char *text, size_t len)
{
	if (numtext_valid(text, len))
		return ingest_error(ig, line, "field '%s': not a number: '%.*s'", name, (int)(len > 40 ? 40 : len),
				    text);
	struct rec r = {.rank = rank,
			.step = step,
			.micro = ALIGN_NO_MICRO,
			.seq = ALIGN_NO_SEQ,
			.line = line,
			.name = name,
			.phase = phase,
			.dtype = dtype,
			.text = text,
			.text_len = len,
			.prec = PREC_TEXT};
	return ingest_emit(ig, &r);
}

/* A meta value: "7,282" without separators, "0.17%" without the sign; skipped when not a number. */
static int emit_meta(struct ingest *ig, int64_t rank, int64_t step, int64_t line, const char *name, const char *v,
		     size_t n)
{
	char num[64];
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < sizeof num; i++)
		if (v[i] != ',' && !(i == n - 1 && v[i] == '%'))
			num[o++] = v[i];
	num[o] = '\0';
	if (!o || numtext_valid(num, o))
		return ALIGN_OK;
	return emit_num(ig, rank, step, line, name, "meta", "fp64", num, o);
}

/* memory: "9.46GiB(64.99%)" -> memory_gib 9.46, memory_pct 64.99 */
static int emit_memory(struct ingest *ig, int64_t rank, int64_t step, int64_t line, const char *v, size_t n)
{
	const char *g = memmem(v, n, "GiB", 3);
	if (!g)
		return emit_meta(ig, rank, step, line, "memory", v, n);
	ALIGN_TRY(ingest_err(ig), emit_meta(ig, rank, step, line, "memory_gib", v, (size_t)(g - v)));
	const char *o = g + 3, *c = memchr(v, ')', n);
	if (o < v + n && *o == '(' && c && c > o + 1)
		return emit_meta(ig, rank, step, line, "memory_pct", o + 1, (size_t)(c - o - 1));
	return ALIGN_OK;
}

static int step_line(struct ingest *ig, struct ttl *t, const char *s, size_t n, const char *st, int validate,
		     int64_t line)
{
	int64_t rank = prefix_rank(s, n);
	const char *p = st + (validate ? 9 : 0) + 5, *end = s + n;
	while (p < end && *p == ' ')
		p++;
	int64_t step = 0;
	const char *ds = p;
	for (; p < end && is_digit(*p) && p - ds < 15; p++)
		step = step * 10 + (*p - '0');
	struct tt_field f[TT_MAX_FIELDS];
	size_t nf = split_fields(p, (size_t)(end - p), f, TT_MAX_FIELDS);
	const struct tt_field *loss = NULL;
	for (size_t i = 0; i < nf; i++)
		if (field_is(&f[i], "loss"))
			loss = &f[i];
	if (!loss) {
		if (!t->first_candidate)
			t->first_candidate = line;
		return ALIGN_OK;
	}
	struct tt_stream *ts = stream_for(t, rank);
	if (!ts)
		return ingest_error(ig, line, "more than %d rank prefixes in one file", TT_MAX_STREAMS);
	t->lines++;
	if (!validate) {
		uint64_t h = fnv(1469598103934665603ull, loss->val, loss->val_len);
		if (ts->last_step && step <= ts->last_step) {
			if (step == ts->last_step && h == ts->last_hash)
				return ALIGN_OK; /* another rank's copy of the line (its timings may differ) */
			ingest_warn(ig, line,
				    "step %lld after step %lld: a rerun appended to this file? the earlier records "
				    "from step %lld on are superseded",
				    (long long)step, (long long)ts->last_step, (long long)step);
			ALIGN_TRY(ingest_err(ig), ingest_supersede(ig, ALIGN_NO_RANK, step));
			if (rank != ALIGN_NO_RANK)
				ALIGN_TRY(ingest_err(ig), ingest_supersede(ig, rank, step));
		}
		ts->last_step = step, ts->last_hash = h;
	}
	for (size_t i = 0; i < nf; i++) {
		const struct tt_field *x = &f[i];
		char name[64];
		snprintf(name, sizeof name, "%.*s", (int)(x->key_len < 63 ? x->key_len : 63), x->key);
		if (x == loss)
			ALIGN_TRY(ingest_err(ig),
				  emit_num(ig, ALIGN_NO_RANK, step, line, validate ? "eval_loss" : "loss",
					   validate ? "eval" : "loss", "fp32", x->val, x->val_len));
		else if (field_is(x, "grad_norm") && !validate)
			ALIGN_TRY(ingest_err(ig), emit_num(ig, ALIGN_NO_RANK, step, line, "grad_norm", "optim", NULL,
							   x->val, x->val_len));
		else if (field_is(x, "memory"))
			ALIGN_TRY(ingest_err(ig), emit_memory(ig, rank, step, line, x->val, x->val_len));
		else
			ALIGN_TRY(ingest_err(ig), emit_meta(ig, rank, step, line, name, x->val, x->val_len));
	}
	return ALIGN_OK;
}

static int segment(struct ingest *ig, struct ttl *t, const char *s, size_t n, int64_t line)
{
	int validate;
	if (!t->first_titan && memmem(s, n, "[titan]", 7))
		t->first_titan = line;
	const char *st = find_step(s, n, &validate);
	if (!st)
		return ALIGN_OK;
	return step_line(ig, t, s, n, st, validate, line);
}

static int grow(struct ingest *ig, struct ttl *t, size_t need)
{
	if (need <= t->cap)
		return ALIGN_OK;
	size_t c = t->cap ? t->cap : 4096;
	while (c < need)
		c *= 2;
	char *g = realloc(t->buf, c);
	if (!g)
		return fail_internal(ingest_err(ig), "out of memory");
	t->buf = g, t->cap = c;
	return ALIGN_OK;
}

static int ttl_lines(struct ingest *ig, struct reader *rd, struct ttl *t)
{
	char *line;
	size_t len;
	int term, got, rc = ALIGN_OK;
	while ((got = reader_next_line(rd, &line, &len, &term)) == 1) {
		ALIGN_TRY(ingest_err(ig), grow(ig, t, len + 1));
		size_t n = anchor_strip_ansi(line, len, t->buf);
		int64_t ln = ingest_current_line(ig);
		int validate;
		if (!term) {
			if (find_step(t->buf, n, &validate))
				ingest_warn(ig, ln,
					    "last line is not terminated (the job was killed mid-print?): ignored");
			break;
		}
		for (size_t a = 0; a <= n && !rc;) {
			const char *cr = memchr(t->buf + a, '\r', n - a);
			size_t b = cr ? (size_t)(cr - t->buf) : n;
			if (b > a)
				rc = segment(ig, t, t->buf + a, b - a, ln);
			a = b + 1;
		}
		if (rc)
			return rc;
	}
	return got == 0 || got == 1 ? ALIGN_OK : got;
}

static int ttl_parse(struct ingest *ig, struct reader *rd)
{
	struct ttl *t = calloc(1, sizeof *t);
	if (!t)
		return fail_internal(ingest_err(ig), "out of memory");
	int rc = ttl_lines(ig, rd, t);
	if (!rc && !t->lines) {
		if (t->first_candidate)
			rc = ingest_error(ig, t->first_candidate,
					  "no torchtitan step line ('step: N  loss: X'): the first line with 'step:' "
					  "and 'loss:' (here) has no 'loss: value' field after the step");
		else if (t->first_titan)
			rc = ingest_error(ig, t->first_titan,
					  "no torchtitan step line ('step: N  loss: X'): the first [titan] logger line "
					  "(here) has none");
		else
			rc = ingest_error(ig, 0, "no torchtitan step lines ('step: N  loss: X') in this file");
	}
	free(t->buf);
	free(t);
	return rc;
}

/* A step line with loss and one of torchtitan's metrics fields: 90; [titan] logger lines: 40. */
static int ttl_detect(const char *head, size_t len, const char *path)
{
	(void)path;
	int score = 0, validate;
	char s[4096];
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(head + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - head) - i : len - i, at = i;
		i += n + 1;
		n = anchor_strip_ansi(head + at, n < sizeof s ? n : sizeof s, s);
		const char *st = find_step(s, n, &validate);
		if (st && (memmem(st, (size_t)(s + n - st), "  loss:", 7)) &&
		    (memmem(st, (size_t)(s + n - st), "tps:", 4) || memmem(st, (size_t)(s + n - st), "mfu:", 4) ||
		     memmem(st, (size_t)(s + n - st), "grad_norm:", 10) || memmem(s, n, "[titan]", 7)))
			return 90;
		if (memmem(s, n, "[titan] ", 8))
			score = 40;
	}
	return score;
}

/* name, framework and summary: the torchtitan_log row of formats.def */
const struct ingest_parser ingest_parser_torchtitan_log = {
	.detect = ttl_detect,
	.parse = ttl_parse,
};
