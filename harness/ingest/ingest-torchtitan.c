/* ingest-torchtitan: torchtitan loss baselines, tests/assets/losses/<model>_<platform>.txt
 * (specs/formats.md §8): one "<step> <loss>" per line, 1-based steps, written by
 * scripts/loss_compare.py --export-result.
 *
 * The loss is Python repr() of the float32 TensorBoard scalar loss_metrics/global_avg_loss; files older
 * than 2026-03-06 hold round(loss, 5) instead, and a file may mix both (a baseline extended by a newer
 * writer). Each line is read on its own: a loss that shows at most 5 decimals is round(x, 5) of an fp32
 * (PREC_DEC 5, an interval: fp32 bits only when exactly one fp32 lies in it); one that shows more is the
 * repr of an fp32 (PREC_EXACT, exact bits). A repr that shows at most 5 decimals (8.5, 0.03125) is read
 * as the rounded interval too: the same value, compared as printed rather than bitwise. Records: name
 * "loss", phase "loss", dtype fp32, rank ALIGN_NO_RANK (the global average),
 * micro ALIGN_NO_MICRO. Blank lines are skipped and trailing spaces or a '\r' are allowed; any other
 * line, a repeated step or a step that goes backwards is an input error. An unterminated last line is
 * a warning and is not kept (a file cut while written). */
#include "err.h"
#include "ingest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "<step> <loss>" with optional trailing blanks: 0 and the step and loss span, or -1. */
static int tt_split(const char *s, size_t n, int64_t *step, const char **loss, size_t *loss_len)
{
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		n--;
	size_t i = 0;
	*step = 0;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
		if (i >= 15)
			return -1;
		*step = *step * 10 + (s[i] - '0');
	}
	if (i == 0 || i >= n || s[i] != ' ')
		return -1;
	*loss = s + i + 1;
	*loss_len = n - i - 1;
	if (!*loss_len || memchr(*loss, ' ', *loss_len) || numtext_valid(*loss, *loss_len))
		return -1;
	return 0;
}

#define TT_ROUNDED_DECIMALS 5 /* round(loss, 5) of the writers before 2026-03-06 */

struct tt_step {
	int64_t step, line;
};

/* Line of an earlier occurrence of step (steps so far increase strictly), or 0. */
static int64_t tt_seen(const struct tt_step *seen, size_t n, int64_t step)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (seen[mid].step < step)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && seen[lo].step == step ? seen[lo].line : 0;
}

static int tt_line(struct ingest *ig, struct tt_step **seen, size_t *n, size_t *cap, const char *line, size_t len)
{
	int64_t step, lineno = ingest_current_line(ig);
	const char *loss;
	size_t loss_len;
	if (tt_split(line, len, &step, &loss, &loss_len))
		return ingest_error(ig, 0, "expected '<step> <loss>' (an integer step, one space, a number): '%.*s'",
				    (int)(len > 60 ? 60 : len), line);
	if (*n > 0 && step <= (*seen)[*n - 1].step) {
		int64_t first = tt_seen(*seen, *n, step);
		if (first)
			return ingest_error(ig, 0, "duplicate step %lld (first at line %lld)", (long long)step,
					    (long long)first);
		return ingest_error(ig, 0, "step %lld after step %lld: steps must increase", (long long)step,
				    (long long)(*seen)[*n - 1].step);
	}
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 256;
		struct tt_step *grown = realloc(*seen, c * sizeof *grown);
		if (!grown)
			return fail_internal(ingest_err(ig), "out of memory");
		*seen = grown, *cap = c;
	}
	(*seen)[(*n)++] = (struct tt_step){step, lineno};
	struct rec r = {.rank = ALIGN_NO_RANK,
			.step = step,
			.micro = ALIGN_NO_MICRO,
			.seq = ALIGN_NO_SEQ,
			.name = "loss",
			.phase = "loss",
			.dtype = "fp32",
			.text = loss,
			.text_len = loss_len,
			.prec = PREC_EXACT};
	if (numtext_shown_decimals(loss, loss_len) <= TT_ROUNDED_DECIMALS)
		r.prec = PREC_DEC, r.prec_n = TT_ROUNDED_DECIMALS;
	return ingest_emit(ig, &r);
}

static int tt_parse(struct ingest *ig, struct reader *rd)
{
	struct tt_step *seen = NULL;
	size_t n = 0, cap = 0;
	char *line;
	size_t len;
	int term, got, rc = ALIGN_OK;
	while ((got = reader_next_line(rd, &line, &len, &term)) == 1) {
		if (strspn(line, " \t\r") == len)
			continue;
		if (!term) {
			ingest_warn(ig, 0, "last line is not terminated (truncated file?): ignored");
			break;
		}
		if ((rc = tt_line(ig, &seen, &n, &cap, line, len)))
			break;
	}
	free(seen);
	if (rc)
		return rc;
	if (got != 0 && got != 1)
		return got;
	if (n == 0)
		return ingest_error(ig, 0, "no '<step> <loss>' line: not a torchtitan loss file");
	return ALIGN_OK;
}

/* Every complete non-blank line of the head must be "<step> <loss>": a loss file has nothing else, and
 * no other format's lines look like that. */
static int tt_detect(const char *head, size_t len, const char *path)
{
	int good = 0;
	for (const char *p = head, *end = head + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break; /* the head may cut the last line: judge complete lines only */
		size_t n = (size_t)(nl - p);
		int64_t step;
		const char *loss;
		size_t loss_len;
		size_t blank = 0;
		while (blank < n && (p[blank] == ' ' || p[blank] == '\t' || p[blank] == '\r'))
			blank++;
		if (blank < n) {
			if (tt_split(p, n, &step, &loss, &loss_len))
				return 0;
			good++;
		}
		p = nl + 1;
	}
	return good ? 80 : 0;
}

/* name, framework and summary: the torchtitan row of formats.def */
const struct ingest_parser ingest_parser_torchtitan = {
	.detect = tt_detect,
	.parse = tt_parse,
};
