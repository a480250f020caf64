#!/usr/bin/env bash
# bisect-noeffect: good and bad differ in their switches but not in their effect. bisect must exit 1
# after exactly two trials (good, then the whole bad set), say so in every format, and name no culprit.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

# the trace changes only with S12, which neither side sets: the four switches change nothing
log=$PWD/procs.log
cmd=("$TRACE" --culprit S12 --log "$log")
run_align 1 bisect --db a.db --good S01=0,S02=0,S03=0 --bad S01=1,S02=1,S04=1 -- "${cmd[@]}" &&
	expect_out "^bisect: 4 switches differ between good and bad" &&
	expect_out "^no culprit: the bad environment gives the same records as the good one" &&
	expect_out "^trials: 2 \(2 run, 0 from the cache\): 0 diverge, 2 same, 0 unusable"
expect_eq "processes" "$(wc -l <"$log")" "2"

run_align 1 bisect --db a.db --good S01=0,S02=0,S03=0 --bad S01=1,S02=1,S04=1 --format json --out r.json -- "${cmd[@]}"
expect_eq "result" "$(jget r.json "r['result']")" "no-effect"
expect_eq "culprits" "$(jget r.json "r['culprits']")" "[]"
expect_eq "trials" "$(jget r.json "[t['verdict'] for t in r['trials']]")" '["same", "same"]'
# S03 is set on the good side only (unset on the bad side), S04 the other way round
expect_eq "unset sides" "$(jget r.json "[(s['key'], s['good'], s['bad']) for s in r['switches']]")" \
	'[["S01", "0", "1"], ["S02", "0", "1"], ["S03", "0", null], ["S04", null, "1"]]'
expect_eq "full set" "$(jget r.json "r['trials'][1]['switches']")" '["S01=1", "S02=1", "S03 unset", "S04=1"]'
expect_eq "cached rerun" "$(jget r.json "r['counts']['run']")" "0"

run_align 1 bisect --db a.db --good S01=0,S02=0,S03=0 --bad S01=1,S02=1,S04=1 --format md -- "${cmd[@]}" &&
	expect_out '^\*\*No culprit:\*\* the bad environment gives the same records'

# the same command whose S12 is among the switches does find it: the fixture can fail this test
run_align 0 bisect --db a.db --good S01=0,S12=0 --bad S01=1,S12=1 --format json --out r2.json -- "${cmd[@]}"
expect_eq "control culprit" "$(culprit_of r2.json)" "S12"
expect_eq "single culprit is no interaction" "$(jget r2.json "r['culprits'][0]['interaction']")" "false"
expect_eq "single culprit alone" "$(jget r2.json "r['culprits'][0]['switches'][0]['first_diff_from']")" "alone"
finish
