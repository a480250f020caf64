#!/usr/bin/env bash
# device-ops-cuda.sh [SECONDS]: the CUDA-vs-C driver in full on the GPU machine, one process per op in
# parallel (each with its own log under $OUT/ops-cuda/, so an op that runs out of time keeps the others'
# results), then a summary line per op. The carried build (tests/gpu/pack-build.sh) is unpacked first.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
limit=${1:-540}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
if [ ! -x build-gpu/tests/gpu/test-gpu-ops-cuda ]; then
	rm -rf build-gslim build-gpu && tar -xzf .gpucarry/build-gpu.tar.gz && mv build-gslim build-gpu || exit 2
fi
tl=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${tl:+:$tl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out/ops-cuda"
t0=$SECONDS
for op in $(build-gpu/harness/align run --list | grep -v 'block of' | grep -o '^[a-z_0-9]*:' | tr -d :); do
	(timeout "$limit" build-gpu/tests/gpu/test-gpu-ops-cuda --op "$op" >"$out/ops-cuda/$op.log" 2>&1
	 echo "exit $? after $((SECONDS - t0)) s" >>"$out/ops-cuda/$op.log") &
done
wait
for f in "$out"/ops-cuda/*.log; do
	printf '%-14s %s | %s\n' "$(basename "$f" .log)" "$(grep -E '^ops-cuda on' "$f" | tail -1)" "$(tail -1 "$f")"
done
