/* fuzz-ingest: one ingest format (FUZZ_FORMAT, a formats.def name) or, without FUZZ_FORMAT, format
 * detection over all of them (FUZZ_ATF_HEADER: ATF records after a fixed valid header): the input is written to a file named FUZZ_NAME and ingested through
 * ingest_files_err into a fresh in-memory database, as `align ingest [--format F] FILE` does. Any exit
 * class is fine; a crash, a sanitizer report or a leak is a finding. */
#include "err.h"
#include "fuzz.h"
#include "ingest.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

#ifndef FUZZ_NAME
#define FUZZ_NAME "rank0.log"
#endif

/* A fresh database per input: the migrated schema once (store_open_err), then a copy of its bytes
 * per input (migrating per input would take most of the time). */
static sqlite3 *fresh_db(void)
{
	static unsigned char *image;
	static sqlite3_int64 image_len;
	struct align_err e = {0};
	sqlite3 *db = NULL;
	if (!image) {
		if (store_open_err(":memory:", STORE_WRITE, 0, &db, &e)) {
			err_print(&e);
			abort(); /* an in-memory database always opens */
		}
		image = sqlite3_serialize(db, "main", &image_len, 0);
		store_close(db);
		if (!image)
			abort();
	}
	unsigned char *copy = sqlite3_malloc64((sqlite3_uint64)image_len);
	if (!copy || sqlite3_open(":memory:", &db) != SQLITE_OK)
		abort();
	memcpy(copy, image, (size_t)image_len);
	if (sqlite3_deserialize(db, "main", copy, image_len, image_len,
				SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) != SQLITE_OK ||
	    store_exec_err(db, "PRAGMA foreign_keys=ON", &e))
		abort();
	sqlite3_extended_result_codes(db, 1);
	return db;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int quiet;
	if (!quiet)
		fuzz_quiet(), quiet = 1;
#ifdef FUZZ_ATF_HEADER
	/* ATF records: the input is the lines after a valid header, so that every mutation lands on records */
	static const char header[] = "{\"align_trace\":1,\"run\":\"fuzz\",\"framework\":\"align\",\"rank\":0,"
				     "\"world_size\":1,\"env\":{}}\n";
	uint8_t *whole = malloc(sizeof header - 1 + size);
	if (!whole)
		return 0;
	memcpy(whole, header, sizeof header - 1);
	memcpy(whole + sizeof header - 1, data, size);
	const char *path = fuzz_file(FUZZ_NAME, whole, sizeof header - 1 + size);
	free(whole);
#else
	const char *path = fuzz_file(FUZZ_NAME, data, size);
#endif
	if (!path)
		return 0;
	struct align_err e = {0};
	sqlite3 *db = fresh_db();
	struct ingest_opts opts = {.micro_batches = 1, .n_order = 1, .order = {"main"}, .quiet = 1};
	char *files[] = {(char *)path};
#ifdef FUZZ_FORMAT
	const char *format = FUZZ_FORMAT;
#else
	const char *format = NULL;
#endif
	int rc = ingest_files_err(db, ":memory:", NULL, 0, format, &opts, files, 1, &e);
	/* exit class 3 is reserved for bugs: an input must never reach one */
	if (rc == ALIGN_ERR_INTERNAL && !getenv("FUZZ_ALLOW_INTERNAL")) {
		err_print(&e);
		abort();
	}
	store_close(db);
	return 0;
}
