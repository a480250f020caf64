/* sparse_mla.cu: CUDA twin of the DeepSeek-V3.2 sparse MLA attention (contract: sparse_mla.h; specification:
 * sparse_mla.c, whose every row is sparse_mla_row.h). q[T,H,D], kv[S,D] bf16, idx[T,N] i32 -> o[T,H,F] bf16, the
 * C twin's bytes in every portable mode (MATH_IMPL=cuda / cuda_fast: CUDA's own exp, GPU only).
 *
 * Layout: one block per (t, h) row (grid-stride over the T*H rows). Shared memory holds the row's slot list,
 * logits z and weights e (N each) and the F accumulators. Steps, each the C twin's loop split over threads:
 *   slots: gather copies idx; mask: each slot is flagged when it holds a valid row for the first time, then a
 *     flagged slot's rank = the number of flagged slots with a smaller row, list[rank] = its row: the distinct
 *     rows ascending; n = their count (thread 0), and an empty mask row gets the one invalid slot;
 *   logits: one thread per slot runs sparse_mla_logit (the same sequential dot);
 *   the max, the denominator and each online block's max and sum: thread 0, in slot order; e_k and P_k: one
 *     thread per slot; PV: one thread per output dim d runs the sum over slots in slot order.
 * No float atomics; every value is the C twin's expression in the C twin's order.
 * Knobs: block (default 128), grid_cap (default 16 blocks per SM); serial: one thread per row runs
 * sparse_mla_row itself with global scratch.
 * Cost: the slot ranking of the mask form is O(N^2 / block) per row and the logits O(N D / block): a reference
 * kernel, not tuned.
 */
#include "sparse_mla.h"

#include "math_cuda.cuh"
#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */
#include "sparse_mla_row.h"

/* the row's scalars, in dynamic shared memory after the arrays */
struct sparse_mla_row_state {
	int64_t n;
	int any;
	float m, l, a;
};

struct sparse_mla_args {
	const align_bf16 *q, *kv;
	const int32_t *idx;
	align_bf16 *o;
	struct sparse_mla_cfg c;
};

__global__ void sparse_mla_kernel(sparse_mla_args a)
{
	const struct sparse_mla_cfg *c = &a.c;
	const int64_t N = c->N, F = c->F, NN = N > 0 ? N : 1;
	float *z = (float *)align_cuda_dyn_smem(), *e = z + NN, *acc = e + NN;
	int32_t *list = (int32_t *)(acc + F);
	const int64_t off = 3 * NN + F + ((3 * NN + F) & 1); /* the state 8-byte aligned after the arrays */
	struct sparse_mla_row_state *st = (struct sparse_mla_row_state *)(z + off);
	for (int64_t r = blockIdx.x; r < c->T * c->H; r += gridDim.x) {
		const int64_t t = r / c->H;
		const int32_t *idx = a.idx + t * N;
		const align_bf16 *q = a.q + r * c->D;
		align_bf16 *o = a.o + r * F;
		if (threadIdx.x == 0) {
			st->n = c->gather ? N : 0;
			st->any = 0;
		}
		__syncthreads();
		if (c->gather) {
			for (int64_t k = threadIdx.x; k < N; k += blockDim.x)
				list[k] = idx[k];
		} else {
			for (int64_t k = threadIdx.x; k < N; k += blockDim.x) { /* e[k] = 1: slot k holds a row first */
				int32_t j = idx[k];
				int first = sa_valid(&c->sa, j);
				for (int64_t u = 0; u < k && first; u++)
					first = idx[u] != j;
				e[k] = first ? 1.0f : 0.0f;
			}
			__syncthreads();
			for (int64_t k = threadIdx.x; k < N; k += blockDim.x) {
				if (e[k] == 0.0f)
					continue;
				int32_t j = idx[k];
				int64_t rank = 0; /* distinct valid rows below j */
				for (int64_t u = 0; u < N; u++)
					rank += e[u] != 0.0f && idx[u] < j;
				list[rank] = j;
			}
			if (threadIdx.x == 0) {
				int64_t cnt = 0;
				for (int64_t k = 0; k < N; k++)
					cnt += e[k] != 0.0f;
				st->n = cnt;
			}
		}
		__syncthreads();
		if (threadIdx.x == 0 && st->n == 0 && N > 0) {
			list[0] = -1; /* the all -inf row */
			st->n = 1;
		}
		__syncthreads();
		const int64_t n = st->n;
		for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
			int v = sa_valid(&c->sa, list[k]);
			if (v)
				st->any = 1; /* every writer stores 1 */
			z[k] = v ? sparse_mla_logit(c, q, a.kv, list[k]) : -INFINITY;
		}
		__syncthreads();
		if (!st->any && c->empty_zero) {
			for (int64_t d = threadIdx.x; d < F; d += blockDim.x)
				o[d] = align_f32_to_bf16(0.0f);
			__syncthreads();
			continue;
		}
		if (!c->block) {
			if (threadIdx.x == 0) {
				float m = -INFINITY;
				for (int64_t k = 0; k < n; k++)
					m = sa_max(m, z[k]);
				st->m = m;
			}
			__syncthreads();
			for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
				e[k] = sa_e(&c->sa, hn_sub(z[k], st->m));
			__syncthreads();
			if (threadIdx.x == 0) {
				float l = 0.0f;
				for (int64_t k = 0; k < n; k++)
					l = hn_add(l, e[k]);
				st->l = l;
			}
			__syncthreads();
			for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
				e[k] = sa_p(&c->sa, hn_div(e[k], st->l));
			__syncthreads();
			for (int64_t d = threadIdx.x; d < F; d += blockDim.x) {
				float s = 0.0f;
				for (int64_t k = 0; k < n; k++)
					s = hn_add(s, hn_mul(e[k], sparse_mla_v(c, a.kv, list[k], d)));
				o[d] = align_f32_to_bf16(s);
			}
			__syncthreads();
			continue;
		}
		for (int64_t d = threadIdx.x; d < F; d += blockDim.x)
			acc[d] = 0.0f;
		if (threadIdx.x == 0) {
			st->m = -INFINITY;
			st->l = 0.0f;
		}
		__syncthreads();
		for (int64_t k0 = 0; k0 < n; k0 += c->block) {
			const int64_t k1 = k0 + c->block < n ? k0 + c->block : n;
			if (threadIdx.x == 0) {
				float m2 = st->m;
				for (int64_t k = k0; k < k1; k++)
					m2 = sa_max(m2, z[k]);
				st->a = sa_e(&c->sa, hn_sub(st->m, m2));
				st->m = m2;
			}
			__syncthreads();
			for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x)
				e[k] = sa_e(&c->sa, hn_sub(z[k], st->m));
			__syncthreads();
			if (threadIdx.x == 0) {
				float bs = 0.0f;
				for (int64_t k = k0; k < k1; k++)
					bs = hn_add(bs, e[k]);
				st->l = hn_add(hn_mul(st->l, st->a), bs);
			}
			for (int64_t d = threadIdx.x; d < F; d += blockDim.x) {
				float x = hn_mul(acc[d], st->a);
				for (int64_t k = k0; k < k1; k++)
					x = hn_add(x, hn_mul(sa_p(&c->sa, e[k]), sparse_mla_v(c, a.kv, list[k], d)));
				acc[d] = x;
			}
			__syncthreads();
		}
		for (int64_t d = threadIdx.x; d < F; d += blockDim.x)
			o[d] = align_f32_to_bf16(hn_div(acc[d], st->l));
		__syncthreads(); /* the shared row state is reused by the next r */
	}
}

