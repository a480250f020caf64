#!/usr/bin/env bash
# bisect-culprit: a planted culprit. Of twelve switches, the step-2 loss changes only when S04 and S11
# are both bad. bisect must name exactly that pair as an interaction, check that the other ten change
# nothing, give every trial the verdict the plant implies, take at most the trials the reference search
# needs (ddmin, plus that one check; with --first ddmin alone), and a rerun (any format, or the good
# environment given as @FILE) must run no new process. Then two independent culprits: both are found.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

log=$PWD/procs.log
cmd=("$TRACE" --culprit S04,S11 --log "$log")
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" --format json --out r1.json -- "${cmd[@]}"
expect_eq "stdout with --out" "$OUT_TXT" ""
expect_eq "result" "$(jget r1.json "r['result']")" "culprit"
expect_eq "culprit" "$(culprit_of r1.json)" "S04,S11"
expect_eq "interaction" "$(jget r1.json "r['culprits'][0]['interaction']")" "true"
expect_eq "needed jointly" "$(jget r1.json "','.join(r['culprits'][0]['needed_jointly'])")" "S04,S11"
expect_eq "members alone" "$(jget r1.json "','.join(m['alone'] + '/' + m['without'] for m in r['culprits'][0]['switches'])")" "same/same,same/same"
fd="r['culprits'][0]['first_diff']"
expect_eq "first diff" "$(jget r1.json "'%s %s %s %s %s %s' % (tuple($fd[k] for k in ('step', 'name', 'verdict', 'ulp')) + ($fd['a']['bits'], $fd['b']['bits']))")" \
	"2 loss differ 1 0x40000000 0x40000001"
expect_eq "member first diff" "$(jget r1.json "r['culprits'][0]['switches'][0]['first_diff']['b']['bits'] + ' ' + r['culprits'][0]['switches'][0]['first_diff_from']")" \
	"0x40000001 set"
expect_eq "switches" "$(jget r1.json "len(r['switches'])")" "12"
check_trials r1.json --culprit S04,S11

expect_eq "the rest changes nothing" "$(jget r1.json "'%s %d' % (r['rest']['verdict'], len(r['rest']['switches']))")" "same 10"
n=$(jget r1.json "r['counts']['trials']")
ref=$(ref_trials 12 --culprit 3,10)
echo "trials: $n, reference search: $ref"
[ "$n" -le "$ref" ] || fail "bisect took $n trials, the reference search needs $ref"
expect_eq "processes run" "$(wc -l <"$log")" "$n"
expect_eq "counts.run" "$(jget r1.json "r['counts']['run']")" "$n"
expect_eq "cache rows" "$(sql a.db "SELECT count(*) FROM bisect_trial")" "$n"
expect_eq "every usable trial has a run" "$(sql a.db "SELECT count(*) FROM bisect_trial WHERE run_id IS NULL OR run_name NOT IN (SELECT name FROM run)")" "0"
expect_eq "no temporary report left" "$(ls r1.json.* 2>/dev/null | wc -l)" "0"

# rerun, text to stdout: the same answer from the cache, no process
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" -- "${cmd[@]}" &&
	expect_out "^culprit: 2 switches" && expect_out "^  S04=1 \(good: 0\): alone same" &&
	expect_out "^  S11=1 \(good: 0\)" &&
	expect_out "interaction: no member diverges alone; needed jointly: S04, S11" &&
	expect_out "^trials: $n \(0 run, $n from the cache\)" &&
	expect_out "^the other 10 switches, with the culprit at their good value: no change in the bits" &&
	expect_out "first diff \(of the set\): step 2 micro 0 rank 0 'loss': differ \(0x40000000 -> 0x40000001, 1 ulp\)"
expect_eq "no new process after a rerun" "$(wc -l <"$log")" "$n"

# Markdown, the good environment as @FILE (comments, blank lines, in another order): same bisect, cached
{ echo "# the good environment"; echo; for i in $(seq 12 -1 1); do printf 'S%02d=0\n' "$i"; done; } >good.env
run_align 0 bisect --db a.db --good @good.env --bad "$BAD12" --format md -- "${cmd[@]}" &&
	expect_out "^## Culprit: 2 switches" && expect_out '^- `S04=1` \(good: `0`\)' &&
	expect_out '^\| 1 \| \(none: the good environment\) \| same \| - \|' &&
	expect_out "^$n trials \(0 run, $n from the cache\)"
expect_eq "no new process with @FILE" "$(wc -l <"$log")" "$n"

# --first: ddmin alone, on a fresh database; the trial count is exactly what ddmin needs at most
run_align 0 bisect --db first.db --first --good "$GOOD12" --bad "$BAD12" --format json --out f.json -- "${cmd[@]}"
expect_eq "--first culprit" "$(culprit_of f.json)" "S04,S11"
expect_eq "--first checks no rest" "$(jget f.json "r['rest']")" "null"
ref=$(ref_trials 12 --culprit 3,10 --first)
n=$(jget f.json "r['counts']['trials']")
echo "--first trials: $n, reference ddmin: $ref"
[ "$n" -le "$ref" ] || fail "bisect --first took $n trials, ddmin needs $ref"

# two independent causes: S02 alone, and S06 with S10; both are found, in that order, then the rest
run_align 0 bisect --db two.db --good "$GOOD12" --bad "$BAD12" --format json --out two.json \
	-- "$TRACE" --culprit S02 --culprit S06,S10
expect_eq "two culprits" "$(culprit_of two.json)" "S02;S06,S10"
expect_eq "interactions" "$(jget two.json "[c['interaction'] for c in r['culprits']]")" "[false, true]"
expect_eq "rest after two" "$(jget two.json "r['rest']['verdict']")" "same"
check_trials two.json --culprit S02 --culprit S06,S10
n=$(jget two.json "r['counts']['trials']")
ref=$(ref_trials 12 --culprit 1 --culprit 5,9)
echo "two culprits: $n trials, reference search: $ref"
[ "$n" -le "$ref" ] || fail "bisect took $n trials, the reference search needs $ref"
run_align 0 bisect --db two.db --good "$GOOD12" --bad "$BAD12" -- "$TRACE" --culprit S02 --culprit S06,S10 &&
	expect_out "^culprit 1 of 2: 1 switch" && expect_out "^culprit 2 of 2: 2 switches" &&
	expect_out "^the other 9 switches, with the culprits at their good value: no change in the bits"

# a later spec wins per key: S11 set back to good on the bad side leaves no culprit (exit 1)
run_align 1 bisect --db a.db --good "$GOOD12" --bad "$BAD12" --bad S11=0 -- "${cmd[@]}" &&
	expect_out "^bisect: 11 switches differ"
finish
