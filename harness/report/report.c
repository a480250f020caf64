/* report: the comparison of two runs (rules and fast path in report.h): choose the runs, load the
 * step summaries into (rank, step) units, decide which units must be read, count the others, and walk
 * the steps in execution order. Reading and judging one step is report-scan.c. */
#include "report-impl.h"

#include "err.h"
#include "names.h"
#include "store.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static char *col_dup(sqlite3_stmt *q, int i)
{
	const unsigned char *s = sqlite3_column_text(q, i);
	return strdup(s ? (const char *)s : "");
}

/* "a, b, c" of the runs in the database, for messages. */
static void run_list(sqlite3 *db, char *buf, size_t len)
{
	sqlite3_stmt *q;
	size_t n = 0;
	buf[0] = '\0';
	if (sqlite3_prepare_v2(db, "SELECT name FROM run ORDER BY id", -1, &q, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(q) == SQLITE_ROW && n + 1 < len)
		n += (size_t)snprintf(buf + n, len - n, "%s'%s'", n ? ", " : "", sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	if (!n)
		snprintf(buf, len, "none");
}

static int load_run(sqlite3 *db, const char *db_path, const char *name, int64_t id, struct report_run *out)
{
	sqlite3_stmt *q;
	const char *sql = "SELECT id, name, framework, format, resumed, "
	                  "(SELECT coalesce(sum(n), 0) FROM stepsum WHERE run_id=run.id) FROM run WHERE "
	                  "CASE WHEN ?1 IS NULL THEN id=?2 ELSE name=?1 END";
	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(db));
	if (name)
		sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, id);
	int rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		out->id = sqlite3_column_int64(q, 0);
		out->name = col_dup(q, 1), out->framework = col_dup(q, 2), out->format = col_dup(q, 3);
		out->resumed = sqlite3_column_int(q, 4);
		out->records = sqlite3_column_int64(q, 5);
	}
	sqlite3_finalize(q);
	if (rc == SQLITE_ROW)
		return out->name && out->framework && out->format ? ALIGN_OK : err_internal("out of memory");
	char runs[1024];
	run_list(db, runs, sizeof runs);
	return err_input("no run '%s' in '%s' (runs: %s)", name ? name : "?", db_path, runs);
}

