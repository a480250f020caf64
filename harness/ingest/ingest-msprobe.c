/* ingest-msprobe: msprobe (mindstudio-probe) dump.json files, DUMP/step{N}/rank{R}/dump.json (or
 * proc{PID}/ without torch.distributed); a dump directory is expanded to them by ingest-walk.c.
 *
 * The file: {"task": "statistics"|"tensor"|"md5", "level": "L0"|"L1"|"mix", "framework": "pytorch"|
 * "mindspore", "dump_data_dir": ..., "data": {KEY: ENTRY, ...}} (json.dump: NaN/Infinity tokens are read).
 * KEY names one call, in call order: "Functional.linear.0.forward", "Tensor.__mul__.1.backward",
 * "Module.fc1.Linear.forward.0", "Module.fc1.Linear.parameters_grad.0". ENTRY holds lists/dicts of
 * arguments: forward "input_args", "input_kwargs", "output" (modules also "parameters"); backward "input"
 * (the gradients flowing in) and "output"; parameters_grad {param: [...]}. An argument is a tensor
 * {"type", "dtype": "torch.float32", "shape": [...], "Max", "Min", "Mean", "Norm", "requires_grad",
 * "md5": 8 hex (md5 summary mode), "data_name" (tensor task)}, a number {"type": "int"|"float"|"bool",
 * "value"}, another object (torch.Size, slice, dtype, device, str: not a value, skipped), null (skipped),
 * or a list/dict of arguments (walked; nested positions join the name).
 *
 * Records, one per tensor or number, in the key order of "data" (the execution order; seq assigned in
 * emit order): name KEY.input.I / KEY.input.KWARG / KEY.output.I / KEY.parameters.P /
 * KEY.PARAM.I (parameters_grad), nested positions appended (".0.1"); phase fwd (forward keys, their
 * parameters: param), bwd (backward keys), grad (parameters_grad); call = KEY, io = in for inputs,
 * kwargs and parameters (backward: "input"), out for outputs and parameter gradients. Tensors: dtype via
 * dtype_canonical (an unknown spelling warns once and keeps the record without dtype, spelling in
 * extra), shape as compact JSON, stats {"Max", "Min", "Mean", "Norm"} as shown (NaN/inf as "nan"/"inf"
 * strings, a bool tensor's true/false as 1/0), and the md5-mode "md5", which is zlib's CRC-32 of the
 * tensor's raw bytes (checked against zlib by tests/msprobe/make-dumps.py on real dumps), as digest
 * with digest_alg crc32 (compared bitwise). An xor-mode checksum ("0x" + 16 hex) is no digest align
 * knows: kept in extra. A tensor with neither statistics nor digest (empty, meta) is missing.
 * Numbers: float -> fp64 (Python's repr: exact), int -> int64, bool -> bool bits 0/1.
 * Step: msprobe counts debugger.step() from 0 in step{N}; align's step is N + 1 (the training step
 * number as Megatron, torchtitan and XTuner logs print it, 1-based). Rank: rank{R} -> R, proc{PID} and
 * a bare rank directory -> 0 (one process). A path without step{N}: no step; without a rank directory:
 * the file name's rank, else 0 (both warned). Micro-batch: none. task, level and framework go into the
 * run header (msprobe_task, msprobe_level, msprobe_framework). */
#include "anchor.h"
#include "dtype.h"
#include "err.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ms {
	struct ingest *ig;
	const char *buf; /* the file, for line numbers */
	size_t len, pos; /* pos: where the next key is searched (keys are in file order) */
	int64_t line;	 /* line of the current key */
	int64_t rank, step;
	const char *key; /* the current call */
	const char *phase;
	int64_t n; /* records emitted */
	int warned_dtype, warned_xor;
};

/* The line of the first "KEY" at or after m->pos (keys come in file order): m->line; m->pos moves past it. */
static void key_line(struct ms *m, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = m->pos; i + k + 2 <= m->len; i++) {
		if (m->buf[i] == '\n')
			m->line++;
		else if (m->buf[i] == '"' && !memcmp(m->buf + i + 1, key, k) && m->buf[i + 1 + k] == '"') {
			m->pos = i + k + 2;
			return;
		}
	}
}

