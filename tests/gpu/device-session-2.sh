#!/usr/bin/env bash
# device-session-2.sh: a GPU session that fits one 10-minute call: the carried build
# (tests/gpu/pack-build.sh), the CUDA-vs-C driver in full for one op ($1, default mhc_post) and
# --quick for all ops, the other GPU tests, align run cuda vs cpu for every op x profile, and the
# op and matmul benchmarks. Writes gpu-session.md and session.log under $OUT.
set -uo pipefail
out=${OUT:?OUT must name the output folder}
full_op=${1:-mhc_post}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
exec > >(tee "$out/session.log") 2>&1
rm -rf build-gslim build-gpu && tar -xzf .gpucarry/build-gpu.tar.gz && mv build-gslim build-gpu || exit 2
t=build-gpu/tests/gpu
md="$out/gpu-session.md"
{
	echo "# GPU session $(date -u +%FT%TZ)"
	echo
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	echo
	echo '## CUDA twin vs C twin (test-gpu-ops-cuda)'
	echo '```'
	timeout 200 $t/test-gpu-ops-cuda --op "$full_op" 2>&1 | grep -E "^(FAIL|ops-cuda|not supported)" | tail -15
	timeout 150 $t/test-gpu-ops-cuda --quick 2>&1 | grep -E "^(FAIL|ops-cuda|not supported)" | tail -15
	echo '```'
	for x in test-gpu-digest-cuda test-gpu-matmul-tc test-gpu-rows-cuda; do
		timeout 60 $t/$x >/dev/null 2>&1; echo "$x: exit $?"
	done
} > "$md"
cat "$md"
bash tests/gpu/align-run-compare.sh build-gpu/harness/align >> "$md" 2>&1
{
	echo; echo '## bench-gpu-ops'; echo
	timeout 120 $t/bench-gpu-ops 2>&1 | tail -30
	echo; echo '## bench-gpu-matmul'; echo
	timeout 150 $t/bench-gpu-matmul 2>&1 | tail -40
} >> "$md"
cat "$md" | tail -80
