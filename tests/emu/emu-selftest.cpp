/* emu-selftest.cpp: the emulator's own checks (tests/emu/emu-selftest.sh builds it with cuda-emu.h
 * force-included, as the twins are). Each case launches a small kernel and compares with what a GPU gives:
 *   barrier    a block-wide tree sum through shared memory with __syncthreads (256 threads, 3 blocks)
 *   shuffle    __shfl_xor_sync / __shfl_down_sync butterfly sums in every warp (96 threads)
 *   exit       threads that return before a __syncthreads do not hold it closed for the others
 *   fpenv      a fiber that changes the rounding mode (fesetround) gets it back after a switch, and the
 *              launching thread's mode is unchanged after the launch (the switch keeps MXCSR per fiber)
 *   stack      deep recursion (64 KiB of stack) in every fiber across barriers
 *   reverse    align_emu_set_reverse: a read of another thread's write without a barrier between them gives
 *              other bytes in reverse order (how test-ops-cuda's second run finds a missing barrier)
 *   deadlock   (argument "deadlock") half the threads wait at a barrier the others never reach: the
 *              emulator must report it and abort (the script checks the message and the signal)
 * Prints "emu-selftest: N passed, N failed"; exit 1 on any failure. */
#include <fenv.h>
#include <stdio.h>
#include <string.h>

static int failed, passed;

static void check(bool ok, const char *what)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	(ok ? passed : failed)++;
}

__global__ void k_barrier(const unsigned *in, unsigned *out)
{
	unsigned *s = (unsigned *)align_emu_cur()->smem;
	unsigned t = threadIdx.x, n = blockDim.x;
	s[t] = in[blockIdx.x * n + t];
	__syncthreads();
	for (unsigned h = n / 2; h > 0; h /= 2) {
		if (t < h)
			s[t] += s[t + h];
		__syncthreads();
	}
	if (t == 0)
		out[blockIdx.x] = s[0];
}

__global__ void k_shuffle(const unsigned *in, unsigned *xor_out, unsigned *down_out)
{
	unsigned t = threadIdx.x, v = in[t], w = v;
	for (int m = 16; m > 0; m /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, m);
	for (unsigned d = 16; d > 0; d /= 2)
		w += __shfl_down_sync(0xffffffffu, w, d);
	xor_out[t] = v;
	down_out[t] = w;
}

__global__ void k_exit(unsigned *out)
{
	unsigned t = threadIdx.x;
	if (t % 3 == 0)
		return;
	out[t] = 1;
	__syncthreads();
	out[t] += 1;
	__syncthreads();
	out[t] += 1;
}

__global__ void k_fpenv(float *out)
{
	unsigned t = threadIdx.x;
	if (t % 2)
		fesetround(FE_UPWARD);
	__syncthreads();
	volatile float a = 1.0f, b = 25.0f; /* 1/25 rounds down to nearest */
	out[t] = a / b;			    /* rounded in the fiber's own mode */
	__syncthreads();
	fesetround(FE_TONEAREST);
}

static unsigned deep(unsigned d)
{
	volatile char pad[1024];
	pad[0] = (char)d;
	if (d == 0)
		return pad[0];
	if (d % 16 == 0)
		__syncthreads();
	return deep(d - 1) + 1 + pad[0] * 0;
}

__global__ void k_stack(unsigned *out)
{
	out[threadIdx.x] = deep(64);
}

/* thread t reads what thread t-1 wrote: with the barrier (sync = 1) in any order, without it only when the
 * threads run first to last (reverse: align_emu_set_reverse) */
__global__ void k_race(unsigned *out, int sync)
{
	unsigned *s = (unsigned *)align_emu_cur()->smem;
	unsigned t = threadIdx.x;
	s[t] = t + 1;
	if (sync)
		__syncthreads();
	out[t] = t ? s[t - 1] : 0;
}

