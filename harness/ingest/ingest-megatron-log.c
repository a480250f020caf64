/* ingest-megatron-log: Megatron-LM stdout, the per-iteration training line and the validation lines
 * (specs/formats.md §1, launchers §9, pitfalls §11).
 *
 * What becomes a record (rank ALIGN_NO_RANK: the line is a global value printed by the last rank;
 * micro ALIGN_NO_MICRO; step = the printed iteration):
 *   - every key containing "loss" except "loss scale" ("lm loss", "mtp_1 loss", "z_loss", ...):
 *     phase "loss", PREC_TEXT (any float syntax: {:.6E}, the 16-decimal fork, INF, NAN), dtype fp32
 *     only where the value averages one iteration (log interval 1: loss_dtype_of), else fp64 or unknown;
 *   - learning rate, decoupled learning rate, loss scale, grad norm, num zeros, params norm and any
 *     other numeric field (MoE metrics): phase "metric";
 *   - consumed/skipped samples, elapsed time, throughput, energy, power, global batch size and the
 *     skipped/nan iteration counters: phase "meta". Kept, not dropped: nothing is lost, and a report
 *     compares "meta" only when asked (the golden parser keeps iteration-time the same way);
 *   - validation lines: "<key> value" as "validation <key>" ("validation-<set> <key>" with
 *     --multiple-validation-sets, "test <key>" for the end-of-training test set), phase "eval"; the
 *     PPL fields are exp() of the value and are not kept.
 * A loss key printed on an earlier iteration line of this file and absent from a later complete line is a
 * record with no text and `missing` set (Megatron omits NaN and negative losses). A line cut before the
 * end of its loss fields (no field printed after them, or it ends mid-field: iteration_complete) is a
 * warning and contributes nothing, unless the next lines continue it: a logger that wraps long lines
 * (Rich, textwrap, fold -s, a launcher prefix repeated on each piece) breaks the iteration line at blanks
 * into several physical lines, which are joined (continue_held) until the record is complete (at most
 * MLOG_MAX_JOINS lines; a line with its own iteration, or without a '|', ends the joining and the record
 * is cut). The arguments print "log_interval ..... N" sets the interval that
 * decides the losses' dtype. An iteration number
 * <= the last one seen is a restart: the earlier records from that step on are superseded.
 * Launcher prefixes, ANSI colour codes and '\r' segments are handled by matching the iteration and
 * validation grammars anywhere in a segment (find-all), so glued lines of interleaved ranks still
 * parse; everything else (timer blocks, memory reports, warnings) is ignored. Megatron-Bridge's
 * training_log prints Megatron-LM's iteration and validation lines (its "max attention logit" is a metric
 * like any other numeric field); its own lines between them, rank 0's "Step Time : 6.13s GPU utilization:
 * 798.4MODEL_TFLOP/s/GPU" and the "memory (GB) | mem-allocated-gigabytes: ..." report, are ignored too
 * (tests/samples/megatron-log/bridge.log).
 * Alignment anchors (final_loss:, [LOSS_PATH_MD5], ... of the Paddle team's patched Megatron, anchor.h)
 * on the same stream go to the anchor scanner, segment by segment; each iteration line tells it that
 * the step is complete (a clock check). A restart seen at an iteration line supersedes the global
 * records and the file's rank's records from that step on and rebases the anchors to the next step:
 * the anchors of the restarted iteration itself, printed before its line, are lost (warned). */
#include "anchor.h"
#include "err.h"
#include "ingest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MLOG_MAX_KEYS 64
#define MLOG_KEY_LEN 128
#define MLOG_MISSING "absent from the iteration line (Megatron omits NaN and negative losses)"

