/* emu.cpp (emulator): the host implementation behind tests/emu/cuda_runtime_api.h and cuda-emu.h.
 * Blocks run one after another; the threads of a block are ucontext fibers scheduled round robin, each
 * running until it finishes or waits at a barrier (__syncthreads, __syncwarp, a shuffle). A round in which
 * every live fiber is waiting and no barrier opens is a deadlock (a barrier not reached by every thread):
 * reported and aborted. Shuffles exchange through a per-warp slot array between two warp barriers.
 * Every CUDA twin of ops.def that is not compiled in gets a weak stub returning ALIGN_ERR_UNSUPPORTED.
 * The device context (kernels/cuda/dev.h) is emulated in dev-emu.cpp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

#include "cuda-emu.h"
#include "ops_cuda.h"

namespace
{

struct fiber {
	ucontext_t ctx;
	align_emu_thread t;
	bool done;
	bool waiting;
};

struct barrier {
	unsigned arrived = 0;
	unsigned long gen = 0;
};

struct block_run {
	std::vector<fiber> fibers;
	ucontext_t sched;
	unsigned live = 0;
	barrier block_bar;
	std::vector<barrier> warp_bar;
	std::vector<unsigned> warp_live;
	std::vector<uint64_t> slots;
	void (*body)(void *) = nullptr;
	void *ctx = nullptr;
	unsigned long progress = 0;
};

block_run *g_run;
fiber *g_cur;
cudaError_t g_last = cudaSuccess;
const size_t STACK = 256 * 1024;

void fiber_main(unsigned idx)
{
	fiber *f = &g_run->fibers[idx];
	g_run->body(g_run->ctx);
	f->done = true;
	g_run->live--;
	unsigned w = idx / 32;
	g_run->warp_live[w]--;
	g_run->progress++;
	/* exited threads no longer count: open barriers that now have everyone */
	barrier *bs[2] = {&g_run->block_bar, &g_run->warp_bar[w]};
	unsigned need[2] = {g_run->live, g_run->warp_live[w]};
	for (int k = 0; k < 2; k++)
		if (bs[k]->arrived > 0 && bs[k]->arrived >= need[k]) {
			bs[k]->arrived = 0;
			bs[k]->gen++;
		}
	swapcontext(&f->ctx, &g_run->sched);
}

void fiber_entry(unsigned lo, unsigned hi)
{
	fiber_main(lo | (hi << 16));
}

void wait_at(barrier *b, unsigned expected)
{
	unsigned long gen = b->gen;
	if (++b->arrived >= expected) {
		b->arrived = 0;
		b->gen++;
		g_run->progress++;
		return;
	}
	while (b->gen == gen) {
		g_cur->waiting = true;
		swapcontext(&g_cur->ctx, &g_run->sched);
		g_cur->waiting = false;
	}
}

unsigned cur_index(void)
{
	return (unsigned)(g_cur - &g_run->fibers[0]);
}

} // namespace

extern "C" align_emu_thread *align_emu_cur(void)
{
	return &g_cur->t;
}

extern "C" void align_emu_syncthreads(void)
{
	wait_at(&g_run->block_bar, g_run->live);
}

extern "C" void align_emu_syncwarp(void)
{
	unsigned w = cur_index() / 32;
	wait_at(&g_run->warp_bar[w], g_run->warp_live[w]);
}

extern "C" uint64_t align_emu_shfl(uint64_t v, int src_lane)
{
	unsigned i = cur_index(), w = i / 32;
	g_run->slots[i] = v;
	align_emu_syncwarp();
	unsigned src = w * 32 + (unsigned)src_lane;
	uint64_t r = src < g_run->fibers.size() ? g_run->slots[src] : v;
	align_emu_syncwarp();
	return r;
}

extern "C" void align_emu_set_error(cudaError_t e)
{
	g_last = e;
}

extern "C" int align_emu_max_threads(void)
{
	const char *s = getenv("ALIGN_EMU_MAX_THREADS");
	int n = s ? atoi(s) : 1024;
	return n >= 32 && n <= 1024 ? n : 1024;
}

