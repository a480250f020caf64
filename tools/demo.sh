#!/usr/bin/env bash
# demo.sh: the README's main job. Installs what is missing, builds align (CPU; CUDA where nvcc is
# present), then the whole workflow on the tiny DSv4 model align runs itself (README "The model"): the
# model as Megatron and as Paddle (each framework's log), both logs ingested into a fresh demo
# database, the first-diff report, the bisection of the switches that flip the loss (each culprit with
# the first block it changes) and the per-block report of the two runs' traces. Then the two bundled DSv4
# logs of real jobs (Megatron stdout and PaddleFleet workerlog) and their first-diff report. The
# scratch files go to $ALIGN_DEMO_DIR (default demo-out/, emptied first). A report's exit code 1 (the
# runs differ) is the expected outcome, so the demo exits 0 when every step ran.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/deps.sh || exit 2
build=${ALIGN_BUILD:-build}
[ -d "$build" ] || meson setup "$build" -Dbuildtype=debugoptimized >/dev/null || exit 2
ninja -C "$build" harness/align >/dev/null || exit 2
align="$root/$build/harness/align"
[ -x "$align" ] || align="$build/harness/align"
db=${ALIGN_DEMO_DB:-demo.db}
out=${ALIGN_DEMO_DIR:-demo-out}
unset ALIGN_BUILD ALIGN_DEMO_DB ALIGN_DEMO_DIR # the demo's own settings: align refuses unknown ALIGN_* variables
rm -rf "$out" && mkdir -p "$out" || exit 2
report() { # report ARGS...: align report, exit 0 or 1 accepted
	"$align" report "$@"
	local rc=$?
	[ "$rc" -le 1 ] || exit "$rc"
	echo "(report exit code $rc: 0 = bitwise equal, 1 = differences found)"
}
echo "== the model as Megatron and as Paddle, both logs ingested, the first difference"
"$align" run model --profile megatron --steps 20 --log "$out/megatron.log" --trace "$out/megatron.atf" || exit 2
"$align" run model --profile paddle --steps 20 --log "$out/paddle.log" --trace "$out/paddle.atf" || exit 2
rm -f "$out/model.db"
"$align" ingest --db "$out/model.db" "$out/megatron.log" "$out/paddle.log" || exit 2
report --db "$out/model.db" --first-diff --limit 3
echo "== which switches flip the loss (each culprit with the first block it changes)"
(cd "$out" && PATH="$(dirname "$align"):$PATH" "$align" bisect --db bisect.db --good profile:megatron \
	--bad profile:paddle -j 2 -- align run model --steps 2)
[ $? -le 1 ] || exit 2
echo "== the per-block report of the two runs' traces: the first divergent block"
"$align" ingest --db "$out/trace.db" "$out/megatron.atf" "$out/paddle.atf" || exit 2
"$align" report --db "$out/trace.db" --first-diff --limit 3 --out "$out/trace-report.txt"
[ $? -le 1 ] || exit 2
# the one line per block of the metrics table is left out here (it is in the file)
grep -Ev '^  [a-z0-9_.]+ +[0-9]+/[0-9]+ bitwise-equal' "$out/trace-report.txt"
echo "(the per-block table: $out/trace-report.txt)"
echo "== the bundled logs of two real DSv4 jobs"
rm -f "$db"
"$align" ingest --db "$db" --as megatron refs/logs/megatron-dsv4.log || exit 2
"$align" ingest --db "$db" --as paddle refs/logs/paddle-dsv4.log || exit 2
report --db "$db" --runs megatron,paddle --first-diff
