/* bisect-out: the report of 'align bisect' in text, JSON or Markdown, to stdout or atomically to a file
 * (a temporary file in the same directory, fsync, rename: a reader never sees half a report).
 *
 * All three say the same: the switches, the culprit set (each member with its good and bad value, its
 * trial alone and the set's trial without it, and the first divergent record it produces: its own when
 * it diverges alone, else the set's), whether it is an interaction, and the trial table in the order the
 * trials were needed. The JSON document is built first; text and Markdown are written from it. */
#include "bisect.h"
#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const verdict_names[] = {"pending", "same", "diverges", "unusable"};

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *trial_json(const struct bisect *b, const struct bisect_trial *t)
{
	json_t *o = json_object();
	json_object_set_new(o, "index", json_integer(t->index));
	json_object_set_new(o, "switches", bisect_set_json(b, t->set));
	json_object_set_new(o, "verdict", json_string(verdict_names[t->verdict]));
	json_object_set_new(o, "reason", str_or_null(t->verdict == TRIAL_UNUSABLE ? t->reason : NULL));
	json_object_set_new(o, "first_diff", t->first_diff ? json_incref(t->first_diff) : json_null());
	json_object_set_new(o, "n_diff", json_integer(t->n_diff));
	json_object_set_new(o, "duration_s", json_real(t->duration));
	json_object_set_new(o, "run", str_or_null(t->run_name));
	json_object_set_new(o, "env", json_string(t->env));
	json_object_set_new(o, "cached", json_boolean(t->cached));
	return o;
}

static json_t *culprit_json(const struct bisect *b, const struct bisect_culprit *c)
{
	json_t *o = json_object(), *members = json_array(), *joint = json_array();
	for (size_t i = 0, k = 0; i < b->n_sw; i++) {
		if (!c->set[i])
			continue;
		const struct bisect_trial *alone = c->alone[k], *without = c->without[k];
		const struct bisect_trial *src = alone->verdict == TRIAL_DIVERGES ? alone : c->trial;
		json_t *m = json_object();
		json_object_set_new(m, "key", json_string(b->sw[i].key));
		json_object_set_new(m, "good", str_or_null(b->sw[i].good));
		json_object_set_new(m, "bad", str_or_null(b->sw[i].bad));
		json_object_set_new(m, "alone", json_string(verdict_names[alone->verdict]));
		json_object_set_new(m, "alone_trial", json_integer(alone->index));
		json_object_set_new(m, "without", json_string(verdict_names[without->verdict]));
		json_object_set_new(m, "without_trial", json_integer(without->index));
		json_object_set_new(m, "first_diff", src->first_diff ? json_incref(src->first_diff) : json_null());
		json_object_set_new(m, "first_diff_from", json_string(src == alone ? "alone" : "set"));
		json_array_append_new(members, m);
		if (c->n >= 2 && without->verdict == TRIAL_SAME)
			json_array_append_new(joint, json_string(b->sw[i].key));
		k++;
	}
	json_object_set_new(o, "switches", members);
	json_object_set_new(o, "interaction", json_boolean(c->interaction));
	json_object_set_new(o, "needed_jointly", joint);
	json_object_set_new(o, "trial", json_integer(c->trial->index));
	json_object_set_new(o, "first_diff", c->trial->first_diff ? json_incref(c->trial->first_diff) : json_null());
	return o;
}

/* The last check of the switches left after the culprits. */
static json_t *rest_json(const struct bisect *b, const struct bisect_trial *t)
{
	if (!t)
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "switches", bisect_set_json(b, t->set));
	json_object_set_new(o, "verdict", json_string(verdict_names[t->verdict]));
	json_object_set_new(o, "trial", json_integer(t->index));
	return o;
}

