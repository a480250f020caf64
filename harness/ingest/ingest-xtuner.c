/* ingest-xtuner: XTuner AccProber tensor traces (JSON Lines, json.dumps), specs/formats.md section 5.
 *
 * Files (one kind per file, told by the name; the fields win when present, a disagreement warns):
 *   Step_{s}_MicroIter_{m}_RANK_{r}_forward_records.jsonl     forward records of step s, micro-batch m
 *   STEP_{s}_RANK_{r}_before_clip_grad_norm.jsonl            one gradient record per parameter
 *   STEP_{s}_RANK_{r}_after_clip_grad_norm.jsonl             the same after clipping, then "grad_norm"
 * Steps are 1-based, micro-batches 0-based, ranks global. A name without RANK_{r} (or another rank
 * pattern ingest knows, and without rank fields) is an error: the rank cannot be guessed.
 *
 * Forward record {name, tensor_sum, shape, dtype, step, micro_batch_iter, first_10} -> record name as
 * written ("[layers.0.self_attn.q_proj][after]output"), phase fwd, dtype mapped from torch names
 * (torch.bfloat16 -> bf16, ...), shape as compact JSON, stats {"sum": tensor_sum}, head = first_10. The
 * sum is a statistic (reduction order is framework-specific), first_10 a bitwise sample. A 0-d tensor
 * (shape []) is a scalar: its sum is its value (text, PREC_EXACT; bits for fp32, and for bf16 when the
 * value is a bf16).
 * Gradient record {name, grad_sum, grad_mean, grad_std, weight_sum, shape, dtype, param_info} -> name
 * "<param>.grad" (before clipping) or "<param>.grad.clipped" (after), phase grad, micro-batch none, stats
 * {sum, mean, std, weight_sum}, param_info in extra. The after-clip "grad_norm" line is the global norm:
 * name "grad_norm", rank -1 (every rank prints it; equal values are kept once), value grad_sum.
 * json.dumps NaN/Infinity/-Infinity are read (pyjson, anchor.h); in stats/head they are the strings
 * "nan", "inf", "-inf".
 * Execution order: seq = step << 40 | slot << 24 | line, slot = micro-batch for forward files, 65534
 * before clipping, 65535 after, so files ingested in any order (Step_10 sorts before Step_2) keep the
 * order they were executed in. A last line without '\n' is ignored with a warning (killed mid-write).
 *
 * The input/output link (ATF call/io, report-rootcause.c). AccProber's wrappers call one before_X hook
 * (a record per non-None input tensor, "[M][before]T"), the module's forward (whose hooked submodules
 * write their records in between), then one after_X hook ("[M][after]T"); records are written in
 * that order, and a checkpointed layer's recomputation during backward writes its records again, in
 * the same nesting. So in one forward file a run of consecutive [before] records of module M is the
 * inputs of a new call "M#K" (K counts M's calls in the file, from 0), and a run of consecutive [after]
 * records of M is the outputs of the innermost call of M still open (calls nest like parentheses;
 * calls opened inside it and never closed are closed with it: their outputs were None). GatedDeltaNet
 * wraps its conv1d and chunk rule under the attention's own name: they are nested calls of M, told
 * apart by the in_proj linears recorded between. A name without the [M][before]/[after] form (a
 * custom ProberList.record_tensor) has no link. An [after] run of M with no open call of M, and a
 * tensor name twice in one run (the same side of one call), are errors. */
#include "anchor.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMBERS 64

enum xt_kind { XT_FORWARD, XT_BEFORE_CLIP, XT_AFTER_CLIP, XT_UNKNOWN };

#define MAX_OPEN 256	 /* calls open at once (nesting depth) */
#define MAX_RUN_NAMES 64 /* tensor names of one run (one hook: a handful) */
#define MAX_MOD_LEN 512	 /* bytes of a module name */

/* A module call open in the forward file: its name "M#K" (the module is the text before '#'). */
struct xt_call {
	char *call;
	size_t mod_len;
};

/* A module's count of calls so far in the file. */
struct xt_count {
	char *mod;
	int64_t n;
};

