/* explain-out: what `align explain` prints (explain.h), as text (default), json (stable; documented in
 * README "Explain") or md. The text never shows timings or -j, so that the same question gives the same
 * text (the README example is checked against it); json carries them under "search". For the closest
 * assignments the C twin is replayed once more and each observed output compared element by element
 * (report-elements.h: differing elements, max ULP, the first differing element with both values). */
#include "ctx.h"
#include "err.h"
#include "explain.h"
#include "report-elements.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *dt_name(int dt)
{
	return dt == ALIGN_DT_BF16 ? "bf16" : dt == ALIGN_DT_I32 ? "int32" : dt == ALIGN_DT_F16 ? "fp16" : "fp32";
}

static void dims_text(const struct align_dims *d, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int k = 0; k < ALIGN_DIM_COUNT && used < len; k++)
		if (d->v[k])
			used += (size_t)snprintf(buf + used, len - used, "%s%c=%lld", used ? "," : "",
						 ALIGN_DIM_LETTERS[k], (long long)d->v[k]);
}

static void shape_text(const struct align_tensor *t, char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "%s[", dt_name(t->dtype));
	for (int i = 0; i < t->ndim && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "", (long long)t->shape[i]);
	if (used < len)
		snprintf(buf + used, len - used, "]");
}

/* "v1|v2" of the values in set (value bits) of switch id */
static void set_text(int id, uint32_t set, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int v = 0; v < modes_value_count(id) && used < len; v++)
		if (set >> v & 1)
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "|" : "",
						 modes_value_name(id, v));
}

static uint32_t domain_bits(const struct ex_space *sp, int i)
{
	uint32_t b = 0;
	for (int k = 0; k < sp->n_val[i]; k++)
		b |= 1u << sp->val[i][k];
	return b;
}

/* "ALIGN_X=a ALIGN_Y=b|c" of the switches of d that matter; *any_text: the others */
static void desc_text(const struct ex_space *sp, const struct ex_desc *d, char *set, size_t slen, char *any,
		      size_t alen)
{
	size_t su = 0, au = 0;
	set[0] = any[0] = '\0';
	for (int i = 0; i < sp->n_sw; i++) {
		const char *env = modes_info(sp->sw[i])->env;
		if (d->set[i] == domain_bits(sp, i) && sp->n_val[i] > 1) {
			if (au < alen)
				au += (size_t)snprintf(any + au, alen - au, "%s%s", au ? " " : "", env);
			continue;
		}
		char v[256];
		set_text(sp->sw[i], d->set[i], v, sizeof v);
		if (su < slen)
			su += (size_t)snprintf(set + su, slen - su, "%s%s=%s", su ? " " : "", env, v);
	}
}

static void assignment_text(const struct ex_space *sp, uint64_t a, char *buf, size_t len)
{
	struct align_modes m;
	ex_space_modes(sp, a, &m);
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < sp->n_sw && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s=%s", i ? " " : "", modes_info(sp->sw[i])->env,
					 modes_value_name(sp->sw[i], m.v[sp->sw[i]]));
}

/* element comparison of closest assignment a, per observed output, into el[k] */
static int close_elements(struct ex_search *s, uint64_t a, struct report_elements *el)
{
	const struct ex_case *c = s->c;
	struct align_tensor out[EX_MAX_T] = {{0}};
	int rc = ex_replay_whole(s, a, out);
	for (int k = 0; !rc && k < c->op->impl->n_out; k++) {
		if (!c->obs[k].data)
			continue;
		if (report_elements_compare(out[k].data, c->obs[k].data, (uint64_t)align_tensor_numel(&c->obs[k]),
					    dt_name(c->obs[k].dtype), c->obs[k].shape, c->obs[k].ndim, &el[k]) < 0)
			rc = fail_internal(&s->ctx->err, "out of memory");
	}
	for (int k = 0; k < EX_MAX_T; k++)
		ops_tensor_free(&out[k]);
	return rc;
}

static void index_text(const struct report_elements *el, char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < el->ndim && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "", (long long)el->first_index[i]);
	if (used < len)
		snprintf(buf + used, len - used, "]");
}

