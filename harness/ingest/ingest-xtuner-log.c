/* ingest-xtuner-log: XTuner (and any mmengine runner) training stdout, the LoggerHook line:
 *   2024/05/07 11:17:51 - mmengine - INFO - Iter(train) [  20/2046]  lr: 6.3335e-05  eta: 1:42:16
 *       time: 3.0543  data_time: 0.0190  memory: 13995  loss: 0.9169  grad_norm: 0.7445
 * the epoch-based "Epoch(train) [E][i/N]" form (step (E-1)*N + i), the older ", "/tab-separated form, and
 * the validation lines "Iter(val) [i/N] ..." / "Epoch(val) [E][i/N] ...". ANSI codes are stripped; every
 * other line (warnings, checkpoint saving, tracebacks) is skipped.
 *
 * mmengine's LogProcessor prints the mean of each value over its window (the log interval by default):
 * "{:.4f}" of a Python-float mean, lr "{:.4e}". So every value is an interval at its last printed digit
 * (PREC_TEXT) and none claims the dtype of the tensor it came from (loss and grad_norm: dtype unknown, no
 * bits). Records at the printed iteration (1-based), rank ALIGN_NO_RANK (the logging process):
 *   loss and every *loss*      phase loss          grad_norm   phase optim
 *   lr                         name learning_rate, dtype fp64, phase optim
 *   time, data_time, memory (MB), eta (skipped: not a number), iteration counts: phase meta
 *   any other number           phase metric
 * A validation line's values go to the last training step, phase eval (eval_loss for its loss); its
 * time/data_time/memory are meta.
 * XTuner v1 (loguru, "[XTuner][RANK R][time][INFO] Step N/M data_time: 0.0578 lr: 0.000020 time: 4.9770
 * text_tokens: 4008.0 total_loss: 1.722 reduced_llm_loss: 1.684 max_memory: 15.90 GB reserved_memory:
 * 17.87 GB grad_norm: 13.948 tgs: 805.3 e2e_tgs: 796.1"): every rank prints its own line, so the records
 * are at rank R (reruns are per rank); the losses and grad_norm are "{:.3f}" of one step's values, lr
 * "{:.6f}": intervals as above; *memory*, *tokens*, tgs, e2e_tgs are meta; unit words (GB) are skipped. An iteration that does not move forward is a rerun appended to the file:
 * the earlier records from that step on are superseded (warning). */
#include "anchor.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XL_MAX_FIELDS 64
#define XL_MAX_RANKS 4096

struct xl_field {
	const char *key, *val;
	size_t key_len, val_len;
};

struct xl {
	char *buf;
	size_t cap;
	int64_t last_step;		 /* last training iteration (0: none) */
	int64_t lines;			 /* train and val lines read */
	int64_t first_mm;		 /* first " - mmengine - " line (0: none) */
	int64_t first_partial;		 /* first "Iter(train) [" line without a loss (0: none) */
	int64_t rank_last[XL_MAX_RANKS]; /* XTuner v1: last step of rank R (0: none) */
};

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* "[  20/2046]" at p: *i = 20, *n = 2046; returns the end, or NULL. */
static const char *bracket_pair(const char *p, const char *end, int64_t *i, int64_t *n)
{
	if (p >= end || *p != '[')
		return NULL;
	p++;
	while (p < end && *p == ' ')
		p++;
	*i = 0, *n = 0;
	const char *d = p;
	for (; p < end && is_digit(*p) && p - d < 15; p++)
		*i = *i * 10 + (*p - '0');
	if (p == d || p >= end || *p != '/')
		return NULL;
	d = ++p;
	for (; p < end && is_digit(*p) && p - d < 15; p++)
		*n = *n * 10 + (*p - '0');
	return p > d && p < end && *p == ']' ? p + 1 : NULL;
}

/* "[E]" at p: *e set; returns the end, or NULL. */
static const char *bracket_one(const char *p, const char *end, int64_t *e)
{
	if (p >= end || *p != '[')
		return NULL;
	const char *d = ++p;
	*e = 0;
	for (; p < end && is_digit(*p) && p - d < 15; p++)
		*e = *e * 10 + (*p - '0');
	return p > d && p < end && *p == ']' ? p + 1 : NULL;
}

