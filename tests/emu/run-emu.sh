#!/bin/sh
# run-emu.sh: build tests/gpu/test-ops-cuda.cu against the CUDA twins compiled as host C++ through the
# emulator (tests/emu: fibers for threads, barriers for __syncthreads and shuffles) and run it.
# For a machine without a GPU: it checks the kernels' index arithmetic, barriers and reduction trees
# against the C twins; it does not check the GPU's arithmetic (run the real test on a GPU for that).
# Usage: [EMU_TEST=test-ops-cuda] tests/emu/run-emu.sh [OUTDIR] [-- test arguments]
# Without `--` the test runs with --quick; `--` alone runs it in full.
# EMU_TEST names the test source tests/gpu/$EMU_TEST.cu (test-ops-cuda, test-rows-cuda).
# Twins compiled in: EMU_TWINS (default: every kernels/ops/<op>.cu that uses rows_cuda.cuh or
# ALIGN_CUDA_LAUNCH); the others answer "not built into the emulator" (status 4).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/align-emu}
[ $# -gt 0 ] && shift
if [ "${1:-}" = "--" ]; then
	shift # the test's arguments, possibly none (the full run)
else
	set -- --quick
fi
mkdir -p "$out"
k="$root/kernels"
emu="$root/tests/emu"
cflags="-O2 -g -ffp-contract=off -fno-fast-math -D_GNU_SOURCE -I$k/core -I$k/cuda -I$k/ops -I$emu"
printf '#define ALIGN_HAVE_CUDA 0\n#define ALIGN_HAVE_NCCL 0\n#define ALIGN_VERSION "emu"\n' >"$out/align-config.h"
twins=${EMU_TWINS:-$(cd "$k/ops" && grep -l ALIGN_CUDA_LAUNCH ./*.cu | sed 's|^\./||')}
objs=""
for c in core/status.c core/modes.c core/ops.c $(cd "$k" && ls ops/*.c); do
	gcc -std=c11 $cflags -I"$out" -c "$k/$c" -o "$out/$(basename "${c%.c}").o"
	objs="$objs $out/$(basename "${c%.c}").o"
done
for cu in cuda/ops_cuda.cu $(for t in $twins; do echo "ops/$t"; done); do
	g++ -std=c++17 $cflags -DALIGN_NAN_HOST_EMULATE -x c++ -include "$emu/cuda-emu.h" -c "$k/$cu" \
		-o "$out/$(basename "${cu%.cu}").cu.o"
	objs="$objs $out/$(basename "${cu%.cu}").cu.o"
done
g++ -std=c++17 $cflags -c "$emu/emu.cpp" -o "$out/emu.o"
g++ -std=c++17 $cflags -I"$out" -c "$emu/dev-emu.cpp" -o "$out/dev-emu.o" # the device context (dev.h)
t=${EMU_TEST:-test-ops-cuda}
g++ -std=c++17 $cflags -DALIGN_NAN_HOST_EMULATE -x c++ -include "$emu/cuda-emu.h" -c "$root/tests/gpu/$t.cu" \
	-I"$root/tests/lib" -o "$out/$t.o"
g++ -o "$out/$t-emu" "$out/$t.o" "$out/emu.o" "$out/dev-emu.o" $objs -lm
echo "emu: twins compiled in: $twins" >&2
exec "$out/$t-emu" "$@"
