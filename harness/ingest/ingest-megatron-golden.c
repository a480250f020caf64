/* ingest-megatron-golden: Megatron functional-test golden values (specs/formats.md §2),
 * tests/functional_tests/test_cases/<family>/<test>/golden_values_<env>_<platform>[_2nd].json.
 *
 * Schema v2: {"<metric>": {"start_step", "end_step", "step_interval", "values": {"<step>": x | "nan"}}}.
 * Schema v1: {"<metric>": {"start_step": a, "end_step": b, "step_interval": c, "values": [x, ...]},
 *             "iteration_timing_avg": 0.09, ...}: values[i] is TensorBoard scalar list index a + i*c of
 *             Python's slice [a:b:c], and index 0 is iteration 1, so values[i] is iteration a + i*c + 1.
 *             Top-level members that are not objects are ignored.
 * Values are round(tb_float32, 5): PREC_DEC with 5 decimals, dtype fp32 (TensorBoard stores float32),
 * so the core recovers the bits where the float32 spacing exceeds 1e-5 (large counts and byte sizes).
 * The text kept is the number exactly as written in the file: jansson validates the document (syntax,
 * duplicate keys) and a small scanner over the same bytes finds each value's token and line.
 * Records: rank ALIGN_NO_RANK, micro ALIGN_NO_MICRO, in step order (then file order of the metrics);
 * phase "loss" for names with "loss", "meta" for iteration-time and mem-*, else "metric".
 * The leading steps whose every metric is "nan" (a resumed job's placeholders for the steps it did not
 * run) are not recorded (warned): the run lacks them. Any other "nan" is a NaN.
 * Inference goldens (request-indexed objects), empty files and objects without metrics are refused. */
#include "err.h"
#include "ingest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN_NOT_TRAINING "not a training-metric golden file"

/* A span of the raw document and the line it starts on. */
struct span {
	const char *p;
	size_t n;
	int64_t line;
};

/* One value to emit. */
struct gval {
	int64_t step;
	size_t metric;	 /* index in file order: tie-break after the step */
	struct span tok; /* the number or string token */
};

/* Scanner over a document jansson already accepted: no error handling beyond staying in bounds. */
struct scan {
	const char *p, *end;
	int64_t line;
};

static void skip_ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) {
		if (*s->p == '\n')
			s->line++;
		s->p++;
	}
}

/* Any JSON value at s->p; its span in *out. */
static void skip_value(struct scan *s, struct span *out)
{
	skip_ws(s);
	out->p = s->p, out->line = s->line;
	if (s->p >= s->end) {
		out->n = 0;
		return;
	}
	if (*s->p == '"') {
		for (s->p++; s->p < s->end && *s->p != '"'; s->p++)
			if (*s->p == '\\')
				s->p++;
		s->p++;
	} else if (*s->p == '{' || *s->p == '[') {
		int depth = 0;
		do {
			char c = *s->p;
			if (c == '"') {
				struct span str;
				skip_value(s, &str);
				continue;
			}
			if (c == '\n')
				s->line++;
			depth += (c == '{' || c == '[') - (c == '}' || c == ']');
			s->p++;
		} while (s->p < s->end && depth > 0);
	} else {
		while (s->p < s->end && !strchr(",}] \t\r\n", *s->p))
			s->p++;
	}
	out->n = (size_t)(s->p - out->p);
}

/* Decode a JSON string token (with its quotes) into a malloc'd string, through jansson. */
static char *decode_key(const struct span *k)
{
	json_error_t e;
	json_t *v = json_loadb(k->p, k->n, JSON_DECODE_ANY, &e);
	char *out = json_is_string(v) ? strdup(json_string_value(v)) : NULL;
	json_decref(v);
	return out;
}

/* Enter the object or array at s->p: returns 1 when positioned after '{' / '['. */
static int enter(struct scan *s, char open)
{
	skip_ws(s);
	if (s->p >= s->end || *s->p != open)
		return 0;
	s->p++;
	return 1;
}

