/* ingest-paddle-legacy: the older PaddleNLP / ERNIE layouts that paddle-log reads besides the Trainer's
 * "key: value, ..." message (paddle-legacy.h):
 *
 * 1. The pre-Trainer example scripts' step line, printed every logging_steps:
 *      global step 20, epoch: 0, batch: 19, loss: 9.867420, speed: 1.52 step/s
 *      global step 20, loss: 9.867420, lm_loss: 9.341120, sop_loss: 0.526300, learning rate: 9.999e-05, ...
 *    "%f"/"%.5e" prints of the step's own fp32 loss (no average): PREC_TEXT; loss, *_loss: dtype fp32,
 *    phase loss; "learning rate" is learning_rate (fp64, optim); epoch, batch, speed, ips, avg_*cost,
 *    *_time: meta; values that are no number ("1.52 step/s" keeps its number) are skipped.
 *    Their evaluate() prints "eval loss: %f, acc: %s, " then "eval done total : T s" on the same line:
 *    eval_loss (fp32, an interval) and eval_<metric> at the last global step, phase eval.
 * 2. The early Trainer's dict print, on one line or wrapped over several tab-indented lines:
 *      {'loss': 2.34567891, 'learning_rate': 4.9e-05, 'global_step': 10, 'epoch': 0.01}
 *    read by the Trainer dict rules (paddle_emit_dict): its step is the dict's global_step, so a wrapped
 *    dict is joined line by line until its closing brace (16 lines at most), never dropped. */
#include "paddle-legacy.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEGACY_MAX_PAIRS 64
#define LEGACY_MAX_WRAP 16

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int has_suffix(const char *k, size_t n, const char *suf)
{
	size_t m = strlen(suf);
	return n >= m && !memcmp(k + n - m, suf, m);
}

static int emit_text(struct ingest *ig, int64_t step, int64_t line, const char *name, const char *phase,
		     const char *dtype, const char *v, size_t n)
{
	struct rec r = {.rank = ALIGN_NO_RANK,
			.step = step,
			.micro = ALIGN_NO_MICRO,
			.seq = ALIGN_NO_SEQ,
			.line = line,
			.name = name,
			.phase = phase,
			.dtype = dtype,
			.text = v,
			.text_len = n,
			.prec = PREC_TEXT};
	return ingest_emit(ig, &r);
}

/* "global step N, key: value, key words: value unit, ...": 1 when m is one (records emitted), 0 when not. */
int paddle_legacy_step_line(struct ingest *ig, struct paddle_state *ps, const char *m, size_t n, int64_t line, int *rc)
{
	static const char tag[] = "global step ";
	*rc = ALIGN_OK;
	if (n < sizeof tag || memcmp(m, tag, sizeof tag - 1) || !is_digit(m[sizeof tag - 1]))
		return 0;
	size_t i = sizeof tag - 1;
	int64_t step = 0;
	for (; i < n && is_digit(m[i]) && i < sizeof tag + 15; i++)
		step = step * 10 + (m[i] - '0');
	if (i >= n || m[i] != ',' || !memmem(m + i, n - i, "loss: ", 6))
		return 0;
	if (ps->last_step && step <= ps->last_step) {
		ingest_warn(ig, line,
			    "global step %lld after %lld without a start banner (a rerun appended?): records from "
			    "step %lld on are superseded",
			    (long long)step, (long long)ps->last_step, (long long)step);
		if ((*rc = ingest_supersede(ig, ALIGN_NO_RANK, step)))
			return 1;
	}
	ps->last_step = step;
	ps->dicts++;
	while (i < n) { /* ", key: value" */
		while (i < n && (m[i] == ',' || m[i] == ' '))
			i++;
		const char *colon = memchr(m + i, ':', n - i);
		if (!colon)
			break;
		size_t ks = i, kl = (size_t)(colon - m) - i;
		i = (size_t)(colon - m) + 1;
		while (i < n && m[i] == ' ')
			i++;
		size_t vs = i;
		const char *comma = memmem(m + i, n - i, ", ", 2);
		size_t ve = comma ? (size_t)(comma - m) : n;
		i = ve;
		size_t vn = 0; /* the number at the start of the value ("1.52 step/s" -> "1.52") */
		while (vs + vn < ve && m[vs + vn] != ' ')
			vn++;
		char name[64];
		size_t o = 0;
		for (size_t k = 0; k < kl && o + 1 < sizeof name; k++)
			name[o++] = m[ks + k] == ' ' ? '_' : m[ks + k];
		name[o] = '\0';
		int num = vn && !numtext_valid(m + vs, vn);
		int loss = has_suffix(name, o, "loss");
		if (!num) {
			if (loss) {
				*rc = ingest_error(ig, line, "field '%s': not a number: '%.*s'", name,
						   (int)(ve - vs > 40 ? 40 : ve - vs), m + vs);
				return 1;
			}
			continue;
		}
		const char *phase = "meta", *dtype = "fp64";
		if (loss)
			phase = "loss", dtype = "fp32";
		else if (!strcmp(name, "learning_rate") || !strcmp(name, "lr"))
			phase = "optim", snprintf(name, sizeof name, "learning_rate");
		else if (!strcmp(name, "ppl") || !strcmp(name, "acc") || !strcmp(name, "accuracy"))
			phase = "metric";
		if ((*rc = emit_text(ig, step, line, name, phase, dtype, m + vs, vn)))
			return 1;
	}
	return 1;
}

