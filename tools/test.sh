#!/usr/bin/env bash
# test.sh: the README's test command. Installs what is missing, builds with warnings as errors
# (CUDA where nvcc is present, else CPU only), runs every test (and, with CI_FORMAT_CHECK=1, the
# clang-format check), and ends with "N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/deps.sh || exit 2
build=${ALIGN_BUILD:-build-test}
if [ ! -d "$build" ]; then
	meson setup "$build" -Dwerror=true -Dbuildtype=debugoptimized >"$build.setup.log" 2>&1 ||
		{ cat "$build.setup.log"; exit 2; }
fi
ninja -C "$build" || exit 2
meson test -C "$build" --print-errorlogs --num-processes "$(nproc)" "$@"
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
echo "(${skipped} skipped: GPU tests skip without a GPU)"
echo "${passed} passed, ${failed} failed"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$fmt_rc" -eq 0 ]
