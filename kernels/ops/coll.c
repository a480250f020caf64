/* coll.c: C twins of the collectives allreduce, reduce_scatter, all_gather (contract: coll.h; NCCL's
 * order: coll_model.h), their configs, the model's parameters from NCCL's environment, and busbw. */
#include "coll.h"

#include <stdlib.h>
#include <string.h>

#include "coll_model.h"
#include "op_cfg.h"
#include "ops.h"

static const char *const coll_names[] = {"allreduce", "reduce_scatter", "all_gather"};

static const struct align_tensor_spec ar_in[] = {
	{"x", ALIGN_DT_F32, "N,D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "row r: rank r's contribution"},
};
static const struct align_tensor_spec ar_out[] = {
	{"y", ALIGN_DT_F32, "N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "row r: rank r's result (the sum)"},
};
static const struct align_tensor_spec rs_in[] = {
	{"x", ALIGN_DT_F32, "N,N*D", {ALIGN_FILL_NORMAL, 1.0f, 0, 0}, "row r: rank r's contribution (N blocks of D)"},
};
static const struct align_tensor_spec rs_out[] = {
	{"y", ALIGN_DT_F32, "N,D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "row r: block r of the sum"},
};
static const struct align_tensor_spec ag_out[] = {
	{"y", ALIGN_DT_F32, "N,N*D", {ALIGN_FILL_NORMAL, 0, 0, 0}, "row r: the N contributions in rank order"},
};

static int coll_dtype(const struct align_modes *m)
{
	switch ((enum align_COLL_DTYPE_value)m->v[MODE_COLL_DTYPE]) {
	case ALIGN_COLL_DTYPE_BF16:
		return ALIGN_DT_BF16;
	case ALIGN_COLL_DTYPE_FP16:
		return ALIGN_DT_F16;
	case ALIGN_COLL_DTYPE_FP32:
	default: /* coll_cfg_init refuses a value it does not know */
		return ALIGN_DT_F32;
	}
}

static int io_dtype(const struct align_modes *m, int index)
{
	(void)index;
	return coll_dtype(m);
}

/* COLL_IMPL and COLL_DTYPE for device */
static int coll_cfg_modes(struct coll_cfg *c, const struct align_modes *m, int device, struct align_err *err)
{
	const char *op = coll_names[c->kind], *fn = "coll_cfg_init";
	int v = m->v[MODE_COLL_DTYPE];
	if (v != ALIGN_COLL_DTYPE_FP32 && v != ALIGN_COLL_DTYPE_BF16 && v != ALIGN_COLL_DTYPE_FP16)
		return op_cfg_unhandled(err, op, MODE_COLL_DTYPE, v, fn);
	c->dtype = coll_dtype(m);
	c->impl = ALIGN_COLL_IMPL_FIXED;
	if (c->kind == COLL_ALL_GATHER)
		return ALIGN_OK; /* a copy: no reduction order to choose */
	v = m->v[MODE_COLL_IMPL];
	switch ((enum align_COLL_IMPL_value)v) {
	case ALIGN_COLL_IMPL_FIXED:
		break;
	case ALIGN_COLL_IMPL_NCCL: /* NCCL itself: the CUDA side (with a communicator) */
		if (device != ALIGN_DEVICE_CUDA)
			return op_cfg_refuse(err, op, MODE_COLL_IMPL, v, device);
		break;
	case ALIGN_COLL_IMPL_NCCL_MODEL_RING: /* the model runs on the CPU only */
	case ALIGN_COLL_IMPL_NCCL_MODEL_TREE:
		if (device != ALIGN_DEVICE_CPU)
			return op_cfg_refuse(err, op, MODE_COLL_IMPL, v, device);
		break;
	default:
		return op_cfg_unhandled(err, op, MODE_COLL_IMPL, v, fn);
	}
	c->impl = v;
	return ALIGN_OK;
}

int coll_cfg_init(struct coll_cfg *c, int kind, const struct coll_params *p, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, const struct align_tensor *out, int n_out, int device,
		  struct align_err *err)
{
	const char *op = coll_names[kind];
	memset(c, 0, sizeof *c);
	c->kind = kind;
	ALIGN_TRY(err, op_cfg_counts(err, op, m, in, n_in, out, n_out, 1, 1));
	ALIGN_TRY(err, op_cfg_rank(err, op, "x", &in[0], 2));
	ALIGN_TRY(err, coll_cfg_modes(c, m, device, err));
	int64_t N = in[0].shape[0], cols = in[0].shape[1];
	if (N < 1 || N > COLL_MAX_RANKS)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: input 'x' has N = %lld ranks, 1 to %d supported", op,
				  (long long)N, COLL_MAX_RANKS);
	if (kind == COLL_REDUCE_SCATTER && cols % N)
		return align_fail(err, ALIGN_ERR_INPUT, "%s: input 'x' has %lld columns, not a multiple of N = %lld",
				  op, (long long)cols, (long long)N);
	c->N = N;
	c->D = kind == COLL_REDUCE_SCATTER ? cols / N : cols;
	c->in_cols = cols;
	c->out_cols = kind == COLL_ALL_GATHER ? N * cols : c->D;
	int64_t xs[2] = {N, cols}, ys[2] = {N, c->out_cols};
	ALIGN_TRY(err, op_cfg_tensor(err, op, "input", "x", &in[0], c->dtype, 2, xs));
	ALIGN_TRY(err, op_cfg_tensor(err, op, "output", "y", &out[0], c->dtype, 2, ys));
	if (p && (c->impl == ALIGN_COLL_IMPL_NCCL_MODEL_RING || c->impl == ALIGN_COLL_IMPL_NCCL_MODEL_TREE)) {
		if (p->nnodes < 1 || N % p->nnodes)
			return align_fail(err, ALIGN_ERR_INPUT, "%s: %d nodes do not split N = %lld ranks evenly", op,
					  p->nnodes, (long long)N);
		for (int j = 0; j < p->nrings; j++) {
			unsigned char seen[COLL_MAX_RANKS] = {0};
			for (int k = 0; k < N; k++) {
				int r = p->ring[j][k];
				if (r < 0 || r >= N || seen[r]++)
					return align_fail(err, ALIGN_ERR_INPUT,
							  "%s: ring %d is not an order of the %lld ranks", op, j,
							  (long long)N);
			}
		}
	}
	return ALIGN_OK;
}

/* fixed order: every output element from column i of the rows (x row length in_cols) */
static void fixed_col(const struct coll_cfg *c, const struct align_tensor *x, int64_t i, float *sum)
{
	float acc = ops_ld(x, i);
	for (int64_t k = 1; k < c->N; k++)
		acc = acc + ops_ld(x, k * c->in_cols + i);
	*sum = acc;
}

/* the model's value of column i of an allreduce-like sum (ring starts / tree) */
static float model_col(const struct coll_cfg *c, const struct coll_params *p, const struct align_tensor *x, int64_t i,
		       int start, int ring, int channel)
{
	if (c->impl == ALIGN_COLL_IMPL_NCCL_MODEL_TREE)
		return coll_model_tree(x->data, c->dtype, c->in_cols, i, (int)c->N, p->nnodes, channel);
	int order[COLL_MAX_RANKS], chain[COLL_MAX_RANKS];
	coll_model_ring_order(p, ring, (int)c->N, order);
	for (int k = 0; k < c->N; k++)
		chain[k] = order[(start + k) % c->N];
	return coll_model_chain(x->data, c->dtype, c->in_cols, i, chain, (int)c->N);
}

/* allreduce under the model: the chunk map of the whole buffer, then each element */
static int model_allreduce(const struct coll_cfg *c, const struct coll_params *p, const struct align_tensor *x,
			   struct align_tensor *y)
{
	struct coll_part parts[COLL_MODEL_MAX_PARTS];
	int es = (int)align_dtype_size(c->dtype);
	int n = coll_model_parts(COLL_ALLREDUCE, c->D, es, (int)c->N, p, parts);
	uint8_t *start = malloc((size_t)c->D + 1), *ring = malloc((size_t)c->D + 1), *chan = malloc((size_t)c->D + 1);
	if (!start || !ring || !chan) {
		free(start), free(ring), free(chan);
		return ALIGN_ERR_INTERNAL;
	}
	coll_model_ring_starts(c->D, es, (int)c->N, p, parts, n, start, ring);
	for (int k = 0; k < n; k++)
		memset(chan + parts[k].offset, parts[k].channel, (size_t)parts[k].count);
	for (int64_t i = 0; i < c->D; i++) {
		float v = model_col(c, p, x, i, start[i], ring[i], chan[i]);
		for (int64_t r = 0; r < c->N; r++)
			ops_st(y, r * c->D + i, v);
	}
	free(start), free(ring), free(chan);
	return ALIGN_OK;
}

/* reduce_scatter under the ring model: rank r's block from the ring position after r's, around to r, in
 * every channel part (the ring of the part's channel) */
static void model_reduce_scatter_ring(const struct coll_cfg *c, const struct coll_params *p,
				      const struct align_tensor *x, struct align_tensor *y)
{
	struct coll_part parts[COLL_MODEL_MAX_PARTS];
	int n = coll_model_parts(COLL_REDUCE_SCATTER, c->D, (int)align_dtype_size(c->dtype), (int)c->N, p, parts);
	for (int k = 0; k < n; k++) {
		int order[COLL_MAX_RANKS], chain[COLL_MAX_RANKS];
		coll_model_ring_order(p, p->nrings > 0 ? parts[k].channel % p->nrings : 0, (int)c->N, order);
		for (int pos = 0; pos < c->N; pos++) {
			int r = order[pos];
			for (int q = 0; q < c->N; q++)
				chain[q] = order[(pos + 1 + q) % c->N];
			for (int64_t i = parts[k].offset; i < parts[k].offset + parts[k].count; i++)
				ops_st(y, r * c->D + i,
				       coll_model_chain(x->data, c->dtype, c->in_cols, r * c->D + i, chain, (int)c->N));
		}
	}
}

/* reduce_scatter under the tree model: the Tree all-reduce's value of each element of r's block */
static int model_reduce_scatter_tree(const struct coll_cfg *c, const struct coll_params *p,
				     const struct align_tensor *x, struct align_tensor *y)
{
	struct coll_part parts[COLL_MODEL_MAX_PARTS];
	int n = coll_model_parts(COLL_ALLREDUCE, c->in_cols, (int)align_dtype_size(c->dtype), (int)c->N, p, parts);
	for (int k = 0; k < n; k++)
		for (int64_t i = parts[k].offset; i < parts[k].offset + parts[k].count; i++)
			ops_st(y, i,
			       coll_model_tree(x->data, c->dtype, c->in_cols, i, (int)c->N, p->nnodes,
					       parts[k].channel)); /* y is [N,D]: element i of the whole sum */
	return ALIGN_OK;
}

static int coll_fwd_cpu(int kind, const struct coll_params *p, const struct align_modes *m,
			const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct coll_cfg c;
	ALIGN_TRY(NULL, coll_cfg_init(&c, kind, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CPU, NULL));
	ALIGN_TRY(NULL, op_cfg_data(NULL, coll_names[kind], in, n_in, out, n_out));
	const struct align_tensor *x = &in[0];
	struct align_tensor *y = &out[0];
	if (kind == COLL_ALL_GATHER) { /* y[r] = x[0] .. x[N-1]: the bytes, copied */
		size_t row = (size_t)c.in_cols * align_dtype_size(c.dtype);
		for (int64_t r = 0; r < c.N; r++)
			memcpy((char *)y->data + (size_t)r * row * (size_t)c.N, x->data, row * (size_t)c.N);
		return ALIGN_OK;
	}
	if (c.impl == ALIGN_COLL_IMPL_NCCL_MODEL_RING)
		return kind == COLL_ALLREDUCE ? model_allreduce(&c, p, x, y)
					      : (model_reduce_scatter_ring(&c, p, x, y), ALIGN_OK);
	if (c.impl == ALIGN_COLL_IMPL_NCCL_MODEL_TREE)
		return kind == COLL_ALLREDUCE ? model_allreduce(&c, p, x, y) : model_reduce_scatter_tree(&c, p, x, y);
	for (int64_t i = 0; i < c.in_cols; i++) { /* fixed: rank order, one rounding */
		float acc;
		fixed_col(&c, x, i, &acc);
		if (kind == COLL_ALLREDUCE)
			for (int64_t r = 0; r < c.N; r++)
				ops_st(y, r * c.D + i, acc);
		else
			ops_st(y, i, acc); /* column i = r*D + j is y[r, j] */
	}
	return ALIGN_OK;
}

int allreduce_fwd_cpu(const struct coll_params *p, const struct align_modes *m, const struct align_tensor *in, int n_in,
		      struct align_tensor *out, int n_out)
{
	return coll_fwd_cpu(COLL_ALLREDUCE, p, m, in, n_in, out, n_out);
}

int reduce_scatter_fwd_cpu(const struct coll_params *p, const struct align_modes *m, const struct align_tensor *in,
			   int n_in, struct align_tensor *out, int n_out)
{
	return coll_fwd_cpu(COLL_REDUCE_SCATTER, p, m, in, n_in, out, n_out);
}

int all_gather_fwd_cpu(const struct coll_params *p, const struct align_modes *m, const struct align_tensor *in,
		       int n_in, struct align_tensor *out, int n_out)
{
	return coll_fwd_cpu(COLL_ALL_GATHER, p, m, in, n_in, out, n_out);
}

/* ---- NCCL's environment -> the model's parameters ---- */

static int env_int(const char *(*get)(const char *), const char *name, long long min, long long max, long long *v,
		   struct align_err *err)
{
	const char *s = get(name);
	if (!s || !*s)
		return 0;
	char *end;
	long long x = strtoll(s, &end, 0);
	if (*end || x < min || x > max)
		return align_fail(err, ALIGN_ERR_INPUT, "%s='%s': expected an integer in [%lld, %lld]", name, s, min,
				  max);
	*v = x;
	return 0;
}

/* NCCL_RINGS: orders separated by '|', ranks by spaces or commas */
static int parse_rings(struct coll_params *p, const char *s, int nranks, struct align_err *err)
{
	p->nrings = 0;
	while (*s && p->nrings < 4) {
		int n = 0;
		while (*s && *s != '|') {
			char *end;
			long r = strtol(s, &end, 10);
			if (end == s) {
				if (*s == ' ' || *s == ',') {
					s++;
					continue;
				}
				return align_fail(err, ALIGN_ERR_INPUT, "NCCL_RINGS: unexpected '%c'", *s);
			}
			if (n == COLL_MAX_RANKS || r < 0 || r >= nranks)
				return align_fail(err, ALIGN_ERR_INPUT,
						  "NCCL_RINGS: rank %ld out of range for %d ranks", r, nranks);
			p->ring[p->nrings][n++] = (uint8_t)r;
			s = end;
		}
		if (n != nranks)
			return align_fail(err, ALIGN_ERR_INPUT, "NCCL_RINGS: ring %d names %d ranks, the run has %d",
					  p->nrings, n, nranks);
		p->nrings++;
		if (*s == '|')
			s++;
	}
	return 0;
}

int coll_params_from_env(struct coll_params *p, int nranks, const char *(*get)(const char *), struct align_err *err)
{
	long long v;
	const char *proto = get("NCCL_PROTO");
	if (proto && *proto) {
		if (!strcmp(proto, "Simple") || !strcmp(proto, "simple") || !strcmp(proto, "SIMPLE"))
			p->proto = COLL_PROTO_SIMPLE;
		else if (!strcmp(proto, "LL") || !strcmp(proto, "ll"))
			p->proto = COLL_PROTO_LL;
		else if (!strcmp(proto, "LL128") || !strcmp(proto, "ll128"))
			p->proto = COLL_PROTO_LL128;
		else
			return align_fail(err, ALIGN_ERR_INPUT,
					  "NCCL_PROTO='%s': the model takes one protocol (Simple, LL or LL128)", proto);
	}
	p->buffsize = p->proto == COLL_PROTO_SIMPLE ? 4 << 20 : p->proto == COLL_PROTO_LL ? 256 << 10 : 4800 << 10;
	const char *bs = p->proto == COLL_PROTO_SIMPLE ? "NCCL_BUFFSIZE"
			 : p->proto == COLL_PROTO_LL   ? "NCCL_LL_BUFFSIZE"
						       : "NCCL_LL128_BUFFSIZE";
	v = p->buffsize;
	ALIGN_TRY(err, env_int(get, bs, 4096, 1LL << 34, &v, err));
	p->buffsize = v;
	v = p->nchannels;
	ALIGN_TRY(err, env_int(get, "NCCL_MIN_NCHANNELS", 1, COLL_MODEL_MAX_PARTS, &v, err));
	ALIGN_TRY(err, env_int(get, "NCCL_MAX_NCHANNELS", 1, COLL_MODEL_MAX_PARTS, &v, err));
	p->nchannels = (int)v;
	const char *rings = get("NCCL_RINGS");
	if (rings && *rings)
		ALIGN_TRY(err, parse_rings(p, rings, nranks, err));
	return ALIGN_OK;
}

double coll_algbw(double bytes, double seconds)
{
	return seconds > 0 ? bytes / seconds : 0;
}

double coll_busbw(int kind, int nranks, double bytes, double seconds)
{
	double n = nranks, f = kind == COLL_ALLREDUCE ? 2 * (n - 1) / n : (n - 1) / n;
	return coll_algbw(bytes, seconds) * f;
}

/* ---- the registry entries (ops.def) ---- */

static void params_default(void *params, const struct align_dims *d)
{
	struct coll_params *p = params;
	(void)d;
	memset(p, 0, sizeof *p);
	p->nchannels = 1;
	p->proto = COLL_PROTO_SIMPLE;
	p->buffsize = 4 << 20;
	p->nnodes = 1;
}

/* variants for the tests: 1 = 4 channels, LL; 2 = 2 channels, LL128, a reversed ring; 3 = 2 nodes */
static int params_variant(void *params, const struct align_dims *d, int k)
{
	struct coll_params *p = params;
	params_default(p, d);
	int64_t N = d->v[ALIGN_DIM_N] > 0 && d->v[ALIGN_DIM_N] <= COLL_MAX_RANKS ? d->v[ALIGN_DIM_N] : 1;
	switch (k) {
	case 0:
		return 1;
	case 1:
		p->nchannels = 4;
		p->proto = COLL_PROTO_LL;
		p->buffsize = 256 << 10;
		return 1;
	case 2:
		p->nchannels = 2;
		p->proto = COLL_PROTO_LL128;
		p->buffsize = 4800 << 10;
		p->nrings = 1;
		for (int64_t i = 0; i < N; i++)
			p->ring[0][i] = (uint8_t)(N - 1 - i);
		return 1;
	case 3:
		p->nnodes = N % 2 ? 1 : 2;
		return 1;
	default:
		return 0;
	}
}

#define COLL_IMPL_ENTRY(name, kind, in_spec, out_spec, dims, modes_list)                                               \
	static int name##_fwd(const void *params, const struct align_modes *m, const struct align_tensor *in,          \
			      int n_in, struct align_tensor *out, int n_out)                                           \
	{                                                                                                              \
		return coll_fwd_cpu(kind, params, m, in, n_in, out, n_out);                                            \
	}                                                                                                              \
	static int name##_cfg_check(const void *params, const struct align_modes *m, const struct align_dims *d,       \
				    int device, struct align_err *err)                                                 \
	{                                                                                                              \
		struct align_tensor in[1], out[1];                                                                     \
		struct coll_cfg c;                                                                                     \
		ALIGN_TRY(err, op_cfg_tensors(&name##_impl, m, d, in, out, err));                                      \
		return coll_cfg_init(&c, kind, params, m, in, 1, out, 1, device, err);                                 \
	}                                                                                                              \
	const struct align_op_impl name##_impl = {                                                                     \
		1,                                                                                                     \
		in_spec,                                                                                               \
		1,                                                                                                     \
		out_spec,                                                                                              \
		dims,                                                                                                  \
		modes_list,                                                                                            \
		sizeof(struct coll_params),                                                                            \
		params_default,                                                                                        \
		params_variant,                                                                                        \
		name##_fwd,                                                                                            \
		io_dtype,                                                                                              \
		name##_cfg_check,                                                                                      \
		io_dtype,                                                                                              \
	};

static const int reduce_modes[] = {MODE_COLL_IMPL, MODE_COLL_DTYPE, -1};
static const int gather_modes[] = {MODE_COLL_DTYPE, -1};

COLL_IMPL_ENTRY(allreduce, COLL_ALLREDUCE, ar_in, ar_out, "N=4,D=4096", reduce_modes)
COLL_IMPL_ENTRY(reduce_scatter, COLL_REDUCE_SCATTER, rs_in, rs_out, "N=4,D=1024", reduce_modes)
COLL_IMPL_ENTRY(all_gather, COLL_ALL_GATHER, ar_in, ag_out, "N=4,D=1024", gather_modes)
