#!/usr/bin/env bash
# ingest-xtuner-log: XTuner/mmengine stdout (tests/samples/xtuner-log/): "Iter(train) [i/N]" lines with
# warnings between, grad_norm before or after the loss or nan, "Epoch(train) [E][i/N]" (step over epochs),
# mmcv's ", "-separated "Epoch [E][i/N]", validation lines on the last training step; every value a
# window mean printed "{:.4f}" (an interval, dtype unknown, no bits), lr as learning_rate, time/memory
# as meta; an appended rerun, a truncated last line, and bad input (message, exit 2, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"
S="$SRCROOT/tests/samples/xtuner-log"
q() { sql a.db "SELECT group_concat(x, ' ') FROM (SELECT r.step||'|'||r.name||'|'||r.phase||'|'||coalesce(r.dtype,'-')||'|'||r.text||'|'||(CASE WHEN r.bits IS NULL THEN '-' ELSE 'bits' END) AS x FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND r.superseded=0 AND ($2) ORDER BY r.id)"; }

run_align 0 ingest --db a.db "$S/iter.log" && expect_out "iter.log: xtuner-log, 26 records into run 'iter'"
expect_eq "no warnings" "$(cat err.txt)" ""
expect_eq "losses and norms" "$(q iter "r.phase IN ('loss','optim','eval')")" \
	"10|learning_rate|optim|fp64|3.0002e-05|- 10|loss|loss|-|0.9421|- 20|learning_rate|optim|fp64|6.3335e-05|- 20|grad_norm|optim|-|0.7445|- 20|loss|loss|-|0.9169|- 30|learning_rate|optim|fp64|9.6668e-05|- 30|loss|loss|-|0.8919|- 30|grad_norm|optim|-|nan|- 1010|learning_rate|optim|fp64|1.3000e-04|- 1010|loss|loss|-|0.8997|- 1010|grad_norm|optim|-|0.6131|- 1010|eval_loss|eval|-|0.9012|-"
expect_eq "meta" "$(q iter "r.step=20 AND r.phase='meta'")" "20|time|meta|fp64|3.0543|- 20|data_time|meta|fp64|0.0190|- 20|memory|meta|fp64|13995|-"
expect_eq "loss interval" "$(sql a.db "SELECT printf('%.5f %.5f', lo, hi) FROM record WHERE name='loss' AND step=10")" "0.94205 0.94215"
expect_eq "canonical names" "$(sql a.db "SELECT group_concat(DISTINCT canon) FROM (SELECT canon FROM record WHERE phase<>'meta' ORDER BY canon)")" "eval_loss,grad_norm,learning_rate,loss"

run_align 0 ingest --db a.db "$S/epoch.log" && expect_out "epoch.log: xtuner-log, 27 records into run 'epoch'"
expect_eq "epoch steps" "$(q epoch "r.name IN ('loss','accuracy','loss_cls')")" "10|loss|loss|-|11.4723|- 20|loss|loss|-|1.5616|- 100|loss|loss|-|-6.0185|- 100|accuracy|eval|-|62.5000|- 190|loss_cls|loss|-|0.1939|- 190|loss|loss|-|0.4890|-"

# XTuner v1 (loguru "[XTuner][RANK R][time][INFO] Step N/M ..."): per-rank records, units skipped
run_align 0 ingest --db a.db "$S/v1.log" && expect_out "v1.log: xtuner-log, 44 records into run 'v1'"
expect_eq "v1: no warnings" "$(cat err.txt)" ""
v1() { sql a.db "SELECT group_concat(x, ' ') FROM (SELECT r.rank||'|'||r.step||'|'||r.name||'|'||r.phase||'|'||coalesce(r.dtype,'-')||'|'||r.text AS x FROM record r JOIN run ON run.id=r.run_id WHERE run.name='v1' AND ($1) ORDER BY r.rank, r.step, r.seq)"; }
expect_eq "v1 losses" "$(v1 "r.phase IN ('loss','optim')")" \
	"0|1|learning_rate|optim|fp64|0.000020 0|1|total_loss|loss|-|1.701 0|1|reduced_llm_loss|loss|-|1.684 0|1|grad_norm|optim|-|13.948 0|2|learning_rate|optim|fp64|0.000040 0|2|total_loss|loss|-|1.629 0|2|reduced_llm_loss|loss|-|1.640 0|2|grad_norm|optim|-|11.203 2|1|learning_rate|optim|fp64|0.000020 2|1|total_loss|loss|-|1.722 2|1|reduced_llm_loss|loss|-|1.684 2|1|grad_norm|optim|-|13.948 2|2|learning_rate|optim|fp64|0.000040 2|2|total_loss|loss|-|1.655 2|2|reduced_llm_loss|loss|-|1.640 2|2|grad_norm|optim|-|11.203"
