/* ingest-atf: the align trace, ATF v1 (JSON Lines). The contract, every rule of which is enforced here,
 * is README.md "The align trace (ATF v1)". Line 1: the header object ("align_trace": 1; its "run" and
 * "framework" name the run unless --as does, through the names hook). Each further line: one record
 * object. Unknown fields of a record are kept verbatim in record.extra; unknown versions are refused.
 * Every refusal is exit 2 with "file:line: field 'F': what" and leaves the database unchanged. */
#include "digest.h"
#include "dtype.h"
#include "err.h"
#include "ingest.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATF_VERSION 1
#define ATF_HEAD_MAX 65536 /* reader_peek's window: the header must fit to name the run */

static int atf_detect(const char *head, size_t len, const char *path)
{
	size_t i = 0;
	while (i < len && (head[i] == ' ' || head[i] == '\t'))
		i++;
	if (i < len && head[i] == '{') {
		const char *nl = memchr(head, '\n', len);
		size_t first = nl ? (size_t)(nl - head) : len;
		for (size_t k = i; k + 13 <= first; k++)
			if (!memcmp(head + k, "\"align_trace\"", 13))
				return 100;
	}
	return 0;
}

static const char *const known[] = {"rank",  "step", "micro",	"seq",	   "name",   "phase",  "dtype",
				    "shape", "bits", "value",	"text",	   "digits", "digest", "digest_alg",
				    "stats", "head", "payload", "missing", "call",   "io",     NULL};

/* The phase vocabulary (README's table). */
static const char *const phases[] = {"fwd",    "bwd",  "grad",	"param", "optim", "loss",
				     "metric", "eval", "input", "meta",	 NULL};
#define PHASE_NAMES "fwd, bwd, grad, param, optim, loss, metric, eval, input, meta"

/* The fields that say what a record's value is: a record needs one (or 'missing' with the reason). */
static const char *const content[] = {"value", "bits", "text", "digest", "payload", "stats", "head", NULL};

static int in_list(const char *const *list, const char *s)
{
	for (int i = 0; list[i]; i++)
		if (!strcmp(list[i], s))
			return 1;
	return 0;
}

struct atf_state {
	int64_t rank;		/* header rank: the default of records */
	unsigned char *payload; /* decoded payload of the current record */
};

/* One record being read: the rec handed to ingest_emit and the texts it borrows. */
struct atf_rec {
	struct rec r;
	json_t *o;			    /* the record's object */
	uint64_t count;			    /* elements of the shape (1 for a scalar) */
	size_t esize;			    /* bytes of one element of dtype (0: no dtype) */
	const char *bits;		    /* 'bits' as written */
	char vtext[64];			    /* a numeric 'value' printed (round-trip) */
	char digest[65];		    /* 'digest' in lower case, or the payload's */
	char *shape, *stats, *head, *extra; /* JSON texts (owned) */
};

static int get_int(struct ingest *ig, json_t *o, const char *key, int64_t def, int required, int64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!v) {
		if (required)
			return ingest_error(ig, 0, "missing field '%s'", key);
		*out = def;
		return ALIGN_OK;
	}
	if (!json_is_integer(v))
		return ingest_error(ig, 0, "field '%s': expected an integer", key);
	*out = json_integer_value(v);
	return ALIGN_OK;
}

/* A non-negative integer field (def when absent and not required). */
static int get_count(struct ingest *ig, json_t *o, const char *key, int64_t def, int required, int64_t *out)
{
	ALIGN_TRY(ingest_err(ig), get_int(ig, o, key, def, required, out));
	if (json_object_get(o, key) && *out < 0)
		return ingest_error(ig, 0, "field '%s': negative (%lld)", key, (long long)*out);
	return ALIGN_OK;
}

/* A string field; a present one must not be empty. */
static int get_str(struct ingest *ig, json_t *o, const char *key, int required, const char **out)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v)
		return required ? ingest_error(ig, 0, "missing field '%s'", key) : ALIGN_OK;
	if (!json_is_string(v))
		return ingest_error(ig, 0, "field '%s': expected a string", key);
	*out = json_string_value(v);
	if (!**out)
		return ingest_error(ig, 0, "field '%s': empty", key);
	return ALIGN_OK;
}

static char *dump_or_null(json_t *v)
{
	return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) : NULL;
}

