/* router_bwd.cu: CUDA twin of the router backward (contract: router_bwd.h; specification: router_bwd.c).
 * The C twin's bytes in every portable mode; shapes and modes come from router_bwd_cfg_init (router_bwd.c).
 * MATH_IMPL=libm has no GPU twin (refused); cuda / cuda_fast take exp, sigmoid and softplus from CUDA.
 *
 * The forward's selection comes from the forward twin itself (router_fwd_cuda into pool buffers, same
 * stream); then: a kernel writes the GEMM operands x' [T,D] and w' [E,D] (matmul_operand); one thread per
 * token recomputes the logits (matmul_dot, the forward's K order) and scores (rb_scores) in local arrays and
 * runs rb_token (steps 1-4) into dl; one thread per (t, d) sums dx (rb_dx) and one per (e, d) sums dw
 * (rb_wsum, streamed in the ROUTER_BWD_WGRAD order). The shared code of router_bwd.h runs on both twins
 * (hn_*: the host's NaN rules). No float atomics; launch knobs: block and grid_cap (serial is the same
 * sequence: every output already has one thread).
 * Napkin maths: the per-token thread does E x D multiply-adds (DSv4: 256 x 4096 = 1 M) sequentially: slow
 * (a warp-per-token form with the same order is future work). Not run on a GPU yet: compiled only.
 */
#include "math_cuda.cuh"
#include "rows_cuda.cuh"

#include "op_cfg.h" /* after ops_cuda.h (rows_cuda.cuh), which prepares ops.h for the device pass */

#include "router_bwd.h" /* after math_cuda.cuh: its shared code calls dm_* */

struct rbw_args {
	const align_bf16 *x;
	const float *w, *dwt;
	const int32_t *idx;
	float *xq, *wq, *dl, *dw;
	align_bf16 *dx;
	struct router_bwd_cfg b;
};

__global__ void rbw_operands_kernel(rbw_args a)
{
	const int64_t nx = a.b.r.T * a.b.r.D, nw = a.b.r.E * a.b.r.D;
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nx + nw; i += stride) {
		if (i < nx)
			a.xq[i] = matmul_operand(align_bf16_to_f32(a.x[i]), a.b.r.x_opd);
		else
			a.wq[i - nx] = matmul_operand(a.w[i - nx], a.b.r.w_opd);
	}
}

__global__ void rbw_token_kernel(rbw_args a)
{
	const int64_t T = a.b.r.T, D = a.b.r.D, E = a.b.r.E, K = a.b.r.K;
	float l[ROUTER_BWD_MAX_E], s[ROUTER_BWD_MAX_E], tmp[2 * ROUTER_MAX_K];
	for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < T; t += (int64_t)gridDim.x * blockDim.x) {
		for (int64_t e = 0; e < E; e++)
			l[e] = matmul_dot(a.xq + t * D, a.wq + e * D, D, ALIGN_MATMUL_ACCUM_SEQ, 0);
		rb_scores(&a.b.r, l, s);
		rb_token(&a.b, l, s, a.idx + t * K, a.dwt + t * K, a.dl + t * E, tmp);
	}
}

__global__ void rbw_dx_kernel(rbw_args a)
{
	const int64_t T = a.b.r.T, D = a.b.r.D, E = a.b.r.E;
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < T * D; i += stride)
		a.dx[i] = align_f32_to_bf16(rb_dx(a.dl, a.wq, E, D, i / D, i % D));
}

__global__ void rbw_dw_kernel(rbw_args a)
{
	const int64_t T = a.b.r.T, D = a.b.r.D, E = a.b.r.E;
	int64_t stride = (int64_t)gridDim.x * blockDim.x;
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < E * D; i += stride)
		a.dw[i] = rb_wsum(a.b.wsum, a.dl, a.xq, T, E, D, i / D, i % D);
}

static unsigned rbw_grid(int64_t work, int block, const struct align_launch *L, const struct align_dev *dev)
{
	int64_t grid = (work + block - 1) / block, cap = (int64_t)(dev->sm_count > 0 ? dev->sm_count : 1) * 16;
	if (grid > cap)
		grid = cap;
	if (L->grid_cap > 0 && grid > L->grid_cap)
		grid = L->grid_cap;
	return (unsigned)(grid < 1 ? 1 : grid);
}

extern "C" int router_bwd_fwd_cuda(const void *params, const struct align_modes *m, const struct align_tensor *in,
				   int n_in, struct align_tensor *out, int n_out, const struct align_launch *launch,
				   struct align_dev *dev)
{
	cudaStream_t stream = (cudaStream_t)dev->stream;
	rbw_args a;
	const struct router_params *p = (const struct router_params *)params;
	ALIGN_TRY(dev->err, router_bwd_cfg_init(&a.b, p, m, in, n_in, out, n_out, ALIGN_DEVICE_CUDA, dev->err));
	ALIGN_TRY(dev->err, op_cfg_data(dev->err, "router_bwd", in, n_in, out, n_out));
	struct align_launch none = {0, 0, 0, 0};
	const struct align_launch *L = launch ? launch : &none;
	if (L->block < 0 || L->rows_per_block < 0 || L->grid_cap < 0 || L->serial < 0)
		return ops_cuda_bad_input("router_bwd", "negative launch knob");
	const int64_t T = a.b.r.T, D = a.b.r.D, E = a.b.r.E, K = a.b.r.K;
	if (T <= 0)
		return ALIGN_OK;
	void *pidx = NULL, *pwt = NULL, *pxq = NULL, *pwq = NULL; /* pool blocks: the forward uses the scratch */
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(T * K > 0 ? T * K : 1) * sizeof(int32_t), &pidx));
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(T * K > 0 ? T * K : 1) * sizeof(float), &pwt));
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(T * D > 0 ? T * D : 1) * sizeof(float), &pxq));
	ALIGN_TRY(dev->err, align_dev_alloc(dev, (size_t)(E * D > 0 ? E * D : 1) * sizeof(float), &pwq));
	struct align_tensor fo[2] = {{pidx, ALIGN_DT_I32, 2, {T, K}, "idx"}, {pwt, ALIGN_DT_F32, 2, {T, K}, "wt"}};
	ALIGN_TRY(dev->err, router_fwd_cuda(params, m, in, 5, fo, 2, NULL, dev)); /* the forward's selection */
	a.x = (const align_bf16 *)in[0].data;
	a.w = (const float *)in[1].data;
	a.dwt = (const float *)in[5].data;
	a.idx = (const int32_t *)pidx;
	a.xq = (float *)pxq;
	a.wq = (float *)pwq;
	a.dl = (float *)out[0].data;
	a.dx = (align_bf16 *)out[1].data;
	a.dw = (float *)out[2].data;
	int block = L->block > 0 ? (L->block > 1024 ? 1024 : L->block) : 128, maxb = 0;
	int rc = rows_max_block(rbw_token_kernel, &maxb);
	if (rc)
		return rc;
	block = block > maxb ? maxb : block;
	ALIGN_CUDA_LAUNCH(rbw_operands_kernel, rbw_grid(T * D + E * D, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	ALIGN_CUDA_LAUNCH(rbw_token_kernel, rbw_grid(T, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	ALIGN_CUDA_LAUNCH(rbw_dx_kernel, rbw_grid(T * D, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	ALIGN_CUDA_LAUNCH(rbw_dw_kernel, rbw_grid(E * D, block, L, dev), block, 0, stream, a);
	OPS_CUDA_TRY(cudaGetLastError()); /* the launch */
	return ALIGN_OK;
}
