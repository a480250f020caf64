/* emu.cpp (emulator): the host implementation behind tests/emu/cuda_runtime_api.h and cuda-emu.h.
 * Blocks run one after another; the threads of a block are fibers scheduled round robin, each running
 * until it finishes or waits at a barrier (__syncthreads, __syncwarp, a shuffle); a fiber whose barrier has
 * not opened is passed over without a switch. align_emu_set_reverse(1) runs the blocks, and the fibers of
 * each round, last to first: a kernel whose result depends on that order (a read of shared or global memory
 * that another thread writes without a barrier between them) then gives other bytes. A round in which no fiber can run while some live is a
 * deadlock (a barrier not reached by every thread): reported and aborted. On x86-64 a fiber switch is a
 * stack switch of a few instructions (emu_switch below: the callee-saved registers, MXCSR and the x87
 * control word); elsewhere ucontext, whose every switch is a system call (it took 40% of an emulator run). Shuffles exchange through a per-warp slot array between two warp barriers.
 * Every CUDA twin of ops.def that is not compiled in gets a weak stub returning ALIGN_ERR_UNSUPPORTED.
 * The device context (kernels/cuda/dev.h) is emulated in dev-emu.cpp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <vector>

#include "cuda-emu.h"
#include "ops_cuda.h"

namespace
{

struct barrier {
	unsigned arrived = 0;
	unsigned long gen = 0;
};

struct fiber {
#if defined(__x86_64__)
	void *sp; /* the saved stack pointer while switched out */
#else
	ucontext_t ctx;
#endif
	align_emu_thread t;
	bool done;
	bool waiting;
	const barrier *wait_bar; /* while waiting: the barrier and its generation when the fiber arrived */
	unsigned long wait_gen;
};

struct block_run {
	std::vector<fiber> fibers;
#if defined(__x86_64__)
	void *sched_sp;
#else
	ucontext_t sched;
#endif
	unsigned live = 0;
	barrier block_bar;
	std::vector<barrier> warp_bar;
	std::vector<unsigned> warp_live;
	std::vector<uint64_t> slots;
	void (*body)(void *) = nullptr;
	void *ctx = nullptr;
};

block_run *g_run;
fiber *g_cur;
cudaError_t g_last = cudaSuccess;
bool g_reverse; /* align_emu_set_reverse: blocks, and the fibers of each round, in reverse order */
const size_t STACK = 256 * 1024;

void fiber_main(unsigned idx);
unsigned cur_index(void);

#if defined(__x86_64__)
} // namespace
/* align_emu_switch(from, to): push the callee-saved registers and the FP control state (MXCSR, x87 control
 * word) on the current stack, store the stack pointer in *from, load `to` and pop the same frame from it */
extern "C" void align_emu_switch(void **from, void *to);
asm(".text\n"
    ".globl align_emu_switch\n"
    ".type align_emu_switch, @function\n"
    "align_emu_switch:\n"
    "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
    "\tsubq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n"
    "\tmovq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n"
    "\tldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n"
    "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret\n"
    ".size align_emu_switch, .-align_emu_switch\n");