/* Shortest %.*g print of v that reads back as v (Python's repr digits). */
static void shortest(double v, char *out, size_t len)
{
	for (int p = 1; p <= 17; p++) {
		snprintf(out, len, "%.*g", p, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

/* Append "key":value of one statistic (a number, NaN/Infinity stand-in, bool) to buf; null/absent: no. */
static int stat_add(struct ms *m, const char *path, char *buf, size_t len, const char *key, json_t *v)
{
	char num[40];
	const char *sp;
	if (!v || json_is_null(v))
		return ALIGN_OK;
	if (json_is_integer(v))
		snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		shortest(json_real_value(v), num, sizeof num);
	else if (json_is_boolean(v))
		snprintf(num, sizeof num, "%d", json_is_true(v));
	else if (pyjson_special(v, &sp))
		snprintf(num, sizeof num, "\"%s\"", sp);
	else
		return ingest_error(m->ig, m->line, "%s: field '%s' is not a number", path, key);
	size_t n = strlen(buf);
	snprintf(buf + n, len - n, "%s\"%s\":%s", n > 1 ? "," : "", key, num);
	return ALIGN_OK;
}

/* The shape array as compact JSON (malloc'ed; NULL for a scalar's []). */
static int shape_of(struct ms *m, const char *path, json_t *t, char **out)
{
	json_t *sh = json_object_get(t, "shape"), *d;
	size_t i;
	*out = NULL;
	if (!json_is_array(sh))
		return ingest_error(m->ig, m->line, "%s: field 'shape' is not an array", path);
	json_array_foreach(sh, i, d) if (!json_is_integer(d) || json_integer_value(d) < 0) return ingest_error(
		m->ig, m->line, "%s: field 'shape' element %zu is not an integer >= 0", path, i);
	if (json_array_size(sh) && !(*out = json_dumps(sh, JSON_COMPACT)))
		return fail_internal(ingest_err(m->ig), "out of memory");
	return ALIGN_OK;
}

/* 8 hex digits (zlib CRC-32), lower-cased into out: 1; else 0. */
static int crc_hex(const char *s, char out[9])
{
	if (strlen(s) != 8)
		return 0;
	for (int i = 0; i < 8; i++) {
		char c = s[i];
		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
		out[i] = c;
	}
	out[8] = '\0';
	return 1;
}

static int emit_tensor(struct ms *m, const char *path, const char *io, json_t *t)
{
	json_t *dt = json_object_get(t, "dtype"), *md5 = json_object_get(t, "md5");
	if (!json_is_string(dt))
		return ingest_error(m->ig, m->line, "%s: field 'dtype' is not a string", path);
	const char *dtype = dtype_canonical(json_string_value(dt));
	char extra[160] = "", stats[400] = "{", digest[9];
	if (!dtype) {
		if (!m->warned_dtype++)
			ingest_warn(m->ig, m->line,
				    "%s: dtype '%.40s' is not one align knows: kept without dtype (the spelling is in "
				    "extra; later such tensors in this file too)",
				    path, json_string_value(dt));
		snprintf(extra, sizeof extra, "{\"dtype\":\"%.100s\"}", json_string_value(dt));
	}
	static const char *const names[] = {"Max", "Min", "Mean", "Norm"};
	for (int i = 0; i < 4; i++)
		ALIGN_TRY(ingest_err(m->ig),
			  stat_add(m, path, stats, sizeof stats, names[i], json_object_get(t, names[i])));
	strcat(stats, "}");
	struct rec r = {.rank = m->rank,
			.step = m->step,
			.micro = ALIGN_NO_MICRO,
			.seq = ALIGN_NO_SEQ,
			.line = m->line,
			.name = path,
			.phase = m->phase,
			.dtype = dtype,
			.stats = stats[1] != '}' ? stats : NULL,
			.extra = extra[0] ? extra : NULL,
			.call = m->key,
			.io = io};
	if (md5 && !json_is_null(md5)) {
		const char *s = json_is_string(md5) ? json_string_value(md5) : "";
		if (crc_hex(s, digest)) {
			r.digest = digest, r.digest_alg = "crc32";
		} else if (strlen(s) == 18 && s[0] == '0' && s[1] == 'x' &&
			   strspn(s + 2, "0123456789abcdefABCDEF") == 16) {
			if (!m->warned_xor++)
				ingest_warn(
					m->ig, m->line,
					"%s: 'md5' %s is an xor checksum (summary_mode xor), no digest align compares: "
					"kept in extra",
					path, s);
			snprintf(extra, sizeof extra, "{\"xor_checksum\":\"%s\"}", s);
			r.extra = extra;
		} else {
			return ingest_error(m->ig, m->line,
					    "%s: field 'md5' is '%.40s', not 8 hex digits (msprobe's CRC-32)", path, s);
		}
	}
	if (!r.stats && !r.digest)
		r.missing = "no statistics or digest in the dump (empty or meta tensor)";
	char *shape;
	ALIGN_TRY(ingest_err(m->ig), shape_of(m, path, t, &shape));
	r.shape = shape;
	int rc = ingest_emit(m->ig, &r);
	free(shape);
	m->n += !rc;
	return rc;
}

/* {"type": "int"|"float"|"bool"|numpy scalars, "value": V}: a record; other non-tensor objects: nothing. */
static int emit_number(struct ms *m, const char *path, const char *io, json_t *v)
{
	struct rec r = {.rank = m->rank,
			.step = m->step,
			.micro = ALIGN_NO_MICRO,
			.seq = ALIGN_NO_SEQ,
			.line = m->line,
			.name = path,
			.phase = m->phase,
			.call = m->key,
			.io = io,
			.prec = PREC_EXACT};
	char num[40];
	const char *sp;
	if (json_is_boolean(v)) {
		r.dtype = "bool", r.has_bits = 1, r.bits = json_is_true(v);
	} else if (json_is_integer(v)) {
		snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
		r.dtype = "int64", r.text = num;
	} else if (json_is_real(v)) {
		shortest(json_real_value(v), num, sizeof num);
		r.dtype = "fp64", r.text = num;
	} else if (pyjson_special(v, &sp)) {
		r.dtype = "fp64", r.text = sp;
	} else {
		return ALIGN_OK; /* a string, list or null value: not a number */
	}
	int rc = ingest_emit(m->ig, &r);
	m->n += !rc;
	return rc;
}

#define MS_MAX_DEPTH 16

/* One argument at path: a tensor, a number, or a list/dict of arguments. */
static int walk_arg(struct ms *m, char *path, size_t cap, const char *io, json_t *v, int depth)
{
	size_t n = strlen(path);
	if (depth > MS_MAX_DEPTH)
		return ingest_error(m->ig, m->line, "%s: arguments nested deeper than %d", path, MS_MAX_DEPTH);
	if (json_is_array(v)) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x)
		{
			snprintf(path + n, cap - n, ".%zu", i);
			ALIGN_TRY(ingest_err(m->ig), walk_arg(m, path, cap, io, x, depth + 1));
		}
		path[n] = '\0';
		return ALIGN_OK;
	}
	if (!json_is_object(v))
		return ALIGN_OK; /* null (None), or a bare value msprobe does not write */
	json_t *type = json_object_get(v, "type");
	if (!type) { /* a dict of arguments */
		const char *k;
		json_t *x;
		json_object_foreach(v, k, x)
		{
			snprintf(path + n, cap - n, ".%s", k);
			ALIGN_TRY(ingest_err(m->ig), walk_arg(m, path, cap, io, x, depth + 1));
		}
		path[n] = '\0';
		return ALIGN_OK;
	}
	if (json_object_get(v, "dtype") && json_object_get(v, "shape"))
		return emit_tensor(m, path, io, v);
	json_t *val = json_object_get(v, "value");
	return val ? emit_number(m, path, io, val) : ALIGN_OK;
}

/* Walk member `field` of an entry as arguments named KEY.label, on side io. */
static int walk_field(struct ms *m, json_t *entry, const char *field, const char *label, const char *io,
		      const char *phase)
{
	json_t *v = json_object_get(entry, field);
	if (!v)
		return ALIGN_OK;
	if (!json_is_array(v) && !json_is_object(v))
		return ingest_error(m->ig, m->line, "%s: field '%s' is not a list or dict of arguments", m->key, field);
	char path[1024];
	snprintf(path, sizeof path, "%s.%s", m->key, label);
	m->phase = phase;
	return walk_arg(m, path, sizeof path, io, v, 0);
}

/* 1 when key has the component word (".forward" ending or ".forward." inside). */
static int has_part(const char *key, const char *word)
{
	size_t k = strlen(word);
	for (const char *p = strstr(key, word); p; p = strstr(p + 1, word))
		if (p > key && p[-1] == '.' && (p[k] == '\0' || p[k] == '.'))
			return 1;
	return 0;
}

static int walk_entry(struct ms *m, const char *key, json_t *entry)
{
	m->key = key;
	key_line(m, key);
	if (!json_is_object(entry))
		return ingest_error(m->ig, m->line, "'%s': the entry is not an object", key);
	if (has_part(key, "parameters_grad")) {
		char path[1024];
		snprintf(path, sizeof path, "%s", key);
		m->phase = "grad";
		return walk_arg(m, path, sizeof path, "out", entry, 0);
	}
	if (has_part(key, "backward")) {
		ALIGN_TRY(ingest_err(m->ig), walk_field(m, entry, "input", "input", "in", "bwd"));
		return walk_field(m, entry, "output", "output", "out", "bwd");
	}
	if (!has_part(key, "forward"))
		return ingest_error(m->ig, m->line,
				    "'%s': not a forward, backward or parameters_grad key (expected "
				    "'Functional.linear.0.forward', 'Module.fc1.Linear.backward.0', ...)",
				    key);
	ALIGN_TRY(ingest_err(m->ig), walk_field(m, entry, "input_args", "input", "in", "fwd"));
	ALIGN_TRY(ingest_err(m->ig), walk_field(m, entry, "input_kwargs", "input", "in", "fwd"));
	ALIGN_TRY(ingest_err(m->ig), walk_field(m, entry, "parameters", "parameters", "in", "param"));
	return walk_field(m, entry, "output", "output", "out", "fwd");
}

/* The number after "<tag>" in the path component that is exactly <tag><digits> (the last such), or -1;
 * *bare = 1 when a component is the tag alone. */
static int64_t path_num(const char *path, const char *tag, int *bare)
{
	size_t k = strlen(tag);
	int64_t found = -1;
	*bare = 0;
	for (const char *c = path; c && *c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL) {
		const char *end = strchr(c, '/');
		size_t n = end ? (size_t)(end - c) : strlen(c);
		if (n < k || memcmp(c, tag, k))
			continue;
		if (n == k)
			*bare = 1;
		else if (strspn(c + k, "0123456789") == n - k && n - k <= 15)
			found = strtoll(c + k, NULL, 10);
	}
	return found;
}

static void where_from_path(struct ms *m)
{
	const char *path = ingest_path(m->ig);
	int bare_rank, bare_step, bare_proc;
	int64_t step = path_num(path, "step", &bare_step), rank = path_num(path, "rank", &bare_rank);
	int64_t proc = path_num(path, "proc", &bare_proc);
	m->step = step >= 0 ? step + 1 : ALIGN_NO_STEP;
	if (step < 0)
		ingest_warn(m->ig, 1, "no step{N} directory in the path: the records have no step");
	if (rank >= 0) {
		m->rank = rank;
	} else if (bare_rank || proc >= 0) {
		m->rank = 0;
	} else {
		m->rank = ingest_file_rank(m->ig) >= 0 ? ingest_file_rank(m->ig) : 0;
		ingest_warn(m->ig, 1, "no rank{R} or proc{PID} directory in the path: rank %lld", (long long)m->rank);
	}
}

static int header(struct ms *m, json_t *doc)
{
	json_t *h = json_object();
	static const char *const keys[] = {"task", "level", "framework"};
	for (int i = 0; i < 3; i++) {
		json_t *v = json_object_get(doc, keys[i]);
		char k[32];
		snprintf(k, sizeof k, "msprobe_%s", keys[i]);
		if (json_is_string(v))
			json_object_set(h, k, v);
	}
	char *text = json_dumps(h, JSON_COMPACT);
	json_decref(h);
	if (!text)
		return fail_internal(ingest_err(m->ig), "out of memory");
	int rc = ingest_set_header(m->ig, text);
	free(text);
	return rc;
}

static int ms_walk(struct ms *m, json_t *doc)
{
	json_t *data = json_object_get(doc, "data");
	m->pos = 0, m->line = 1;
	if (!json_is_object(data)) {
		key_line(m, "data");
		return ingest_error(m->ig, data ? m->line : 1, "%s: not an msprobe dump.json",
				    data ? "'data' is not an object" : "no 'data' object");
	}
	key_line(m, "data");
	int64_t data_line = m->line;
	ALIGN_TRY(ingest_err(m->ig), header(m, doc));
	const char *key;
	json_t *entry;
	json_object_foreach(data, key, entry) ALIGN_TRY(ingest_err(m->ig), walk_entry(m, key, entry));
	if (m->n == 0)
		return ingest_error(m->ig, data_line, "'data' holds no tensor or number (%s)",
				    json_object_size(data) ? "only non-numeric arguments"
							   : "empty: nothing was dumped");
	return ALIGN_OK;
}

static int ms_parse(struct ingest *ig, struct reader *rd)
{
	char *buf;
	size_t len;
	ALIGN_TRY(ingest_err(ig), reader_slurp(rd, &buf, &len));
	struct ms m = {.ig = ig, .buf = buf, .len = len};
	where_from_path(&m);
	json_t *doc;
	struct pyjson_member none[1];
	size_t n_m;
	char err[200];
	if (pyjson_parse(buf, len, &doc, none, 0, &n_m, err, sizeof err)) {
		json_error_t je; /* the position, from jansson on the text as written */
		json_t *again = json_loadb(buf, len, 0, &je);
		json_decref(again);
		return ingest_error(ig, again ? 1 : je.line, "invalid JSON: %s", err);
	}
	int rc = ms_walk(&m, doc);
	json_decref(doc);
	return rc;
}

/* A JSON object whose head has msprobe's "task" and "level" members before "data". */
static int ms_detect(const char *head, size_t len, const char *path)
{
	(void)path;
	size_t i = strspn(head, " \t\r\n");
	if (i >= len || head[i] != '{')
		return 0;
	size_t n = len < 4096 ? len : 4096;
	int task = 0, level = 0, data = 0;
	for (size_t k = i; k + 8 <= n; k++) {
		if (head[k] != '"')
			continue;
		task |= !memcmp(head + k, "\"task\"", 6);
		level |= !memcmp(head + k, "\"level\"", 7);
		data |= !memcmp(head + k, "\"data\"", 6) || !memcmp(head + k, "\"dump_data_dir\"", 15);
		if (!memcmp(head + k, "\"align_trace\"", 13))
			return 0;
	}
	return task && level && data ? 90 : 0;
}

/* The run's framework: the dump's "framework" member in the head ("pytorch", "mindspore"). */
static int ms_names(struct ingest *ig, const char *head, size_t len, char *run, size_t run_size, char *framework,
		    size_t framework_size)
{
	(void)ig, (void)run_size;
	run[0] = framework[0] = '\0';
	const char *end = head + len, *p = head;
	while ((p = memchr(p, '"', (size_t)(end - p))) && end - p > 12) {
		if (!memcmp(p, "\"framework\"", 11)) {
			p += 11;
			while (p < end && strchr(" \t\r\n:", *p))
				p++;
			if (p < end && *p == '"') {
				const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
				size_t n = q ? (size_t)(q - p - 1) : 0;
				if (n && n < framework_size && n < 32 &&
				    strspn(p + 1, "abcdefghijklmnopqrstuvwxyz") >= n)
					snprintf(framework, framework_size, "%.*s", (int)n, p + 1);
			}
			break;
		}
		p++;
	}
	return ALIGN_OK;
}

/* name, framework and summary: the msprobe row of formats.def */
const struct ingest_parser ingest_parser_msprobe = {
	.detect = ms_detect,
	.parse = ms_parse,
	.names = ms_names,
};
