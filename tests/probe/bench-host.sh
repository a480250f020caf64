#!/usr/bin/env bash
# bench-host.sh: the probe's host-side cost a record on the deferred GPU path, on the CPU (bench.py
# --device mock: probe_cuda.cu built against tests/probe/cuda-mock.h, CPU tensors declared CUDA tensors);
# prints bench.py's table and the CPU time a record. Extra arguments go to bench.py (--steps, --tokens, ...).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
mock=$(mktemp -d)
trap 'rm -rf "$mock"' EXIT
build_probe_mock "$mock" || { echo "error: probe_cuda.cu does not build against the mock runtime:"; cat "$mock/build.txt"; exit 2; }
"$PY" "$SRCROOT/tests/probe/bench.py" --framework torch --device mock --mock-lib "$mock" --steps 200 --warmup 20 "$@" 2>&1 |
	grep -Ev 'INFO|WARN|[Ww]arning|loss.backward'
exit "${PIPESTATUS[0]}"
