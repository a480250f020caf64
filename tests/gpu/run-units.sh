#!/usr/bin/env bash
# run-units.sh BUILD UNITS LOGDIR [LIMIT_S] [JOBS]: the CUDA-vs-C driver (test-gpu-ops-cuda) in units, many at
# once, under one deadline: for a device call of fixed length that must cover ops too long for one process.
# UNITS: one unit a line, "TOOL OP PART FILL": TOOL plain | memcheck | racecheck | initcheck (compute-sanitizer,
# with --sanitize), PART I/N or - (--part: the mode sets whose index is I mod N), FILL K or - (--fill).
# Units start JOBS at a time (default 15) in file order; none starts within 90 s of LIMIT_S (default 500,
# counted from this script's start) and each is stopped at LIMIT_S. LOGDIR gets u/NAME.log, u/NAME.rc
# ("RC SECONDS" or "notrun"), progress.txt and summary.txt (one row a unit: exit status, time, PASS/FAIL
# lines, the sanitizer summaries, the driver's last line) and fails.txt (the FAIL lines).
# Used in session 17 (reports/gpu/2026-12-07-h100-session17.md); e.g. units for attn_bwd in 48 parts:
#   for p in $(seq 0 47); do echo "plain attn_bwd $p/48 -"; done > units.txt
set -u
[ $# -ge 3 ] || { echo "usage: run-units.sh BUILD UNITS LOGDIR [LIMIT_S] [JOBS]" >&2; exit 2; }
B=$(cd "$1" && pwd) U=$2 L=$3 LIMIT=${4:-500} JOBS=${5:-15}
[ -x "$B/tests/gpu/test-gpu-ops-cuda" ] || { echo "error: no $B/tests/gpu/test-gpu-ops-cuda" >&2; exit 2; }
[ -r "$U" ] || { echo "error: cannot read units file $U" >&2; exit 2; }
mkdir -p "$L/u"
T0=$(date +%s)
export B L T0 LIMIT
unit() {
	local tool=$1 op=$2 part=$3 fill=$4
	local a=(--op "$op") pre=()
	local name="$tool-$op-${part/\//of}-$fill"
	local el=$(($(date +%s) - T0))
	if [ $el -gt $((LIMIT - 90)) ]; then echo "notrun" >"$L/u/$name.rc"; return; fi
	[ "$part" = - ] || a+=(--part "$part")
	[ "$fill" = - ] || a+=(--fill "$fill")
	case $tool in
	plain) ;;
	memcheck) pre=(compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86 --print-limit 100) a+=(--sanitize) ;;
	racecheck) pre=(compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 86 --print-limit 1000000) a+=(--sanitize) ;;
	initcheck) pre=(compute-sanitizer --tool initcheck --error-exitcode 86 --print-limit 100) a+=(--sanitize) ;;
	*) echo "2 0" >"$L/u/$name.rc"; echo "unknown tool $tool" >"$L/u/$name.log"; return ;;
	esac
	local t=$(date +%s)
	ALIGN_TEST_TIMES=1 timeout -k 5 $((LIMIT - el)) "${pre[@]}" "$B/tests/gpu/test-gpu-ops-cuda" "${a[@]}" >"$L/u/$name.log" 2>&1
	echo "$? $(($(date +%s) - t))" >"$L/u/$name.rc"
	echo "$name $(cat "$L/u/$name.rc") at $(($(date +%s) - T0)) s" >>"$L/progress.txt"
}
export -f unit
grep -v '^\s*\(#\|$\)' "$U" | xargs -P "$JOBS" -L 1 bash -c 'unit "$@"' _
bad=0
while read -r tool op part fill; do
	name="$tool-$op-${part/\//of}-$fill"
	read -r rc secs <"$L/u/$name.rc" 2>/dev/null || { rc=none; secs=0; }
	[ "$rc" = 0 ] || [ "$rc" = notrun ] || [ "$rc" = 124 ] || bad=1
	sum=$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)' "$L/u/$name.log" 2>/dev/null | tr '\n' ' ')
	np=$(grep -c '^PASS' "$L/u/$name.log" 2>/dev/null) nf=$(grep -c '^FAIL' "$L/u/$name.log" 2>/dev/null)
	[ "${nf:-0}" = 0 ] || bad=1
	echo "| $name | rc $rc | ${secs:-0} s | PASS lines ${np:-0}, FAIL lines ${nf:-0} | $sum | $(grep '^ops-cuda' "$L/u/$name.log" 2>/dev/null | tail -1) |"
done < <(grep -v '^\s*\(#\|$\)' "$U") >"$L/summary.txt"
grep -h '^FAIL' "$L"/u/*.log 2>/dev/null >"$L/fails.txt"
echo "end $(($(date +%s) - T0)) s" >>"$L/progress.txt"
exit $bad
