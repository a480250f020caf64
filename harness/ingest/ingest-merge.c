/* ingest-merge: occurrences of a key, and what a record does when it meets another source of its run.
 *
 * A key is (canon, rank, step, micro). Within one source file, repeated keys are further occurrences
 * 0, 1, 2, ... (a trace records a module called twice). Across the sources of one run (files given
 * together under one --as, or added with --append), the i-th occurrence of a key in the new file meets
 * occurrence i of the run's other sources: an identical value identity (ingest_value_hash) is kept
 * once (not inserted, counted in the file's summary line); a different one is an input error naming
 * both files and lines (the file rolls back), unless --occurrences, which appends every record as a
 * further occurrence. A global value (rank -1, printed by every rank's log) equal to the key's first
 * occurrence is kept once wherever it appears.
 *
 * Cost: the table is in memory. A run this command created (occ_complete) never asks the database; a
 * run that existed before asks once per key (store_count_key, which returns occurrence 0's value in the
 * same lookup). Occurrences past 0 that meet another source, and the error message, ask again. */
#include "err.h"
#include "ingest-impl.h"
#include "store-ingest.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t ingest_value_hash(const struct value_id *v)
{
	if (v->missing)
		return XXH3_64bits(v->missing, strlen(v->missing)) ^ 0x5bd1e995u;
	if (v->has_bits) {
		uint64_t b[2] = {v->bits, v->dtype ? XXH3_64bits(v->dtype, strlen(v->dtype)) : 0};
		return XXH3_64bits(b, sizeof b) | 1;
	}
	if (v->digest)
		return XXH3_64bits(v->digest, strlen(v->digest)) | 1;
	if (v->text)
		return XXH3_64bits(v->text, v->text_len ? v->text_len : strlen(v->text)) | 1;
	if (v->stats || v->head) { /* a tensor shown by its summaries only (AccProber): they are what the
				    * report compares, so equal step summaries must mean equal summaries */
		uint64_t h = v->stats ? XXH3_64bits(v->stats, strlen(v->stats)) : 0;
		return XXH3_64bits_withSeed(v->head ? v->head : "", v->head ? strlen(v->head) : 0, h) | 1;
	}
	return 1;
}

/* The value identity of a stored record. */
static struct value_id stored_id(const struct store_value *s)
{
	return (struct value_id){.missing = s->missing,
				 .has_bits = s->has_bits,
				 .bits = (uint64_t)s->bits,
				 .dtype = s->dtype,
				 .digest = s->digest,
				 .text = s->text,
				 .text_len = s->text_len,
				 .stats = s->stats,
				 .head = s->head};
}