/* "eval loss: %f, acc: %s, ...[, eval done total : T s]" of the example scripts' evaluate(), printed at the
 * step of the last "global step N" line (the evaluation runs inside that step's iteration). The loss is
 * "%f" of the fp32 loss tensor (eval_loss, phase eval, dtype fp32, an interval); acc, precision, recall,
 * f1, ... are eval_<key> of unknown dtype; the timing after "eval done" is not kept. 1 when m is one. */
int paddle_legacy_eval_line(struct ingest *ig, struct paddle_state *ps, const char *m, size_t n, int64_t line, int *rc)
{
	static const char tag[] = "eval loss: ";
	*rc = ALIGN_OK;
	if (n < sizeof tag || memcmp(m, tag, sizeof tag - 1))
		return 0;
	const char *done = memmem(m, n, "eval done", 9);
	if (done)
		n = (size_t)(done - m);
	int64_t step = ps->last_step ? ps->last_step : ALIGN_NO_STEP;
	if (!ps->last_step)
		ingest_warn(ig, line, "'eval loss' before any 'global step N' line: recorded without a step");
	size_t i = 0;
	while (i < n) { /* "key: value, " pairs; "eval loss" first */
		while (i < n && (m[i] == ',' || m[i] == ' '))
			i++;
		const char *colon = memchr(m + i, ':', n - i);
		if (!colon)
			break;
		size_t ks = i, kl = (size_t)(colon - m) - i;
		i = (size_t)(colon - m) + 1;
		while (i < n && m[i] == ' ')
			i++;
		size_t vs = i;
		const char *comma = memmem(m + i, n - i, ", ", 2);
		size_t ve = comma ? (size_t)(comma - m) : n;
		while (ve > vs && (m[ve - 1] == ' ' || m[ve - 1] == ','))
			ve--;
		i = comma ? (size_t)(comma - m) : n;
		char name[64] = "eval_";
		size_t o = 5;
		size_t k0 = kl >= 5 && !memcmp(m + ks, "eval ", 5) ? 5 : 0;
		for (size_t k = k0; k < kl && o + 1 < sizeof name; k++)
			name[o++] = m[ks + k] == ' ' ? '_' : m[ks + k];
		name[o] = '\0';
		int loss = !strcmp(name, "eval_loss");
		if (ve == vs || numtext_valid(m + vs, ve - vs)) {
			if (loss) {
				*rc = ingest_error(ig, line, "field 'eval loss': not a number: '%.*s'",
						   (int)(ve - vs > 40 ? 40 : ve - vs), m + vs);
				return 1;
			}
			continue; /* a tuple, a word: no number */
		}
		if ((*rc = emit_text(ig, step, line, name, "eval", loss ? "fp32" : NULL, m + vs, ve - vs)))
			return 1;
	}
	return 1;
}

/* ---- Python dict prints ---- */