struct mlog_state {
	char keys[MLOG_MAX_KEYS][MLOG_KEY_LEN]; /* loss keys seen on iteration lines, in first-seen order */
	int n_keys;
	int64_t last_it;	/* last iteration number seen, -1 before the first */
	int64_t prev_it;	/* the iteration line before last_it's in this run, -1 if none */
	int64_t log_interval;	/* from the arguments print ("log_interval ..... N"), 0 unknown */
	const char *loss_dtype; /* of the current iteration line's losses (loss_dtype_of) */
	int64_t first_line;	/* first line that looked like an iteration line (cut or not), 0 none */
	char first_what[96];	/* what that line lacked */
	int64_t n_lines;	/* iteration and validation lines parsed */
	int header_set;
	struct anchor_state as; /* alignment anchors on the same stream */
	char *held;		/* an iteration record cut at the end of its line, from "iteration" on: the next
				 * lines may continue it (a logger that wraps long lines); NULL none */
	size_t held_len;
	char held_prefix[64]; /* what stood before "iteration" on its line (a launcher prefix), repeated by
			       * the continuation lines of some loggers */
	int64_t held_line;    /* the line the held record starts on */
	int held_joins;	      /* continuation lines joined so far */
};

struct field_kind {
	const char *key;
	const char *phase;
	const char *dtype; /* of the value Megatron formats (Python float = fp64, tensor .item() of fp32) */
	enum prec_kind prec;
};

static const struct field_kind known_fields[] = {
	{"consumed samples", "meta", "int64", PREC_TEXT},
	{"skipped samples", "meta", "int64", PREC_TEXT},
	{"elapsed time per iteration (ms)", "meta", "fp64", PREC_TEXT},
	{"throughput per GPU (TFLOP/s/GPU)", "meta", "fp64", PREC_TEXT},
	{"energy per GPU (J/iter/GPU)", "meta", "fp64", PREC_TEXT},
	{"power per GPU (W/GPU)", "meta", "fp64", PREC_TEXT},
	{"global batch size", "meta", "int64", PREC_TEXT},
	{"number of skipped iterations", "meta", "int64", PREC_TEXT},
	{"number of nan iterations", "meta", "int64", PREC_TEXT},
	/* Megatron-DeepSpeed's job metadata */
	{"consumed tokens", "meta", "int64", PREC_TEXT},
	{"actual seqlen", "meta", "int64", PREC_TEXT},
	{"samples per second", "meta", "fp64", PREC_TEXT},
	{"tokens per gpu per second (tgs)", "meta", "fp64", PREC_TEXT},
	{"TFLOPs", "meta", "fp64", PREC_TEXT},
	{"learning rate", "metric", "fp64", PREC_TEXT},
	{"decoupled learning rate", "metric", "fp64", PREC_TEXT},
	{"loss scale", "metric", "fp32", PREC_TEXT},
	{"grad norm", "metric", "fp64", PREC_TEXT},  /* fp32 sum of squares, .item() ** 0.5 in Python */
	{"num zeros", "metric", "fp32", PREC_EXACT}, /* str() of a count: exact ({:.1f} too) */
	{"params norm", "metric", "fp64", PREC_TEXT},
};

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}
static int is_word(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Remove ANSI escape sequences (ESC '[' params final-byte, or ESC + one byte) in place. */
static size_t strip_ansi(char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '\x1b') {
			s[o++] = s[i];
			continue;
		}
		if (i + 1 < n && s[i + 1] == '[') {
			i += 2;
			while (i < n && !((s[i] >= '@' && s[i] <= '~')))
				i++;
		} else if (i + 1 < n) {
			i++;
		}
	}
	s[o] = '\0';
	return o;
}

/* Parse "iteration <it>/<total> |" at p (p points at "iteration"); returns the byte after '|' or NULL. */
static const char *match_iteration(const char *p, const char *end, int64_t *it, int64_t *total)
{
	if (end - p < 9 || memcmp(p, "iteration", 9))
		return NULL;
	p += 9;
	if (p >= end || !is_blank(*p))
		return NULL;
	while (p < end && is_blank(*p))
		p++;
	if (p >= end || !is_digit(*p))
		return NULL;
	*it = 0;
	for (; p < end && is_digit(*p); p++)
		if (*it < (int64_t)1e15)
			*it = *it * 10 + (*p - '0');
	if (p >= end || *p != '/')
		return NULL;
	for (p++; p < end && is_blank(*p); p++)
		;
	if (p >= end || !is_digit(*p))
		return NULL;
	*total = 0;
	for (; p < end && is_digit(*p); p++)
		if (*total < (int64_t)1e15)
			*total = *total * 10 + (*p - '0');
	while (p < end && is_blank(*p))
		p++;
	return p < end && *p == '|' ? p + 1 : NULL;
}

