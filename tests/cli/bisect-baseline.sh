#!/usr/bin/env bash
# bisect-baseline: the comparison options. --baseline RUN compares trials with an ingested run (and
# refuses a good environment that already differs from it); --metric restricts the compared records;
# --trace-glob collects several per-rank traces of one trial into its run.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

# a reference trace made outside bisect, as a framework run would be, ingested as run 'ref'
mkdir ref && (cd ref && ALIGN_TRIAL_DIR=$PWD ALIGN_TRACE=$PWD/ref.atf "$TRACE") || fail "fixture failed"
run_align 0 ingest --db a.db --as ref ref/ref.atf
run_align 0 bisect --db a.db --baseline ref --good "$GOOD12" --bad "$BAD12" --format json --out r.json -- "$TRACE" --culprit S09
expect_eq "baseline" "$(jget r.json "r['baseline']")" "ref"
expect_eq "culprit vs ref" "$(culprit_of r.json)" "S09"
check_trials r.json --culprit S09
# dedup belongs to a run: the good trial's trace, byte-identical to ref's, lands in the trial's own run
# (with its records) and compares equal to ref
good_run=$(jget r.json "r['trials'][0]['run']")
expect_eq "good trial's run" "${good_run%%:*} $(jget r.json "r['trials'][0]['verdict']")" "bisect same"
expect_eq "good trial's records" "$(sql a.db "SELECT count(*) FROM record JOIN run ON run.id = run_id WHERE run.name = '$good_run'")" \
	"$(sql a.db "SELECT count(*) FROM record JOIN run ON run.id = run_id WHERE run.name = 'ref'")"

# a reference whose grad norm differs from what the good environment gives: nothing to bisect
mkdir ref2 && (cd ref2 && S01=1 ALIGN_TRIAL_DIR=$PWD ALIGN_TRACE=$PWD/ref2.atf "$TRACE" --grad-culprit S01) || fail "fixture failed"
run_align 0 ingest --db a.db --as ref2 ref2/ref2.atf
run_align 2 bisect --db a.db --baseline ref2 --good "$GOOD12" --bad "$BAD12" --out r2.json -- "$TRACE" --culprit S09 &&
	expect_err "error: the good environment already differs from baseline 'ref2' \(first at step 2, 'grad_norm'\)"
[ -e r2.json ] && fail "a report was written although the good trial differs from the baseline"

# S03 changes the loss, S06 the grad norm: --metric picks which records count
cmd=("$TRACE" --culprit S03 --grad-culprit S06)
run_align 0 bisect --db m.db --good "$GOOD12" --bad "$BAD12" --metric loss --format json --out loss.json -- "${cmd[@]}"
expect_eq "--metric loss" "$(culprit_of loss.json)" "S03"
run_align 0 bisect --db m.db --good "$GOOD12" --bad "$BAD12" --metric grad_norm --format json --out grad.json -- "${cmd[@]}"
expect_eq "--metric grad_norm" "$(culprit_of grad.json)" "S06"
expect_eq "grad first diff" "$(jget grad.json "r['culprits'][0]['first_diff']['name'] + ' ' + r['culprits'][0]['first_diff']['b']['bits']")" "grad_norm 0x3f000001"
# the loss bisect's trials were compared again from their runs, not run again
expect_eq "known subsets recompared without a process" \
	"$(jget grad.json "len([t for t in r['trials'] if t['cached']]) > 0 and r['counts']['run'] < r['counts']['trials']")" "true"
run_align 0 bisect --db m.db --good "$GOOD12" --bad "$BAD12" --metric loss --metric grad_norm --format json --out both.json -- "${cmd[@]}"
expect_eq "both metrics: both culprits" "$(culprit_of both.json)" "S03;S06"
# a metric in neither run is an error, as in align report
run_align 2 bisect --db m.db --good "$GOOD12" --bad "$BAD12" --metric nothing-matches -- "${cmd[@]}" &&
	expect_err "metric 'nothing-matches' \(canonical '[a-z_-]+'\) is in neither run"

# two ranks per trial, collected with --trace-glob from the trial directory
run_align 0 bisect --db g.db --good "$GOOD12" --bad "$BAD12" --trace-glob 'out/rank*.atf' --format json --out g.json \
	-- "$TRACE" --culprit S10 --ranks 2 --write-to out
expect_eq "--trace-glob culprit" "$(culprit_of g.json)" "S10"
check_trials g.json --culprit S10
run=$(jget g.json "r['culprits'][0]['switches'][0]['alone_trial']")
run=$(jget g.json "r['trials'][$run - 1]['run']")
expect_eq "ranks in a trial's run" "$(sql g.db "SELECT count(DISTINCT rank) || ' ' || count(DISTINCT source_id) FROM record JOIN run ON run.id = run_id WHERE run.name = '$run'")" "2 2"
# a glob that matches nothing makes every trial unusable, the good one first
run_align 2 bisect --db g.db --good "$GOOD12" --bad "$BAD12" --trace-glob 'nothing/*.atf' -- "$TRACE" --culprit S10 &&
	expect_err "the good environment's trial is unusable: wrote no trace \(no file matches --trace-glob 'nothing/\*.atf'\)"
finish