/* The loop tag: "Iter(train) [i/N]", "Epoch(train) [E][i/N]" (or "(val)"), also mmcv's "Epoch [E][i/N]".
 * Returns where the fields start, with *step (1-based, over epochs) and *val set; NULL when absent. */
/* XTuner v1: "[XTuner][RANK R]...] Step N/M " : *rank = R (0 without "[RANK R]"), the byte after M. */
static const char *find_v1(const char *s, size_t n, int64_t *step, int64_t *rank)
{
	const char *end = s + n, *x = memmem(s, n, "[XTuner]", 8), *p;
	if (!x || !(p = memmem(x, (size_t)(end - x), "] Step ", 7)))
		return NULL;
	*rank = 0;
	const char *r = memmem(x, (size_t)(p - x), "[RANK ", 6);
	if (r)
		*rank = strtoll(r + 6, NULL, 10);
	int64_t i = 0, m = 0;
	const char *q = p + 7, *d = q;
	for (; q < end && is_digit(*q) && q - d < 15; q++)
		i = i * 10 + (*q - '0');
	if (q == d || q >= end || *q != '/')
		return NULL;
	for (d = ++q; q < end && is_digit(*q) && q - d < 15; q++)
		m = m * 10 + (*q - '0');
	if (q == d || (q < end && *q != ' '))
		return NULL;
	*step = i;
	return q;
}

static const char *find_tag(const char *s, size_t n, int64_t *step, int *val)
{
	static const char *const tags[] = {"Iter(train) ", "Iter(val) ", "Epoch(train) ", "Epoch(val) ", "Epoch "};
	const char *end = s + n;
	for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
		size_t tl = strlen(tags[t]);
		for (const char *p = memmem(s, n, tags[t], tl); p;
		     p = memmem(p + 1, (size_t)(end - p - 1), tags[t], tl)) {
			if (p > s && p[-1] != ' ' && p[-1] != '\t')
				continue;
			const char *q = p + tl;
			int64_t e = 1, i, cnt;
			if (tags[t][0] == 'E' && !(q = bracket_one(q, end, &e)))
				continue;
			if (!(q = bracket_pair(q, end, &i, &cnt)))
				continue;
			*val = strstr(tags[t], "(val)") != NULL;
			*step = e >= 1 ? (e - 1) * cnt + i : i;
			return q;
		}
	}
	return NULL;
}

/* "key: value" pairs separated by blanks, tabs or ", "; a value runs to the next separator. */
static size_t split_fields(const char *s, size_t n, struct xl_field *f, size_t max)
{
	size_t k = 0, i = 0;
	while (i < n && k < max) {
		while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == ','))
			i++;
		size_t ks = i;
		while (i < n && s[i] != ':' && s[i] != ' ' && s[i] != '\t' && s[i] != ',')
			i++;
		if ((i - ks == 2 || i - ks == 3) && (i == n || s[i] == ' ') &&
		    (!memcmp(s + ks, "GB", 2) || !memcmp(s + ks, "MB", 2) || !memcmp(s + ks, "GiB", 3)))
			continue; /* XTuner v1's "max_memory: 15.90 GB" */
		if (i == n || s[i] != ':' || i == ks)
			break;
		size_t kl = i - ks;
		i++;
		while (i < n && s[i] == ' ')
			i++;
		size_t vs = i;
		while (i < n && s[i] != ' ' && s[i] != '\t' && !(s[i] == ',' && i + 1 < n && s[i + 1] == ' '))
			i++;
		f[k++] = (struct xl_field){s + ks, s + vs, kl, i - vs};
	}
	return k;
}

static int key_is(const struct xl_field *f, const char *k)
{
	return f->key_len == strlen(k) && !memcmp(f->key, k, f->key_len);
}

static int key_has(const struct xl_field *f, const char *k)
{
	return memmem(f->key, f->key_len, k, strlen(k)) != NULL;
}