/* First "iteration N/M |" in [s, end) that starts a word; sets *at and *after. */
static int find_iteration(const char *s, const char *end, const char **at, const char **after, int64_t *it,
			  int64_t *total)
{
	for (const char *p = s; p + 9 <= end; p++) {
		p = memchr(p, 'i', (size_t)(end - p));
		if (!p)
			return 0;
		if (p > s && is_word(p[-1]))
			continue;
		const char *a = match_iteration(p, end, it, total);
		if (a) {
			*at = p, *after = a;
			return 1;
		}
	}
	return 0;
}

/* "validation[-sfx] loss at <prefix> |" at p; returns the byte after '|' or NULL. */
static const char *match_validation(const char *p, const char *end, const char **sfx, size_t *sfx_len,
				    const char **prefix, size_t *prefix_len)
{
	if (end - p < 10 || memcmp(p, "validation", 10))
		return NULL;
	p += 10;
	*sfx = p, *sfx_len = 0;
	if (p < end && *p == '-') {
		while (p < end && *p != ' ' && *p != '\t')
			p++;
		*sfx = *sfx + 1;
		*sfx_len = (size_t)(p - *sfx);
		if (*sfx_len == 0)
			return NULL;
	}
	if (end - p < 9 || memcmp(p, " loss at ", 9))
		return NULL;
	p += 9;
	const char *bar = memchr(p, '|', (size_t)(end - p));
	if (!bar)
		return NULL;
	*prefix = p;
	*prefix_len = (size_t)(bar - p);
	while (*prefix_len && is_blank(p[*prefix_len - 1]))
		(*prefix_len)--;
	return bar + 1;
}

static void trim(const char **s, size_t *n)
{
	while (*n && is_blank(**s))
		(*s)++, (*n)--;
	while (*n && is_blank((*s)[*n - 1]))
		(*n)--;
}

static const struct field_kind *field_lookup(const char *key)
{
	for (size_t i = 0; i < sizeof known_fields / sizeof known_fields[0]; i++)
		if (!strcmp(known_fields[i].key, key))
			return &known_fields[i];
	return NULL;
}

static int is_loss_key(const char *key)
{
	return strstr(key, "loss") && strcmp(key, "loss scale");
}

static void note_loss_key(struct mlog_state *s, const char *key)
{
	for (int i = 0; i < s->n_keys; i++)
		if (!strcmp(s->keys[i], key))
			return;
	if (s->n_keys < MLOG_MAX_KEYS)
		snprintf(s->keys[s->n_keys++], MLOG_KEY_LEN, "%s", key);
}

/* One " key: value |" field of an iteration line. seen: bit i set when loss key i was printed. */
static int emit_field(struct ingest *ig, struct mlog_state *s, int64_t it, const char *key, const char *val,
		      size_t vlen, uint64_t *seen)
{
	struct rec r = {.rank = ALIGN_NO_RANK,
			.step = it,
			.micro = ALIGN_NO_MICRO,
			.seq = ALIGN_NO_SEQ,
			.name = key,
			.text = val,
			.text_len = vlen,
			.prec = PREC_TEXT};
	const struct field_kind *k = field_lookup(key);
	if (k) {
		r.phase = k->phase, r.dtype = k->dtype, r.prec = k->prec;
	} else if (is_loss_key(key)) {
		r.phase = "loss", r.dtype = s->loss_dtype;
		note_loss_key(s, key);
		for (int i = 0; i < s->n_keys; i++)
			if (!strcmp(s->keys[i], key))
				*seen |= 1ull << i;
	} else {
		if (numtext_valid(val, vlen))
			return ALIGN_OK; /* RL and future non-numeric fields: not a value */
		r.phase = "metric";
	}
	return ingest_emit(ig, &r);
}

