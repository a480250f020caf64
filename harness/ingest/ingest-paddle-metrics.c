/* ingest-paddle-metrics: PaddleFormers/PaddleFleet metrics_rank{R}.json (--metrics_output_path): one
 * json.dumps line per trainer dict, appended by a background process (specs/formats.md section 3,
 * "Structured alternative"). Every dict goes through the same rules as the trainer log line
 * (paddle_emit_dict in ingest-paddle-log.c): same names, precision classes, md5 checks, global rank.
 * Numbers keep the text they were written with (round(x, 8) stays PREC_DEC 8).
 *
 * Also here, the helpers for Python-printed values that other parsers share (anchor.h): the json.dumps
 * reader used by xtuner (pyjson_*: NaN, Infinity and -Infinity tokens, which are not JSON and which
 * jansson refuses, are rewritten outside strings before parsing), and the float32 md5 helpers used by
 * the anchor scanner and paddle-log (anchor_md5_*: which float32 a printed value with its md5 is).
 *
 * Pitfalls handled: the rank comes from the file name (per-rank MTP values, anchor.h); an appended rerun
 * (global_step going back, or a new metrics_dumper_pid) supersedes the earlier records from that step on
 * with a warning; a last line without '\n' (killed mid-write) is ignored with a warning; a half-written
 * record glued to the first record of a rerun is cut off with a warning; anything else that is not a
 * JSON object is an error. */
#include "anchor.h"

#include "err.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- float32 md5 ---- */

/* The md5 of bits' little-endian bytes, as lower-case hex, with ctx (reused across calls: a verify tries
 * up to 4096 float32s, and a fresh context per digest costs more than the digest). */
static void md5_f32_hex(EVP_MD_CTX *ctx, uint32_t bits, char hex[33])
{
	static const char digit[] = "0123456789abcdef";
	unsigned char le[4] = {(unsigned char)bits, (unsigned char)(bits >> 8), (unsigned char)(bits >> 16),
			       (unsigned char)(bits >> 24)};
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_DigestInit_ex(ctx, EVP_md5(), NULL);
	EVP_DigestUpdate(ctx, le, 4);
	EVP_DigestFinal_ex(ctx, md, &n);
	for (unsigned i = 0; i < 16; i++)
		hex[2 * i] = digit[md[i] >> 4], hex[2 * i + 1] = digit[md[i] & 15];
	hex[32] = '\0';
}

void anchor_md5_f32(uint32_t bits, char hex[33])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx) {
		hex[0] = '\0'; /* out of memory: matches no md5 */
		return;
	}
	md5_f32_hex(ctx, bits, hex);
	EVP_MD_CTX_free(ctx);
}

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int anchor_is_md5(const char *s, size_t n)
{
	if (n != 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_hex(s[i]))
			return 0;
	return 1;
}

/* float32 bits <-> an unsigned order in which adjacent floats are adjacent integers (-0 just below +0) */
static uint32_t f32_order(uint32_t b)
{
	return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}
static uint32_t f32_unorder(uint32_t o)
{
	return (o & 0x80000000u) ? o & 0x7fffffffu : ~o;
}