struct xt {
	enum xt_kind kind;
	int64_t step, micro, rank; /* from the file name; -1 when it has none */
	int warned_dtype, warned_key;
	/* the call/io link of forward records (see the header) */
	struct xt_call open[MAX_OPEN];
	size_t n_open;
	struct xt_count *counts;
	size_t n_counts, cap_counts;
	char run_call[MAX_MOD_LEN + 32]; /* the current run: its call "M#K", M's length, side (0 none, 1
					  * before, 2 after), tensor names and their lines */
	size_t run_mod_len;
	int run_side;
	char *run_names[MAX_RUN_NAMES];
	int64_t run_lines[MAX_RUN_NAMES];
	size_t n_run;
	int64_t unclosed;	      /* calls opened and never closed by an [after] run */
	int64_t orphans, orphan_line; /* [after] records with no open call of their module; the first's line */
};

static void run_reset(struct xt *x)
{
	for (size_t i = 0; i < x->n_run; i++)
		free(x->run_names[i]);
	x->n_run = 0;
	x->run_side = 0;
	x->run_mod_len = 0;
	x->run_call[0] = '\0';
}

static void xt_free(struct xt *x)
{
	run_reset(x);
	for (size_t i = 0; i < x->n_open; i++)
		free(x->open[i].call);
	for (size_t i = 0; i < x->n_counts; i++)
		free(x->counts[i].mod);
	free(x->counts);
}

/* "[M][before]T" / "[M][after]T": 1 (before) or 2 (after), M as [*mod, *mod + *mod_len) and T at *tensor;
 * 0 for any other name. */
static int split_name(const char *n, const char **mod, size_t *mod_len, const char **tensor)
{
	if (n[0] != '[')
		return 0;
	const char *b = strstr(n, "][before]"), *a = strstr(n, "][after]");
	const char *e = b && (!a || b < a) ? b : a;
	if (!e || e == n + 1)
		return 0;
	*mod = n + 1, *mod_len = (size_t)(e - n - 1);
	*tensor = e + (e == b ? 9 : 8);
	return e == b ? 1 : 2;
}

/* K for a new call of module mod: its calls so far in the file. -1: out of memory. */
static int64_t next_count(struct xt *x, const char *mod, size_t mod_len)
{
	for (size_t i = 0; i < x->n_counts; i++)
		if (strlen(x->counts[i].mod) == mod_len && !memcmp(x->counts[i].mod, mod, mod_len))
			return x->counts[i].n++;
	if (x->n_counts == x->cap_counts) {
		size_t cap = x->cap_counts ? 2 * x->cap_counts : 64;
		struct xt_count *g = realloc(x->counts, cap * sizeof *g);
		if (!g)
			return -1;
		x->counts = g, x->cap_counts = cap;
	}
	char *m = strndup(mod, mod_len);
	if (!m)
		return -1;
	x->counts[x->n_counts++] = (struct xt_count){m, 1};
	return 0;
}

