#!/usr/bin/env bash
# device-final2.sh: the last GPU call of the session: test-matmul-impl's failures shown, the router's
# parameter variant 3 of the CUDA-vs-C driver (background), the script tests and small GPU tests through
# run-on-gpu.sh, then every benchmark alone on the GPU. Reports under $OUT.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
rm -rf build-gslim build-gpu && tar -xzf .gpucarry/build-gpu.tar.gz && mv build-gslim build-gpu || exit 2
tl=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${tl:+:$tl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out/ops-cuda" "$out/tests" "$out/bench"
(timeout 270 build-gpu/tests/gpu/test-gpu-ops-cuda --op router --variant 3 >"$out/ops-cuda/router-v3.log" 2>&1
 echo "exit $?" >>"$out/ops-cuda/router-v3.log") &
timeout 90 build-gpu/tests/gpu/test-gpu-matmul-impl >"$out/matmul-impl.log" 2>&1
echo "matmul-impl: exit $?"; grep -E "^FAIL" "$out/matmul-impl.log" | head -20
OUT="$out/tests" timeout 200 bash tests/gpu/run-on-gpu.sh \
	--only '^gpu-(swiglu-table|rows-cuda|digest-cuda|matmul-tc|align-run-compare|torch-compare)$'
echo "tests: exit $?"
wait
echo "router v3: $(grep -E '^ops-cuda on' "$out/ops-cuda/router-v3.log") $(tail -1 "$out/ops-cuda/router-v3.log")"
OUT="$out/bench" timeout 240 bash tests/gpu/run-on-gpu.sh --only '^gpu-(ops|matmul|matmul-lt|digest)$'
echo "benchmarks: exit $?"
