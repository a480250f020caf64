#!/usr/bin/env bash
# ingest-paddle: PaddleFleet/PaddleFormers trainer stdout (paddle-log) and metrics_rank{R}.json
# (paddle-metrics), formats.md section 3: colorlog prefix and ANSI codes, tqdm \r segments and a progress
# bar glued in front, UTF-8 noise, round(x, 8) losses recovered as float32 bits, loss_md5/*_md5 on their
# values (verified; a mismatch warns; the md5 picks the float32 when the print cannot), eval lines on the
# preceding step, global values deduplicated across ranks, per-rank MTP values, anchors on the same
# stream, appended reruns (banner, resume, bare step reset), multi-line Tensor values, a truncated last
# line, gzip, json.dumps NaN/Infinity, and bad input (message, exit 2, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"

# f32md5 HEX: md5 of the float32 with bit pattern HEX, little-endian (md5sum, independent of align)
f32md5() { printf "\\x${1:6:2}\\x${1:4:2}\\x${1:2:2}\\x${1:0:2}" | md5sum | cut -c1-32; }
# q DB SQL-WHERE: rank|step|micro|name|phase|dtype|bits|text|digest of matching live records, in order
q() {
	sql "$1" "SELECT rank||'|'||step||'|'||micro||'|'||name||'|'||phase||'|'||coalesce(dtype,'')||'|'||(CASE WHEN bits IS NULL THEN '' ELSE printf('%x', bits) END)||'|'||coalesce(text,'')||'|'||coalesce(digest,'') FROM record WHERE superseded=0 AND ($2) ORDER BY id"
}
E=$'\x1b'
CR=$'\r'
PFX='[2026-08-20 10:16:01,000] [    INFO] - '
M1087=$(f32md5 412de667)    # 10.86875057 (the float32 10.868750572204590)
MMTP=$(f32md5 412e00e6)     # 10.875219345092773
expect_eq "md5sum fixture" "$M1087" "36c089f8e14e6d67e0621d7c6dad1be5"

