/* test-store-report: the statement helpers of harness/store/store-report.c (a statement that cannot be
 * prepared fails with one message naming it; the first message wins; a single-row lookup says whether
 * its row came), the run lookup by name and by id, and the provenance the report reads from run.header (a
 * field recorded by both runs with different values differs; one recorded by one run only does not).
 * Exit status is the verdict. */
#include "report.h"
#include "store-report.h"
#include "store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails;

/* One check: on failure print where and why, and count it. */
static void check(int ok, int line, const char *fmt, ...)
{
	if (ok)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s:%d: FAIL: ", __FILE__, line);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	fails++;
}
#define CHECK(cond, ...) check((cond) != 0, __LINE__, __VA_ARGS__)

static int grab(void *u, sqlite3_stmt *q)
{
	int oom = 0;
	*(char **)u = store_sql_dup(q, 0, &oom);
	return oom ? ALIGN_ERR_INTERNAL : 1;
}

static void helpers(sqlite3 *db)
{
	struct align_err e = {0};
	sqlite3_stmt *q;
	int rc = store_prepare(db, "the broken statement", "SELEC nothing", &q, &e);
	CHECK(rc == ALIGN_ERR_INTERNAL && q == NULL, "bad SQL prepared (rc %d)", rc);
	CHECK(strstr(e.msg, "cannot prepare 'the broken statement'"), "message '%s' does not name the statement",
	      e.msg);
	/* the first message wins */
	rc = store_prepare(db, "another", "SELEC", &q, &e);
	CHECK(strstr(e.msg, "the broken statement") && !strstr(e.msg, "another"),
	      "second message replaced the first: '%s'", e.msg);
	align_err_clear(&e);
	/* one row, bound by name */
	char *got = NULL;
	int found = -1;
	CHECK(store_prepare(db, "a lookup", "SELECT :x", &q, &e) == ALIGN_OK, "'SELECT :x' not prepared: %s", e.msg);
	store_bind_text(q, ":x", "v");
	rc = store_sql_one(q, "a lookup", grab, &got, &found, &e);
	CHECK(rc == ALIGN_OK && found == 1 && got && !strcmp(got, "v"), "':x' bound by name: rc %d found %d '%s'", rc,
	      found, got ? got : "(null)");
	free(got);
	/* no row: not found, not an error */
	CHECK(store_prepare(db, "no row", "SELECT 1 WHERE 0", &q, &e) == ALIGN_OK, "'SELECT 1 WHERE 0': %s", e.msg);
	rc = store_sql_one(q, "no row", grab, &got, &found, &e);
	CHECK(rc == ALIGN_OK && found == 0, "no row: rc %d found %d", rc, found);
}

static void runs(sqlite3 *db)
{
	struct align_err e = {0};
	struct store_run_row r;
	int found = -1;
	CHECK(store_report_run(db, "b", 0, &r, &found, &e) == ALIGN_OK && found == 1 && !strcmp(r.name, "b") &&
		      r.header && strstr(r.header, "H200"),
	      "run 'b' by name: found %d, %s", found, e.msg);
	int64_t id = r.id;
	store_report_run_free(&r);
	CHECK(store_report_run(db, NULL, id, &r, &found, &e) == ALIGN_OK && found && !strcmp(r.name, "b"),
	      "run 'b' by id %lld", (long long)id);
	store_report_run_free(&r);
	CHECK(store_report_run(db, "zz", 0, &r, &found, &e) == ALIGN_OK && found == 0 && !r.name, "run 'zz' found");
	int64_t ids[3];
	int n = -1;
	CHECK(store_report_first_runs(db, ids, &n, &e) == ALIGN_OK && n == 3, "first runs: %d", n);
	char names[256];
	store_report_run_names(db, names, sizeof names);
	CHECK(!strcmp(names, "'a', 'b', 'c'"), "run names '%s'", names);
}

static void provenance(sqlite3 *db, const char *run_b, const char *want)
{
	struct align_err e = {0};
	struct report_opts o = {.run_a = "a", .run_b = run_b, .limit = 5};
	struct report r;
	int rc = report_compute(db, &o, &r, &e);
	CHECK(rc == ALIGN_OK, "report a,%s: %s", run_b, e.msg);
	if (rc)
		return;
	char got[256] = "";
	for (int i = 0; i < REPORT_PROV_FIELDS; i++)
		if (report_prov_differs(&r, i))
			snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", got[0] ? "," : "",
				 report_prov_fields[i]);
	CHECK(!strcmp(got, want), "a vs %s: provenance differs in '%s', want '%s'", run_b, got, want);
	report_free(&r);
}

int main(void)
{
	char path[] = "/tmp/test-store-report-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return 99;
	close(fd);
	unlink(path);
	sqlite3 *db;
	if (store_open_err(path, STORE_WRITE, 1000, &db, NULL))
		return 99;
	const char *sql =
		"INSERT INTO run(name, framework, format, header, created) VALUES "
		"('a', 'align', 'atf', '{\"align_trace\":1,\"device\":\"NVIDIA H100\",\"cublas_version\":130000,"
		"\"driver_version\":\"570\"}', '2026-01-01T00:00:00Z'),"
		"('b', 'align', 'atf', '{\"align_trace\":1,\"device\":\"NVIDIA H200\",\"cublas_version\":120900}', "
		"'2026-01-01T00:00:00Z'),"
		"('c', 'align', 'atf', NULL, '2026-01-01T00:00:00Z')";
	if (store_exec_err(db, sql, NULL))
		return 99;
	helpers(db);
	runs(db);
	provenance(db, "b", "cublas_version,device");
	provenance(db, "c", "");
	store_close(db);
	unlink(path);
	if (fails)
		fprintf(stderr, "%d check(s) failed\n", fails);
	return fails ? 1 : 0;
}
