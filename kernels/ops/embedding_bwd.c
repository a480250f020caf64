/* embedding_bwd.c: CPU twin of the embedding backward (contract in embedding_bwd.h). The tokens of each row
 * are listed in increasing t by a stable counting sort, then every element is embedding_bwd_elem. */
#include "embedding_bwd.h"

#include <stdlib.h>

#include "op_cfg.h"
#include "ops.h"

static const struct align_tensor_spec in_specs[] = {
	{"ids", ALIGN_DT_I32, "T", {ALIGN_FILL_TOKEN_IDS, 0, 16.0f, 'V'}, "token ids (the forward's)"},
	{"table", ALIGN_DT_F32, "V,D", {ALIGN_FILL_SPECIAL, 1.0f, 4.0f, 0}, "embedding table (its shape)"},
	{"dy", ALIGN_DT_BF16, "T,D", {ALIGN_FILL_SPECIAL, 1.0f, 60000.0f, 0}, "gradient of the embedded tokens"},
};
static const struct align_tensor_spec out_specs[] = {
	{"dtable", ALIGN_DT_BF16, "V,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "gradient of the table (EMBED_BWD_DTYPE)"},
};

static int out_dtype(const struct align_modes *m, int i)
{
	(void)i;
	return m->v[MODE_EMBED_BWD_DTYPE] == ALIGN_EMBED_BWD_DTYPE_FP32 ? ALIGN_DT_F32 : ALIGN_DT_BF16;
}

int embedding_bwd_cfg_init(struct embedding_bwd_cfg *c, const struct embedding_params *p, const struct align_modes *m,
			   const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out,
			   int device, struct align_err *err)
{
	const char *op = "embedding_bwd", *fn = "embedding_bwd_cfg_init";
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 3, 1));
	if (!p)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: no params", op);
	ALIGN_TRY(err, op_cfg_rank(err, op, "ids", &in[0], 1));
	ALIGN_TRY(err, op_cfg_rank(err, op, "table", &in[1], 2));
	int64_t T = in[0].shape[0], V = in[1].shape[0], D = in[1].shape[1], ys[2] = {T, D}, ts[2] = {V, D};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "dy", &in[2], ALIGN_DT_BF16, 2, ys));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "dtable", &out[0], out_dtype(m, 0), 2, ts));
	/* the forward's config, dy standing for its y (same shape and dtype) */
	ALIGN_TRY(err, embedding_cfg_init(&c->f, p, m, in, 2, &in[2], 1, device, err));
	int v = m->v[MODE_EMBED_BWD_ORDER];
	switch ((enum align_EMBED_BWD_ORDER_value)v) {
	case ALIGN_EMBED_BWD_ORDER_SEQ:
	case ALIGN_EMBED_BWD_ORDER_TORCH:
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_EMBED_BWD_ORDER, v, fn);
	}
	c->order = v;
	return op_cfg_flag(err, op, fn, m, MODE_EMBED_BWD_DTYPE, ALIGN_EMBED_BWD_DTYPE_FP32, ALIGN_EMBED_BWD_DTYPE_BF16,
			   &c->bf16);
}

/* start[r] .. start[r + 1]: row r's tokens in list, increasing t (counting sort, stable) */
static int row_lists(const int32_t *ids, int64_t T, int64_t V, int64_t **start, int32_t **list)
{
	*start = calloc((size_t)V + 1, sizeof **start);
	*list = malloc((size_t)(T > 0 ? T : 1) * sizeof **list);
	if (!*start || !*list)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "embedding_bwd: out of memory");
	for (int64_t t = 0; t < T; t++)
		(*start)[ids[t] + 1]++;
	for (int64_t r = 0; r < V; r++)
		(*start)[r + 1] += (*start)[r];
	int64_t *fill = malloc((size_t)(V > 0 ? V : 1) * sizeof *fill);
	if (!fill)
		return align_fail(NULL, ALIGN_ERR_INTERNAL, "embedding_bwd: out of memory");
	for (int64_t r = 0; r < V; r++)
		fill[r] = (*start)[r];
	for (int64_t t = 0; t < T; t++)
		(*list)[fill[ids[t]]++] = (int32_t)t;
	free(fill);
	return ALIGN_OK;
}

static int fwd(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
	       struct align_tensor *out, int n_out)
{
	struct embedding_bwd_cfg c;
	ALIGN_TRY(NULL, embedding_bwd_cfg_init(&c, params, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, "embedding_bwd", in, n_in, out, n_out));
	const int32_t *ids = in[0].data;
	ALIGN_TRY(NULL, embedding_check_ids(ids, c.f.T, c.f.V, NULL));
	int64_t *start = NULL;
	int32_t *list = NULL;
	int rc = row_lists(ids, c.f.T, c.f.V, &start, &list);
	for (int64_t r = 0; rc == ALIGN_OK && r < c.f.V; r++)
		for (int64_t j = 0; j < c.f.D; j++)
			embedding_bwd_st(
				&c, out[0].data, r * c.f.D + j,
				embedding_bwd_elem(&c, list + start[r], start[r + 1] - start[r], in[2].data, j));
	free(start);
	free(list);
	return rc;
}

static void params_default(void *params, const struct align_dims *d)
{
	embedding_impl.params_default(params, d);
}

static int params_variant(void *params, const struct align_dims *d, int k)
{
	return embedding_impl.params_variant(params, d, k);
}

static int cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d, int device,
		     struct align_err *err)
{
	struct align_tensor in[3], out[1];
	struct embedding_bwd_cfg c;
	ALIGN_TRY(err, op_cfg_tensors(&embedding_bwd_impl, m, d, in, out, err));
	return embedding_bwd_cfg_init(&c, params, m, in, 3, out, 1, device, err);
}

static const int modes_read[] = {MODE_EMBED_SCALE, MODE_EMBED_BWD_ORDER, MODE_EMBED_BWD_DTYPE, -1};

const struct align_op_impl embedding_bwd_impl = {
	3,
	in_specs,
	1,
	out_specs,
	"T=64,V=16,D=64",
	modes_read,
	sizeof(struct embedding_params),
	params_default,
	params_variant,
	fwd,
	out_dtype,
	cfg_check,
	NULL, /* in_dtype: the spec dtypes */
};