static int emit_field(struct ingest *ig, const struct xl_field *f, int64_t step, int val, int64_t line, int64_t rank)
{
	char name[96];
	const char *phase = "metric", *dtype = NULL;
	int is_loss = key_has(f, "loss");
	snprintf(name, sizeof name, "%.*s", (int)(f->key_len < 95 ? f->key_len : 95), f->key);
	if (key_is(f, "time") || key_is(f, "data_time") || key_is(f, "memory") || key_is(f, "eta") ||
	    key_is(f, "iter") || key_is(f, "epoch") || key_has(f, "memory") || key_has(f, "tokens") ||
	    key_is(f, "tgs") || key_is(f, "e2e_tgs"))
		phase = "meta", dtype = "fp64";
	else if (is_loss)
		phase = val ? "eval" : "loss";
	else if (key_is(f, "grad_norm"))
		phase = val ? "eval" : "optim";
	else if (key_is(f, "lr")) {
		snprintf(name, sizeof name, "learning_rate");
		phase = val ? "eval" : "optim", dtype = "fp64";
	} else if (val)
		phase = "eval";
	if (val && key_is(f, "loss"))
		snprintf(name, sizeof name, "eval_loss");
	if (!f->val_len || numtext_valid(f->val, f->val_len)) {
		if (is_loss || key_is(f, "grad_norm") || key_is(f, "lr"))
			return ingest_error(ig, line, "field '%s': not a number: '%.*s'", name,
					    (int)(f->val_len > 40 ? 40 : f->val_len), f->val);
		return ALIGN_OK; /* eta "1:42:16" and other words */
	}
	struct rec r = {.rank = rank,
			.step = step,
			.micro = ALIGN_NO_MICRO,
			.seq = ALIGN_NO_SEQ,
			.line = line,
			.name = name,
			.phase = phase,
			.dtype = dtype,
			.text = f->val,
			.text_len = f->val_len,
			.prec = PREC_TEXT};
	return ingest_emit(ig, &r);
}

/* An XTuner v1 step line of rank R (fields from fs). */
static int xl_v1_line(struct ingest *ig, struct xl *x, const char *fs, size_t n, int64_t step, int64_t rank,
		      int64_t line)
{
	struct xl_field f[XL_MAX_FIELDS];
	size_t nf = split_fields(fs, n, f, XL_MAX_FIELDS), losses = 0;
	for (size_t i = 0; i < nf; i++)
		losses += key_has(&f[i], "loss");
	if (!losses) {
		if (!x->first_partial)
			x->first_partial = line;
		return ALIGN_OK;
	}
	if (rank < 0 || rank >= XL_MAX_RANKS)
		return ingest_error(ig, line, "[RANK %lld]: ranks 0 to %d are read", (long long)rank, XL_MAX_RANKS - 1);
	x->lines++;
	int64_t *last = &x->rank_last[rank];
	if (*last && step <= *last) {
		ingest_warn(ig, line,
			    "rank %lld: step %lld after step %lld: a rerun appended to this file? the earlier records "
			    "of rank %lld from step %lld on are superseded",
			    (long long)rank, (long long)step, (long long)*last, (long long)rank, (long long)step);
		ALIGN_TRY(ingest_err(ig), ingest_supersede(ig, rank, step));
	}
	*last = step;
	for (size_t i = 0; i < nf; i++)
		ALIGN_TRY(ingest_err(ig), emit_field(ig, &f[i], step, 0, line, rank));
	return ALIGN_OK;
}

