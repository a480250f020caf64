/* report: the comparison of two runs (rules and fast path in report.h): choose the runs, load the
 * step summaries into (rank, step) units, decide which units must be read, count the others, and walk
 * the steps in execution order. Reading and judging one step is report-scan.c. */
#include "report-impl.h"

#include "err.h"
#include "names.h"
#include "store-report.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static int load_run(struct rp_ctx *c, const char *db_path, const char *name, int64_t id, struct report_run *out)
{
	struct store_run_row row;
	int found;
	ALIGN_TRY(c->e, store_report_run(c->db, name, id, &row, &found, c->e));
	if (!found) {
		char runs[1024];
		store_report_run_names(c->db, runs, sizeof runs);
		return fail_input(c->e, "no run '%s' in '%s' (runs: %s)", name ? name : "?", db_path, runs);
	}
	*out = (struct report_run){.id = row.id,
				   .name = row.name,
				   .framework = row.framework,
				   .format = row.format,
				   .records = row.records,
				   .resumed = row.resumed};
	int rc = rp_prov_load(out, row.header, c->e);
	free(row.header);
	return rc;
}

static int choose_runs(struct rp_ctx *c, const char *db_path)
{
	const struct report_opts *o = c->o;
	if (o->run_a) {
		ALIGN_TRY(c->e, load_run(c, db_path, o->run_a, 0, &c->r->a));
		return load_run(c, db_path, o->run_b, 0, &c->r->b);
	}
	int64_t ids[3];
	int n = 0;
	ALIGN_TRY(c->e, store_report_first_runs(c->db, ids, &n, c->e));
	if (n != 2) {
		char runs[1024];
		store_report_run_names(c->db, runs, sizeof runs);
		if (n == 0)
			return fail_input(c->e, "'%s' holds no runs: run 'align ingest' first", db_path);
		return fail_input(c->e, "'%s' holds %s runs (%s): name the two to compare with --runs A,B", db_path,
				  n == 1 ? "only one of the two" : "more than two", runs);
	}
	ALIGN_TRY(c->e, load_run(c, db_path, NULL, ids[0], &c->r->a));
	return load_run(c, db_path, NULL, ids[1], &c->r->b);
}

struct canon_sink {
	struct rp_ctx *c;
	json_t *sql_names; /* with a map: the built-in canons, for the SQL filter */
};

static int add_canon(void *u, const char *canon)
{
	struct canon_sink *s = u;
	if (s->sql_names)
		return json_array_append_new(s->sql_names, json_string(canon)) ? fail_internal(s->c->e, "out of memory")
									       : ALIGN_OK;
	if (rp_intern(s->c, canon) < 0)
		return fail_internal(s->c->e, "out of memory");
	return rp_metrics_sync(s->c);
}

/* Every distinct canon of a run, by index seeks on record_key (one per name). */
static int enumerate_canons(struct rp_ctx *c, int64_t run, json_t *sql_names)
{
	struct canon_sink s = {c, c->n_rules ? sql_names : NULL};
	return store_report_canons(c->db, run, add_canon, &s, c->e);
}

/* The canonical --metric names: the map first, else the built-in aliases. */
static int resolve_filter(struct rp_ctx *c)
{
	const struct report_opts *o = c->o;
	c->filtering = o->n_metrics > 0;
	if (!c->filtering)
		return ALIGN_OK;
	if (!(c->filter = calloc((size_t)o->n_metrics, sizeof *c->filter)))
		return fail_internal(c->e, "out of memory");
	for (int i = 0; i < o->n_metrics; i++) {
		char canon[256];
		names_canonical(o->metrics[i], canon, sizeof canon);
		if (!(c->filter[c->n_filter++] = strdup(rp_map_name(c, o->metrics[i], canon))))
			return fail_internal(c->e, "out of memory");
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
		return fail_input(c->e,
				  "metric '%s' (canonical '%s') is in neither run '%s' nor run '%s' (names: %s%s)",
				  c->o->metrics[i], c->filter[i], c->r->a.name, c->r->b.name, have,
				  n + 64 >= sizeof have ? ", ..." : "");
	}
	return ALIGN_OK;
}

static int by_str(const void *pa, const void *pb)
{
	return strcmp(*(char *const *)pa, *(char *const *)pb);
}

