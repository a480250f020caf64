/* ops_cuda.cu: the registry of CUDA twins and their error messages. The calling convention is in
 * ops_cuda.h. Every op of ops.def has a twin (kernels/ops/<op>.cu), so the table is the X-macro over
 * ops.def, indexed by enum align_op_id: a new OP row without its <op>_fwd_cuda fails to link. */
#include <stdio.h>

#include "ops_cuda.h"

static const align_fwd_cuda_fn ops_cuda_table[ALIGN_OP_COUNT] = {
#define OP(name, desc, inputs) name##_fwd_cuda,
#include "ops.def"
#undef OP
};

extern "C" align_fwd_cuda_fn ops_cuda_fwd(const struct align_op *op)
{
	for (int i = 0; op && i < ALIGN_OP_COUNT; i++)
		if (ops_at(i) == op)
			return ops_cuda_table[i];
	return NULL;
}

extern "C" int ops_cuda_fail(const char *call, cudaError_t e, const char *file, int line)
{
	fprintf(stderr, "error: %s failed: %s (%s) at %s:%d\n", call, cudaGetErrorString(e), cudaGetErrorName(e), file,
		line);
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
