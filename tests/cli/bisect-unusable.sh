#!/usr/bin/env bash
# bisect-unusable: the command crashes, dies of a signal, writes no trace or a trace ingest refuses, on
# some subsets. Those trials are unusable: listed with why, never taken as same or different, and the
# planted culprit (S07) is still found. An unusable good or bad trial is an error (exit 2).
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

# unusable whenever S07 is good and one of S02 (exit 3), S10 (SIGSEGV), S12 (no trace), S05 (garbage)
# is bad; the full bad set (S07 bad) is usable
plant=(--culprit S07 --crash-when 'S02,!S07' --signal-when 'S10,!S07' --notrace-when 'S12,!S07' --garbage-when 'S05,!S07')
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" --format json --out r.json -- "$TRACE" "${plant[@]}"
expect_eq "culprit" "$(culprit_of r.json)" "S07"
check_trials r.json --culprit S07 --unusable 'S02,!S07' --unusable 'S10,!S07' --unusable 'S12,!S07' --unusable 'S05,!S07'
n=$(jget r.json "r['counts']['trials']")
ref=$(ref_trials 12 --culprit 6 --unusable '1,!6' --unusable '9,!6' --unusable '11,!6' --unusable '4,!6')
echo "trials: $n, reference search: $ref"
[ "$n" -le "$ref" ] || fail "bisect took $n trials, the reference search needs $ref"
[ "$(jget r.json "r['counts']['unusable']")" -gt 0 ] || fail "no unusable trial: the plant did not bite"
expect_eq "unusable trials have no run" "$(jget r.json "[t['run'] for t in r['trials'] if t['verdict'] == 'unusable' and t['run']]")" "[]"

# the text report says why for each unusable trial
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" -- "$TRACE" "${plant[@]}" && expect_out "^culprit: 1 switch$"
while read -r why; do
	grep -qF "why: $why" out.txt || fail "text report lacks 'why: $why'"
done < <(jget r.json "'\\n'.join(sorted({t['reason'] for t in r['trials'] if t['verdict'] == 'unusable'}))")

# a rerun takes the unusable trials from the cache; --retry-unusable runs exactly those again
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" --format json --out again.json -- "$TRACE" "${plant[@]}"
expect_eq "cached rerun" "$(jget again.json "r['counts']['run']")" "0"
run_align 0 bisect --db a.db --good "$GOOD12" --bad "$BAD12" --retry-unusable --format json --out retry.json -- "$TRACE" "${plant[@]}"
expect_eq "--retry-unusable runs the unusable ones" "$(jget retry.json "r['counts']['run']")" "$(jget r.json "r['counts']['unusable']")"
expect_eq "retried culprit" "$(culprit_of retry.json)" "S07"

# make sure every kind is exercised: each plant alone, against the same culprit
for p in "--crash-when S02,!S07" "--signal-when S02,!S07" "--notrace-when S02,!S07" "--garbage-when S02,!S07"; do
	# shellcheck disable=SC2086
	run_align 0 bisect --db b.db --good "$GOOD12" --bad "$BAD12" --format json --out k.json -- "$TRACE" --culprit S07 $p
	expect_eq "culprit with $p" "$(culprit_of k.json)" "S07"
	check_trials k.json --culprit S07 --unusable 'S02,!S07'
	[ "$(jget k.json "r['counts']['unusable']")" -gt 0 ] || fail "$p: no unusable trial"
done
# every kind of unusable trial, with its reason (the ingest error names the trace file and line)
expect_eq "reasons" "$(sqlite3 b.db "SELECT DISTINCT substr(reason, 1, 17) FROM bisect_trial WHERE verdict = 'unusable' ORDER BY 1" | tr '\n' '|')" \
	'exit status 3: "t|killed by signal |trace rejected: /|wrote no trace ($|'

# the good environment crashes: nothing to compare with
run_align 2 bisect --db c.db --good "$GOOD12" --bad "$BAD12" --out c.json -- "$TRACE" --culprit S07 --crash-when '!S01' &&
	expect_err "error: the good environment's trial is unusable: exit status 3: \"trace.sh: planted crash\""
[ -e c.json ] && fail "a report was written for an unusable good trial"
# the whole bad set crashes
run_align 2 bisect --db c.db --good "$GOOD12" --bad "$BAD12" -- "$TRACE" --culprit S07 --signal-when S01 &&
	expect_err "error: the bad environment's trial is unusable: killed by signal 11"
finish
