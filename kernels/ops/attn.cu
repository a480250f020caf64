/* attn.cu: CUDA twin of the composed DSv4 attention layer (contract: attn.h; order: attn_pipe.h, the same
 * code as the C twin). The other ops run through their CUDA twins (ops_cuda_fwd, default launch) on the same
 * device context, so attn is bitwise equal to the C twin wherever they are (every portable mode); attn's
 * own steps (the linears, the cast, copy and positions, the FP8 QDQ of kv, the indexer-query rotation and
 * the index sets) are attn.h's element code, one thread per output element or row, compiled with
 * --fmad=false. GPU-only values reach the sub-ops, which run them (MATH_IMPL=cuda, RMSNORM_RSQRT=cuda, ...).
 * Memory: the intermediates come from one cudaMallocAsync per call, freed with cudaFreeAsync on dev->stream
 * (the sub-ops keep using the device context's own workspace, so the two never overlap).
 * Knobs: launch.block for attn's kernels (default 256), serial: attn's kernels with one thread; the sub-ops
 * run with their defaults.
 * Napkin maths (DSv4-Flash csa layer, 4096 tokens): the linears (D = 4096 to q_lora 1024, kv 512, the
 * compressors 2x1024 + 2x256, 64 head weights; q_lora to 64 x 512 + 64 x 128; grouped 8 x 4096 -> 1024 and
 * 8192 -> 4096) are ~140 G multiply-adds on CUDA cores in the bitwise order (~4 ms at ~67 TFLOP/s of fp32
 * issue); sparse_attn dominates the rest (its own header).
 */
#include "math_cuda.cuh" /* first: compressor.h takes dm_expf from it in the device pass */

#include "attn.h"

#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#include "attn_pipe.h"

__global__ void attn_kernel(int kind, attn_kargs a)
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

struct cuda_be {
	struct align_dev *dev;
	const struct align_launch *L;
	unsigned char *base; /* one cudaMallocAsync block */
	size_t used, cap;
	int rc;
};

/* a bump allocator over the block (sized by a first pass that only counts) */
static void *cuda_alloc(void *ctx, size_t bytes)
{
	struct cuda_be *b = (struct cuda_be *)ctx;
	size_t at = (b->used + 255) / 256 * 256;
	b->used = at + bytes;
	if (!b->base)
		return (void *)(uintptr_t)256; /* counting pass: a non-NULL placeholder, never dereferenced */
	if (b->used > b->cap)
		return NULL;
	return b->base + at;
}

static int cuda_op(void *ctx, int op_id, const void *params, const struct align_modes *m, const struct align_tensor *in,
		   int n_in, struct align_tensor *out, int n_out)
{
	struct cuda_be *b = (struct cuda_be *)ctx;
	if (!b->base)
		return ALIGN_OK;
	return ops_cuda_fwd(ops_at(op_id))(params, m, in, n_in, out, n_out, NULL, b->dev);
}

static int cuda_kern(void *ctx, int kind, const struct attn_kargs *a)
{
	struct cuda_be *b = (struct cuda_be *)ctx;
	if (!b->base) { /* counting pass */
		if (kind == ATTN_K_QIROT)
			(void)cuda_alloc(ctx, sizeof(float) * (size_t)(a->rows * a->c.S));
		return ALIGN_OK;
	}
	struct attn_kargs k = *a;
	if (kind == ATTN_K_QIROT) { /* per-row float scratch for the Hadamard */
		k.w = cuda_alloc(ctx, sizeof(float) * (size_t)(a->rows * a->c.S));
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

extern "C" int attn_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in, int n_in,
			     struct align_tensor *out, int n_out, const struct align_launch *launch,
			     struct align_dev *dev)
{
	const struct attn_params *p = (const struct attn_params *)params;
	struct attn_cfg c;
	ALIGN_TRY(dev->err, attn_cfg_init(&c, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "attn", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("attn", "negative launch knob");
	if (c.T <= 0)
		return ALIGN_OK;
	struct cuda_be b;
	memset(&b, 0, sizeof b);
	b.dev = dev;
	b.L = L;
	struct attn_be be = {&b, cuda_alloc, cuda_op, cuda_kern};
	ALIGN_TRY(dev->err, attn_pipe(&c, p, m, in, out, &be)); /* counting pass: sizes only */
	b.cap = b.used + 256;
	b.used = 0;
	void *blk = NULL;
	cudaStream_t stream = (cudaStream_t)dev->stream;
	OPS_CUDA_TRY(cudaMallocAsync(&blk, b.cap, stream));
	b.base = (unsigned char *)blk;
	int rc = attn_pipe(&c, p, m, in, out, &be);
	cudaError_t fe = cudaFreeAsync(blk, stream);
	if (rc)
		return rc;
	OPS_CUDA_TRY(fe);
	return ALIGN_OK;
}
