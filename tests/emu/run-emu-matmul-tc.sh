#!/bin/sh
# run-emu-matmul-tc.sh: build kernels/ops/matmul_tc.cu for the host emulator (tests/emu) with the driver
# tests/emu/emu-matmul-tc.cpp and run it: the tensor-core matmul's indexing, swizzle, fragment layouts,
# pipeline and epilogue against a binary64 reference, and its row invariance, on a machine without a GPU.
# Usage: tests/emu/run-emu-matmul-tc.sh [N K M]      (objects in ${OUT:-/tmp/align-emu-tc})
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/align-emu-tc}
mkdir -p "$out"
emu="$root/tests/emu"
cflags="-O2 -g -ffp-contract=off -fno-fast-math -D_GNU_SOURCE -I$root/kernels/core -I$root/kernels/cuda -I$root/kernels/ops -I$emu"
g++ -std=c++17 $cflags -x c++ -include "$emu/cuda-emu.h" -c "$root/kernels/ops/matmul_tc.cu" -o "$out/matmul_tc.o"
g++ -std=c++17 $cflags -c "$emu/emu.cpp" -o "$out/emu.o"
g++ -std=c++17 $cflags -include "$emu/cuda-emu.h" -c "$root/tests/emu/emu-matmul-tc.cpp" -o "$out/emu-matmul-tc.o"
g++ -o "$out/emu-matmul-tc" "$out/emu-matmul-tc.o" "$out/matmul_tc.o" "$out/emu.o" -lm
exec "$out/emu-matmul-tc" "$@"