/* The fields of one iteration record: rest is everything after "iteration N/M |" up to end. */
static int parse_iteration(struct ingest *ig, struct mlog_state *s, int64_t it, const char *rest, const char *end)
{
	uint64_t seen = 0;
	char key[MLOG_KEY_LEN];
	for (const char *p = rest; p < end;) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		if (!bar)
			break; /* an unterminated last piece is not a field */
		const char *colon = memchr(p, ':', (size_t)(bar - p));
		if (colon) {
			const char *k = p, *v = colon + 1;
			size_t kn = (size_t)(colon - p), vn = (size_t)(bar - v);
			trim(&k, &kn);
			trim(&v, &vn);
			if (kn && vn && kn < sizeof key) {
				memcpy(key, k, kn);
				key[kn] = '\0';
				ALIGN_TRY(ingest_err(ig), emit_field(ig, s, it, key, v, vn, &seen));
			}
		}
		p = bar + 1;
	}
	for (int i = 0; i < s->n_keys; i++) {
		if (seen & (1ull << i))
			continue;
		struct rec r = {.rank = ALIGN_NO_RANK,
				.step = it,
				.micro = ALIGN_NO_MICRO,
				.seq = ALIGN_NO_SEQ,
				.name = s->keys[i],
				.phase = "loss",
				.dtype = "fp32",
				.missing = MLOG_MISSING};
		ALIGN_TRY(ingest_err(ig), ingest_emit(ig, &r));
	}
	return ALIGN_OK;
}

/* dtype of the losses printed at iteration it (specs/formats.md §1): the sum of the fp32 per-iteration
 * losses over the log interval, .item() / advanced iterations, a Python float: an fp32 value only when
 * it averages one iteration. From the arguments print: interval 1, or an iteration that is no multiple of
 * the interval (the first-iteration print of a run, core_v0.16 on); a multiple of an interval > 1 is an
 * average (fp64). Without the arguments: iteration 1, or the third line in a row one iteration apart (an
 * interval k > 1 prints at most two consecutive iterations, a run's first and the next multiple of k), is
 * fp32; a line more than one iteration after the previous one is an average (fp64); anything else (the
 * first two lines of an excerpt) is unknown: NULL, an interval without bits. Restarted: s->last_it < 0. */
static const char *loss_dtype_of(const struct mlog_state *s, int64_t it)
{
	if (s->log_interval > 0)
		return s->log_interval == 1 || it % s->log_interval ? "fp32" : "fp64";
	if (it == 1 || (s->last_it >= 0 && s->last_it == it - 1 && s->prev_it == it - 2))
		return "fp32";
	if (s->last_it >= 0 && it - s->last_it > 1)
		return "fp64";
	return NULL;
}

static int start_iteration(struct ingest *ig, struct mlog_state *s, int64_t it, int64_t total)
{
	int rc;
	if (s->last_it >= 0 && it <= s->last_it) {
		ingest_warn(ig, 0, "run restarted at iteration %lld (after iteration %lld): the later lines win%s",
			    (long long)it, (long long)s->last_it,
			    s->as.n_anchors ? "; the anchors of that iteration, printed before this line, are lost"
					    : "");
		ALIGN_TRY(ingest_err(ig), ingest_supersede(ig, ALIGN_NO_RANK, it));
		if (s->as.n_anchors && ingest_file_rank(ig) >= 0 &&
		    (rc = ingest_supersede(ig, ingest_file_rank(ig), it)))
			return rc;
		anchor_restart(&s->as, it + 1);
		s->last_it = s->prev_it = -1; /* the spacing starts again with the restarted run */
	}
	s->loss_dtype = loss_dtype_of(s, it);
	s->prev_it = s->last_it;
	s->last_it = it;
	if (!s->header_set) {
		char hdr[64];
		snprintf(hdr, sizeof hdr, "{\"train_iters\":%lld}", (long long)total);
		ALIGN_TRY(ingest_err(ig), ingest_set_header(ig, hdr));
		s->header_set = 1;
	}
	return ALIGN_OK;
}

