#!/usr/bin/env bash
# bisect-run: the built-in demo, end to end with 'align run': megatron vs paddle profiles on the mHC
# pre-block. Every culprit must be a switch that mhc_pre reads (per 'align run --list'): a switch the op
# does not read cannot change its bits; the switches left must change nothing; a rerun is all cached.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

cmd=("$ALIGN" run mhc_pre --steps 3 --shape T=4,N=4,D=64)
run_align 0 bisect --db a.db --good profile:megatron --bad profile:paddle -j 4 --format json --out r.json -- "${cmd[@]}"
echo "culprits: $(culprit_of r.json); trials: $(jget r.json "r['counts']")"
run_align 0 run --list
reads=$(awk '/^mhc_pre:/ {on = 1; next} /^[a-z_]+:/ {on = 0} on && /switches:/ {sub(/.*switches: */, ""); print}' out.txt)
[ -n "$reads" ] || fail "'align run --list' shows no switches for mhc_pre"
for k in $(jget r.json "' '.join(m['key'] for c in r['culprits'] for m in c['switches'])"); do
	grep -qw -- "$k" <<<"$reads" || fail "culprit $k is not a switch of mhc_pre ($reads)"
done
expect_eq "the rest changes nothing" "$(jget r.json "r['rest']['verdict'] if r['rest'] else 'all culprits'")" "same"
expect_eq "culprits and rest are all the switches" \
	"$(jget r.json "sum(len(c['switches']) for c in r['culprits']) + (len(r['rest']['switches']) if r['rest'] else 0) == len(r['switches'])")" "true"
expect_eq "no unusable trial" "$(jget r.json "r['counts']['unusable']")" "0"
# the traces carry the resolved modes: a trial's run header names the profile's values it ran with
first=$(jget r.json "r['culprits'][0]['trial']")
run=$(jget r.json "r['trials'][$first - 1]['run']")
[ "$(sql a.db "SELECT count(*) FROM run WHERE name = '$run' AND header IS NOT NULL")" = 1 ] || fail "run $run has no header"
run_align 0 bisect --db a.db --good profile:megatron --bad profile:paddle --format json --out again.json -- "${cmd[@]}"
expect_eq "rerun from the cache" "$(jget again.json "r['counts']['run']")" "0"
expect_eq "same culprits" "$(culprit_of again.json)" "$(culprit_of r.json)"
finish
