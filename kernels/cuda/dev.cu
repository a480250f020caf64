/* dev.cu: the device context of dev.h over the CUDA runtime, cuBLAS and cuBLASLt. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include <nvtx3/nvToolsExtMemCudaRt.h>

#include "dev.h"

#define DEV_TRY(d, call)                                                                                               \
	do {                                                                                                           \
		cudaError_t e_ = (call);                                                                               \
		if (e_ != cudaSuccess)                                                                                 \
			return align_dev_fail((d), #call, (int)e_, __FILE__, __LINE__);                                \
	} while (0)

extern "C" int align_dev_fail(struct align_dev *d, const char *call, int cuda_error, const char *file, int line)
{
	cudaError_t e = (cudaError_t)cuda_error;
	return align_fail(d ? d->err : NULL, ALIGN_ERR_INTERNAL, "%s failed: %s (%s) at %s:%d", call,
			  cudaGetErrorString(e), cudaGetErrorName(e), file, line);
}

extern "C" int align_dev_available(void)
{
	int n = 0;
	return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

extern "C" int align_dev_open(struct align_dev *d, int ordinal, struct align_err *err)
{
	memset(d, 0, sizeof *d);
	d->err = err;
	d->ordinal = ordinal;
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n == 0)
		return align_fail(err, ALIGN_ERR_INTERNAL, "no CUDA device (%s)",
				  e != cudaSuccess ? cudaGetErrorString(e) : "none found");
	if (ordinal < 0 || ordinal >= n)
		return align_fail(err, ALIGN_ERR_INPUT, "CUDA device %d does not exist (%d found)", ordinal, n);
	DEV_TRY(d, cudaSetDevice(ordinal));
	cudaDeviceProp prop;
	DEV_TRY(d, cudaGetDeviceProperties(&prop, ordinal));
	snprintf(d->name, sizeof d->name, "%s", prop.name);
	d->sm_count = prop.multiProcessorCount;
	d->cc_major = prop.major;
	d->cc_minor = prop.minor;
	d->total_mem = prop.totalGlobalMem;
	DEV_TRY(d, cudaDeviceGetAttribute(&d->max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal));
	DEV_TRY(d, cudaDriverGetVersion(&d->driver_version));
	DEV_TRY(d, cudaRuntimeGetVersion(&d->runtime_version));
	cudaStream_t s;
	DEV_TRY(d, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	d->stream = s;
	return ALIGN_OK;
}

extern "C" void align_dev_close(struct align_dev *d)
{
	if (d->stream)
		cudaStreamSynchronize((cudaStream_t)d->stream);
	for (int i = 0; i < d->n_pool; i++)
		cudaFree(d->pool[i].p);
	d->n_pool = 0;
	if (d->scratch)
		cudaFree(d->scratch);
	d->scratch = NULL;
	d->scratch_bytes = 0;
	if (d->cublas)
		cublasDestroy((cublasHandle_t)d->cublas);
	if (d->cublaslt)
		cublasLtDestroy((cublasLtHandle_t)d->cublaslt);
	d->cublas = d->cublaslt = NULL;
	if (d->stream)
		cudaStreamDestroy((cudaStream_t)d->stream);
	d->stream = NULL;
}

extern "C" int align_dev_alloc(struct align_dev *d, size_t bytes, void **p)
{
	int best = -1;
	for (int i = 0; i < d->n_pool; i++)
		if (!d->pool[i].used && d->pool[i].bytes >= bytes &&
		    (best < 0 || d->pool[i].bytes < d->pool[best].bytes))
			best = i;
	if (best < 0) {
		if (d->n_pool == ALIGN_DEV_POOL)
			return align_fail(d->err, ALIGN_ERR_INTERNAL, "device pool full (%d live allocations)",
					  ALIGN_DEV_POOL);
		void *q = NULL;
		DEV_TRY(d, cudaMalloc(&q, bytes ? bytes : 1));
		d->pool[d->n_pool] = (struct align_dev_block){q, bytes ? bytes : 1, 0};
		best = d->n_pool++;
	}
	d->pool[best].used = 1;
	*p = d->pool[best].p;
	return ALIGN_OK;
}

extern "C" void align_dev_release_all(struct align_dev *d)
{
	for (int i = 0; i < d->n_pool; i++)
		d->pool[i].used = 0;
}

extern "C" int align_dev_scratch(struct align_dev *d, size_t bytes, void **p)
{
	if (bytes > d->scratch_bytes) {
		DEV_TRY(d, cudaStreamSynchronize((cudaStream_t)d->stream)); /* no kernel still reads the old one */
		if (d->scratch)
			DEV_TRY(d, cudaFree(d->scratch));
		d->scratch = NULL;
		d->scratch_bytes = 0;
		DEV_TRY(d, cudaMalloc(&d->scratch, bytes));
		d->scratch_bytes = bytes;
	}
	*p = d->scratch;
	return ALIGN_OK;
}

extern "C" int align_dev_cublas(struct align_dev *d, void **handle)
{
	if (!d->cublas) {
		cublasHandle_t h;
		cublasStatus_t s = cublasCreate(&h);
		if (s != CUBLAS_STATUS_SUCCESS)
			return align_fail(d->err, ALIGN_ERR_INTERNAL, "cublasCreate failed: %s",
					  cublasGetStatusString(s));
		if ((s = cublasSetStream(h, (cudaStream_t)d->stream)) != CUBLAS_STATUS_SUCCESS) {
			cublasDestroy(h);
			return align_fail(d->err, ALIGN_ERR_INTERNAL, "cublasSetStream failed: %s",
					  cublasGetStatusString(s));
		}
		d->cublas = h;
		cublasGetVersion(h, &d->cublas_version);
	}
	*handle = d->cublas;
	return ALIGN_OK;
}

extern "C" int align_dev_cublaslt(struct align_dev *d, void **handle)
{
	if (!d->cublaslt) {
		cublasLtHandle_t h;
		cublasStatus_t s = cublasLtCreate(&h);
		if (s != CUBLAS_STATUS_SUCCESS)
			return align_fail(d->err, ALIGN_ERR_INTERNAL, "cublasLtCreate failed: %s",
					  cublasGetStatusString(s));
		d->cublaslt = h;
		d->cublaslt_version = cublasLtGetVersion();
	}
	*handle = d->cublaslt;
	return ALIGN_OK;
}

extern "C" void align_dev_mark_written(struct align_dev *d, const void *p, size_t bytes)
{
	static nvtxDomainHandle_t domain; /* created on first use; NULL without a tool, which NVTX accepts */
	static int have_domain;
	if (!p || bytes == 0)
		return;
	if (!have_domain) {
		domain = nvtxDomainCreateA("align");
		have_domain = 1;
	}
	nvtxMemVirtualRangeDesc_t range;
	range.size = bytes;
	range.ptr = p;
	nvtxMemMarkInitializedBatch_t batch;
	memset(&batch, 0, sizeof batch);
	batch.extCompatID = NVTX_EXT_COMPATID_MEM;
	batch.structSize = sizeof batch;
	batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
	batch.regionDescCount = 1;
	batch.regionDescElementSize = sizeof range;
	batch.regionDescElements = &range;
	nvtxMemCudaMarkInitialized(domain, (cudaStream_t)d->stream, 0, &batch);
}

extern "C" int align_dev_sync(struct align_dev *d)
{
	DEV_TRY(d, cudaStreamSynchronize((cudaStream_t)d->stream));
	DEV_TRY(d, cudaGetLastError());
	return ALIGN_OK;
}