/* Next member of an object: key span and the scanner at its value; 0 at the closing brace. */
static int next_member(struct scan *s, struct span *key)
{
	skip_ws(s);
	if (s->p < s->end && *s->p == ',')
		s->p++;
	skip_ws(s);
	if (s->p >= s->end || *s->p == '}') {
		s->p++;
		return 0;
	}
	skip_value(s, key);
	skip_ws(s);
	s->p++; /* ':' */
	return 1;
}

/* Next element of an array; 0 at the closing bracket. */
static int next_element(struct scan *s)
{
	skip_ws(s);
	if (s->p < s->end && *s->p == ',')
		s->p++;
	skip_ws(s);
	if (s->p >= s->end || *s->p == ']') {
		s->p++;
		return 0;
	}
	return 1;
}

struct golden {
	struct ingest *ig;
	struct gval *v;
	size_t n, cap;
	char **names; /* metric names in file order */
	size_t n_names;
};

static int push(struct golden *g, int64_t step, size_t metric, const struct span *tok)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 256;
		struct gval *grown = realloc(g->v, cap * sizeof *grown);
		if (!grown)
			return fail_internal(ingest_err(g->ig), "out of memory");
		g->v = grown, g->cap = cap;
	}
	g->v[g->n++] = (struct gval){.step = step, .metric = metric, .tok = *tok};
	return ALIGN_OK;
}

/* A value token must be a number or the string "nan". */
static int check_value(struct golden *g, const char *metric, const struct span *tok, json_t *v)
{
	if (json_is_number(v))
		return ALIGN_OK;
	if (json_is_string(v) && !strcmp(json_string_value(v), "nan"))
		return ALIGN_OK;
	return ingest_error(g->ig, tok->line, "metric '%s': value %.*s is not a number or \"nan\"", metric,
			    (int)(tok->n > 40 ? 40 : tok->n), tok->p);
}

static int get_slice_int(struct golden *g, const char *metric, json_t *m, const char *key, int64_t line, int64_t *out)
{
	json_t *v = json_object_get(m, key);
	if (!json_is_integer(v))
		return ingest_error(g->ig, line, "metric '%s': '%s' must be an integer", metric, key);
	*out = json_integer_value(v);
	return ALIGN_OK;
}

/* Schema v2: "values" is an object of decimal step strings. */
static int collect_v2(struct golden *g, const char *metric, size_t mi, json_t *values, struct scan *s)
{
	struct span key, tok;
	enter(s, '{');
	while (next_member(s, &key)) {
		skip_value(s, &tok);
		char *k = decode_key(&key);
		int64_t step = -1;
		if (k && k[0] && strlen(k) < 16 && strspn(k, "0123456789") == strlen(k))
			step = strtoll(k, NULL, 10);
		if (step < 0) {
			int rc =
				ingest_error(g->ig, key.line, "metric '%s': step key %.*s is not a decimal step number",
					     metric, (int)(key.n > 40 ? 40 : key.n), key.p);
			free(k);
			return rc;
		}
		int rc = check_value(g, metric, &tok, json_object_get(values, k));
		free(k);
		if (rc || (rc = push(g, step, mi, &tok)))
			return rc;
	}
	return ALIGN_OK;
}

