/* ingest-files: the per-file transaction: resolve the format (formats.def), refuse what cannot be
 * read, skip content the run already holds, create or extend the run, parse, refuse a file that yields
 * no record, hash, commit.
 *
 * Dedup belongs to a run: the same bytes (sha256 of the decompressed content) into the same run are a
 * no-op that says so, also when given twice in one command; into another run they are that run's
 * records, so that two byte-identical runs compare bitwise-equal. */
#include "err.h"
#include "ingest-impl.h"
#include "store-ingest.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct ingest_format formats[] = {
#define FORMAT(id, name, framework, reads, summary, expects)                                                           \
	{name, framework, INGEST_READS_##reads, summary, expects, &ingest_parser_##id},
#include "formats.def"
#undef FORMAT
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

const struct ingest_format *ingest_formats(size_t *count)
{
	*count = N_FORMATS;
	return formats;
}

const struct ingest_format *ingest_format_find(const char *name)
{
	for (size_t i = 0; i < N_FORMATS; i++)
		if (!strcmp(formats[i].name, name))
			return &formats[i];
	return NULL;
}

void ingest_formats_print(FILE *out)
{
	for (size_t i = 0; i < N_FORMATS; i++)
		fprintf(out, "%-16s %-10s %s\n", formats[i].name, formats[i].framework, formats[i].summary);
}

/* The format whose detect scores the first bytes highest (the first listed wins a tie). */
static int detect(struct ingest *ig, const char *path, const struct ingest_format **out)
{
	const char *head;
	size_t len;
	ALIGN_TRY(ig->e, reader_peek(ig->r, &head, &len));
	int best = 0;
	*out = NULL;
	for (size_t i = 0; i < N_FORMATS; i++) {
		int score = formats[i].parser->detect(head, len, path);
		if (score > best)
			best = score, *out = &formats[i];
	}
	if (*out)
		return ALIGN_OK;
	if (len == 0)
		return fail_input(ig->e, "%s: empty file", path);
	char names[512] = "";
	for (size_t i = 0, n = 0; i < N_FORMATS && n < sizeof names; i++)
		n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", formats[i].name);
	return fail_input(ig->e, "%s: cannot detect the format (not one of: %s); pass --format", path, names);
}

/* ig->fmt: the named format, else the detected one; a whole-file format refuses a file known to be
 * too large here, before anything is hashed or written. */
static int resolve_format(struct ingest *ig, const char *path, const char *format)
{
	ig->fmt = format ? ingest_format_find(format) : NULL;
	if (format && !ig->fmt)
		return fail_input(ig->e, "unknown format '%s' (see 'align ingest --list-formats')", format);
	if (!ig->fmt)
		ALIGN_TRY(ig->e, detect(ig, path, &ig->fmt));
	if (ig->fmt->reads == INGEST_READS_WHOLE)
		ALIGN_TRY(ig->e, reader_check_whole(ig->r));
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

/* Counters saw rolled-back records: forget them; later files of the run ask the database. */
static void reset_counters(struct ingest *ig)
{
	ingest_occ_reset(ig);
	ig->n_seq = 0;
	free(ig->steps), ig->steps = NULL, ig->steps_cap = ig->steps_used = 0;
}

/* SHA-256 of a file's decompressed content, read through once in constant memory (any size). */
static int hash_file(struct ingest *ig, const char *path, char sha[65])
{
	struct reader *r;
	ALIGN_TRY(ig->e, reader_open_err(path, ig->e, &r));
	int rc = reader_drain(r);
	if (!rc)
		reader_sha256(r, sha);
	reader_close(r);
	return rc;
}

/* Print that path's content is already in run `name` (as source `held`): nothing to do. */
static void say_already(const char *path, const char *name, const char *held, const char *sha)
{
	printf("%s: already ingested into run '%s' (sha256 %.16s, as '%s'): nothing to do\n", path, name, sha, held);
}

/* Before adding path to run `name` (id run_id), which existed before this command: *done = 1 when the
 * run holds its content already (said so); a run that exists is only extended with --append. */
static int check_existing(struct ingest *ig, const char *path, const char *name, int64_t run_id, int append, int *done)
{
	char sha[65], *held;
	*done = 0;
	ALIGN_TRY(ig->e, hash_file(ig, path, sha));
	ALIGN_TRY(ig->e, store_find_sha_in_run(ig->db, run_id, sha, &held, ig->e));
	if (held) {
		say_already(path, name, held, sha);
		free(held);
		*done = 1;
		return ALIGN_OK;
	}
	if (!append && ig->name_from_header)
		return fail_input(ig->e,
				  "run '%s' (the name its header gives) already exists (pass --as '%s' --append to add "
				  "'%s' to it, or --as another name)",
				  name, name, path);
	if (!append)
		return fail_input(ig->e,
				  "run '%s' already exists (pass --append to add '%s' to it, or --as another name)",
				  name, path);
	return ALIGN_OK;
}

/* A file that yielded no record: the input error, saying what was looked for. */
static int no_records(struct ingest *ig, const char *path, const char *format)
{
	return fail_input(ig->e, "%s: no records: %s %s, but %s", path, format ? "read as" : "detected as",
			  ig->fmt->name, ig->fmt->expects);
}

/* Parse ig->r into run `name` inside the open transaction and finish its source row. *dup = 1 when
 * the run turned out to hold this content already (said so; the caller rolls back). format: --format. */
static int parse_into_run(struct ingest *ig, const char *path, const char *name, int existing, const char *format,
			  int *dup)
{
	char now[32], sha[65], *held;
	utc_now(now);
	*dup = 0;
	ig->run_preexisted = existing != 0;
	if (!existing) {
		ALIGN_TRY(ig->e, store_insert_run(ig->db, name, ig->framework[0] ? ig->framework : ig->fmt->framework,
						  ig->fmt->name, now, &ig->run_id, ig->e));
		ingest_occ_reset(ig);
		ig->occ_complete = 1; /* every record of the run goes through this command's table */
	}
	ALIGN_TRY(ig->e, store_insert_source(ig->db, ig->run_id, path, ig->fmt->name, now, &ig->source_id, ig->e));
	ALIGN_TRY(ig->e, store_ingest_open(&ig->st, ig->db, ig->e));
	ALIGN_TRY(ig->e, ig->fmt->parser->parse(ig, ig->r));
	reader_sha256(ig->r, sha);
	ALIGN_TRY(ig->e, store_find_sha_in_run(ig->db, ig->run_id, sha, &held, ig->e));
	if (held) {
		say_already(path, name, held, sha);
		free(held);
		*dup = 1;
		return ALIGN_OK;
	}
	if (ig->n_records + ig->n_deduped + ig->n_already == 0)
		return no_records(ig, path, format);
	char *warnings = json_array_size(ig->warnings) ? json_dumps(ig->warnings, JSON_COMPACT) : NULL;
	int rc = store_finish_source(ig->db, ig->source_id, sha, (int64_t)reader_bytes(ig->r), ig->n_records, warnings,
				     ig->e);
	free(warnings);
	ALIGN_TRY(ig->e, rc);
	return ingest_flush_stepsum(ig);
}

/* Close the file's statements and forget its meta canons (before its transaction ends). */
static void finalize(struct ingest *ig)
{
	store_ingest_close(&ig->st);
	ingest_meta_reset(ig);
}

/* Undo the file's transaction; the run id only survives when the run preexisted. */
static void roll_back(struct ingest *ig, int64_t existing)
{
	finalize(ig);
	store_rollback(ig->db);
	if (!existing)
		ig->run_id = 0;
	reset_counters(ig);
}

/* The transaction of one file (ig->r open, ig->fmt resolved): all of it is committed or none. */
static int transact(struct ingest *ig, const char *path, const char *name, int64_t existing, const char *format)
{
	ig->file_rank = ingest_rank_from_path(path);
	ig->n_records = ig->n_deduped = ig->n_already = 0;
	ig->run_name = name;
	ig->file_gen++;
	int dup = 0, rc = store_begin_err(ig->db, ig->db_path, ig->e);
	if (!rc && existing)
		ig->run_id = existing;
	if (!rc)
		rc = parse_into_run(ig, path, name, existing != 0, format, &dup);
	if (rc || dup) {
		roll_back(ig, existing);
		return rc;
	}
	finalize(ig);
	if ((rc = store_commit_err(ig->db, ig->db_path, ig->e))) {
		roll_back(ig, existing);
		return rc;
	}
	if (!ig->opts->quiet && isatty(2))
		fputc('\n', stderr);
	printf("%s: %s, %lld records into run '%s'", path, ig->fmt->name, (long long)ig->n_records, name);
	if (ig->n_already)
		printf(", %lld records already in the run (identical; the first at %s)", (long long)ig->n_already,
		       ig->already_at ? ig->already_at : "another of its files");
	printf("%s\n", json_array_size(ig->warnings) ? " (with warnings)" : "");
	return ALIGN_OK;
}

/* The run name and framework the file's own header gives (formats with a names hook): the name
 * replaces the one derived from the file name unless --as named the run (named). */
static int header_names(struct ingest *ig, const char *path, char *name, size_t name_size, int named)
{
	char run[256] = "";
	const char *head;
	size_t len;
	ig->framework[0] = '\0';
	ig->name_from_header = 0;
	if (!ig->fmt->parser->names)
		return ALIGN_OK;
	ALIGN_TRY(ig->e, reader_peek(ig->r, &head, &len));
	ALIGN_TRY(ig->e, ig->fmt->parser->names(ig, head, len, run, sizeof run, ig->framework, sizeof ig->framework));
	if (run[0] && !named) {
		snprintf(name, name_size, "%s", run);
		ig->name_from_header = 1;
	}
	return ALIGN_OK;
}

static int made_here(const struct ingest *ig, int64_t run_id)
{
	for (size_t i = 0; i < ig->n_made; i++)
		if (ig->made[i] == run_id)
			return 1;
	return 0;
}

/* One file in one transaction. ig->run_id carries the run between files of one invocation. */
static int ingest_one(struct ingest *ig, const char *path, char *name, size_t name_size, int named, int append,
		      const char *format)
{
	int64_t existing = ig->run_id;
	ALIGN_TRY(ig->e, reader_open_err(path, ig->e, &ig->r));
	int done = 0, rc = resolve_format(ig, path, format);
	if (!rc)
		rc = header_names(ig, path, name, name_size, named);
	if (!rc && !existing)
		rc = store_find_run(ig->db, name, &existing, ig->e);
	if (!rc && existing && !ig->run_id)
		rc = check_existing(ig, path, name, existing,
				    append || (ig->name_from_header && made_here(ig, existing)), &done);
	if (!rc && !done) {
		ig->warnings = json_array();
		rc = transact(ig, path, name, existing, format);
		json_decref(ig->warnings);
		ig->warnings = NULL;
	}
	reader_close(ig->r);
	ig->r = NULL;
	return rc;
}

int ingest_files_err(sqlite3 *db, const char *db_path, const char *as, int append, const char *format,
		     const struct ingest_opts *opts, char **files, int n_files, struct align_err *e)
{
	int worst = ALIGN_OK;
	struct ingest ig = {.e = e, .db = db, .db_path = db_path, .opts = opts};
	char name[256];
	for (int i = 0; i < n_files; i++) {
		if (!as) { /* every file is its own run */
			default_name(files[i], name, sizeof name);
			ig.run_id = 0;
			reset_counters(&ig);
		} else {
			snprintf(name, sizeof name, "%s", as);
		}
		int rc = ingest_one(&ig, files[i], name, sizeof name, as != NULL, append || (as && ig.run_id), format);
		if (rc > worst)
			worst = rc;
		if (!rc && ig.name_from_header && ig.run_id && !made_here(&ig, ig.run_id)) {
			int64_t *grown = realloc(ig.made, (ig.n_made + 1) * sizeof *grown);
			if (grown)
				grown[ig.n_made++] = ig.run_id, ig.made = grown;
		}
		if (rc && i + 1 < n_files && e) { /* the files are independent: report this one, go on */
			err_print(e);
			align_err_clear(e);
		}
	}
	ingest_occ_reset(&ig);
	free(ig.seq);
	free(ig.made);
	free(ig.already_at);
	return worst;
}

int ingest_files(sqlite3 *db, const char *db_path, const char *as, int append, const char *format,
		 const struct ingest_opts *opts, char **files, int n_files)
{
	return ingest_files_err(db, db_path, as, append, format, opts, files, n_files, NULL);
}