/* Fields Megatron prints after the loss fields, unconditionally or not (specs/formats.md §1 fields 12-17;
 * Megatron-DeepSpeed's throughput fields follow the counters). */
static const char *const after_losses[] = {
	"loss scale",
	"grad norm",
	"num zeros",
	"params norm",
	"number of skipped iterations",
	"number of nan iterations",
};

/* Is the iteration record [rest, end) complete up to its loss fields? When it ends its segment (to_eol)
 * it must end with a field's '|' (a line cut mid-field ends inside one). And it must hold a field printed
 * after the losses, or else every loss key seen so far (and at least one): a line without either ends
 * before (or inside) its loss fields. A record followed by another iteration in the same segment (glued
 * interleaved ranks) ends in that one's prefix, so only the second test applies to it. */
static int iteration_complete(const struct mlog_state *s, const char *rest, const char *end, int to_eol)
{
	const char *last_bar = NULL;
	int after = 0, losses = 0;
	uint64_t seen = 0;
	char key[MLOG_KEY_LEN];
	for (const char *p = rest; p < end;) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		if (!bar)
			break;
		const char *colon = memchr(p, ':', (size_t)(bar - p));
		const char *k = p;
		size_t kn = colon ? (size_t)(colon - p) : 0;
		trim(&k, &kn);
		if (kn && kn < sizeof key) {
			memcpy(key, k, kn);
			key[kn] = '\0';
			for (size_t i = 0; i < sizeof after_losses / sizeof after_losses[0]; i++)
				after |= !strcmp(key, after_losses[i]);
			if (is_loss_key(key) && !field_lookup(key)) {
				losses++;
				for (int i = 0; i < s->n_keys; i++)
					if (!strcmp(s->keys[i], key))
						seen |= 1ull << i;
			}
		}
		last_bar = bar;
		p = bar + 1;
	}
	if (to_eol)
		for (const char *p = last_bar ? last_bar + 1 : rest; p < end; p++)
			if (!is_blank(*p))
				return 0;
	uint64_t all = s->n_keys >= 64 ? ~0ull : (1ull << s->n_keys) - 1;
	return after || (losses && (seen & all) == all);
}

/* Remember the first line that looked like an iteration or validation line and what it lacked. */
static void note_candidate(struct ingest *ig, struct mlog_state *s, const char *what, int64_t line)
{
	if (s->first_line)
		return;
	s->first_line = line ? line : ingest_current_line(ig);
	snprintf(s->first_what, sizeof s->first_what, "%s", what);
}

/* Step of a validation prefix "iteration N[ on validation set| on test set]"; *test set for the latter. */
static int validation_step(const char *p, size_t n, int64_t *step, int *test)
{
	if (n < 11 || memcmp(p, "iteration ", 10) || !is_digit(p[10]))
		return -1;
	size_t i = 10;
	*step = 0;
	for (; i < n && is_digit(p[i]); i++)
		if (*step < (int64_t)1e15)
			*step = *step * 10 + (p[i] - '0');
	*test = i < n && n - i == 12 && !memcmp(p + i, " on test set", 12);
	return i == n || *test || (n - i == 18 && !memcmp(p + i, " on validation set", 18)) ? 0 : -1;
}