static int add_meta(void *u, const char *canon)
{
	struct rp_ctx *c = u;
	struct report *r = c->r;
	int32_t id = rp_intern(c, canon);
	if (id < 0)
		return fail_internal(c->e, "out of memory");
	ALIGN_TRY(c->e, rp_metrics_sync(c));
	char **grown = realloc(r->meta_left_out, (r->n_meta_left_out + 1) * sizeof *grown);
	if (!grown)
		return fail_internal(c->e, "out of memory");
	r->meta_left_out = grown;
	if (!(grown[r->n_meta_left_out] = strdup(canon)))
		return fail_internal(c->e, "out of memory");
	r->n_meta_left_out++;
	c->want[id] = 0;
	return ALIGN_OK;
}

/* The numerics scope (report.h): leave out the names either run holds meta records of, and follow the
 * others as --metric names (filtering with want set directly; filter stays empty). Without meta names
 * nothing changes. */
static int scope_numerics(struct rp_ctx *c)
{
	struct report *r = c->r;
	ALIGN_TRY(c->e, store_report_meta_canons(c->db, r->a.id, r->b.id, add_meta, c, c->e));
	if (r->n_meta_left_out) {
		c->filtering = 1;
		qsort(r->meta_left_out, r->n_meta_left_out, sizeof *r->meta_left_out, by_str);
	}
	return ALIGN_OK;
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
	return c->canon_json ? ALIGN_OK : fail_internal(c->e, "out of memory");
}

static int add_source(void *u, int64_t id, const char *path)
{
	struct rp_ctx *c = u;
	struct rp_source *grown = realloc(c->sources, (c->n_sources + 1) * sizeof *grown);
	if (!grown)
		return fail_internal(c->e, "out of memory");
	c->sources = grown;
	c->sources[c->n_sources] = (struct rp_source){id, strdup(path)};
	if (!c->sources[c->n_sources++].path)
		return fail_internal(c->e, "out of memory");
	return ALIGN_OK;
}

static int load_sources(struct rp_ctx *c)
{
	return store_report_sources(c->db, c->r->a.id, c->r->b.id, add_source, c, c->e);
}

static int by_step_rank(const void *pa, const void *pb)
{
	const struct rp_unit *a = pa, *b = pb;
	return a->step != b->step ? (a->step < b->step ? -1 : 1) : (a->rank > b->rank) - (a->rank < b->rank);
}

/* The merge of both runs' stepsum rows into units (load_units). */
struct unit_merge {
	struct rp_ctx *c;
	size_t cap; /* of c->units */
	size_t n_a; /* units made from run A's rows */
	size_t at;  /* merge cursor over them */
	int in_b;   /* run B's rows have begun */
};

static int unit_add(struct unit_merge *m, int side, const struct store_stepsum_row *row)
{
	struct rp_ctx *c = m->c;
	if (c->n_units == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 1024;
		struct rp_unit *grown = realloc(c->units, m->cap * sizeof *grown);
		if (!grown)
			return fail_internal(c->e, "out of memory");
		c->units = grown;
	}
	struct rp_unit *u = &c->units[c->n_units++];
	memset(u, 0, sizeof *u);
	u->rank = row->rank;
	u->step = row->step;
	u->in[side] = 1;
	u->n[side] = row->n;
	u->nx[side] = row->n_exact;
	u->h[side] = row->h;
	return ALIGN_OK;
}

/* One stepsum row: run A's rows (side 0) make units; run B's rows (side 1, sorted by step, rank like
 * A's) join A's unit of the same (rank, step), else make their own. */
static int unit_merge_row(void *u, int side, const struct store_stepsum_row *row)
{
	struct unit_merge *m = u;
	if (!side)
		return unit_add(m, 0, row);
	if (!m->in_b)
		m->in_b = 1, m->n_a = m->c->n_units;
	struct rp_unit key = {.rank = row->rank, .step = row->step}, *units = m->c->units;
	while (m->at < m->n_a && by_step_rank(&units[m->at], &key) < 0)
		m->at++;
	if (m->at < m->n_a && !by_step_rank(&units[m->at], &key)) {
		struct rp_unit *a = &units[m->at];
		a->in[1] = 1, a->n[1] = row->n, a->nx[1] = row->n_exact, a->h[1] = row->h;
		return ALIGN_OK;
	}
	return unit_add(m, 1, row);
}