static void search_text(const struct ex_search *s, FILE *out, const char *bullet)
{
	const struct ex_space *sp = &s->sp;
	const struct ex_case *c = s->c;
	fprintf(out, "%ssearched %d switch%s, %llu assignment%s (%s)\n", bullet, sp->n_sw, sp->n_sw == 1 ? "" : "es",
		(unsigned long long)sp->size, sp->size == 1 ? "" : "s",
		s->exhaustive
			? "exhaustive: every assignment replayed or refuted"
			: "NOT exhaustive: over --max-replays; only the profiles and their one-switch neighbours");
	fprintf(out,
		"%sreplays: %llu on the first %d row%s, %llu whole; %llu excluded by the dtype contract, %llu "
		"refused by the op\n",
		bullet, (unsigned long long)s->n.screen, c->rows, c->rows == 1 ? "" : "s",
		(unsigned long long)s->n.full, (unsigned long long)s->n.contract, (unsigned long long)s->n.refused);
	for (int i = 0; i < sp->n_sw; i++)
		if (sp->n_left[i] && !sp->fixed[i]) {
			uint32_t left = 0;
			for (int k = 0; k < sp->n_left[i]; k++)
				left |= 1u << sp->left[i][k];
			char v[256];
			set_text(sp->sw[i], left, v, sizeof v);
			fprintf(out, "%snot searched (%s only): %s=%s\n", bullet,
				s->device == ALIGN_DEVICE_CUDA ? "CPU" : "GPU", modes_info(sp->sw[i])->env, v);
		}
}

static void profile_text(const struct ex_search *s, const struct ex_answer *ans, FILE *out)
{
	if (!ans->n_profile)
		return;
	int many = ans->n_profile > 1;
	fprintf(out, "closest profile%s:", many ? "s" : "");
	for (int j = 0; j < ans->n_profile; j++)
		fprintf(out, "%s %s", j ? "," : "", ans->profile[j]);
	if (!ans->profile_diff) {
		fprintf(out, " (%s)\n",
			ans->n_desc ? many ? "their values of these switches reproduce the output"
					   : "its values of these switches reproduce the output"
				    : "the closest assignment has the values they set");
		return;
	}
	fprintf(out, " (%d switch%s differ%s)\n", ans->profile_diff, ans->profile_diff == 1 ? "" : "es",
		ans->profile_diff == 1 ? "s" : "");
	for (int j = 0; j < ans->n_profile; j++) {
		struct align_modes m;
		char err[128];
		modes_init_default(&m);
		modes_apply_profile(&m, ans->profile[j], err, sizeof err);
		fprintf(out, "  %s sets", ans->profile[j]);
		for (int i = 0, n = 0; i < s->sp.n_sw; i++)
			if (ans->profile_sw[j] >> i & 1)
				fprintf(out, "%s %s=%s", n++ ? "," : "", modes_info(s->sp.sw[i])->env,
					modes_value_name(s->sp.sw[i], m.v[s->sp.sw[i]]));
		fprintf(out, "\n");
	}
}

