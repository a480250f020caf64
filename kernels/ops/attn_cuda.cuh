/* attn_cuda.cuh: the CUDA backend of attn_pipe.h, shared by attn.cu and attn_bwd.cu (the backward recomputes
 * the forward with the same pipe): the other ops through their CUDA twins (ops_cuda_fwd, default launch) on the
 * caller's device context, memory from one cudaMallocAsync block per call (a bump allocator sized by a first
 * pass that only counts), attn's element steps one thread per output element or row (launch.block, default
 * 256; grid_cap; serial: one thread). Include after rows_cuda.cuh, op_cfg.h and attn_pipe.h. */
#ifndef ALIGN_ATTN_CUDA_CUH
#define ALIGN_ATTN_CUDA_CUH

static __global__ void attn_kernel(int kind, attn_kargs a)
{
	const struct attn_cfg *c = &a.c;
	int64_t n = kind == ATTN_K_LINEAR ? a.rows * a.groups * a.m : kind == ATTN_K_IDX ? a.rows * c->NS : a.rows;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
		switch (kind) {
		case ATTN_K_LINEAR: {
			int64_t r = i / (a.groups * a.m), gj = i - r * a.groups * a.m, g = gj / a.m;
			((align_bf16 *)a.out)[r * a.ldo + gj] =
				attn_linear((const align_bf16 *)a.a + r * a.lda + g * a.ga,
					    (const align_bf16 *)a.w + gj * a.n, a.n);
			break;
		}
		case ATTN_K_CAST:
			((align_bf16 *)a.out)[i] = align_f32_to_bf16(((const float *)a.a)[i]);
			break;
		case ATTN_K_COPY:
			((align_bf16 *)a.out)[i] = ((const align_bf16 *)a.a)[i];
			break;
		case ATTN_K_IOTA:
			((int32_t *)a.out)[i] = (int32_t)i;
			break;
		case ATTN_K_KVQDQ:
			compressor_qdq_row(0, (align_bf16 *)a.out + i * c->F, c->F, c->rope_dim);
			break;
		case ATTN_K_QIROT:
			attn_qi_rotate(c, (align_bf16 *)a.out + i * c->S, (float *)a.w + i * c->S);
			break;
		case ATTN_K_IDX: {
			int64_t t = i / c->NS, j = i - t * c->NS;
			((int32_t *)a.out)[i] = attn_slot(c, t, j, a.ci + t * c->topk);
			break;
		}
		default:
			break;
		}
	}
}

struct attn_cuda_be {
	struct align_dev *dev;
	const struct align_launch *L;
	unsigned char *base; /* one cudaMallocAsync block */
	size_t used, cap;
	int rc;
};

/* a bump allocator over the block (sized by a first pass that only counts) */
static void *attn_cuda_alloc(void *ctx, size_t bytes)
{
	struct attn_cuda_be *b = (struct attn_cuda_be *)ctx;
	size_t at = (b->used + 255) / 256 * 256;
	b->used = at + bytes;
	if (!b->base)
		return (void *)(uintptr_t)256; /* counting pass: a non-NULL placeholder, never dereferenced */
	if (b->used > b->cap)
		return NULL;
	return b->base + at;
}

static int attn_cuda_op(void *ctx, int op_id, const void *params, const struct align_modes *m,
			const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct attn_cuda_be *b = (struct attn_cuda_be *)ctx;
	if (!b->base)
		return ALIGN_OK;
	return ops_cuda_fwd(ops_at(op_id))(params, m, in, n_in, out, n_out, NULL, b->dev);
}

static int attn_cuda_kern(void *ctx, int kind, const struct attn_kargs *a)
{
	struct attn_cuda_be *b = (struct attn_cuda_be *)ctx;
	if (!b->base) { /* counting pass */
		if (kind == ATTN_K_QIROT)
			(void)attn_cuda_alloc(ctx, sizeof(float) * (size_t)(a->rows * a->c.S));
		return ALIGN_OK;
	}
	struct attn_kargs k = *a;
	if (kind == ATTN_K_QIROT) { /* per-row float scratch for the Hadamard */
		k.w = attn_cuda_alloc(ctx, sizeof(float) * (size_t)(a->rows * a->c.S));
		if (!k.w)
			return align_fail(b->dev->err, ALIGN_ERR_INTERNAL, "attn: workspace too small");
	}
	int64_t n = kind == ATTN_K_LINEAR ? a->rows * a->groups * a->m
		    : kind == ATTN_K_IDX  ? a->rows * a->c.NS
					  : a->rows;
	if (n <= 0)
		return ALIGN_OK;
	int maxb = 0, rc = rows_max_block(attn_kernel, &maxb);
	if (rc)
		return rc;
	int block = b->L->block > 0 ? (b->L->block > 1024 ? 1024 : b->L->block) : 256;
	block = b->L->serial > 0 ? 1 : block > maxb ? maxb : block;
	int64_t grid = b->L->serial > 0 ? 1 : (n + block - 1) / block;
	int64_t cap = (int64_t)(b->dev->sm_count > 0 ? b->dev->sm_count : 1) * 16;
	if (b->L->grid_cap > 0 && cap > b->L->grid_cap)
		cap = b->L->grid_cap;
	grid = grid > cap ? cap : grid;
	ALIGN_CUDA_LAUNCH(attn_kernel, (unsigned)grid, block, 0, (cudaStream_t)b->dev->stream, kind, k);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}

#endif /* ALIGN_ATTN_CUDA_CUH */