/* The call and io of a forward record named n at line (NULL call: no link). */
static int link_record(struct ingest *ig, struct xt *x, const char *n, int64_t line, const char **call, const char **io)
{
	const char *mod, *tensor;
	size_t mod_len;
	int side = split_name(n, &mod, &mod_len, &tensor);
	*call = *io = NULL;
	if (!side) {
		run_reset(x);
		return ALIGN_OK;
	}
	if (mod_len > MAX_MOD_LEN)
		return ingest_error(ig, line, "field 'name': the module name of '%.40s...' is longer than %d bytes", n,
				    MAX_MOD_LEN);
	int same_run = x->run_side == side && x->run_mod_len == mod_len && !memcmp(x->run_call, mod, mod_len);
	if (same_run) {
		for (size_t i = 0; i < x->n_run; i++)
			if (!strcmp(x->run_names[i], tensor))
				return ingest_error(ig, line,
						    "field 'name': '%s' is a duplicate: line %lld already gave %s '%s' "
						    "of call '%s'",
						    n, (long long)x->run_lines[i], side == 1 ? "input" : "output",
						    tensor, x->run_call);
	} else {
		run_reset(x);
		if (side == 1) { /* a new call of mod */
			int64_t k = next_count(x, mod, mod_len);
			if (k < 0)
				return fail_internal(ingest_err(ig), "out of memory");
			if (x->n_open == MAX_OPEN)
				return ingest_error(ig, line,
						    "field 'name': '%s' opens a call nested more than %d deep", n,
						    MAX_OPEN);
			snprintf(x->run_call, sizeof x->run_call, "%.*s#%lld", (int)mod_len, mod, (long long)k);
			if (!(x->open[x->n_open].call = strdup(x->run_call)))
				return fail_internal(ingest_err(ig), "out of memory");
			x->open[x->n_open++].mod_len = mod_len;
		} else { /* the outputs of the innermost open call of mod */
			size_t i = x->n_open;
			while (i > 0 &&
			       !(x->open[i - 1].mod_len == mod_len && !memcmp(x->open[i - 1].call, mod, mod_len)))
				i--;
			if (!i) { /* an [after] with no [before] of its module (a prober that records outputs only,
				   * an excerpt): kept, without a link, and counted in one warning */
				if (!x->orphan_line)
					x->orphan_line = line;
				x->orphans++;
				run_reset(x);
				return ALIGN_OK;
			}
			snprintf(x->run_call, sizeof x->run_call, "%s", x->open[i - 1].call);
			x->unclosed += (int64_t)(x->n_open - i); /* opened inside it, never closed */
			while (x->n_open >= i)
				free(x->open[--x->n_open].call);
		}
		x->run_side = side, x->run_mod_len = mod_len;
	}
	if (x->n_run == MAX_RUN_NAMES)
		return ingest_error(ig, line, "field 'name': more than %d %s records in one run of '%s'", MAX_RUN_NAMES,
				    side == 1 ? "[before]" : "[after]", x->run_call);
	if (!(x->run_names[x->n_run] = strdup(tensor)))
		return fail_internal(ingest_err(ig), "out of memory");
	x->run_lines[x->n_run++] = line;
	*call = x->run_call, *io = side == 1 ? "in" : "out";
	return ALIGN_OK;
}

/* Number after tag in s, or -1. */
static int64_t num_after(const char *s, const char *tag)
{
	const char *p = strstr(s, tag);
	if (!p || p[strlen(tag)] < '0' || p[strlen(tag)] > '9')
		return -1;
	return strtoll(p + strlen(tag), NULL, 10);
}

static void xt_from_name(struct xt *x, const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	x->kind = XT_UNKNOWN;
	x->step = num_after(base, "Step_");
	if (x->step < 0)
		x->step = num_after(base, "STEP_");
	x->micro = num_after(base, "_MicroIter_");
	x->rank = num_after(base, "RANK_");
	if (strstr(base, "before_clip_grad_norm"))
		x->kind = XT_BEFORE_CLIP;
	else if (strstr(base, "after_clip_grad_norm"))
		x->kind = XT_AFTER_CLIP;
	else if (strstr(base, "forward_records") || x->micro >= 0)
		x->kind = XT_FORWARD;
}

static const char *map_dtype(const char *t)
{
	static const char *const map[][2] = {
		{"torch.float32", "fp32"},
		{"torch.float", "fp32"},
		{"torch.float64", "fp64"},
		{"torch.double", "fp64"},
		{"torch.bfloat16", "bf16"},
		{"torch.float16", "fp16"},
		{"torch.half", "fp16"},
		{"torch.int64", "int64"},
		{"torch.long", "int64"},
		{"torch.int32", "int32"},
		{"torch.int", "int32"},
		{"torch.int16", "int16"},
		{"torch.int8", "int8"},
		{"torch.uint8", "uint8"},
		{"torch.bool", "bool"},
		{"torch.float8_e4m3fn", "fp8_e4m3"},
		{"torch.float8_e5m2", "fp8_e5m2"},
	};
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (!strcmp(t, map[i][0]))
			return map[i][1];
	return NULL;
}

static const struct pyjson_member *member(const struct pyjson_member *m, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].key && m[i].key_len == strlen(key) && !memcmp(m[i].key, key, m[i].key_len))
			return &m[i];
	return NULL;
}