static int xl_line(struct ingest *ig, struct xl *x, const char *s, size_t n, int64_t line)
{
	int64_t step;
	int val;
	if (!x->first_mm && memmem(s, n, " - mmengine - ", 14))
		x->first_mm = line;
	int64_t rank;
	const char *fs = find_v1(s, n, &step, &rank);
	if (fs)
		return xl_v1_line(ig, x, fs, (size_t)(s + n - fs), step, rank, line);
	fs = find_tag(s, n, &step, &val);
	if (!fs)
		return ALIGN_OK;
	struct xl_field f[XL_MAX_FIELDS];
	size_t nf = split_fields(fs, (size_t)(s + n - fs), f, XL_MAX_FIELDS), losses = 0;
	for (size_t i = 0; i < nf; i++)
		losses += key_has(&f[i], "loss") || (val && !key_is(&f[i], "eta"));
	if (!losses) {
		if (!x->first_partial)
			x->first_partial = line;
		return ALIGN_OK;
	}
	x->lines++;
	if (val) {
		if (!x->last_step)
			ingest_warn(ig, line, "validation line before any training line: recorded without a step");
		step = x->last_step ? x->last_step : ALIGN_NO_STEP;
	} else {
		if (x->last_step && step <= x->last_step) {
			ingest_warn(ig, line,
				    "iteration %lld after iteration %lld: a rerun appended to this file? the earlier "
				    "records from step %lld on are superseded",
				    (long long)step, (long long)x->last_step, (long long)step);
			ALIGN_TRY(ingest_err(ig), ingest_supersede(ig, ALIGN_NO_RANK, step));
		}
		x->last_step = step;
	}
	for (size_t i = 0; i < nf; i++)
		ALIGN_TRY(ingest_err(ig), emit_field(ig, &f[i], step, val, line, ALIGN_NO_RANK));
	return ALIGN_OK;
}

static int xl_lines(struct ingest *ig, struct reader *rd, struct xl *x)
{
	char *line;
	size_t len;
	int term, got;
	while ((got = reader_next_line(rd, &line, &len, &term)) == 1) {
		if (len + 1 > x->cap) {
			size_t c = x->cap ? x->cap : 4096;
			while (c < len + 1)
				c *= 2;
			char *g = realloc(x->buf, c);
			if (!g)
				return fail_internal(ingest_err(ig), "out of memory");
			x->buf = g, x->cap = c;
		}
		size_t n = anchor_strip_ansi(line, len, x->buf);
		int64_t ln = ingest_current_line(ig), step;
		int val;
		if (!term) {
			if (find_tag(x->buf, n, &step, &val))
				ingest_warn(ig, ln,
					    "last line is not terminated (the job was killed mid-print?): ignored");
			break;
		}
		ALIGN_TRY(ingest_err(ig), xl_line(ig, x, x->buf, n, ln));
	}
	return got == 0 || got == 1 ? ALIGN_OK : got;
}

static int xl_parse(struct ingest *ig, struct reader *rd)
{
	struct xl x = {0};
	int rc = xl_lines(ig, rd, &x);
	if (!rc && !x.lines) {
		if (x.first_partial)
			rc = ingest_error(ig, x.first_partial,
					  "no mmengine training line ('Iter(train) [i/N] ... loss: X'): the first "
					  "'Iter(train)' line (here) has no loss field");
		else if (x.first_mm)
			rc = ingest_error(ig, x.first_mm,
					  "no mmengine training line ('Iter(train) [i/N] ... loss: X'): the first "
					  "mmengine logger line (here) has none");
		else
			rc = ingest_error(ig, 0,
					  "no mmengine training lines ('Iter(train) [i/N] ... loss: X') in this file");
	}
	free(x.buf);
	return rc;
}

/* An mmengine loop line with a loss: 90; mmengine logger lines only: 40. */
static int xl_detect(const char *head, size_t len, const char *path)
{
	(void)path;
	int score = 0, val;
	int64_t step;
	char s[4096];
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(head + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - head) - i : len - i, at = i;
		i += n + 1;
		n = anchor_strip_ansi(head + at, n < sizeof s ? n : sizeof s, s);
		int64_t rank;
		const char *v1 = find_v1(s, n, &step, &rank);
		if (v1 && memmem(v1, (size_t)(s + n - v1), "loss: ", 6))
			return 90;
		const char *fs = find_tag(s, n, &step, &val);
		if (fs && memmem(fs, (size_t)(s + n - fs), "loss: ", 6) &&
		    (memmem(fs, (size_t)(s + n - fs), "lr: ", 4) || memmem(fs, (size_t)(s + n - fs), "time: ", 6)))
			return 90;
		if (memmem(s, n, " - mmengine - ", 14))
			score = 40;
	}
	return score;
}

/* name, framework and summary: the xtuner_log row of formats.def */
const struct ingest_parser ingest_parser_xtuner_log = {
	.detect = xl_detect,
	.parse = xl_parse,
};
