/* ingest-anchor: the alignment-anchor scanner (contract and step rule in anchor.h) and the `anchor`
 * format: files that hold anchors among other noise but no trainer lines. The float32 md5 helpers it
 * uses live in ingest-paddle-metrics.c with the other helpers for Python-printed values. */
#include "anchor.h"

#include "err.h"
#include "numtext.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* ---- text helpers ---- */

size_t anchor_strip_ansi(const char *in, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (in[i] != '\x1b') {
			out[o++] = in[i];
			continue;
		}
		if (i + 1 < n && in[i + 1] == '[') {
			size_t j = i + 2;
			while (j < n && (unsigned char)in[j] >= 0x20 && (unsigned char)in[j] <= 0x3f)
				j++;
			i = j < n ? j : n - 1; /* j: the final byte */
		} else if (i + 1 < n) {
			i++;
		}
	}
	return o;
}

enum tag_kind { TAG_PTL, TAG_FINAL, TAG_PATH, TAG_MTP_PATH, TAG_PROBE, TAG_PROBE_PF };

static const struct {
	const char *text;
	size_t len;
	enum tag_kind kind;
} tags[] = {
	{"per_token_loss:", 15, TAG_PTL},	   {"final_loss:", 11, TAG_FINAL}, {"[LOSS_PATH_MD5]", 15, TAG_PATH},
	{"[MTP_LOSS_PATH_MD5]", 19, TAG_MTP_PATH}, {"[MD5 Probe]", 11, TAG_PROBE}, {"[MD5 Probe PF]", 14, TAG_PROBE_PF},
};
#define N_TAGS (sizeof tags / sizeof tags[0])

/* Earliest tag text at or after pos; returns its index into tags, or -1. One pass over the line: at
 * most one tag matches at a position (they differ before either ends), so the first hit is the earliest. */
static int next_tag(const char *line, size_t len, size_t pos, size_t *at)
{
	for (size_t i = pos; i < len; i++) {
		char c = line[i];
		if (c != 'p' && c != 'f' && c != '[')
			continue;
		for (size_t t = 0; t < N_TAGS; t++)
			if (tags[t].text[0] == c && len - i >= tags[t].len &&
			    !memcmp(line + i, tags[t].text, tags[t].len)) {
				*at = i;
				return (int)t;
			}
	}
	return -1;
}

/* The colon tags are anchors only when "rank=" follows (a trainer key "final_loss: 1.0" is not). */
static int tag_is_anchor(const char *line, size_t len, size_t at, int t)
{
	if (tags[t].kind != TAG_PTL && tags[t].kind != TAG_FINAL)
		return 1;
	size_t p = at + tags[t].len;
	while (p < len && (line[p] == ' ' || line[p] == '\t'))
		p++;
	return len - p >= 5 && !memcmp(line + p, "rank=", 5);
}

int anchor_in_line(const char *line, size_t len)
{
	if (!memmem(line, len, "ank=", 4))
		return 0;
	size_t pos = 0, at = 0;
	int t;
	while ((t = next_tag(line, len, pos, &at)) >= 0) {
		if (tag_is_anchor(line, len, at, t))
			return 1;
		pos = at + tags[t].len;
	}
	return 0;
}

/* ---- fields of one anchor: key=value items and at most one bare name ---- */

struct afield {
	const char *key, *val; /* key NULL: a bare name in val */
	size_t key_len, val_len;
};

struct afields {
	struct afield f[16];
	int n;
	char shape[128]; /* normalised shape of the first shape= field, "" if none */
};

enum vkind { V_INT, V_SHAPE, V_MD5, V_WORD, V_NUM };

static int key_is(const struct afield *f, const char *k)
{
	return f->key && f->key_len == strlen(k) && !memcmp(f->key, k, f->key_len);
}