/* The key fields: rank, step, micro, seq, name, phase, dtype; the call/io link. */
static int read_keys(struct ingest *ig, struct atf_state *s, struct atf_rec *a)
{
	struct rec *r = &a->r;
	json_t *o = a->o;
	const char *dtype;
	ALIGN_TRY(ingest_err(ig), get_count(ig, o, "rank", s->rank, 0, &r->rank));
	ALIGN_TRY(ingest_err(ig), get_count(ig, o, "step", 0, 1, &r->step));
	ALIGN_TRY(ingest_err(ig), get_count(ig, o, "micro", 0, 0, &r->micro));
	ALIGN_TRY(ingest_err(ig), get_count(ig, o, "seq", ALIGN_NO_SEQ, 0, &r->seq));
	ALIGN_TRY(ingest_err(ig), get_str(ig, o, "name", 1, &r->name));
	ALIGN_TRY(ingest_err(ig), get_str(ig, o, "phase", 0, &r->phase));
	ALIGN_TRY(ingest_err(ig), get_str(ig, o, "dtype", 0, &dtype));
	if (!r->phase)
		r->phase = "fwd";
	else if (!in_list(phases, r->phase))
		return ingest_error(ig, 0, "field 'phase': unknown phase '%s' (expected one of %s)", r->phase,
				    PHASE_NAMES);
	if (dtype && !(r->dtype = dtype_canonical(dtype)))
		return ingest_error(ig, 0, "field 'dtype': unknown dtype '%s' (expected one of %s)", dtype,
				    dtype_names());
	a->esize = r->dtype ? dtype_size(r->dtype) : 0;
	ALIGN_TRY(ingest_err(ig), get_str(ig, o, "call", 0, &r->call));
	ALIGN_TRY(ingest_err(ig), get_str(ig, o, "io", 0, &r->io));
	if (r->io && !r->call)
		return ingest_error(ig, 0, "field 'io': needs 'call' (the call whose input or output this is)");
	if (r->call && !r->io)
		return ingest_error(ig, 0, "field 'call': needs 'io' (\"in\" or \"out\")");
	if (r->io && strcmp(r->io, "in") && strcmp(r->io, "out"))
		return ingest_error(ig, 0, "field 'io': '%s' is not \"in\" or \"out\"", r->io);
	return ALIGN_OK;
}

/* shape: an array of non-negative integers (absent or [] for a scalar); its element count. */
static int read_shape(struct ingest *ig, struct atf_rec *a)
{
	json_t *shape = json_object_get(a->o, "shape");
	a->count = 1;
	if (!shape)
		return ALIGN_OK;
	if (!json_is_array(shape))
		return ingest_error(ig, 0, "field 'shape': expected an array of integers");
	size_t i;
	json_t *d;
	json_array_foreach(shape, i, d)
	{
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			return ingest_error(ig, 0, "field 'shape': dimension %zu is not a non-negative integer", i);
		a->count *= (uint64_t)json_integer_value(d);
	}
	if (json_array_size(shape) == 0)
		return ALIGN_OK;
	if (!a->r.dtype)
		return ingest_error(ig, 0, "field 'dtype': required for a tensor (shape given)");
	a->r.shape = a->shape = dump_or_null(shape);
	return ALIGN_OK;
}

/* A scalar-only field on a tensor is refused. */
static int scalar_only(struct ingest *ig, const struct atf_rec *a, const char *key)
{
	if (a->count == 1)
		return ALIGN_OK;
	return ingest_error(ig, 0, "field '%s': for a scalar, but shape %s has %llu elements", key, a->shape,
			    (unsigned long long)a->count);
}

static int parse_hex_bits(const char *s, size_t nbytes, uint64_t *out)
{
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	size_t n = strlen(s);
	if (n == 0 || n > 2 * nbytes || strspn(s, "0123456789abcdefABCDEF") != n)
		return -1;
	*out = strtoull(s, NULL, 16);
	return 0;
}

