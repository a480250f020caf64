/* bisect-compare: does a trial's run differ from the baseline run, and where first?
 *
 * Until 'align report' exposes its comparison as a C API (harness/report.h), bisect compares in SQL
 * with the record identity ingest uses for its step summaries: records are matched by (canon, rank,
 * step, micro, occ), non-superseded only; a pair differs when its value identity differs: the missing
 * reason, else dtype + exact bits, else digest algorithm + digest, else the printed text (two prints
 * with equal text count as equal, as printed). A record on one side only is a difference too.
 * With --metric, only records whose canonical or printed name matches one of the globs are compared;
 * without, only the (rank, step)s whose step summaries differ are read (ingest's stepsum: count and a
 * sum of the same per-record identity hashes), so identical steps cost nothing.
 * The first divergent record is the earliest by (step, micro, rank, seq). */
#include "bisect.h"
#include "dtype.h"
#include "err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
#define IDENT(x)                                                                                          \
	"CASE WHEN " x ".missing IS NOT NULL THEN 'm' || " x ".missing WHEN " x ".bits IS NOT NULL THEN 'b' || " \
	"coalesce(" x ".dtype, '') || ':' || " x ".bits WHEN " x ".digest IS NOT NULL THEN 'd' || "              \
	"coalesce(" x ".digest_alg, '') || ':' || " x ".digest ELSE 't' || coalesce(" x ".text, '') END"
#define MATCH(x, y)                                                                                       \
	x ".canon = " y ".canon AND " x ".rank = " y ".rank AND " x ".step = " y ".step AND " x ".micro = " y    \
	".micro AND " x ".occ = " y ".occ AND " x ".superseded = 0"
/* clang-format on */

/* ?1 baseline run id, ?2 trial run id, ?3.. metric globs: the WHERE text for side x. Without --metric,
 * only the (rank, step)s whose step summaries differ (ds) are read, when both runs have summaries. */
static void side_filter(const struct bisect *b, const char *x, int use_steps, char *out, size_t len)
{
	size_t n = 0;
	out[0] = '\0';
	if (!b->n_metrics && use_steps)
		snprintf(out, len, " AND (%s.rank, %s.step) IN ds", x, x);
	for (int i = 0; i < b->n_metrics && n < len; i++)
		n += (size_t)snprintf(out + n, len - n, "%s(%s.canon GLOB ?%d OR %s.name GLOB ?%d)",
		                      i ? " OR " : " AND (", x, i + 3, x, i + 3);
	if (b->n_metrics && n < len)
		snprintf(out + n, len - n, ")");
}

/* Step summaries (stepsum, kept by ingest) exist for the run. */
static int has_stepsum(sqlite3 *db, long long run)
{
	sqlite3_stmt *st;
	int yes = 0;
	sqlite3_prepare_v2(db, "SELECT 1 FROM stepsum WHERE run_id=?1 LIMIT 1", -1, &st, NULL);
	sqlite3_bind_int64(st, 1, run);
	yes = sqlite3_step(st) == SQLITE_ROW;
	sqlite3_finalize(st);
	return yes;
}

static long long run_id(sqlite3 *db, const char *name)
{
	sqlite3_stmt *st;
	long long id = 0;
	sqlite3_prepare_v2(db, "SELECT id FROM run WHERE name=?1", -1, &st, NULL);
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return id;
}

/* Bits layout of the float dtypes, for ULP distances. */
static int float_layout(const char *dtype, int *bytes, uint64_t *exp_mask, uint64_t *man_mask)
{
	static const struct {
		const char *name;
		int bytes;
		uint64_t exp, man;
	} rows[] = {
	    {"fp64", 8, 0x7ff0000000000000ull, 0x000fffffffffffffull},
	    {"fp32", 4, 0x7f800000u, 0x007fffffu},
	    {"bf16", 2, 0x7f80u, 0x007fu},
	    {"fp16", 2, 0x7c00u, 0x03ffu},
	};
	for (size_t i = 0; dtype && i < sizeof rows / sizeof rows[0]; i++)
		if (!strcmp(rows[i].name, dtype)) {
			*bytes = rows[i].bytes, *exp_mask = rows[i].exp, *man_mask = rows[i].man;
			return 1;
		}
	return 0;
}

