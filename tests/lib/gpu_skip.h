/* gpu_skip.h: skip (exit status 77) when there is no CUDA device, and open the device context of a GPU
 * test or benchmark (kernels/cuda/dev.h) with its failure printed. Every test of tests/gpu skips this way
 * so that CI without a GPU stays green; tests/gpu/run-on-gpu.sh treats a skip as a failure. */
#ifndef ALIGN_TESTS_GPU_SKIP_H
#define ALIGN_TESTS_GPU_SKIP_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "dev.h"

/* 1 (after printing "skip: no CUDA device (...)") when the CUDA runtime sees no device, else 0. For code
 * that must return 77 itself (a forked worker); others call gpu_skip_if_none. */
static inline int gpu_none(void)
{
	int ndev = 0;
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e == cudaSuccess && ndev > 0)
		return 0;
	printf("skip: no CUDA device (cudaGetDeviceCount: %s, %d devices)\n",
	       e == cudaSuccess ? "ok" : cudaGetErrorString(e), ndev);
	fflush(stdout);
	return 1;
}

/* Exit 77 with the message above when there is no CUDA device. */
static inline void gpu_skip_if_none(void)
{
	if (gpu_none())
		exit(77);
}

/* Open device 0 into *dev (failures into *err); on failure print "error: <message>" and return 2. */
static inline int gpu_dev_open(struct align_dev *dev, struct align_err *err)
{
	if (align_dev_open(dev, 0, err) == 0)
		return 0;
	fprintf(stderr, "error: %s\n", err->msg);
	return 2;
}

#endif /* ALIGN_TESTS_GPU_SKIP_H */
