/* cuda-emu.h (emulator): force-included (g++ -include) into a CUDA twin's .cu compiled as C++, so that
 * its kernels run on the host: every CUDA thread of a block is a cooperative fiber;
 * __syncthreads, __syncwarp and the warp shuffles are barriers between those fibers; blocks run one
 * after another. Only what the twins use is provided. Launches go through ALIGN_CUDA_LAUNCH
 * (kernels/cuda/rows_cuda.cuh), dynamic shared memory through align_cuda_dyn_smem().
 * Purpose: run tests/gpu/test-ops-cuda.cu against the twins' kernel logic on a machine without a GPU
 * (tests/emu/run-emu.sh). It proves index arithmetic, barriers and reduction trees, not speed, and
 * not the GPU's own arithmetic (the real check is the same test on a GPU). */
#ifndef ALIGN_CUDA_EMU_H
#define ALIGN_CUDA_EMU_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#define ALIGN_CUDA_EMU 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c)
	{
	}
};
struct uint3_emu {
	unsigned x, y, z;
};
struct __attribute__((aligned(16))) uint4 {
	unsigned x, y, z, w;
};
struct __attribute__((aligned(16))) float4 {
	float x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
	unsigned x, y;
};
struct __attribute__((aligned(8))) float2 {
	float x, y;
};

static inline float4 make_float4(float x, float y, float z, float w)
{
	return float4{x, y, z, w};
}
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
	return uint4{x, y, z, w};
}

/* the running fiber's coordinates (emu.cpp) */
struct align_emu_thread {
	uint3_emu tid, bid;
	dim3 bdim, gdim;
	unsigned char *smem;
};
/* set by the scheduler (emu.cpp) before each switch into a fiber: a variable, not a call, because the twins
 * read threadIdx in their inner loops */
extern "C" struct align_emu_thread *align_emu_tcur;
static inline struct align_emu_thread *align_emu_cur(void)
{
	return align_emu_tcur;
}
extern "C" void align_emu_syncthreads(void);
extern "C" void align_emu_syncwarp(void);
extern "C" uint64_t align_emu_shfl(uint64_t v, int src_lane_abs);

#define threadIdx (align_emu_cur()->tid)
#define blockIdx (align_emu_cur()->bid)
#define blockDim (align_emu_cur()->bdim)
#define gridDim (align_emu_cur()->gdim)

static inline void __syncthreads(void)
{
	align_emu_syncthreads();
}
/* the emulated threads are fibers of one OS thread that switch only at barriers and shuffles, so a plain
 * read-modify-write is atomic here (the order of the adds is the fibers' order, one of the GPU's orders) */
static inline float atomicAdd(float *p, float v)
{
	float old = *p;
	*p = old + v;
	return old;
}
static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
	(void)mask;
	align_emu_syncwarp();
}

template <class T> static inline T align_emu_shfl_t(T v, int lane)
{
	static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
	uint64_t u = 0;
	__builtin_memcpy(&u, &v, sizeof v);
	u = align_emu_shfl(u, lane);
	T r;
	__builtin_memcpy(&r, &u, sizeof r);
	return r;
}
static inline unsigned align_emu_lane(void)
{
	return align_emu_cur()->tid.x % 32u;
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	unsigned lane = align_emu_lane(), seg = lane / width * width;
	return align_emu_shfl_t(v, (int)(seg + ((unsigned)src % width)));
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32)
{
	unsigned lane = align_emu_lane(), seg = lane / width * width;
	unsigned src = lane - seg + d < (unsigned)width ? lane + d : lane;
	return align_emu_shfl_t(v, (int)src);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32)
{
	unsigned lane = align_emu_lane(), seg = lane / width * width;
	unsigned src = seg + (((lane - seg) ^ (unsigned)m) % width);
	return align_emu_shfl_t(v, (int)src);
}
template <class T> static inline T __ldg(const T *p)
{
	return *p;
}
/* cache-hinted loads and stores (evict-first): plain accesses on the host */
template <class T> static inline T __ldcs(const T *p)
{
	return *p;
}
template <class T> static inline void __stcs(T *p, T v)
{
	*p = v;
}

/* Threads per block a kernel "can" use: $ALIGN_EMU_MAX_THREADS (default 1024), so that tests can make
 * launches with more threads fail as they do on a GPU when registers run out (emu.cpp). */
extern "C" int align_emu_max_threads(void);

struct cudaFuncAttributes {
	int maxThreadsPerBlock;
	int numRegs;
	size_t sharedSizeBytes;
};

template <class K> static inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, K k)
{
	(void)k;
	a->maxThreadsPerBlock = align_emu_max_threads();
	a->numRegs = 32;
	a->sharedSizeBytes = 0;
	return cudaSuccess;
}

/* Run kernel k on grid x block with `smem` bytes of dynamic shared memory (emu.cpp runs the fibers). */
extern "C" void align_emu_run_grid(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx);
extern "C" void align_emu_set_error(cudaError_t e);
/* on: later launches run their blocks, and the threads of each scheduling round, last to first (emu.cpp) */
extern "C" void align_emu_set_reverse(int on);

template <class F> static void align_emu_trampoline(void *ctx)
{
	(*(F *)ctx)();
}

template <class... P, class... A>
static void align_emu_launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A... args)
{
	(void)s;
	auto body = [&]() { k(((P)args)...); };
	unsigned nt = block.x * block.y * block.z;
	if (nt == 0 || nt > (unsigned)align_emu_max_threads() || smem > 232448) {
		align_emu_set_error(cudaErrorInvalidValue);
		return;
	}
	align_emu_run_grid(grid, block, smem, align_emu_trampoline<decltype(body)>, &body);
}

template <class K> static inline cudaError_t cudaFuncSetAttribute(K k, enum cudaFuncAttribute a, int v)
{
	(void)k;
	(void)a;
	return v <= 232448 ? cudaSuccess : cudaErrorInvalidValue;
}

#endif
