#!/usr/bin/env bash
# deferred.sh: the deferred GPU digest's bookkeeping on the CPU: harness/probe/native/probe_cuda.cu built
# as host C++ against tests/probe/cuda-mock.h, then tests/probe/deferred.py (DeviceBatch and the probe's
# deferred records against the host digests) in the cached venv. The GPU itself: tests/gpu/probe-digest-cuda.py.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
mkdir -p mock
if ! ${CXX:-g++} -std=c++17 -O1 -fPIC -shared -Wall -Wextra -Werror -include "$SRCROOT/tests/probe/cuda-mock.h" \
	-I"$SRCROOT/kernels/cuda" -x c++ "$SRCROOT/harness/probe/native/probe_cuda.cu" -o mock/libalign_probe_cuda.so \
	-lxxhash >build.txt 2>&1; then
	fail "probe_cuda.cu does not build against the mock runtime: $(cat build.txt)"
fi
if "$PY" "$SRCROOT/tests/probe/deferred.py" "$PWD/mock" >d.txt 2>&1; then ok "$(tail -2 d.txt | head -1)"; else fail "$(cat d.txt)"; fi
[ "$FAILS" = 0 ]
