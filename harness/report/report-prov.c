/* report-prov: the provenance of the two runs (report.h): which build, device and libraries produced
 * each trace, as 'align run' records them in the ATF header (ingest keeps the header object in
 * run.header), and the one line the renderers print when the runs differ in it. */
#include "report-impl.h"
#include "report-render.h"

#include "err.h"

#include <stdlib.h>
#include <string.h>

/* sorted by name: the order of the line and of "differs" */
const char *const report_prov_fields[REPORT_PROV_FIELDS] = {
	"align_commit", "cublas_version", "cublaslt_version", "cuda_runtime_version", "device", "driver_version",
};

int rp_prov_load(struct report_run *run, const char *header, struct align_err *e)
{
	if (!(run->prov = json_object()))
		return fail_internal(e, "out of memory");
	/* the header is stored JSON (persistence); one that does not parse records no provenance */
	json_t *h = header ? json_loads(header, 0, NULL) : NULL;
	for (int i = 0; json_is_object(h) && i < REPORT_PROV_FIELDS; i++) {
		json_t *v = json_object_get(h, report_prov_fields[i]);
		if (v && !json_is_null(v) && json_object_set(run->prov, report_prov_fields[i], v)) {
			json_decref(h);
			return fail_internal(e, "out of memory");
		}
	}
	json_decref(h);
	return ALIGN_OK;
}

int report_prov_differs(const struct report *r, int i)
{
	json_t *a = json_object_get(r->a.prov, report_prov_fields[i]);
	json_t *b = json_object_get(r->b.prov, report_prov_fields[i]);
	return a && b && !json_equal(a, b);
}

/* A value as the line shows it: a string in single quotes, anything else as JSON. */
static size_t value_text(json_t *v, char *buf, size_t len)
{
	if (json_is_string(v))
		return (size_t)snprintf(buf, len, "'%s'", json_string_value(v));
	char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	size_t n = (size_t)snprintf(buf, len, "%s", t ? t : "?");
	free(t);
	return n;
}

int rr_prov_text(const struct report *r, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (int i = 0; i < REPORT_PROV_FIELDS && n < len; i++) {
		if (!report_prov_differs(r, i))
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%s%s ", n ? "; " : "", report_prov_fields[i]);
		if (n < len)
			n += value_text(json_object_get(r->a.prov, report_prov_fields[i]), buf + n, len - n);
		if (n < len)
			n += (size_t)snprintf(buf + n, len - n, " vs ");
		if (n < len)
			n += value_text(json_object_get(r->b.prov, report_prov_fields[i]), buf + n, len - n);
	}
	return n > 0;
}

json_t *rr_prov_json(const struct report *r)
{
	json_t *differs = json_array();
	for (int i = 0; i < REPORT_PROV_FIELDS; i++)
		if (report_prov_differs(r, i))
			json_array_append_new(differs, json_string(report_prov_fields[i]));
	return json_pack("{s:O,s:O,s:o}", "a", r->a.prov, "b", r->b.prov, "differs", differs);
}
