#!/usr/bin/env bash
# run-fuzz.sh BUILD SECONDS [TARGET...]: fuzz each target (default: all of tests/fuzz/corpus/) for
# SECONDS with its dictionary, one after another (one fuzzer at a time: nice, one process). A finding
# ends that target's run (FUZZ_FORK=1: fork mode, which goes on after findings but re-runs the corpus
# per job: a slow target then runs 10x fewer inputs). BUILD is a -Dfuzz=true build (CC=clang meson setup BUILD
# -Dcuda=disabled -Dfuzz=true). New corpus inputs go to $FUZZ_WORK/<target>/corpus (default
# /tmp/align-fuzz-work), findings to $FUZZ_WORK/<target>/artifacts/; each target's last libFuzzer stats
# line is appended to $FUZZ_WORK/summary.tsv (target, seconds, execs, cov, ft, findings).
# Copy a finding into tests/fuzz/crashes/<target>/ once fixed, so that the test suite replays it.
# FUZZ_JOBS=N: N targets at once (one process each; a many-core machine), else one after another.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1 secs=$2
shift 2
work=${FUZZ_WORK:-/tmp/align-fuzz-work}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(ls "$here/corpus")
for t in "${targets[@]}"; do
	[ -x "$build/tests/fuzz/fuzz-$t" ] || { echo "run-fuzz: no $build/tests/fuzz/fuzz-$t" >&2; exit 2; }
done
fuzz_one() {
	local t=$1 exe=$build/tests/fuzz/fuzz-$1 log start mode took last execs cov ft found
	mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
	log=$work/$t/fuzz.log
	start=$(date +%s)
	mode=()
	[ "${FUZZ_FORK:-0}" = 1 ] && mode=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
	nice -n 10 "$exe" "${mode[@]}" -max_total_time="$secs" -close_fd_mask=1 \
		-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -max_len=65536 -dict="$here/dict/$t.dict" \
		-artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" "$here/corpus/$t" >"$log" 2>&1
	took=$(($(date +%s) - start))
	# the last stats line: "#N: cov: C ft: F ..." (fork mode) or "#N<TAB>DONE   cov: C ft: F ..."
	last=$(grep -E '^#[0-9]+[:[:space:]].*cov: ' "$log" | tail -1)
	execs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
	cov=$(sed -E 's/.* cov: ([0-9]+) .*/\1/' <<<"$last")
	ft=$(sed -E 's/.* ft: ([0-9]+) .*/\1/' <<<"$last")
	found=$(find "$work/$t/artifacts" -type f | wc -l)
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$took" "$execs" "$cov" "$ft" "$found" | tee -a "$work/summary.tsv"
}
jobs=${FUZZ_JOBS:-1} running=0
for t in "${targets[@]}"; do
	if [ "$jobs" -le 1 ]; then
		fuzz_one "$t"
		continue
	fi
	fuzz_one "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait
