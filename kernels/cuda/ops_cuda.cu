/* ops_cuda.cu: the registry of CUDA twins (one row per op that has one) and their error messages.
 * The calling convention is in ops_cuda.h. Add a twin with one row below (keep ops.def order). */
#include <stdio.h>

#include "ops_cuda.h"

static const struct ops_cuda_row {
	int op;			   /* enum align_op_id */
	align_fwd_cuda_fn fwd;	   /* the CUDA twin */
} ops_cuda_rows[] = {
	{ALIGN_OP_matmul, matmul_fwd_cuda},   /* kernels/ops/matmul.cu */
	{ALIGN_OP_rmsnorm, rmsnorm_fwd_cuda}, /* kernels/ops/rmsnorm.cu */
	{ALIGN_OP_qnorm, qnorm_fwd_cuda},     /* kernels/ops/qnorm.cu */
	{ALIGN_OP_swiglu, swiglu_fwd_cuda},   /* kernels/ops/swiglu.cu */
	{ALIGN_OP_router, router_fwd_cuda},   /* kernels/ops/router.cu */
	{ALIGN_OP_mhc_post, mhc_post_fwd_cuda}, /* kernels/ops/mhc_post.cu */
	{ALIGN_OP_moe_combine, moe_combine_fwd_cuda}, /* kernels/ops/moe_combine.cu */
	{ALIGN_OP_mhc_pre, mhc_pre_fwd_cuda},   /* kernels/ops/mhc_pre.cu */
	{ALIGN_OP_mhc_head, mhc_head_fwd_cuda}, /* kernels/ops/mhc_head.cu */
};

extern "C" align_fwd_cuda_fn ops_cuda_fwd(const struct align_op *op)
{
	if (!op)
		return NULL;
	for (size_t i = 0; i < sizeof ops_cuda_rows / sizeof ops_cuda_rows[0]; i++)
		if (ops_cuda_rows[i].op < ALIGN_OP_COUNT && ops_at(ops_cuda_rows[i].op) == op)
			return ops_cuda_rows[i].fwd;
	return NULL;
}

extern "C" int ops_cuda_fail(const char *call, cudaError_t e, const char *file, int line)
{
	fprintf(stderr, "error: %s failed: %s (%s) at %s:%d\n", call, cudaGetErrorString(e), cudaGetErrorName(e),
		file, line);
	return ALIGN_ERR_INTERNAL;
}

extern "C" int ops_cuda_bad_input(const char *op, const char *what)
{
	fprintf(stderr, "error: %s (cuda): %s\n", op, what);
	return ALIGN_ERR_INPUT;
}

extern "C" int ops_cuda_unsupported(const char *op, const struct align_modes *m, int mode_id)
{
	const struct align_mode_info *mi = modes_info(mode_id);
	const char *v = mi ? modes_value_name(mode_id, m->v[mode_id]) : NULL;
	fprintf(stderr, "error: %s (cuda): %s=%s is not supported on the GPU (no CUDA twin of that choice)\n", op,
		mi ? mi->env : "?", v ? v : "?");
	return ALIGN_ERR_UNSUPPORTED;
}
