#!/usr/bin/env bash
# bisect-sparse-attn: megatron vs deepseek-ref on 'align run sparse_attn' (issue 14): the bisection names
# attention switches only (ALIGN_CSA_*, each one a switch sparse_attn reads per 'align run --list'), the
# switches left change nothing, and the culprits cover the softmax contract that separates the two
# (online bf16-P sink-out-of-max TileLang kernel vs the unfused fp32 softmax with the sink in the max).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

cmd=("$ALIGN" run sparse_attn --steps 2)
run_align 0 bisect --db a.db --good profile:megatron --bad profile:deepseek-ref -j 4 --format json --out r.json -- "${cmd[@]}"
echo "culprits: $(culprit_of r.json); trials: $(jget r.json "r['counts']")"
run_align 0 run --list
reads=$(awk '/^sparse_attn:/ {on = 1; next} /^[a-z_]+:/ {on = 0} on && /switches:/ {sub(/.*switches: */, ""); print}' out.txt)
[ -n "$reads" ] || fail "'align run --list' shows no switches for sparse_attn"
culprits=$(jget r.json "' '.join(m['key'] for c in r['culprits'] for m in c['switches'])")
[ -n "$culprits" ] || fail "megatron vs deepseek-ref: no culprit on sparse_attn"
for k in $culprits; do
	grep -qw -- "$k" <<<"$reads" || fail "culprit $k is not a switch of sparse_attn ($reads)"
	case $k in ALIGN_CSA_*) ;; *) fail "culprit $k is not an attention switch" ;; esac
done
expect_eq "the rest changes nothing" "$(jget r.json "r['rest']['verdict'] if r['rest'] else 'all culprits'")" "same"
expect_eq "no unusable trial" "$(jget r.json "r['counts']['unusable']")" "0"
# every attention switch the two profiles set differently is among the bisected switches
run_align 0 modes --diff megatron deepseek-ref
for k in ALIGN_CSA_SINK_IN_MAX ALIGN_CSA_SOFTMAX ALIGN_CSA_P ALIGN_CSA_QK; do
	grep -qw -- "$k" out.txt || fail "'align modes --diff megatron deepseek-ref' does not list $k"
	expect_eq "$k bisected" "$(jget r.json "'$k' in [s['key'] for s in r['switches']]")" "true"
done
finish