/* "{'k': v, 'k2': 'text', ...}" into pairs (pointers into d); -1 when d is no such dict. */
static int dict_pairs(const char *d, size_t n, struct paddle_kv *kv, size_t max, size_t *nkv)
{
	size_t i = 0;
	*nkv = 0;
	while (i < n && (d[i] == ' ' || d[i] == '\t'))
		i++;
	if (i == n || d[i] != '{')
		return -1;
	i++;
	while (i < n && *nkv < max) {
		while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == ','))
			i++;
		if (i < n && d[i] == '}')
			return 0;
		if (i == n || (d[i] != '\'' && d[i] != '"'))
			return -1;
		char q = d[i++];
		const char *ke = memchr(d + i, q, n - i);
		if (!ke)
			return -1;
		size_t ks = i, kl = (size_t)(ke - d) - i;
		i = (size_t)(ke - d) + 1;
		if (i + 1 >= n || d[i] != ':')
			return -1;
		i++;
		while (i < n && d[i] == ' ')
			i++;
		struct paddle_kv *p = &kv[(*nkv)++];
		*p = (struct paddle_kv){.key = d + ks, .key_len = kl};
		if (i < n && (d[i] == '\'' || d[i] == '"')) {
			char vq = d[i++];
			const char *ve = memchr(d + i, vq, n - i);
			if (!ve)
				return -1;
			p->val = d + i, p->val_len = (size_t)(ve - d) - i, p->is_string = 1;
			i = (size_t)(ve - d) + 1;
		} else {
			size_t vs = i;
			while (i < n && d[i] != ',' && d[i] != '}')
				i++;
			size_t ve = i;
			while (ve > vs && (d[ve - 1] == ' ' || d[ve - 1] == '\t'))
				ve--;
			p->val = d + vs, p->val_len = ve - vs;
			p->is_string = 0;
		}
	}
	return -1;
}

static int dict_closed(const char *d, size_t n)
{
	return memchr(d, '}', n) != NULL;
}

/* Does m start a Trainer dict print ("{'loss': ..." or "{'eval_loss': ...", possibly wrapped)? */
static int dict_start(const char *m, size_t n)
{
	size_t i = 0;
	while (i < n && (m[i] == ' ' || m[i] == '\t'))
		i++;
	if (n - i < 3 || m[i] != '{' || (m[i + 1] != '\'' && m[i + 1] != '"'))
		return 0;
	return memmem(m + i, n - i, "loss", 4) != NULL || memmem(m + i, n - i, "global_step", 11) != NULL ||
	       !dict_closed(m + i, n - i);
}

static int grow(struct ingest *ig, struct paddle_legacy *pl, size_t need)
{
	if (need <= pl->cap)
		return ALIGN_OK;
	size_t c = pl->cap ? pl->cap : 1024;
	while (c < need)
		c *= 2;
	char *g = realloc(pl->dict, c);
	if (!g)
		return fail_internal(ingest_err(ig), "out of memory");
	pl->dict = g, pl->cap = c;
	return ALIGN_OK;
}

static int dict_emit(struct ingest *ig, struct paddle_state *ps, struct paddle_legacy *pl)
{
	struct paddle_kv kv[LEGACY_MAX_PAIRS];
	size_t nkv;
	size_t len = pl->len;
	pl->len = 0;
	if (dict_pairs(pl->dict, len, kv, LEGACY_MAX_PAIRS, &nkv)) {
		ingest_warn(ig, pl->line, "a trainer dict print that is no Python dict: ignored");
		return ALIGN_OK;
	}
	return paddle_emit_dict(ig, ps, kv, nkv, pl->line);
}

int paddle_legacy_dict(struct ingest *ig, struct paddle_state *ps, struct paddle_legacy *pl, const char *m, size_t n,
		       int64_t line, int *rc)
{
	*rc = ALIGN_OK;
	if (pl->len) { /* a wrapped dict goes on */
		if ((*rc = grow(ig, pl, pl->len + n + 2)))
			return 1;
		pl->dict[pl->len++] = ' ';
		memcpy(pl->dict + pl->len, m, n);
		pl->len += n;
		if (dict_closed(m, n))
			*rc = dict_emit(ig, ps, pl);
		else if (++pl->lines >= LEGACY_MAX_WRAP) {
			ingest_warn(ig, pl->line, "a trainer dict print is not closed within %d lines: ignored",
				    LEGACY_MAX_WRAP);
			pl->len = 0;
		}
		return 1;
	}
	if (!dict_start(m, n))
		return 0;
	if ((*rc = grow(ig, pl, n + 1)))
		return 1;
	memcpy(pl->dict, m, n);
	pl->len = n, pl->line = line, pl->lines = 1;
	if (dict_closed(m, n))
		*rc = dict_emit(ig, ps, pl);
	return 1;
}

int paddle_legacy_open(const struct paddle_legacy *pl)
{
	return pl->len != 0;
}

void paddle_legacy_free(struct paddle_legacy *pl)
{
	free(pl->dict);
	pl->dict = NULL;
	pl->len = pl->cap = 0;
}