extern "C" void align_emu_run_grid(dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *ctx)
{
	unsigned nt = block.x * block.y * block.z;
	std::vector<unsigned char> shared(smem + 16);
	std::vector<char *> stacks(nt);
	for (unsigned i = 0; i < nt; i++)
		if (!(stacks[i] = (char *)malloc(STACK))) {
			fprintf(stderr, "emu: out of memory for fiber stacks\n");
			abort();
		}
	for (unsigned bz = 0; bz < grid.z; bz++)
		for (unsigned by = 0; by < grid.y; by++)
			for (unsigned bx = 0; bx < grid.x; bx++) {
				block_run run;
				g_run = &run;
				run.body = body;
				run.ctx = ctx;
				run.fibers.resize(nt);
				run.live = nt;
				run.warp_bar.resize((nt + 31) / 32);
				run.warp_live.assign((nt + 31) / 32, 0);
				run.slots.assign(nt, 0);
				memset(shared.data(), 0xee, shared.size());
				for (unsigned i = 0; i < nt; i++) {
					fiber &f = run.fibers[i];
					run.warp_live[i / 32]++;
					f.done = f.waiting = false;
					f.t.tid = {i % block.x, i / block.x % block.y, i / (block.x * block.y)};
					f.t.bid = {bx, by, bz};
					f.t.bdim = block;
					f.t.gdim = grid;
					f.t.smem = shared.data();
					getcontext(&f.ctx);
					f.ctx.uc_stack.ss_sp = stacks[i];
					f.ctx.uc_stack.ss_size = STACK;
					f.ctx.uc_link = &run.sched;
					makecontext(&f.ctx, (void (*)())fiber_entry, 2, i & 0xffffu, i >> 16);
				}
				while (run.live > 0) {
					unsigned long before = run.progress;
					bool ran = false;
					for (unsigned i = 0; i < nt; i++) {
						if (run.fibers[i].done)
							continue;
						g_cur = &run.fibers[i];
						swapcontext(&run.sched, &g_cur->ctx);
						ran = true;
					}
					if (ran && run.progress == before) {
						unsigned waiting = 0;
						for (auto &f : run.fibers)
							waiting += !f.done && f.waiting;
						if (waiting == run.live) {
							fprintf(stderr,
								"emu: deadlock in block (%u,%u,%u): %u threads wait at "
								"barriers that never open\n",
								bx, by, bz, waiting);
							abort();
						}
					}
				}
				g_run = nullptr;
				g_cur = nullptr;
			}
	for (char *p : stacks)
		free(p);
}

/* ---- runtime API ---- */

struct align_emu_stream {
	int unused;
};
struct align_emu_event {
	int unused;
};

extern "C" {

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "emulated error";
}
const char *cudaGetErrorName(cudaError_t e)
{
	return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated";
}
cudaError_t cudaGetLastError(void)
{
	cudaError_t e = g_last;
	g_last = cudaSuccess;
	return e;
}
cudaError_t cudaPeekAtLastError(void)
{
	return g_last;
}
cudaError_t cudaGetDeviceCount(int *n)
{
	*n = 1;
	return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return cudaSuccess;
}
cudaError_t cudaSetDevice(int d)
{
	return d == 0 ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "host emulator (tests/emu)");
	p->totalGlobalMem = (size_t)8 << 30;
	p->l2CacheSize = 50u << 20;
	p->multiProcessorCount = 132;
	return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d)
{
	*v = a == cudaDevAttrMultiProcessorCount ? 132 : a == cudaDevAttrMaxSharedMemoryPerBlockOptin ? 232448 : 49152;
	return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n)
{
	*p = aligned_alloc(256, (n + 255) / 256 * 256 + 256);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s)
{
	return cudaMalloc(p, n);
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t s)
{
	return cudaFree(p);
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
	memmove(d, s, n);
	return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
	memmove(d, s, n);
	return cudaSuccess;
}
cudaError_t cudaMemset(void *d, int v, size_t n)
{
	memset(d, v, n);
	return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st)
{
	return cudaMemset(d, v, n);
}
cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	*s = new align_emu_stream();
	return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
	return cudaStreamCreate(s);
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	delete s;
	return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = new align_emu_event();
	return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	delete e;
	return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
	return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	*ms = 1.0f;
	return cudaSuccess;
}

/* every twin of ops.def that is not compiled into the emulator build */
#define OP(name, desc, inputs)                                                                                         \
	__attribute__((weak)) int name##_fwd_cuda(const void *params, const struct align_modes *m,                     \
						  const struct align_tensor *in, int n_in, struct align_tensor *out,   \
						  int n_out, const struct align_launch *launch, struct align_dev *dev) \
	{                                                                                                              \
		fprintf(stderr, "error: %s (cuda): not built into the emulator\n", #name);                             \
		return ALIGN_ERR_UNSUPPORTED;                                                                          \
	}
#include "ops.def"
#undef OP

} /* extern "C" */
