#!/usr/bin/env bash
# recompute.sh torch|paddle: activation recomputation leaves the probe's trace unchanged (recompute.py).
# Skips (77) only when the frameworks cannot be installed.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
if "$PY" "$SRCROOT/tests/probe/recompute.py" "${1:?torch or paddle}" "$ALIGN" >r.txt 2>&1; then
	ok "$(tail -1 r.txt)"
else
	fail "$(grep -v -i 'warn' r.txt)"
fi
[ "$FAILS" = 0 ]
