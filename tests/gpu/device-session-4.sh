#!/usr/bin/env bash
# device-session-4.sh: one call for the GPU-only engines and the new checks: the carried build
# (tests/gpu/pack-build.sh), test-matmul-impl (MATMUL_IMPL=tc/cublas), test-swiglu-table (every bf16
# pattern), bench-matmul-lt (pinned cuBLASLt algorithm), torch-compare, the CUDA-vs-C driver for
# matmul, and the swiglu benchmark lines. Writes session4.md under $OUT.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
exec > >(tee "$out/session.log") 2>&1
rm -rf build-gslim build-gpu && tar -xzf .gpucarry/build-gpu.tar.gz && mv build-gslim build-gpu || exit 2
# cuBLAS: the binaries carry a runpath to /usr/local/cuda/lib64; torch's wheel copy as a fallback
tl=$(python3 -c 'import os, nvidia.cublas as c; print(os.path.join(os.path.dirname(c.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${tl:+:$tl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
t=build-gpu/tests/gpu
md="$out/session4.md"
step() { # step SECONDS TITLE CMD...
	local s=$1 title=$2
	shift 2
	echo "## $title"
	echo '```'
	local t0=$SECONDS
	timeout "$s" "$@" 2>&1 | tail -${TAIL:-60}
	echo "exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s"
	echo '```'
}
{
	echo "# session 4 $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	ldd build-gpu/harness/align | grep -i cublas
	step 60 "test-gpu-swiglu-table" $t/test-gpu-swiglu-table
	TAIL=40 step 200 "test-gpu-matmul-impl" $t/test-gpu-matmul-impl
	step 150 "bench-gpu-matmul-lt" $t/bench-gpu-matmul-lt
	TAIL=30 step 90 "torch-compare" python3 tests/gpu/torch-compare.py build-gpu/harness/align
	TAIL=12 step 60 "test-gpu-ops-cuda --op matmul" sh -c "$t/test-gpu-ops-cuda --op matmul | grep -Ev '^PASS'"
	TAIL=40 step 45 "bench-gpu-ops (swiglu lines)" sh -c "$t/bench-gpu-ops 2>&1 | grep -E 'copy|swiglu' | head -20"
} > "$md" 2>&1
cat "$md"
