#!/usr/bin/env bash
# explain-e2e.sh: `align explain` end to end on the probes' real-framework run. The DSv4 block
# (dsv4_block.py) runs one step forward in PyTorch and in Paddle (CPU), bf16 then fp32, from one
# safetensors file; op_records.py records each block op (norm, router, up, act, down) as the align op it
# is (rmsnorm, router variant 3, matmul, swiglu variant 2, matmul) with payloads, through align_probe
# (and as safetensors); both traces are ingested; explain_e2e.py finds the first divergent record with
# `align report --first-diff`, explains every op with `--runs torch,paddle` and per side with
# `--inputs/--output`, replays every description with `align run` (bytes compared) and checks the
# verdicts measured on this project's CPU (AVX-512; on a CPU without AVX2/FMA they are notes). Then
# explain_diag.py shows why no mode reproduces the bf16 router (both sides) and torch's act: models of the
# CPU libraries (cpu_models.c: SIMD GEMM K-lanes, the vectorised exp; numpy: sum orders, the reciprocal,
# bf16 roundings) reproduce the frameworks' bits and name what no mode models (checked on AVX2+FMA CPUs,
# printed elsewhere).
# Skips (77) only when the frameworks cannot be installed (venv.sh).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
"$PY" -c "
import sys; sys.path.insert(0, '$SRCROOT/tests/probe'); import dsv4_block
from safetensors.numpy import save_file; save_file(dsv4_block.make_weights(), 'w.safetensors')" || exit 1
for dt in bf16 fp32; do
	for fw in torch paddle; do
		"$PY" "$SRCROOT/tests/probe/run_block.py" --framework $fw --dtype $dt --weights w.safetensors --steps 1 \
			--run $fw --op-records $dt-$fw >run-$fw.txt 2>&1 ||
			{ fail "$fw $dt block: $(grep -v Warning run-$fw.txt | tail -5)"; continue 2; }
	done
	run_align 0 ingest --db $dt.db $dt-torch/torch-rank0.atf $dt-paddle/paddle-rank0.atf || continue
	"$PY" "$SRCROOT/tests/probe/explain_e2e.py" "$ALIGN" $dt $dt.db $dt-torch $dt-paddle --show-first first-$dt.txt ||
		fail "$dt: explain_e2e.py"
done
cc=${CC:-cc}
if $cc -O1 -ffp-contract=off -shared -fPIC -o cpu_models.so "$SRCROOT/tests/probe/cpu_models.c" -lm 2>cc.txt; then
	expect=
	grep -m1 '^flags' /proc/cpuinfo | grep -qw avx2 && grep -m1 '^flags' /proc/cpuinfo | grep -qw fma && expect=--expect
	"$PY" "$SRCROOT/tests/probe/explain_diag.py" ./cpu_models.so bf16-torch bf16-paddle $expect >diag.txt ||
		fail "explain_diag.py: $(grep FAIL diag.txt)"
	cat diag.txt
	[ -n "$expect" ] || echo "note: this CPU lacks AVX2/FMA: the models' matches above are not checked"
else
	fail "cc cpu_models.c: $(cat cc.txt)"
fi
[ "$FAILS" = 0 ]
