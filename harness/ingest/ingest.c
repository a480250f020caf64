/* ingest: record classification, execution order and the step summaries of the records a file emits;
 * occurrences and the merge of a run's sources are ingest-merge.c's. */
#include "ingest.h"

#include "err.h"
#include "names.h"
#include "store-ingest.h"
#include "store.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>

#include "ingest-impl.h"

const char *ingest_path(const struct ingest *ig)
{
	return reader_path(ig->r);
}
const struct ingest_opts *ingest_get_opts(const struct ingest *ig)
{
	return ig->opts;
}
int64_t ingest_file_rank(const struct ingest *ig)
{
	return ig->file_rank;
}
int64_t ingest_current_line(const struct ingest *ig)
{
	return reader_lineno(ig->r);
}
struct align_err *ingest_err(struct ingest *ig)
{
	return ig->e;
}

void ingest_warn(struct ingest *ig, int64_t line, const char *fmt, ...)
{
	char msg[512], full[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof full, "%s:%lld: %s", ingest_path(ig), (long long)(line ? line : reader_lineno(ig->r)),
		 msg);
	if (!ig->opts->quiet)
		warn_msg("%s", full);
	json_array_append_new(ig->warnings, json_string(full));
}

int ingest_error(struct ingest *ig, int64_t line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return fail_input(ig->e, "%s:%lld: %s", ingest_path(ig), (long long)(line ? line : reader_lineno(ig->r)), msg);
}

/* Rank from the file name: workerlog.N, rankN, RANK_N, globalrank-N, rank-N. */
int64_t ingest_rank_from_path(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	static const char *const tags[] = {"workerlog.", "globalrank-", "_RANK_", "rank", "RANK_", "rank-", "rank_"};
	for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
		const char *p = strstr(base, tags[t]);
		if (p) {
			p += strlen(tags[t]);
			if (*p >= '0' && *p <= '9')
				return strtoll(p, NULL, 10);
		}
	}
	return -1;
}

/* *seq = the next seq of rank (counted on from the database's when the run preexisted). */
static int next_seq(struct ingest *ig, int64_t rank, int64_t *seq)
{
	for (size_t i = 0; i < ig->n_seq; i++)
		if (ig->seq[i].rank == rank) {
			*seq = ig->seq[i].next++;
			return ALIGN_OK;
		}
	if (ig->n_seq == ig->cap_seq) {
		size_t cap = ig->cap_seq ? 2 * ig->cap_seq : 16;
		struct seq_slot *grown = realloc(ig->seq, cap * sizeof *grown);
		if (!grown)
			return fail_internal(ig->e, "out of memory");
		ig->seq = grown, ig->cap_seq = cap;
	}
	int64_t start = 0;
	if (ig->run_preexisted)
		ALIGN_TRY(ig->e, store_next_seq(&ig->st, ig->run_id, rank, &start));
	ig->seq[ig->n_seq].rank = rank;
	ig->seq[ig->n_seq].next = start + 1;
	ig->n_seq++;
	*seq = start;
	return ALIGN_OK;
}

/* Explicit seq from a trace: keep the counter past it so later implicit ones do not collide. */
static int note_seq(struct ingest *ig, int64_t rank, int64_t seq)
{
	for (size_t i = 0; i < ig->n_seq; i++)
		if (ig->seq[i].rank == rank) {
			if (ig->seq[i].next <= seq)
				ig->seq[i].next = seq + 1;
			return ALIGN_OK;
		}
	int64_t unused;
	ALIGN_TRY(ig->e, next_seq(ig, rank, &unused));
	return note_seq(ig, rank, seq);
}

/* The summary slot of (rank, step), NULL when out of memory. ig->steps is one block: steps_cap slots in
 * the order their (rank, step) first came (steps_used of them), then an open-addressing table of
 * 2 * steps_cap slot numbers + 1 (0: empty). First-come order is step order in a log, so the flush's
 * upserts walk the stepsum b-tree from left to right without a sort. */
