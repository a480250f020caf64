/* ingest-files: the per-file transaction: detect, create or extend the run, parse, hash, commit. */
#include "err.h"
#include "ingest-impl.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FORMAT(id, fw, summary) extern const struct ingest_format ingest_format_##id;
#include "formats.def"
#undef FORMAT

static const struct ingest_format *const formats[] = {
#define FORMAT(id, fw, summary) &ingest_format_##id,
#include "formats.def"
#undef FORMAT
};

const struct ingest_format *const *ingest_formats(size_t *count)
{
	*count = sizeof formats / sizeof formats[0];
	return formats;
}

const struct ingest_format *ingest_format_find(const char *name)
{
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (!strcmp(formats[i]->name, name))
			return formats[i];
	return NULL;
}

static int detect(struct reader *r, const char *path, const struct ingest_format **out)
{
	const char *head;
	size_t len;
	int rc = reader_peek(r, &head, &len);
	if (rc)
		return rc;
	int best = 0;
	*out = NULL;
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
		int score = formats[i]->detect(head, len, path);
		if (score > best)
			best = score, *out = formats[i];
	}
	if (!*out) {
		if (len == 0)
			return err_input("%s: empty file", path);
		return err_input("%s: cannot detect the format (not one of: atf, megatron-log, megatron-golden, "
		                 "paddle-log, paddle-metrics, anchor, torchtitan, xtuner); pass --format", path);
	}
	return ALIGN_OK;
}

static void utc_now(char buf[32])
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Run name from a path: basename without .gz and one more extension. */
static void default_name(const char *path, char *out, size_t len)
{
	const char *base = strrchr(path, '/');
	snprintf(out, len, "%s", base ? base + 1 : path);
	char *dot = strrchr(out, '.');
	if (dot && !strcmp(dot, ".gz")) {
		*dot = '\0';
		dot = strrchr(out, '.');
	}
	if (dot && dot != out && strspn(dot + 1, "0123456789") != strlen(dot + 1))
		*dot = '\0';
}

static int64_t run_lookup(sqlite3 *db, const char *name)
{
	sqlite3_stmt *st;
	int64_t id = 0;
	sqlite3_prepare_v2(db, "SELECT id FROM run WHERE name=?1", -1, &st, NULL);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return id;
}

