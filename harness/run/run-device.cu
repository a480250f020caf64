/* run-device: host side of `align run --device cuda`: device buffers for every input and output, the
 * op's CUDA twin from the registry (kernels/cuda/ops_cuda.cu) with its default launch, one synchronise and
 * error check after the op, outputs copied back to the host tensors. */
#include "ops_cuda.h"
#include "run-device.h"

#include <stdio.h>

static size_t tensor_bytes(const struct align_tensor *t)
{
	return (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
}

static int fail(const char *call, cudaError_t e)
{
	fprintf(stderr, "error: %s failed: %s (%s)\n", call, cudaGetErrorString(e), __FILE__);
	return 3;
}

extern "C" int run_device_op(const struct align_op *op, const void *params, const struct align_modes *m,
                             const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out,
                             char *name_out, size_t name_len)
{
	align_fwd_cuda_fn fn = ops_cuda_fwd(op);
	if (!fn) {
		fprintf(stderr, "error: op '%s' has no CUDA twin in this build\n", op->name);
		return 2;
	}
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		fprintf(stderr, "error: --device cuda: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return 3;
	}
	cudaDeviceProp prop;
	if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
		snprintf(name_out, name_len, "%s", prop.name);
	struct align_tensor din[8], dout[8];
	int rc = 0, n_alloc_in = 0, n_alloc_out = 0;
	for (int i = 0; i < n_in && !rc; i++, n_alloc_in++) {
		din[i] = in[i];
		size_t b = tensor_bytes(&in[i]);
		if ((e = cudaMalloc(&din[i].data, b ? b : 1)) != cudaSuccess)
			rc = fail("cudaMalloc", e);
		else if ((e = cudaMemcpy(din[i].data, in[i].data, b, cudaMemcpyHostToDevice)) != cudaSuccess)
			rc = fail("cudaMemcpy (inputs)", e);
	}
	for (int k = 0; k < n_out && !rc; k++, n_alloc_out++) {
		dout[k] = out[k];
		size_t b = tensor_bytes(&out[k]);
		if ((e = cudaMalloc(&dout[k].data, b ? b : 1)) != cudaSuccess)
			rc = fail("cudaMalloc", e);
		else if ((e = cudaMemset(dout[k].data, 0, b)) != cudaSuccess)
			rc = fail("cudaMemset", e);
	}
	struct align_launch launch = {0, 0, 0, 0};
	if (!rc)
		rc = fn(params, m, din, n_in, dout, n_out, &launch, 0);
	if (!rc && (e = cudaDeviceSynchronize()) != cudaSuccess)
		rc = fail("the op's kernels", e);
	for (int k = 0; k < n_out && !rc; k++)
		if ((e = cudaMemcpy(out[k].data, dout[k].data, tensor_bytes(&out[k]), cudaMemcpyDeviceToHost)) != cudaSuccess)
			rc = fail("cudaMemcpy (outputs)", e);
	for (int i = 0; i < n_alloc_in; i++)
		cudaFree(din[i].data);
	for (int k = 0; k < n_alloc_out; k++)
		cudaFree(dout[k].data);
	return rc;
}