static int render_text(struct ex_search *s, const struct ex_answer *ans, FILE *out, int md)
{
	const struct ex_case *c = s->c;
	const char *bullet = md ? "- " : "  ";
	char dims[128], buf[4096], any[2048];
	dims_text(&c->d, dims, sizeof dims);
	char var[32] = "";
	if (c->variant)
		snprintf(var, sizeof var, ", variant %d", c->variant);
	fprintf(out, "%sexplain %s (%s%s), inputs %s\n", md ? "### " : "", c->op->name, dims, var, c->in_src);
	if (c->variant)
		fprintf(out, "%sparameter variant %d\n", bullet, c->variant);
	for (int k = 0; k < c->op->impl->n_out; k++)
		if (c->obs[k].data) {
			shape_text(&c->obs[k], buf, sizeof buf);
			fprintf(out, "%sobserved %s %s from %s\n", bullet, c->obs[k].name, buf, c->out_src);
		}
	search_text(s, out, bullet);
	if (s->n_match) {
		fprintf(out, "reproduced bitwise by %llu assignment%s, %d description%s%s:\n",
			(unsigned long long)s->n_match, s->n_match == 1 ? "" : "s", ans->n_desc,
			ans->n_desc == 1 ? "" : "s", s->exhaustive ? "" : " (of those tried)");
		for (int k = 0; k < ans->n_desc; k++) {
			desc_text(&s->sp, &ans->desc[k], buf, sizeof buf, any, sizeof any);
			fprintf(out, "%s%d. %s\n", md ? "" : "  ", k + 1, buf[0] ? buf : "(any assignment)");
			if (any[0])
				fprintf(out, "%s   any: %s (%llu assignments)\n", md ? "" : "  ", any,
					(unsigned long long)ans->desc[k].count);
		}
		if (ans->more_desc)
			fprintf(out, "%s... %d more description%s (--format json lists them all up to %d)\n", bullet,
				ans->more_desc, ans->more_desc == 1 ? "" : "s", EX_MAX_DESC);
	} else {
		fprintf(out, "no assignment reproduces the output%s\n",
			s->exhaustive ? "" : " among those tried (the search was not exhaustive: others may)");
		if (ans->n_close)
			fprintf(out, "closest (among the %d replayed whole):\n", ans->close_rank);
		for (int j = 0; j < ans->n_close; j++) {
			struct report_elements el[EX_MAX_T];
			memset(el, 0, sizeof el);
			ALIGN_TRY(&s->ctx->err, close_elements(s, ans->close[j].a, el));
			assignment_text(&s->sp, ans->close[j].a, buf, sizeof buf);
			fprintf(out, "%s%d. %s: %llu of %llu elements differ, max %llu ulp\n", md ? "" : "  ", j + 1,
				buf, (unsigned long long)ans->close[j].n_differ, (unsigned long long)c->obs_elems,
				(unsigned long long)ans->close[j].max_ulp);
			for (int k = 0; k < c->op->impl->n_out; k++) {
				if (!c->obs[k].data || !el[k].n_differ)
					continue;
				char idx[128];
				index_text(&el[k], idx, sizeof idx);
				fprintf(out,
					"%s   %s: %llu differ, max %llu ulp; first at %s: replayed %s, observed %s\n",
					md ? "" : "  ", c->obs[k].name, (unsigned long long)el[k].n_differ,
					(unsigned long long)el[k].max_ulp, idx, el[k].first_text[0],
					el[k].first_text[1]);
			}
		}
	}
	profile_text(s, ans, out);
	return ALIGN_OK;
}

static json_t *values_json(int id, const int *v, int n)
{
	json_t *a = json_array();
	for (int k = 0; k < n; k++)
		json_array_append_new(a, json_string(modes_value_name(id, v[k])));
	return a;
}

static json_t *set_json(int id, uint32_t set)
{
	json_t *a = json_array();
	for (int v = 0; v < modes_value_count(id); v++)
		if (set >> v & 1)
			json_array_append_new(a, json_string(modes_value_name(id, v)));
	return a;
}

static json_t *search_json(const struct ex_search *s)
{
	const struct ex_space *sp = &s->sp;
	json_t *sw = json_array();
	for (int i = 0; i < sp->n_sw; i++)
		json_array_append_new(sw, json_pack("{s:s, s:o, s:o, s:b}", "env", modes_info(sp->sw[i])->env, "values",
						    values_json(sp->sw[i], sp->val[i], sp->n_val[i]), "not_searched",
						    values_json(sp->sw[i], sp->left[i], sp->n_left[i]), "fixed",
						    sp->fixed[i]));
	return json_pack("{s:o, s:I, s:b, s:i, s:{s:I, s:I}, s:I, s:I, s:i, s:f}", "switches", sw, "assignments",
			 (json_int_t)sp->size, "exhaustive", s->exhaustive, "screen_rows", s->screen ? s->c->rows : 0,
			 "replays", "screen", (json_int_t)s->n.screen, "whole", (json_int_t)s->n.full,
			 "contract_excluded", (json_int_t)s->n.contract, "refused", (json_int_t)s->n.refused, "jobs",
			 s->jobs, "seconds", s->seconds);
}