static enum vkind value_kind(const char *k, size_t n)
{
	if ((n == 4 && (!memcmp(k, "rank", 4) || !memcmp(k, "Rank", 4))) || (n == 5 && !memcmp(k, "Layer", 5)))
		return V_INT;
	if (n == 5 && !memcmp(k, "shape", 5))
		return V_SHAPE;
	if ((n == 3 && (!memcmp(k, "md5", 3) || !memcmp(k, "MD5", 3))) || (n > 4 && !memcmp(k + n - 4, "_md5", 4)))
		return V_MD5;
	if (n == 7 && !memcmp(k, "q_dtype", 7))
		return V_WORD;
	return V_NUM;
}

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

/* Length of a number at s (Python repr, {:.20f}, nan, inf); 0 if none. */
static size_t number_len(const char *s, size_t n)
{
	size_t i = 0;
	if (i < n && (s[i] == '-' || s[i] == '+'))
		i++;
	static const char *const words[] = {"infinity", "inf", "nan"};
	for (int w = 0; w < 3; w++) {
		size_t wl = strlen(words[w]);
		if (n - i >= wl && !strncasecmp(s + i, words[w], wl))
			return i + wl;
	}
	size_t d = i;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i < n && s[i] == '.')
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			;
	if (i == d || (i == d + 1 && s[d] == '.'))
		return 0;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		size_t j = i + 1;
		if (j < n && (s[j] == '-' || s[j] == '+'))
			j++;
		if (j < n && s[j] >= '0' && s[j] <= '9') {
			while (j < n && s[j] >= '0' && s[j] <= '9')
				j++;
			i = j;
		}
	}
	return i;
}

/* Shape "[1, 4096]" -> "[1,4096]" in out; returns 0 or -1. */
static int shape_norm(const char *s, size_t n, char *out, size_t outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == ' ')
			continue;
		if (!((c >= '0' && c <= '9') || c == ',' || c == '[' || c == ']') || o + 1 >= outlen)
			return -1;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

/* Value of key k at p: its length, or an error (printed). */
static int scan_value(struct ingest *ig, const char *tagname, const char *k, size_t kl, const char *p, size_t n,
		      struct afields *af, size_t *vlen)
{
	enum vkind vk = value_kind(k, kl);
	size_t i = 0;
	switch (vk) {
	case V_INT:
		while (i < n && p[i] >= '0' && p[i] <= '9')
			i++;
		if (!i)
			return ingest_error(ig, 0, "%s anchor: field '%.*s': not an integer: '%.*s'", tagname, (int)kl,
					    k, (int)(n > 20 ? 20 : n), p);
		break;
	case V_SHAPE: {
		const char *close = n && p[0] == '[' ? memchr(p, ']', n) : NULL;
		if (!close)
			return ingest_error(ig, 0, "%s anchor: field 'shape': expected a list [d, ...]", tagname);
		i = (size_t)(close - p) + 1;
		char norm[128];
		if (shape_norm(p, i, norm, sizeof norm))
			return ingest_error(ig, 0, "%s anchor: field 'shape': not a list of integers: '%.*s'", tagname,
					    (int)(i > 60 ? 60 : i), p);
		if (!af->shape[0])
			snprintf(af->shape, sizeof af->shape, "%s", norm);
		break;
	}
	case V_MD5:
		while (i < n && is_hex(p[i]))
			i++;
		if (i != 32)
			return ingest_error(ig, 0, "%s anchor: field '%.*s': malformed md5 '%.*s' (not 32 hex digits)",
					    tagname, (int)kl, k, (int)(i > 40 ? 40 : (i ? i : (n > 20 ? 20 : n))), p);
		break;
	case V_WORD:
		while (i < n && p[i] != ' ' && p[i] != '\t')
			i++;
		break;
	case V_NUM:
		i = number_len(p, n);
		if (!i)
			return ingest_error(ig, 0, "%s anchor: field '%.*s': not a number: '%.*s'", tagname, (int)kl, k,
					    (int)(n > 20 ? 20 : n), p);
		break;
	}
	*vlen = i;
	return ALIGN_OK;
}