__global__ void k_deadlock(void)
{
	if (threadIdx.x < 16)
		__syncthreads();
	else
		__syncwarp(); /* the warp's barrier: the first 16 are at the block's */
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "deadlock")) {
		align_emu_launch(k_deadlock, dim3(1), dim3(64), 0, nullptr);
		printf("deadlock not detected\n");
		return 1;
	}
	{
		unsigned in[768], out[3] = {0, 0, 0}, want[3] = {0, 0, 0};
		for (unsigned i = 0; i < 768; i++) {
			in[i] = i * 2654435761u;
			want[i / 256] += in[i];
		}
		align_emu_launch(k_barrier, dim3(3), dim3(256), 256 * sizeof(unsigned), nullptr, in, out);
		check(!memcmp(out, want, sizeof out), "barrier: block tree sums");
	}
	{
		unsigned in[96], x[96], d[96];
		bool okx = true, okd = true;
		for (unsigned i = 0; i < 96; i++)
			in[i] = i * i + 7;
		align_emu_launch(k_shuffle, dim3(1), dim3(96), 0, nullptr, in, x, d);
		for (unsigned w = 0; w < 3; w++) {
			unsigned sum = 0;
			for (unsigned l = 0; l < 32; l++)
				sum += in[w * 32 + l];
			for (unsigned l = 0; l < 32; l++)
				okx &= x[w * 32 + l] == sum;
			okd &= d[w * 32] == sum;
		}
		check(okx, "shuffle: xor butterfly sum in every lane");
		check(okd, "shuffle: down sum in lane 0");
	}
	{
		unsigned out[100] = {0};
		bool ok = true;
		align_emu_launch(k_exit, dim3(1), dim3(100), 0, nullptr, out);
		for (unsigned t = 0; t < 100; t++)
			ok &= out[t] == (t % 3 == 0 ? 0u : 3u);
		check(ok, "exit: early returns release the block barrier");
	}
	{
		float out[64];
		bool ok = true;
		align_emu_launch(k_fpenv, dim3(1), dim3(64), 0, nullptr, out);
		volatile float a = 1.0f, b = 25.0f; /* 1/25 rounds down to nearest */
		float near = a / b;
		fesetround(FE_UPWARD);
		float up = a / b;
		fesetround(FE_TONEAREST);
		for (unsigned t = 0; t < 64; t++)
			ok &= out[t] == (t % 2 ? up : near);
		check(ok && up != near, "fpenv: each fiber keeps its rounding mode across switches");
		check(fegetround() == FE_TONEAREST, "fpenv: the launching thread's mode is unchanged");
	}
	{
		unsigned out[128];
		bool ok = true;
		align_emu_launch(k_stack, dim3(2), dim3(128), 0, nullptr, out);
		for (unsigned t = 0; t < 128; t++)
			ok &= out[t] == 64;
		check(ok, "stack: 64 KiB deep in every fiber across barriers");
	}
	{
		unsigned fwd[64], rev[64], fwd_s[64], rev_s[64];
		bool ok = true;
		align_emu_launch(k_race, dim3(1), dim3(64), 64 * sizeof(unsigned), nullptr, fwd, 0);
		align_emu_launch(k_race, dim3(1), dim3(64), 64 * sizeof(unsigned), nullptr, fwd_s, 1);
		align_emu_set_reverse(1);
		align_emu_launch(k_race, dim3(1), dim3(64), 64 * sizeof(unsigned), nullptr, rev, 0);
		align_emu_launch(k_race, dim3(1), dim3(64), 64 * sizeof(unsigned), nullptr, rev_s, 1);
		align_emu_set_reverse(0);
		for (unsigned t = 0; t < 64; t++)
			ok &= fwd[t] == t && fwd_s[t] == t && rev_s[t] == t;
		check(ok,
		      "reverse: with a barrier both orders agree (and without it the forward order hides the race)");
		check(memcmp(fwd, rev, sizeof fwd) != 0,
		      "reverse: a missing barrier changes the bytes in reverse order");
	}
	printf("emu-selftest: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