static json_t *closest_json(struct ex_search *s, const struct ex_answer *ans)
{
	const struct ex_case *c = s->c;
	json_t *arr = json_array();
	for (int j = 0; j < ans->n_close; j++) {
		struct report_elements el[EX_MAX_T];
		memset(el, 0, sizeof el);
		if (close_elements(s, ans->close[j].a, el)) {
			json_decref(arr);
			return NULL;
		}
		struct align_modes m;
		ex_space_modes(&s->sp, ans->close[j].a, &m);
		json_t *as = json_object(), *outs = json_array();
		for (int i = 0; i < s->sp.n_sw; i++)
			json_object_set_new(as, modes_info(s->sp.sw[i])->env,
					    json_string(modes_value_name(s->sp.sw[i], m.v[s->sp.sw[i]])));
		for (int k = 0; k < c->op->impl->n_out; k++) {
			if (!c->obs[k].data)
				continue;
			json_t *first = json_array();
			for (int d = 0; d < el[k].ndim && el[k].has_first; d++)
				json_array_append_new(first, json_integer(el[k].first_index[d]));
			json_array_append_new(outs, json_pack("{s:s, s:I, s:I, s:o, s:s, s:s}", "name", c->obs[k].name,
							      "differ", (json_int_t)el[k].n_differ, "max_ulp",
							      (json_int_t)el[k].max_ulp, "first", first, "replayed",
							      el[k].has_first ? el[k].first_text[0] : "", "observed",
							      el[k].has_first ? el[k].first_text[1] : ""));
		}
		json_array_append_new(arr, json_pack("{s:o, s:I, s:I, s:I, s:o}", "assignment", as, "differ",
						     (json_int_t)ans->close[j].n_differ, "elements",
						     (json_int_t)c->obs_elems, "max_ulp",
						     (json_int_t)ans->close[j].max_ulp, "outputs", outs));
	}
	return arr;
}

static json_t *answer_json(struct ex_search *s, const struct ex_answer *ans)
{
	const struct ex_case *c = s->c;
	json_t *dims = json_object(), *obs = json_array(), *descs = json_array();
	for (int k = 0; k < ALIGN_DIM_COUNT; k++)
		if (c->d.v[k])
			json_object_set_new(dims, (char[]){ALIGN_DIM_LETTERS[k], 0}, json_integer(c->d.v[k]));
	for (int k = 0; k < c->op->impl->n_out; k++) {
		if (!c->obs[k].data)
			continue;
		json_t *shape = json_array();
		for (int i = 0; i < c->obs[k].ndim; i++)
			json_array_append_new(shape, json_integer(c->obs[k].shape[i]));
		json_array_append_new(obs, json_pack("{s:s, s:s, s:o}", "name", c->obs[k].name, "dtype",
						     dt_name(c->obs[k].dtype), "shape", shape));
	}
	for (int k = 0; k < ans->n_desc; k++) {
		json_t *set = json_object(), *any = json_array();
		for (int i = 0; i < s->sp.n_sw; i++) {
			const char *env = modes_info(s->sp.sw[i])->env;
			if (ans->desc[k].set[i] == domain_bits(&s->sp, i) && s->sp.n_val[i] > 1)
				json_array_append_new(any, json_string(env));
			else
				json_object_set_new(set, env, set_json(s->sp.sw[i], ans->desc[k].set[i]));
		}
		json_array_append_new(descs, json_pack("{s:o, s:o, s:I}", "switches", set, "any", any, "assignments",
						       (json_int_t)ans->desc[k].count));
	}
	json_t *prof = json_array();
	for (int j = 0; j < ans->n_profile; j++) {
		struct align_modes m;
		char err[128];
		modes_init_default(&m);
		modes_apply_profile(&m, ans->profile[j], err, sizeof err);
		json_t *diff = json_array();
		for (int i = 0; i < s->sp.n_sw; i++)
			if (ans->profile_sw[j] >> i & 1)
				json_array_append_new(diff, json_pack("{s:s, s:s}", "env", modes_info(s->sp.sw[i])->env,
								      "profile",
								      modes_value_name(s->sp.sw[i], m.v[s->sp.sw[i]])));
		json_array_append_new(prof, json_pack("{s:s, s:o}", "name", ans->profile[j], "differ", diff));
	}
	json_t *close = s->n_match ? json_array() : closest_json(s, ans);
	if (!close)
		close = json_array();
	return json_pack("{s:s, s:o, s:i, s:s, s:s, s:s, s:o, s:o, s:b, s:I, s:o, s:i, s:o, s:o, s:i}", "op",
			 c->op->name, "dims", dims, "variant", c->variant, "device",
			 s->device == ALIGN_DEVICE_CUDA ? "cuda" : "cpu", "inputs", c->in_src, "outputs", c->out_src,
			 "observed", obs, "search", search_json(s), "found", s->n_match > 0, "matches",
			 (json_int_t)s->n_match, "descriptions", descs, "more_descriptions", ans->more_desc,
			 "closest_profiles", prof, "closest", close, "closest_among", ans->close_rank);
}

