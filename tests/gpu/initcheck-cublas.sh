#!/usr/bin/env bash
# initcheck-cublas.sh: the evidence behind align_dev_mark_written (kernels/cuda/dev.h). Runs
# test-gpu-initcheck-cublas in each mode under `compute-sanitizer --tool initcheck` and checks:
#   control          initcheck reports (> 0 errors): it sees the reads of align-style kernels;
#   gemmex-marked,   0 errors, and the byte check passes: with the NVTX mark, reads of what cublasGemmEx /
#   lt-marked        cublasLtMatmul wrote are clean;
#   gemmex-unmarked, the byte check passes (the GEMM wrote every element of C); the number of initcheck
#   lt-unmarked      reports is printed as the finding: > 0 means initcheck does not see the library's stores
#                    (the reason for the mark); 0 means it does here, and the line says so.
# Usage: tests/gpu/initcheck-cublas.sh [BUILD_DIR]   (default build-gpu). Logs: ${OUT:-.}/gpu-logs/initcheck-cublas-MODE.log
# Exit: 0 as above, 1 a check failed, 2 a run could not start, 77 no GPU or no compute-sanitizer.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
exe=$build/tests/gpu/test-gpu-initcheck-cublas
. "$root/tests/gpu/find-sanitizer.sh" || exit 2
[ -n "$cs" ] || { echo "skip: no compute-sanitizer (PATH, /usr/local/cuda/bin, .gpucarry/)"; exit 77; }
nvidia-smi -L >/dev/null 2>&1 || { echo "skip: no NVIDIA GPU here"; exit 77; }
[ -x "$exe" ] || { echo "error: $exe is not built" >&2; exit 2; }
out=${OUT:-.}/gpu-logs
mkdir -p "$out" || exit 2
echo "compute-sanitizer: $("$cs" --version | tail -1); device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
bad=0
for mode in control gemmex-unmarked gemmex-marked lt-unmarked lt-marked; do
	log=$out/initcheck-cublas-$mode.log
	"$cs" --tool initcheck --print-limit 10 "$exe" "$mode" >"$log" 2>&1
	rc=$?
	# "ERROR SUMMARY: N errors" (every uninitialised read; not "N errors were not printed" after it)
	n=$(sed -n 's/.*ERROR SUMMARY: \([0-9][0-9]*\) errors*$/\1/p' "$log" | tail -1)
	if [ -z "$n" ]; then
		echo "FAIL $mode: no ERROR SUMMARY line (exit $rc); the log's end:"
		tail -5 "$log"
		bad=1
		continue
	fi
	checks=$(grep -c 'every element written' "$log")
	fails=$(grep -c ': FAIL$' "$log")
	case $mode in
	control)
		if [ "$n" -gt 0 ]; then
			echo "ok $mode: initcheck reports $n uninitialised reads by copy_kernel (the tool sees them)"
		else
			echo "FAIL $mode: initcheck reported nothing for a buffer nothing wrote"
			bad=1
		fi
		;;
	*-marked)
		if [ "$n" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$fails" -eq 0 ] && [ "$checks" -gt 0 ]; then
			echo "ok $mode: 0 initcheck errors; $checks shapes, every element of C written"
		else
			echo "FAIL $mode: $n initcheck errors, exit $rc, $fails byte checks failed of $((checks + fails))"
			grep -m3 -E 'Uninitialized|error:' "$log"
			bad=1
		fi
		;;
	*)
		if [ "$rc" -ne 0 ] || [ "$fails" -gt 0 ] || [ "$checks" -eq 0 ]; then
			echo "FAIL $mode: exit $rc, $fails byte checks failed of $((checks + fails))"
			bad=1
		elif [ "$n" -gt 0 ]; then
			echo "finding $mode: $n initcheck errors on reads of C although the GEMM wrote every element" \
				"($checks shapes): initcheck does not see this library call's stores"
			grep -m1 -A2 'Uninitialized' "$log" | sed 's/^/    /'
		else
			echo "ok $mode: 0 initcheck errors without the mark: initcheck sees this call's stores here"
		fi
		;;
	esac
done
[ "$bad" -eq 0 ]