static int parse_validation(struct ingest *ig, const char *sfx, size_t sfx_len, int64_t step, int test,
			    const char *rest, const char *end)
{
	char name[MLOG_KEY_LEN + 64];
	for (const char *p = rest; p < end;) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		if (!bar)
			break;
		const char *f = p;
		size_t fn = (size_t)(bar - p);
		trim(&f, &fn);
		p = bar + 1;
		const char *v = NULL;
		for (size_t i = 0; i + 8 <= fn; i++)
			if (!memcmp(f + i, " value: ", 8))
				v = f + i;
		if (!v || v == f || (size_t)(v - f) >= MLOG_KEY_LEN)
			continue; /* "<key> PPL: x" and anything else */
		const char *val = v + 8;
		size_t vn = fn - (size_t)(val - f);
		trim(&val, &vn);
		if (!vn)
			continue;
		if (test)
			snprintf(name, sizeof name, "test %.*s", (int)(v - f), f);
		else if (sfx_len)
			snprintf(name, sizeof name, "validation-%.*s %.*s", (int)sfx_len, sfx, (int)(v - f), f);
		else
			snprintf(name, sizeof name, "validation %.*s", (int)(v - f), f);
		struct rec r = {.rank = ALIGN_NO_RANK,
				.step = step,
				.micro = ALIGN_NO_MICRO,
				.seq = ALIGN_NO_SEQ,
				.name = name,
				.phase = "eval",
				.dtype = "fp32",
				.text = val,
				.text_len = vn,
				.prec = PREC_TEXT};
		ALIGN_TRY(ingest_err(ig), ingest_emit(ig, &r));
	}
	return ALIGN_OK;
}

/* A validation line anywhere in [seg, end): returns 1 if one was found, its parse result in *rc. */
static int try_validation(struct ingest *ig, struct mlog_state *s, const char *seg, const char *end, int *rc)
{
	*rc = ALIGN_OK;
	for (const char *p = seg; p + 10 <= end; p++) {
		p = memchr(p, 'v', (size_t)(end - p));
		if (!p)
			return 0;
		if (p > seg && is_word(p[-1]))
			continue;
		const char *sfx, *prefix;
		size_t sfx_len, prefix_len;
		const char *rest = match_validation(p, end, &sfx, &sfx_len, &prefix, &prefix_len);
		int64_t step;
		int test;
		if (!rest || validation_step(prefix, prefix_len, &step, &test))
			continue;
		s->n_lines++;
		*rc = parse_validation(ig, sfx, sfx_len, step, test, rest, end);
		return 1;
	}
	return 0;
}

/* The arguments print "  log_interval .................... N" (a word of its own, dots, the value). */
static void scan_log_interval(struct mlog_state *s, const char *seg, const char *end)
{
	static const char key[] = "log_interval ";
	for (const char *p = seg; p + sizeof key - 1 < end; p++) {
		p = memchr(p, 'l', (size_t)(end - p));
		if (!p || p + sizeof key - 1 >= end)
			return;
		if ((p > seg && is_word(p[-1])) || memcmp(p, key, sizeof key - 1))
			continue;
		const char *q = p + sizeof key - 1;
		if (q >= end || *q != '.')
			continue;
		while (q < end && *q == '.')
			q++;
		while (q < end && is_blank(*q))
			q++;
		int64_t v = 0;
		const char *d = q;
		for (; q < end && is_digit(*q) && v < (int64_t)1e15; q++)
			v = v * 10 + (*q - '0');
		while (q < end && is_blank(*q))
			q++;
		if (q > d && q == end && v > 0)
			s->log_interval = v;
		return;
	}
}

#define MLOG_MAX_JOINS 8 /* continuation lines one iteration record may take */

/* The held record is not continued: warn that it was cut, as for any cut line, and forget it. */
static void drop_held(struct ingest *ig, struct mlog_state *s)
{
	if (!s->held)
		return;
	int64_t it = 0, total = 0;
	const char *end = s->held + s->held_len;
	match_iteration(s->held, end, &it, &total);
	ingest_warn(ig, s->held_line,
		    "iteration %lld: the line is cut before the end of its loss fields (a truncated log or an "
		    "excerpt?): ignored",
		    (long long)it);
	note_candidate(ig, s, "is cut before the end of its loss fields", s->held_line);
	free(s->held);
	s->held = NULL;
}