static int read_bits(struct ingest *ig, struct atf_rec *a)
{
	ALIGN_TRY(ingest_err(ig), get_str(ig, a->o, "bits", 0, &a->bits));
	if (!a->bits)
		return ALIGN_OK;
	if (!a->r.dtype)
		return ingest_error(ig, 0, "field 'bits': needs 'dtype'");
	ALIGN_TRY(ingest_err(ig), scalar_only(ig, a, "bits"));
	if (parse_hex_bits(a->bits, a->esize, &a->r.bits))
		return ingest_error(ig, 0, "field 'bits': '%s' is not a hex pattern of %zu bytes (%s)", a->bits,
				    a->esize, a->r.dtype);
	a->r.has_bits = 1;
	return ALIGN_OK;
}

/* 'value' must name the same number as 'bits' (an integer dtype: exactly; a float dtype: the value
 * rounds to the pattern, so 10.8 names the fp32 0x412ccccd). */
static int check_value_bits(struct ingest *ig, const struct atf_rec *a, json_t *value, double v)
{
	double d = 0;
	int same;
	dtype_decode(a->r.dtype, a->r.bits, &d);
	if (json_is_integer(value) && !dtype_is_float(a->r.dtype)) {
		int sh = 64 - 8 * (int)a->esize;
		int64_t b = !strcmp(a->r.dtype, "uint8") || !strcmp(a->r.dtype, "bool")
				    ? (int64_t)a->r.bits
				    : (int64_t)(a->r.bits << sh) >> sh;
		same = b == json_integer_value(value);
	} else {
		same = dtype_value_matches(a->r.dtype, a->r.bits, v);
	}
	if (same)
		return ALIGN_OK;
	return ingest_error(ig, 0, "fields 'bits' and 'value' disagree: bits %s are %.17g in %s, 'value' is %s",
			    a->bits, d, a->r.dtype, a->r.text);
}

