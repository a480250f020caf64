#!/usr/bin/env bash
# torch-compare-selftest: tests/gpu/torch-compare.py without torch: its safetensors writer/reader, bf16
# rounding and ULP distance, every input file it writes accepted by `align run` on the CPU (the
# GPU-only *-cuda profiles refused there with exit 2), and a few contract values. The GPU run against
# PyTorch is the suite-gpu test gpu-torch-compare.
. "$SRCROOT/tests/cli/lib.sh"
if python3 "$SRCROOT/tests/gpu/torch-compare.py" "$ALIGN" --self-test >out.txt 2>err.txt; then
	expect_out "^self-test: passed"
	expect_out "refused on the CPU: error: op 'swiglu': ALIGN_MATH_IMPL=cuda exists only in the CUDA twins"
else
	fail "torch-compare.py --self-test: $(tail -5 err.txt) $(tail -5 out.txt)"
fi
finish
