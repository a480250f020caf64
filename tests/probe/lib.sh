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
