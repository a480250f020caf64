#!/usr/bin/env bash
# sanitize.sh: the CUDA twins (test-gpu-ops-cuda, test-gpu-rows-cuda) and the digest kernel
# (test-gpu-digest-cuda) under NVIDIA compute-sanitizer: memcheck (with --leak-check full), racecheck,
# initcheck. Every run must end with 0 errors (0 hazards for racecheck) and the test's own exit 0.
#
# Usage: tests/gpu/sanitize.sh [--tools memcheck,racecheck,initcheck] [--only REGEX] [--ops-args ARGS]
#                              [BUILD_DIR]
#   BUILD_DIR      a -Dcuda=enabled build (default build-gpu, relative to the repository root)
#   --tools T      the tools, comma-separated (default all three)
#   --only REGEX   the binaries whose short name (ops, rows, digest) matches REGEX (grep -E)
#   --ops-args A   arguments of test-gpu-ops-cuda (default "--sanitize": every op, variant, mode set and fill,
#                  the serial launch for the default mode set only, a D over 1024 as 256,
#                  smaller shapes, launch configurations {defaults, 96 threads x 3 blocks, serial} once each; the sanitizer runs each launch 10-100x slower)
#   --split-ops    run test-gpu-ops-cuda once per op (--op OP, the ops `align run --list` names), up to
#                  --jobs at once (default: half the CPU cores), each with its own log and verdict: the whole
#                  set under memcheck takes more than one device call in one process
#   --ops REGEX    with --split-ops: only the ops whose name matches REGEX (grep -E)
#   --op-parts N   with --split-ops: each op as N processes (test-gpu-ops-cuda --part I/N: mode sets I mod N),
#                  for the ops whose mode sets take longer than one device call under the sanitizer
#   --jobs J       parallel sanitizer processes with --split-ops
#   --timeout S    stop each sanitizer process after S seconds (reported NOT CLEAN, exit 124), so that a
#                  device call ends with the table
#   --deadline S   start no process after S seconds from the start (reported NOT RUN) and stop every
#                  process by then (a device call's limit)
# Logs: ${OUT:-.}/gpu-logs/sanitize-TOOL-NAME.log; a summary table on stdout, ending "N clean, N not".
# racecheck reports inside cuBLAS/cuBLASLt's own kernels (MATMUL_IMPL=cublas_pinned's warp-specialised sm90
# kernel: mbarrier-ordered TMA stages racecheck does not model) are sorted out by racecheck-classify.sh:
# an ops unit whose test passed and whose every hazard lies in such a kernel (all displayed) is "clean
# (align's kernels; N KERNEL inside cuBLAS)"; any hazard in align's kernels stays NOT CLEAN.
# Exit: 0 all clean, 1 any error, 77 no GPU or no compute-sanitizer (run-on-gpu.sh counts 77 as a failure).
# It is the test gpu-sanitize (tests/gpu/meson.build), so run-on-gpu.sh runs it:
#   tests/gpu/run-on-gpu.sh --budget 560 --only '^gpu-sanitize$'
# or, one device call per tool when the whole set does not fit one call:
#   OUT=$OUT bash tests/gpu/sanitize.sh --tools memcheck build-gpu
# A GPU machine without the CUDA toolkit gets compute-sanitizer from PyPI's wheel, carried with the build:
#   pip download --no-deps 'nvidia-cuda-sanitizer-api==13.0.*' -d .gpucarry   (here, once; 14 MB)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tools=memcheck,racecheck,initcheck only="" ops_args="--sanitize" split=0 op_re="" op_parts=1 jobs=$(($(nproc) / 2)) unit_timeout=0 deadline=0
while [ $# -gt 0 ]; do
	case $1 in
	--tools) tools=${2:?--tools needs a list}; shift 2 ;;
	--only) only=${2:?--only needs a regular expression}; shift 2 ;;
	--ops-args) ops_args=${2?--ops-args needs arguments}; shift 2 ;;
	--split-ops) split=1; shift ;;
	--ops) op_re=${2:?--ops needs a regular expression}; shift 2 ;;
	--op-parts) op_parts=${2:?--op-parts needs a number}; shift 2 ;;
	--jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
	--timeout) unit_timeout=${2:?--timeout needs seconds}; shift 2 ;;
	--deadline) deadline=${2:?--deadline needs seconds}; shift 2 ;;
	-*) echo "error: unknown option '$1'" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
