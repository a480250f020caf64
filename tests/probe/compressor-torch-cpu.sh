#!/usr/bin/env bash
# compressor-torch-cpu.sh: torch-compare.py's compressor reference (DS-ref's Compressor.forward as PyTorch eager
# ops) on PyTorch CPU equals `align run compressor` under CSA_COMP_SUM_ORDER=torch and RMSNORM_REDUCE=torch
# (compressor_torch_cpu.py), in the probe suite's cached venv. Skips (77) only when torch cannot be installed.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
if "$PY" "$SRCROOT/tests/probe/compressor_torch_cpu.py" "$ALIGN" >out.txt 2>&1; then
	ok "$(grep -v '^0 failures' out.txt | tr '\n' ';')"
else
	fail "$(cat out.txt)"
fi
[ "$FAILS" = 0 ]