static uint32_t f32_bits(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

int anchor_md5_verify(const char *text, size_t n, enum prec_kind prec, int prec_n, const char *md5, uint32_t *bits)
{
	struct numtext nt;
	char hex[33];
	if (numtext_parse(text, n, prec, prec_n, &nt) || nt.special == 1)
		return -1;
	uint32_t lo_o, hi_o;
	if (nt.special || prec == PREC_EXACT) {
		lo_o = hi_o = f32_order(f32_bits((float)nt.value));
	} else {
		float a = (float)nt.lo, b = (float)nt.hi;
		if ((long double)a < nt.lo)
			a = nextafterf(a, INFINITY);
		if ((long double)b > nt.hi)
			b = nextafterf(b, -INFINITY);
		if (a > b)
			return 0; /* no float32 prints like this */
		lo_o = f32_order(f32_bits(a));
		hi_o = f32_order(f32_bits(b));
		if (a == 0.0f) /* (float)lo may be +0 while -0 is inside too */
			lo_o = nt.lo <= 0 ? f32_order(0x80000000u) : lo_o;
		if (b == 0.0f)
			hi_o = nt.hi >= 0 ? f32_order(0) : hi_o;
	}
	if (hi_o - lo_o >= 4096)
		return -1;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -1; /* out of memory: not verified */
	int found = 0;
	for (uint32_t o = lo_o;; o++) {
		md5_f32_hex(ctx, f32_unorder(o), hex);
		if (!strcmp(hex, md5)) {
			*bits = f32_unorder(o);
			found = 1;
			break;
		}
		if (o == hi_o)
			break;
	}
	EVP_MD_CTX_free(ctx);
	return found;
}

/* ---- json.dumps lines ---- */

struct pj {
	const char *s;
	size_t n;
	char *out;
	size_t o;
	int sentinel; /* 1: NaN -> "\u0000nan" stand-ins; 0: NaN -> "nan" */
	struct pyjson_member *m;
	size_t max, n_m;
};

static void put(struct pj *p, const char *t, size_t k)
{
	memcpy(p->out + p->o, t, k);
	p->o += k;
}

/* A NaN/Infinity/-Infinity token at s[i]: its length, and the stand-in's text. */
static size_t special_at(const char *s, size_t n, size_t i, const char **word)
{
	static const char *const tok[] = {"NaN", "Infinity", "-Infinity"}, *const txt[] = {"nan", "inf", "-inf"};
	for (int t = 0; t < 3; t++) {
		size_t k = strlen(tok[t]);
		if (n - i >= k && !memcmp(s + i, tok[t], k)) {
			*word = txt[t];
			return k;
		}
	}
	return 0;
}

/* A top-level member value s[a..b): trimmed, strings without their quotes. */
static void add_member(struct pj *p, size_t ka, size_t kb, int key_esc, size_t a, size_t b)
{
	while (a < b && (p->s[a] == ' ' || p->s[a] == '\t'))
		a++;
	while (b > a && (p->s[b - 1] == ' ' || p->s[b - 1] == '\t'))
		b--;
	if (p->n_m >= p->max || a >= b)
		return;
	struct pyjson_member *m = &p->m[p->n_m++];
	m->key = key_esc ? NULL : p->s + ka;
	m->key_len = kb - ka;
	m->kind = p->s[a] == '"' ? 1 : (p->s[a] == '[' || p->s[a] == '{') ? 2 : 0;
	m->val = p->s + a + (m->kind == 1);
	m->val_len = b - a - 2 * (m->kind == 1 && b - a >= 2);
}

/* Copy s to out with the special tokens rewritten; note the top-level members. */
static int rewrite(struct pj *p, char *err, size_t errlen)
{
	int in_str = 0, depth = 0, esc_in_key = 0;
	size_t key_a = 0, key_b = 0, val_a = 0;
	enum { WANT_KEY, IN_KEY, WANT_COLON, IN_VALUE } st = WANT_KEY;
	for (size_t i = 0; i < p->n; i++) {
		char c = p->s[i];
		if (in_str) {
			if (c == '\\' && i + 1 < p->n) {
				if (p->sentinel && p->n - i >= 6 && !memcmp(p->s + i, "\\u0000", 6)) {
					snprintf(err, errlen,
						 "a \\u0000 escape in a string is not supported (column %zu)", i + 1);
					return -1;
				}
				esc_in_key |= depth == 1 && st == IN_KEY;
				put(p, p->s + i, 2);
				i++;
				continue;
			}
			if (c == '"') {
				in_str = 0;
				if (depth == 1 && st == IN_KEY)
					key_b = i, st = WANT_COLON;
			}
			put(p, &c, 1);
			continue;
		}
		const char *word;
		size_t k;
		if ((c == 'N' || c == 'I' || c == '-') && (k = special_at(p->s, p->n, i, &word))) {
			put(p, "\"", 1);
			if (p->sentinel)
				put(p, "\\u0000", 6);
			put(p, word, strlen(word));
			put(p, "\"", 1);
			i += k - 1;
			continue;
		}
		if (c == '"') {
			in_str = 1;
			if (depth == 1 && st == WANT_KEY)
				key_a = i + 1, esc_in_key = 0, st = IN_KEY;
		} else if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			if (depth == 1 && st == IN_VALUE)
				add_member(p, key_a, key_b, esc_in_key, val_a, i);
			depth--;
		} else if (c == ',' && depth == 1 && st == IN_VALUE) {
			add_member(p, key_a, key_b, esc_in_key, val_a, i);
			st = WANT_KEY;
		} else if (c == ':' && depth == 1 && st == WANT_COLON) {
			val_a = i + 1, st = IN_VALUE;
		}
		put(p, &c, 1);
	}
	return 0;
}

