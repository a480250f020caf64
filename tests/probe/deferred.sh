#!/usr/bin/env bash
# deferred.sh: the deferred GPU digest's bookkeeping on the CPU: harness/probe/native/probe_cuda.cu built
# as host C++ against tests/probe/cuda-mock.h, then tests/probe/deferred.py (DeviceBatch and the probe's
# deferred records against the host digests) in the cached venv. The GPU itself: tests/gpu/probe-digest-cuda.py.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
if ! build_probe_mock mock; then
	fail "probe_cuda.cu does not build against the mock runtime: $(cat mock/build.txt)"
fi
if "$PY" "$SRCROOT/tests/probe/deferred.py" "$PWD/mock" >d.txt 2>&1; then ok "$(tail -2 d.txt | head -1)"; else fail "$(cat d.txt)"; fi
# bench.py --device mock (the probe-host-torch benchmark) on the same library, 3 steps: it runs and prints
# the CPU time a record
if "$PY" "$SRCROOT/tests/probe/bench.py" --framework torch --device mock --mock-lib "$PWD/mock" --steps 3 \
	--warmup 1 >b.txt 2>&1 && grep -Eq '^probe-digests: the probe.s CPU time [0-9.]+ us a record' b.txt &&
	grep -q '^probe-digests-dedup .* equal$' b.txt; then
	ok "bench.py --device mock: $(grep '^probe-digests:' b.txt)"
else
	fail "bench.py --device mock: $(cat b.txt)"
fi
[ "$FAILS" = 0 ]
