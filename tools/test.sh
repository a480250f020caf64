#!/usr/bin/env bash
# test.sh: the README's test command. Installs what is missing, builds with warnings as errors
# (CUDA where nvcc is present, else CPU only), runs every test (and, with CI_FORMAT_CHECK=1, the
# clang-format check), and ends with "N passed, N failed".
# CI_SANITIZE=1: the CPU build with clang -fsanitize=address,undefined (leak detection on, every report
# fatal) in build-sanitize/, its sanitizer reports written to build-sanitize/sanitizer-logs/; a report
# that no test's exit status showed (a child process, a leak at exit) counts as one more failed test.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/deps.sh || exit 2
build=${ALIGN_BUILD:-build-test}
setup=(-Dwerror=true -Dbuildtype=debugoptimized)
san_logs=
test_args=()
if [ "${CI_SANITIZE:-0}" = 1 ]; then
	build=${ALIGN_BUILD:-build-sanitize}
	export CC=clang
	setup+=(-Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fno-sanitize-recover=all)
	san_logs=$root/$build/sanitizer-logs
	# set here, meson test keeps them (it only fills in options that are unset)
	export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:log_path=$san_logs/asan"
	export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$san_logs/ubsan"
	# the kernels' exhaustive checks run ~3-5x slower instrumented (the ingest tests size themselves down)
	# the probe suite loads its C library into Python through ctypes: an ASan-instrumented .so needs the
	# ASan runtime preloaded into the interpreter, so it runs in the normal build only (the library's
	# digest code is harness/core/digest.c, which the instrumented align runs here)
	test_args=(--timeout-multiplier 3 --no-suite probe)
	# test-ops: the runs under switches an op does not read take the default's code path (nothing more for
	# the sanitizers to see); the build without sanitizers keeps them (tests/kernels/test-ops.c)
	export TEST_OPS_SKIP_UNREAD=1
fi
if [ ! -d "$build" ]; then
	meson setup "$build" "${setup[@]}" >"$build.setup.log" 2>&1 || { cat "$build.setup.log"; exit 2; }
fi
[ -z "$san_logs" ] || { rm -rf "$san_logs" && mkdir -p "$san_logs"; }
ninja -C "$build" || exit 2
meson test -C "$build" --print-errorlogs --num-processes "$(nproc)" "${test_args[@]}" "$@"
rc=$?
log="$build/meson-logs/testlog.json"
passed=$(grep -c '"result": "OK"' "$log" || true)
skipped=$(grep -c '"result": "SKIP"' "$log" || true)
failed=$(grep -Ec '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
# CI_FORMAT_CHECK=1 (.ci/run): the layout check (tools/format.sh --check) after the tests, one more
# test in the count below
fmt_rc=0
if [ "${CI_FORMAT_CHECK:-0}" = 1 ]; then
	if bash tools/format.sh --check; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		fmt_rc=1
	fi
fi
# CI_SANITIZE=1: any sanitizer report fails, also one whose process's exit status no test checked
san_rc=0
if [ -n "$san_logs" ] && [ -n "$(ls -A "$san_logs" 2>/dev/null)" ]; then
	echo "sanitizer reports (build $build):"
	cat "$san_logs"/*
	failed=$((failed + 1))
	san_rc=1
fi
echo "(${skipped} skipped: GPU tests skip without a GPU)"
echo "${passed} passed, ${failed} failed"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$fmt_rc" -eq 0 ] && [ "$san_rc" -eq 0 ]
