#!/usr/bin/env bash
# wrappers.sh: Probe.watch / params look through data-parallel and precision wrappers (wrappers.py, torch
# and Paddle). Skips (77) only when the frameworks cannot be installed.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
if "$PY" "$SRCROOT/tests/probe/wrappers.py" >w.txt 2>&1; then ok "$(tail -1 w.txt)"; else fail "$(grep -v -i 'warn' w.txt)"; fi
[ "$FAILS" = 0 ]