static int dump_json(struct align_ctx *ctx, json_t *j, FILE *out)
{
	if (!j)
		return fail_internal(&ctx->err, "cannot build the JSON answer");
	char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	if (!text)
		return fail_internal(&ctx->err, "cannot render the JSON answer");
	fprintf(out, "%s\n", text);
	free(text);
	return ALIGN_OK;
}

int ex_render(struct ex_search *s, const struct ex_answer *ans, const char *format, FILE *out)
{
	if (!strcmp(format, "json"))
		return dump_json(s->ctx, answer_json(s, ans), out);
	return render_text(s, ans, out, !strcmp(format, "md"));
}

/* values of switch i that some description of ans admits (all of them: the switch's domain bits); 0 when
 * no assignment reproduces the side's output: its closest assignment is no explanation, so a switch
 * value taken from it would name a difference nothing showed */
static uint32_t admitted(const struct ex_answer *ans, int i)
{
	uint32_t b = 0;
	for (int k = 0; k < ans->n_desc; k++)
		b |= ans->desc[k].set[i];
	return b;
}

int ex_render_pair(struct ex_search *s[2], const struct ex_answer *ans[2], const char *names[2], const char *format,
		   FILE *out)
{
	int json = !strcmp(format, "json");
	json_t *root = json ? json_object() : NULL, *diff = json ? json_array() : NULL;
	for (int side = 0; side < 2; side++) {
		if (json) {
			json_object_set_new(root, side ? "b" : "a", answer_json(s[side], ans[side]));
			continue;
		}
		fprintf(out, "%s== run %s ==\n", side ? "\n" : "", names[side]);
		ALIGN_TRY(&s[side]->ctx->err, render_text(s[side], ans[side], out, !strcmp(format, "md")));
	}
	int unexplained = 0; /* bit side: no assignment reproduces that side's output */
	for (int side = 0; side < 2; side++)
		unexplained |= (!s[side]->n_match) << side;
	if (!json)
		fprintf(out, "\n== the switches whose values differ (%s vs %s) ==\n", names[0], names[1]);
	for (int side = 0; side < 2 && !json; side++)
		if (unexplained >> side & 1)
			fprintf(out,
				"not explained: '%s': no assignment reproduces its output%s; its closest assignments "
				"are not explanations, so its switches are not compared\n",
				names[side], s[side]->exhaustive ? "" : " among those tried");
	int n = 0;
	for (int i = 0; i < s[0]->sp.n_sw; i++) {
		uint32_t a = admitted(ans[0], i), b = admitted(ans[1], i);
		if (!a || !b || (a & b))
			continue; /* unknown on a side, or a value both admit */
		const struct align_mode_info *in = modes_info(s[0]->sp.sw[i]);
		char va[256], vb[256];
		set_text(s[0]->sp.sw[i], a, va, sizeof va);
		set_text(s[0]->sp.sw[i], b, vb, sizeof vb);
		if (json)
			json_array_append_new(diff,
					      json_pack("{s:s, s:s, s:s}", "env", in->env, names[0], va, names[1], vb));
		else
			fprintf(out, "%-34s %-14s %-14s %s\n", in->env, va, vb, in->meaning);
		n++;
	}
	if (json) {
		json_t *nx = json_array();
		for (int side = 0; side < 2; side++)
			if (unexplained >> side & 1)
				json_array_append_new(nx, json_string(names[side]));
		json_object_set_new(root, "differ", diff);
		json_object_set_new(root, "not_explained", nx);
		return dump_json(s[0]->ctx, root, out);
	}
	if (unexplained) /* n is 0: an unexplained side admits no value */
		fprintf(out, "no switches compared: %s\n",
			unexplained == 3 ? "neither side is explained" : "one side is not explained");
	else
		fprintf(out, "%d switch%s differ%s between '%s' and '%s'\n", n, n == 1 ? "" : "es", n == 1 ? "s" : "",
			names[0], names[1]);
	return ALIGN_OK;
}