/* Items of an anchor after its tag, up to the first foreign text. */
static int scan_fields(struct ingest *ig, const char *tagname, const char *p, size_t n, struct afields *af)
{
	size_t i = 0;
	int named = 0, keyed = 0;
	af->n = 0;
	af->shape[0] = '\0';
	while (af->n < (int)(sizeof af->f / sizeof af->f[0])) {
		while (i < n && (p[i] == ' ' || p[i] == '\t'))
			i++;
		size_t w = i;
		while (w < n && is_name_char(p[w]))
			w++;
		if (w == i)
			break; /* end, or foreign text */
		struct afield *f = &af->f[af->n];
		if (w < n && p[w] == '=') {
			size_t vl = 0;
			ALIGN_TRY(ingest_err(ig), scan_value(ig, tagname, p + i, w - i, p + w + 1, n - w - 1, af, &vl));
			*f = (struct afield){.key = p + i, .key_len = w - i, .val = p + w + 1, .val_len = vl};
			i = w + 1 + vl;
			keyed = 1;
		} else {
			if (named || (keyed && af->n > 0 &&
				      !(af->f[af->n - 1].key &&
					value_kind(af->f[af->n - 1].key, af->f[af->n - 1].key_len) == V_INT)))
				break; /* a second word, or a word after data fields: someone else's text */
			*f = (struct afield){.val = p + i, .val_len = w - i};
			named = 1;
			i = w;
		}
		af->n++;
	}
	return ALIGN_OK;
}

static const struct afield *field(const struct afields *af, const char *k)
{
	for (int i = 0; i < af->n; i++)
		if (key_is(&af->f[i], k))
			return &af->f[i];
	return NULL;
}

static const struct afield *bare_name(const struct afields *af)
{
	for (int i = 0; i < af->n; i++)
		if (!af->f[i].key)
			return &af->f[i];
	return NULL;
}

/* ---- clock ---- */

static struct anchor_rank *rank_slot(struct anchor_state *s, int64_t rank)
{
	for (size_t i = 0; i < s->n_ranks; i++)
		if (s->ranks[i].rank == rank)
			return &s->ranks[i];
	if (s->n_ranks == s->cap_ranks) {
		size_t cap = s->cap_ranks ? 2 * s->cap_ranks : 8;
		struct anchor_rank *g = realloc(s->ranks, cap * sizeof *g);
		if (!g)
			return NULL;
		s->ranks = g, s->cap_ranks = cap;
	}
	struct anchor_rank *ar = &s->ranks[s->n_ranks++];
	memset(ar, 0, sizeof *ar);
	ar->rank = rank;
	ar->ticks = (s->base_step - 1) * s->mb * s->n_order;
	for (int k = 0; k < ANCHOR_MAX_KINDS; k++)
		ar->kind_ticks[k] = (s->base_step - 1) * s->mb;
	return ar;
}

/* Where the next anchors of a rank go: the micro-batch of its next tick (of `kind` on the PATH clock). */
static void position(const struct anchor_state *s, const struct anchor_rank *ar, int kind, int64_t *step,
		     int64_t *micro)
{
	if (ar->clock == ANCHOR_CLOCK_PATH) {
		int64_t j = ar->kind_ticks[kind];
		*step = j / s->mb + 1;
		*micro = j % s->mb;
	} else {
		int64_t per = (int64_t)s->mb * s->n_order;
		*step = ar->ticks / per + 1;
		*micro = (ar->ticks % per) / s->n_order;
	}
}

static void kind_name(int kind, const char *suffix, char *out, size_t len)
{
	if (kind == 0)
		snprintf(out, len, "%s", suffix);
	else
		snprintf(out, len, "mtp%d.%s", kind, suffix);
}

/* The rank's clock advances past one tick of `clock` type and `kind`. */
static void tick(struct anchor_rank *ar, enum anchor_clock clock, int kind)
{
	if (ar->clock == ANCHOR_CLOCK_NONE)
		ar->clock = clock;
	if (clock == ANCHOR_CLOCK_FINAL)
		ar->ticks++;
	else
		ar->kind_ticks[kind]++;
	if (ar->clock == clock)
		ar->since_tick = -1;
}

/* ---- records ---- */

static int ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && !memcmp(s + n - k, suffix, k);
}