static struct step_slot *step_lookup(struct ingest *ig, int64_t rank, int64_t step)
{
	if (ig->steps_used == ig->steps_cap) {
		size_t cap = ig->steps_cap ? 2 * ig->steps_cap : 512, mask = 2 * cap - 1;
		struct step_slot *grown =
			cap < UINT32_MAX / 2 ? malloc(cap * sizeof *grown + 2 * cap * sizeof(uint32_t)) : NULL;
		if (!grown)
			return NULL;
		uint32_t *tab = (uint32_t *)(grown + cap);
		memset(tab, 0, 2 * cap * sizeof *tab);
		for (size_t i = 0; i < ig->steps_used; i++) {
			grown[i] = ig->steps[i];
			size_t j = (size_t)XXH3_64bits(&grown[i].rank, 16) & mask;
			while (tab[j])
				j = (j + 1) & mask;
			tab[j] = (uint32_t)(i + 1);
		}
		free(ig->steps);
		ig->steps = grown;
		ig->steps_cap = cap;
	}
	uint32_t *tab = (uint32_t *)(ig->steps + ig->steps_cap);
	size_t mask = 2 * ig->steps_cap - 1;
	int64_t k[2] = {rank, step};
	size_t j = (size_t)XXH3_64bits(k, 16) & mask;
	for (; tab[j]; j = (j + 1) & mask) {
		struct step_slot *s = &ig->steps[tab[j] - 1];
		if (s->rank == rank && s->step == step)
			return s;
	}
	struct step_slot *s = &ig->steps[ig->steps_used];
	*s = (struct step_slot){.rank = rank, .step = step, .used = 1};
	tab[j] = (uint32_t)++ig->steps_used;
	return s;
}

int ingest_flush_stepsum(struct ingest *ig)
{
	struct store_stepsum *rows = malloc((ig->steps_used ? ig->steps_used : 1) * sizeof *rows);
	if (!rows)
		return fail_internal(ig->e, "out of memory");
	size_t n = 0;
	for (size_t i = 0; i < ig->steps_used; i++) {
		struct step_slot *s = &ig->steps[i];
		if (!s->n)
			continue;
		/* h is a sum mod 2^64; SQLite integer addition must not overflow, so store the high-bit-cleared
		 * sum of 63-bit parts: add in unsigned space here, keep 62 bits per flush (the upsert masks
		 * the sum with a stored h to 62 bits) */
		rows[n++] = (struct store_stepsum){.rank = s->rank,
						   .step = s->step,
						   .n = s->n,
						   .n_exact = s->n_exact,
						   .h = (int64_t)(s->h & 0x3fffffffffffffffull)};
	}
	int rc = store_add_stepsums(&ig->st, ig->run_id, rows, n);
	free(rows);
	free(ig->steps);
	ig->steps = NULL;
	ig->steps_cap = ig->steps_used = 0;
	return rc;
}

int ingest_supersede(struct ingest *ig, int64_t rank, int64_t from_step)
{
	for (size_t i = 0; i < ig->steps_used; i++)
		if (ig->steps[i].rank == rank && ig->steps[i].step >= from_step)
			ig->steps[i].n = ig->steps[i].n_exact = 0, ig->steps[i].h = 0;
	ingest_occ_supersede(ig, rank, from_step);
	return store_supersede(ig->db, ig->run_id, rank, from_step, ig->e);
}