/* A number member (JSON number or NaN/Infinity): its raw text, or an error when it is anything else. */
static int number(struct ingest *ig, json_t *o, const struct pyjson_member *m, size_t n, const char *key, int required,
		  const struct pyjson_member **out)
{
	json_t *v = json_object_get(o, key);
	const char *sp;
	*out = NULL;
	if (!v)
		return required ? ingest_error(ig, 0, "missing field '%s'", key) : ALIGN_OK;
	if (!json_is_number(v) && !pyjson_special(v, &sp))
		return ingest_error(ig, 0, "field '%s': expected a number", key);
	*out = member(m, n, key);
	return *out ? ALIGN_OK : ingest_error(ig, 0, "field '%s': cannot read its text", key);
}

/* "key":value for a stats object: the raw number, or the NaN/Infinity spelling as a string. */
static void stat_add(char *buf, size_t len, const char *key, const struct pyjson_member *v)
{
	if (!v)
		return;
	size_t o = strlen(buf);
	int special = v->val_len && (v->val[0] == 'N' || v->val[0] == 'I' ||
				     (v->val[0] == '-' && v->val_len > 1 && v->val[1] == 'I'));
	const char *word = !special ? NULL : v->val[0] == 'N' ? "nan" : v->val[0] == 'I' ? "inf" : "-inf";
	if (word)
		snprintf(buf + o, len - o, "%s\"%s\":\"%s\"", o > 1 ? "," : "", key, word);
	else
		snprintf(buf + o, len - o, "%s\"%s\":%.*s", o > 1 ? "," : "", key, (int)v->val_len, v->val);
}

/* shape: an array of non-negative integers -> compact JSON (NULL for []); count of dims in *dims. */
static int shape_text(struct ingest *ig, json_t *o, char **out)
{
	json_t *sh = json_object_get(o, "shape");
	size_t i;
	json_t *d;
	*out = NULL;
	if (!sh)
		return ingest_error(ig, 0, "missing field 'shape'");
	if (!json_is_array(sh))
		return ingest_error(ig, 0, "field 'shape': expected an array of integers");
	json_array_foreach(sh, i, d)
	{
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			return ingest_error(ig, 0, "field 'shape': dimension %zu is not a non-negative integer", i);
	}
	if (json_array_size(sh))
		*out = json_dumps(sh, JSON_COMPACT);
	return ALIGN_OK;
}

/* step / micro_batch_iter / rank: the field when present (an integer), else the file name's. */
static int key_int(struct ingest *ig, struct xt *x, json_t *o, const char *key, int64_t from_name, int64_t *out)
{
	json_t *v = json_object_get(o, key);
	*out = from_name;
	if (!v)
		return ALIGN_OK;
	if (!json_is_integer(v))
		return ingest_error(ig, 0, "field '%s': expected an integer", key);
	*out = json_integer_value(v);
	if (from_name >= 0 && *out != from_name && !x->warned_key) {
		x->warned_key = 1;
		ingest_warn(ig, 0, "field '%s' is %lld but the file name says %lld: the field is used", key,
			    (long long)*out, (long long)from_name);
	}
	return ALIGN_OK;
}

/* Scalar bits a 0-d tensor's sum gives: fp32 through its text (the core), bf16 here when exact. */
static void scalar_value(struct rec *r, const struct pyjson_member *sum)
{
	struct numtext nt;
	if (numtext_parse(sum->val, sum->val_len, PREC_EXACT, 0, &nt))
		return;
	if (!strcmp(r->dtype, "fp32")) {
		r->text = sum->val, r->text_len = sum->val_len, r->prec = PREC_EXACT;
	} else if (!strcmp(r->dtype, "bf16") && !nt.special) {
		float f = (float)nt.value;
		uint32_t b;
		memcpy(&b, &f, 4);
		if ((double)f == nt.value && !(b & 0xffff)) {
			r->text = sum->val, r->text_len = sum->val_len, r->prec = PREC_EXACT;
			r->has_bits = 1, r->bits = b >> 16;
		}
	}
}