int pyjson_parse(const char *s, size_t n, json_t **out, struct pyjson_member *m, size_t max, size_t *n_m, char *err,
		 size_t errlen)
{
	struct pj p = {.s = s, .n = n, .sentinel = 1, .m = m, .max = max};
	*out = NULL;
	*n_m = 0;
	p.out = malloc(4 * n + 16); /* "NaN" (3 bytes) grows to "\u0000nan" in quotes (11) */
	if (!p.out) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (rewrite(&p, err, errlen)) {
		free(p.out);
		return -1;
	}
	json_error_t e;
	json_t *o = json_loadb(p.out, p.o, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &e);
	free(p.out);
	if (!json_is_object(o)) {
		snprintf(err, errlen, "%s (column %d)", o ? "a JSON value that is not an object" : e.text,
			 o ? 1 : e.column);
		json_decref(o);
		return -1;
	}
	*out = o;
	*n_m = p.n_m;
	return 0;
}

int pyjson_special(const json_t *v, const char **text)
{
	if (!json_is_string(v) || json_string_length(v) < 4 || json_string_value(v)[0] != '\0')
		return 0;
	*text = json_string_value(v) + 1;
	return 1;
}

char *pyjson_strict(const char *s, size_t n)
{
	struct pyjson_member none[1];
	struct pj p = {.s = s, .n = n, .m = none, .max = 0};
	char err[8];
	p.out = malloc(4 * n + 16);
	if (!p.out)
		return NULL;
	rewrite(&p, err, sizeof err); /* cannot fail without sentinels */
	p.out[p.o] = '\0';
	return p.out;
}

/* ---- the format ---- */

#define MAX_MEMBERS 256

struct pm {
	struct paddle_state ps;
	char pid[32];	      /* metrics_dumper_pid of the last record */
	int64_t first_record; /* line of the first record (0: none) */
};

/* A line that does not parse: the tail of a half-written record glued to a whole one? */
static const char *glued_tail(const char *s, size_t n, json_t **o, struct pyjson_member *m, size_t *n_m)
{
	char err[160];
	for (const char *p = s + n; p > s + 1;) {
		const char *b = NULL;
		for (const char *q = p - 1; q > s; q--)
			if (*q == '{') {
				b = q;
				break;
			}
		if (!b)
			return NULL;
		if (!pyjson_parse(b, (size_t)(s + n - b), o, m, MAX_MEMBERS, n_m, err, sizeof err))
			return b;
		p = b;
	}
	return NULL;
}

/* A new dumper process (another pid) after training records: the next step going back is a rerun. */
static void note_pid(struct pm *pm, const struct pyjson_member *m, size_t n_m)
{
	for (size_t i = 0; i < n_m; i++) {
		if (!m[i].key || m[i].key_len != 18 || memcmp(m[i].key, "metrics_dumper_pid", 18) ||
		    m[i].val_len >= sizeof pm->pid)
			continue;
		char pid[32];
		snprintf(pid, sizeof pid, "%.*s", (int)m[i].val_len, m[i].val);
		if (pm->pid[0] && strcmp(pid, pm->pid) && pm->ps.last_step) {
			pm->ps.restart_banner = 1;
			paddle_note_resume(&pm->ps, 0); /* no banner says where the new process resumed */
		}
		memcpy(pm->pid, pid, sizeof pid);
	}
}

