/* cuda-mock.h: the CUDA runtime calls of harness/probe/native/probe_cuda.cu, on the host, for
 * tests/probe/deferred.sh (force-included: g++ -include cuda-mock.h -x c++ probe_cuda.cu). Device memory
 * is host memory, launches run every thread of every block in turn (the gather kernel has no barriers),
 * streams are tokens; an event completes once two more events were recorded after it (a GPU that runs
 * two tensors behind the host), so the caller's polling and its release of references are exercised. align_digest_leaves_cuda is the leaf step of
 * harness/core/digest.c (XXH3_64bits per 65536 bytes, libxxhash); the real leaf kernel is checked on a
 * GPU by tests/gpu/test-digest-cuda.cu and tests/gpu/probe-digest-cuda.py. Small chunks (8 leaves) make
 * the chunk bookkeeping roll over. What this proves: the dimension merging, the gather's indexing, the
 * chunks, scratch and flush order, and the Python side (DeviceBatch, Probe's deferred records); not the
 * GPU's behaviour. */
#ifndef PROBE_CUDA_MOCK_H
#define PROBE_CUDA_MOCK_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
struct probe_mock_event {
	unsigned long seq; /* the value of probe_mock_records when it was recorded */
};
typedef struct probe_mock_event *cudaEvent_t;
#define cudaSuccess 0
#define cudaErrorNotReady 600
#define cudaStreamNonBlocking 1
#define cudaEventDisableTiming 2
#define cudaMemcpyDeviceToHost 2
#define cudaMemcpyDeviceToDevice 3
#define __global__
#define __launch_bounds__(n)
#define PROBE_CHUNK_LEAVES 8u

struct probe_mock_idx {
	unsigned x;
};
static struct probe_mock_idx blockIdx, threadIdx, blockDim, gridDim;
#define PROBE_LAUNCH(kernel, grid, cta, stream, args)                                                                  \
	do {                                                                                                           \
		probe_mock_launch(stream);                                                                             \
		gridDim.x = (grid);                                                                                    \
		blockDim.x = (cta);                                                                                    \
		for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)                                             \
			for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++)                                 \
				kernel args;                                                                           \
	} while (0)

static unsigned long probe_mock_records;
static unsigned probe_mock_mallocs;
static unsigned probe_mock_streams;    /* streams created (each a distinct token) */
static unsigned long probe_mock_on[2]; /* kernels and copies launched on the default stream (the caller's,
					  0 in the tests), on any other stream */
static inline void probe_mock_launch(cudaStream_t s)
{
	probe_mock_on[s != 0]++;
}
static inline const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaErrorNotReady ? "not ready" : "mock error";
}
static inline const char *cudaGetErrorName(cudaError_t e)
{
	return e == cudaErrorNotReady ? "cudaErrorNotReady" : "cudaErrorMock";
}
static inline cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f)
{
	*s = (cudaStream_t)(uintptr_t)(0x100 + 2 * ++probe_mock_streams + f);
	return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return cudaSuccess;
}
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f)
{
	(void)s, (void)e, (void)f;
	return cudaSuccess;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f)
{
	(void)f;
	*e = (cudaEvent_t)calloc(1, sizeof **e);
	return *e ? cudaSuccess : 2;
}
static inline cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	free(e);
	return cudaSuccess;
}
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	(void)s;
	e->seq = ++probe_mock_records;
	return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}
static inline cudaError_t cudaEventQuery(cudaEvent_t e)
{
	return probe_mock_records - e->seq >= 2 ? cudaSuccess : cudaErrorNotReady;
}
static inline cudaError_t cudaGetLastError(void)
{
	return cudaSuccess;
}
static inline cudaError_t cudaMalloc(void **p, size_t n)
{
	probe_mock_mallocs++;
	*p = malloc(n ? n : 1);
	return *p ? cudaSuccess : 2;
}
static inline cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}
static inline cudaError_t cudaMallocHost(void **p, size_t n)
{
	*p = malloc(n ? n : 1);
	return *p ? cudaSuccess : 2;
}
static inline cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, int kind, cudaStream_t st)
{
	if (kind == cudaMemcpyDeviceToDevice) /* a scalar's copy (the copy back runs on the library's stream) */
		probe_mock_launch(st);
	memcpy(d, s, n);
	return cudaSuccess;
}

extern "C" int align_digest_leaves_cuda(const void *p, size_t bytes, uint64_t *leaves, cudaStream_t s)
{
	probe_mock_launch(s);
	for (size_t i = 0; i * 65536 < bytes; i++)
		leaves[i] =
			XXH3_64bits((const char *)p + i * 65536, bytes - i * 65536 < 65536 ? bytes - i * 65536 : 65536);
	return 0;
}

/* libalign_probe_cuda.so's per-tensor entry, which digest.py binds too (not used by the deferred path) */
extern "C" int align_digest_cuda(const void *p, size_t bytes, uint64_t *out, cudaStream_t s)
{
	(void)p, (void)bytes, (void)out, (void)s;
	return 3;
}

extern "C" unsigned align_probe_mock_mallocs(void)
{
	return probe_mock_mallocs;
}

/* side 0: launches on the caller's stream (0) so far; 1: on the library's streams */
extern "C" unsigned long align_probe_mock_launches(int side)
{
	return probe_mock_on[side != 0];
}
#endif
