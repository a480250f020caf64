/* mtp_cuda.cuh: the CUDA backend of mtp_pipe.h, shared by mtp.cu and mtp_bwd.cu (the backward recomputes the
 * forward's steps 1-3 with the same pipe): the other ops through their CUDA twins (ops_cuda_fwd, default
 * launch) on the caller's device context, memory from one cudaMallocAsync block per call (a bump allocator
 * sized by a first pass that only counts), and the element kernels' launch dims from the launch knobs
 * (block, default 256; grid_cap; serial: one thread).
 * Include after rows_cuda.cuh, op_cfg.h and mtp_pipe.h. */
#ifndef ALIGN_MTP_CUDA_CUH
#define ALIGN_MTP_CUDA_CUH

struct mtp_cuda_be {
	struct align_dev *dev;
	const struct align_launch *L;
	unsigned char *base; /* the block; NULL during the counting pass */
	size_t used, cap;
};

static void *mtp_cuda_alloc(void *ctx, size_t bytes)
{
	struct mtp_cuda_be *b = (struct mtp_cuda_be *)ctx;
	size_t at = (b->used + 255) / 256 * 256;
	b->used = at + bytes;
	if (!b->base)
		return (void *)(uintptr_t)256; /* counting pass: a non-NULL placeholder, never dereferenced */
	if (b->used > b->cap)
		return NULL;
	return b->base + at;
}

static int mtp_cuda_op(void *ctx, int op_id, const void *params, const struct align_modes *m,
		       const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct mtp_cuda_be *b = (struct mtp_cuda_be *)ctx;
	if (!b->base)
		return ALIGN_OK;
	return ops_cuda_fwd(ops_at(op_id))(params, m, in, n_in, out, n_out, NULL, b->dev);
}

/* grid and block for n elements of a grid-stride kernel */
template <class K> static int mtp_cuda_dims(const struct mtp_cuda_be *b, K kernel, int64_t n, int *block, int64_t *grid)
{
	int maxb = 0, rc = rows_max_block(kernel, &maxb);
	if (rc)
		return rc;
	int bl = b->L->block > 0 ? (b->L->block > 1024 ? 1024 : b->L->block) : 256;
	bl = b->L->serial > 0 ? 1 : bl > maxb ? maxb : bl;
	int64_t g = b->L->serial > 0 ? 1 : (n + bl - 1) / bl;
	int64_t cap = (int64_t)(b->dev->sm_count > 0 ? b->dev->sm_count : 1) * 16;
	if (b->L->grid_cap > 0 && cap > b->L->grid_cap)
		cap = b->L->grid_cap;
	*block = bl;
	*grid = g > cap ? cap : g;
	return ALIGN_OK;
}

/* pass(arg, b) twice: counting (sizes only), then on one cudaMallocAsync block freed on dev->stream */
static int mtp_cuda_run(struct align_dev *dev, const struct align_launch *L,
			int (*pass)(void *arg, struct mtp_cuda_be *b), void *arg)
{
	struct mtp_cuda_be b;
	memset(&b, 0, sizeof b);
	b.dev = dev;
	b.L = L;
	ALIGN_TRY(dev->err, pass(arg, &b));
	b.cap = b.used + 256;
	b.used = 0;
	void *blk = NULL;
	cudaStream_t stream = (cudaStream_t)dev->stream;
	OPS_CUDA_TRY(cudaMallocAsync(&blk, b.cap, stream));
	b.base = (unsigned char *)blk;
	int rc = pass(arg, &b);
	cudaError_t fe = cudaFreeAsync(blk, stream);
	if (rc)
		return rc;
	OPS_CUDA_TRY(fe);
	return ALIGN_OK;
}

#endif /* ALIGN_MTP_CUDA_CUH */
