#!/usr/bin/env bash
# bisect-attn: megatron vs deepseek-ref on the composed attention layer, 'align run attn --variant csa'
# (issue 14): the bisection names switches the layer reads (per 'align run --list'), the switches left
# change nothing, the culprits include attention switches (sparse attention, compressor, indexer: ALIGN_CSA_*,
# ALIGN_INDEXER_*), and every attention switch the two profiles set differently was bisected.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

cmd=("$ALIGN" run attn --variant csa)
run_align 0 bisect --db a.db --good profile:megatron --bad profile:deepseek-ref -j 4 --format json --out r.json -- "${cmd[@]}"
echo "culprits: $(culprit_of r.json); trials: $(jget r.json "r['counts']")"
run_align 0 run --list
reads=$(awk '/^attn:/ {on = 1; next} /^[a-z_]+:/ {on = 0} on && /switches:/ {sub(/.*switches: */, ""); print}' out.txt)
[ -n "$reads" ] || fail "'align run --list' shows no switches for attn"
culprits=$(jget r.json "' '.join(m['key'] for c in r['culprits'] for m in c['switches'])")
[ -n "$culprits" ] || fail "megatron vs deepseek-ref: no culprit on attn --variant csa"
attention=0
for k in $culprits; do
	grep -qw -- "$k" <<<"$reads" || fail "culprit $k is not a switch of attn ($reads)"
	case $k in ALIGN_CSA_* | ALIGN_INDEXER_*) attention=$((attention + 1)) ;; esac
done
[ "$attention" -gt 0 ] || fail "no attention switch among the culprits ($culprits)"
expect_eq "the rest changes nothing" "$(jget r.json "r['rest']['verdict'] if r['rest'] else 'all culprits'")" "same"
expect_eq "no unusable trial" "$(jget r.json "r['counts']['unusable']")" "0"
# every attention switch the two profiles set differently is listed by modes --diff and was bisected
run_align 0 modes --diff megatron deepseek-ref
for k in ALIGN_CSA_SINK_IN_MAX ALIGN_CSA_SOFTMAX ALIGN_CSA_P ALIGN_CSA_QK ALIGN_CSA_COMP_GEMM ALIGN_CSA_COMP_POOL \
	ALIGN_CSA_COMP_SUM ALIGN_CSA_QAT ALIGN_INDEXER_SCORE ALIGN_INDEXER_WEIGHT_SCALE; do
	grep -qw -- "$k" out.txt || fail "'align modes --diff megatron deepseek-ref' does not list $k"
	expect_eq "$k bisected" "$(jget r.json "'$k' in [s['key'] for s in r['switches']]")" "true"
done
finish