# 1. the spec's lines: colour codes, a resumed run (anchors start at step 17), LOG_LOSS_MD5=1 on step 17,
# a tqdm bar before \r, a bar glued in front without \r, UTF-8 text, an eval line, the rank's anchors
# (with leading blank lines) on the same stream
cat > workerlog.0 <<EOF
${E}[32m[2026-08-20 10:15:40,001] [    INFO]${E}[0m - ***** Running training *****
${E}[32m[2026-08-20 10:15:40,002] [    INFO]${E}[0m - 训练开始: Num examples = 1000
${E}[32m[2026-08-20 10:15:40,003] [    INFO]${E}[0m -   Continuing training from global step 16

final_loss: rank=0 val=10.86875057220458984375 md5=$M1087
${E}[32m[2026-08-20 10:15:44,512] [    INFO]${E}[0m - loss: 10.86875057, learning_rate: 0.0001499, global_step: 17, loss_md5: $M1087, current_memory_allocated: 41.27812194824219, interval_runtime: 1.2034, interval_hardware_tflops_per_device: 201.7, global_norm: 2.4172463417053223, mtp_1_loss: 10.875219345092773, mtp_1_loss_md5: $MMTP, progress_or_epoch: 0.0017

final_loss: rank=0 val=10.86863899230957031250 md5=2d5fcaa18e8f4399a2dc27f86daa50a9
${E}[32m[2026-08-20 10:15:45,730] [    INFO]${E}[0m - loss: 10.86863899, learning_rate: 0.0001499, global_step: 18, interval_runtime: 1.2181, global_norm: 2.401733160018921, mtp_1_loss: 10.875251770019531, progress_or_epoch: 0.0018
final_loss: rank=0 val=12.06352519989013671875 md5=ab186c13fe57568e8d8354c9d2f96352
TrainProcess:  19%|█▉        | 19/100 [00:20<01:40,  1.21s/it]${CR}[2024-03-03 18:06:33,568] [    INFO] - loss: 12.0635252, learning_rate: 2e-06, global_step: 19, interval_runtime: 4.7412, progress_or_epoch: 0.0008
[2026-08-20 10:17:02,004] [    INFO] - eval_loss: 7.3988118171691895, eval_runtime: 12.4467, eval_samples_per_second: 82.2707, progress_or_epoch: 0.0059
final_loss: rank=0 val=9.50000000000000000000 md5=$(f32md5 41180000)
TrainProcess:  20%|██        | 20/100 [00:21<01:39,  1.21s/it][2024-03-03 18:06:34,100] [    INFO] - loss: 9.5, learning_rate: 2e-06, global_step: 20
[2026-08-20 10:17:03,004] [    INFO] - global_save_step: 50, progress_or_epoch: 0.0059
EOF
run_align 0 ingest --db a.db workerlog.0 && expect_out "workerlog.0: paddle-log, 28 records into run 'workerlog.0'"
expect_eq "losses, md5s, bits" "$(q a.db "name IN ('loss','mtp_1_loss','final_loss','eval_loss')")" "0|17|0|final_loss|loss|fp32|412de667|10.86875057220458984375|$M1087
-1|17|-1|loss|loss|fp32|412de667|10.86875057|$M1087
-1|17|-1|mtp_1_loss|loss|fp32|412e00e6|10.875219345092773|$MMTP
0|18|0|final_loss|loss|fp32|412de5f2|10.86863899230957031250|2d5fcaa18e8f4399a2dc27f86daa50a9
-1|18|-1|loss|loss|fp32|412de5f2|10.86863899|
0|18|-1|mtp_1_loss|loss|fp32|412e0108|10.875251770019531|
0|19|0|final_loss|loss|fp32|41410433|12.06352519989013671875|ab186c13fe57568e8d8354c9d2f96352
-1|19|-1|loss|loss|fp32|41410433|12.0635252|
-1|19|-1|eval_loss|eval|fp32|40ecc311|7.3988118171691895|
0|20|0|final_loss|loss|fp32|41180000|9.50000000000000000000|$(f32md5 41180000)
-1|20|-1|loss|loss|fp32|41180000|9.5|"
expect_eq "precision classes" "$(sql a.db "SELECT group_concat(name||':'||coalesce(digits,'x')||':'||coalesce(dtype,''), ' ') FROM (SELECT name, digits, dtype FROM record WHERE step=17 AND name IN ('loss','learning_rate','global_norm','interval_runtime') ORDER BY id)")" "loss:10:fp32 learning_rate:4:fp64 interval_runtime:5:fp64 global_norm:x:fp32"
expect_eq "job metrics are phase meta" "$(sql a.db "SELECT group_concat(DISTINCT phase) FROM record WHERE name LIKE 'interval%' OR name LIKE 'progress%' OR name LIKE 'current%'")" "meta"
expect_eq "canonical names" "$(sql a.db "SELECT group_concat(DISTINCT canon) FROM (SELECT canon FROM record WHERE name IN ('global_norm','learning_rate','final_loss') ORDER BY canon)")" "grad_norm,learning_rate,loss"
expect_eq "no warnings" "$(sql a.db "SELECT coalesce(warnings,'none') FROM source")" "none"

# 2. the same global line printed by two ranks: one record; the per-rank mtp_1_loss (no md5): one per rank
mkdir r
L="[2026-08-20 10:15:45,730] [    INFO] - loss: 9.25, learning_rate: 0.0001, global_step: 1, global_norm: 2.5"
printf '%s, mtp_1_loss: 9.5\n' "$L" > r/workerlog.0
printf '%s, mtp_1_loss: 9.125\n' "$L" | gzip -c > r/workerlog.1
run_align 0 ingest --db a.db --as two r/workerlog.0 r/workerlog.1
expect_eq "dedup of global values" "$(sql a.db "SELECT group_concat(name||'@'||rank, ' ') FROM (SELECT r.name, r.rank FROM record r JOIN run ON run.id=r.run_id WHERE run.name='two' ORDER BY r.id)")" "loss@-1 learning_rate@-1 global_norm@-1 mtp_1_loss@0 mtp_1_loss@1"

# 3. md5 checks: a loss_md5 of another value warns (both kept); below 0.125 the print alone has 11
# float32s, the md5 picks 0x3c4a4587; without an md5 no bits are claimed
M0123=$(f32md5 3c4a4587)
{
	printf '[2026-08-20 10:15:45,730] [    INFO] - loss: 9.5, learning_rate: 1e-05, global_step: 1, loss_md5: %s\n' "$(f32md5 41140000)"
	printf '[2026-08-20 10:15:46,730] [    INFO] - loss: 0.01234568, learning_rate: 1e-05, global_step: 2, loss_md5: %s\n' "$M0123"
	printf '[2026-08-20 10:15:47,730] [    INFO] - loss: 0.01234568, learning_rate: 1e-05, global_step: 3\n'
} > md5.log
run_align 0 ingest --db a.db md5.log && expect_err "md5.log:1: loss_md5 $(f32md5 41140000) does not match loss 9.5"
expect_eq "md5 checks" "$(q a.db "name='loss' AND run_id=(SELECT id FROM run WHERE name='md5')")" "-1|1|-1|loss|loss|fp32|41180000|9.5|$(f32md5 41140000)
-1|2|-1|loss|loss|fp32|3c4a4587|0.01234568|$M0123
-1|3|-1|loss|loss|fp32||0.01234568|"

# 4. an appended rerun after a start banner: the first run's records from step 1 on (trainer values
# and the rank's anchors) are superseded; a resumed run rebases the anchors to step N+1
{
	for s in 1 2 3; do
		printf '\nfinal_loss: rank=0 val=9.50000000000000000000 md5=%s\n' "$(f32md5 41180000)"
		printf '[2026-08-20 10:15:4%d,000] [    INFO] - loss: 9.5, global_step: %d\n' "$s" "$s"
	done
	printf '[2026-08-20 10:16:00,000] [    INFO] - ***** Running training *****\n'
	for s in 1 2; do
		printf '\nfinal_loss: rank=0 val=8.75000000000000000000 md5=%s\n' "$(f32md5 410c0000)"
		printf '[2026-08-20 10:16:0%d,000] [    INFO] - loss: 8.75, global_step: %d\n' "$s" "$s"
	done
	printf '[2026-08-20 10:17:00,000] [    INFO] - ***** Running training *****\n'
	printf '[2026-08-20 10:17:00,001] [    INFO] -   Continuing training from global step 10\n'
	printf '\nfinal_loss: rank=0 val=8.50000000000000000000 md5=%s\n' "$(f32md5 41080000)"
	printf '[2026-08-20 10:17:01,000] [    INFO] - loss: 8.5, global_step: 11\n'
} > workerlog.0
mkdir -p rerun && mv workerlog.0 rerun/
run_align 0 ingest --db a.db --as rerun rerun/workerlog.0
expect_err "rerun/workerlog.0:13: a rerun appended to this file restarts at global_step 1 \(the last was 3\)"
rr() { sql a.db "SELECT group_concat(step||':'||name||'='||text, ' ') FROM (SELECT r.step, r.name, r.text FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND r.superseded=$2 ORDER BY r.id)"; }
expect_eq "live after rerun" "$(rr rerun 0)" "1:final_loss=8.75000000000000000000 1:loss=8.75 2:final_loss=8.75000000000000000000 2:loss=8.75 11:final_loss=8.50000000000000000000 11:loss=8.5"
expect_eq "superseded" "$(rr rerun 1)" "1:final_loss=9.50000000000000000000 1:loss=9.5 2:final_loss=9.50000000000000000000 2:loss=9.5 3:final_loss=9.50000000000000000000 3:loss=9.5"
expect_eq "run marked resumed" "$(sql a.db "SELECT resumed FROM run WHERE name='rerun'")" "1"
# a step reset without a banner: superseded too, with a warning that says so
printf '[2026-08-20 10:16:01,000] [    INFO] - loss: 9.5, learning_rate: 1e-05, global_step: %d\n' 1 2 1 > bare.log
run_align 0 ingest --db a.db bare.log && expect_err "bare.log:3: global_step went back from 2 to 1 without a trainer start banner"
expect_eq "bare reset" "$(sql a.db "SELECT count(*)||'/'||sum(superseded) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='bare' AND r.name='loss'")" "3/2"

# 4b. the loss is round(sum / (global_step - last logged), 8) of an fp32 sum reset at each log: right
# after the last logged step (or step 1, or the step after "Continuing training from global step N") it
# is the fp32; a gap (logging_steps 5, a resumed excerpt without its banner) is a Python-float mean:
# dtype fp64, an interval, no fp32 bits; a loss_md5 that matches an fp32 still proves one
{
	printf '%sloss: 9.12345678, learning_rate: 1e-05, global_step: %d\n' "$PFX" 5 "$PFX" 10
	printf '%sloss: 9.25, learning_rate: 1e-05, global_step: 11\n' "$PFX"
	printf '%sloss: 9.0, learning_rate: 1e-05, global_step: 13, loss_md5: %s\n' "$PFX" "$(f32md5 41100000)"
} > steps5.log
printf '%sloss: 8.75, global_step: %d\n' "$PFX" 17 "$PFX" 18 > excerpt.log
{ printf '%s  Continuing training from global step 16\n' "$PFX"; cat excerpt.log; } > resumed.log
{ printf '%s***** Running training *****\n' "$PFX"; cat excerpt.log; } > started.log
run_align 0 ingest --db m.db steps5.log excerpt.log resumed.log started.log
lt() { sql m.db "SELECT group_concat(step||':'||dtype||':'||(CASE WHEN bits IS NULL THEN '-' ELSE printf('%x', bits) END), ' ') FROM (SELECT r.* FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND r.name='loss' ORDER BY r.id)"; }
expect_eq "logging_steps 5: means, then one step, then an md5-proven fp32" "$(lt steps5)" "5:fp64:- 10:fp64:- 11:fp32:41140000 13:fp32:41100000"
expect_eq "an excerpt from step 17: its first loss may average" "$(lt excerpt)" "17:fp64:- 18:fp32:410c0000"
expect_eq "resumed from 16 (banner): fp32 at once" "$(lt resumed)" "17:fp32:410c0000 18:fp32:410c0000"
expect_eq "a start banner then step 17: a mean of 17 steps" "$(lt started)" "17:fp64:- 18:fp32:410c0000"
expect_eq "a mean is an interval of 8 decimals" "$(sql m.db "SELECT digits||' '||(lo < hi) FROM record WHERE name='loss' AND step=5")" "9 1"

# 5. a multi-line Tensor(...) value is skipped with a warning; keys after it are kept; anchors with
# --micro-batches 2 that do not fit the trainer's steps warn; a truncated last line is ignored
{
	printf '[2026-08-20 10:16:01,000] [    INFO] - loss: 9.5, learning_rate: 1e-05, global_step: 1, aux_loss: Tensor(shape=[], dtype=float32, place=Place(gpu:0), stop_gradient=True,\n'
	printf '       0.25), global_norm: 2.5, progress_or_epoch: 0.001\n'
	printf 'final_loss: rank=0 val=9.50000000000000000000 md5=%s\n' "$(f32md5 41180000)"
	printf '[2026-08-20 10:16:02,000] [    INFO] - loss: 9.25, learning_rate: 1e-05, global_step: 2\n'
	printf '[2026-08-20 10:16:03,000] [    INFO] - loss: 9.125, learning_rate: 1e-05, glo'
} > tensor.log
run_align 0 ingest --db a.db --micro-batches 2 tensor.log
expect_err "tensor.log:1: value of 'aux_loss' is a Tensor\(...\) print, not a number: skipped"
expect_err "tensor.log:5: last line is not terminated"
expect_err "tensor.log:4: rank 0 printed 1 loss anchors by the end of step 2, but --micro-batches 2 --order with 1 entry means 4"
expect_eq "keys around the Tensor" "$(rr tensor 0)" "1:loss=9.5 1:learning_rate=1e-05 1:global_norm=2.5 1:progress_or_epoch=0.001 1:final_loss=9.50000000000000000000 2:loss=9.25 2:learning_rate=1e-05"

# a Tensor( that never closes: in a line that is no trainer dict it swallows nothing; in a trainer dict
# the keys before it count and the next log record ends it; Python nan/inf spellings are values
{
	printf '%snote: Tensor(shape=[2], dtype=float32, place=Place(gpu:0), stop_gradient=True,\n' "$PFX"
	printf '%sloss: 9.5, global_step: 1, aux: Tensor(shape=[], dtype=float32, place=Place(gpu:0), stop_gradient=True,\n' "$PFX"
	printf '%sloss: nan, global_step: 2, global_norm: inf, mtp_1_loss: -inf\n' "$PFX"
} > tensor2.log
run_align 0 ingest --db a.db tensor2.log
expect_err "tensor2.log:2: a Tensor\(...\) value is not closed before the next log record"
expect_eq "open Tensor" "$(sql a.db "SELECT group_concat(step||':'||name||'='||text||':'||coalesce(value,'null'), ' ') FROM (SELECT r.* FROM record r JOIN run ON run.id=r.run_id WHERE run.name='tensor2' ORDER BY r.id)")" "1:loss=9.5:9.5 2:loss=nan:null 2:global_norm=inf:Inf 2:mtp_1_loss=-inf:-Inf"

# 6. metrics_rank{R}.json: json.dumps NaN/Infinity/-Infinity, the rank from the name for the per-rank
# mtp value, a rerun appended by a new dumper process, a half-written record glued to the rerun's
# first one, and a truncated last line
{
	printf '{"loss": 10.86875057, "learning_rate": 0.0001499, "global_step": 1, "loss_md5": "%s", "interval_runtime": 1.2034, "metrics_dumper_pid": 40412, "metrics_dumper_timestamp": 1787220944512}\n' "$M1087"
	printf '{"loss": NaN, "learning_rate": 0.0001499, "global_step": 2, "global_norm": Infinity, "mtp_1_loss": -Infinity, "metrics_dumper_pid": 40412}\n'
	printf '{"loss": 9.5, "learning_rate": 0.0001499, "global_step": 3, "note": "a \\"quoted\\" NaN, Infinity", "metrics_dumper_pid": 40412}\n'
	printf '{"loss": 9.25, "learning_rate": 0.00014{"loss": 8.75, "learning_rate": 0.0001499, "global_step": 2, "metrics_dumper_pid": 50555}\n'
	printf '{"eval_loss": 7.3988118171691895, "eval_runtime": 12.4467, "metrics_dumper_pid": 50555}\n'
	printf '{"loss": 8.5, "learning_rate": 0.0001499, "global_step": 3, "metrics_dumper_pid": 50'
} > metrics_rank3.json
gzip -c metrics_rank3.json > metrics_rank3.json.gz
run_align 0 ingest --db a.db --as met metrics_rank3.json.gz
expect_err "metrics_rank3.json.gz:4: a half-written record \(39 bytes\) is glued to the next one"
expect_err "metrics_rank3.json.gz:4: a rerun appended to this file restarts at global_step 2 \(the last was 3\)"
expect_err "metrics_rank3.json.gz:6: last line is not terminated"
run_align 0 ingest --db a.db --as met --format paddle-metrics metrics_rank3.json && expect_out "already ingested into run 'met'"
expect_eq "metrics records" "$(q a.db "run_id=(SELECT id FROM run WHERE name='met') AND name NOT LIKE 'interval%'")" "-1|1|-1|loss|loss|fp32|412de667|10.86875057|$M1087
-1|1|-1|learning_rate|optim|fp64||0.0001499|
-1|2|-1|loss|loss|fp64||8.75|
-1|2|-1|learning_rate|optim|fp64||0.0001499|
-1|2|-1|eval_loss|eval|fp32|40ecc311|7.3988118171691895|
-1|2|-1|eval_runtime|meta|fp64||12.4467|"
expect_eq "NaN, Infinity, -Infinity (superseded by the rerun)" "$(sql a.db "SELECT group_concat(name||'@'||rank||'='||text||':'||coalesce(value,'null')||':'||superseded, ' ') FROM (SELECT r.* FROM record r JOIN run ON run.id=r.run_id WHERE run.name='met' AND r.step=2 AND r.name IN ('loss','mtp_1_loss','global_norm') ORDER BY r.id)")" "loss@-1=NaN:null:1 global_norm@-1=Infinity:Inf:1 mtp_1_loss@3=-Infinity:-Inf:1 loss@-1=8.75:8.75:0"
run_align 0 ingest --db b.db metrics_rank3.json && expect_out "metrics_rank3.json: paddle-metrics"

# 7. the reference workerlog refs/logs/paddle-dsv4.log (LOG_LOSS_MD5=1, mirrors megatron-dsv4.log): no
# warnings, and every value is the float32 its generator's table says, md5s included
REF="$SRCROOT/refs/logs/paddle-dsv4.log"
TSV="$SRCROOT/refs/logs/paddle-dsv4.values.tsv"
run_align 0 ingest --db ref.db "$REF" && expect_out "paddle-dsv4.log: paddle-log, 328 records into run 'paddle-dsv4'$"
expect_eq "reference bits" "$(sql ref.db "SELECT step||'|'||name||'|'||printf('%08x', bits) FROM record WHERE name IN ('loss','mtp_1_loss','global_norm','eval_loss') ORDER BY step, CASE name WHEN 'loss' THEN 0 WHEN 'mtp_1_loss' THEN 1 WHEN 'global_norm' THEN 2 ELSE 3 END")" "$(awk -F'\t' 'NR > 1 {print $1 "|" $2 "|" substr($3, 3)}' "$TSV")"
expect_eq "reference md5s" "$(sql ref.db "SELECT step||'|'||name||'|'||digest FROM record WHERE digest IS NOT NULL ORDER BY step, name")" "$(awk -F'\t' 'NR > 1 && ($2 == "loss" || $2 == "mtp_1_loss") {print $1 "|" $2 "|" $6}' "$TSV")"
expect_eq "md5 of step 7's loss" "$(f32md5 4133b872)" "$(sql ref.db "SELECT digest FROM record WHERE name='loss' AND step=7")"

# 8. the ERNIE-kit dialect (PaddleFormers): job metadata is phase meta, "{:.6f}" strings are rounded
# (the layout of a real ERNIE-kit line, values synthetic)
E='[2026-01-19 17:43:11,367] [    INFO] - '
echo "${E}loss: 10.86875057220459, loss_cur_dp: 10.86875057220459, learning_rate: 1.666667e-06, global_step: 1, mem_allocated_gb: 13.636426, max_mem_allocated_gb: 19.670876, mem_reserved_gb: 33.954417, max_mem_reserved_gb: 45.060626, loss_scale: 32768.000000, global_runtime: 104.895400, global_samples_per_second: 0.610100, global_steps_per_second: 0.009500, tokens_trained_current_step: 524288, timestamp: 1768815791366, TFLOPS_per_sec_per_card: 23.853000, tokens_per_sec_per_card: 4980.700000, tokens_per_sec_per_card_average: 4980.700000, progress_or_epoch: 0.007700" > ernie.log
run_align 0 ingest --db e.db --format paddle-log ernie.log
expect_eq "ERNIE meta fields" "$(sql e.db "SELECT group_concat(name, ' ') FROM (SELECT name FROM record WHERE phase='meta' ORDER BY seq)")" \
	"mem_allocated_gb max_mem_allocated_gb mem_reserved_gb max_mem_reserved_gb global_runtime global_samples_per_second global_steps_per_second tokens_trained_current_step timestamp TFLOPS_per_sec_per_card tokens_per_sec_per_card tokens_per_sec_per_card_average progress_or_epoch"
expect_eq "ERNIE numerics" "$(sql e.db "SELECT group_concat(name||':'||phase, ' ') FROM (SELECT name, phase FROM record WHERE phase<>'meta' ORDER BY seq)")" \
	"loss:loss loss_cur_dp:metric learning_rate:optim loss_scale:metric"
expect_eq "{:.6f} is rounded, not a repr" "$(sql e.db "SELECT (bits IS NULL)||' '||digits||' '||printf('%.7f', hi) FROM record WHERE name='loss_scale'")" "1 11 32768.0000005"

# 9. the other layouts seen in the wild (tests/samples/paddle-log/): colorlog without the timestamp; the
# older scripts' "global step N, ..., loss: X" lines ("%f" of the step's fp32 loss: an interval; "learning
# rate" is learning_rate; speed/ips/costs are meta); the early Trainer's dict prints, one line or wrapped
# over tab-indented lines (joined: the step on a later line is kept), a gap making a mean
SP="$SRCROOT/tests/samples/paddle-log"
pl() { sql s.db "SELECT group_concat(x, ' ') FROM (SELECT r.step||':'||r.name||':'||r.phase||':'||coalesce(r.dtype,'-')||':'||r.text AS x FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND ($2) ORDER BY r.id)"; }
run_align 0 ingest --db s.db "$SP/nostamp.log" && expect_out "nostamp.log: paddle-log, 16 records"
expect_eq "no timestamp" "$(pl nostamp "r.phase<>'meta'")" "1:loss:loss:fp32:2.34567891 1:learning_rate:optim:fp64:4.9e-05 2:loss:loss:fp32:2.21101761 2:learning_rate:optim:fp64:4.8e-05 2:eval_loss:eval:fp32:2.1904356479644775"
run_align 0 ingest --db s.db "$SP/global-step.log" && expect_out "global-step.log: paddle-log, 18 records"
expect_eq "global step lines" "$(pl global-step "r.phase<>'meta'")" "10:loss:loss:fp32:0.693147 20:loss:loss:fp32:0.541203 30:loss:loss:fp32:0.498811 40:loss:loss:fp32:9.867420 40:lm_loss:loss:fp32:9.341120 40:sop_loss:loss:fp32:0.526300 40:learning_rate:optim:fp64:9.99999e-05"
expect_eq "global step meta" "$(pl global-step "r.step=40 AND r.phase='meta'")" "40:ips:meta:fp64:1234.56 40:avg_batch_cost:meta:fp64:0.72183"
# the example scripts' evaluate() lines ("eval loss: %f, acc: %s, ... eval done total : T s") at the last global step
run_align 0 ingest --db s.db "$SP/global-step-eval.log" && expect_out "global-step-eval.log: paddle-log, 24 records"
expect_eq "global step eval lines" "$(pl global-step-eval "r.phase='eval'")" "200:eval_loss:eval:fp32:0.512345 200:eval_acc:eval:-:0.7734375 400:eval_loss:eval:fp32:0.462010 400:eval_acc:eval:-:0.8125 400:eval_precision:eval:-:0.8 400:eval_recall:eval:-:0.9 400:eval_f1:eval:-:0.8470588235294118 400:eval_acc_and_f1:eval:-:0.8297794117647059"
expect_eq "%f is rounded, not a repr" "$(sql s.db "SELECT digits FROM record WHERE name='loss' AND step=10")" "6"
run_align 0 ingest --db s.db "$SP/dict.log" && expect_out "dict.log: paddle-log, 11 records"
expect_eq "dict prints" "$(pl dict "r.phase<>'meta'")" "1:loss:loss:fp32:2.34567891 1:learning_rate:optim:fp64:4.9e-05 2:loss:loss:fp32:2.21101761 2:learning_rate:optim:fp64:4.8e-05 2:eval_loss:eval:fp32:2.1904356479644775 4:loss:loss:fp64:2.1018 4:learning_rate:optim:fp64:4.7e-05"
expect_eq "wrapped dict lines" "$(sql s.db "SELECT group_concat(line) FROM record WHERE name='loss' AND run_id=(SELECT id FROM run WHERE name='dict')")" "2,3,6"
printf "{'loss': 2.5,\n\t'global_step': 1,\n" > opendict.log
run_align 2 ingest --db s.db --format paddle-log opendict.log && expect_err "opendict.log:1: a trainer dict print is not closed at the end of the file: ignored"

bad() { # bad FILE PATTERN [OPTIONS...]: exit 2, PATTERN on stderr, database unchanged
	local f=$1 pat=$2 before
	shift 2
	before=$(db_count a.db)
	run_align 2 ingest --db a.db --as "bad-$f" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(db_count a.db)" "$before"
}
P='[2026-08-20 10:16:01,000] [    INFO] - '
printf '%sloss: 9.5, global_step: 1\n%sloss: abc, global_step: 2\n' "$P" "$P" > badloss.log
bad badloss.log "badloss.log:2: field 'loss': not a number: 'abc'"
printf '%sloss: 9.5, global_step: one\n' "$P" > badstep.log
printf 'global step 10, epoch: 0, batch: 9, loss: 0.693147, speed: 1.52 step/s\neval loss: nan?, acc: 0.5, eval done total : 1.0 s\n' > badeval.log
bad badeval.log "badeval.log:2: field 'eval loss': not a number: 'nan\\?'"
bad badstep.log "badstep.log:1: field 'global_step': not a step number: 'one'"
printf '%sloss: 9.5, global_step: 1, loss_md5: 36c089f8e14e6d67e0621d7c6dad1be\n' "$P" > badmd5.log
bad badmd5.log "badmd5.log:1: field 'loss_md5': malformed md5 '36c089f8e14e6d67e0621d7c6dad1be' \(not 32 hex digits\)"
printf '%sloss: 9.5, global_step: 1\nfinal_loss: rank=0 val=9.5 md5=xyz\n' "$P" > badanchor.log
bad badanchor.log "badanchor.log:2: final_loss anchor: field 'md5': malformed md5"
printf '%sThe training arguments\n%s  Num examples = 1000\n' "$P" "$P" > garbage.log
bad garbage.log "garbage.log:1: no Paddle trainer line \\('loss: ..., global_step: N'\\) and no anchors: the first Paddle logger line \\(here\\) has no 'loss' or 'global_step'"
bad garbage.log "garbage.log:1: no Paddle trainer line" --format paddle-log
printf 'global step 10, epoch: 0, batch: 9, loss: 0.693147, speed: 1.52 step/s\nglobal step 20, epoch: 0, batch: 19, loss: nope, speed: 1.61 step/s\n' > badglobal.log
bad badglobal.log "badglobal.log:2: field 'loss': not a number: 'nope'"
# the error points at the first line that looked like a trainer line and says what it lacked, not at the
# last line of the file
{ printf 'plain output\n%sThe training arguments\n' "$P"; printf '%sloss: 9.5, learning_rate: 0.0001499, interval_runtime: 1.2\n' "$P"
  printf '%sglobal_save_step: 50, progress_or_epoch: 0.01\n' "$P"; printf 'more output\n'; } > nostep.log
bad nostep.log "nostep.log:3: no Paddle trainer line \\('loss: ..., global_step: N'\\) and no anchors: the first logged dict that looks like one has 'loss' but no 'global_step'" --format paddle-log
{ printf '%sloss: 9.5, global_step: 1\n' "$P"; head -c 1100000 /dev/zero | tr '\0' a; printf '\n'; } > huge.log
bad huge.log "huge.log:2: line longer than 1 MiB"
printf '%sloss: 9.5, global_step: 1\n\0\n' "$P" > nul.log
bad nul.log "nul.log:2: binary data"
printf '{"loss": 9.5, "global_step": 1}\nnot json at all\n' > metrics_rank0.json
bad metrics_rank0.json "metrics_rank0.json:2: not a JSON object"
printf '{"loss": "9.5", "global_step": 1}\n' > mstr.json
bad mstr.json "mstr.json:1: field 'loss': not a number: '9.5'" --format paddle-metrics
printf '{"loss": 9.5, "global_step": "1"}\n' > mstep.json
bad mstep.json "mstep.json:1: field 'global_step': not a step number" --format paddle-metrics
printf '{"loss": 9.5, "global_step": 1, "loss_md5": "zz"}\n' > mmd5.json
bad mmd5.json "mmd5.json:1: field 'loss_md5': malformed md5 'zz'" --format paddle-metrics
printf '{"loss": 9.5, "global_step": 1, "x": "\\u0000NaN"}\n' > mnul.json
bad mnul.json "mnul.json:1: not a JSON object: a .u0000 escape in a string is not supported" --format paddle-metrics
printf '[{"loss": 9.5, "global_step": 1}]\n' > marr.json
bad marr.json "marr.json:1: not a JSON object" --format paddle-metrics
printf '{"loss": 9.5, "global_step": 1, "loss": 9.0}\n' > mdup.json
bad mdup.json "mdup.json:1: not a JSON object: duplicate object key" --format paddle-metrics
{ printf '{"loss": 9.5, "global_step": 1}\n{"x": "'; head -c 1100000 /dev/zero | tr '\0' a; printf '"}\n'; } > mhuge.json
bad mhuge.json "mhuge.json:2: line longer than 1 MiB" --format paddle-metrics
printf '{"eval_runtime": 1.0}\n' > mnone.json
bad mnone.json "mnone.json:1: no trainer records \\(\"loss\" and \"global_step\", or \"eval_loss\"\\): the first record \\(here\\) has neither" --format paddle-metrics
printf '{"eval_runtime": 1.0}\n{"global_step": 3, "learning_rate": 0.0001}\n{"progress_or_epoch": 0.1}\n' > mnoloss.json
bad mnoloss.json "mnoloss.json:2: no trainer records .*: the first record that looks like one has 'global_step' but no 'loss'" --format paddle-metrics
finish
