/* coll_model.c: the CPU model of NCCL's summation order (what is modelled, verified and assumed:
 * coll_model.h). */
#include "coll_model.h"

#include "ops.h"

#define MIN_TRAFFIC_PER_CHANNEL (32 << 10) /* enqueue.cc: 32K traffic as minimal */
#define NCCL_STEPS_MODEL 8		   /* NCCL_STEPS */
#define CHUNK_STEPS_MODEL 4		   /* ALLREDUCE_CHUNKSTEPS = NCCL_STEPS / 2 (ASSUMED default) */

static int64_t div_up(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

static int64_t grain_bytes(int proto)
{
	return proto == COLL_PROTO_LL ? 16 : proto == COLL_PROTO_LL128 ? 1920 : 512;
}

/* the ring chunk of one channel part, bytes (calcCollChunking for Ring, nChannels = 1) */
static int64_t chunk_bytes(const struct coll_params *p)
{
	int64_t step = p->buffsize / NCCL_STEPS_MODEL;
	if (p->proto == COLL_PROTO_LL)
		return step / 2;
	if (p->proto == COLL_PROTO_LL128)
		return step / 16 * 15; /* (chunk / LINEELEMS) * DATAELEMS: 16 lines of which 15 carry data */
	return step * CHUNK_STEPS_MODEL;
}

int coll_model_parts(int kind, int64_t count, int elt_size, int nranks, const struct coll_params *p,
		     struct coll_part *parts)
{
	if (count <= 0)
		return 0;
	int nmax = p->nchannels < 1 ? 1 : p->nchannels > COLL_MODEL_MAX_PARTS ? COLL_MODEL_MAX_PARTS : p->nchannels;
	int64_t tpb = kind == COLL_ALLREDUCE ? 2 : 1; /* traffic per byte (ring all-reduce moves the data twice) */
	if (p->proto == COLL_PROTO_LL)
		tpb *= 4;
	int64_t traffic = count * elt_size * tpb;
	if (traffic < MIN_TRAFFIC_PER_CHANNEL)
		traffic = MIN_TRAFFIC_PER_CHANNEL;
	int64_t per_channel = div_up(traffic / nmax, 16) * 16;
	int64_t cell = div_up(div_up(MIN_TRAFFIC_PER_CHANNEL, tpb), 16) * 16;
	int64_t epc = cell / elt_size, cells = div_up(count * elt_size, cell), per_cell = cell * tpb;
	int64_t cells_per_ch = div_up(per_channel, per_cell);
	if (cells_per_ch > cells)
		cells_per_ch = cells;
	int64_t lo = nmax == 1 ? cells : div_up(per_channel, per_cell);
	if (lo > cells)
		lo = cells;
	int64_t nmid = (cells - lo) / cells_per_ch, hi = (cells - lo) % cells_per_ch;
	int64_t nch = (lo != 0) + nmid + (hi != 0);
	if (nch > nmax) { /* overflowed the channels: spread the rest over the middle and last channels */
		nmid = nmax - 2;
		cells_per_ch = (cells - lo) / (nmid + 1);
		hi = cells_per_ch + (cells - lo) % (nmid + 1);
	}
	if (hi == 0 && nmid != 0) {
		hi = cells_per_ch;
		nmid--;
	}
	int64_t c_lo = lo * epc, c_mid = nmid ? cells_per_ch * epc : 0, c_hi = hi * epc;
	if (c_hi)
		c_hi -= cells * epc - count;
	else
		c_lo -= cells * epc - count;
	int64_t grain = grain_bytes(p->proto), chunk = chunk_bytes(p) / grain * grain / elt_size;
	if (chunk < 1)
		chunk = 1;
	int n = 0;
	int64_t off = 0;
	for (int64_t k = 0; k < 2 + nmid; k++) {
		int64_t c = k == 0 ? c_lo : k == 1 + nmid ? c_hi : c_mid;
		if (c <= 0)
			continue;
		parts[n].offset = off;
		parts[n].count = c;
		parts[n].chunk_count = chunk;
		parts[n].channel = n;
		off += c;
		n++;
	}
	return n;
}

void coll_model_ring_order(const struct coll_params *p, int j, int nranks, int *order)
{
	for (int i = 0; i < nranks; i++)
		order[i] = p->nrings > 0 ? p->ring[j % p->nrings][i] : i;
}

void coll_model_ring_starts(int64_t count, int elt_size, int nranks, const struct coll_params *p,
			    const struct coll_part *parts, int nparts, uint8_t *start, uint8_t *ring_of)
{
	(void)count;
	int64_t align = 16 / elt_size; /* alignUp(..., 16 / sizeof(T)) */
	for (int k = 0; k < nparts; k++) {
		const struct coll_part *pt = &parts[k];
		int64_t cc = pt->chunk_count, loop = (int64_t)nranks * cc;
		for (int64_t eo = 0; eo < pt->count; eo += loop) {
			int64_t rem = pt->count - eo;
			if (rem < loop)
				cc = div_up(div_up(rem, nranks), align) * align;
			for (int64_t i = 0; i < (rem < loop ? rem : loop); i++) {
				int64_t j = i / cc; /* chunk of the loop: finished at ring position j */
				int64_t e = pt->offset + eo + i;
				start[e] = (uint8_t)((j + 1) % nranks);
				ring_of[e] = (uint8_t)(p->nrings > 0 ? pt->channel % p->nrings : 0);
			}
		}
	}
}

static float round_dt(int dt, float v)
{
	return dt == ALIGN_DT_BF16 ? align_round_bf16(v) : dt == ALIGN_DT_F16 ? align_round_f16(v) : v;
}

static float load_dt(const void *x, int dt, int64_t k)
{
	return dt == ALIGN_DT_BF16  ? align_bf16_to_f32(((const align_bf16 *)x)[k])
	       : dt == ALIGN_DT_F16 ? align_f16_to_f32(((const align_f16 *)x)[k])
				    : ((const float *)x)[k];
}

float coll_model_chain(const void *x, int dt, int64_t row_len, int64_t i, const int *chain, int n)
{
	float acc = load_dt(x, dt, (int64_t)chain[0] * row_len + i);
	for (int k = 1; k < n; k++)
		acc = round_dt(dt, acc + load_dt(x, dt, (int64_t)chain[k] * row_len + i));
	return acc;
}

void coll_model_btree(int n, int r, int *up, int *d0, int *d1)
{
	int bit = 1;
	while (bit < n && !(bit & r))
		bit <<= 1;
	if (r == 0) { /* the root: its one child is the largest power of two below n */
		*up = -1;
		*d0 = -1;
		*d1 = n > 1 ? bit >> 1 : -1;
		return;
	}
	*up = (r ^ bit) | (bit << 1);
	if (*up >= n)
		*up = r ^ bit;
	int low = bit >> 1;
	*d0 = low ? r - low : -1;
	*d1 = low ? r + low : -1;
	while (*d1 >= n) {
		low >>= 1;
		*d1 = low ? r + low : -1;
	}
}

/* the tree of channel c over n nodes: even c the btree, odd c its mirror (n even) or shift (n odd) */
static void dtree(int n, int r, int c, int *up, int *d0, int *d1)
{
	if (c % 2 == 0) {
		coll_model_btree(n, r, up, d0, d1);
		return;
	}
	int odd = n % 2, q = odd ? (r - 1 + n) % n : n - 1 - r, u, a, b;
	coll_model_btree(n, q, &u, &a, &b);
	int map[3] = {u, a, b};
	for (int k = 0; k < 3; k++)
		if (map[k] >= 0)
			map[k] = odd ? (map[k] + 1) % n : n - 1 - map[k];
	*up = map[0];
	*d0 = map[1];
	*d1 = map[2];
}

struct tree_walk {
	const void *x;
	int dt, L, nnodes, channel;
	int64_t row_len, i;
};

/* partial sum of the subtree of rank g: own, then chain child, tree child 0, tree child 1 */
static float tree_partial(const struct tree_walk *w, int g)
{
	float acc = load_dt(w->x, w->dt, (int64_t)g * w->row_len + w->i);
	int node = g / w->L, l = g % w->L;
	if (l + 1 < w->L)
		acc = round_dt(w->dt, acc + tree_partial(w, g + 1));
	if (l == 0 && w->nnodes > 1) {
		int up, d0, d1;
		dtree(w->nnodes, node, w->channel, &up, &d0, &d1);
		if (d0 >= 0)
			acc = round_dt(w->dt, acc + tree_partial(w, d0 * w->L));
		if (d1 >= 0)
			acc = round_dt(w->dt, acc + tree_partial(w, d1 * w->L));
	}
	return acc;
}

float coll_model_tree(const void *x, int dt, int64_t row_len, int64_t i, int nranks, int nnodes, int channel)
{
	struct tree_walk w = {x, dt, nranks / nnodes, nnodes, channel, row_len, i};
	int root = 0;
	for (int r = 0; r < nnodes; r++) {
		int up, d0, d1;
		dtree(nnodes, r, channel, &up, &d0, &d1);
		if (up < 0)
			root = r;
	}
	return tree_partial(&w, root * w.L);
}
