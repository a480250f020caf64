/* dev-emu.cpp (emulator): the device context of kernels/cuda/dev.h for the host emulator build
 * (tests/emu/run-emu.sh), over the emulated runtime of emu.cpp. It mirrors kernels/cuda/dev.cu without
 * cuBLAS: align_dev_cublas / align_dev_cublaslt answer ALIGN_ERR_UNSUPPORTED (the cuBLAS engines are not
 * built into the emulator). Same contracts as dev.h: failures set *d->err and return its status. */
#include <stdio.h>
#include <string.h>

#include "cuda-emu.h"
#include "dev.h"

extern "C" {

int align_dev_fail(struct align_dev *d, const char *call, int cuda_error, const char *file, int line)
{
	cudaError_t e = (cudaError_t)cuda_error;
	return align_fail(d ? d->err : NULL, ALIGN_ERR_INTERNAL, "%s failed: %s (%s) at %s:%d", call,
			  cudaGetErrorString(e), cudaGetErrorName(e), file, line);
}

int align_dev_available(void)
{
	int n = 0;
	return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

int align_dev_open(struct align_dev *d, int ordinal, struct align_err *err)
{
	memset(d, 0, sizeof *d);
	d->err = err;
	d->ordinal = ordinal;
	if (ordinal != 0)
		return align_fail(err, ALIGN_ERR_INPUT, "CUDA device %d does not exist (1 found)", ordinal);
	struct cudaDeviceProp prop;
	cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
	if (e != cudaSuccess)
		return align_dev_fail(d, "cudaGetDeviceProperties", (int)e, __FILE__, __LINE__);
	snprintf(d->name, sizeof d->name, "%s", prop.name);
	d->sm_count = prop.multiProcessorCount;
	d->cc_major = 9;
	d->total_mem = prop.totalGlobalMem;
	cudaDeviceGetAttribute(&d->max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal);
	cudaStream_t s;
	e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (e != cudaSuccess)
		return align_dev_fail(d, "cudaStreamCreateWithFlags", (int)e, __FILE__, __LINE__);
	d->stream = s;
	return ALIGN_OK;
}

void align_dev_close(struct align_dev *d)
{
	if (d->stream)
		cudaStreamSynchronize((cudaStream_t)d->stream);
	for (int i = 0; i < d->n_pool; i++)
		cudaFree(d->pool[i].p);
	d->n_pool = 0;
	cudaFree(d->scratch);
	d->scratch = NULL;
	d->scratch_bytes = 0;
	if (d->stream)
		cudaStreamDestroy((cudaStream_t)d->stream);
	d->stream = NULL;
}

int align_dev_alloc(struct align_dev *d, size_t bytes, void **p)
{
	for (int i = 0; i < d->n_pool; i++)
		if (!d->pool[i].used && d->pool[i].bytes >= bytes) {
			d->pool[i].used = 1;
			*p = d->pool[i].p;
			return ALIGN_OK;
		}
	if (d->n_pool == ALIGN_DEV_POOL)
		return align_fail(d->err, ALIGN_ERR_INTERNAL, "device pool full (%d blocks)", ALIGN_DEV_POOL);
	cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
	if (e != cudaSuccess)
		return align_dev_fail(d, "cudaMalloc", (int)e, __FILE__, __LINE__);
	d->pool[d->n_pool++] = {*p, bytes, 1};
	return ALIGN_OK;
}

void align_dev_release_all(struct align_dev *d)
{
	for (int i = 0; i < d->n_pool; i++)
		d->pool[i].used = 0;
}

int align_dev_scratch(struct align_dev *d, size_t bytes, void **p)
{
	if (d->scratch_bytes < bytes) {
		cudaFree(d->scratch);
		d->scratch = NULL;
		d->scratch_bytes = 0;
		cudaError_t e = cudaMalloc(&d->scratch, bytes);
		if (e != cudaSuccess)
			return align_dev_fail(d, "cudaMalloc", (int)e, __FILE__, __LINE__);
		d->scratch_bytes = bytes;
	}
	*p = d->scratch;
	return ALIGN_OK;
}

int align_dev_cublas(struct align_dev *d, void **handle)
{
	*handle = NULL;
	return align_fail(d->err, ALIGN_ERR_UNSUPPORTED, "cuBLAS is not built into the emulator");
}

int align_dev_cublaslt(struct align_dev *d, void **handle)
{
	*handle = NULL;
	return align_fail(d->err, ALIGN_ERR_UNSUPPORTED, "cuBLASLt is not built into the emulator");
}

void align_dev_mark_written(struct align_dev *d, const void *p, size_t bytes)
{
	(void)d, (void)p, (void)bytes; /* no sanitizer in the emulator */
}

int align_dev_sync(struct align_dev *d)
{
	cudaError_t e = cudaStreamSynchronize((cudaStream_t)d->stream);
	return e == cudaSuccess ? ALIGN_OK : align_dev_fail(d, "cudaStreamSynchronize", (int)e, __FILE__, __LINE__);
}

} /* extern "C" */