build=${1:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
. "$root/tests/gpu/find-sanitizer.sh" || exit 2
if [ -z "$cs" ]; then
	echo "skip: no compute-sanitizer (PATH, /usr/local/cuda/bin, .gpucarry/nvidia_cuda_sanitizer_api-*.whl)" >&2
	exit 77
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
	echo "skip: no NVIDIA GPU here" >&2
	exit 77
fi
out=${OUT:-.}/gpu-logs
mkdir -p "$out" || exit 2
# short name, binary, arguments
read -r -a ops_argv <<<"$ops_args"
names=(ops rows digest)
declare -A bin=([ops]=test-gpu-ops-cuda [rows]=test-gpu-rows-cuda [digest]=test-gpu-digest-cuda)
declare -A args=([ops]="${ops_argv[*]}" [rows]="--quick" [digest]="")
echo "compute-sanitizer: $("$cs" --version | tail -1); device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(date -u '+%Y-%m-%d %H:%M UTC')"
clean=0 bad=0
# units: "tool name exe log args..." lines; with --split-ops the ops binary becomes one unit per op
units=()
IFS=, read -r -a tool_list <<<"$tools"
for tool in "${tool_list[@]}"; do
	case $tool in memcheck | racecheck | initcheck) ;; *) echo "error: unknown tool '$tool'" >&2; exit 2 ;; esac
	for n in "${names[@]}"; do
		[ -z "$only" ] || grep -Eq -- "$only" <<<"$n" || continue
		if [ "$n" = ops ] && [ "$split" = 1 ]; then
			ops=$("$build/harness/align" run --list | grep -v 'block of' | grep -o '^[a-z_0-9]*:' | tr -d :) || exit 2
			for op in $ops; do
				[ -z "$op_re" ] || grep -Eq -- "$op_re" <<<"$op" || continue
				if [ "$op_parts" -gt 1 ]; then
					for ((p = 0; p < op_parts; p++)); do
						units+=("$tool|ops-$op-part$p|${bin[$n]}|${args[$n]} --op $op --part $p/$op_parts")
					done
				else
					units+=("$tool|ops-$op|${bin[$n]}|${args[$n]} --op $op")
				fi
			done
		else
			units+=("$tool|$n|${bin[$n]}|${args[$n]}")
		fi
	done
done
# run_unit TOOL NAME BINARY ARGS: the sanitizer run; its exit code and seconds in the log's .rc file
run_unit() {
	local tool=$1 n=$2 exe=$build/tests/gpu/$3 argv extra=()
	read -r -a argv <<<"$4"
	# racecheck: every hazard displayed, so that racecheck-classify.sh can sort them all
	local limit=100
	case $tool in memcheck) extra=(--leak-check full) ;; racecheck) extra=(--racecheck-report all) limit=1000000 ;; esac
	local log=$out/sanitize-$tool-$n.log t0
	t0=$(date +%s)
	if [ ! -x "$exe" ]; then
		echo "not built: $exe" >"$log"
		echo "127 0" >"$log.rc"
		return
	fi
	# --error-exitcode: a report fails the run even when the test itself passes
	local lim=() secs=$unit_timeout
	if [ "$deadline" -gt 0 ]; then
		local rest=$((deadline - ($(date +%s) - start)))
		if [ "$rest" -lt 20 ]; then
			echo "not run: the deadline (--deadline $deadline) came first" >"$log"
			echo "notrun 0" >"$log.rc"
			return
		fi
		[ "$secs" -gt 0 ] && [ "$secs" -lt "$rest" ] || secs=$rest
	fi
	[ "$secs" -gt 0 ] 2>/dev/null && lim=(timeout -k 10 "$secs")
	"${lim[@]}" "$cs" --tool "$tool" --error-exitcode 86 --print-limit "$limit" --target-processes all "${extra[@]}" \
		"$exe" "${argv[@]}" >"$log" 2>&1
	echo "$? $(($(date +%s) - t0))" >"$log.rc"
}
start=$(date +%s)
running=0
for u in "${units[@]}"; do
	IFS='|' read -r tool n exe a <<<"$u"
	run_unit "$tool" "$n" "$exe" "$a" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait
for u in "${units[@]}"; do
	IFS='|' read -r tool n exe a <<<"$u"
	log=$out/sanitize-$tool-$n.log
	read -r rc secs <"$log.rc" 2>/dev/null || rc=255 secs=0
	if [ "$rc" = notrun ]; then
		echo "| $tool | $n | NOT RUN | 0 s | deadline | $log |"
		bad=$((bad + 1))
		continue
	fi
	summary=$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)' "$log" | tail -3 | tr '\n' ' ')
	if [ "$rc" -eq 0 ] && ! grep -Eq '^========= (ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9])' "$log"; then
		verdict=clean clean=$((clean + 1))
	elif [ "$tool" = racecheck ] && [ "$rc" -eq 86 ] && [[ $n == ops* ]] &&
		grep -Eq '^ops-cuda on .*: [0-9]+ pass .*, 0 fail,' "$log" && ! grep -q 'stopped by an error' "$log" &&
		lib=$(bash "$root/tests/gpu/racecheck-classify.sh" "$log"); then
		# the test passed and every hazard lies inside cuBLAS(Lt)'s own kernels (racecheck-classify.sh
		# says why those are not align's races): clean for align's code, the count kept in the table
		verdict="clean (align's kernels; ${lib#library-only } inside cuBLAS)" clean=$((clean + 1))
	else
		verdict="NOT CLEAN (exit $rc)" bad=$((bad + 1))
	fi
	echo "| $tool | $n | $verdict | ${secs} s | ${summary:-no summary line} | $log |"
done
echo "$clean clean, $bad not"
[ "$bad" -eq 0 ]