static json_t *report_json(const struct bisect *b, const struct bisect_result *res)
{
	json_t *o = json_object(), *sw = json_array(), *trials = json_array(), *metrics = json_array();
	int counts[4] = {0}, cached = 0;
	for (size_t i = 0; i < b->n_sw; i++) {
		json_t *s = json_object();
		json_object_set_new(s, "key", json_string(b->sw[i].key));
		json_object_set_new(s, "good", str_or_null(b->sw[i].good));
		json_object_set_new(s, "bad", str_or_null(b->sw[i].bad));
		json_array_append_new(sw, s);
	}
	for (size_t i = 0; i < b->n_trials; i++) {
		json_array_append_new(trials, trial_json(b, b->trials[i]));
		counts[b->trials[i]->verdict]++;
		cached += b->trials[i]->cached;
	}
	for (int i = 0; i < b->n_metrics; i++)
		json_array_append_new(metrics, json_string(b->metrics[i]));
	json_object_set_new(o, "align_bisect", json_integer(1));
	json_object_set_new(o, "command", bisect_cmd_json(b));
	json_object_set_new(o, "database", json_string(b->db_path));
	json_object_set_new(o, "workdir", json_string(b->workdir));
	json_object_set_new(o, "baseline", str_or_null(b->baseline_run));
	json_object_set_new(o, "metrics", metrics);
	json_object_set_new(o, "switches", sw);
	json_t *culprits = json_array();
	for (int i = 0; i < res->n_culprits; i++)
		json_array_append_new(culprits, culprit_json(b, &res->culprits[i]));
	json_object_set_new(o, "result", json_string(res->n_culprits ? "culprit" : "no-effect"));
	json_object_set_new(o, "message", str_or_null(res->why_not));
	json_object_set_new(o, "culprits", culprits);
	json_object_set_new(o, "rest", rest_json(b, res->rest));
	json_object_set_new(o, "trials", trials);
	json_t *n = json_object();
	json_object_set_new(n, "trials", json_integer((json_int_t)b->n_trials));
	json_object_set_new(n, "run", json_integer(b->n_run));
	json_object_set_new(n, "cached", json_integer(cached));
	json_object_set_new(n, "same", json_integer(counts[TRIAL_SAME]));
	json_object_set_new(n, "diverges", json_integer(counts[TRIAL_DIVERGES]));
	json_object_set_new(n, "unusable", json_integer(counts[TRIAL_UNUSABLE]));
	json_object_set_new(o, "counts", n);
	return o;
}

/* "step 3 micro 0 rank 0 'loss': differs (0x3f800000 -> 0x3f800001, 1 ulp)" */
/* One side of a report ITEM as a value: bits, digest, print, "missing (why)", or "absent". */
static void side_text(json_t *side, char *buf, size_t len)
{
	const char *bits = json_string_value(json_object_get(side, "bits"));
	const char *digest = json_string_value(json_object_get(side, "digest"));
	const char *text = json_string_value(json_object_get(side, "text"));
	const char *missing = json_string_value(json_object_get(side, "missing"));
	if (!json_is_object(side))
		snprintf(buf, len, "absent");
	else if (missing)
		snprintf(buf, len, "missing (%s)", missing);
	else if (bits)
		snprintf(buf, len, "%s", bits);
	else if (digest)
		snprintf(buf, len, "%s:%s", json_string_value(json_object_get(side, "digest_alg")), digest);
	else
		snprintf(buf, len, "%s", text ? text : "no value");
}

/* "step 2 micro 0 rank 0 'loss': differ (0x40000000 -> 0x40000001, 1 ulp)" from a report ITEM (a is the
 * baseline); keys that are null (no step, step-level micro, a global rank) are left out. */
static void diff_text(json_t *fd, char *buf, size_t len)
{
	static const char *const keys[] = {"step", "micro", "rank"};
	char a[160], b[160], u[48] = "";
	size_t n = 0;
	if (!json_is_object(fd)) {
		snprintf(buf, len, "-");
		return;
	}
	for (int i = 0; i < 3 && n < len; i++)
		if (json_is_integer(json_object_get(fd, keys[i])))
			n += (size_t)snprintf(buf + n, len - n, "%s %lld ", keys[i],
					      (long long)json_integer_value(json_object_get(fd, keys[i])));
	side_text(json_object_get(fd, "a"), a, sizeof a);
	side_text(json_object_get(fd, "b"), b, sizeof b);
	if (json_is_integer(json_object_get(fd, "ulp")))
		snprintf(u, sizeof u, ", %lld ulp", (long long)json_integer_value(json_object_get(fd, "ulp")));
	if (n < len)
		snprintf(buf + n, len - n, "'%s': %s (%s -> %s%s)", json_string_value(json_object_get(fd, "name")),
			 json_string_value(json_object_get(fd, "verdict")), a, b, u);
}