static int64_t exec_seq(const struct rec *r, enum xt_kind kind, int64_t line)
{
	int64_t slot = kind == XT_BEFORE_CLIP ? 65534 : kind == XT_AFTER_CLIP ? 65535 : r->micro;
	return (r->step << 40) | (slot << 24) | line;
}

static int xt_record(struct ingest *ig, struct xt *x, json_t *o, const struct pyjson_member *m, size_t n_m,
		     int64_t line)
{
	struct rec r = {.line = line, .micro = ALIGN_NO_MICRO};
	const struct pyjson_member *sum, *mean = NULL, *std = NULL, *wsum = NULL, *head = NULL;
	json_t *nm = json_object_get(o, "name"), *dt = json_object_get(o, "dtype");
	int grad = json_object_get(o, "grad_sum") != NULL, rc;
	char *shape = NULL, *headtxt = NULL, *extra = NULL, name[512], stats[512] = "{";
	if (!nm || !json_is_string(nm))
		return ingest_error(ig, line, "%s", nm ? "field 'name': expected a string" : "missing field 'name'");
	if (!dt || !json_is_string(dt))
		return ingest_error(ig, line, "%s", dt ? "field 'dtype': expected a string" : "missing field 'dtype'");
	if (!grad && !json_object_get(o, "tensor_sum"))
		return ingest_error(ig, line, "neither 'tensor_sum' (forward record) nor 'grad_sum' (gradient record)");
	if ((rc = number(ig, o, m, n_m, grad ? "grad_sum" : "tensor_sum", 1, &sum)) ||
	    (grad && ((rc = number(ig, o, m, n_m, "grad_mean", 0, &mean)) ||
		      (rc = number(ig, o, m, n_m, "grad_std", 0, &std)) ||
		      (rc = number(ig, o, m, n_m, "weight_sum", 0, &wsum)))) ||
	    (rc = key_int(ig, x, o, "step", x->step, &r.step)) ||
	    (!grad && (rc = key_int(ig, x, o, "micro_batch_iter", x->micro, &r.micro))) ||
	    (rc = key_int(ig, x, o, "rank", x->rank, &r.rank)))
		return rc;
	if (r.step < 0)
		return ingest_error(ig, line, "no step: neither a 'step' field nor Step_N/STEP_N in the file name");
	if (r.rank < 0)
		return ingest_error(ig, line, "no rank: neither a 'rank' field nor RANK_N in the file name");
	if (!grad && r.micro < 0)
		return ingest_error(ig, line,
				    "no micro-batch: neither 'micro_batch_iter' nor MicroIter_N in the file name");
	if (r.step >= (1ll << 23) || line >= (1ll << 24) || r.micro >= 65534)
		return ingest_error(ig, line, "step, micro-batch or line number too large for the execution-order key");
	const char *dtype = map_dtype(json_string_value(dt));
	if (!dtype) {
		dtype = json_string_value(dt);
		if (!x->warned_dtype++)
			ingest_warn(ig, line, "dtype '%s' is not one align knows: kept as written", dtype);
	}
	r.dtype = dtype;
	ALIGN_TRY(ingest_err(ig), shape_text(ig, o, &shape));
	json_t *f10 = json_object_get(o, "first_10");
	if (f10 && !json_is_array(f10)) {
		free(shape);
		return ingest_error(ig, line, "field 'first_10': expected an array of numbers");
	}
	if (f10 && (head = member(m, n_m, "first_10")))
		headtxt = pyjson_strict(head->val, head->val_len);
	stat_add(stats, sizeof stats, "sum", sum);
	stat_add(stats, sizeof stats, "mean", mean);
	stat_add(stats, sizeof stats, "std", std);
	stat_add(stats, sizeof stats, "weight_sum", wsum);
	strncat(stats, "}", sizeof stats - strlen(stats) - 1);
	const char *n0 = json_string_value(nm);
	int is_norm = grad && !strcmp(n0, "grad_norm");
	if (is_norm)
		snprintf(name, sizeof name, "grad_norm");
	else if (grad)
		snprintf(name, sizeof name, "%s%s", n0, x->kind == XT_AFTER_CLIP ? ".grad.clipped" : ".grad");
	else
		snprintf(name, sizeof name, "%s", n0);
	r.name = name, r.phase = grad ? "grad" : "fwd", r.shape = shape, r.stats = stats, r.head = headtxt;
	if (!grad && (rc = link_record(ig, x, n0, line, &r.call, &r.io))) {
		free(shape);
		free(headtxt);
		return rc;
	}
	json_t *pi = json_object_get(o, "param_info");
	if (pi) {
		json_t *ex = json_pack("{sO}", "param_info", pi);
		extra = json_dumps(ex, JSON_COMPACT);
		json_decref(ex);
		r.extra = extra;
	}
	if (!shape)
		scalar_value(&r, sum);
	r.seq = exec_seq(&r, grad ? (x->kind == XT_AFTER_CLIP ? XT_AFTER_CLIP : XT_BEFORE_CLIP) : XT_FORWARD, line);
	if (is_norm) /* global: every rank's file has it; rank -1 keeps one, in emit order */
		r.rank = ALIGN_NO_RANK, r.micro = ALIGN_NO_MICRO, r.seq = ALIGN_NO_SEQ;
	rc = ingest_emit(ig, &r);
	free(shape);
	free(headtxt);
	free(extra);
	return rc;
}

