#!/usr/bin/env bash
# bench-ops-torch.sh: tests/gpu/bench-ops-torch.py --self-test in the cached venv: every PyTorch eager form
# of the GPU peer benchmark at tiny shapes on the CPU (output shapes and dtypes against the op's registry
# outputs, forms of one op agreeing, Sinkhorn columns, the input-copy rule, the parser on bench-ops.cu's
# exact line format). The timing itself runs on the GPU machine (benchmark gpu-ops-eager).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
if "$PY" "$SRCROOT/tests/gpu/bench-ops-torch.py" --self-test >st.txt 2>&1; then
	if grep -q "^self-test: 0 failures" st.txt; then ok "$(tail -1 st.txt)"; else fail "no '0 failures' line: $(tail -8 st.txt)"; fi
else
	fail "bench-ops-torch.py --self-test: $(tail -8 st.txt)"
fi
finish
