#!/usr/bin/env bash
# device-session-3.sh: the framework-mimic check in one short call: the carried build
# (tests/gpu/pack-build.sh), PyTorch eager CUDA vs align's *-cuda profiles (torch-compare.py, with the
# reduction-order probe), and the CUDA-vs-C driver --quick for the ops that read the new switches
# (GPU-only mode sets: determinism, launch and batch invariance). Writes mimic.md under $OUT.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
exec > >(tee "$out/session.log") 2>&1
rm -rf build-gslim build-gpu && tar -xzf .gpucarry/build-gpu.tar.gz && mv build-gslim build-gpu || exit 2
t=build-gpu/tests/gpu
md="$out/mimic.md"
{
	echo "# mimic session $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null)"
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	echo '```'
	timeout 240 python3 tests/gpu/torch-compare.py build-gpu/harness/align --keep "$out/tc"
	echo "torch-compare exit $?"
	echo '```'
	echo '```'
	for op in ${OPS:-router mhc_pre swiglu mhc_head}; do
		timeout 120 $t/test-gpu-ops-cuda --quick --op $op 2>&1 | grep -E "^(FAIL|ops-cuda|not supported)" | tail -8
	done
	echo '```'
} > "$md" 2>&1
cat "$md"