/* value: a JSON number (exact) or "nan"/"inf"/"-inf"; kept as the record's text unless bits are given. */
static int read_value(struct ingest *ig, struct atf_rec *a)
{
	json_t *value = json_object_get(a->o, "value");
	if (!value)
		return ALIGN_OK;
	ALIGN_TRY(ingest_err(ig), scalar_only(ig, a, "value"));
	if (json_is_integer(value)) {
		snprintf(a->vtext, sizeof a->vtext, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
		a->r.text = a->vtext;
	} else if (json_is_real(value)) {
		snprintf(a->vtext, sizeof a->vtext, "%.17g", json_real_value(value));
		a->r.text = a->vtext;
	} else if (json_is_string(value)) {
		a->r.text = json_string_value(value);
	} else {
		return ingest_error(ig, 0, "field 'value': expected a number or a string such as \"nan\"");
	}
	struct numtext nt;
	if (numtext_parse(a->r.text, strlen(a->r.text), PREC_EXACT, 0, &nt))
		return ingest_error(ig, 0, "field 'value': not a number: '%.80s'", a->r.text);
	a->r.prec = PREC_EXACT;
	if (!a->r.dtype)
		a->r.dtype = "fp64"; /* a JSON number is an exact double: the repr of an fp64 (classify) */
	if (a->r.has_bits) {
		ALIGN_TRY(ingest_err(ig), check_value_bits(ig, a, value, nt.value));
		a->r.text = NULL, a->r.prec = PREC_NONE; /* the exact bits say it */
	}
	return ALIGN_OK;
}

/* 'text' must stand for the number 'bits' give: inside the interval its printed digits cover. */
static int check_text_bits(struct ingest *ig, const struct atf_rec *a, const struct numtext *nt)
{
	double d = 0;
	dtype_decode(a->r.dtype, a->r.bits, &d);
	int same;
	if (nt->special == 1)
		same = isnan(d);
	else if (nt->special)
		same = d == nt->value;
	else
		same = !isnan(d) && (long double)d >= nt->lo && (long double)d <= nt->hi;
	if (same)
		return ALIGN_OK;
	return ingest_error(ig, 0,
			    "fields 'bits' and 'text' disagree: bits %s are %.17g in %s, outside what '%s' stands for "
			    "[%.17Lg, %.17Lg]",
			    a->bits, d, a->r.dtype, a->r.text, nt->lo, nt->hi);
}

/* text: the value as a framework printed it (its last digit is its precision); digits: the print was
 * Python's round(x, digits) (decimals, trailing zeros dropped). */
static int read_text(struct ingest *ig, struct atf_rec *a)
{
	const char *text;
	int64_t digits;
	json_t *dj = json_object_get(a->o, "digits");
	ALIGN_TRY(ingest_err(ig), get_str(ig, a->o, "text", 0, &text));
	ALIGN_TRY(ingest_err(ig), get_count(ig, a->o, "digits", 0, 0, &digits));
	if (dj && !text)
		return ingest_error(ig, 0, "field 'digits': needs 'text' (the digits are those of the printed text)");
	if (!text)
		return ALIGN_OK;
	if (json_object_get(a->o, "value"))
		return ingest_error(ig, 0,
				    "fields 'text' and 'value': give the value exactly ('value') or as printed "
				    "('text'), not both");
	ALIGN_TRY(ingest_err(ig), scalar_only(ig, a, "text"));
	if (digits > 40)
		return ingest_error(ig, 0, "field 'digits': %lld decimals (at most 40)", (long long)digits);
	a->r.text = text;
	a->r.prec = dj ? PREC_DEC : PREC_TEXT;
	a->r.prec_n = (int)digits;
	struct numtext nt;
	if (numtext_parse(text, strlen(text), a->r.prec, a->r.prec_n, &nt))
		return ingest_error(ig, 0, "field 'text': not a number: '%.80s'", text);
	return a->r.has_bits ? check_text_bits(ig, a, &nt) : ALIGN_OK;
}

/* digest and digest_alg: a known algorithm, and a digest of its length in hex (kept in lower case). */
static int read_digest(struct ingest *ig, struct atf_rec *a)
{
	const char *digest, *alg;
	ALIGN_TRY(ingest_err(ig), get_str(ig, a->o, "digest", 0, &digest));
	ALIGN_TRY(ingest_err(ig), get_str(ig, a->o, "digest_alg", 0, &alg));
	if (alg && !digest)
		return ingest_error(ig, 0, "field 'digest_alg': given without 'digest'");
	if (!digest)
		return ALIGN_OK;
	alg = alg ? alg : DIGEST_ALG;
	size_t want = digest_alg_hex_len(alg), n = strlen(digest);
	if (!want)
		return ingest_error(ig, 0, "field 'digest_alg': unknown algorithm '%s' (align knows %s)", alg,
				    digest_alg_names());
	if (n != want || strspn(digest, "0123456789abcdefABCDEF") != n)
		return ingest_error(ig, 0, "field 'digest': '%.80s' is not a %s digest (%zu hex digits)", digest, alg,
				    want);
	for (size_t i = 0; i <= n; i++)
		a->digest[i] = (char)tolower((unsigned char)digest[i]);
	a->r.digest = a->digest, a->r.digest_alg = alg;
	return ALIGN_OK;
}

static int decode_payload(struct ingest *ig, const char *b64, uint64_t expect, unsigned char **out, size_t *len)
{
	size_t n = strlen(b64);
	if (n % 4)
		return ingest_error(ig, 0, "field 'payload': base64 length %zu is not a multiple of 4", n);
	unsigned char *buf = malloc(n / 4 * 3 + 1);
	if (!buf)
		return fail_internal(ingest_err(ig), "out of memory");
	int got = EVP_DecodeBlock(buf, (const unsigned char *)b64, (int)n);
	if (got < 0) {
		free(buf);
		return ingest_error(ig, 0, "field 'payload': not valid base64");
	}
	size_t pad = (n >= 1 && b64[n - 1] == '=') + (n >= 2 && b64[n - 2] == '=');
	*len = (size_t)got - pad;
	if (*len != expect) {
		free(buf);
		return ingest_error(ig, 0, "field 'payload': %zu bytes, but dtype and shape give %llu", *len,
				    (unsigned long long)expect);
	}
	*out = buf;
	return ALIGN_OK;
}

/* payload: base64 of the bytes; checked against the digest under its algorithm (or given the
 * xxh3t64 digest) and, for a scalar, against 'bits'. */
static int read_payload(struct ingest *ig, struct atf_state *s, struct atf_rec *a)
{
	const char *payload;
	size_t plen = 0;
	ALIGN_TRY(ingest_err(ig), get_str(ig, a->o, "payload", 0, &payload));
	if (!payload)
		return ALIGN_OK;
	if (!a->r.dtype)
		return ingest_error(ig, 0, "field 'payload': needs 'dtype'");
	ALIGN_TRY(ingest_err(ig), decode_payload(ig, payload, a->count * a->esize, &s->payload, &plen));
	a->r.payload = s->payload, a->r.payload_len = plen;
	const char *alg = a->r.digest ? a->r.digest_alg : DIGEST_ALG;
	char hex[65];
	if (digest_compute_hex(alg, s->payload, plen, hex))
		return fail_internal(ingest_err(ig), "cannot compute the %s digest of a payload", alg);
	if (a->r.digest && strcmp(a->r.digest, hex))
		return ingest_error(ig, 0, "field 'digest': %s %s does not match the payload (whose %s is %s)", alg,
				    a->r.digest, alg, hex);
	if (!a->r.digest) {
		memcpy(a->digest, hex, sizeof hex);
		a->r.digest = a->digest, a->r.digest_alg = DIGEST_ALG;
	}
	uint64_t pbits = 0;
	for (size_t i = 0; i < plen && i < 8; i++)
		pbits |= (uint64_t)s->payload[i] << (8 * i);
	if (a->r.has_bits && a->count == 1 && pbits != a->r.bits)
		return ingest_error(ig, 0, "fields 'bits' and 'payload' disagree: bits %s, payload bytes 0x%0*llx",
				    a->bits, (int)(2 * a->esize), (unsigned long long)pbits);
	return ALIGN_OK;
}

/* stats (an object), head (an array), missing (the reason a value is absent: no value field with it);
 * a record says something: a value field or 'missing'. */
static int read_rest(struct ingest *ig, struct atf_rec *a)
{
	json_t *stats = json_object_get(a->o, "stats"), *head = json_object_get(a->o, "head");
	if (stats && !json_is_object(stats))
		return ingest_error(ig, 0, "field 'stats': expected an object");
	if (head && !json_is_array(head))
		return ingest_error(ig, 0, "field 'head': expected an array");
	a->r.stats = a->stats = dump_or_null(stats);
	a->r.head = a->head = dump_or_null(head);
	ALIGN_TRY(ingest_err(ig), get_str(ig, a->o, "missing", 0, &a->r.missing));
	const char *has = NULL;
	for (int i = 0; content[i] && !has; i++)
		if (json_object_get(a->o, content[i]))
			has = content[i];
	if (a->r.missing && has)
		return ingest_error(ig, 0, "field 'missing': the record also has '%s' (a missing value has none)", has);
	if (!a->r.missing && !has)
		return ingest_error(ig, 0,
				    "record '%s' has no value: give 'value', 'bits', 'text', 'digest', 'payload', "
				    "'stats' or 'head' (or 'missing' with the reason)",
				    a->r.name);
	return ALIGN_OK;
}

static int keep_extra(struct atf_rec *a)
{
	json_t *ex = json_object();
	const char *key;
	json_t *v;
	json_object_foreach(a->o, key, v)
	{
		if (!in_list(known, key))
			json_object_set(ex, key, v);
	}
	if (json_object_size(ex))
		a->r.extra = a->extra = dump_or_null(ex);
	json_decref(ex);
	return ALIGN_OK;
}

static int atf_record(struct ingest *ig, struct atf_state *s, json_t *o)
{
	struct atf_rec a = {.o = o};
	a.r.line = ingest_current_line(ig);
	int rc;
	if (!(rc = read_keys(ig, s, &a)) && !(rc = read_shape(ig, &a)) && !(rc = read_bits(ig, &a)) &&
	    !(rc = read_value(ig, &a)) && !(rc = read_text(ig, &a)) && !(rc = read_digest(ig, &a)) &&
	    !(rc = read_payload(ig, s, &a)) && !(rc = read_rest(ig, &a)) && !(rc = keep_extra(&a)))
		rc = ingest_emit(ig, &a.r);
	free(s->payload);
	s->payload = NULL;
	free(a.shape);
	free(a.stats);
	free(a.head);
	free(a.extra);
	return rc;
}

/* The header's "run" and "framework" (strings when present, NULL when absent). */
static int header_names_of(struct ingest *ig, json_t *h, const char **run, const char **framework)
{
	*run = *framework = NULL;
	json_t *r = json_object_get(h, "run"), *f = json_object_get(h, "framework");
	if (r && (!json_is_string(r) || !*json_string_value(r)))
		return ingest_error(ig, 1, "field 'run': expected the run's name (a non-empty string)");
	if (f && (!json_is_string(f) || !*json_string_value(f)))
		return ingest_error(ig, 1, "field 'framework': expected a non-empty string");
	*run = r ? json_string_value(r) : NULL;
	*framework = f ? json_string_value(f) : NULL;
	return ALIGN_OK;
}

/* The names hook: the header line, read from the first bytes before the run is created. A header
 * that is not a JSON object of version 1 names nothing here (atf_parse reports it with its line). */
static int atf_names(struct ingest *ig, const char *head, size_t len, char *run, size_t run_size, char *framework,
		     size_t framework_size)
{
	const char *nl = memchr(head, '\n', len);
	if (!nl && len >= ATF_HEAD_MAX)
		return ingest_error(ig, 1,
				    "header line longer than %d bytes (the header names the run: keep it "
				    "short, env and modes included)",
				    ATF_HEAD_MAX);
	if (!nl)
		return ALIGN_OK;
	json_t *h = json_loadb(head, (size_t)(nl - head), 0, NULL);
	const char *r = NULL, *f = NULL;
	json_t *ver = json_object_get(h, "align_trace"); /* another version names nothing: parse refuses it */
	int ours = json_is_integer(ver) && json_integer_value(ver) == ATF_VERSION;
	int rc = ours ? header_names_of(ig, h, &r, &f) : ALIGN_OK;
	if (!rc && r && strlen(r) >= run_size)
		rc = ingest_error(ig, 1, "field 'run': longer than %zu bytes", run_size - 1);
	if (!rc && f && strlen(f) >= framework_size)
		rc = ingest_error(ig, 1, "field 'framework': longer than %zu bytes", framework_size - 1);
	if (!rc) {
		snprintf(run, run_size, "%s", r ? r : "");
		snprintf(framework, framework_size, "%s", f ? f : "");
	}
	json_decref(h);
	return rc;
}

static int atf_header(struct ingest *ig, struct atf_state *s, json_t *h)
{
	json_t *ver = json_object_get(h, "align_trace");
	const char *run, *framework;
	if (!json_is_integer(ver))
		return ingest_error(ig, 1, "field 'align_trace': expected the integer version");
	if (json_integer_value(ver) != ATF_VERSION)
		return ingest_error(ig, 1, "unsupported ATF version %lld (this align reads version %d)",
				    (long long)json_integer_value(ver), ATF_VERSION);
	ALIGN_TRY(ingest_err(ig), header_names_of(ig, h, &run, &framework));
	int64_t rank = ingest_file_rank(ig) >= 0 ? ingest_file_rank(ig) : 0;
	ALIGN_TRY(ingest_err(ig), get_count(ig, h, "rank", rank, 0, &s->rank));
	char *text = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
	int rc = ingest_set_header(ig, text);
	free(text);
	return rc;
}

/* The longest ATF line: a record carries its payload inline (base64, 4/3 of the tensor's bytes), so a
 * 192 MiB tensor fits; other formats keep the reader's 1 MiB. */
#define ATF_MAX_LINE ((size_t)256 << 20)

static int atf_parse(struct ingest *ig, struct reader *rd)
{
	struct atf_state s = {0};
	char *line;
	size_t len;
	int term, got, rc = ALIGN_OK, have_header = 0;
	reader_set_max_line(rd, ATF_MAX_LINE);
	while ((got = reader_next_line(rd, &line, &len, &term)) == 1) {
		size_t sp = strspn(line, " \t\r");
		if (sp == len)
			continue;
		if (!term) {
			ingest_warn(ig, 0, "last line is not terminated (truncated trace?): ignored");
			break;
		}
		json_error_t e;
		json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &e);
		if (!json_is_object(o)) {
			json_decref(o);
			return ingest_error(ig, 0, "not a JSON object: %s (column %d)",
					    o ? "another JSON value" : e.text, e.column);
		}
		rc = have_header ? atf_record(ig, &s, o) : atf_header(ig, &s, o);
		have_header = 1;
		json_decref(o);
		if (rc)
			return rc;
	}
	if (got < 0 || got > 1)
		return got;
	if (!have_header)
		return ingest_error(ig, 1, "empty trace: no header line");
	return rc;
}

/* name, framework and summary: the atf row of formats.def */
const struct ingest_parser ingest_parser_atf = {
	.detect = atf_detect,
	.parse = atf_parse,
	.names = atf_names,
};
