#!/usr/bin/env bash
# py.sh SCRIPT [ARG...]: runs the probe test tests/probe/SCRIPT in the probe environment (torch and Paddle
# from PyPI, align_probe on PYTHONPATH, the native library from PROBE_LIB_DIR) with the arguments and $ALIGN
# last; passes when it exits 0 (its last line is the verdict). Skips (77) only when the frameworks cannot
# be installed.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
script=${1:?a test script of tests/probe}
shift
if "$PY" "$SRCROOT/tests/probe/$script" "$@" "$ALIGN" >out.txt 2>&1; then
	ok "$(tail -1 out.txt)"
else
	fail "$(grep -v -i 'warn' out.txt)"
fi
[ "$FAILS" = 0 ]