static size_t unit_hash(const struct rp_ctx *c, int64_t rank, int64_t step)
{
	uint64_t h = ((uint64_t)rank * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)step * 0xc2b2ae3d27d4eb4full);
	return (h ^ (h >> 29)) & (c->unit_slot_cap - 1);
}

/* Merge both runs' stepsum rows (sorted by step, rank) into units; same = equal summaries. */
static int load_units(struct rp_ctx *c)
{
	struct unit_merge m = {.c = c};
	ALIGN_TRY(c->e, store_report_stepsums(c->db, c->r->a.id, c->r->b.id, unit_merge_row, &m, c->e));
	if (c->n_units > 1) /* units is NULL when no stepsum row: never NULL to qsort */
		qsort(c->units, c->n_units, sizeof *c->units, by_step_rank);
	c->unit_slot_cap = 64;
	while (c->unit_slot_cap < 2 * c->n_units)
		c->unit_slot_cap *= 2;
	if (!(c->unit_slot = calloc(c->unit_slot_cap, sizeof *c->unit_slot)))
		return fail_internal(c->e, "out of memory");
	for (size_t k = 0; k < c->n_units; k++) {
		struct rp_unit *u = &c->units[k];
		u->same = !c->read_all && u->in[0] && u->in[1] && u->n[0] == u->n[1] && u->nx[0] == u->nx[1] &&
			  u->h[0] == u->h[1];
		u->read = !u->same;
		u->sn[0] = u->n[0], u->snx[0] = u->nx[0], u->sn[1] = u->n[1], u->snx[1] = u->nx[1];
		size_t j = unit_hash(c, u->rank, u->step);
		while (c->unit_slot[j])
			j = (j + 1) & (c->unit_slot_cap - 1);
		c->unit_slot[j] = (int32_t)k + 1;
	}
	return ALIGN_OK;
}

struct rp_unit *rp_unit_find(const struct rp_ctx *c, int64_t rank, int64_t step)
{
	for (size_t j = unit_hash(c, rank, step); c->unit_slot[j]; j = (j + 1) & (c->unit_slot_cap - 1))
		if (c->units[c->unit_slot[j] - 1].rank == rank && c->units[c->unit_slot[j] - 1].step == step)
			return &c->units[c->unit_slot[j] - 1];
	return NULL;
}

/* Per-name counts of one run's units, one grouped query (with --metric, only those names). On a run
 * that was not resumed it is index-only (record_key): the exact/printed split of a skipped unit then
 * follows from its summary when the unit is all exact or all printed (plan() reads mixed units
 * instead). A resumed run needs the table (superseded rows), which also gives the split. Fills the
 * scope counts sn/snx; for run A also the metrics' counts of skipped units. */
struct count_sink {
	struct rp_ctx *c;
	int side;
};

static int add_count(void *u, const struct store_canon_count *row)
{
	struct count_sink *s = u;
	struct rp_ctx *c = s->c;
	int side = s->side;
	struct rp_unit *unit = rp_unit_find(c, row->rank, row->step);
	if (!unit)
		return ALIGN_OK; /* no summary: not in any unit (cannot happen for ingested runs) */
	int64_t n = row->n;
	int64_t nx = row->has_exact ? row->n_exact : (unit->nx[side] == unit->n[side] ? n : 0);
	if (c->filtering)
		unit->sn[side] += n, unit->snx[side] += nx;
	if (side == 0 && unit->same && !unit->read) {
		int32_t id = rp_intern(c, row->canon);
		if (id < 0)
			return fail_internal(c->e, "out of memory");
		ALIGN_TRY(c->e, rp_metrics_sync(c));
		unit->metrics_counted = 1;
		c->r->metrics[id].c.v[VERDICT_BITWISE_EQUAL] += nx;
		c->r->metrics[id].c.v[VERDICT_EQUAL_AS_PRINTED] += n - nx;
	}
	return ALIGN_OK;
}

/* Per-name counts of one run's units, one grouped query (with --metric, only those names). On a run
 * that was not resumed it is index-only (record_key): the exact/printed split of a skipped unit then
 * follows from its summary when the unit is all exact or all printed (plan() reads mixed units
 * instead). A resumed run needs the table (superseded rows), which also gives the split. Fills the
 * scope counts sn/snx; for run A also the metrics' counts of skipped units. */