static int pm_line(struct ingest *ig, struct pm *pm, const char *s, size_t n, struct pyjson_member *m)
{
	char err[200];
	json_t *o;
	size_t n_m;
	int64_t line = ingest_current_line(ig);
	if (pyjson_parse(s, n, &o, m, MAX_MEMBERS, &n_m, err, sizeof err)) {
		const char *tail = glued_tail(s, n, &o, m, &n_m);
		if (!tail)
			return ingest_error(ig, line, "not a JSON object: %s", err);
		ingest_warn(ig, line,
			    "a half-written record (%zu bytes) is glued to the next one (a rerun appended after "
			    "a kill?): it is ignored",
			    (size_t)(tail - s));
	}
	json_decref(o); /* validated; the values are read from the raw members */
	struct paddle_kv kv[MAX_MEMBERS];
	size_t k = 0;
	for (size_t i = 0; i < n_m; i++) {
		if (!m[i].key)
			continue;
		kv[k++] = (struct paddle_kv){.key = m[i].key,
					     .key_len = m[i].key_len,
					     .val = m[i].val,
					     .val_len = m[i].val_len,
					     .is_string = m[i].kind != 0};
	}
	note_pid(pm, m, n_m);
	if (!pm->first_record)
		pm->first_record = line;
	return paddle_emit_dict(ig, &pm->ps, kv, k, line);
}

static int pm_parse(struct ingest *ig, struct reader *rd)
{
	struct pm pm = {.ps = {.file_rank = ingest_file_rank(ig)}};
	struct pyjson_member *m = malloc(MAX_MEMBERS * sizeof *m);
	char *line;
	size_t len;
	int term, got, rc = ALIGN_OK;
	if (!m)
		return fail_internal(ingest_err(ig), "out of memory");
	while (!rc && (got = reader_next_line(rd, &line, &len, &term)) == 1) {
		if (strspn(line, " \t\r") == len)
			continue;
		if (!term) {
			ingest_warn(ig, 0, "last line is not terminated (the dumper was killed mid-write?): ignored");
			break;
		}
		rc = pm_line(ig, &pm, line, len, m);
	}
	free(m);
	if (rc)
		return rc;
	if (got != 0 && got != 1)
		return got;
	if (!pm.ps.dicts && pm.ps.first_line)
		return ingest_error(ig, pm.ps.first_line,
				    "no trainer records (\"loss\" and \"global_step\", or \"eval_loss\"): the first "
				    "record that looks like one %s",
				    pm.ps.first_what);
	if (!pm.ps.dicts)
		return ingest_error(ig, pm.first_record ? pm.first_record : 0,
				    "no trainer records (\"loss\" and \"global_step\", or \"eval_loss\"): %s",
				    pm.first_record ? "the first record (here) has neither" : "the file has no record");
	return ALIGN_OK;
}

/* A first line that is a JSON object with the trainer's keys, or the dumper's own. */
static int pm_detect(const char *head, size_t len, const char *path)
{
	size_t i = 0;
	while (i < len && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r'))
		i++;
	if (i >= len || head[i] != '{')
		return 0;
	const char *nl = memchr(head + i, '\n', len - i);
	size_t n = nl ? (size_t)(nl - head) - i : len - i;
	const char *s = head + i;
	if (memmem(s, n, "\"metrics_dumper_pid\"", 20))
		return 95;
	if (memmem(s, n, "\"global_step\"", 13) && (memmem(s, n, "\"loss\"", 6) || memmem(s, n, "\"eval_loss\"", 11)))
		return 90;
	return 0;
}

/* name, framework and summary: the paddle_metrics row of formats.def */
const struct ingest_parser ingest_parser_paddle_metrics = {
	.detect = pm_detect,
	.parse = pm_parse,
};
