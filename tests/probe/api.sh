#!/usr/bin/env bash
# api.sh: the Probe API's bookkeeping (api.py) on torch. Skips (77) only when the frameworks cannot be
# installed.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
if "$PY" "$SRCROOT/tests/probe/api.py" "$ALIGN" >a.txt 2>&1; then ok "$(tail -1 a.txt)"; else fail "$(cat a.txt)"; fi
[ "$FAILS" = 0 ]