/* Schema v1: "values" is a list, the slice [start:end:interval] of the per-iteration list. */
static int collect_v1(struct golden *g, const char *metric, size_t mi, json_t *m, struct scan *s, int64_t line)
{
	int64_t start = 0, end = 0, interval = 0;
	int rc;
	if ((rc = get_slice_int(g, metric, m, "start_step", line, &start)) ||
	    (rc = get_slice_int(g, metric, m, "end_step", line, &end)) ||
	    (rc = get_slice_int(g, metric, m, "step_interval", line, &interval)))
		return rc;
	if (start < 0 || end < start || interval < 1)
		return ingest_error(g->ig, line,
				    "metric '%s': slice %lld:%lld:%lld is not a forward slice of the "
				    "iteration list",
				    metric, (long long)start, (long long)end, (long long)interval);
	json_t *values = json_object_get(m, "values");
	size_t slots = (size_t)((end - start + interval - 1) / interval);
	if (json_array_size(values) > slots)
		return ingest_error(g->ig, line, "metric '%s': %zu values, but the slice %lld:%lld:%lld holds %zu",
				    metric, json_array_size(values), (long long)start, (long long)end,
				    (long long)interval, slots);
	struct span tok;
	enter(s, '[');
	for (size_t i = 0; next_element(s); i++) {
		skip_value(s, &tok);
		if ((rc = check_value(g, metric, &tok, json_array_get(values, i))) ||
		    (rc = push(g, start + (int64_t)i * interval + 1, mi, &tok)))
			return rc;
	}
	return ALIGN_OK;
}

/* One top-level member: a metric object (collected), a top-level scalar (ignored), else refused. */
static int collect_member(struct golden *g, const char *name, json_t *m, struct scan *s, int64_t line)
{
	if (!json_is_object(m)) {
		struct span skip;
		skip_value(s, &skip);
		return ALIGN_OK; /* v1 top-level scalars such as iteration_timing_avg */
	}
	json_t *values = json_object_get(m, "values");
	if (!values)
		return ingest_error(g->ig, line, GOLDEN_NOT_TRAINING ": member '%s' has no \"values\"", name);
	if (!json_is_object(values) && !json_is_array(values))
		return ingest_error(g->ig, line, "metric '%s': \"values\" must be an object of steps or a list", name);
	char **grown = realloc(g->names, (g->n_names + 1) * sizeof *grown);
	if (!grown)
		return fail_internal(ingest_err(g->ig), "out of memory");
	g->names = grown;
	size_t mi = g->n_names;
	if (!(g->names[g->n_names++] = strdup(name)))
		return fail_internal(ingest_err(g->ig), "out of memory");
	/* walk the metric object's members to the "values" token */
	struct span key, val;
	enter(s, '{');
	int rc = ALIGN_OK;
	while (next_member(s, &key)) {
		char *k = decode_key(&key);
		int is_values = k && !strcmp(k, "values");
		free(k);
		if (!is_values) {
			skip_value(s, &val);
			continue;
		}
		rc = json_is_object(values) ? collect_v2(g, name, mi, values, s) : collect_v1(g, name, mi, m, s, line);
		if (rc)
			return rc;
	}
	return ALIGN_OK;
}

static int cmp_gval(const void *a, const void *b)
{
	const struct gval *x = a, *y = b;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->metric < y->metric ? -1 : x->metric > y->metric;
}

static const char *metric_phase(const char *name)
{
	if (strstr(name, "loss"))
		return "loss";
	if (!strcmp(name, "iteration-time") || !strncmp(name, "mem-", 4))
		return "meta";
	return "metric";
}

/* The values before index *first_real: the leading steps whose every value is the string "nan", when a
 * real value follows. A resumed job's golden values write "nan" for every metric of the steps it did not
 * run (1-50 of a resume at 51): those steps are absent from the run, not NaN. A "nan" among real values,
 * or after them, is a NaN. */
static size_t placeholder_end(const struct golden *g)
{
	size_t i = 0;
	while (i < g->n && g->v[i].tok.p[0] == '"')
		i++;
	if (i == g->n)
		return 0; /* nothing real follows: the NaNs are values */
	while (i > 0 && g->v[i - 1].step == g->v[i].step)
		i--; /* the step of the first real value is recorded whole */
	return i;
}