/* ULP distance of two bit patterns of one float dtype; -1 when not meaningful (NaN, not a float). */
static long long ulp_distance(const char *dtype, uint64_t a, uint64_t b)
{
	int bytes;
	uint64_t em, mm;
	if (!float_layout(dtype, &bytes, &em, &mm))
		return -1;
	uint64_t sign = 1ull << (8 * bytes - 1);
	if (((a & em) == em && (a & mm)) || ((b & em) == em && (b & mm)))
		return -1;
	uint64_t ma = a & (sign - 1), mb = b & (sign - 1);
	uint64_t d = (a & sign) == (b & sign) ? (ma > mb ? ma - mb : mb - ma) : ma + mb;
	return d > (uint64_t)INT64_MAX ? INT64_MAX : (long long)d;
}

/* The value of record id as text: "missing (why)", "0x3f800000", "xxh3t64:…", or the print. */
static json_t *value_of(sqlite3 *db, long long id, char *dtype, size_t dlen, int *has_bits, uint64_t *bits)
{
	sqlite3_stmt *st;
	json_t *v = json_null();
	char buf[128];
	*has_bits = 0;
	dtype[0] = '\0';
	sqlite3_prepare_v2(db, "SELECT dtype, bits, digest_alg, digest, text, missing, shape FROM record WHERE id=?1",
	                   -1, &st, NULL);
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) == SQLITE_ROW) {
		const char *dt = (const char *)sqlite3_column_text(st, 0);
		snprintf(dtype, dlen, "%s", dt ? dt : "");
		if (sqlite3_column_type(st, 5) != SQLITE_NULL) {
			snprintf(buf, sizeof buf, "missing (%s)", sqlite3_column_text(st, 5));
			v = json_string(buf);
		} else if (sqlite3_column_type(st, 1) != SQLITE_NULL) {
			size_t size = dt ? dtype_size(dt) : 8;
			*bits = (uint64_t)sqlite3_column_int64(st, 1);
			if (size && size < 8)
				*bits &= (1ull << (8 * size)) - 1;
			*has_bits = sqlite3_column_type(st, 6) == SQLITE_NULL;
			snprintf(buf, sizeof buf, "0x%0*llx", (int)(2 * (size ? size : 8)), (unsigned long long)*bits);
			v = json_string(buf);
		} else if (sqlite3_column_type(st, 3) != SQLITE_NULL) {
			snprintf(buf, sizeof buf, "%s:%s", sqlite3_column_text(st, 2), sqlite3_column_text(st, 3));
			v = json_string(buf);
		} else if (sqlite3_column_type(st, 4) != SQLITE_NULL) {
			v = json_string((const char *)sqlite3_column_text(st, 4));
		}
	}
	sqlite3_finalize(st);
	return v;
}

static json_t *first_diff_json(sqlite3 *db, sqlite3_stmt *st)
{
	json_t *o = json_object();
	json_object_set_new(o, "step", json_integer(sqlite3_column_int64(st, 1)));
	json_object_set_new(o, "micro", json_integer(sqlite3_column_int64(st, 2)));
	json_object_set_new(o, "rank", json_integer(sqlite3_column_int64(st, 3)));
	json_object_set_new(o, "name", json_string((const char *)sqlite3_column_text(st, 5)));
	json_object_set_new(o, "verdict", json_string((const char *)sqlite3_column_text(st, 0)));
	char da[32] = "", dt[32] = "";
	int ha = 0, ht = 0;
	uint64_t ba = 0, bt = 0;
	json_t *base = sqlite3_column_type(st, 7) == SQLITE_NULL
	                   ? json_null()
	                   : value_of(db, sqlite3_column_int64(st, 7), da, sizeof da, &ha, &ba);
	json_t *trial = sqlite3_column_type(st, 6) == SQLITE_NULL
	                    ? json_null()
	                    : value_of(db, sqlite3_column_int64(st, 6), dt, sizeof dt, &ht, &bt);
	json_object_set_new(o, "dtype", dt[0] || da[0] ? json_string(dt[0] ? dt : da) : json_null());
	json_object_set_new(o, "baseline", base);
	json_object_set_new(o, "trial", trial);
	long long ulp = ha && ht && !strcmp(da, dt) ? ulp_distance(dt, ba, bt) : -1;
	if (ulp >= 0)
		json_object_set_new(o, "ulp", json_integer(ulp));
	return o;
}