static int choose_runs(struct rp_ctx *c, const char *db_path)
{
	const struct report_opts *o = c->o;
	if (o->run_a) {
		int rc = load_run(c->db, db_path, o->run_a, 0, &c->r->a);
		return rc ? rc : load_run(c->db, db_path, o->run_b, 0, &c->r->b);
	}
	sqlite3_stmt *q;
	int64_t ids[3];
	int n = 0;
	if (sqlite3_prepare_v2(c->db, "SELECT id FROM run ORDER BY id LIMIT 3", -1, &q, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(c->db));
	while (sqlite3_step(q) == SQLITE_ROW)
		ids[n++] = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	if (n != 2) {
		char runs[1024];
		run_list(c->db, runs, sizeof runs);
		if (n == 0)
			return err_input("'%s' holds no runs: run 'align ingest' first", db_path);
		return err_input("'%s' holds %s runs (%s): name the two to compare with --runs A,B", db_path,
		                 n == 1 ? "only one of the two" : "more than two", runs);
	}
	int rc = load_run(c->db, db_path, NULL, ids[0], &c->r->a);
	return rc ? rc : load_run(c->db, db_path, NULL, ids[1], &c->r->b);
}

/* Every distinct canon of a run, by index seeks on record_key (one per name). */
static int enumerate_canons(struct rp_ctx *c, int64_t run, json_t *sql_names)
{
	sqlite3_stmt *q;
	const char *sql = "SELECT canon FROM record WHERE run_id=?1 AND canon > ?2 ORDER BY canon LIMIT 1";
	if (sqlite3_prepare_v2(c->db, sql, -1, &q, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(c->db));
	char *last = strdup("");
	int rc = last ? ALIGN_OK : err_internal("out of memory");
	while (rc == ALIGN_OK) {
		sqlite3_bind_int64(q, 1, run);
		sqlite3_bind_text(q, 2, last, -1, SQLITE_STATIC);
		if (sqlite3_step(q) != SQLITE_ROW)
			break;
		free(last);
		last = col_dup(q, 0);
		sqlite3_reset(q);
		if (!last)
			rc = err_internal("out of memory");
		else if (c->n_rules)
			json_array_append_new(sql_names, json_string(last));
		else if (rp_intern(c, last) < 0 || rp_metrics_sync(c))
			rc = err_internal("out of memory");
	}
	free(last);
	sqlite3_finalize(q);
	return rc;
}

/* The canonical --metric names: the map first, else the built-in aliases. */
static int resolve_filter(struct rp_ctx *c)
{
	const struct report_opts *o = c->o;
	c->filtering = o->n_metrics > 0;
	if (!c->filtering)
		return ALIGN_OK;
	if (!(c->filter = calloc((size_t)o->n_metrics, sizeof *c->filter)))
		return err_internal("out of memory");
	for (int i = 0; i < o->n_metrics; i++) {
		char canon[256];
		names_canonical(o->metrics[i], canon, sizeof canon);
		if (!(c->filter[c->n_filter++] = strdup(rp_map_name(c, o->metrics[i], canon))))
			return err_internal("out of memory");
	}
	return ALIGN_OK;
}

static int check_filter(struct rp_ctx *c)
{
	for (int i = 0; i < c->n_filter; i++) {
		size_t k = 0;
		while (k < c->names.n && strcmp(c->names.s[k], c->filter[i]))
			k++;
		if (k < c->names.n)
			continue;
		char have[1024];
		size_t n = 0;
		have[0] = '\0';
		for (size_t j = 0; j < c->names.n && n + 64 < sizeof have; j++)
			n += (size_t)snprintf(have + n, sizeof have - n, "%s%s", j ? ", " : "", c->names.s[j]);
		return err_input("metric '%s' (canonical '%s') is in neither run '%s' nor run '%s' (names: %s%s)",
		                 c->o->metrics[i], c->filter[i], c->r->a.name, c->r->b.name, have,
		                 n + 64 >= sizeof have ? ", ..." : "");
	}
	return ALIGN_OK;
}

static int by_str(const void *pa, const void *pb) { return strcmp(*(char *const *)pa, *(char *const *)pb); }

/* The numerics scope (report.h): leave out the names either run holds meta records of, and follow the
 * others as --metric names (filtering with want set directly; filter stays empty). Without meta names
 * nothing changes. */
static int scope_numerics(struct rp_ctx *c)
{
	sqlite3_stmt *q;
	const char *sql = "SELECT DISTINCT canon FROM meta_canon WHERE run_id IN (?1, ?2) ORDER BY canon";
	if (sqlite3_prepare_v2(c->db, sql, -1, &q, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(c->db));
	sqlite3_bind_int64(q, 1, c->r->a.id);
	sqlite3_bind_int64(q, 2, c->r->b.id);
	struct report *r = c->r;
	int rc = ALIGN_OK, step = SQLITE_DONE;
	while (rc == ALIGN_OK && (step = sqlite3_step(q)) == SQLITE_ROW) {
		const char *canon = (const char *)sqlite3_column_text(q, 0);
		int32_t id = rp_intern(c, canon);
		char **grown = realloc(r->meta_left_out, (r->n_meta_left_out + 1) * sizeof *grown);
		if (id < 0 || rp_metrics_sync(c) || !grown || !(grown[r->n_meta_left_out] = strdup(canon))) {
			r->meta_left_out = grown ? grown : r->meta_left_out;
			rc = err_internal("out of memory");
			break;
		}
		r->meta_left_out = grown;
		r->n_meta_left_out++;
		c->want[id] = 0;
	}
	if (rc == ALIGN_OK && step != SQLITE_DONE)
		rc = err_internal("sqlite: %s", sqlite3_errmsg(c->db));
	sqlite3_finalize(q);
	if (rc == ALIGN_OK && r->n_meta_left_out) {
		c->filtering = 1;
		qsort(r->meta_left_out, r->n_meta_left_out, sizeof *r->meta_left_out, by_str);
	}
	return rc;
}

/* The SQL canon filter: every built-in canon with a map, else the wanted names (without a first
 * difference yet, in the second phase of --first-diff). */
static int build_canon_json(struct rp_ctx *c, json_t *map_names)
{
	json_t *a = map_names ? json_incref(map_names) : json_array();
	for (size_t i = 0; !map_names && i < c->r->n_metrics; i++)
		if (c->want[i] && !(c->phase2 && c->r->metrics[i].has_first_diff))
			json_array_append_new(a, json_string(c->names.s[i]));
	free(c->canon_json);
	c->canon_json = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	return c->canon_json ? ALIGN_OK : err_internal("out of memory");
}

static int load_sources(struct rp_ctx *c)
{
	sqlite3_stmt *q;
	const char *sql = "SELECT id, path FROM source WHERE run_id IN (?1, ?2) ORDER BY id";
	if (sqlite3_prepare_v2(c->db, sql, -1, &q, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(c->db));
	sqlite3_bind_int64(q, 1, c->r->a.id);
	sqlite3_bind_int64(q, 2, c->r->b.id);
	int rc = ALIGN_OK;
	while (rc == ALIGN_OK && sqlite3_step(q) == SQLITE_ROW) {
		struct rp_source *grown = realloc(c->sources, (c->n_sources + 1) * sizeof *grown);
		if (!grown) {
			rc = err_internal("out of memory");
			break;
		}
		c->sources = grown;
		c->sources[c->n_sources].id = sqlite3_column_int64(q, 0);
		if (!(c->sources[c->n_sources++].path = col_dup(q, 1)))
			rc = err_internal("out of memory");
	}
	sqlite3_finalize(q);
	return rc;
}

static int by_step_rank(const void *pa, const void *pb)
{
	const struct rp_unit *a = pa, *b = pb;
	return a->step != b->step ? (a->step < b->step ? -1 : 1) : (a->rank > b->rank) - (a->rank < b->rank);
}

static int unit_add(struct rp_ctx *c, size_t *cap, int side, sqlite3_stmt *q)
{
	if (c->n_units == *cap) {
		*cap = *cap ? 2 * *cap : 1024;
		struct rp_unit *grown = realloc(c->units, *cap * sizeof *grown);
		if (!grown)
			return err_internal("out of memory");
		c->units = grown;
	}
	struct rp_unit *u = &c->units[c->n_units++];
	memset(u, 0, sizeof *u);
	u->rank = sqlite3_column_int64(q, 0);
	u->step = sqlite3_column_int64(q, 1);
	u->in[side] = 1;
	u->n[side] = sqlite3_column_int64(q, 2);
	u->nx[side] = sqlite3_column_int64(q, 3);
	u->h[side] = sqlite3_column_int64(q, 4);
	return ALIGN_OK;
}

/* Merge both runs' stepsum rows (sorted by step, rank) into units; same = equal summaries. */
static int load_units(struct rp_ctx *c)
{
	sqlite3_stmt *q;
	const char *sql = "SELECT rank, step, n, n_exact, h FROM stepsum WHERE run_id=?1 ORDER BY step, rank";
	if (sqlite3_prepare_v2(c->db, sql, -1, &q, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(c->db));
	size_t cap = 0, n_a = 0;
	int rc = ALIGN_OK;
	for (int side = 0; side < 2 && rc == ALIGN_OK; side++) {
		sqlite3_bind_int64(q, 1, side ? c->r->b.id : c->r->a.id);
		size_t i = 0; /* merge cursor over run A's units (sorted) */
		while (rc == ALIGN_OK && sqlite3_step(q) == SQLITE_ROW) {
			struct rp_unit key = {.rank = sqlite3_column_int64(q, 0), .step = sqlite3_column_int64(q, 1)};
			while (side && i < n_a && by_step_rank(&c->units[i], &key) < 0)
				i++;
			if (side && i < n_a && !by_step_rank(&c->units[i], &key)) {
				struct rp_unit *u = &c->units[i];
				u->in[1] = 1, u->n[1] = sqlite3_column_int64(q, 2), u->nx[1] = sqlite3_column_int64(q, 3);
				u->h[1] = sqlite3_column_int64(q, 4);
			} else {
				rc = unit_add(c, &cap, side, q);
			}
		}
		sqlite3_reset(q);
		n_a = side ? n_a : c->n_units;
	}
	sqlite3_finalize(q);
	if (rc)
		return rc;
	qsort(c->units, c->n_units, sizeof *c->units, by_step_rank);
	c->unit_slot_cap = 64;
	while (c->unit_slot_cap < 2 * c->n_units)
		c->unit_slot_cap *= 2;
	if (!(c->unit_slot = calloc(c->unit_slot_cap, sizeof *c->unit_slot)))
		return err_internal("out of memory");
	for (size_t k = 0; k < c->n_units; k++) {
		struct rp_unit *u = &c->units[k];
		u->same = !c->read_all && u->in[0] && u->in[1] && u->n[0] == u->n[1] && u->nx[0] == u->nx[1] && u->h[0] == u->h[1];
		u->read = !u->same;
		u->sn[0] = u->n[0], u->snx[0] = u->nx[0], u->sn[1] = u->n[1], u->snx[1] = u->nx[1];
		uint64_t h = ((uint64_t)u->rank * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)u->step * 0xc2b2ae3d27d4eb4full);
		size_t j = (h ^ (h >> 29)) & (c->unit_slot_cap - 1);
		while (c->unit_slot[j])
			j = (j + 1) & (c->unit_slot_cap - 1);
		c->unit_slot[j] = (int32_t)k + 1;
	}
	return ALIGN_OK;
}

static struct rp_unit *unit_lookup(const struct rp_ctx *c, int64_t rank, int64_t step)
{
	uint64_t h = ((uint64_t)rank * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)step * 0xc2b2ae3d27d4eb4full);
	for (size_t j = (h ^ (h >> 29)) & (c->unit_slot_cap - 1); c->unit_slot[j]; j = (j + 1) & (c->unit_slot_cap - 1))
		if (c->units[c->unit_slot[j] - 1].rank == rank && c->units[c->unit_slot[j] - 1].step == step)
			return &c->units[c->unit_slot[j] - 1];
	return NULL;
}

/* Per-name counts of one run's units, one grouped query (with --metric, only those names). On a run
 * that was not resumed it is index-only (record_key): the exact/printed split of a skipped unit then
 * follows from its summary when the unit is all exact or all printed (plan() reads mixed units
 * instead). A resumed run needs the table (superseded rows), which also gives the split. Fills the
 * scope counts sn/snx; for run A also the metrics' counts of skipped units. */
static int canon_counts(struct rp_ctx *c, int side)
{
	const struct report_run *run = side ? &c->r->b : &c->r->a;
	int table = run->resumed;
	char sql[400];
	snprintf(sql, sizeof sql, "SELECT canon, rank, step, count(*), %s FROM record WHERE run_id=?1 %s %s GROUP BY canon, rank, step",
	         table ? "sum(bits IS NOT NULL OR digest IS NOT NULL)" : "NULL", table ? "AND superseded=0" : "",
	         c->filtering ? "AND canon IN (SELECT value FROM json_each(?2))" : "");
	sqlite3_stmt *q;
	if (sqlite3_prepare_v2(c->db, sql, -1, &q, NULL) != SQLITE_OK)
		return err_internal("sqlite: %s", sqlite3_errmsg(c->db));
	sqlite3_bind_int64(q, 1, run->id);
	sqlite3_bind_text(q, 2, c->canon_json, -1, SQLITE_STATIC);
	if (c->filtering)
		for (size_t k = 0; k < c->n_units; k++)
			c->units[k].sn[side] = c->units[k].snx[side] = 0;
	int rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct rp_unit *u = unit_lookup(c, sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2));
		if (!u)
			continue; /* no summary: not in any unit (cannot happen for ingested runs) */
		int64_t n = sqlite3_column_int64(q, 3);
		int64_t nx = table ? sqlite3_column_int64(q, 4) : (u->nx[side] == u->n[side] ? n : 0);
		if (c->filtering)
			u->sn[side] += n, u->snx[side] += nx;
		if (side == 0 && u->same && !u->read) {
			int32_t id = rp_intern(c, (const char *)sqlite3_column_text(q, 0));
			if (id < 0 || rp_metrics_sync(c)) {
				rc = SQLITE_NOMEM;
				break;
			}
			u->metrics_counted = 1;
			c->r->metrics[id].c.v[VERDICT_BITWISE_EQUAL] += nx;
			c->r->metrics[id].c.v[VERDICT_EQUAL_AS_PRINTED] += n - nx;
		}
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE)
		return err_internal("sqlite: %s", sqlite3_errmsg(c->db));
	return ALIGN_OK;
}

/* Decide the fast-path bookkeeping: which same units are read anyway, and the per-name counts. */
static int plan(struct rp_ctx *c)
{
	int per_name = !c->read_all && (!c->o->first_diff || c->filtering);
	c->r->metrics_cover_skipped = per_name || c->read_all;
	if (!per_name)
		return ALIGN_OK;
	for (size_t k = 0; k < c->n_units; k++) { /* mixed units: their split per name is not known */
		struct rp_unit *u = &c->units[k];
		if (u->same && !c->r->a.resumed && u->nx[0] > 0 && u->nx[0] < u->n[0])
			u->read = 1;
	}
	int rc = canon_counts(c, 0);
	return rc || !c->filtering ? rc : canon_counts(c, 1);
}

/* Count a skipped unit (equal summaries) without reading it. */
static void count_skipped(struct rp_ctx *c, struct rp_unit *u)
{
	rp_count(c, -1, VERDICT_BITWISE_EQUAL, u->snx[0]);
	rp_count(c, -1, VERDICT_EQUAL_AS_PRINTED, u->sn[0] - u->snx[0]);
	c->r->skipped_units++;
	c->r->skipped_records += u->sn[0];
}

/* One step: units [u0, u1). Returns an error class. */
static int walk_step(struct rp_ctx *c, size_t u0, size_t u1)
{
	struct report *r = c->r;
	int need_unproven = !r->first_unproven && !r->first_diff, any = 0, rc = ALIGN_OK;
	c->step_records = 0;
	c->step_all_exact = 1;
	for (size_t k = u0; k < u1; k++) {
		struct rp_unit *u = &c->units[k];
		if (c->phase2)
			u->read = !u->same && c->remaining > 0;
		else if (u->same && need_unproven && u->sn[0] > u->snx[0])
			u->read = 1; /* the first record known only as printed may be here */
		u->nread[0] = u->nread[1] = 0;
		any |= u->read;
	}
	if (any)
		rc = rp_scan_step(c, u0, u1);
	for (size_t k = u0; k < u1 && rc == ALIGN_OK; k++) {
		struct rp_unit *u = &c->units[k];
		if (u->same && !u->read)
			count_skipped(c, u);
		else if (c->phase2)
			r->unread_a += u->sn[0] - u->nread[0], r->unread_b += u->sn[1] - u->nread[1];
	}
	int64_t step = c->units[u0].step;
	if (c->step_records && !c->have_bad && !c->step_all_exact)
		c->have_bad = 1;
	else if (c->step_records && !c->have_bad && step >= 0)
		r->has_proven = 1, r->proven_through = step;
	return rc;
}

static int walk(struct rp_ctx *c)
{
	int rc = ALIGN_OK;
	for (size_t u0 = 0, u1; u0 < c->n_units && rc == ALIGN_OK; u0 = u1) {
		for (u1 = u0 + 1; u1 < c->n_units && c->units[u1].step == c->units[u0].step; u1++)
			;
		rc = walk_step(c, u0, u1);
		/* past the first difference: only the named metrics still without one (a map hides which
		 * records those are: read on), or nothing */
		if (rc == ALIGN_OK && c->o->first_diff && !c->phase2 && c->r->first_diff && !(c->read_all && c->filtering)) {
			c->phase2 = 1;
			if (!c->filtering) {
				c->remaining = 0;
				c->r->has_searched_through = 1;
				c->r->searched_through = c->units[u0].step;
			}
			rc = c->read_all ? ALIGN_OK : build_canon_json(c, NULL);
		}
	}
	return rc;
}

static int by_metric_name(const void *pa, const void *pb)
{
	return strcmp(((const struct report_metric *)pa)->name, ((const struct report_metric *)pb)->name);
}

/* Hand the names to the report: keep the metrics in scope, sorted by name. */
static void finish(struct rp_ctx *c)
{
	struct report *r = c->r;
	size_t k = 0;
	for (size_t i = 0; i < r->n_metrics; i++) {
		if (c->want[i]) {
			r->metrics[k++] = r->metrics[i];
		} else {
			free(r->metrics[i].name);
			free(r->metrics[i].points);
		}
	}
	r->n_metrics = k;
	qsort(r->metrics, r->n_metrics, sizeof *r->metrics, by_metric_name);
	free(c->names.s);
	free(c->names.slot);
	memset(&c->names, 0, sizeof c->names);
}

static void ctx_free(struct rp_ctx *c)
{
	if (c->names.s) { /* not handed over: an error happened */
		for (size_t i = c->r->n_metrics; i < c->names.n; i++)
			free(c->names.s[i]);
		free(c->names.s);
		free(c->names.slot);
	}
	rp_map_free(c);
	rp_scan_free(c);
	for (int i = 0; i < c->n_filter; i++)
		free(c->filter[i]);
	free(c->filter);
	free(c->want);
	free(c->units);
	free(c->unit_slot);
	for (size_t i = 0; i < c->n_sources; i++)
		free(c->sources[i].path);
	free(c->sources);
	free(c->canon_json);
}

static int setup(struct rp_ctx *c, const char *db_path)
{
	int rc;
	json_t *map_names = c->n_rules ? json_array() : NULL;
	if ((rc = choose_runs(c, db_path)) || (rc = resolve_filter(c)) ||
	    (rc = enumerate_canons(c, c->r->a.id, map_names)) || (rc = enumerate_canons(c, c->r->b.id, map_names)) ||
	    (!c->n_rules && (rc = check_filter(c))) ||
	    (c->r->scope == REPORT_SCOPE_NUMERICS && (rc = scope_numerics(c))) ||
	    (rc = build_canon_json(c, map_names)) || (rc = load_sources(c)) ||
	    (rc = load_units(c)) || (rc = rp_scan_prepare(c))) {
		json_decref(map_names);
		return rc;
	}
	json_decref(map_names);
	c->remaining = 0;
	for (size_t i = 0; i < c->r->n_metrics; i++)
		c->remaining += c->want[i];
	return ALIGN_OK;
}

int report_compute(sqlite3 *db, const struct report_opts *o, struct report *r)
{
	struct rp_ctx c = {.db = db, .o = o, .r = r};
	memset(r, 0, sizeof *r);
	r->limit = o->limit;
	r->first_diff_mode = o->first_diff;
	r->scope = o->n_metrics ? REPORT_SCOPE_METRICS : o->all || o->map_path ? REPORT_SCOPE_ALL : REPORT_SCOPE_NUMERICS;
	c.read_all = o->no_stepsum || o->map_path || o->series;
	r->fast_path = !c.read_all;
	/* Reading a step goes name by name through record_key, revisiting the step's table pages once per
	 * name: a page cache that holds a step's pages (64 MiB) saves re-reading them. */
	int rc = store_exec(db, "PRAGMA cache_size=-65536");
	if (rc == ALIGN_OK && o->limit > 0 && !(r->diffs = calloc((size_t)o->limit, sizeof *r->diffs)))
		rc = err_internal("out of memory");
	if (rc == ALIGN_OK && o->map_path)
		rc = rp_map_load(&c, o->map_path);
	if (rc == ALIGN_OK)
		rc = setup(&c, o->db_path ? o->db_path : "the database");
	if (rc == ALIGN_OK)
		rc = plan(&c);
	if (rc == ALIGN_OK)
		rc = walk(&c);
	if (rc == ALIGN_OK && c.n_rules)
		for (int i = 0; i < c.n_filter && rc == ALIGN_OK; i++) {
			size_t k = 0;
			while (k < r->n_metrics && strcmp(r->metrics[k].name, c.filter[i]))
				k++;
			if (k == r->n_metrics)
				rc = err_input("metric '%s' (canonical '%s') matches no record of run '%s' or '%s'", o->metrics[i],
				               c.filter[i], r->a.name, r->b.name);
		}
	if (rc == ALIGN_OK)
		finish(&c);
	ctx_free(&c);
	if (rc)
		report_free(r);
	return rc;
}

void report_free(struct report *r)
{
	free(r->a.name), free(r->a.framework), free(r->a.format);
	free(r->b.name), free(r->b.framework), free(r->b.format);
	for (size_t i = 0; i < r->n_metrics; i++)
		free(r->metrics[i].name), free(r->metrics[i].points);
	free(r->metrics);
	for (size_t i = 0; i < r->n_meta_left_out; i++)
		free(r->meta_left_out[i]);
	free(r->meta_left_out);
	struct report_item *items[3] = {r->first_diff, r->first_only_in, r->first_unproven};
	for (size_t i = 0; i < 3 + r->n_diffs; i++) {
		struct report_item *it = i < 3 ? items[i] : &r->diffs[i - 3];
		if (!it)
			continue;
		free(it->canon);
		struct report_side *s[2] = {&it->a, &it->b};
		for (int k = 0; k < 2; k++) {
			free(s[k]->name), free(s[k]->text), free(s[k]->dtype), free(s[k]->digest);
			free(s[k]->digest_alg), free(s[k]->missing), free(s[k]->file);
		}
	}
	free(r->first_diff);
	free(r->first_only_in);
	free(r->first_unproven);
	free(r->diffs);
	memset(r, 0, sizeof *r);
}

int report_exit_code(const struct report *r)
{
	for (int v = 0; v < VERDICT_COUNT; v++)
		if (verdict_is_difference((enum verdict)v) && r->totals.v[v])
			return ALIGN_DIFF;
	return r->first_diff || r->first_only_in ? ALIGN_DIFF : ALIGN_OK;
}