static int emit_all(struct golden *g)
{
	if (g->n > 1) /* g->v is NULL when no metric has a value: never NULL to qsort */
		qsort(g->v, g->n, sizeof *g->v, cmp_gval);
	size_t skip = placeholder_end(g);
	if (skip)
		ingest_warn(g->ig, g->v[0].tok.line,
			    "steps %lld-%lld: every metric is \"nan\" (the placeholders of a resumed job's golden "
			    "values): not recorded, the run lacks those steps",
			    (long long)g->v[0].step, (long long)g->v[skip - 1].step);
	for (size_t i = skip; i < g->n; i++) {
		const struct gval *v = &g->v[i];
		const char *name = g->names[v->metric];
		if (i > 0 && v->step == g->v[i - 1].step && v->metric == g->v[i - 1].metric)
			return ingest_error(g->ig, v->tok.line, "metric '%s': step %lld appears twice", name,
					    (long long)v->step);
		struct rec r = {.rank = ALIGN_NO_RANK,
				.step = v->step,
				.micro = ALIGN_NO_MICRO,
				.seq = ALIGN_NO_SEQ,
				.line = v->tok.line,
				.name = name,
				.phase = metric_phase(name),
				.dtype = "fp32",
				.prec = PREC_DEC,
				.prec_n = 5,
				.text = v->tok.p,
				.text_len = v->tok.n};
		if (v->tok.p[0] == '"') /* "nan": the text without its quotes */
			r.text = v->tok.p + 1, r.text_len = v->tok.n - 2;
		ALIGN_TRY(ingest_err(g->ig), ingest_emit(g->ig, &r));
	}
	return ALIGN_OK;
}

static int golden_walk(struct golden *g, json_t *doc, const char *buf, size_t len)
{
	struct scan s = {.p = buf, .end = buf + len, .line = 1};
	struct span key;
	int rc = ALIGN_OK;
	enter(&s, '{');
	while (!rc && next_member(&s, &key)) {
		char *name = decode_key(&key);
		if (!name)
			return fail_internal(ingest_err(g->ig), "cannot decode a key the JSON parser accepted");
		rc = collect_member(g, name, json_object_get(doc, name), &s, key.line);
		free(name);
	}
	if (rc)
		return rc;
	if (g->n_names == 0)
		return ingest_error(g->ig, 1, GOLDEN_NOT_TRAINING ": no metric with \"values\"");
	return emit_all(g);
}

static int golden_parse(struct ingest *ig, struct reader *rd)
{
	char *buf;
	size_t len;
	int rc = reader_slurp(rd, &buf, &len);
	if (rc)
		return rc;
	if (strspn(buf, " \t\r\n") == len)
		return ingest_error(ig, 1, GOLDEN_NOT_TRAINING " (empty)");
	json_error_t e;
	json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
	if (!doc)
		return ingest_error(ig, e.line > 0 ? e.line : 1, "invalid JSON: %s (column %d)", e.text, e.column);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return ingest_error(ig, 1, GOLDEN_NOT_TRAINING ": the top level is not an object");
	}
	struct golden g = {.ig = ig};
	rc = golden_walk(&g, doc, buf, len);
	for (size_t i = 0; i < g.n_names; i++)
		free(g.names[i]);
	free(g.names);
	free(g.v);
	json_decref(doc);
	return rc;
}

/* A JSON object whose head shows the golden metric layout. */
static int golden_detect(const char *head, size_t len, const char *path)
{
	size_t i = 0;
	while (i < len && strchr(" \t\r\n", head[i]))
		i++;
	if (i >= len || head[i] != '{')
		return 0;
	int has_values = 0, has_interval = 0;
	for (size_t k = i; k + 15 <= len; k++) {
		if (head[k] != '"')
			continue;
		if (!memcmp(head + k, "\"values\"", 8))
			has_values = 1;
		if (!memcmp(head + k, "\"step_interval\"", 15))
			has_interval = 1;
		if (!memcmp(head + k, "\"align_trace\"", 13))
			return 0;
	}
	return has_values && has_interval ? 90 : 0;
}

/* name, framework and summary: the megatron_golden row of formats.def */
const struct ingest_parser ingest_parser_megatron_golden = {
	.detect = golden_detect,
	.parse = golden_parse,
};
