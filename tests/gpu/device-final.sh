#!/usr/bin/env bash
# device-final.sh: the closing GPU session in one call (after device-ops-cuda.sh ran the CUDA-vs-C driver
# for every op): the router's remaining parameter variants (2, 3) of that driver in the background, every
# other suite-gpu test through run-on-gpu.sh, then every benchmark alone on the GPU. Reports under $OUT.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
rm -rf build-gslim build-gpu && tar -xzf .gpucarry/build-gpu.tar.gz && mv build-gslim build-gpu || exit 2
tl=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${tl:+:$tl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out/ops-cuda" "$out/tests" "$out/bench"
for v in 2 3; do
	(timeout 300 build-gpu/tests/gpu/test-gpu-ops-cuda --op router --variant $v >"$out/ops-cuda/router-v$v.log" 2>&1
	 echo "exit $?" >>"$out/ops-cuda/router-v$v.log") &
done
OUT="$out/tests" timeout 290 bash tests/gpu/run-on-gpu.sh \
	--only '^gpu-(swiglu-table|rows-cuda|digest-cuda|matmul-tc|matmul-impl|align-run-compare|torch-compare)$'
echo "tests: exit $?"
wait
for v in 2 3; do echo "router v$v: $(grep -E '^ops-cuda on' "$out/ops-cuda/router-v$v.log") $(tail -1 "$out/ops-cuda/router-v$v.log")"; done
OUT="$out/bench" timeout 280 bash tests/gpu/run-on-gpu.sh --only '^gpu-(ops|matmul|matmul-lt|digest)$'
echo "benchmarks: exit $?"