/* grad for .grad/_grad, param for weights, loss for the loss path's own values, else fwd. */
static const char *phase_of(const char *name)
{
	size_t n = strlen(name);
	if (ends_with(name, n, ".grad") || ends_with(name, n, "_grad"))
		return "grad";
	if (ends_with(name, n, "_weight") || ends_with(name, n, ".weight"))
		return "param";
	if (ends_with(name, n, "loss") || ends_with(name, n, "loss_sum") || ends_with(name, n, "valid_tokens") ||
	    ends_with(name, n, "lossmask"))
		return "loss";
	return "fwd";
}

static const char *dtype_of(const char *name)
{
	return ends_with(name, strlen(name), "labels") ? "int64" : "fp32";
}

/* A number's precision class: {:.20f} (20+ fixed decimals) is a rounding, anything else a repr. */
static enum prec_kind number_prec(const char *v, size_t n)
{
	const char *dot = memchr(v, '.', n);
	if (!dot || memchr(v, 'e', n) || memchr(v, 'E', n))
		return PREC_EXACT;
	return (size_t)(v + n - dot - 1) >= 20 ? PREC_TEXT : PREC_EXACT;
}

struct akey {
	int64_t rank, step, micro;
};

/* Emit one anchor record; text/md5 optional. A value with its md5 is verified (warning on mismatch). */
static int emit(struct ingest *ig, const struct akey *k, const char *name, const char *shape, const struct afield *val,
		const struct afield *md5f, const char *extra)
{
	char md5[33] = "";
	struct rec r = {.rank = k->rank,
			.step = k->step,
			.micro = k->micro,
			.seq = ALIGN_NO_SEQ,
			.name = name,
			.phase = phase_of(name),
			.dtype = dtype_of(name),
			.shape = shape,
			.extra = extra};
	if (md5f) {
		for (int i = 0; i < 32; i++)
			md5[i] = (char)(md5f->val[i] | 0x20); /* hex digits: lower case */
		r.digest = md5, r.digest_alg = "md5";
	}
	if (val) {
		r.text = val->val, r.text_len = val->val_len;
		r.prec = number_prec(val->val, val->val_len);
	}
	if (val && md5f) {
		uint32_t bits;
		int v = anchor_md5_verify(val->val, val->val_len, r.prec, 0, md5, &bits);
		struct numtext nt;
		uint32_t ub;
		int unique = !numtext_parse(val->val, val->val_len, r.prec, 0, &nt) && !nt.special &&
			     (r.prec == PREC_EXACT ? (double)(float)nt.value == nt.value
						   : numtext_unique_f32(nt.lo, nt.hi, &ub));
		if (v == 1 && !unique)
			r.has_bits = 1, r.bits = bits; /* the md5 picks the float32 the print could not */
		if (v == 0)
			ingest_warn(ig, 0, "rank %lld: md5 %s of '%s' does not match its printed value %.*s",
				    (long long)k->rank, md5, name, (int)val->val_len, val->val);
	}
	return ingest_emit(ig, &r);
}

/* Does the anchor's own rank field parse? Returns the rank, or an error. */
static int get_rank(struct ingest *ig, const char *tagname, const struct afields *af, int64_t *rank)
{
	const struct afield *f = field(af, "rank");
	if (!f)
		f = field(af, "Rank");
	if (!f)
		return ingest_error(ig, 0, "%s anchor without a rank= field", tagname);
	if (f->val_len > 9)
		return ingest_error(ig, 0, "%s anchor: rank %.*s out of range", tagname, (int)f->val_len, f->val);
	*rank = strtoll(f->val, NULL, 10);
	return ALIGN_OK;
}

static int need(struct ingest *ig, const char *tagname, const struct afield *f, const char *what)
{
	return f ? ALIGN_OK : ingest_error(ig, 0, "%s anchor without a %s field", tagname, what);
}

