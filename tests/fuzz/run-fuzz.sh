#!/usr/bin/env bash
# run-fuzz.sh BUILD SECONDS [TARGET...]: fuzz each target (default: all of tests/fuzz/corpus/) for
# SECONDS with its dictionary, one after another (one fuzzer at a time: nice, one process), keeping
# going after a finding (fork mode). BUILD is a -Dfuzz=true build (CC=clang meson setup BUILD
# -Dcuda=disabled -Dfuzz=true). New corpus inputs go to $FUZZ_WORK/<target>/corpus (default
# /tmp/align-fuzz-work), findings to $FUZZ_WORK/<target>/artifacts/; each target's last libFuzzer stats
# line is appended to $FUZZ_WORK/summary.tsv (target, seconds, execs, cov, ft, crashes, ooms, timeouts).
# Copy a finding into tests/fuzz/crashes/<target>/ once fixed, so that the test suite replays it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1 secs=$2
shift 2
work=${FUZZ_WORK:-/tmp/align-fuzz-work}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(ls "$here/corpus")
for t in "${targets[@]}"; do
	exe=$build/tests/fuzz/fuzz-$t
	[ -x "$exe" ] || { echo "run-fuzz: no $exe" >&2; exit 2; }
	mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
	log=$work/$t/fuzz.log
	start=$(date +%s)
	nice -n 10 "$exe" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 -max_total_time="$secs" \
		-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -max_len=65536 -dict="$here/dict/$t.dict" \
		-artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" "$here/corpus/$t" >"$log" 2>&1
	took=$(($(date +%s) - start))
	# fork mode's stats: "#N: cov: C ft: F corp: ... exec/s: E oom/timeout/crash: O/T/X time: S"
	last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
	execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
	cov=$(sed -E 's/.* cov: ([0-9]+) .*/\1/' <<<"$last")
	ft=$(sed -E 's/.* ft: ([0-9]+) .*/\1/' <<<"$last")
	otc=$(sed -E 's|.*oom/timeout/crash: ([0-9]+/[0-9]+/[0-9]+).*|\1|' <<<"$last")
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$took" "$execs" "$cov" "$ft" "$otc" | tee -a "$work/summary.tsv"
done