/* Hold the record [at, end) cut at the end of its line (prefix: [seg, at)) for the next lines. */
static int hold(struct ingest *ig, struct mlog_state *s, const char *seg, const char *at, const char *end, int64_t line)
{
	char *copy = malloc((size_t)(end - at) + 1);
	if (!copy)
		return fail_internal(ingest_err(ig), "out of memory");
	memcpy(copy, at, (size_t)(end - at));
	copy[end - at] = '\0';
	size_t pn = (size_t)(at - seg);
	snprintf(s->held_prefix, sizeof s->held_prefix, "%.*s", (int)(pn < sizeof s->held_prefix ? pn : 0), seg);
	free(s->held);
	s->held = copy, s->held_len = (size_t)(end - at), s->held_line = line;
	return ALIGN_OK;
}

/* One '\r'-separated segment of a line: every iteration record in it, else a validation record. A record
 * cut at the end of the segment is held when the segment ends the line (can_hold) and may be continued. */
static int parse_segment(struct ingest *ig, struct mlog_state *s, const char *seg, const char *end, int can_hold)
{
	const char *at, *after;
	int64_t it, total;
	int rc;
	if (!find_iteration(seg, end, &at, &after, &it, &total)) {
		if (!try_validation(ig, s, seg, end, &rc))
			scan_log_interval(s, seg, end);
		return rc;
	}
	while (at) {
		const char *next_at = NULL, *next_after = NULL;
		int64_t next_it = 0, next_total = 0;
		if (!find_iteration(after, end, &next_at, &next_after, &next_it, &next_total))
			next_at = NULL;
		const char *rec_end = next_at ? next_at : end;
		if (!iteration_complete(s, after, rec_end, !next_at)) {
			if (!next_at && can_hold && s->held_joins < MLOG_MAX_JOINS)
				return hold(ig, s, seg, at, end,
					    s->held_joins ? s->held_line : ingest_current_line(ig));
			ingest_warn(ig, s->held_joins ? s->held_line : 0,
				    "iteration %lld: the line is cut before the end of its loss fields (a truncated "
				    "log or an excerpt?): ignored",
				    (long long)it);
			note_candidate(ig, s, "is cut before the end of its loss fields",
				       s->held_joins ? s->held_line : 0);
			at = next_at, after = next_after, it = next_it, total = next_total;
			continue;
		}
		s->n_lines++;
		if ((rc = start_iteration(ig, s, it, total)) || (rc = parse_iteration(ig, s, it, after, rec_end)))
			return rc;
		anchor_check_step(ig, &s->as, it);
		at = next_at, after = next_after, it = next_it, total = next_total;
	}
	return ALIGN_OK;
}

/* A line that continues the held record: no iteration of its own, and a field's '|' in it (Megatron ends
 * every field with one). Joined with one blank (none when the held text ends with one, as fold -s leaves
 * it) after the held prefix (when the line repeats it) and the line's indentation are removed (loggers
 * wrap at blanks, so the break stood for a blank; a break inside a number is not joined), then parsed
 * again: complete, it gives its records; still cut, it stays held. Returns 1 when the line was taken. */
static int continue_held(struct ingest *ig, struct mlog_state *s, const char *line, size_t len, int *rc)
{
	const char *end = line + len, *at, *after;
	int64_t it, total;
	*rc = ALIGN_OK;
	if (!s->held || find_iteration(line, end, &at, &after, &it, &total) || !memchr(line, '|', len) ||
	    memchr(line, '\r', len))
		return 0;
	size_t pn = strlen(s->held_prefix);
	if (pn && len >= pn && !memcmp(line, s->held_prefix, pn))
		line += pn;
	while (line < end && is_blank(*line))
		line++;
	int space = s->held_len && !is_blank(s->held[s->held_len - 1]); /* fold -s keeps the blank on the line */
	size_t n = (size_t)(end - line), joined_len = s->held_len + (size_t)space + n;
	char *joined = malloc(joined_len + 1);
	if (!joined) {
		*rc = fail_internal(ingest_err(ig), "out of memory");
		return 1;
	}
	memcpy(joined, s->held, s->held_len);
	if (space)
		joined[s->held_len] = ' ';
	memcpy(joined + s->held_len + (size_t)space, line, n);
	joined[joined_len] = '\0';
	free(s->held);
	s->held = NULL;
	s->held_joins++;
	*rc = parse_segment(ig, s, joined, joined + joined_len, 1);
	free(joined);
	if (!s->held)
		s->held_joins = 0;
	return 1;
}

