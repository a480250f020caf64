#!/usr/bin/env bash
# e2e.sh: the probe end to end on both real frameworks. The DSv4 block (dsv4_block.py) trains 3 SGD
# steps in PyTorch and in Paddle (CPU) from one safetensors file of weights and inputs, each with the
# probe (installed with `pip install ./harness/probe`, payloads of every tensor); both traces are
# ingested and `align report --first-diff` must name the first difference that an independent
# comparison of the kept raw bytes finds, flag it as the root-cause candidate ("inputs equal, output
# differs") and give its element-level detail from the payloads (check_e2e.py). fp32, then bf16.
# Skips (77) only when the frameworks cannot be installed (venv.sh).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
# pip-installable: the package as a user installs it (no deps: the venv has the frameworks)
"$PY" -m pip install -q --no-deps --no-build-isolation --target site "$SRCROOT/harness/probe" >pip.txt 2>&1 ||
	{ fail "pip install ./harness/probe: $(tail -3 pip.txt)"; exit 1; }
export PYTHONPATH=$TMP/site
"$PY" -c "import align_probe, os; assert os.path.dirname(align_probe.__file__).startswith('$TMP/site')" ||
	fail "the installed align_probe is not the one imported"
# README's Probes example, as written there, with the installed package
awk '/<!-- probe:begin -->/{f=1;next}/<!-- probe:end -->/{f=0}f' "$SRCROOT/README.md" | awk '/^```python/{f=1;next}/^```/{f=0}f' >example.py
[ -s example.py ] || fail "README has no python block between the probe markers"
if "$PY" example.py >ex.txt 2>&1 && run_align 0 ingest --db ex.db traces/megatron-rank0.atf; then
	expect_out "megatron-rank0.atf: atf, [0-9]+ records into run 'megatron'" && ok "README example: $OUT_TXT"
else
	fail "README example: $(tail -5 ex.txt)"
fi
"$PY" -c "
import sys; sys.path.insert(0, '$SRCROOT/tests/probe'); import dsv4_block
from safetensors.numpy import save_file; save_file(dsv4_block.make_weights(), 'w.safetensors')" || exit 1
for dt in fp32 bf16; do
	for fw in torch paddle; do
		"$PY" "$SRCROOT/tests/probe/run_block.py" --framework $fw --dtype $dt --weights w.safetensors --steps 3 \
			--probe tr-$dt --run $fw-$dt --payload '*' --keep keep-$fw-$dt.npz >run-$fw.txt 2>&1 ||
			{ fail "$fw $dt block: $(grep -v Warning run-$fw.txt | tail -5)"; continue; }
	done
	run_align 0 ingest --db $dt.db tr-$dt/torch-$dt-rank0.atf tr-$dt/paddle-$dt-rank0.atf || continue
	expect_out "torch-$dt-rank0.atf: atf, [0-9]+ records into run 'torch-$dt'"
	run_align 1 report --db $dt.db --runs torch-$dt,paddle-$dt --first-diff --format json --out r-$dt.json
	run_align 1 report --db $dt.db --runs torch-$dt,paddle-$dt --first-diff
	cat out.txt | grep -E '^(first difference|root cause|  elements)' | head -4
	expect_out "^root cause candidate: [^ ]+ \(inputs equal, output differs\)"
	expect_out "^  elements: [0-9]+ of [0-9]+ differ \(bitwise\)"
	if "$PY" "$SRCROOT/tests/probe/check_e2e.py" r-$dt.json keep-torch-$dt.npz keep-paddle-$dt.npz >chk.txt; then
		ok "$dt: $(head -1 chk.txt); the report agrees"
	else
		fail "$dt: $(cat chk.txt)"
	fi
done
[ "$FAILS" = 0 ]
