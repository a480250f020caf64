#!/usr/bin/env bash
# bench.sh FRAMEWORK: the probe's overhead benchmark (bench.py) in the cached venv; prints its table.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
"$PY" "$SRCROOT/tests/probe/bench.py" --framework "${1:?usage: bench.sh torch|paddle}" 2>&1 | grep -Ev 'INFO|WARN|[Ww]arning|loss.backward'
exit "${PIPESTATUS[0]}"
