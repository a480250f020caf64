#!/usr/bin/env bash
# demo.sh: the README's main job. Installs what is missing, builds align (CPU; CUDA where nvcc is
# present), ingests the two bundled DSv4 logs (Megatron stdout and PaddleFleet workerlog) into a fresh
# demo database and prints the first-diff report. The report's exit code (1: the runs differ) is the
# expected outcome for these logs, so the demo itself exits 0 when the report ran.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/deps.sh || exit 2
build=${ALIGN_BUILD:-build}
[ -d "$build" ] || meson setup "$build" -Dbuildtype=debugoptimized >/dev/null || exit 2
ninja -C "$build" >/dev/null || exit 2
align="$build/harness/align"
db=${ALIGN_DEMO_DB:-demo.db}
rm -f "$db"
"$align" ingest --db "$db" --as megatron refs/logs/megatron-dsv4.log || exit 2
"$align" ingest --db "$db" --as paddle refs/logs/paddle-dsv4.log || exit 2
"$align" report --db "$db" --runs megatron,paddle --first-diff
rc=$?
[ "$rc" -le 1 ] || exit "$rc"
echo "(report exit code $rc: 0 = bitwise equal, 1 = differences found)"
