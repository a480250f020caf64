/* run-device: host side of `align run --device cuda` (run-device.h): the device context opened once,
 * pool buffers for every input and output, the op's CUDA twin from the registry (kernels/cuda/ops_cuda.cu)
 * with its default launch on the context's stream, one synchronise and error check after the op, outputs
 * copied back to the host tensors, the pool released for the next call. */
#include "ops_cuda.h"
#include "run-device.h"

#include <stdio.h>

/* ALIGN_OK, or the failed runtime call's message in d->err (status 3) */
static int cuda_ok(struct align_dev *d, cudaError_t e, const char *call, int line)
{
	return e == cudaSuccess ? ALIGN_OK : align_dev_fail(d, call, (int)e, __FILE__, line);
}

static size_t tensor_bytes(const struct align_tensor *t)
{
	return (size_t)align_tensor_numel(t) * align_dtype_size(t->dtype);
}

extern "C" int run_device_open(struct align_dev *d, struct align_err *err)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0)
		return align_fail(err, ALIGN_ERR_INTERNAL, "--device cuda: no CUDA device (%s)",
				  e != cudaSuccess ? cudaGetErrorString(e) : "none found");
	return align_dev_open(d, 0, err);
}

extern "C" int run_device_vendor_gemm(struct align_dev *d, const struct align_modes *m)
{
	void *h = NULL;
	if (m->v[MODE_MATMUL_IMPL] == ALIGN_MATMUL_IMPL_CUBLAS)
		return align_dev_cublas(d, &h);
	if (m->v[MODE_MATMUL_IMPL] == ALIGN_MATMUL_IMPL_CUBLAS_PINNED)
		return align_dev_cublaslt(d, &h);
	return ALIGN_OK;
}

/* Pool buffers for the inputs (copied in) and the outputs (zeroed), all on d->stream. */
static int stage(struct align_dev *d, const struct align_tensor *in, int n_in, struct align_tensor *din,
		 const struct align_tensor *out, int n_out, struct align_tensor *dout)
{
	cudaStream_t s = (cudaStream_t)d->stream;
	for (int i = 0; i < n_in; i++) {
		din[i] = in[i];
		size_t b = tensor_bytes(&in[i]);
		ALIGN_TRY(d->err, align_dev_alloc(d, b, &din[i].data));
		ALIGN_TRY(d->err, cuda_ok(d, cudaMemcpyAsync(din[i].data, in[i].data, b, cudaMemcpyHostToDevice, s),
					  "cudaMemcpyAsync (inputs)", __LINE__));
	}
	for (int k = 0; k < n_out; k++) {
		dout[k] = out[k];
		size_t b = tensor_bytes(&out[k]);
		ALIGN_TRY(d->err, align_dev_alloc(d, b, &dout[k].data));
		ALIGN_TRY(d->err,
			  cuda_ok(d, cudaMemsetAsync(dout[k].data, 0, b, s), "cudaMemsetAsync (outputs)", __LINE__));
	}
	return ALIGN_OK;
}

static int launch(struct align_dev *d, align_fwd_cuda_fn fn, const void *params, const struct align_modes *m,
		  const struct align_tensor *in, int n_in, struct align_tensor *out, int n_out)
{
	struct align_tensor din[8], dout[8];
	if (n_in > 8 || n_out > 8)
		return align_fail(d->err, ALIGN_ERR_INTERNAL, "too many tensors (%d in, %d out)", n_in, n_out);
	ALIGN_TRY(d->err, stage(d, in, n_in, din, out, n_out, dout));
	struct align_launch knobs = {0, 0, 0, 0};
	int rc = fn(params, m, din, n_in, dout, n_out, &knobs, d);
	if (rc)
		return rc; /* the twin printed its message */
	ALIGN_TRY(d->err, align_dev_sync(d));
	for (int k = 0; k < n_out; k++)
		ALIGN_TRY(d->err, cuda_ok(d,
					  cudaMemcpyAsync(out[k].data, dout[k].data, tensor_bytes(&out[k]),
							  cudaMemcpyDeviceToHost, (cudaStream_t)d->stream),
					  "cudaMemcpyAsync (outputs)", __LINE__));
	return align_dev_sync(d);
}

extern "C" int run_device_op(struct align_dev *d, const struct align_op *op, const void *params,
			     const struct align_modes *m, const struct align_tensor *in, int n_in,
			     struct align_tensor *out, int n_out)
{
	align_fwd_cuda_fn fn = ops_cuda_fwd(op);
	if (!fn)
		return align_fail(d->err, ALIGN_ERR_INPUT, "op '%s' has no CUDA twin in this build", op->name);
	int rc = launch(d, fn, params, m, in, n_in, out, n_out);
	if (rc)
		align_dev_sync(d); /* no kernel may still use the pool when it is handed out again */
	align_dev_release_all(d);
	return rc;
}

extern "C" void run_device_close(struct align_dev *d)
{
	align_dev_close(d);
}