static int canon_counts(struct rp_ctx *c, int side)
{
	const struct report_run *run = side ? &c->r->b : &c->r->a;
	struct count_sink s = {c, side};
	if (c->filtering)
		for (size_t k = 0; k < c->n_units; k++)
			c->units[k].sn[side] = c->units[k].snx[side] = 0;
	return store_report_canon_counts(c->db, run->id, run->resumed, c->filtering ? c->canon_json : NULL, add_count,
					 &s, c->e);
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
		if (rc == ALIGN_OK && c->o->first_diff && !c->phase2 && c->r->first_diff &&
		    !(c->read_all && c->filtering)) {
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
	if (r->n_metrics > 1) /* metrics is NULL when no name: never NULL to qsort */
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
	    (rc = build_canon_json(c, map_names)) || (rc = load_sources(c)) || (rc = load_units(c)) ||
	    (rc = rp_scan_prepare(c))) {
		json_decref(map_names);
		return rc;
	}
	json_decref(map_names);
	c->remaining = 0;
	for (size_t i = 0; i < c->r->n_metrics; i++)
		c->remaining += c->want[i];
	return ALIGN_OK;
}

int report_compute(sqlite3 *db, const struct report_opts *o, struct report *r, struct align_err *e)
{
	struct rp_ctx c = {.db = db, .o = o, .r = r, .e = e};
	memset(r, 0, sizeof *r);
	r->limit = o->limit;
	r->first_diff_mode = o->first_diff;
	r->scope = o->n_metrics		   ? REPORT_SCOPE_METRICS
		   : o->all || o->map_path ? REPORT_SCOPE_ALL
					   : REPORT_SCOPE_NUMERICS;
	c.read_all = o->no_stepsum || o->map_path || o->series;
	r->fast_path = !c.read_all;
	/* Reading a step goes name by name through record_key, revisiting the step's table pages once per
	 * name: a page cache that holds a step's pages (64 MiB) saves re-reading them. */
	int rc = store_report_cache_size(db, e);
	if (rc == ALIGN_OK && o->limit > 0 && !(r->diffs = calloc((size_t)o->limit, sizeof *r->diffs)))
		rc = fail_internal(e, "out of memory");
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
				rc = fail_input(e, "metric '%s' (canonical '%s') matches no record of run '%s' or '%s'",
						o->metrics[i], c.filter[i], r->a.name, r->b.name);
		}
	if (rc == ALIGN_OK) {
		rp_root_cause_finish(&c);
		finish(&c);
	}
	ctx_free(&c);
	if (rc)
		report_free(r);
	return rc;
}

void report_free(struct report *r)
{
	free(r->a.name), free(r->a.framework), free(r->a.format);
	free(r->b.name), free(r->b.framework), free(r->b.format);
	json_decref(r->a.prov), json_decref(r->b.prov);
	for (size_t i = 0; i < r->n_metrics; i++)
		free(r->metrics[i].name), free(r->metrics[i].points);
	free(r->metrics);
	for (size_t i = 0; i < r->n_meta_left_out; i++)
		free(r->meta_left_out[i]);
	free(r->meta_left_out);
	struct report_item *items[4] = {r->first_diff, r->first_only_in, r->first_unproven, r->root_cause};
	for (size_t i = 0; i < 4 + r->n_diffs; i++) {
		struct report_item *it = i < 4 ? items[i] : &r->diffs[i - 4];
		if (!it)
			continue;
		free(it->canon), free(it->elements);
		struct report_side *s[2] = {&it->a, &it->b};
		for (int k = 0; k < 2; k++) {
			free(s[k]->name), free(s[k]->text), free(s[k]->dtype), free(s[k]->digest);
			free(s[k]->digest_alg), free(s[k]->missing), free(s[k]->file);
			free(s[k]->call), free(s[k]->io);
		}
	}
	free(r->first_diff);
	free(r->first_only_in);
	free(r->first_unproven);
	free(r->root_cause);
	free(r->diffs);
	for (size_t i = 0; i < r->n_only_in; i++)
		free(r->only_in[i].canon);
	free(r->only_in);
	memset(r, 0, sizeof *r);
}

int report_exit_code(const struct report *r)
{
	for (int v = 0; v < VERDICT_COUNT; v++)
		if (verdict_is_difference((enum verdict)v) && r->totals.v[v])
			return ALIGN_DIFF;
	return r->first_diff || r->first_only_in ? ALIGN_DIFF : ALIGN_OK;
}