/* store_value_fn: *(uint64_t *)u = the record's value hash. */
static void hash_of(void *u, const struct store_value *v)
{
	struct value_id id = stored_id(v);
	*(uint64_t *)u = ingest_value_hash(&id);
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

/* The slot of key (open addressing; an empty slot has key 0). NULL: out of memory. */
static struct occ_slot *occ_lookup(struct ingest *ig, uint64_t key)
{
	if (2 * (ig->occ_used + 1) > ig->occ_cap) {
		size_t cap = ig->occ_cap ? 2 * ig->occ_cap : 4096;
		struct occ_slot *grown = calloc(cap, sizeof *grown);
		if (!grown)
			return NULL;
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

void ingest_occ_supersede(struct ingest *ig, int64_t rank, int64_t from_step)
{
	for (size_t i = 0; i < ig->occ_cap; i++) {
		struct occ_slot *s = &ig->occ[i];
		if (s->key && s->rank == rank && s->step >= from_step)
			s->count = s->base = s->file_n = 0, s->hash0 = 0;
	}
}

void ingest_occ_reset(struct ingest *ig)
{
	free(ig->occ);
	ig->occ = NULL;
	ig->occ_cap = ig->occ_used = 0;
	ig->occ_complete = 0;
}

/* "'loss' rank 0 step 3" (global values: "'loss' (global) step 3"), and the occurrence past 0. */
static void describe_key(const struct rec *r, int64_t occ, char *out, size_t len)
{
	size_t n = 0;
	n += (size_t)snprintf(out + n, len - n, "'%.200s' ", r->name);
	if (r->rank == ALIGN_NO_RANK)
		n += (size_t)snprintf(out + n, len > n ? len - n : 0, "(global)");
	else
		n += (size_t)snprintf(out + n, len > n ? len - n : 0, "rank %" PRId64, r->rank);
	if (r->step != ALIGN_NO_STEP)
		n += (size_t)snprintf(out + n, len > n ? len - n : 0, " step %" PRId64, r->step);
	if (r->micro != ALIGN_NO_MICRO)
		n += (size_t)snprintf(out + n, len > n ? len - n : 0, " micro %" PRId64, r->micro);
	if (occ > 0)
		snprintf(out + n, len > n ? len - n : 0, " (occurrence %" PRId64 ")", occ);
}

/* A value as a user reads it: the print, else the bits, else the digest; detailed adds what identifies
 * it (bits and dtype, or digest) after the print, for two values that print alike. */
static void describe_value(const struct value_id *v, int detailed, char *out, size_t len)
{
	size_t n = 0;
	int tl = v->text ? (int)(v->text_len ? v->text_len : strlen(v->text)) : 0;
	if (v->missing) {
		snprintf(out, len, "missing (%s)", v->missing);
		return;
	}
	if (v->text)
		n += (size_t)snprintf(out, len, "%.*s%s", tl > 64 ? 64 : tl, v->text, tl > 64 ? "..." : "");
	if (v->text && !detailed)
		return;
	const char *open = v->text ? " (" : "", *close = v->text ? ")" : "";
	if (v->has_bits)
		snprintf(out + n, len > n ? len - n : 0, "%sbits 0x%" PRIx64 " %s%s", open, v->bits,
			 v->dtype ? v->dtype : "of unknown dtype", close);
	else if (v->digest)
		snprintf(out + n, len > n ? len - n : 0, "%sdigest %s%s", open, v->digest, close);
	else if (!v->text && (v->stats || v->head))
		snprintf(out, len, "summaries %.60s%s%.60s", v->stats ? v->stats : "", v->stats && v->head ? " " : "",
			 v->head ? v->head : "");
	else if (!v->text)
		snprintf(out, len, "no value");
}

/* What disagree() reads of the other source's record. */
struct other {
	char value[160], value_detailed[200];
	char at[1100]; /* "FILE:LINE" */
	int has_text;  /* it has a printed value */
};

static void other_of(void *u, const struct store_value *v)
{
	struct other *o = u;
	struct value_id id = stored_id(v);
	o->has_text = v->text != NULL;
	describe_value(&id, 0, o->value, sizeof o->value);
	describe_value(&id, 1, o->value_detailed, sizeof o->value_detailed);
	snprintf(o->at, sizeof o->at, "%.1000s:%" PRId64, v->path ? v->path : "?", v->line);
}

/* r (occurrence occ of its key in this file) disagrees with the run's other source: the error. */
static int disagree(struct ingest *ig, const struct rec *r, const char *canon, const struct value_id *v, int64_t occ)
{
	struct other o = {.value = "?", .value_detailed = "?", .at = "another file of the run"};
	int found;
	ALIGN_TRY(ig->e,
		  store_key_record(&ig->st, ig->run_id, canon, r->rank, r->step, r->micro, occ, other_of, &o, &found));
	char key[400], here[200];
	describe_key(r, occ, key, sizeof key);
	describe_value(v, 0, here, sizeof here);
	const char *there = o.value;
	if (!strcmp(here, o.value) || !v->text != !o.has_text) { /* alike, or one only printed: the identities */
		describe_value(v, 1, here, sizeof here);
		there = o.value_detailed;
	}
	return fail_input(
		ig->e, "%s:%" PRId64 ": %s is %s here but %s in %s (same run '%s'); pass --occurrences to keep both",
		ingest_path(ig), r->line ? r->line : ingest_current_line(ig), key, here, there, o.at, ig->run_name);
}

/* store_value_fn: the "FILE:LINE" of a record (ig->already_at). */
static void at_of(void *u, const struct store_value *v)
{
	char **at = u;
	size_t len = (v->path ? strlen(v->path) : 1) + 24;
	if ((*at = malloc(len)))
		snprintf(*at, len, "%s:%" PRId64, v->path ? v->path : "?", v->line);
}

/* r is occurrence occ, which the run's other source holds with the same value: count it, and note where
 * the first such record is (for the file's summary line). */
static int already(struct ingest *ig, const struct rec *r, const char *canon, int64_t occ)
{
	if (ig->n_already++ == 0) {
		int found;
		free(ig->already_at);
		ig->already_at = NULL;
		ALIGN_TRY(ig->e, store_key_record(&ig->st, ig->run_id, canon, r->rank, r->step, r->micro, occ, at_of,
						  &ig->already_at, &found));
	}
	return ALIGN_OK;
}

/* A slot met for the first time in this file: what other sources hold of its key. */
static int slot_open(struct ingest *ig, struct occ_slot *slot, uint64_t key, const struct rec *r, const char *canon)
{
	*slot = (struct occ_slot){.key = key, .step = r->step, .rank = (int32_t)r->rank, .gen = ig->file_gen};
	ig->occ_used++;
	if (ig->run_preexisted && !ig->occ_complete) {
		int64_t n;
		ALIGN_TRY(ig->e, store_count_key(&ig->st, ig->run_id, canon, r->rank, r->step, r->micro, &n, hash_of,
						 &slot->hash0));
		slot->count = slot->base = (int32_t)n;
	}
	return ALIGN_OK;
}

int ingest_occurrence(struct ingest *ig, const struct rec *r, const char *canon, const struct value_id *v, uint64_t vh,
		      int64_t *occ, enum occ_meets *meets)
{
	uint64_t key = key_hash(canon, r->rank, r->step, r->micro);
	struct occ_slot *slot = occ_lookup(ig, key);
	*meets = OCC_NEW;
	if (!slot)
		return fail_internal(ig->e, "out of memory");
	if (!slot->key)
		ALIGN_TRY(ig->e, slot_open(ig, slot, key, r, canon));
	else if (slot->gen != ig->file_gen) /* the first time in this file: what came before is other sources' */
		slot->base = slot->count, slot->file_n = 0, slot->gen = ig->file_gen;
	if (r->rank == ALIGN_NO_RANK && slot->count > 0 && slot->hash0 == vh) {
		if (slot->file_n == 0)
			slot->file_n = 1; /* it is this file's occurrence 0 too */
		*meets = OCC_GLOBAL_DUP;
		return ALIGN_OK;
	}
	if (ig->opts->occurrences) { /* every record is a further occurrence */
		*occ = slot->count++;
		if (*occ == 0)
			slot->hash0 = vh;
		return ALIGN_OK;
	}
	int64_t i = slot->file_n++;
	if (i < slot->base) { /* the run's other sources hold occurrence i */
		uint64_t other = slot->hash0;
		int found = i > 0 || other != 0; /* 0: occurrence 0 was not found when the slot opened */
		if (i > 0)
			ALIGN_TRY(ig->e, store_key_record(&ig->st, ig->run_id, canon, r->rank, r->step, r->micro, i,
							  hash_of, &other, &found));
		if (found && other == vh) {
			*meets = OCC_ALREADY;
			return already(ig, r, canon, i);
		}
		if (found)
			return disagree(ig, r, canon, v, i);
	}
	*occ = i;
	if (i == 0)
		slot->hash0 = vh;
	if (slot->count <= i)
		slot->count = (int32_t)(i + 1);
	return ALIGN_OK;
}