/* "per_token_loss:" and "final_loss:" (accuracy-compatible anchors). */
static int do_accuracy(struct ingest *ig, struct anchor_state *s, struct anchor_rank *ar, int final,
		       const struct afields *af, const char *tagname)
{
	const struct afield *md5 = field(af, "md5"), *val = field(af, "val");
	int rc;
	if ((rc = need(ig, tagname, md5, "md5=")) ||
	    (rc = need(ig, tagname, final ? val : field(af, "shape"), final ? "val=" : "shape=")))
		return rc;
	int kind = s->order_kind[ar->ticks % s->n_order];
	struct akey k = {.rank = ar->rank};
	position(s, ar, kind, &k.step, &k.micro);
	char name[64];
	kind_name(kind, final ? "final_loss" : "per_token_loss", name, sizeof name);
	rc = emit(ig, &k, name, af->shape[0] && strcmp(af->shape, "[]") ? af->shape : NULL, final ? val : NULL, md5,
		  NULL);
	if (final)
		tick(ar, ANCHOR_CLOCK_FINAL, kind);
	return rc;
}

/* mtpK.final_loss -> K (1..7), 0 for anything else. */
static int mtp_tick_kind(const struct afield *f)
{
	int k = 0;
	size_t i = 3;
	if (f->key_len < 15 || memcmp(f->key, "mtp", 3))
		return 0;
	while (i < f->key_len && f->key[i] >= '0' && f->key[i] <= '9') {
		if (k < 1000) /* saturates: the caller refuses anything over ANCHOR_MAX_KINDS (no int overflow) */
			k = k * 10 + (f->key[i] - '0');
		i++;
	}
	if (i == 3 || strncmp(f->key + i, ".final_loss", 11) || i + 11 != f->key_len)
		return 0;
	return k;
}

/* "[LOSS_PATH_MD5]" and "[MTP_LOSS_PATH_MD5]": a named md5 record and/or numbers with optional X_md5. */
static int do_loss_path(struct ingest *ig, struct anchor_state *s, struct anchor_rank *ar, const struct afields *af,
			const char *tagname)
{
	const struct afield *nm = bare_name(af);
	int tick_kind = -1, rc = ALIGN_OK;
	for (int i = 0; i < af->n; i++) {
		const struct afield *f = &af->f[i];
		if (key_is(f, "final_loss"))
			tick_kind = 0;
		else if (f->key && mtp_tick_kind(f))
			tick_kind = mtp_tick_kind(f);
	}
	if (tick_kind >= ANCHOR_MAX_KINDS)
		return ingest_error(ig, 0, "%s anchor: MTP depth %d is beyond %d", tagname, tick_kind,
				    ANCHOR_MAX_KINDS - 1);
	struct akey k = {.rank = ar->rank};
	position(s, ar, tick_kind > 0 ? tick_kind : 0, &k.step, &k.micro);
	char name[160];
	int emitted = 0;
	if (nm) {
		const struct afield *md5 = field(af, "md5");
		ALIGN_TRY(ingest_err(ig), need(ig, tagname, md5, "md5="));
		snprintf(name, sizeof name, "loss_path.%.*s", (int)nm->val_len, nm->val);
		if ((rc = emit(ig, &k, name, af->shape[0] && strcmp(af->shape, "[]") ? af->shape : NULL, NULL, md5,
			       NULL)))
			return rc;
		emitted++;
	}
	for (int i = 0; i < af->n && !rc; i++) {
		const struct afield *f = &af->f[i];
		if (!f->key || value_kind(f->key, f->key_len) != V_NUM)
			continue;
		char md5key[160];
		snprintf(md5key, sizeof md5key, "%.*s_md5", (int)f->key_len, f->key);
		snprintf(name, sizeof name, "loss_path.%.*s", (int)f->key_len, f->key);
		rc = emit(ig, &k, name, NULL, f, field(af, md5key), NULL);
		emitted++;
	}
	if (!rc && !emitted)
		return ingest_error(ig, 0, "%s anchor with no name and no value after rank=", tagname);
	if (!rc && tick_kind >= 0)
		tick(ar, ANCHOR_CLOCK_PATH, tick_kind);
	return rc;
}

