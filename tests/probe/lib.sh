# lib.sh: helpers for the probe tests (tests/probe/*.sh). Source it after tests/cli/lib.sh.
# probe_env: the cached venv (venv.sh) as $PY, the native library folder as $PROBE_LIB (from
# $PROBE_LIB_DIR, which meson sets to the build's harness/probe); exits 77 (skip) when the frameworks
# cannot be installed, saying so.
probe_env() {
	local venv
	if ! venv=$(bash "$SRCROOT/tests/probe/venv.sh" | tail -n 1) || [ ! -x "$venv/bin/python" ]; then
		echo "SKIP: the probe test environment (torch, paddlepaddle from PyPI) could not be installed"
		exit 77
	fi
	PY="$venv/bin/python"
	: "${PROBE_LIB_DIR:?PROBE_LIB_DIR must name the build folder with libalign_probe_digest.so}"
	PROBE_LIB=$PROBE_LIB_DIR
	export ALIGNPROBE_LIB_DIR=$PROBE_LIB_DIR
}

# build_probe_mock DIR: harness/probe/native/probe_cuda.cu built as host C++ against tests/probe/cuda-mock.h
# into DIR/libalign_probe_cuda.so (DIR/build.txt holds the compiler's output); status 1 when it does not build
build_probe_mock() {
	mkdir -p "$1"
	${CXX:-g++} -std=c++17 -O1 -fPIC -shared -Wall -Wextra -Werror -include "$SRCROOT/tests/probe/cuda-mock.h" \
		-I"$SRCROOT/kernels/cuda" -x c++ "$SRCROOT/harness/probe/native/probe_cuda.cu" \
		-o "$1/libalign_probe_cuda.so" -lxxhash >"$1/build.txt" 2>&1
}
