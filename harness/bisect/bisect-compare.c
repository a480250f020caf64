/* bisect-compare: does a trial's run differ from the baseline run, and where first?
 *
 * The comparison is align report's (report.h), in-process: run A = the baseline, run B = the trial,
 * first-diff mode (reading stops after the first differing step; steps whose summaries are equal are
 * not read), --metric names passed through as report takes them (canonical names or aliases; a name in
 * neither run is an error). A trial diverges when the report finds a difference (differ, incomparable,
 * only in one run: what makes 'align report' exit 1); a record equal as printed is no difference.
 * Its first_diff is the report's first_diff (the first divergent value), else, when only names in one
 * run differ, its first_only_in: a JSON ITEM, exactly as 'align report --format json' writes it:
 * {step, micro, rank, name, verdict, reason, ulp, ulp_dtype, rel_diff, digits, a: SIDE, b: SIDE},
 * a being the baseline's side and b the trial's. n_diff is the differing records the report found,
 * which in first-diff mode is a lower bound of all of them. */
#include "bisect.h"
#include "err.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Identifies the comparison in the cache: a verdict made by another one is made again (2: job
 * metadata left out, only-in records not first_diff). */
#define BISECT_COMPARE_ID "align-report-2 first-diff"

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

/* The report's first_diff (else first_only_in) as its JSON renderer writes it. */
static json_t *first_diff_json(const struct report *r)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	if (!mem)
		return NULL;
	int bad = report_render(r, REPORT_JSON, mem);
	fclose(mem);
	json_t *doc = bad ? NULL : json_loadb(text, len, 0, NULL), *fd = NULL;
	free(text);
	if (doc) {
		fd = json_object_get(doc, "first_diff");
		fd = json_incref(json_is_null(fd) ? json_object_get(doc, "first_only_in") : fd);
	}
	json_decref(doc);
	return fd;
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
	struct report_opts ro = {
	    .run_a = b->baseline_run,
	    .run_b = t->run_name,
	    .first_diff = 1,
	    .metrics = (const char *const *)b->metrics,
	    .n_metrics = b->n_metrics,
	    .limit = 0,
	};
	struct report r;
	memset(&r, 0, sizeof r);
	int rc = report_compute(b->db, &ro, &r);
	if (rc)
		return rc;
	if (report_exit_code(&r) == ALIGN_DIFF) {
		t->verdict = TRIAL_DIVERGES;
		t->n_diff = r.n_diff_total;
		if (!(t->first_diff = first_diff_json(&r)))
			rc = err_internal("cannot render the first difference of '%s' and '%s'", b->baseline_run,
			                  t->run_name);
	}
	report_free(&r);
	return rc;
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
	json_object_set_new(o, "compare", json_string(BISECT_COMPARE_ID));
	json_object_set_new(o, "baseline", json_string(b->baseline_run));
	json_object_set_new(o, "content", json_string(content));
	json_object_set_new(o, "metrics", m);
	free(b->compared);
	b->compared = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
}