/* "[MD5 Probe]" (a layer's tensor) and "[MD5 Probe PF]" (PaddleFleet's extra probes). */
static int do_probe(struct ingest *ig, struct anchor_state *s, struct anchor_rank *ar, int pf, const struct afields *af,
		    const char *tagname)
{
	const struct afield *nm = bare_name(af), *md5 = field(af, "MD5"), *layer = field(af, "Layer");
	int rc;
	if ((rc = need(ig, tagname, nm, "tensor name")) || (rc = need(ig, tagname, md5, "MD5=")) ||
	    (!pf && (rc = need(ig, tagname, layer, "Layer="))))
		return rc;
	struct akey k = {.rank = ar->rank};
	position(s, ar, 0, &k.step, &k.micro);
	char name[200];
	if (pf)
		snprintf(name, sizeof name, "%.*s", (int)nm->val_len, nm->val);
	else
		snprintf(name, sizeof name, "layers.%.*s.%.*s", (int)layer->val_len, layer->val, (int)nm->val_len,
			 nm->val);
	char *extra = NULL;
	const struct afield *qd = field(af, "q_dtype");
	if (qd) {
		json_t *o = json_object();
		json_object_set_new(o, "q_dtype", json_stringn(qd->val, qd->val_len));
		extra = json_dumps(o, JSON_COMPACT);
		json_decref(o);
	}
	rc = emit(ig, &k, name, af->shape[0] && strcmp(af->shape, "[]") ? af->shape : NULL, NULL, md5, extra);
	free(extra);
	return rc;
}

/* Rebase a rank after a declared restart: its records from the restart step on are superseded. */
static int apply_restart(struct ingest *ig, struct anchor_state *s, struct anchor_rank *ar)
{
	int64_t from = ar->restart_from;
	ar->restart_from = 0;
	ar->ticks = (from - 1) * s->mb * s->n_order;
	for (int k = 0; k < ANCHOR_MAX_KINDS; k++)
		ar->kind_ticks[k] = (from - 1) * s->mb;
	ar->since_tick = 0;
	return ingest_supersede(ig, ar->rank, from);
}

static int scan_one(struct ingest *ig, struct anchor_state *s, int t, const char *p, size_t n)
{
	struct afields af;
	char tagname[24];
	snprintf(tagname, sizeof tagname, "%.*s", (int)(tags[t].len - (tags[t].text[0] != '[')), tags[t].text);
	int rc = scan_fields(ig, tagname, p, n, &af);
	int64_t rank = 0;
	if (rc || (rc = get_rank(ig, tagname, &af, &rank)))
		return rc;
	struct anchor_rank *ar = rank_slot(s, rank);
	if (!ar)
		return fail_internal(ingest_err(ig), "out of memory");
	if (ar->restart_from > 0 && (rc = apply_restart(ig, s, ar)))
		return rc;
	switch (tags[t].kind) {
	case TAG_PTL:
		rc = do_accuracy(ig, s, ar, 0, &af, tagname);
		break;
	case TAG_FINAL:
		rc = do_accuracy(ig, s, ar, 1, &af, tagname);
		break;
	case TAG_PATH:
	case TAG_MTP_PATH:
		rc = do_loss_path(ig, s, ar, &af, tagname);
		break;
	case TAG_PROBE:
		rc = do_probe(ig, s, ar, 0, &af, tagname);
		break;
	case TAG_PROBE_PF:
		rc = do_probe(ig, s, ar, 1, &af, tagname);
		break;
	}
	ar->anchors++;
	s->n_anchors++;
	/* tick() marks a tick of the rank's own clock with -1; anything else waits for the next tick */
	ar->since_tick = ar->since_tick < 0 ? 0 : ar->since_tick + 1;
	return rc;
}

int anchor_scan_line(struct ingest *ig, struct anchor_state *s, const char *line, size_t len)
{
	if (!memmem(line, len, "MD5", 3) && !memmem(line, len, "_loss:", 6)) /* in every tag */
		return ALIGN_OK;
	if (memchr(line, '\x1b', len)) {
		if (s->scratch_cap < len + 1) {
			char *g = realloc(s->scratch, len + 1);
			if (!g)
				return fail_internal(ingest_err(ig), "out of memory");
			s->scratch = g, s->scratch_cap = len + 1;
		}
		len = anchor_strip_ansi(line, len, s->scratch);
		line = s->scratch;
	}
	size_t pos = 0, at = 0;
	int t;
	while ((t = next_tag(line, len, pos, &at)) >= 0) {
		size_t body = at + tags[t].len, end = len, nat = 0;
		if (!tag_is_anchor(line, len, at, t)) {
			pos = body;
			continue;
		}
		if (next_tag(line, len, body, &nat) >= 0)
			end = nat;
		ALIGN_TRY(ingest_err(ig), scan_one(ig, s, t, line + body, end - body));
		pos = end;
	}
	return ALIGN_OK;
}