/* Name of the run that already holds this content, or NULL (caller frees). */
static char *sha_owner(sqlite3 *db, const char *sha)
{
	sqlite3_stmt *st;
	char *name = NULL;
	sqlite3_prepare_v2(db, "SELECT run.name FROM source JOIN run ON run.id=source.run_id WHERE sha256=?1",
	                   -1, &st, NULL);
	sqlite3_bind_text(st, 1, sha, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		name = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return name;
}

/* SHA-256 of a file's decompressed content (only needed before the run exists check). */
static int hash_file(const char *path, char sha[65])
{
	struct reader *r;
	int rc = reader_open(path, &r);
	if (rc)
		return rc;
	char *buf;
	size_t len;
	rc = reader_slurp(r, &buf, &len);
	if (rc == ALIGN_EINPUT) {
		/* a NUL byte is fine for hashing purposes; re-read raw */
		rc = ALIGN_OK;
	}
	if (!rc)
		reader_sha256(r, sha);
	reader_close(r);
	return rc;
}

static int insert_run(struct ingest *ig, const char *name)
{
	char now[32];
	utc_now(now);
	sqlite3_stmt *st;
	sqlite3_prepare_v2(ig->db, "INSERT INTO run(name, framework, format, created) VALUES (?1,?2,?3,?4)", -1, &st, NULL);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, ig->fmt->framework, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, ig->fmt->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, now, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return err_internal("cannot create run '%s': %s", name, sqlite3_errmsg(ig->db));
	ig->run_id = sqlite3_last_insert_rowid(ig->db);
	return ALIGN_OK;
}

static int insert_source(struct ingest *ig, const char *path)
{
	char now[32];
	utc_now(now);
	sqlite3_stmt *st;
	sqlite3_prepare_v2(ig->db, "INSERT INTO source(run_id, path, sha256, format, bytes, records, ingested) "
	                           "VALUES (?1,?2,'pending:'||?1||':'||?2,?3,0,0,?4)", -1, &st, NULL);
	sqlite3_bind_int64(st, 1, ig->run_id);
	sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, ig->fmt->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, now, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return err_internal("cannot record source '%s': %s", path, sqlite3_errmsg(ig->db));
	ig->source_id = sqlite3_last_insert_rowid(ig->db);
	return ALIGN_OK;
}

static int finish_source(struct ingest *ig, const char *sha)
{
	sqlite3_stmt *st;
	sqlite3_prepare_v2(ig->db, "UPDATE source SET sha256=?1, bytes=?2, records=?3, warnings=?4 WHERE id=?5", -1, &st, NULL);
	sqlite3_bind_text(st, 1, sha, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (int64_t)reader_bytes(ig->r));
	sqlite3_bind_int64(st, 3, ig->n_records);
	if (json_array_size(ig->warnings))
		sqlite3_bind_text(st, 4, json_dumps(ig->warnings, JSON_COMPACT), -1, free);
	else
		sqlite3_bind_null(st, 4);
	sqlite3_bind_int64(st, 5, ig->source_id);
	int rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? ALIGN_OK : err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
}

static int prepare(struct ingest *ig)
{
	if (sqlite3_prepare_v2(ig->db, ingest_insert_sql, -1, &ig->ins, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(ig->db, "SELECT count(*) FROM record WHERE run_id=?1 AND canon=?2 AND rank=?3 "
	                               "AND step=?4 AND micro=?5 AND superseded=0", -1, &ig->occ_q, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(ig->db, "SELECT coalesce(max(seq)+1, 0) FROM record WHERE run_id=?1 AND rank=?2",
	                       -1, &ig->seq_q, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(ig->db));
	return ALIGN_OK;
}

static void finalize(struct ingest *ig)
{
	sqlite3_finalize(ig->ins);
	sqlite3_finalize(ig->occ_q);
	sqlite3_finalize(ig->seq_q);
	ig->ins = ig->occ_q = ig->seq_q = NULL;
	ingest_meta_reset(ig);
}

/* Counters saw rolled-back records: forget them; later files of the run ask the database. */
static void reset_counters(struct ingest *ig)
{
	free(ig->occ), ig->occ = NULL, ig->occ_cap = ig->occ_used = 0;
	ig->n_seq = 0;
	free(ig->steps), ig->steps = NULL, ig->steps_cap = ig->steps_used = 0;
}

/* One file in one transaction. *run_id carries the run between files of one invocation. */
static int ingest_one(struct ingest *ig, const char *path, const char *name, int append, const char *format)
{
	char sha[65];
	int64_t existing = ig->run_id ? ig->run_id : run_lookup(ig->db, name);
	if (existing && !ig->run_id) {
		int rc = hash_file(path, sha);
		if (rc)
			return rc;
		char *owner = sha_owner(ig->db, sha);
		if (owner) {
			printf("%s: already ingested as run '%s' (sha256 %.16s): nothing to do\n", path, owner, sha);
			free(owner);
			return ALIGN_OK;
		}
		if (!append)
			return err_input("run '%s' already exists (pass --append to add '%s' to it, or --as another name)",
			                 name, path);
	}
	int rc = reader_open(path, &ig->r);
	if (rc)
		return rc;
	ig->fmt = format ? ingest_format_find(format) : NULL;
	if (format && !ig->fmt) {
		reader_close(ig->r);
		return err_input("unknown format '%s' (see 'align ingest --list-formats')", format);
	}
	if (!ig->fmt && (rc = detect(ig->r, path, &ig->fmt))) {
		reader_close(ig->r);
		return rc;
	}
	ig->file_rank = ingest_rank_from_path(path);
	ig->warnings = json_array();
	ig->n_records = ig->n_deduped = 0;
	if ((rc = store_begin(ig->db, ig->db_path)))
		goto out;
	ig->run_preexisted = existing != 0;
	if (existing)
		ig->run_id = existing;
	else if ((rc = insert_run(ig, name)))
		goto out;
	if ((rc = insert_source(ig, path)) || (rc = prepare(ig)))
		goto out;
	if ((rc = ig->fmt->parse(ig, ig->r)))
		goto out;
	reader_sha256(ig->r, sha);
	char *owner = sha_owner(ig->db, sha);
	if (owner) {
		finalize(ig);
		store_rollback(ig->db);
		printf("%s: already ingested as run '%s' (sha256 %.16s): nothing to do\n", path, owner, sha);
		free(owner);
		if (!existing)
			ig->run_id = 0;
		reset_counters(ig);
		goto out_closed;
	}
	if ((rc = finish_source(ig, sha)) || (rc = ingest_flush_stepsum(ig)))
		goto out;
	finalize(ig);
	if ((rc = store_commit(ig->db, ig->db_path)))
		goto out;
	if (!ig->opts->quiet && isatty(2))
		fputc('\n', stderr);
	printf("%s: %s, %lld records into run '%s'%s\n", path, ig->fmt->name, (long long)ig->n_records, name,
	       json_array_size(ig->warnings) ? " (with warnings)" : "");
	goto out_closed;
out:
	finalize(ig);
	store_rollback(ig->db);
	if (!existing)
		ig->run_id = 0;
	reset_counters(ig);
out_closed:
	json_decref(ig->warnings);
	ig->warnings = NULL;
	reader_close(ig->r);
	ig->r = NULL;
	return rc;
}

int ingest_files(sqlite3 *db, const char *db_path, const char *as, int append, const char *format,
                 const struct ingest_opts *opts, char **files, int n_files)
{
	int worst = ALIGN_OK;
	struct ingest ig = {.db = db, .db_path = db_path, .opts = opts};
	char name[256];
	for (int i = 0; i < n_files; i++) {
		if (!as) { /* every file is its own run */
			default_name(files[i], name, sizeof name);
			ig.run_id = 0;
			reset_counters(&ig);
		} else {
			snprintf(name, sizeof name, "%s", as);
		}
		int rc = ingest_one(&ig, files[i], name, append || (as && ig.run_id), format);
		if (rc > worst)
			worst = rc;
	}
	free(ig.occ);
	free(ig.seq);
	return worst;
}