static int xt_parse(struct ingest *ig, struct reader *rd)
{
	struct xt x = {0};
	struct pyjson_member m[MAX_MEMBERS];
	char *line, err[200];
	size_t len, n_m;
	int term, got, rc = ALIGN_OK, records = 0;
	xt_from_name(&x, ingest_path(ig));
	if (x.rank < 0)
		x.rank = ingest_file_rank(ig); /* rankN, globalrank-N, ... in a renamed file */
	while (!rc && (got = reader_next_line(rd, &line, &len, &term)) == 1) {
		if (strspn(line, " \t\r") == len)
			continue;
		if (!term) {
			ingest_warn(ig, 0, "last line is not terminated (killed mid-write?): ignored");
			break;
		}
		json_t *o;
		if (pyjson_parse(line, len, &o, m, MAX_MEMBERS, &n_m, err, sizeof err)) {
			xt_free(&x);
			return ingest_error(ig, 0, "not a JSON object: %s", err);
		}
		rc = xt_record(ig, &x, o, m, n_m, ingest_current_line(ig));
		json_decref(o);
		records++;
	}
	if (!rc && x.n_open + x.unclosed)
		ingest_warn(ig, 0,
			    "%lld call%s with [before] records and no [after] records (outputs None?): inputs only",
			    (long long)(x.n_open + x.unclosed), x.n_open + x.unclosed == 1 ? "" : "s");
	if (!rc && x.orphans)
		ingest_warn(ig, x.orphan_line,
			    "%lld [after] record%s with no [before] of %s module (outputs recorded alone?): kept "
			    "without an input/output link, so no root-cause search through them",
			    (long long)x.orphans, x.orphans == 1 ? "" : "s", x.orphans == 1 ? "its" : "their");
	xt_free(&x);
	if (rc)
		return rc;
	if (got != 0 && got != 1)
		return got;
	return records ? ALIGN_OK : ingest_error(ig, 0, "no records in this file");
}

/* The AccProber file names, or a first line with name and tensor_sum/grad_sum. */
static int xt_detect(const char *head, size_t len, const char *path)
{
	size_t i = 0;
	while (i < len && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n'))
		i++;
	if (i >= len || head[i] != '{')
		return 0;
	const char *nl = memchr(head + i, '\n', len - i);
	size_t n = nl ? (size_t)(nl - head) - i : len - i;
	int fields = memmem(head + i, n, "\"name\"", 6) &&
		     (memmem(head + i, n, "\"tensor_sum\"", 12) || memmem(head + i, n, "\"grad_sum\"", 10));
	struct xt x;
	xt_from_name(&x, path);
	return fields ? (x.kind != XT_UNKNOWN ? 95 : 85) : 0;
}

/* name, framework and summary: the xtuner row of formats.def */
const struct ingest_parser ingest_parser_xtuner = {
	.detect = xt_detect,
	.parse = xt_parse,
};