expect_eq "v1 meta after a unit" "$(v1 "r.rank=2 AND r.step=1 AND r.phase='meta' AND r.name IN ('reserved_memory','tgs','e2e_tgs')")" "2|1|reserved_memory|meta|fp64|17.87 2|1|tgs|meta|fp64|805.3 2|1|e2e_tgs|meta|fp64|796.1"
expect_eq "v1 loss interval" "$(sql a.db "SELECT printf('%.4f %.4f', lo, hi) FROM record WHERE name='total_loss' AND rank=2 AND step=1")" "1.7215 1.7225"
{ head -n 5 "$S/v1.log"; sed -n 5p "$S/v1.log" | sed 's/total_loss: 1.701/total_loss: 1.702/'; } > v1rerun.log
run_align 0 ingest --db a.db v1rerun.log && expect_err "v1rerun.log:6: rank 0: step 1 after step 1: a rerun appended to this file\? the earlier records of rank 0 from step 1 on are superseded"
expect_eq "v1 rerun" "$(sql a.db "SELECT group_concat(r.rank||':'||r.text||':'||r.superseded, ' ') FROM record r JOIN run ON run.id=r.run_id WHERE run.name='v1rerun' AND r.name='total_loss' ORDER BY r.rank, r.id")" "0:1.701:1 0:1.702:0 2:1.722:0"

# two runs of one job compared: equal as printed, exit 0
{ cat "$S/iter.log"; echo 'done'; } > b.log
run_align 0 ingest --db r.db --as A "$S/iter.log" && run_align 0 ingest --db r.db --as B --format xtuner-log b.log
run_align 0 report --db r.db --runs A,B --format json && expect_out '"differ": 0'

# a rerun appended: the iteration goes back; a truncated last line warns
P='2024/05/07 11:17:20 - mmengine - INFO - '
{
	printf '%sIter(train) [  10/100]  lr: 3.0002e-05  loss: 0.9421\n' "$P"
	printf '%sIter(train) [  20/100]  lr: 3.0002e-05  loss: 0.9169\n' "$P"
	printf '%sIter(train) [  10/100]  lr: 3.0002e-05  loss: 0.9400\n' "$P"
	printf '%sIter(train) [  20/100]  lr: 3.0002e-05  loss: 0.91' "$P"
} > rerun.log
run_align 0 ingest --db a.db rerun.log
expect_err "rerun.log:3: iteration 10 after iteration 20: a rerun appended to this file\? the earlier records from step 10 on are superseded"
expect_err "rerun.log:4: last line is not terminated"
expect_eq "rerun" "$(q rerun "r.name='loss'")" "10|loss|loss|-|0.9400|-"

bad() { # bad FILE PATTERN [OPTIONS...]: exit 2, PATTERN on stderr, database unchanged
	local f=$1 pat=$2 before
	shift 2
	before=$(sqlite3 a.db .dump | sha256sum)
	run_align 2 ingest --db a.db --as "bad-$f" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(sqlite3 a.db .dump | sha256sum)" "$before"
}
printf '%sIter(train) [  10/100]  lr: 3.0e-05  loss: 0.9421\n%sIter(train) [  20/100]  lr: 3.0e-05  loss: x\n' "$P" "$P" > badloss.log
bad badloss.log "badloss.log:2: field 'loss': not a number: 'x'"
printf '%sCheckpoints will be saved to /w.\n%sExp name: t\n' "$P" "$P" > none.log
bad none.log "none.log:1: no mmengine training line \\('Iter\\(train\\) \\[i/N\\] ... loss: X'\\): the first mmengine logger line \\(here\\) has none"
printf 'x\n%sIter(train) [  10/100]  lr: 3.0e-05  time: 0.3\n' "$P" > noloss.log
printf '[XTuner][RANK 0][2025-08-29 09:17:51][INFO] Step 1/100 lr: 0.000020 total_loss: x grad_norm: 1.0\n' > v1bad.log
bad v1bad.log "v1bad.log:1: field 'total_loss': not a number: 'x'"
bad noloss.log "noloss.log:2: no mmengine training line .*: the first 'Iter\\(train\\)' line \\(here\\) has no loss field" --format xtuner-log
finish
