/* ingest-atf: the align trace, ATF v1 (JSON Lines). Specification in README.md "The align trace".
 * Line 1: header object with "align_trace": 1. Each further line: one record object. Unknown fields of
 * a record are kept verbatim in record.extra; unknown versions are refused. */
#include "digest.h"
#include "dtype.h"
#include "err.h"
#include "ingest.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATF_VERSION 1

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

static const char *const known[] = {"rank",  "step", "micro",	"seq",	"name",	  "phase",  "dtype",
				    "shape", "bits", "value",	"text", "digits", "digest", "digest_alg",
				    "stats", "head", "payload", "call", "io",	  NULL};

static int is_known(const char *key)
{
	for (int i = 0; known[i]; i++)
		if (!strcmp(known[i], key))
			return 1;
	return 0;
}

struct atf_state {
	int64_t rank;		/* header rank: the default of records */
	unsigned char *payload; /* decoded payload of the current record */
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

static int get_str(struct ingest *ig, json_t *o, const char *key, int required, const char **out)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v)
		return required ? ingest_error(ig, 0, "missing field '%s'", key) : ALIGN_OK;
	if (!json_is_string(v))
		return ingest_error(ig, 0, "field '%s': expected a string", key);
	*out = json_string_value(v);
	return ALIGN_OK;
}