int bisect_compare(struct bisect *b, struct bisect_trial *t)
{
	long long base = run_id(b->db, b->baseline_run);
	if (!base)
		return err_input("baseline run '%s' is not in '%s'", b->baseline_run, b->db_path);
	json_decref(t->first_diff);
	t->first_diff = NULL;
	t->n_diff = 0;
	t->verdict = TRIAL_SAME;
	if (base == t->run_id)
		return ALIGN_OK; /* the trial's traces are the baseline's bytes */
	char fa[2048], ft[2048];
	int use_steps = has_stepsum(b->db, base) && has_stepsum(b->db, t->run_id);
	side_filter(b, "a", use_steps, fa, sizeof fa);
	side_filter(b, "t", use_steps, ft, sizeof ft);
	size_t len = 6 * sizeof fa + 8192;
	char *sql = malloc(len);
	/* clang-format off */
	snprintf(sql, len,
	         "WITH ds(rank, step) AS ("
	         " SELECT t.rank, t.step FROM stepsum t LEFT JOIN stepsum a"
	         "  ON a.run_id = ?1 AND a.rank = t.rank AND a.step = t.step"
	         "  WHERE t.run_id = ?2 AND (a.h IS NOT t.h OR a.n IS NOT t.n)"
	         " UNION SELECT a.rank, a.step FROM stepsum a WHERE a.run_id = ?1 AND NOT EXISTS"
	         "  (SELECT 1 FROM stepsum t WHERE t.run_id = ?2 AND t.rank = a.rank AND t.step = a.step)),"
	         " d(v, step, micro, rank, seq, name, tid, aid) AS ("
	         " SELECT 'differs', t.step, t.micro, t.rank, t.seq, t.name, t.id, a.id"
	         "  FROM record t JOIN record a ON a.run_id = ?1 AND " MATCH("a", "t")
	         "  WHERE t.run_id = ?2 AND t.superseded = 0%s%s AND (" IDENT("a") ") IS NOT (" IDENT("t") ")"
	         " UNION ALL SELECT 'only in trial', t.step, t.micro, t.rank, t.seq, t.name, t.id, NULL"
	         "  FROM record t WHERE t.run_id = ?2 AND t.superseded = 0%s"
	         "  AND NOT EXISTS (SELECT 1 FROM record a WHERE a.run_id = ?1 AND " MATCH("a", "t") "%s)"
	         " UNION ALL SELECT 'missing in trial', a.step, a.micro, a.rank, a.seq, a.name, NULL, a.id"
	         "  FROM record a WHERE a.run_id = ?1 AND a.superseded = 0%s"
	         "  AND NOT EXISTS (SELECT 1 FROM record t WHERE t.run_id = ?2 AND " MATCH("t", "a") "%s))"
	         " SELECT v, step, micro, rank, seq, name, tid, aid, count(*) OVER () FROM d"
	         " ORDER BY step, micro, rank, seq LIMIT 1",
	         ft, fa, ft, fa, fa, ft);
	/* clang-format on */
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(b->db, sql, -1, &st, NULL);
	free(sql);
	if (rc != SQLITE_OK)
		return err_internal("cannot compare runs: %s", sqlite3_errmsg(b->db));
	sqlite3_bind_int64(st, 1, base);
	sqlite3_bind_int64(st, 2, t->run_id);
	for (int i = 0; i < b->n_metrics; i++)
		sqlite3_bind_text(st, i + 3, b->metrics[i], -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		t->verdict = TRIAL_DIVERGES;
		t->n_diff = sqlite3_column_int64(st, 8);
		t->first_diff = first_diff_json(b->db, st);
	}
	int err = rc != SQLITE_ROW && rc != SQLITE_DONE;
	sqlite3_finalize(st);
	if (err)
		return err_internal("cannot compare runs: %s", sqlite3_errmsg(b->db));
	return ALIGN_OK;
}

void bisect_set_compared(struct bisect *b)
{
	json_t *o = json_object(), *m = json_array();
	sqlite3_stmt *st;
	char content[65] = "";
	sqlite3_prepare_v2(b->db,
	                   "SELECT group_concat(sha256, ',') FROM (SELECT sha256 FROM source JOIN run "
	                   "ON run.id = source.run_id WHERE run.name = ?1 ORDER BY sha256)",
	                   -1, &st, NULL);
	sqlite3_bind_text(st, 1, b->baseline_run, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		bisect_sha256_hex(sqlite3_column_text(st, 0), (size_t)sqlite3_column_bytes(st, 0), content);
	sqlite3_finalize(st);
	for (int i = 0; i < b->n_metrics; i++)
		json_array_append_new(m, json_string(b->metrics[i]));
	json_object_set_new(o, "baseline", json_string(b->baseline_run));
	json_object_set_new(o, "content", json_string(content));
	json_object_set_new(o, "metrics", m);
	free(b->compared);
	b->compared = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
}