/* ---- state ---- */

/* "main" -> 0, "mtp" -> 1, "mtpK" -> K; -1 if neither. */
static int order_kind(const char *tok)
{
	if (!strcmp(tok, "main"))
		return 0;
	if (strncmp(tok, "mtp", 3))
		return -1;
	if (!tok[3])
		return 1;
	char *end;
	long k = strtol(tok + 3, &end, 10);
	return *end || k < 1 || k >= ANCHOR_MAX_KINDS || tok[3] < '0' || tok[3] > '9' ? -1 : (int)k;
}

int anchor_init(struct ingest *ig, struct anchor_state *s)
{
	const struct ingest_opts *o = ingest_get_opts(ig);
	memset(s, 0, sizeof *s);
	s->mb = o->micro_batches > 0 ? o->micro_batches : 1;
	s->base_step = 1;
	s->n_order = o->n_order > 0 ? o->n_order : 1;
	if (o->n_order <= 0)
		return ALIGN_OK; /* order_kind[0] = 0: main only */
	for (int i = 0; i < o->n_order && i < 8; i++) {
		int k = order_kind(o->order[i]);
		if (k < 0)
			return fail_input(ingest_err(ig),
					  "option '--order': '%s' is not main, mtp or mtpK (K from 1 to %d)",
					  o->order[i], ANCHOR_MAX_KINDS - 1);
		for (int j = 0; j < i; j++)
			if (s->order_kind[j] == k)
				return fail_input(ingest_err(ig), "option '--order': '%s' is listed twice",
						  o->order[i]);
		s->order_kind[i] = k;
	}
	return ALIGN_OK;
}

void anchor_restart(struct anchor_state *s, int64_t from_step)
{
	if (from_step < 1)
		from_step = 1;
	s->base_step = from_step;
	for (size_t i = 0; i < s->n_ranks; i++)
		s->ranks[i].restart_from = from_step;
}

/* Loss ticks a rank should have printed by the end of `step`, and what it has. */
static void clock_count(const struct anchor_state *s, const struct anchor_rank *ar, int64_t step, int64_t *want,
			int64_t *got)
{
	if (ar->clock == ANCHOR_CLOCK_PATH) {
		*want = step * s->mb;
		*got = ar->kind_ticks[0];
	} else {
		*want = step * s->mb * s->n_order;
		*got = ar->ticks;
	}
}

void anchor_check_step(struct ingest *ig, struct anchor_state *s, int64_t step)
{
	int64_t file_rank = ingest_file_rank(ig);
	for (size_t i = 0; i < s->n_ranks; i++) {
		struct anchor_rank *ar = &s->ranks[i];
		/* other ranks sharing the stream may lag behind the printing rank: check only the file's own */
		if (ar->warned_step || ar->clock == ANCHOR_CLOCK_NONE || ar->restart_from > 0 ||
		    (file_rank >= 0 ? ar->rank != file_rank : s->n_ranks != 1))
			continue;
		int64_t want, got;
		clock_count(s, ar, step, &want, &got);
		if (want == got)
			continue;
		ar->warned_step = 1;
		ingest_warn(ig, 0,
			    "rank %lld printed %lld loss anchors by the end of step %lld, but --micro-batches %d "
			    "--order with %d entr%s means %lld: step numbers of its anchors are wrong",
			    (long long)ar->rank, (long long)got, (long long)step, s->mb, s->n_order,
			    s->n_order == 1 ? "y" : "ies", (long long)want);
	}
}

