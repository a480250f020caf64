/* cuda_check.h: the one CUDA error check of the GPU tests and benchmarks (the .cu files of tests/gpu).
 * CK(call): evaluate a CUDA runtime call; on failure print "error: <call> failed: <string> (<name>) at
 * file:line" on stderr and return 2 from the calling function (exit status 2: host or CUDA error).
 * Use it in functions that return int with 0 for success. Also builds for the host emulator (tests/emu),
 * whose cuda_runtime_api.h provides the same calls. */
#ifndef ALIGN_TESTS_CUDA_CHECK_H
#define ALIGN_TESTS_CUDA_CHECK_H

#include <stdio.h>

#include <cuda_runtime_api.h>

/* Print the failure of call (error e at file:line); returns 2. */
static inline int cuda_check_fail(const char *call, cudaError_t e, const char *file, int line)
{
	fprintf(stderr, "error: %s failed: %s (%s) at %s:%d\n", call, cudaGetErrorString(e), cudaGetErrorName(e), file,
		line);
	return 2;
}

#define CK(call)                                                                                                       \
	do {                                                                                                           \
		cudaError_t ck_e_ = (call);                                                                            \
		if (ck_e_ != cudaSuccess)                                                                              \
			return cuda_check_fail(#call, ck_e_, __FILE__, __LINE__);                                      \
	} while (0)

#endif /* ALIGN_TESTS_CUDA_CHECK_H */