/* shape: array of non-negative integers; returns element count in *count. */
static int check_shape(struct ingest *ig, json_t *shape, uint64_t *count)
{
	*count = 1;
	if (!json_is_array(shape))
		return ingest_error(ig, 0, "field 'shape': expected an array of integers");
	size_t i;
	json_t *d;
	json_array_foreach(shape, i, d)
	{
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			return ingest_error(ig, 0, "field 'shape': dimension %zu is not a non-negative integer", i);
		*count *= (uint64_t)json_integer_value(d);
	}
	return ALIGN_OK;
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

static int decode_payload(struct ingest *ig, const char *b64, uint64_t expect, unsigned char **out, size_t *len)
{
	size_t n = strlen(b64);
	if (n % 4)
		return ingest_error(ig, 0, "field 'payload': base64 length %zu is not a multiple of 4", n);
	unsigned char *buf = malloc(n / 4 * 3 + 1);
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

static char *dump_or_null(json_t *v)
{
	return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) : NULL;
}

static int atf_record(struct ingest *ig, struct atf_state *s, json_t *o)
{
	struct rec r = {0};
	int rc;
	r.line = ingest_current_line(ig);
	if ((rc = get_int(ig, o, "rank", s->rank, 0, &r.rank)) || (rc = get_int(ig, o, "step", 0, 1, &r.step)) ||
	    (rc = get_int(ig, o, "micro", 0, 0, &r.micro)) || (rc = get_int(ig, o, "seq", ALIGN_NO_SEQ, 0, &r.seq)) ||
	    (rc = get_str(ig, o, "name", 1, &r.name)) || (rc = get_str(ig, o, "phase", 0, &r.phase)) ||
	    (rc = get_str(ig, o, "dtype", 0, &r.dtype)) || (rc = get_str(ig, o, "digest", 0, &r.digest)) ||
	    (rc = get_str(ig, o, "digest_alg", 0, &r.digest_alg)))
		return rc;
	if ((rc = get_str(ig, o, "call", 0, &r.call)) || (rc = get_str(ig, o, "io", 0, &r.io)))
		return rc;
	if (r.io && strcmp(r.io, "in") && strcmp(r.io, "out"))
		return ingest_error(ig, 0, "field 'io': '%s' (expected \"in\" or \"out\")", r.io);
	if (!r.call != !r.io)
		return ingest_error(ig, 0, "field '%s' without field '%s' (the input/output link needs both)",
				    r.call ? "call" : "io", r.call ? "io" : "call");
	if (r.seq != ALIGN_NO_SEQ && r.seq < 0)
		return ingest_error(ig, 0, "field 'seq': negative (%lld)", (long long)r.seq);
	if (!r.phase)
		r.phase = "fwd";
	size_t esize = 0;
	if (r.dtype && !(esize = dtype_size(r.dtype)))
		return ingest_error(ig, 0, "field 'dtype': unknown dtype '%s' (expected one of %s)", r.dtype,
				    dtype_names());
	json_t *shape = json_object_get(o, "shape");
	uint64_t count = 1;
	char *shape_text = NULL, *stats = NULL, *head = NULL, *extra = NULL;
	if (shape && (rc = check_shape(ig, shape, &count)))
		return rc;
	if (shape && json_array_size(shape) > 0) {
		if (!r.dtype)
			return ingest_error(ig, 0, "field 'dtype': required for a tensor (shape given)");
		shape_text = dump_or_null(shape);
	}
	const char *bits = NULL, *payload = NULL;
	if ((rc = get_str(ig, o, "bits", 0, &bits)) || (rc = get_str(ig, o, "payload", 0, &payload)))
		goto out;
	if (bits) {
		if (!r.dtype) {
			rc = ingest_error(ig, 0, "field 'bits': needs 'dtype'");
			goto out;
		}
		if (parse_hex_bits(bits, esize, &r.bits)) {
			rc = ingest_error(ig, 0, "field 'bits': '%s' is not a hex pattern of %zu bytes (%s)", bits,
					  esize, r.dtype);
			goto out;
		}
		r.has_bits = 1;
	}
	json_t *value = json_object_get(o, "value");
	char vtext[64];
	if (value && !r.has_bits) {
		if (json_is_number(value)) {
			snprintf(vtext, sizeof vtext, "%.17g", json_number_value(value));
			r.text = vtext;
		} else if (json_is_string(value)) {
			r.text = json_string_value(value);
		} else {
			rc = ingest_error(ig, 0, "field 'value': expected a number or a string such as \"nan\"");
			goto out;
		}
		r.prec = PREC_EXACT;
	}
	size_t plen = 0;
	if (payload) {
		if (!r.dtype) {
			rc = ingest_error(ig, 0, "field 'payload': needs 'dtype'");
			goto out;
		}
		if ((rc = decode_payload(ig, payload, count * esize, &s->payload, &plen)))
			goto out;
		r.payload = s->payload, r.payload_len = plen;
		char hex[17];
		digest_hex(digest_xxh3t64(s->payload, plen), hex);
		if (r.digest && (!r.digest_alg || !strcmp(r.digest_alg, DIGEST_ALG)) && strcmp(r.digest, hex)) {
			rc = ingest_error(ig, 0, "field 'digest': %s does not match the payload (which hashes to %s)",
					  r.digest, hex);
			goto out;
		}
		if (!r.digest) {
			r.digest = hex;
			r.digest_alg = DIGEST_ALG;
		}
		rc = ALIGN_OK;
	}
	if (r.digest && !r.digest_alg)
		r.digest_alg = DIGEST_ALG;
	stats = dump_or_null(json_object_get(o, "stats"));
	head = dump_or_null(json_object_get(o, "head"));
	r.stats = stats, r.head = head, r.shape = shape_text;
	json_t *ex = json_object();
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		if (!is_known(key))
			json_object_set(ex, key, v);
	}
	if (json_object_size(ex))
		r.extra = extra = dump_or_null(ex);
	json_decref(ex);
	rc = ingest_emit(ig, &r);
out:
	free(s->payload);
	s->payload = NULL;
	free(shape_text);
	free(stats);
	free(head);
	free(extra);
	return rc;
}

static int atf_header(struct ingest *ig, struct atf_state *s, json_t *h)
{
	json_t *ver = json_object_get(h, "align_trace");
	if (!json_is_integer(ver))
		return ingest_error(ig, 1, "field 'align_trace': expected the integer version");
	if (json_integer_value(ver) != ATF_VERSION)
		return ingest_error(ig, 1, "unsupported ATF version %lld (this align reads version %d)",
				    (long long)json_integer_value(ver), ATF_VERSION);
	int64_t rank = ingest_file_rank(ig) >= 0 ? ingest_file_rank(ig) : 0;
	ALIGN_TRY(ingest_err(ig), get_int(ig, h, "rank", rank, 0, &s->rank));
	char *text = json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS);
	int rc = ingest_set_header(ig, text);
	free(text);
	return rc;
}

static int atf_parse(struct ingest *ig, struct reader *rd)
{
	struct atf_state s = {0};
	char *line;
	size_t len;
	int term, got, rc = ALIGN_OK, have_header = 0;
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
};