int anchor_finish(struct ingest *ig, struct anchor_state *s)
{
	for (size_t i = 0; i < s->n_ranks; i++) {
		struct anchor_rank *ar = &s->ranks[i];
		long long r = (long long)ar->rank;
		int64_t step, micro;
		position(s, ar, 0, &step, &micro);
		if (ar->clock == ANCHOR_CLOCK_NONE) {
			ingest_warn(ig, 0,
				    "rank %lld: %lld anchors but no loss anchor (final_loss) to count steps by: all "
				    "of them are in step %lld micro-batch %lld",
				    r, (long long)ar->anchors, (long long)step, (long long)micro);
			continue;
		}
		if (ar->clock == ANCHOR_CLOCK_FINAL && ar->ticks % ((int64_t)s->mb * s->n_order))
			ingest_warn(ig, 0,
				    "rank %lld ended mid-step: %lld final_loss anchors are not whole steps of %d "
				    "micro-batches x %d losses",
				    r, (long long)ar->ticks, s->mb, s->n_order);
		for (int k = 0; ar->clock == ANCHOR_CLOCK_PATH && k < ANCHOR_MAX_KINDS; k++)
			if (ar->kind_ticks[k] % s->mb)
				ingest_warn(
					ig, 0,
					"rank %lld ended mid-step: %lld %s loss-path anchors are not whole steps of %d "
					"micro-batches",
					r, (long long)ar->kind_ticks[k], k ? "mtp" : "main", s->mb);
		if (ar->since_tick > 0)
			ingest_warn(ig, 0,
				    "rank %lld: %lld anchors after its last loss anchor, counted into step %lld "
				    "micro-batch %lld, which printed no loss",
				    r, (long long)ar->since_tick, (long long)step, (long long)micro);
	}
	anchor_free(s);
	return ALIGN_OK;
}

void anchor_free(struct anchor_state *s)
{
	free(s->ranks);
	free(s->scratch);
	s->ranks = NULL, s->scratch = NULL;
	s->n_ranks = s->cap_ranks = s->scratch_cap = 0;
}

/* ---- the `anchor` format ---- */

/* Anchors in the head, and no trainer output (paddle-log and megatron-log read anchors too: a file with
 * Paddle logger lines or Megatron banners scores below them, even before its first trainer line). */
static int anchor_detect(const char *head, size_t len, const char *path)
{
	int found = 0, other = 0;
	for (size_t i = 0; i < len && found < 1000;) {
		const char *nl = memchr(head + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - head) - i : len - i;
		if (anchor_in_line(head + i, n))
			found++;
		size_t k = i;
		if (n > 1 && head[k] == '\x1b')
			while (k < i + n && head[k] != 'm')
				k++;
		k += k > i; /* past the colour code's 'm' */
		if (k + 27 < i + n && head[k] == '[' && head[k + 20] == ',' &&
		    memmem(head + k, i + n - k < 48 ? i + n - k : 48, "] - ", 4))
			other = 1; /* a Paddle logger line: paddle-log reads anchors too */
		if (memmem(head + i, n, "-- arguments --", 15) || memmem(head + i, n, "> building GPT model", 20))
			other = 1; /* a Megatron banner: megatron-log reads anchors too */
		i += n + 1;
	}
	return !found ? 0 : other ? 30 : 60;
}

static int anchor_parse(struct ingest *ig, struct reader *rd)
{
	struct anchor_state s;
	int rc = anchor_init(ig, &s), got = 0, term;
	char *line;
	size_t len;
	while (!rc && (got = reader_next_line(rd, &line, &len, &term)) == 1) {
		if (!term) {
			if (anchor_in_line(line, len))
				ingest_warn(ig, 0,
					    "last line is not terminated (the job was killed mid-print?): its anchors "
					    "are ignored");
			break;
		}
		rc = anchor_scan_line(ig, &s, line, len);
	}
	if (!rc && got != 0 && got != 1)
		rc = got;
	if (!rc && !s.n_anchors)
		rc = ingest_error(ig, 0, "no alignment anchors in this file");
	if (rc) {
		anchor_free(&s);
		return rc;
	}
	return anchor_finish(ig, &s);
}

/* name, framework and summary: the anchor row of formats.def */
const struct ingest_parser ingest_parser_anchor = {
	.detect = anchor_detect,
	.parse = anchor_parse,
};
