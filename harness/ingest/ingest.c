/* ingest: per-file transactions, record classification, execution order and occurrence counting. */
#include "ingest.h"

#include "err.h"
#include "names.h"
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

const char ingest_insert_sql[] =
	"INSERT INTO record(run_id, source_id, line, rank, step, micro, seq, occ, name, canon, phase, dtype, "
	"shape, bits, value, text, digits, lo, hi, digest, digest_alg, stats, head, payload, missing, extra) "
	"VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,?23,?24,?25,?26)";

const char *ingest_path(const struct ingest *ig) { return reader_path(ig->r); }
const struct ingest_opts *ingest_get_opts(const struct ingest *ig) { return ig->opts; }
int64_t ingest_file_rank(const struct ingest *ig) { return ig->file_rank; }
int64_t ingest_current_line(const struct ingest *ig) { return reader_lineno(ig->r); }

void ingest_warn(struct ingest *ig, int64_t line, const char *fmt, ...)
{
	char msg[512], full[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(full, sizeof full, "%s:%lld: %s", ingest_path(ig), (long long)(line ? line : reader_lineno(ig->r)), msg);
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
	return err_input("%s:%lld: %s", ingest_path(ig), (long long)(line ? line : reader_lineno(ig->r)), msg);
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

static int64_t next_seq(struct ingest *ig, int64_t rank)
{
	for (size_t i = 0; i < ig->n_seq; i++)
		if (ig->seq[i].rank == rank)
			return ig->seq[i].next++;
	if (ig->n_seq == ig->cap_seq) {
		ig->cap_seq = ig->cap_seq ? 2 * ig->cap_seq : 16;
		ig->seq = realloc(ig->seq, ig->cap_seq * sizeof *ig->seq);
	}
	int64_t start = 0;
	if (ig->run_preexisted) {
		sqlite3_bind_int64(ig->seq_q, 1, ig->run_id);
		sqlite3_bind_int64(ig->seq_q, 2, rank);
		if (sqlite3_step(ig->seq_q) == SQLITE_ROW)
			start = sqlite3_column_int64(ig->seq_q, 0);
		sqlite3_reset(ig->seq_q);
	}
	ig->seq[ig->n_seq].rank = rank;
	ig->seq[ig->n_seq].next = start + 1;
	ig->n_seq++;
	return start;
}

/* Explicit seq from a trace: keep the counter past it so later implicit ones do not collide. */
static void note_seq(struct ingest *ig, int64_t rank, int64_t seq)
{
	for (size_t i = 0; i < ig->n_seq; i++)
		if (ig->seq[i].rank == rank) {
			if (ig->seq[i].next <= seq)
				ig->seq[i].next = seq + 1;
			return;
		}
	(void)next_seq(ig, rank);
	note_seq(ig, rank, seq);
}

static struct occ_slot *occ_lookup(struct ingest *ig, uint64_t key)
{
	if (2 * (ig->occ_used + 1) > ig->occ_cap) {
		size_t cap = ig->occ_cap ? 2 * ig->occ_cap : 4096;
		struct occ_slot *grown = calloc(cap, sizeof *grown);
		for (size_t i = 0; i < ig->occ_cap; i++) {
			if (!ig->occ[i].key)
				continue;
			size_t j = ig->occ[i].key & (cap - 1);
			while (grown[j].key)
				j = (j + 1) & (cap - 1);
			grown[j] = ig->occ[i];
		}
		free(ig->occ);
		ig->occ = grown;
		ig->occ_cap = cap;
	}
	size_t j = key & (ig->occ_cap - 1);
	while (ig->occ[j].key && ig->occ[j].key != key)
		j = (j + 1) & (ig->occ_cap - 1);
	return &ig->occ[j];
}

static uint64_t key_hash(const char *canon, int64_t rank, int64_t step, int64_t micro)
{
	unsigned char buf[256 + 3 * sizeof(int64_t)];
	size_t n = strlen(canon);
	if (n > 256)
		n = 256;
	int64_t nums[3] = {rank, step, micro};
	memcpy(buf, nums, sizeof nums);
	memcpy(buf + sizeof nums, canon, n);
	uint64_t h = XXH3_64bits(buf, sizeof nums + n);
	return h ? h : 1;
}

static struct step_slot *step_lookup(struct ingest *ig, int64_t rank, int64_t step)
{
	if (2 * (ig->steps_used + 1) > ig->steps_cap) {
		size_t cap = ig->steps_cap ? 2 * ig->steps_cap : 1024;
		struct step_slot *grown = calloc(cap, sizeof *grown);
		for (size_t i = 0; i < ig->steps_cap; i++) {
			if (!ig->steps[i].used)
				continue;
			size_t j = (size_t)XXH3_64bits(&ig->steps[i].rank, 16) & (cap - 1);
			while (grown[j].used)
				j = (j + 1) & (cap - 1);
			grown[j] = ig->steps[i];
		}
		free(ig->steps);
		ig->steps = grown;
		ig->steps_cap = cap;
	}
	int64_t k[2] = {rank, step};
	size_t j = (size_t)XXH3_64bits(k, 16) & (ig->steps_cap - 1);
	while (ig->steps[j].used && (ig->steps[j].rank != rank || ig->steps[j].step != step))
		j = (j + 1) & (ig->steps_cap - 1);
	if (!ig->steps[j].used) {
		ig->steps[j].used = 1, ig->steps[j].rank = rank, ig->steps[j].step = step;
		ig->steps_used++;
	}
	return &ig->steps[j];
}

int ingest_flush_stepsum(struct ingest *ig)
{
	sqlite3_stmt *st;
	const char *sql = "INSERT INTO stepsum(run_id, rank, step, n, n_exact, h) VALUES (?1,?2,?3,?4,?5,?6) "
	                  "ON CONFLICT(run_id, rank, step) DO UPDATE SET n=n+excluded.n, n_exact=n_exact+excluded.n_exact, "
	                  "h=(h+excluded.h)";
	if (sqlite3_prepare_v2(ig->db, sql, -1, &st, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
	int rc = SQLITE_DONE;
	for (size_t i = 0; i < ig->steps_cap && rc == SQLITE_DONE; i++) {
		struct step_slot *s = &ig->steps[i];
		if (!s->used || s->n == 0)
			continue;
		sqlite3_bind_int64(st, 1, ig->run_id);
		sqlite3_bind_int64(st, 2, s->rank);
		sqlite3_bind_int64(st, 3, s->step);
		sqlite3_bind_int64(st, 4, s->n);
		sqlite3_bind_int64(st, 5, s->n_exact);
		/* h is a sum mod 2^64; SQLite integer addition must not overflow, so store the high-bit-cleared
		 * sum of 63-bit parts: add in unsigned space here, keep 62 bits per flush */
		sqlite3_bind_int64(st, 6, (int64_t)(s->h & 0x3fffffffffffffffull));
		rc = sqlite3_step(st);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	free(ig->steps);
	ig->steps = NULL;
	ig->steps_cap = ig->steps_used = 0;
	if (rc != SQLITE_DONE)
		return err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
	return store_exec(ig->db, "UPDATE stepsum SET h = h & 4611686018427387903 WHERE h > 4611686018427387903");
}

int ingest_supersede(struct ingest *ig, int64_t rank, int64_t from_step)
{
	for (size_t i = 0; i < ig->steps_cap; i++)
		if (ig->steps[i].used && ig->steps[i].rank == rank && ig->steps[i].step >= from_step)
			ig->steps[i].n = ig->steps[i].n_exact = 0, ig->steps[i].h = 0;
	char del[160];
	snprintf(del, sizeof del, "DELETE FROM stepsum WHERE run_id=%lld AND rank=%lld AND step>=%lld",
	         (long long)ig->run_id, (long long)rank, (long long)from_step);
	if (store_exec(ig->db, del))
		return ALIGN_EINTERNAL;

	sqlite3_stmt *st;
	const char *sql = "UPDATE record SET superseded=1 WHERE run_id=?1 AND rank=?2 AND step>=?3 AND superseded=0";
	if (sqlite3_prepare_v2(ig->db, sql, -1, &st, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
	sqlite3_bind_int64(st, 1, ig->run_id);
	sqlite3_bind_int64(st, 2, rank);
	sqlite3_bind_int64(st, 3, from_step);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
	for (size_t i = 0; i < ig->occ_cap; i++)
		if (ig->occ[i].key && ig->occ[i].rank == rank && ig->occ[i].step >= from_step)
			ig->occ[i].count = 0, ig->occ[i].value_hash = 0;
	char upd[96];
	snprintf(upd, sizeof upd, "UPDATE run SET resumed=1 WHERE id=%lld", (long long)ig->run_id);
	return store_exec(ig->db, upd);
}

int ingest_set_header(struct ingest *ig, const char *json_text)
{
	json_error_t e;
	json_t *add = json_loads(json_text, 0, &e);
	if (!json_is_object(add)) {
		json_decref(add);
		return err_internal("run header is not a JSON object");
	}
	sqlite3_stmt *st;
	sqlite3_prepare_v2(ig->db, "SELECT header FROM run WHERE id=?1", -1, &st, NULL);
	sqlite3_bind_int64(st, 1, ig->run_id);
	json_t *cur = NULL;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		cur = json_loads((const char *)sqlite3_column_text(st, 0), 0, &e);
	sqlite3_finalize(st);
	if (!json_is_object(cur)) {
		json_decref(cur);
		cur = json_object();
	}
	json_object_update(cur, add);
	json_decref(add);
	char *text = json_dumps(cur, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(cur);
	sqlite3_prepare_v2(ig->db, "UPDATE run SET header=?1 WHERE id=?2", -1, &st, NULL);
	sqlite3_bind_text(st, 1, text, -1, free);
	sqlite3_bind_int64(st, 2, ig->run_id);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? ALIGN_OK : err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
}

/* What a record's value is: the value columns derived from text/bits. */
struct classified {
	int has_value, has_bits, has_interval, has_digits;
	double value, lo, hi;
	uint64_t bits;
	int digits;
	const char *dtype;
};

static int is_fp32(const char *d) { return !d || !strcmp(d, "fp32") || !strcmp(d, "float32"); }

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
		return ingest_error(ig, r->line, "field '%s': not a number: '%.*s'", r->name, (int)(n > 80 ? 80 : n), r->text);
	if (c->has_bits)
		return ALIGN_OK; /* the exact bits win over the print */
	if (nt.special == 1) {
		c->dtype = r->dtype ? r->dtype : "fp32";
		return ALIGN_OK; /* NaN: no value, no payload bits known; compared as printed */
	}
	c->has_value = 1;
	c->value = nt.value;
	if (nt.special) { /* +-inf is exact in every float dtype */
		c->dtype = r->dtype ? r->dtype : "fp32";
		float f = (float)nt.value;
		uint32_t b;
		memcpy(&b, &f, 4);
		c->has_bits = 1;
		c->bits = b;
		if (r->dtype && !strcmp(r->dtype, "fp64"))
			memcpy(&c->bits, &nt.value, 8);
		return ALIGN_OK;
	}
	if (r->prec == PREC_EXACT) {
		float f = (float)nt.value;
		if (is_fp32(r->dtype) && (double)f == nt.value) {
			uint32_t b;
			memcpy(&b, &f, 4);
			c->bits = b, c->dtype = "fp32";
		} else {
			memcpy(&c->bits, &nt.value, 8);
			c->dtype = "fp64"; /* not a float32: a double (e.g. a mean over an interval) */
		}
		c->has_bits = 1;
		return ALIGN_OK;
	}
	c->has_digits = 1;
	c->digits = nt.digits;
	c->has_interval = 1;
	c->lo = (double)nt.lo;
	c->hi = (double)nt.hi;
	uint32_t b;
	if (is_fp32(r->dtype) && numtext_unique_f32(nt.lo, nt.hi, &b)) {
		c->has_bits = 1;
		c->bits = b;
		c->dtype = "fp32";
	}
	return ALIGN_OK;
}

static uint64_t value_hash(const struct rec *r, const struct classified *c)
{
	if (r->missing)
		return XXH3_64bits(r->missing, strlen(r->missing)) ^ 0x5bd1e995u;
	if (c->has_bits) {
		uint64_t b[2] = {c->bits, c->dtype ? XXH3_64bits(c->dtype, strlen(c->dtype)) : 0};
		return XXH3_64bits(b, sizeof b) | 1;
	}
	if (r->digest)
		return XXH3_64bits(r->digest, strlen(r->digest)) | 1;
	if (r->text)
		return XXH3_64bits(r->text, r->text_len ? r->text_len : strlen(r->text)) | 1;
	return 1;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static int64_t occ_from_db(struct ingest *ig, const char *canon, const struct rec *r)
{
	sqlite3_stmt *q = ig->occ_q;
	sqlite3_bind_int64(q, 1, ig->run_id);
	sqlite3_bind_text(q, 2, canon, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 3, r->rank);
	sqlite3_bind_int64(q, 4, r->step);
	sqlite3_bind_int64(q, 5, r->micro);
	int64_t n = 0;
	if (sqlite3_step(q) == SQLITE_ROW)
		n = sqlite3_column_int64(q, 0);
	sqlite3_reset(q);
	return n;
}

/* Add a record to its (rank, step) summary (see stepsum in schema/0001-init.sql). */
static void step_add(struct ingest *ig, const struct rec *r, const char *canon, int64_t occ, uint64_t vh, int exact)
{
	struct step_slot *ss = step_lookup(ig, r->rank, r->step);
	int64_t idn[3] = {r->micro, occ, (int64_t)vh};
	unsigned char kb[256 + sizeof idn];
	size_t cl = strlen(canon);
	memcpy(kb, idn, sizeof idn);
	memcpy(kb + sizeof idn, canon, cl);
	ss->h += XXH3_64bits(kb, sizeof idn + cl) >> 2; /* 62-bit terms: sums stay exact in SQLite */
	ss->n++;
	ss->n_exact += exact;
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
			return err_internal("out of memory");
		ig->meta = grown, ig->cap_meta = cap;
	}
	if (!(ig->meta[ig->n_meta] = strdup(canon)))
		return err_internal("out of memory");
	ig->n_meta++;
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(ig->db, "INSERT OR IGNORE INTO meta_canon(run_id, canon) VALUES (?1, ?2)", -1, &st, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
	sqlite3_bind_int64(st, 1, ig->run_id);
	sqlite3_bind_text(st, 2, canon, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? ALIGN_OK : err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
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

int ingest_emit(struct ingest *ig, const struct rec *r)
{
	char canon[256];
	struct classified c;
	int rc = classify(ig, r, &c);
	if (rc)
		return rc;
	names_canonical(r->name, canon, sizeof canon);
	if (r->phase && !strcmp(r->phase, "eval") && !strcmp(canon, "loss"))
		snprintf(canon, sizeof canon, "eval_loss");
	uint64_t key = key_hash(canon, r->rank, r->step, r->micro);
	uint64_t vh = value_hash(r, &c);
	struct occ_slot *slot = occ_lookup(ig, key);
	if (!slot->key) {
		slot->key = key, slot->rank = r->rank, slot->step = r->step;
		slot->count = ig->run_preexisted ? occ_from_db(ig, canon, r) : 0;
		ig->occ_used++;
	} else if (r->rank == ALIGN_NO_RANK && slot->count > 0 && slot->value_hash == vh) {
		ig->n_deduped++; /* a global value printed again by another rank: keep one */
		return ALIGN_OK;
	}
	if (slot->count == 0)
		slot->value_hash = vh;
	int64_t occ = slot->count++;
	int64_t seq = r->seq;
	if (seq == ALIGN_NO_SEQ)
		seq = next_seq(ig, r->rank);
	else
		note_seq(ig, r->rank, seq);

	sqlite3_stmt *st = ig->ins;
	sqlite3_bind_int64(st, 1, ig->run_id);
	sqlite3_bind_int64(st, 2, ig->source_id);
	sqlite3_bind_int64(st, 3, r->line ? r->line : reader_lineno(ig->r));
	sqlite3_bind_int64(st, 4, r->rank);
	sqlite3_bind_int64(st, 5, r->step);
	sqlite3_bind_int64(st, 6, r->micro);
	sqlite3_bind_int64(st, 7, seq);
	sqlite3_bind_int64(st, 8, occ);
	sqlite3_bind_text(st, 9, r->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 10, canon, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 11, r->phase ? r->phase : "loss", -1, SQLITE_STATIC);
	bind_text_or_null(st, 12, c.dtype);
	bind_text_or_null(st, 13, r->shape);
	if (c.has_bits)
		sqlite3_bind_int64(st, 14, (int64_t)c.bits);
	else
		sqlite3_bind_null(st, 14);
	if (c.has_value && !isnan(c.value))
		sqlite3_bind_double(st, 15, c.value);
	else
		sqlite3_bind_null(st, 15);
	if (r->text)
		sqlite3_bind_text(st, 16, r->text, r->text_len ? (int)r->text_len : -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 16);
	if (c.has_digits)
		sqlite3_bind_int(st, 17, c.digits);
	else
		sqlite3_bind_null(st, 17);
	if (c.has_interval) {
		sqlite3_bind_double(st, 18, c.lo);
		sqlite3_bind_double(st, 19, c.hi);
	} else {
		sqlite3_bind_null(st, 18);
		sqlite3_bind_null(st, 19);
	}
	bind_text_or_null(st, 20, r->digest);
	bind_text_or_null(st, 21, r->digest ? (r->digest_alg ? r->digest_alg : "xxh3t64") : NULL);
	bind_text_or_null(st, 22, r->stats);
	bind_text_or_null(st, 23, r->head);
	if (r->payload && r->payload_len) {
		uLongf zlen = compressBound(r->payload_len);
		unsigned char *z = malloc(zlen);
		if (!z || compress2(z, &zlen, r->payload, r->payload_len, 1) != Z_OK) {
			free(z);
			return err_internal("cannot compress the payload of '%s'", r->name);
		}
		sqlite3_bind_blob(st, 24, z, (int)zlen, free);
	} else {
		sqlite3_bind_null(st, 24);
	}
	bind_text_or_null(st, 25, r->missing);
	bind_text_or_null(st, 26, r->extra);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		if ((rc & 0xff) == SQLITE_CONSTRAINT)
			return ingest_error(ig, r->line, "duplicate record: rank %lld seq %lld appears twice ('%s')",
			                    (long long)r->rank, (long long)seq, r->name);
		return err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
	}
	step_add(ig, r, canon, occ, vh, c.has_bits || r->digest);
	if (r->phase && !strcmp(r->phase, "meta") && (rc = note_meta(ig, canon)))
		return rc;
	ig->n_records++;
	progress(ig);
	return ALIGN_OK;
}