/* launch.serial: one thread per row runs sparse_mla_row; scratch per row: z, e, list (N each), acc (F) */
__global__ void sparse_mla_serial_kernel(sparse_mla_args a, float *scr)
{
	const struct sparse_mla_cfg *c = &a.c;
	const int64_t NN = c->N > 0 ? c->N : 1, per = 3 * NN + c->F;
	for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < c->T * c->H;
	     r += (int64_t)gridDim.x * blockDim.x) {
		float *z = scr + r * per;
		sparse_mla_row(c, a.q + r * c->D, a.kv, a.idx + (r / c->H) * c->N, a.o + r * c->F, z, z + NN,
			       (int32_t *)(z + 2 * NN), z + 3 * NN);
	}
}

extern "C" int sparse_mla_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				   int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				   struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	sparse_mla_args a;
	ALIGN_TRY(dev->err, sparse_mla_cfg_init(&a.c, (const struct sparse_mla_params *)params, m, in, n_in, out, n_out,
						ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "sparse_mla", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("sparse_mla", "negative launch knob");
	a.q = (const align_bf16 *)in[0].data;
	a.kv = (const align_bf16 *)in[1].data;
	a.idx = (const int32_t *)in[2].data;
	a.o = (align_bf16 *)out[0].data;
	const int64_t rows = a.c.T * a.c.H, NN = a.c.N > 0 ? a.c.N : 1;
	if (rows <= 0)
		return ALIGN_OK;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, maxb = 0;
	if (L->serial > 0) {
		int rc = rows_max_block(sparse_mla_serial_kernel, &maxb);
		if (rc)
			return rc;
		block = block > maxb ? maxb : block;
		void *scr = NULL;
		ALIGN_TRY(dev->err, align_dev_scratch(dev, (size_t)(rows * (3 * NN + a.c.F)) * sizeof(float), &scr));
		int64_t grid = (rows + block - 1) / block;
		if (L->grid_cap > 0 && grid > L->grid_cap)
			grid = L->grid_cap;
		ALIGN_CUDA_LAUNCH(sparse_mla_serial_kernel, (unsigned)grid, block, 0, stream, a, (float *)scr);
		OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
		return ALIGN_OK;
	}
	size_t smem = (size_t)(3 * NN + a.c.F + 1) * sizeof(float) + sizeof(struct sparse_mla_row_state);
	if (smem > 48 * 1024)
		return ops_cuda_bad_input("sparse_mla", "3 N + F above 12288 (shared memory of one row)");
	int rc = rows_max_block(sparse_mla_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block;
	int64_t cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	int64_t grid = rows > cap ? cap : rows;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	ALIGN_CUDA_LAUNCH(sparse_mla_kernel, (unsigned)grid, block, smem, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
