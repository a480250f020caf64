#!/usr/bin/env bash
# bisect-jobs: -j 4 runs trials concurrently and finds the same culprit as -j 1. The plant is a triple
# interaction (S02, S08 and S11 only together) with crashes on some subsets; every trial of both runs
# must have its planted verdict, -j 1 must never overlap two trials and -j 4 must.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

plant=(--culprit S02,S08,S11 --crash-when 'S05,!S08')
for j in 1 4; do
	run_align 0 bisect --db "j$j.db" --good "$GOOD12" --bad "$BAD12" -j "$j" --format json --out "r$j.json" \
		-- "$TRACE" "${plant[@]}" --overlap "$PWD/overlap$j"
	check_trials "r$j.json" --culprit S02,S08,S11 --unusable 'S05,!S08'
	echo "-j $j: $(jget "r$j.json" "r['counts']['trials']") trials, at most $(sort -n "overlap$j.count" | tail -1) at once"
done
expect_eq "-j 1 culprit" "$(culprit_of r1.json)" "S02,S08,S11"
expect_eq "-j 4 culprit" "$(culprit_of r4.json)" "S02,S08,S11"
key="[r['culprits'][0]['first_diff'][k] for k in ('step', 'micro', 'rank', 'name', 'verdict', 'reason')]"
expect_eq "same first diff" "$(jget r4.json "$key")" "$(jget r1.json "$key")"
expect_eq "triple is an interaction" "$(jget r4.json "','.join(r['culprits'][0]['needed_jointly'])")" "S02,S08,S11"
expect_eq "-j 1 runs one at a time" "$(sort -n overlap1.count | tail -1)" "1"
[ "$(sort -n overlap4.count | tail -1)" -gt 1 ] || fail "-j 4 never ran two trials at once"
[ "$(sort -n overlap4.count | tail -1)" -le 4 ] || fail "-j 4 ran more than 4 trials at once"
n=$(jget r1.json "r['counts']['trials']")
ref=$(ref_trials 12 --culprit 1,7,10 --unusable '4,!7')
[ "$n" -le "$ref" ] || fail "-j 1 took $n trials, the reference search needs $ref"
# -j 4 may run speculative trials, but every -j 1 trial is among them
expect_eq "-j 1 subsets within -j 4's" "$(python3 -c '
import json, sys
one = {frozenset(t["switches"]) for t in json.load(open("r1.json"))["trials"]}
four = {frozenset(t["switches"]) for t in json.load(open("r4.json"))["trials"]}
print(len(one - four))')" "0"
# the -j 4 cache serves a -j 1 rerun completely
run_align 0 bisect --db j4.db --good "$GOOD12" --bad "$BAD12" -j 1 --format json --out again.json \
	-- "$TRACE" "${plant[@]}" --overlap "$PWD/overlap4"
expect_eq "rerun from the -j 4 cache" "$(jget again.json "r['counts']['run']")" "0"
expect_eq "rerun culprit" "$(culprit_of again.json)" "S02,S08,S11"
finish
