#!/usr/bin/env bash
# explain-e2e.sh: `align explain` end to end on the probes' real-framework run. The DSv4 block
# (dsv4_block.py) runs one step forward in PyTorch and in Paddle (CPU), bf16 then fp32, from one
# safetensors file; op_records.py records each block op (norm, router, up, act, down) as the align op it
# is (rmsnorm, router variant 3, matmul, swiglu variant 2, matmul) with payloads, through align_probe
# (and as safetensors); both traces are ingested; explain_e2e.py finds the first divergent record with
# `align report --first-diff`, explains every op with `--runs torch,paddle` and per side with
# `--inputs/--output`, replays every description with `align run` (bytes compared) and checks the
# verdicts measured on this CPU's class (cpu_class.py: an AMD EPYC or an AMX Xeon; elsewhere notes). Then
# explain_diag.py shows why no mode reproduces the bf16 router (both sides) and torch's act: models of the
# CPU libraries (cpu_models.c: SIMD GEMM K-lanes, the vectorised exp; numpy: sum orders, the reciprocal,
# bf16 roundings) reproduce the frameworks' bits and name what no mode models (checked on a measured
# class, printed elsewhere). README's explain-e2e block must be the first divergent op's real explanation:
# exactly on the class it was taken on (intel-amx), elsewhere with the numbers of the "elements differ"
# and "first at" lines masked.
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
	"$PY" "$SRCROOT/tests/probe/explain_e2e.py" "$ALIGN" $dt $dt.db $dt-torch $dt-paddle ||
		fail "$dt: explain_e2e.py"
done
cls=$("$PY" "$SRCROOT/tests/probe/cpu_class.py") || cls=none # the class the verdicts were measured on
echo "CPU class: $cls ($(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-))"
cc=${CC:-cc}
if $cc -O1 -ffp-contract=off -shared -fPIC -o cpu_models.so "$SRCROOT/tests/probe/cpu_models.c" -lm 2>cc.txt; then
	expect=
	[ "$cls" != none ] && expect=--expect
	"$PY" "$SRCROOT/tests/probe/explain_diag.py" ./cpu_models.so bf16-torch bf16-paddle $expect >diag.txt ||
		fail "explain_diag.py: $(grep FAIL diag.txt)"
	cat diag.txt
	[ -n "$expect" ] || echo "note: this CPU is of no measured class: the models' matches above are not checked"
else
	fail "cc cpu_models.c: $(cat cc.txt)"
fi
# README's block: its command (the bf16 run's first divergent op, as explain_e2e.py checks), run here as
# written, then its output
awk '/<!-- explain-e2e:begin -->/{f=1;next}/<!-- explain-e2e:end -->/{f=0}f' "$SRCROOT/README.md" >block.txt
cmd=$(sed -n 2p block.txt)
expect_eq "README explain-e2e command" "$cmd" \
	'$ align explain --db bf16.db --op router --variant 3 --runs torch,paddle --record router'
read -r -a argv <<<"${cmd#\$ align }"
"$ALIGN" "${argv[@]}" >first-bf16.txt 2>err.txt
expect_eq "README explain-e2e command's exit status (1: not explained)" "$?" "1"
sed '1,2d;$d' block.txt >readme.txt
mask() { sed -E '/(elements differ|differ, max|first at)/s/[0-9]+(\.[0-9]+)?/N/g' "$1"; }
if [ ! -s first-bf16.txt ]; then
	fail "README's explain-e2e command printed nothing: $(cat err.txt)"
elif [ "$cls" = intel-amx ]; then
	diff readme.txt first-bf16.txt >readme.diff && ok "README explain-e2e block is the real output" ||
		fail "README explain-e2e block differs from the real output: $(head -20 readme.diff)"
else
	diff <(mask readme.txt) <(mask first-bf16.txt) >readme.diff &&
		ok "README explain-e2e block is the real output (figures masked: CPU class $cls, README's is intel-amx)" ||
		fail "README explain-e2e block differs from the real output: $(head -20 readme.diff)"
fi
[ "$FAILS" = 0 ]