static void join_switches(json_t *arr, char *buf, size_t len, const char *empty)
{
	size_t i, n = 0;
	json_t *v;
	buf[0] = '\0';
	json_array_foreach(arr, i, v)
	{
		if (n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", json_string_value(v));
	}
	if (!json_array_size(arr))
		snprintf(buf, len, "%s", empty);
}

static const char *value_or_unset(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "unset";
}

static void culprit_text(FILE *f, json_t *cul, int md)
{
	size_t i;
	json_t *m;
	char diff[1024];
	json_array_foreach(json_object_get(cul, "switches"), i, m)
	{
		diff_text(json_object_get(m, "first_diff"), diff, sizeof diff);
		const char *key = json_string_value(json_object_get(m, "key"));
		fprintf(f,
			md ? "- `%s=%s` (good: `%s`): alone %s (trial %lld), set without it %s (trial %lld)\n"
			   : "  %s=%s (good: %s): alone %s (trial %lld), set without it %s (trial %lld)\n",
			key, value_or_unset(json_object_get(m, "bad")), value_or_unset(json_object_get(m, "good")),
			json_string_value(json_object_get(m, "alone")),
			(long long)json_integer_value(json_object_get(m, "alone_trial")),
			json_string_value(json_object_get(m, "without")),
			(long long)json_integer_value(json_object_get(m, "without_trial")));
		fprintf(f, md ? "  - first diff%s: %s\n" : "    first diff%s: %s\n",
			strcmp(json_string_value(json_object_get(m, "first_diff_from")), "alone") ? " (of the set)"
												  : "",
			diff);
	}
	if (json_is_true(json_object_get(cul, "interaction"))) {
		char keys[2048];
		join_switches(json_object_get(cul, "needed_jointly"), keys, sizeof keys, "(none proven)");
		fprintf(f,
			md ? "\n**Interaction:** no member diverges alone; needed jointly: %s\n"
			   : "  interaction: no member diverges alone; needed jointly: %s\n",
			keys);
	}
}

/* A Markdown table cell: '|' escaped, newlines as spaces (in place, truncating at len). */
static void md_cell(char *s, size_t len)
{
	char tmp[4096];
	size_t n = 0;
	for (const char *p = s; *p && n + 2 < sizeof tmp; p++) {
		if (*p == '|')
			tmp[n++] = '\\';
		tmp[n++] = *p == '\n' ? ' ' : *p;
	}
	tmp[n] = '\0';
	snprintf(s, len, "%s", tmp);
}

static void trials_table(FILE *f, json_t *trials, int md)
{
	size_t i;
	json_t *t;
	char diff[1024], sw[4096];
	if (md)
		fputs("| # | switches at their bad value | verdict | first diff, or why unusable | duration | cached "
		      "|\n"
		      "|---|---|---|---|---|---|\n",
		      f);
	else
		fprintf(f, "%4s  %-9s %9s  %-6s  %s\n", "#", "verdict", "duration", "cached",
			"switches at their bad value");
	json_array_foreach(trials, i, t)
	{
		const char *verdict = json_string_value(json_object_get(t, "verdict"));
		int unusable = !strcmp(verdict, "unusable");
		join_switches(json_object_get(t, "switches"), sw, sizeof sw, "(none: the good environment)");
		if (unusable)
			snprintf(diff, sizeof diff, "%s", json_string_value(json_object_get(t, "reason")));
		else
			diff_text(json_object_get(t, "first_diff"), diff, sizeof diff);
		long long index = (long long)json_integer_value(json_object_get(t, "index"));
		double dur = json_real_value(json_object_get(t, "duration_s"));
		const char *cached = json_is_true(json_object_get(t, "cached")) ? "yes" : "no";
		if (md) {
			md_cell(sw, sizeof sw);
			md_cell(diff, sizeof diff);
			fprintf(f, "| %lld | %s | %s | %s | %.2fs | %s |\n", index, sw, verdict, diff, dur, cached);
			continue;
		}
		fprintf(f, "%4lld  %-9s %8.2fs  %-6s  %s\n", index, verdict, dur, cached, sw);
		if (strcmp(verdict, "same"))
			fprintf(f, "%6s%s: %s\n", "", unusable ? "why" : "first diff", diff);
	}
}

static void culprits_text(FILE *f, json_t *r, int md)
{
	json_t *culprits = json_object_get(r, "culprits"), *cul, *rest = json_object_get(r, "rest");
	size_t i, total = json_array_size(culprits);
	char diff[1024];
	json_array_foreach(culprits, i, cul)
	{
		size_t n = json_array_size(json_object_get(cul, "switches"));
		char which[64] = "";
		if (total > 1)
			snprintf(which, sizeof which, " %zu of %zu", i + 1, total);
		fprintf(f, md ? "\n## Culprit%s: %zu switch%s\n\n" : "culprit%s: %zu switch%s\n", which, n,
			n == 1 ? "" : "es");
		culprit_text(f, cul, md);
		diff_text(json_object_get(cul, "first_diff"), diff, sizeof diff);
		fprintf(f,
			md ? "\nThe set's first divergent record (trial %lld): %s\n"
			   : "  the set's first diff (trial %lld): %s\n",
			(long long)json_integer_value(json_object_get(cul, "trial")), diff);
	}
	if (json_is_object(rest)) {
		const char *v = json_string_value(json_object_get(rest, "verdict"));
		size_t n = json_array_size(json_object_get(rest, "switches"));
		fprintf(f, "%sthe other %zu switch%s, with %s at their good value: %s (trial %lld)\n", md ? "\n" : "",
			n, n == 1 ? "" : "es", total == 1 ? "the culprit" : "the culprits",
			!strcmp(v, "same")	 ? "no change in the bits"
			: !strcmp(v, "unusable") ? "unusable, not checked"
						 : v,
			(long long)json_integer_value(json_object_get(rest, "trial")));
	}
}

static void write_human(FILE *f, json_t *r, int md)
{
	json_t *counts = json_object_get(r, "counts");
	size_t nsw = json_array_size(json_object_get(r, "switches"));
	if (md)
		fputs("# align bisect\n\n", f);
	fprintf(f, "%s%zu switch%s differ between good and bad; baseline run %s\n", md ? "" : "bisect: ", nsw,
		nsw == 1 ? "" : "es", json_string_value(json_object_get(r, "baseline")));
	if (json_array_size(json_object_get(r, "culprits")))
		culprits_text(f, r, md);
	else
		fprintf(f, md ? "\n**No culprit:** %s\n" : "no culprit: %s\n",
			json_string_value(json_object_get(r, "message")));
	fprintf(f,
		md ? "\n## Trials\n\n%lld trials (%lld run, %lld from the cache): %lld diverge, %lld same, %lld "
		     "unusable\n\n"
		   : "\ntrials: %lld (%lld run, %lld from the cache): %lld diverge, %lld same, %lld unusable\n",
		(long long)json_integer_value(json_object_get(counts, "trials")),
		(long long)json_integer_value(json_object_get(counts, "run")),
		(long long)json_integer_value(json_object_get(counts, "cached")),
		(long long)json_integer_value(json_object_get(counts, "diverges")),
		(long long)json_integer_value(json_object_get(counts, "same")),
		(long long)json_integer_value(json_object_get(counts, "unusable")));
	trials_table(f, json_object_get(r, "trials"), md);
}

static int write_to(FILE *f, json_t *r, enum bisect_format fmt)
{
	if (fmt == BISECT_JSON) {
		if (json_dumpf(r, f, JSON_INDENT(2) | JSON_REAL_PRECISION(6)))
			return -1;
		fputc('\n', f);
	} else {
		write_human(f, r, fmt == BISECT_MD);
	}
	return ferror(f) ? -1 : 0;
}

int bisect_write_report(const struct bisect *b, const struct bisect_result *res, enum bisect_format fmt,
			const char *path)
{
	json_t *r = report_json(b, res);
	int rc = ALIGN_OK;
	if (!path) {
		if (write_to(stdout, r, fmt) || fflush(stdout))
			rc = fail_internal(b->err, "cannot write the report: %s", strerror(errno));
		json_decref(r);
		return rc;
	}
	size_t len = strlen(path) + 16;
	char *tmp = malloc(len);
	snprintf(tmp, len, "%s.XXXXXX", path);
	int fd = mkstemp(tmp);
	FILE *f = fd >= 0 && !fchmod(fd, 0644) ? fdopen(fd, "w") : NULL;
	if (!f) {
		rc = fail_input(b->err, "cannot write '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd), unlink(tmp);
	} else if (write_to(f, r, fmt) || fflush(f) || fsync(fileno(f))) {
		rc = fail_internal(b->err, "cannot write '%s': %s", path, strerror(errno));
		fclose(f);
		unlink(tmp);
	} else if (fclose(f) || rename(tmp, path)) {
		rc = fail_internal(b->err, "cannot write '%s': %s", path, strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	json_decref(r);
	return rc;
}
