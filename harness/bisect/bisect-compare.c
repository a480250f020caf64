/* bisect-compare: does a trial's run differ from the baseline run, and where first?
 *
 * The comparison is align report's (report.h), in-process: run A = the baseline, run B = the trial,
 * first-diff mode (reading stops after the first differing step; steps whose summaries are equal are
 * not read), --metric names passed through as report takes them (canonical names or aliases; a name in
 * neither run is an error). A trial diverges when the report finds a difference (differ, incomparable,
 * only in one run: what makes 'align report' exit 1); a record equal as printed is no difference.
 * Its first_diff is the report's first_diff (the first divergent value), else, when only names in one
 * run differ, its first_only_in, taken from the report's struct and turned into a JSON ITEM by the
 * report's own serializer (report_item_json), exactly as 'align report --format json' writes it:
 * {step, micro, rank, name, verdict, reason, ulp, ulp_dtype, rel_diff, digits, a: SIDE, b: SIDE},
 * a being the baseline's side and b the trial's. n_diff is the differing records the report found,
 * which in first-diff mode is a lower bound of all of them. */
#include "bisect.h"
#include "err.h"
#include "report.h"
#include "store-bisect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Identifies the comparison in the cache: a verdict made by another one is made again (2: job
 * metadata left out, only-in records not first_diff). */
#define BISECT_COMPARE_ID "align-report-2 first-diff"

int bisect_compare(struct bisect *b, struct bisect_trial *t)
{
	int64_t base;
	ALIGN_TRY(b->err, store_bisect_run_id(b->db, b->baseline_run, &base, b->err));
	if (!base)
		return fail_input(b->err, "baseline run '%s' is not in '%s'", b->baseline_run, b->db_path);
	json_decref(t->first_diff);
	t->first_diff = NULL;
	t->n_diff = 0;
	t->verdict = TRIAL_SAME;
	if (base == t->run_id)
		return ALIGN_OK; /* the trial is the baseline (the good trial without --baseline) */
	struct report_opts ro = {
		.run_a = b->baseline_run,
		.run_b = t->run_name,
		.first_diff = 1,
		.metrics = (const char *const *)b->metrics,
		.n_metrics = b->n_metrics,
		.limit = 0,
	};
	struct report r;
	ALIGN_TRY(b->err, report_compute(b->db, &ro, &r, b->err));
	int rc = ALIGN_OK;
	if (report_exit_code(&r) == ALIGN_DIFF) {
		t->verdict = TRIAL_DIVERGES;
		t->n_diff = r.n_diff_total;
		/* the record itself, as the report's JSON writes it (no text in between) */
		if (!(t->first_diff = report_item_json(r.first_diff ? r.first_diff : r.first_only_in)))
			rc = fail_internal(b->err, "out of memory");
	}
	report_free(&r);
	return rc;
}

int bisect_set_compared(struct bisect *b)
{
	char content[65] = "", *joined;
	ALIGN_TRY(b->err, store_bisect_run_content(b->db, b->baseline_run, &joined, b->err));
	if (joined)
		bisect_sha256_hex(joined, strlen(joined), content);
	free(joined);
	json_t *m = json_array();
	for (int i = 0; i < b->n_metrics; i++)
		json_array_append_new(m, json_string(b->metrics[i]));
	json_t *o = json_pack("{s:s,s:s,s:s,s:o}", "compare", BISECT_COMPARE_ID, "baseline", b->baseline_run, "content",
			      content, "metrics", m);
	free(b->compared);
	b->compared = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	return b->compared ? ALIGN_OK : fail_internal(b->err, "out of memory");
}
