#!/usr/bin/env bash
# racecheck-classify.sh LOG: whether every racecheck report in a compute-sanitizer log lies inside an
# NVIDIA library kernel (cuBLAS / cuBLASLt: nvjet_*, sm*_xmma*, cutlass), not in align's code.
#
# Why: cuBLASLt's warp-specialised sm90 kernels (producer warps fill shared-memory stages with TMA,
# consumer warps read them, the two ordered by mbarrier arrive/wait) are reported by racecheck as WAR
# hazards between a consumer thread and a producer thread (H200, compute-sanitizer 2025.3.1, 2026-12-02:
# MATMUL_IMPL=cublas_pinned at T=300, D=520, F=600, 97 errors, every one in
# nvjet_sm90_tst_152x256_64x4_2x1_v_bz_coopA_TNN; memcheck of the same run: 0 errors). Excluding those
# kernels with --kernel-name-exclude made the sanitizer itself fail ("failed to handle a hardware
# exception"), so sanitize.sh checks them and this script sorts the reports afterwards.
#
# Prints one line and exits:
#   0  "library-only N KERNEL[,KERNEL...]": N reports (errors + warnings), every access of each in a
#      library kernel, and every report displayed (the summary's displayed count = errors + warnings);
#   1  "align: ..." a report names a kernel outside the library patterns (align's own code: a real
#      finding), or "undisplayed: ..." more reports than displayed (--print-limit too low: unknown),
#      or "no reports" / "no summary";
#   2  usage or unreadable log.
# The library patterns are on purpose narrow: a name matches when it starts with nvjet_, sm<digits>_xmma,
# cutlass, or is a cublas/cublasLt internal (cublas...); align's kernels never have these names.
set -uo pipefail
log=${1:-}
[ -n "$log" ] && [ -r "$log" ] || { echo "usage: racecheck-classify.sh LOG (a readable compute-sanitizer log)" >&2; exit 2; }
lib_re='^(void )?(nvjet_|sm[0-9]+_xmma|cutlass|cublas)'
summary=$(grep -E '^========= RACECHECK SUMMARY: ' "$log" | tail -1)
if [ -z "$summary" ]; then
	echo "no summary: $log has no RACECHECK SUMMARY line"
	exit 1
fi
# "========= RACECHECK SUMMARY: 12 hazards displayed (97 errors, 0 warnings)"
read -r shown errs warns < <(sed -E 's/.*SUMMARY: ([0-9]+) hazards? displayed \(([0-9]+) errors?, ([0-9]+) warnings?\).*/\1 \2 \3/' <<<"$summary")
if ! [[ $shown =~ ^[0-9]+$ && $errs =~ ^[0-9]+$ && $warns =~ ^[0-9]+$ ]]; then
	echo "no summary: cannot read '$summary'"
	exit 1
fi
total=$((errs + warns))
if [ "$total" -eq 0 ]; then
	echo "no reports"
	exit 1
fi
# the kernels the reports' accesses name: hazard lines ("Read Thread (..) at KERNEL+0x..") and race
# analysis lines ("Race reported between Write access at KERNEL+0x.. and Read access at KERNEL+0x..")
kernels=$(grep -E '^=========  +(Read|Write) Thread|^========= (Error|Warning): Race reported|^=========  +and (Read|Write) access' "$log" |
	grep -oE ' at [^+]+\+0x' | sed -E 's/^ at //; s/\+0x$//' | sort -u)
if [ -z "$kernels" ]; then
	echo "align: $total reports but no access line names a kernel (unknown)"
	exit 1
fi
outside=$(grep -Ev -- "$lib_re" <<<"$kernels" | head -3 | tr '\n' ';')
if [ -n "$outside" ]; then
	echo "align: a report names a kernel outside the libraries: ${outside%;}"
	exit 1
fi
# hazard reports shown one per "Potential ... hazard" block; the summary counts them: all shown?
if [ "$shown" -lt "$total" ]; then
	echo "undisplayed: $shown of $total reports displayed (raise --print-limit): the rest are unknown"
	exit 1
fi
echo "library-only $total $(tr '\n' ',' <<<"$kernels" | sed 's/,$//')"
exit 0
