#!/usr/bin/env bash
# emu-selftest.sh: build tests/emu/emu-selftest.cpp against the emulator (emu.cpp, cuda-emu.h) and run it:
# barriers, shuffles, early exits, per-fiber FP state, deep stacks, and that a deadlocked block is reported
# (message on stderr, abort) rather than hanging. Skips (77) without g++.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v g++ >/dev/null 2>&1 || { echo "skip: no g++"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
emu="$root/tests/emu"
cflags=(-O2 -g -ffp-contract=off -fno-fast-math -D_GNU_SOURCE -I"$root/kernels/core" -I"$root/kernels/cuda"
	-I"$root/kernels/ops" -I"$emu")
printf '#define ALIGN_HAVE_CUDA 0\n#define ALIGN_HAVE_NCCL 0\n#define ALIGN_VERSION "emu"\n' >"$out/align-config.h"
g++ -std=c++17 "${cflags[@]}" -I"$out" -c "$emu/emu.cpp" -o "$out/emu.o" || exit 2
g++ -std=c++17 "${cflags[@]}" -x c++ -include "$emu/cuda-emu.h" -frounding-math -c "$emu/emu-selftest.cpp" -o "$out/t.o" || exit 2
g++ -o "$out/emu-selftest" "$out/t.o" "$out/emu.o" -lm || exit 2
"$out/emu-selftest"
rc=$?
# in a shell of its own whose stderr is dropped: it, not this one, prints bash's "Aborted" line
bash -c '"$0" deadlock >"$1" 2>"$2"; exit $?' "$out/emu-selftest" "$out/dl.out" "$out/dl.err" 2>/dev/null
drc=$?
if [ "$drc" -ge 128 ] && grep -q 'emu: deadlock in block (0,0,0): 32 threads wait at barriers that never open' "$out/dl.err"; then
	echo "ok deadlock: reported and aborted (exit $drc)"
else
	echo "FAIL deadlock: exit $drc, stderr:"
	cat "$out/dl.err" "$out/dl.out"
	rc=1
fi
exit $rc
