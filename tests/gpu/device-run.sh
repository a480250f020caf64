#!/usr/bin/env bash
# device-run.sh SECONDS REGEX [SECONDS REGEX]...: on the GPU machine (device tool, carried build from
# tests/gpu/pack-build.sh), run tests/gpu/run-on-gpu.sh once per (time limit, --only regex) pair, each
# into its own folder $OUT/part<i> (so a part that runs out of time does not lose the others' reports).
# cuBLAS comes from /usr/local/cuda/lib64 (the binaries' runpath) or, failing that, torch's wheel.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
root=$(cd "$(dirname "$0")/../.." && pwd)
tl=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${tl:+:$tl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
i=0
while [ $# -ge 2 ]; do
	i=$((i + 1))
	mkdir -p "$out/part$i"
	echo "== part $i: --only '$2' (at most $1 s)"
	OUT="$out/part$i" timeout "$1" bash "$root/tests/gpu/run-on-gpu.sh" --only "$2"
	echo "== part $i: exit $?"
	shift 2
done
