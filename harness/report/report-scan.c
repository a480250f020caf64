/* report-scan: one step of both runs: read the records of the units to read (one prepared statement,
 * an index lookup per (name, rank) through record_key), pair them by (canon, rank, micro, occ),
 * order the pairs by execution order (report.h) and judge each pair. Rows and their strings live in
 * buffers reused from step to step: no allocation per record. */
#include "report-impl.h"

#include "err.h"
#include "numtext.h"
#include "store-report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int rp_scan_prepare(struct rp_ctx *c)
{
	return store_report_reader_open(c->db, &c->read_q, c->e);
}

void rp_scan_free(struct rp_ctx *c)
{
	store_report_reader_close(c->read_q);
	free(c->arena);
	free(c->rows[0]);
	free(c->rows[1]);
	free(c->pairs);
	free(c->only_group[0]);
	free(c->only_group[1]);
	free(c->inputs);
}

const char *rp_source_path(const struct rp_ctx *c, int64_t id)
{
	size_t lo = 0, hi = c->n_sources;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->sources[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->n_sources && c->sources[lo].id == id ? c->sources[lo].path : "?";
}

/* Copy a string into the arena; returns its offset (0 for NULL). */
static size_t keep(struct rp_ctx *c, const char *s)
{
	if (!s)
		return 0;
	size_t n = strlen(s) + 1;
	if (c->arena_len + n > c->arena_cap) {
		size_t cap = c->arena_cap ? 2 * c->arena_cap : 1 << 16;
		while (cap < c->arena_len + n)
			cap *= 2;
		char *grown = realloc(c->arena, cap);
		if (!grown) {
			c->oom = 1;
			return 0;
		}
		c->arena = grown;
		c->arena_cap = cap;
	}
	if (!c->arena_len)
		c->arena[c->arena_len++] = '\0'; /* offset 0 stays the NULL marker */
	size_t at = c->arena_len;
	memcpy(c->arena + at, s, n);
	c->arena_len += n;
	return at;
}

static const char *str(const struct rp_ctx *c, size_t off)
{
	return off ? c->arena + off : NULL;
}

const char *rp_str(const struct rp_ctx *c, size_t off)
{
	return str(c, off);
}

/* The input/output link of a row (kept only when both call and io are set). */
static void row_link(struct rp_ctx *c, const struct store_record_row *q, struct rp_row *w)
{
	int linked = q->call && q->io;
	w->call = linked ? keep(c, q->call) : 0;
	w->io = linked ? keep(c, q->io) : 0;
	c->step_links |= linked;
}

static void row_value(struct rp_ctx *c, const struct store_record_row *q, struct rp_row *w)
{
	w->has_bits = q->has_bits;
	w->bits = q->bits;
	w->has_value = q->has_value;
	w->value = q->value;
	w->digits = q->digits;
	w->has_interval = q->has_interval;
	w->lo = q->lo;
	w->hi = q->hi;
	w->is_nan = 0;
	double v;
	if (w->has_bits && compare_bits_to_double(str(c, w->dtype), w->bits, &v))
		w->is_nan = isnan(v);
	else if (!w->has_bits && !w->has_value && w->text) {
		struct numtext nt; /* a NaN print keeps no value: recognise it from the text */
		const char *t = str(c, w->text);
		w->is_nan = !numtext_parse(t, strlen(t), PREC_EXACT, 0, &nt) && nt.special == 1;
	}
}

/* What read_side's rows go to. */
struct side_sink {
	struct rp_ctx *c;
	int side;
	int64_t step;
};

static int add_row(void *u, const struct store_record_row *q)
{
	struct side_sink *s = u;
	struct rp_ctx *c = s->c;
	int side = s->side;
	int32_t id = rp_intern(c, c->n_rules ? rp_map_name(c, q->name, q->canon) : q->canon);
	if (id < 0)
		return fail_internal(c->e, "out of memory");
	if (id >= (int32_t)c->r->n_metrics)
		ALIGN_TRY(c->e, rp_metrics_sync(c));
	if (!c->want[id] || (c->phase2 && c->r->metrics[id].has_first_diff))
		return ALIGN_OK;
	if (c->n_rows[side] == c->cap_rows[side]) {
		size_t cap = c->cap_rows[side] ? 2 * c->cap_rows[side] : 4096;
		struct rp_row *grown = realloc(c->rows[side], cap * sizeof *grown);
		if (!grown)
			return fail_internal(c->e, "out of memory");
		c->rows[side] = grown, c->cap_rows[side] = cap;
	}
	struct rp_row *w = &c->rows[side][c->n_rows[side]++];
	w->canon = id;
	w->rank = q->rank;
	w->micro = q->micro;
	w->seq = q->seq;
	w->occ = q->occ;
	w->line = q->line;
	w->source = (int32_t)q->source_id;
	w->name = keep(c, q->name), w->dtype = keep(c, q->dtype), w->text = keep(c, q->text);
	w->digest = keep(c, q->digest), w->digest_alg = keep(c, q->digest_alg), w->missing = keep(c, q->missing);
	row_link(c, q, w);
	w->stats = keep(c, q->stats), w->head = keep(c, q->head), w->id = q->id;
	if (c->oom)
		return fail_internal(c->e, "out of memory");
	row_value(c, q, w);
	w->unit = rp_unit_find(c, w->rank, s->step);
	if (w->unit)
		w->unit->nread[side]++;
	return ALIGN_OK;
}

static int read_side(struct rp_ctx *c, int side, int64_t step, const char *ranks_json)
{
	struct side_sink s = {c, side, step};
	return store_report_read_step(c->read_q, side ? c->r->b.id : c->r->a.id, step, ranks_json, c->canon_json,
				      add_row, &s, c->e);
}

#define CMP(x, y) ((x) < (y) ? -1 : (x) > (y))

static int by_key(const void *pa, const void *pb)
{
	const struct rp_row *a = pa, *b = pb;
	int d = CMP(a->canon, b->canon);
	d = d ? d : CMP(a->rank, b->rank);
	d = d ? d : CMP(a->micro, b->micro);
	return d ? d : CMP(a->occ, b->occ);
}

static int by_key_seq(const void *pa, const void *pb)
{
	const struct rp_row *a = pa, *b = pb;
	int d = CMP(a->canon, b->canon);
	d = d ? d : CMP(a->rank, b->rank);
	d = d ? d : CMP(a->micro, b->micro);
	return d ? d : CMP(a->seq, b->seq);
}

/* A run's own order within a step: (rank, micro, seq). */
static int by_run_order(const void *pa, const void *pb)
{
	const struct rp_row *a = pa, *b = pb;
	int d = CMP(a->rank, b->rank);
	d = d ? d : CMP(a->micro, b->micro);
	return d ? d : CMP(a->seq, b->seq);
}

/* Execution order of the pairs (report.h): symmetric in the two runs. */
static int by_exec(const void *pa, const void *pb)
{
	const struct rp_pair *a = pa, *b = pb;
	int d = CMP(a->micro, b->micro);
	d = d ? d : CMP(a->pos_hi, b->pos_hi);
	d = d ? d : CMP(a->pos_lo, b->pos_lo);
	d = d ? d : CMP(a->seq_hi, b->seq_hi);
	d = d ? d : CMP(a->seq_lo, b->seq_lo);
	d = d ? d : CMP(a->rank, b->rank);
	d = d ? d : strcmp(a->canon, b->canon);
	return d ? d : CMP(a->occ, b->occ);
}

/* Each row's position: its ordinal among the side's rows of its (rank, micro) in seq order. A unit
 * (rank, step) is read whole or not at all, so positions do not depend on which units were read. */
static void number_side(struct rp_ctx *c, int side)
{
	struct rp_row *w = c->rows[side];
	size_t n = c->n_rows[side];
	if (!n)
		return; /* w is NULL: never NULL to qsort */
	qsort(w, n, sizeof *w, by_run_order);
	for (size_t i = 0; i < n; i++) {
		int same = i && w[i].rank == w[i - 1].rank && w[i].micro == w[i - 1].micro;
		w[i].pos = same ? w[i - 1].pos + 1 : 0;
	}
}

/* Sort a side by key; with a map the names changed, so occurrences are recounted in seq order. */
static void order_side(struct rp_ctx *c, int side)
{
	struct rp_row *w = c->rows[side];
	size_t n = c->n_rows[side];
	if (!n)
		return; /* w is NULL: never NULL to qsort */
	number_side(c, side);
	if (!c->n_rules) {
		qsort(w, n, sizeof *w, by_key);
		return;
	}
	qsort(w, n, sizeof *w, by_key_seq);
	for (size_t i = 0; i < n; i++) {
		int same_key =
			i && w[i].canon == w[i - 1].canon && w[i].rank == w[i - 1].rank && w[i].micro == w[i - 1].micro;
		w[i].occ = same_key ? w[i - 1].occ + 1 : 0;
	}
}

static int add_pair(struct rp_ctx *c, int32_t ia, int32_t ib)
{
	if (c->n_pairs == c->cap_pairs) {
		size_t cap = c->cap_pairs ? 2 * c->cap_pairs : 4096;
		struct rp_pair *grown = realloc(c->pairs, cap * sizeof *grown);
		if (!grown)
			return fail_internal(c->e, "out of memory");
		c->pairs = grown, c->cap_pairs = cap;
	}
	const struct rp_row *w = ia >= 0 ? &c->rows[0][ia] : &c->rows[1][ib];
	const struct rp_row *v = ib >= 0 ? &c->rows[1][ib] : w; /* the other side, or w itself */
	c->pairs[c->n_pairs++] = (struct rp_pair){.ia = ia,
						  .ib = ib,
						  .micro = w->micro,
						  .seq = w->seq,
						  .rank = w->rank,
						  .side = ia >= 0 ? 0 : 1,
						  .pos_hi = w->pos > v->pos ? w->pos : v->pos,
						  .pos_lo = w->pos < v->pos ? w->pos : v->pos,
						  .seq_hi = w->seq > v->seq ? w->seq : v->seq,
						  .seq_lo = w->seq < v->seq ? w->seq : v->seq,
						  .occ = w->occ,
						  .canon = c->names.s[w->canon]};
	return ALIGN_OK;
}

static int match(struct rp_ctx *c)
{
	size_t i = 0, j = 0, na = c->n_rows[0], nb = c->n_rows[1];
	int rc = ALIGN_OK;
	c->n_pairs = 0;
	while (rc == ALIGN_OK && (i < na || j < nb)) {
		int d = i == na ? 1 : j == nb ? -1 : by_key(&c->rows[0][i], &c->rows[1][j]);
		if (d == 0)
			rc = add_pair(c, (int32_t)i++, (int32_t)j++);
		else if (d < 0)
			rc = add_pair(c, (int32_t)i++, -1);
		else
			rc = add_pair(c, -1, (int32_t)j++);
	}
	if (c->n_pairs > 1) /* pairs is NULL when both sides are empty: never NULL to qsort */
		qsort(c->pairs, c->n_pairs, sizeof *c->pairs, by_exec);
	return rc;
}

static void to_value(const struct rp_ctx *c, const struct rp_row *w, struct cmp_value *v)
{
	*v = (struct cmp_value){
		.dtype = str(c, w->dtype),
		.has_bits = w->has_bits,
		.bits = w->bits,
		.has_value = w->has_value,
		.value = w->value,
		.has_interval = w->has_interval,
		.lo = w->lo,
		.hi = w->hi,
		.digits = w->digits,
		.is_nan = w->is_nan,
		.text = str(c, w->text),
		.digest = str(c, w->digest),
		.digest_alg = str(c, w->digest_alg),
		.missing = str(c, w->missing),
		.stats = str(c, w->stats),
		.head = str(c, w->head),
	};
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void side_of(const struct rp_ctx *c, const struct rp_row *w, struct report_side *s)
{
	memset(s, 0, sizeof *s);
	if (!w)
		return;
	s->present = 1;
	s->name = dup_or_null(str(c, w->name));
	s->text = dup_or_null(str(c, w->text));
	s->dtype = dup_or_null(str(c, w->dtype));
	s->digest = dup_or_null(str(c, w->digest));
	s->digest_alg = dup_or_null(str(c, w->digest_alg));
	s->missing = dup_or_null(str(c, w->missing));
	s->file = dup_or_null(rp_source_path(c, w->source));
	s->has_bits = w->has_bits, s->bits = w->bits, s->digits = w->text ? w->digits : 0;
	s->line = w->line, s->micro = w->micro, s->seq = w->seq, s->id = w->id;
	s->pos = w->pos;
	s->call = dup_or_null(str(c, w->call));
	s->io = dup_or_null(str(c, w->io));
}

static void make_item(const struct rp_ctx *c, const struct rp_pair *p, int64_t step, const struct cmp_result *res,
		      struct report_item *it)
{
	const struct rp_row *a = p->ia >= 0 ? &c->rows[0][p->ia] : NULL, *b = p->ib >= 0 ? &c->rows[1][p->ib] : NULL;
	it->step = step, it->micro = p->micro, it->rank = p->rank;
	it->canon = strdup(c->names.s[(a ? a : b)->canon]);
	it->cmp = *res;
	side_of(c, a, &it->a);
	side_of(c, b, &it->b);
}

static struct report_item *new_item(void)
{
	return calloc(1, sizeof(struct report_item));
}

void rp_count(struct rp_ctx *c, int32_t canon, enum verdict v, int64_t n)
{
	c->r->totals.v[v] += n;
	if (canon >= 0)
		c->r->metrics[canon].c.v[v] += n;
	c->step_records += n;
	if (v != VERDICT_BITWISE_EQUAL && n)
		c->step_all_exact = 0;
}

/* The exact value of a row, else its printed value: 1, or 0 when it has none. */
static int row_number(const struct rp_ctx *c, const struct rp_row *w, double *v)
{
	if (w->has_bits && compare_bits_to_double(str(c, w->dtype), w->bits, v))
		return 1;
	*v = w->value;
	return w->has_value;
}

/* A record known by its digest only (a tensor): no value to chart. */
static int digest_only(const struct rp_row *w)
{
	return w && w->digest && !w->has_bits && !w->has_value && !w->text;
}

/* opts.series: fold a judged pair of scalar records into its metric's point of this step (steps come
 * in increasing order). Records known by a digest only are not charted. */
static int add_point(struct rp_ctx *c, struct report_metric *m, const struct rp_row *a, const struct rp_row *b,
		     enum verdict v, int64_t step)
{
	if (digest_only(a) || digest_only(b))
		return ALIGN_OK;
	if (!m->n_points || m->points[m->n_points - 1].step != step) {
		if (m->n_points == m->cap_points) {
			size_t cap = m->cap_points ? 2 * m->cap_points : 64;
			struct report_point *grown = realloc(m->points, cap * sizeof *grown);
			if (!grown)
				return fail_internal(c->e, "out of memory");
			m->points = grown, m->cap_points = cap;
		}
		m->points[m->n_points++] = (struct report_point){.step = step};
	}
	struct report_point *pt = &m->points[m->n_points - 1];
	pt->verdicts |= 1u << v;
	double x, y;
	if (v == VERDICT_DIFFER && a && b && row_number(c, a, &x) && row_number(c, b, &y) && x != 0 && isfinite(x) &&
	    isfinite(y)) {
		double rel = fabs(x - y) / fabs(x);
		if (!pt->has_rel || rel > pt->rel)
			pt->has_rel = 1, pt->rel = rel;
	}
	return ALIGN_OK;
}

void rp_pair_result(const struct rp_ctx *c, const struct rp_pair *p, struct cmp_result *res)
{
	const struct rp_row *a = p->ia >= 0 ? &c->rows[0][p->ia] : NULL, *b = p->ib >= 0 ? &c->rows[1][p->ib] : NULL;
	if (a && b) {
		struct cmp_value va, vb;
		to_value(c, a, &va);
		to_value(c, b, &vb);
		compare_values(&va, &vb, res);
	} else {
		memset(res, 0, sizeof *res);
		res->verdict = a ? VERDICT_ONLY_A : VERDICT_ONLY_B;
		snprintf(res->reason, sizeof res->reason, "only in run '%s'", a ? c->r->a.name : c->r->b.name);
	}
}

struct report_item *rp_pair_item(const struct rp_ctx *c, const struct rp_pair *p, int64_t step)
{
	struct report_item *it = new_item();
	if (it) {
		struct cmp_result res;
		rp_pair_result(c, p, &res);
		make_item(c, p, step, &res, it);
	}
	return it;
}

/* Fold an only-in record into its (name, run) group. */
static int add_only_in(struct rp_ctx *c, int32_t canon, int side, int64_t step)
{
	struct report *r = c->r;
	if ((size_t)canon >= c->only_group_cap) {
		size_t cap = c->only_group_cap ? c->only_group_cap : 64;
		while (cap <= (size_t)canon)
			cap *= 2;
		for (int s = 0; s < 2; s++) {
			int32_t *grown = realloc(c->only_group[s], cap * sizeof *grown);
			if (!grown)
				return fail_internal(c->e, "out of memory");
			memset(grown + c->only_group_cap, 0, (cap - c->only_group_cap) * sizeof *grown);
			c->only_group[s] = grown;
		}
		c->only_group_cap = cap;
	}
	int32_t g = c->only_group[side][canon];
	if (!g) {
		struct report_only_in *grown = realloc(r->only_in, (r->n_only_in + 1) * sizeof *grown);
		if (!grown)
			return fail_internal(c->e, "out of memory");
		r->only_in = grown;
		grown[r->n_only_in] = (struct report_only_in){
			.canon = strdup(c->names.s[canon]), .side = side, .first_step = step, .last_step = step};
		if (!grown[r->n_only_in++].canon)
			return fail_internal(c->e, "out of memory");
		g = c->only_group[side][canon] = (int32_t)r->n_only_in;
	}
	struct report_only_in *o = &r->only_in[g - 1];
	o->count++;
	o->last_step = step; /* steps come in increasing order */
	return ALIGN_OK;
}

static int judge(struct rp_ctx *c, struct rp_pair *p, int64_t step)
{
	struct report *r = c->r;
	struct cmp_result res;
	const struct rp_row *a = p->ia >= 0 ? &c->rows[0][p->ia] : NULL, *b = p->ib >= 0 ? &c->rows[1][p->ib] : NULL;
	rp_pair_result(c, p, &res);
	p->verdict = res.verdict;
	int32_t canon = (a ? a : b)->canon;
	const struct rp_unit *u = (a ? a : b)->unit;
	rp_count(c, u && u->metrics_counted ? -1 : canon, res.verdict, 1); /* a skipped unit read for first_unproven */
	struct report_metric *m = &r->metrics[canon];
	int rc;
	if (c->o->series && (rc = add_point(c, m, a, b, res.verdict, step)))
		return rc;
	if (verdict_is_difference(res.verdict)) {
		/* a name (key) one run lacks is a difference, but not the first divergent value. --first-diff
		 * looks for it through first_diff's step only: past it some names are not read, and an earlier
		 * only-in record may be among them */
		int only = res.verdict == VERDICT_ONLY_A || res.verdict == VERDICT_ONLY_B;
		struct report_item **first = only ? &r->first_only_in : &r->first_diff;
		int past = c->o->first_diff && r->first_diff && step > c->first_diff_step;
		if (!*first && !(only && past)) {
			if (!(*first = new_item()))
				return fail_internal(c->e, "out of memory");
			make_item(c, p, step, &res, *first);
			if (!only)
				c->first_diff_step = step;
		}
		if (!c->phase2) { /* the list: value differences; only-in records are grouped by name */
			r->n_diff_total++;
			if (only && (rc = add_only_in(c, canon, a ? 0 : 1, step)))
				return rc;
			if (!only && (long)r->n_diffs < r->limit)
				make_item(c, p, step, &res, &r->diffs[r->n_diffs++]);
			r->n_value_diffs += !only;
		}
		if (!m->has_first_diff) {
			m->has_first_diff = 1;
			m->first_diff_step = step;
			c->remaining--;
		}
	} else if (res.verdict == VERDICT_EQUAL_AS_PRINTED && !r->first_unproven && !r->first_diff) {
		if (!(r->first_unproven = new_item()))
			return fail_internal(c->e, "out of memory");
		make_item(c, p, step, &res, r->first_unproven);
	}
	return ALIGN_OK;
}

static int ranks_json(const struct rp_ctx *c, size_t u0, size_t u1, char **out)
{
	size_t cap = 2 + 22 * (u1 - u0), n = 0;
	char *s = malloc(cap);
	if (!s)
		return fail_internal(c->e, "out of memory");
	s[n++] = '[';
	for (size_t u = u0; u < u1; u++)
		if (c->units[u].read)
			n += (size_t)snprintf(s + n, cap - n, "%s%lld", n > 1 ? "," : "", (long long)c->units[u].rank);
	s[n++] = ']';
	s[n] = '\0';
	*out = s;
	return ALIGN_OK;
}

int rp_scan_step(struct rp_ctx *c, size_t u0, size_t u1)
{
	char *ranks = NULL;
	int rc = ranks_json(c, u0, u1, &ranks);
	if (rc)
		return rc;
	int64_t step = c->units[u0].step;
	c->arena_len = 0;
	c->n_rows[0] = c->n_rows[1] = 0;
	c->step_links = 0;
	if ((rc = read_side(c, 0, step, ranks)) || (rc = read_side(c, 1, step, ranks))) {
		free(ranks);
		return rc;
	}
	free(ranks);
	order_side(c, 0);
	order_side(c, 1);
	if ((rc = match(c)))
		return rc;
	for (size_t i = 0; i < c->n_pairs && rc == ALIGN_OK; i++)
		rc = judge(c, &c->pairs[i], step);
	if (c->step_links)
		c->r->has_links = 1;
	if (rc == ALIGN_OK && c->step_links && !c->phase2 && !c->r->root_cause)
		rc = rp_root_cause_step(c, step);
	return rc;
}