int ingest_set_header(struct ingest *ig, const char *json_text)
{
	json_error_t je;
	json_t *add = json_loads(json_text, 0, &je);
	if (!json_is_object(add)) {
		json_decref(add);
		return fail_internal(ig->e, "run header is not a JSON object");
	}
	char *old;
	int rc = store_get_run_header(ig->db, ig->run_id, &old, ig->e);
	json_t *cur = old ? json_loads(old, 0, &je) : NULL;
	free(old);
	if (!json_is_object(cur)) {
		json_decref(cur);
		cur = json_object();
	}
	json_object_update(cur, add);
	json_decref(add);
	char *text = rc ? NULL : json_dumps(cur, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(cur);
	if (!rc)
		rc = text ? store_set_run_header(ig->db, ig->run_id, text, ig->e)
			  : fail_internal(ig->e, "out of memory");
	free(text);
	return rc;
}

/* What a record's value is: the value columns derived from text/bits. A record with an interval
 * (lo/hi/digits) and bits means "bits inferred": the only value of its dtype inside the printed interval. */
struct classified {
	int has_value, has_bits, has_interval, has_digits;
	double value, lo, hi;
	uint64_t bits;
	int digits;
	const char *dtype;
};

static int is_dtype(const char *d, const char *name)
{
	return d && !strcmp(d, name);
}
static int is_f32(const char *d)
{
	return is_dtype(d, "fp32") || is_dtype(d, "float32");
}
static int is_int_dtype(const char *d)
{
	static const char *const ints[] = {"int64", "int32", "int16", "int8", "uint8"};
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
		if (is_dtype(d, ints[i]))
			return 1;
	return 0;
}

/* A print the parser declared a round-trip repr (PREC_EXACT) of a value of r->dtype: the exact bits when
 * the value is one of that dtype. Returns 0 when it is not (the print is then read as a rounded decimal). */
static int exact_bits(const struct rec *r, double v, struct classified *c)
{
	if (is_f32(r->dtype)) {
		float f = (float)v;
		if ((double)f != v)
			return 0;
		uint32_t b;
		memcpy(&b, &f, 4);
		c->bits = b, c->dtype = "fp32";
	} else if (is_dtype(r->dtype, "fp64")) {
		memcpy(&c->bits, &v, 8);
	} else if (is_int_dtype(r->dtype)) {
		if (v != floor(v) || fabs(v) > 9007199254740992.0)
			return 0;
		c->bits = (uint64_t)(int64_t)v;
	} else {
		return 0; /* unknown dtype (or one a decimal cannot be a repr of): nothing exact is known */
	}
	c->has_bits = 1;
	return 1;
}

/* The value columns of r. The parser states what the producer printed: PREC_EXACT = a round-trip repr of
 * a value of r->dtype (fp32, fp64 or an integer type; exact bits); PREC_TEXT/PREC_DEC = a rounded decimal,
 * an interval, with fp32 bits inferred only when r->dtype says the producer printed an fp32 and exactly
 * one fp32 lies in the interval. A NULL dtype is unknown: an interval, never bits. A PREC_EXACT print
 * whose value is not one of its dtype is not what the format promises: read as rounded at its last
 * printed digit, dtype kept, no bits (warned once per file). */
static int classify(struct ingest *ig, const struct rec *r, struct classified *c)
{
	memset(c, 0, sizeof *c);
	c->dtype = r->dtype;
	if (r->has_bits) {
		c->has_bits = 1;
		c->bits = r->bits;
		if (!r->shape && r->dtype && !strcmp(r->dtype, "fp32")) {
			uint32_t b = (uint32_t)r->bits;
			float f;
			memcpy(&f, &b, 4);
			c->value = f, c->has_value = !isnan(f);
		} else if (!r->shape && r->dtype && !strcmp(r->dtype, "fp64")) {
			memcpy(&c->value, &r->bits, 8);
			c->has_value = !isnan(c->value);
		}
	}
	if (!r->text)
		return ALIGN_OK;
	size_t n = r->text_len ? r->text_len : strlen(r->text);
	struct numtext nt;
	if (numtext_parse(r->text, n, r->prec, r->prec_n, &nt))
		return ingest_error(ig, r->line, "field '%s': not a number: '%.*s'", r->name, (int)(n > 80 ? 80 : n),
				    r->text);
	if (c->has_bits)
		return ALIGN_OK; /* the exact bits win over the print */
	if (nt.special == 1)
		return ALIGN_OK; /* NaN: no value, no payload bits known; compared as printed */
	c->has_value = 1;
	c->value = nt.value;
	if (nt.special) { /* +-inf is exact in every float dtype */
		if (is_f32(r->dtype)) {
			float f = (float)nt.value;
			uint32_t b;
			memcpy(&b, &f, 4);
			c->has_bits = 1, c->bits = b, c->dtype = "fp32";
		} else if (is_dtype(r->dtype, "fp64")) {
			c->has_bits = 1;
			memcpy(&c->bits, &nt.value, 8);
		}
		return ALIGN_OK;
	}
	if (r->prec == PREC_EXACT) {
		if (exact_bits(r, nt.value, c))
			return ALIGN_OK;
		if (r->dtype && ig->not_repr_warned != ig->source_id + 1) {
			ig->not_repr_warned = ig->source_id + 1;
			ingest_warn(ig, r->line,
				    "field '%s': '%.*s' is not the round-trip print of an %s value: read as rounded "
				    "at its last digit (no bits; later such values in this file are read the same way)",
				    r->name, (int)(n > 40 ? 40 : n), r->text, r->dtype);
		}
		if (numtext_parse(r->text, n, PREC_TEXT, 0, &nt))
			return ingest_error(ig, r->line, "field '%s': not a number: '%.*s'", r->name,
					    (int)(n > 80 ? 80 : n), r->text);
	}
	c->has_digits = 1;
	c->digits = nt.digits;
	c->has_interval = 1;
	c->lo = (double)nt.lo;
	c->hi = (double)nt.hi;
	uint32_t b;
	if (is_f32(r->dtype) && r->prec != PREC_EXACT && numtext_unique_f32(nt.lo, nt.hi, &b)) {
		c->has_bits = 1;
		c->bits = b;
		c->dtype = "fp32";
	}
	return ALIGN_OK;
}

/* What identifies r's value (struct value_id), from the record and its classification. */
static struct value_id value_id_of(const struct rec *r, const struct classified *c)
{
	return (struct value_id){.missing = r->missing,
				 .has_bits = c->has_bits,
				 .bits = c->bits,
				 .dtype = c->dtype,
				 .digest = r->digest,
				 .text = r->text,
				 .text_len = r->text_len,
				 .stats = r->stats,
				 .head = r->head};
}

/* Add a record to its (rank, step) summary (see stepsum in schema/0001-init.sql). */
static int step_add(struct ingest *ig, const struct rec *r, const char *canon, int64_t occ, uint64_t vh, int exact)
{
	struct step_slot *ss = step_lookup(ig, r->rank, r->step);
	if (!ss)
		return fail_internal(ig->e, "out of memory");
	int64_t idn[3] = {r->micro, occ, (int64_t)vh};
	unsigned char kb[256 + sizeof idn];
	size_t cl = strlen(canon);
	memcpy(kb, idn, sizeof idn);
	memcpy(kb + sizeof idn, canon, cl);
	ss->h += XXH3_64bits(kb, sizeof idn + cl) >> 2; /* 62-bit terms: sums stay exact in SQLite */
	ss->n++;
	ss->n_exact += exact;
	return ALIGN_OK;
}

void ingest_meta_reset(struct ingest *ig)
{
	for (size_t i = 0; i < ig->n_meta; i++)
		free(ig->meta[i]);
	free(ig->meta);
	ig->meta = NULL;
	ig->n_meta = ig->cap_meta = 0;
}

/* A record of phase "meta" (job metadata: timings, memory, progress): its canon goes into meta_canon,
 * inside the file's transaction, once per canon and file (a file holds a dozen such names, so the set
 * is a list). */
static int note_meta(struct ingest *ig, const char *canon)
{
	for (size_t i = 0; i < ig->n_meta; i++)
		if (!strcmp(ig->meta[i], canon))
			return ALIGN_OK;
	if (ig->n_meta == ig->cap_meta) {
		size_t cap = ig->cap_meta ? 2 * ig->cap_meta : 16;
		char **grown = realloc(ig->meta, cap * sizeof *grown);
		if (!grown)
			return fail_internal(ig->e, "out of memory");
		ig->meta = grown, ig->cap_meta = cap;
	}
	if (!(ig->meta[ig->n_meta] = strdup(canon)))
		return fail_internal(ig->e, "out of memory");
	ig->n_meta++;
	return store_note_meta_canon(&ig->st, ig->run_id, canon);
}

static void progress(struct ingest *ig)
{
	if (ig->opts->quiet || !isatty(2) || (ig->n_records & 0xffff))
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double now = ts.tv_sec + ts.tv_nsec * 1e-9;
	if (now - ig->progress_at < 0.5)
		return;
	ig->progress_at = now;
	fprintf(stderr, "\ringesting %s: %lld records, %.1f MB", ingest_path(ig), (long long)ig->n_records,
		reader_bytes(ig->r) / 1e6);
}

/* Bind the value columns of r's row (the key columns are bound by ingest_emit). */
static int bind_values(struct ingest *ig, const struct rec *r, const struct classified *c)
{
	struct store_ingest *st = &ig->st;
	if (r->payload && r->payload_len) {
		uLongf zlen = compressBound(r->payload_len);
		unsigned char *z = malloc(zlen);
		if (!z || compress2(z, &zlen, r->payload, r->payload_len, 1) != Z_OK) {
			free(z);
			return fail_internal(ig->e, "cannot compress the payload of '%s'", r->name);
		}
		store_rec_blob_owned(st, STORE_REC_payload, z, zlen);
	}
	store_rec_text(st, STORE_REC_dtype, c->dtype, 0);
	store_rec_text(st, STORE_REC_shape, r->shape, 0);
	if (c->has_bits)
		store_rec_int64(st, STORE_REC_bits, (int64_t)c->bits);
	if (c->has_value && !isnan(c->value))
		store_rec_double(st, STORE_REC_value, c->value);
	store_rec_text(st, STORE_REC_text, r->text, r->text_len);
	if (c->has_digits)
		store_rec_int64(st, STORE_REC_digits, c->digits);
	if (c->has_interval) {
		store_rec_double(st, STORE_REC_lo, c->lo);
		store_rec_double(st, STORE_REC_hi, c->hi);
	}
	store_rec_text(st, STORE_REC_digest, r->digest, 0);
	store_rec_text(st, STORE_REC_digest_alg, r->digest ? (r->digest_alg ? r->digest_alg : "xxh3t64") : NULL, 0);
	store_rec_text(st, STORE_REC_stats, r->stats, 0);
	store_rec_text(st, STORE_REC_head, r->head, 0);
	store_rec_text(st, STORE_REC_missing, r->missing, 0);
	store_rec_text(st, STORE_REC_extra, r->extra, 0);
	store_rec_text(st, STORE_REC_call, r->call, 0);
	store_rec_text(st, STORE_REC_io, r->call ? r->io : NULL, 0);
	return ALIGN_OK;
}

int ingest_emit(struct ingest *ig, const struct rec *r)
{
	char canon[256];
	struct classified c;
	ALIGN_TRY(ig->e, classify(ig, r, &c));
	names_canonical(r->name, canon, sizeof canon);
	if (r->phase && !strcmp(r->phase, "eval") && !strcmp(canon, "loss"))
		snprintf(canon, sizeof canon, "eval_loss");
	struct value_id vid = value_id_of(r, &c);
	uint64_t vh = ingest_value_hash(&vid);
	int64_t occ = 0, seq = r->seq;
	enum occ_meets meets;
	ALIGN_TRY(ig->e, ingest_occurrence(ig, r, canon, &vid, vh, &occ, &meets));
	if (meets == OCC_GLOBAL_DUP)
		ig->n_deduped++;
	if (meets != OCC_NEW)
		return ALIGN_OK; /* kept once: the run holds this value already (n_already counts the others) */
	if (seq == ALIGN_NO_SEQ)
		ALIGN_TRY(ig->e, next_seq(ig, r->rank, &seq));
	else
		ALIGN_TRY(ig->e, note_seq(ig, r->rank, seq));

	struct store_ingest *st = &ig->st;
	ALIGN_TRY(ig->e, bind_values(ig, r, &c));
	store_rec_int64(st, STORE_REC_run_id, ig->run_id);
	store_rec_int64(st, STORE_REC_source_id, ig->source_id);
	store_rec_int64(st, STORE_REC_line, r->line ? r->line : reader_lineno(ig->r));
	store_rec_int64(st, STORE_REC_rank, r->rank);
	store_rec_int64(st, STORE_REC_step, r->step);
	store_rec_int64(st, STORE_REC_micro, r->micro);
	store_rec_int64(st, STORE_REC_seq, seq);
	store_rec_int64(st, STORE_REC_occ, occ);
	store_rec_text(st, STORE_REC_name, r->name, 0);
	store_rec_text(st, STORE_REC_canon, canon, 0);
	store_rec_text(st, STORE_REC_phase, r->phase ? r->phase : "loss", 0);
	int duplicate;
	ALIGN_TRY(ig->e, store_rec_insert(st, &duplicate));
	if (duplicate) { /* seq orders a rank's records across the whole run: name the record that has it */
		char *where = NULL;
		ALIGN_TRY(ig->e, store_describe_seq(ig->db, ig->run_id, r->rank, seq, &where, ig->e));
		int rc = ingest_error(ig, r->line,
				      "duplicate record: rank %lld seq %lld ('%s') was already given to %s (seq is "
				      "unique per rank across the whole run)",
				      (long long)r->rank, (long long)seq, r->name, where ? where : "another record");
		free(where);
		return rc;
	}
	ALIGN_TRY(ig->e, step_add(ig, r, canon, occ, vh, c.has_bits || r->digest));
	if (r->phase && !strcmp(r->phase, "meta"))
		ALIGN_TRY(ig->e, note_meta(ig, canon));
	ig->n_records++;
	progress(ig);
	return ALIGN_OK;
}