static int mlog_parse(struct ingest *ig, struct reader *rd)
{
	struct mlog_state *s = calloc(1, sizeof *s);
	if (!s)
		return fail_internal(ingest_err(ig), "out of memory");
	s->last_it = -1;
	char *line;
	size_t len;
	int term, got = 0, rc = anchor_init(ig, &s->as);
	while (!rc && (got = reader_next_line(rd, &line, &len, &term)) == 1) {
		if (!term) {
			if (strspn(line, " \t\r") != len)
				ingest_warn(ig, 0, "last line is not terminated (truncated log?): ignored");
			break;
		}
		len = strip_ansi(line, len);
		if (continue_held(ig, s, line, len, &rc))
			continue;
		drop_held(ig, s);
		s->held_joins = 0;
		const char *end = line + len;
		for (const char *seg = line; !rc && seg <= end;) {
			const char *cr = memchr(seg, '\r', (size_t)(end - seg));
			const char *seg_end = cr ? cr : end;
			rc = anchor_scan_line(ig, &s->as, seg, (size_t)(seg_end - seg));
			if (!rc)
				rc = parse_segment(ig, s, seg, seg_end, !cr);
			seg = seg_end + 1;
		}
	}
	if (!rc)
		drop_held(ig, s);
	free(s->held);
	if (!rc && got != 0 && got != 1)
		rc = got;
	if (!rc && s->n_lines == 0 && s->as.n_anchors == 0)
		rc = s->first_line ? ingest_error(ig, s->first_line,
						  "no complete Megatron iteration or validation line: the first "
						  "iteration line (here) %s",
						  s->first_what)
				   : ingest_error(ig, 0,
						  "no Megatron iteration ('iteration N/M | key: value | ...') or "
						  "validation line in this file");
	if (rc)
		anchor_free(&s->as);
	else
		rc = anchor_finish(ig, &s->as);
	free(s);
	return rc;
}

/* Startup banners that only Megatron prints: a weak signal for logs whose first iteration line is
 * further than the detection window (argument dumps and model printouts are long). */
static const char *const banners[] = {
	"------------------------ arguments ------------------------",
	"> building GPT model ...",
	"[after megatron is initialized]",
};

static int mlog_detect(const char *head, size_t len, const char *path)
{
	char buf[4096];
	int score = 0;
	const char *p = head, *end = head + len;
	for (int lines = 0; p < end && lines < 4000; lines++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		if (n >= sizeof buf)
			n = sizeof buf - 1;
		memcpy(buf, p, n);
		n = strip_ansi(buf, n);
		const char *at, *after, *b = buf, *e = buf + n;
		int64_t it, total;
		if (find_iteration(b, e, &at, &after, &it, &total) && memchr(after, '|', (size_t)(e - after)) &&
		    memchr(after, ':', (size_t)(e - after)))
			return 95;
		const char *sfx, *prefix;
		size_t sfx_len, prefix_len;
		const char *v = strstr(buf, "validation");
		int64_t step;
		int test;
		if (v && match_validation(v, e, &sfx, &sfx_len, &prefix, &prefix_len) &&
		    !validation_step(prefix, prefix_len, &step, &test) && score < 70)
			score = 70;
		for (size_t i = 0; i < sizeof banners / sizeof banners[0]; i++)
			if (strstr(buf, banners[i]) && score < 40)
				score = 40;
		if (!nl)
			break;
		p = nl + 1;
	}
	return score;
}

/* name, framework and summary: the megatron_log row of formats.def */
const struct ingest_parser ingest_parser_megatron_log = {
	.detect = mlog_detect,
	.parse = mlog_parse,
};