namespace
{

void to_fiber(fiber *f)
{
	align_emu_switch(&g_run->sched_sp, f->sp);
}

void to_sched(fiber *f)
{
	align_emu_switch(&f->sp, g_run->sched_sp);
}

/* a new fiber's first switch "returns" into fiber_start with the stack as a call would leave it */
[[noreturn]] void fiber_start(void)
{
	fiber_main(cur_index());
	abort(); /* fiber_main switched away for good */
}

void fiber_init(fiber &f, char *stack, block_run *)
{
	void **top = (void **)(((uintptr_t)stack + STACK) & ~(uintptr_t)15);
	top[-1] = nullptr;		/* padding: fiber_start is entered with rsp = 8 mod 16 */
	top[-2] = (void *)&fiber_start; /* taken by ret */
	for (int r = 3; r <= 8; r++)	/* rbp rbx r12 r13 r14 r15 */
		top[-r] = nullptr;
	uint32_t *fp = (uint32_t *)&top[-9];
	fp[1] = 0;
	asm volatile("stmxcsr %0" : "=m"(fp[0]));
	asm volatile("fnstcw %0" : "=m"(*(uint16_t *)&fp[1]));
	f.sp = &top[-9];
}
#else
void to_fiber(fiber *f)
{
	swapcontext(&g_run->sched, &f->ctx);
}

void to_sched(fiber *f)
{
	swapcontext(&f->ctx, &g_run->sched);
}

void fiber_entry(unsigned lo, unsigned hi)
{
	fiber_main(lo | (hi << 16));
}

void fiber_init(fiber &f, char *stack, block_run *run)
{
	unsigned i = (unsigned)(&f - &run->fibers[0]);
	getcontext(&f.ctx);
	f.ctx.uc_stack.ss_sp = stack;
	f.ctx.uc_stack.ss_size = STACK;
	f.ctx.uc_link = &run->sched;
	makecontext(&f.ctx, (void (*)())fiber_entry, 2, i & 0xffffu, i >> 16);
}
#endif

void fiber_main(unsigned idx)
{
	fiber *f = &g_run->fibers[idx];
	g_run->body(g_run->ctx);
	f->done = true;
	g_run->live--;
	unsigned w = idx / 32;
	g_run->warp_live[w]--;
	/* exited threads no longer count: open barriers that now have everyone */
	barrier *bs[2] = {&g_run->block_bar, &g_run->warp_bar[w]};
	unsigned need[2] = {g_run->live, g_run->warp_live[w]};
	for (int k = 0; k < 2; k++)
		if (bs[k]->arrived > 0 && bs[k]->arrived >= need[k]) {
			bs[k]->arrived = 0;
			bs[k]->gen++;
		}
	to_sched(f); /* never resumed */
}

void wait_at(barrier *b, unsigned expected)
{
	unsigned long gen = b->gen;
	if (++b->arrived >= expected) {
		b->arrived = 0;
		b->gen++;
		return;
	}
	g_cur->waiting = true;
	g_cur->wait_bar = b;
	g_cur->wait_gen = gen;
	to_sched(g_cur); /* the scheduler resumes this fiber only once b->gen has moved */
	g_cur->waiting = false;
}

unsigned cur_index(void)
{
	return (unsigned)(g_cur - &g_run->fibers[0]);
}

} // namespace

extern "C" {
align_emu_thread *align_emu_tcur;
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
	/* fiber stacks kept from launch to launch (allocating them anew faulted their pages in each time) */
	static std::vector<char *> stacks;
	while (stacks.size() < nt) {
		char *p = (char *)malloc(STACK);
		if (!p) {
			fprintf(stderr, "emu: out of memory for fiber stacks\n");
			abort();
		}
		stacks.push_back(p);
	}
	unsigned long nb = (unsigned long)grid.x * grid.y * grid.z;
	for (unsigned long k = 0; k < nb; k++) {
		unsigned long b = g_reverse ? nb - 1 - k : k;
		unsigned bx = (unsigned)(b % grid.x), by = (unsigned)(b / grid.x % grid.y),
			 bz = (unsigned)(b / ((unsigned long)grid.x * grid.y));
		{
			{
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
					fiber_init(f, stacks[i], &run);
				}
				while (run.live > 0) {
					bool ran = false;
					for (unsigned j = 0; j < nt; j++) {
						fiber &f = run.fibers[g_reverse ? nt - 1 - j : j];
						if (f.done || (f.waiting && f.wait_bar->gen == f.wait_gen))
							continue;
						g_cur = &f;
						align_emu_tcur = &f.t;
						to_fiber(&f);
						ran = true;
					}
					if (!ran) {
						fprintf(stderr,
							"emu: deadlock in block (%u,%u,%u): %u threads wait at "
							"barriers "
							"that never open\n",
							bx, by, bz, run.live);
						abort();
					}
				}
				g_run = nullptr;
				g_cur = nullptr;
				align_emu_tcur = nullptr;
			}
		}
	}
}

extern "C" void align_emu_set_reverse(int on)
{
	g_reverse = on != 0;
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
