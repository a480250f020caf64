#!/usr/bin/env bash
# ingest-torchtitan-log: torchtitan stdout (tests/samples/torchtitan-log/): "[rank0]:[titan]" prefixes with
# ANSI colours and GC/profiler/checkpoint/warning lines between, srun -l "N: " prefixes with every rank
# printing, no prefix with every rank printing the same line; loss "{:8.5f}"/"{:7.4f}" as an interval
# (fp32, no bits), grad_norm of unknown dtype, job metadata as meta at the printing rank, the validation
# line, an appended rerun, a truncated last line, and bad input (message, exit 2, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"
S="$SRCROOT/tests/samples/torchtitan-log"
q() { sql a.db "SELECT group_concat(x, ' ') FROM (SELECT r.rank||'|'||r.step||'|'||r.name||'|'||r.phase||'|'||coalesce(r.dtype,'-')||'|'||r.text||'|'||(CASE WHEN r.bits IS NULL THEN '-' ELSE printf('%x', r.bits) END) AS x FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND r.superseded=0 AND ($2) ORDER BY r.id)"; }

run_align 0 ingest --db a.db "$S/rank0-ansi.log" && expect_out "rank0-ansi.log: torchtitan-log, 38 records into run 'rank0-ansi'"
expect_eq "losses: fp32 intervals, no bits" "$(q rank0-ansi "r.name IN ('loss','eval_loss')")" \
	"-1|1|loss|loss|fp32|8.14272|- -1|2|loss|loss|fp32|7.50118|- -1|3|loss|loss|fp32|6.91733|- -1|4|loss|loss|fp32|6.40201|- -1|4|eval_loss|eval|fp32|6.5120|- -1|5|loss|loss|fp32|6.03398|-"
expect_eq "printed precision of the loss" "$(sql a.db "SELECT digits||' '||printf('%.7f %.7f', lo, hi) FROM record WHERE name='loss' AND step=1 AND run_id=1")" "6 8.1427150 8.1427250"
expect_eq "grad_norm: unknown dtype" "$(q rank0-ansi "r.name='grad_norm' AND r.step=2")" "-1|2|grad_norm|optim|-|2.7104|-"
expect_eq "job metadata at rank 0" "$(q rank0-ansi "r.phase='meta' AND r.step=2")" \
	"0|2|memory_gib|meta|fp64|9.46|- 0|2|memory_pct|meta|fp64|64.99|- 0|2|tps|meta|fp64|7282|- 0|2|tflops|meta|fp64|0.52|- 0|2|mfu|meta|fp64|0.17|-"
expect_eq "no warnings" "$(cat err.txt)" ""

# srun -l: both ranks print; the loss is kept once, each rank's metadata at its rank
run_align 0 ingest --db a.db "$S/srun.log" && expect_out "srun.log: torchtitan-log, 36 records into run 'srun'"
expect_eq "srun losses" "$(q srun "r.name='loss'")" "-1|1|loss|loss|fp32|12.2365|- -1|2|loss|loss|fp32|10.8812|- -1|3|loss|loss|fp32|7.6259|-"
expect_eq "srun tps per rank" "$(q srun "r.name='tps' AND r.step=2")" "1|2|tps|meta|fp64|10049|- 0|2|tps|meta|fp64|10050|-"

# no prefix, three ranks printing the same step line: one copy (the first rank's metadata)
run_align 0 ingest --db a.db "$S/noprefix.log" && expect_out "noprefix.log: torchtitan-log, 14 records into run 'noprefix'"
expect_eq "noprefix" "$(q noprefix "r.name IN ('loss','tflops')")" "-1|4|loss|loss|fp32|7.62585|- -1|4|tflops|meta|fp64|314.71|- -1|5|loss|loss|fp32|7.07623|- -1|5|tflops|meta|fp64|313.36|-"

# an appended rerun: the step goes back with another loss: earlier records from that step on superseded;
# \r segments; a truncated last line warns
P='[rank0]:[titan] 2026-05-18 16:04:35,010 - root - INFO - '
{
	printf '%sstep:  1  loss:  8.14272  grad_norm:  3.9812\n' "$P"
	printf '%sstep:  2  loss:  7.50118  grad_norm:  2.7104\n' "$P"
	printf '%sstep:  1  loss:  8.14000  grad_norm:  3.9000\r%sstep:  2  loss:  7.50000  grad_norm:  2.7000\n' "$P" "$P"
	printf '%sstep:  3  loss:  6.9' "$P"
} > rerun.log
run_align 0 ingest --db a.db rerun.log
expect_err "rerun.log:3: step 1 after step 2: a rerun appended to this file\? the earlier records from step 1 on are superseded"
expect_err "rerun.log:4: last line is not terminated"
expect_eq "rerun live" "$(q rerun "r.name='loss'")" "-1|1|loss|loss|fp32|8.14000|- -1|2|loss|loss|fp32|7.50000|-"
expect_eq "rerun superseded" "$(sql a.db "SELECT count(*) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='rerun' AND superseded=1")" "4"

# --format overrides detection (a step line alone scores low without its metrics fields)
printf 'step: 7  loss: 3.5\n' > bare.txt
run_align 0 ingest --db a.db --format torchtitan-log bare.txt && expect_eq "bare" "$(q bare "1")" "-1|7|loss|loss|fp32|3.5|-"

bad() { # bad FILE PATTERN [OPTIONS...]: exit 2, PATTERN on stderr, database unchanged
	local f=$1 pat=$2 before
	shift 2
	before=$(sqlite3 a.db .dump | sha256sum)
	run_align 2 ingest --db a.db --as "bad-$f" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(sqlite3 a.db .dump | sha256sum)" "$before"
}
printf '%sstep:  1  loss:  8.1  grad_norm: 3.9\n%sstep:  2  loss:  abc  grad_norm: 3.9\n' "$P" "$P" > badloss.log
bad badloss.log "badloss.log:2: field 'loss': not a number: 'abc'"
printf '%sStarting job: Llama 3 debug training\n%sTraining starts at step 1.\n' "$P" "$P" > nosteps.log
bad nosteps.log "nosteps.log:1: no torchtitan step line \\('step: N  loss: X'\\): the first \\[titan\\] logger line \\(here\\) has none"
printf 'hello\n%sstep:  1  grad_norm: 3.9  loss:\n' "$P" > noloss.log
bad noloss.log "noloss.log:2: no torchtitan step line .*: the first line with 'step:' and 'loss:' \\(here\\) has no 'loss: value' field" --format torchtitan-log
printf 'plain text\n' > plain.log
bad plain.log "plain.log:1: no torchtitan step lines" --format torchtitan-log
finish
