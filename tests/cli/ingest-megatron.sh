#!/usr/bin/env bash
# ingest-megatron: Megatron-LM stdout (formats.md §1, §9, §11). Known answers checked in SQL for every
# pitfall: launcher prefixes, ANSI colour, '\r' segments, timer blocks / memory reports / warnings
# ignored, INF/NAN, omitted NaN loss reported as missing, restart (later wins, run.resumed, warning),
# the 16-decimal fork (bits recovered), {:.6E} (not bitwise), validation lines, the pre-2024 layout,
# glued lines of interleaved ranks, gzip, truncated last line, the real-layout synthetic log
# refs/logs/megatron-dsv4.log, alignment anchors on the same stream; bad input: message, exit 2, database unchanged.
. "$SRCROOT/tests/cli/lib.sh"

q() { sql a.db "$1"; }
# rec RUN STEP NAME COLUMNS: the non-superseded record of NAME at STEP in RUN
rec() { q "SELECT $4 FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND step=$2 AND r.name='$3' AND superseded=0"; }

# --- prefixes, ANSI, \r, ignored blocks, validation, 16-decimal fork, INF/NAN -------------------------
ESC=$(printf '\033')
{
	echo 'W0820 10:15:01.114000 2214 torch/distributed/run.py:766] Setting OMP_NUM_THREADS environment variable'
	echo '[default7]: [2026-08-20 10:15:42.123456] iteration        1/      10 | consumed samples:           32 | elapsed time per iteration (ms): 1203.4 | learning rate: 1.499212E-04 | global batch size:    32 | lm loss: 1.086875E+01 | global_load_balancing_loss: 1.002311E+00 | mtp_1 loss: 1.087522E+01 | loss scale: 1.0 | grad norm: 2.417 | num zeros: 22836424 | params norm: 301.552 | number of skipped iterations:   0 | number of nan iterations:   0 |'
	echo '[default7]:(min, max) time across ranks (ms):'
	echo '[default7]:    forward-backward ...............................: (1160.99, 1162.29)'
	echo '[default0]:[Rank 0] (after 1 iterations) memory (MB) | allocated: 21544.6 | max allocated: 39114.3 | reserved: 41472.0 | max reserved: 41472.0'
	echo '[default3]:/usr/lib/python3/te/base.py:930: UserWarning: set CUDA_DEVICE_MAX_CONNECTIONS = 1 | iteration: 5 |'
	printf '7: %s[32m [2026-08-20 10:15:43.331007] iteration        2/      10 | lm loss: 1.086127E+01 | mtp_1 loss: 1.091409E+01 | grad norm: 2.402 |%s[0m\n' "$ESC" "$ESC"
	printf 'progress 10%%|#   |\r [2026-08-20 10:15:44.5] iteration        3/      10 | lm loss: INF | mtp_1 loss: NAN | global_load_balancing_loss: 1.0E+00 |\rtail text\n'
	echo ' iteration        4/      10 | lm loss: 11.5952320098876953 | mtp_1 loss: 11.8836364746093750 | loss scale: 1.0 | grad norm: 12.7480366728578041 |'
	echo '-----------------------------------------------------------------------------------------'
	echo ' validation loss at iteration 4 | lm loss value: 7.398812E+00 | lm loss PPL: 1.634042E+03 | mtp_1 loss value: 7.401002E+00 | mtp_1 loss PPL: 1.637625E+03 | '
	echo '-----------------------------------------------------------------------------------------'
	echo ' validation loss at iteration 4 on test set | lm loss value: 7.5E+00 | lm loss PPL: 1.8E+03 | '
	echo ' validation-wiki loss at iteration 4 | lm loss value: 7.6E+00 | lm loss PPL: 1.9E+03 | '
	echo 'saving checkpoint at iteration       4 to /ckpt in torch_dist format'
} > pitfalls.log
run_align 0 ingest --db a.db pitfalls.log && expect_out "pitfalls.log: megatron-log, [0-9]+ records into run 'pitfalls'"
expect_eq "format detected" "$(q "SELECT format||' '||framework FROM run WHERE name='pitfalls'")" "megatron-log megatron"
expect_eq "steps" "$(q "SELECT group_concat(DISTINCT step) FROM (SELECT step FROM record ORDER BY step)")" "1,2,3,4"
# iteration 1: 13 fields, all kept (timings as meta); the timer block, memory report and warning add none
expect_eq "step 1 records" "$(q "SELECT count(*) FROM record WHERE step=1")" "13"
expect_eq "step 1 names in print order" "$(q "SELECT group_concat(name, ';') FROM (SELECT name FROM record WHERE step=1 ORDER BY seq)")" \
	"consumed samples;elapsed time per iteration (ms);learning rate;global batch size;lm loss;global_load_balancing_loss;mtp_1 loss;loss scale;grad norm;num zeros;params norm;number of skipped iterations;number of nan iterations"
expect_eq "phases" "$(q "SELECT group_concat(phase, ',') FROM (SELECT phase FROM record WHERE step=1 AND name IN ('lm loss','grad norm','consumed samples','elapsed time per iteration (ms)') ORDER BY seq)")" \
	"meta,meta,loss,metric"
expect_eq "canon" "$(rec pitfalls 1 'lm loss' canon)|$(rec pitfalls 1 'mtp_1 loss' canon)|$(rec pitfalls 1 'grad norm' canon)" "loss|mtp_1_loss|grad_norm"
expect_eq "global rank, no micro" "$(q "SELECT DISTINCT rank||','||micro FROM record")" "-1,-1"
# {:.6E} is not bitwise: 7 digits, an interval holding ~10 float32 values, no bits
expect_eq "E text" "$(rec pitfalls 1 'lm loss' "text||' '||digits||' '||dtype||' '||(bits IS NULL)")" "1.086875E+01 7 fp32 1"
expect_eq "E interval" "$(rec pitfalls 1 'lm loss' "printf('%.6f %.6f', lo, hi)")" "10.868745 10.868755"
# num zeros 22836424 as an fp32 count: exactly one float32 in [n-0.5, n+0.5] -> bits
expect_eq "num zeros bits" "$(rec pitfalls 1 'num zeros' "printf('%x', bits)")" "4bae3a64"
# launcher prefix "7: " and ANSI colour around the line
expect_eq "srun + ANSI" "$(rec pitfalls 2 'lm loss' text)|$(rec pitfalls 2 'grad norm' text)" "1.086127E+01|2.402"
# \r segments: the record between two carriage returns; INF is exact, NAN has no value
expect_eq "INF bits" "$(rec pitfalls 3 'lm loss' "printf('%x', bits)")" "7f800000"
expect_eq "NAN" "$(rec pitfalls 3 'mtp_1 loss' "text||' '||(value IS NULL)||' '||(bits IS NULL)")" "NAN 1 1"
expect_eq "other-rank text ignored" "$(q "SELECT count(*) FROM record WHERE name LIKE '%iteration:%' OR name LIKE '%tail%'")" "0"
# the 16-decimal fork: enough digits for the float32 bits
expect_eq "fork bits" "$(rec pitfalls 4 'lm loss' "printf('%x', bits)")|$(rec pitfalls 4 'mtp_1 loss' "printf('%x', bits)")" "41398612|413e2360"
# step 4 lacks global_load_balancing_loss (printed at steps 1 and 3): reported missing, not skipped
expect_eq "missing loss" "$(rec pitfalls 4 global_load_balancing_loss "phase||'|'||ifnull(text,'NULL')||'|'||missing")" \
	"loss|NULL|absent from the iteration line (Megatron omits NaN and negative losses)"
expect_eq "step 2 also missing it" "$(q "SELECT count(*) FROM record WHERE name='global_load_balancing_loss' AND missing IS NOT NULL")" "2"
# validation lines: eval phase, canonical eval_loss; PPL not kept; test set and named sets apart
expect_eq "validation" "$(rec pitfalls 4 'validation lm loss' "canon||' '||phase||' '||text")" "eval_loss eval 7.398812E+00"
expect_eq "validation mtp" "$(rec pitfalls 4 'validation mtp_1 loss' text)" "7.401002E+00"
expect_eq "test set" "$(rec pitfalls 4 'test lm loss' text)" "7.5E+00"
expect_eq "named set" "$(rec pitfalls 4 'validation-wiki lm loss' text)" "7.6E+00"
expect_eq "no PPL" "$(q "SELECT count(*) FROM record WHERE name LIKE '%PPL%'")" "0"
expect_eq "train_iters in header" "$(q "SELECT json_extract(header,'$.train_iters') FROM run WHERE name='pitfalls'")" "10"

# --- the pre-2024 layout: no timestamp, {:.3E} learning rate, fp16 loss scale, num zeros as float ----
cat > old.log <<'L'
 iteration       40/    1000 | consumed samples:         1280 | elapsed time per iteration (ms): 412.7 | learning rate: 1.500E-04 | global batch size:    32 | lm loss: 9.204512E+00 | loss scale: 65536.0 | grad norm: 3.141 | num zeros: 1937.0 | number of skipped iterations:   1 | number of nan iterations:   0 |
L
run_align 0 ingest --db a.db old.log
expect_eq "old layout" "$(rec old 40 'learning rate' text)|$(rec old 40 'loss scale' text)|$(rec old 40 'num zeros' "printf('%x', bits)")" \
	"1.500E-04|65536.0|44f22000"
expect_eq "skipped counter" "$(rec old 40 'number of skipped iterations' "phase||' '||value")" "meta 1.0"

# --- glued records of interleaved ranks: two iteration records on one physical line -------------------
echo ' iteration        1/      10 | lm loss: 1.0E+01 | [default7]: iteration        2/      10 | lm loss: 9.0E+00 |' > glued.log
run_align 0 ingest --db a.db glued.log
expect_eq "glued" "$(q "SELECT group_concat(step||'='||text) FROM record JOIN run ON run.id=run_id WHERE run.name='glued'")" "1=1.0E+01,2=9.0E+00"

# --- restart: iterations repeat; the later occurrence wins, run.resumed=1, a warning -----------------
cat > restart.log <<'L'
 iteration        1/       5 | lm loss: 1.100000E+01 |
 iteration        2/       5 | lm loss: 1.090000E+01 |
 iteration        3/       5 | lm loss: 1.080000E+01 |
 iteration        4/       5 | lm loss: 1.070000E+01 |
> loading checkpoint from /ckpt at iteration 2
 iteration        3/       5 | lm loss: 1.080001E+01 |
 iteration        4/       5 | lm loss: 1.070001E+01 |
 iteration        5/       5 | lm loss: 1.060001E+01 |
L
run_align 0 ingest --db a.db restart.log && expect_err "warning: restart.log:6: run restarted at iteration 3"
expect_eq "resumed" "$(q "SELECT resumed FROM run WHERE name='restart'")" "1"
expect_eq "later wins" "$(q "SELECT group_concat(step||'='||text) FROM (SELECT step, text FROM record JOIN run ON run.id=run_id WHERE run.name='restart' AND superseded=0 ORDER BY step)")" \
	"1=1.100000E+01,2=1.090000E+01,3=1.080001E+01,4=1.070001E+01,5=1.060001E+01"
expect_eq "superseded kept" "$(q "SELECT group_concat(step) FROM record JOIN run ON run.id=run_id WHERE run.name='restart' AND superseded=1")" "3,4"
expect_eq "warning stored" "$(q "SELECT json_extract(warnings,'\$[0]') FROM source WHERE path='restart.log'")" \
	"restart.log:6: run restarted at iteration 3 (after iteration 4): the later lines win"
# a run without a restart is not marked resumed
expect_eq "not resumed" "$(q "SELECT resumed FROM run WHERE name='pitfalls'")" "0"

# --- gzip input and a truncated last line -------------------------------------------------------------
{ cat restart.log; echo ' iteration        6/       5 | lm loss: 1.050001E+01 |'; } | gzip -c > zipped.log.gz
run_align 0 ingest --db a.db zipped.log.gz && expect_out "zipped.log.gz: megatron-log, 8 records into run 'zipped' \\(with warnings\\)"
expect_eq "gzip" "$(q "SELECT count(*) FROM record JOIN run ON run.id=run_id WHERE run.name='zipped' AND superseded=0")" "6"
{ head -3 restart.log; printf ' iteration        4/       5 | lm loss: 1.07'; } > trunc.log
run_align 0 ingest --db a.db trunc.log && expect_err "warning: trunc.log:4: last line is not terminated"
expect_eq "truncated line ignored" "$(q "SELECT group_concat(step) FROM record JOIN run ON run.id=run_id WHERE run.name='trunc'")" "1,2,3"

# --- alignment anchors on the same stream (patched Megatron, per-rank file workerlog.7): scanned, with
# steps from the anchor clock (Megatron prints mtp before main: --order mtp,main) -----------------------
mkdir anchors
a() { printf '\nfinal_loss: rank=7 val=%s md5=%s\n' "$1" "$2"; }
{
	a 10.87521934509277343750 bce45fd92085fa4aaf8d5a0464e1f55f
	a 10.86875057220458984375 36c089f8e14e6d67e0621d7c6dad1be5
	echo ' iteration        1/       3 | lm loss: 1.086875E+01 | mtp_1 loss: 1.087522E+01 |'
	a 10.50000000000000000000 135fd4573c5f977c62c75dc3fb73fc68
	a 10.25000000000000000000 cf1c63fdb0a92006c4df951188455ea2
	echo ' iteration        2/       3 | lm loss: 1.025000E+01 | mtp_1 loss: 1.050000E+01 |'
} > anchors/workerlog.7
run_align 0 ingest --db a.db --as anchored --order mtp,main anchors/workerlog.7
expect_eq "anchor records" "$(q "SELECT group_concat(step||':'||r.name||':'||rank||':'||digest_alg, ' ') FROM (SELECT * FROM record ORDER BY seq) r JOIN run ON run.id=r.run_id WHERE run.name='anchored' AND rank=7")" \
	"1:mtp1.final_loss:7:md5 1:final_loss:7:md5 2:mtp1.final_loss:7:md5 2:final_loss:7:md5"
expect_eq "anchor bits" "$(q "SELECT printf('%x', bits) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='anchored' AND r.name='final_loss' AND step=2")" "41240000"
expect_eq "no clock warning" "$(q "SELECT ifnull(warnings, 'none') FROM source WHERE path='anchors/workerlog.7'")" "none"
# the iteration line checks the anchor clock: with 2 micro-batches per step the anchors cannot add up
cp anchors/workerlog.7 anchors2.log && mkdir anchors2 && mv anchors2.log anchors2/workerlog.7
echo ' validation loss at iteration 2 | lm loss value: 9.0E+00 | lm loss PPL: 8.1E+03 | ' >> anchors2/workerlog.7
run_align 0 ingest --db a.db --as anchored2 --order mtp,main --micro-batches 2 anchors2/workerlog.7 && \
	expect_err "warning: anchors2/workerlog.7:5: rank 7 printed 2 loss anchors by the end of step 1"
# a restart with anchors: the global records and the file's rank from that step on are superseded, the
# anchors after the restarted iteration's line belong to the next step
mkdir anchors3
{
	cat anchors/workerlog.7
	a 10.12500000000000000000 d94eb1d0bd433d6a17896c78bab51918
	a 10.06250000000000000000 36e8e48de71ebcc4fca3ed53adeba3f9
	echo ' iteration        2/       3 | lm loss: 1.006250E+01 | mtp_1 loss: 1.012500E+01 |'
	a 9.87500000000000000000 0b4d696f181a40faf20b4455316925d1
	a 9.75000000000000000000 a3341095ef29998b3afe76475ca3ddb1
	echo ' iteration        3/       3 | lm loss: 9.750000E+00 | mtp_1 loss: 9.875000E+00 |'
} > anchors3/workerlog.7
run_align 0 ingest --db a.db --as anchored3 --order mtp,main anchors3/workerlog.7 && \
	expect_err "run restarted at iteration 2 \\(after iteration 2\\): the later lines win; the anchors of that iteration, printed before this line, are lost"
expect_eq "restart: active" "$(q "SELECT group_concat(step||':'||r.name||'='||ifnull(text,'-'), ' ') FROM (SELECT * FROM record ORDER BY rank DESC, seq) r JOIN run ON run.id=r.run_id WHERE run.name='anchored3' AND superseded=0")" \
	"1:mtp1.final_loss=10.87521934509277343750 1:final_loss=10.86875057220458984375 3:mtp1.final_loss=9.87500000000000000000 3:final_loss=9.75000000000000000000 1:lm loss=1.086875E+01 1:mtp_1 loss=1.087522E+01 2:lm loss=1.006250E+01 2:mtp_1 loss=1.012500E+01 3:lm loss=9.750000E+00 3:mtp_1 loss=9.875000E+00"

# --- the synthetic DSv4-style log of refs/logs (values in megatron-dsv4.values.tsv) --------------------
# pinned in refs/MANIFEST, and the command written there regenerates the same bytes
for f in megatron-dsv4.log megatron-dsv4.values.tsv; do
	expect_eq "sha256 of $f" "$(sha256sum < "$SRCROOT/refs/logs/$f" | cut -d' ' -f1)" \
		"$(awk -F'\t' -v p="refs/logs/$f" '$2==p {print $1}' "$SRCROOT/refs/MANIFEST")"
done
if command -v python3 >/dev/null; then
	mkdir regen && python3 "$SRCROOT/refs/logs/megatron-dsv4-gen.py" regen
	cmp -s regen/megatron-dsv4.log "$SRCROOT/refs/logs/megatron-dsv4.log" || fail "the generator does not reproduce megatron-dsv4.log"
	cmp -s regen/megatron-dsv4.values.tsv "$SRCROOT/refs/logs/megatron-dsv4.values.tsv" || fail "the generator does not reproduce megatron-dsv4.values.tsv"
fi
run_align 0 ingest --db a.db "$SRCROOT/refs/logs/megatron-dsv4.log" && expect_out "224 records into run 'megatron-dsv4'"
expect_eq "dsv4 steps" "$(q "SELECT count(DISTINCT step)||' '||min(step)||' '||max(step) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='megatron-dsv4' AND r.name='lm loss'")" "20 1 20"
expect_eq "dsv4 step 1" "$(rec megatron-dsv4 1 'lm loss' text)|$(rec megatron-dsv4 1 'mtp_1 loss' text)|$(rec megatron-dsv4 1 'grad norm' text)" \
	"1.180137E+01|1.186337E+01|22.090"
for row in "1	lm loss" "20	lm loss" "20	mtp_1 loss" "10	validation lm loss"; do
	step=${row%%	*} name=${row#*	}
	want=$(awk -F'\t' -v s="$step" -v n="$name" '$1==s && $2==n {print $5}' "$SRCROOT/refs/logs/megatron-dsv4.values.tsv")
	expect_eq "dsv4 $name $step as in the tsv" "$(rec megatron-dsv4 "$step" "$name" text)" "$want"
	# the float32 behind the print lies inside the interval the print stands for
	f=$(awk -F'\t' -v s="$step" -v n="$name" '$1==s && $2==n {print $4}' "$SRCROOT/refs/logs/megatron-dsv4.values.tsv")
	expect_eq "dsv4 $name $step interval" "$(rec megatron-dsv4 "$step" "$name" "lo <= $f AND $f <= hi")" "1"
done

# --- bad input: message, exit 2, database unchanged ---------------------------------------------------
# --- cut lines: a line that ends before (or inside) its loss fields is a warning and contributes
# nothing; only a complete line without a loss key is Megatron's omitted NaN -----------------------------
full() { echo " iteration $(printf '%8d' "$1")/      10 | consumed samples: $(printf '%12d' $(($1 * 32))) | elapsed time per iteration (ms): 1203.4 | learning rate: 1.499212E-04 | global batch size:    32 |$2 loss scale: 1.0 | grad norm: 2.417 | number of skipped iterations:   0 | number of nan iterations:   0 |"; }
{ full 1 ' lm loss: 1.086875E+01 |'
  echo ' iteration        2/      10 | consumed samples:           64 | elapsed time per iteration (ms): 1198.8 | learning rate: 1.499108E-04 | global batch size:    32 | lm lo'
  echo ' iteration        3/      10 | consumed samples:           96 | elapsed time per iteration (ms): 1198.8 | learning rate: 1.499108E-04 | global batch size:    32 |'
  full 4 ''
  full 5 ' lm loss: 1.080001E+01 |'; } > cutlines.log
run_align 0 ingest --db c.db --format megatron-log cutlines.log
expect_err "warning: cutlines.log:2: iteration 2: the line is cut before the end of its loss fields \(a truncated log or an excerpt\?\): ignored"
expect_err "warning: cutlines.log:3: iteration 3: the line is cut before the end of its loss fields"
expect_eq "cut lines: nothing recorded" "$(sql c.db "SELECT count(*) FROM record WHERE step IN (2, 3)")" "0"
expect_eq "complete line without the loss: missing" "$(sql c.db "SELECT group_concat(step||':'||coalesce(text, 'missing'), ' ') FROM (SELECT * FROM record WHERE name='lm loss' ORDER BY step)")" "1:1.086875E+01 4:missing 5:1.080001E+01"
# an iteration line wrapped over several physical lines by the logger (fold -s, an indented continuation,
# a repeated launcher prefix): joined, every field of every step kept, no warning
run_align 0 ingest --db w.db "$SRCROOT/tests/samples/megatron-log/wrapped.log" && expect_out "wrapped.log: megatron-log, 45 records into run 'wrapped'"
expect_eq "wrapped: no warning" "$(cat err.txt)" ""
expect_eq "wrapped: the losses" "$(sql w.db "SELECT group_concat(step||':'||text, ' ') FROM (SELECT * FROM record WHERE name='lm loss' ORDER BY step)")" "1:1.086875E+01 2:1.080001E+01 3:1.071234E+01 4:1.061234E+01 5:1.051234E+01"
expect_eq "wrapped: the same fields on every step" "$(sql w.db "SELECT count(DISTINCT n) FROM (SELECT step, group_concat(name) AS n FROM (SELECT * FROM record ORDER BY step, seq) GROUP BY step)")" "1"
# a file of cut lines only: the error points at the first one and says what it lacked
{ echo ' iteration        1/      10 | consumed samples:           32 | elapsed time per iteration (ms): 1203.4 | lm loss: 1.0868'
  echo 'some other output'
  echo ' iteration        2/      10 | consumed samples:           64 | elapsed t'; } > allcut.log
before=$(db_count c.db)
run_align 2 ingest --db c.db --format megatron-log allcut.log && expect_err "error: allcut.log:1: no complete Megatron iteration or validation line: the first iteration line \(here\) is cut before the end of its loss fields"
expect_eq "unchanged after allcut.log" "$(db_count c.db)" "$before"

# --- Megatron-DeepSpeed's throughput fields are job metadata (phase meta) ----------------------------------
# (the layout of a real Megatron-DeepSpeed line)
echo ' iteration        5/      10 | consumed samples:         7680 | consumed tokens:     15728640 | elapsed time per iteration (ms): 344656.1 | learning rate: 2.270E-05 | global batch size:  1536 | lm loss: 1.100078E+01 | loss scale: 4294967296.0 | grad norm: 0.000 | actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 4.457 | tokens per gpu per second (tgs): 142.612 | TFLOPs: 153.38 |' > ds.log
run_align 0 ingest --db d.db --format megatron-log ds.log
expect_eq "DeepSpeed meta" "$(sql d.db "SELECT group_concat(name||':'||dtype, ', ') FROM (SELECT * FROM record WHERE phase='meta' AND name NOT IN ('consumed samples', 'elapsed time per iteration (ms)', 'global batch size', 'number of skipped iterations', 'number of nan iterations') ORDER BY seq)")" \
	"consumed tokens:int64, actual seqlen:int64, samples per second:fp64, tokens per gpu per second (tgs):fp64, TFLOPs:fp64"
expect_eq "DeepSpeed: no throughput metric" "$(sql d.db "SELECT group_concat(name, ', ') FROM record WHERE phase='metric'")" "learning rate, loss scale, grad norm"

bad() { # bad FILE PATTERN [ARGS...]
	local before f=$1 pat=$2
	shift 2
	before=$(db_count a.db)
	run_align 2 ingest --db a.db --as "bad-$f" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(db_count a.db)" "$before"
}
head -c 3000 /dev/urandom | base64 > garbage.txt
bad garbage.txt "garbage.txt: cannot detect the format"
bad garbage.txt "garbage.txt:[0-9]+: no Megatron iteration \\('iteration N/M \\| key: value \\| \\.\\.\\.'\\) or validation line in this file" --format megatron-log
printf ' iteration        1/      10 | lm loss: 1.0E+01 |\n iteration        2/      10 | lm loss: abc |\n' > notnum.log
bad notnum.log "notnum.log:2: field 'lm loss': not a number: 'abc'"
printf ' iteration        1/      10 | lm loss: 1.0E+01 | grad norm: 1.2.3 |\n' > badnorm.log
bad badnorm.log "badnorm.log:1: field 'grad norm': not a number"

# committed samples of the Megatron-DeepSpeed (consumed tokens, actual seqlen, tgs, TFLOPs, DeepSpeed's own
# log_dist lines between) and MoE/MTP (mtp_2 loss, load_balancing_loss, seq_load_balancing_loss) variants
SM="$SRCROOT/tests/samples/megatron-log"
run_align 0 ingest --db s.db "$SM/deepspeed.log" && expect_out "deepspeed.log: megatron-log, 27 records"
expect_eq "DeepSpeed throughput is meta" "$(sql s.db "SELECT group_concat(name, ',') FROM (SELECT name FROM record WHERE step=2 AND phase='meta' ORDER BY seq)")" \
	"consumed samples,consumed tokens,elapsed time per iteration (ms),global batch size,actual seqlen,number of skipped iterations,number of nan iterations,samples per second,tokens per gpu per second (tgs),TFLOPs"
run_align 0 ingest --db s.db "$SM/moe-mtp.log" && expect_out "moe-mtp.log: megatron-log, 28 records"
expect_eq "MoE/MTP losses" "$(sql s.db "SELECT group_concat(canon||'='||text, ' ') FROM (SELECT canon, text FROM record WHERE step=1 AND phase='loss' AND run_id=(SELECT id FROM run WHERE name='moe-mtp') ORDER BY seq)")" \
	"loss=1.190823E+01 mtp_1_loss=1.191244E+01 mtp_2_loss=1.191962E+01 load_balancing_loss=1.002381E+00 seq_load_balancing_loss=1.000912E+00"

# Megatron-Bridge (NVIDIA-NeMo/Megatron-Bridge; the sample's header cites the sources): its training_log()
# prints Megatron-LM's iteration and validation lines (plus "max attention logit", a metric of unknown
# dtype); the launcher's "JOB/0 " prefix, rank 0's "Step Time : ...MODEL_TFLOP/s/GPU" line before each
# record, the GB memory report, timers and checkpoint lines add nothing
run_align 0 ingest --db br.db "$SM/bridge.log" && expect_out "bridge.log: megatron-log, 81 records into run 'bridge'"
expect_eq "Bridge: format" "$(sql br.db "SELECT format||' '||framework FROM run")" "megatron-log megatron"
expect_eq "Bridge: records per step" "$(sql br.db "SELECT group_concat(step||':'||n, ' ') FROM (SELECT step, count(*) n FROM record GROUP BY step ORDER BY step)")" "1:15 2:15 3:15 4:17 5:19"
expect_eq "Bridge: step 1 in print order" "$(sql br.db "SELECT group_concat(name||'='||text||'/'||phase||'/'||ifnull(dtype,'?')||'/'||ifnull(digits,'exact'), '; ') FROM (SELECT * FROM record WHERE step=1 ORDER BY seq)")" \
	"consumed samples=128/meta/int64/3; elapsed time per iteration (ms)=41270.3/meta/fp64/6; throughput per GPU (TFLOP/s/GPU)=118.6/meta/fp64/4; energy per GPU (J/iter/GPU)=28911.4/meta/fp64/6; power per GPU (W/GPU)=700.5/meta/fp64/4; learning rate=1.500000E-06/metric/fp64/7; global batch size=128/meta/int64/3; lm loss=1.217031E+01/loss/fp32/7; load_balancing_loss=1.004217E+00/loss/fp32/7; mtp_1 loss=1.219855E+01/loss/fp32/7; loss scale=1.0/metric/fp32/2; grad norm=9.873/metric/fp64/4; max attention logit=41.250/metric/?/5; number of skipped iterations=0/meta/int64/1; number of nan iterations=0/meta/int64/1"
# printed precision: {:.6E} losses and {:.3f} norms are intervals, never bits
expect_eq "Bridge: intervals" "$(sql br.db "SELECT group_concat(canon||':'||(bits IS NULL)||':'||printf('%.7f', lo)||'..'||printf('%.7f', hi), ' ') FROM (SELECT * FROM record WHERE step=5 AND name IN ('lm loss', 'grad norm', 'max attention logit') ORDER BY seq)")" \
	"loss:1:10.4336950..10.4337050 grad_norm:1:3.9955000..3.9965000 max_attention_logit:1:32.1245000..32.1255000"
expect_eq "Bridge: losses by step" "$(sql br.db "SELECT group_concat(step||'='||text, ' ') FROM (SELECT * FROM record WHERE canon='loss' ORDER BY step)")" \
	"1=1.217031E+01 2=1.198442E+01 3=1.152706E+01 4=1.091358E+01 5=1.043370E+01"
expect_eq "Bridge: validation and test" "$(sql br.db "SELECT group_concat(step||':'||name||'='||text||'/'||phase, '; ') FROM (SELECT * FROM record WHERE phase='eval' ORDER BY step, seq)")" \
	"4:validation lm loss=1.062119E+01/eval; 4:validation mtp_1 loss=1.066803E+01/eval; 5:validation lm loss=1.035262E+01/eval; 5:validation mtp_1 loss=1.040555E+01/eval; 5:test lm loss=1.036004E+01/eval; 5:test mtp_1 loss=1.041182E+01/eval"
# the same lines as Megatron-LM prints them (no launcher prefix, no Bridge-only lines): the same records
grep -v -e '^#' -e 'Step Time :' -e 'memory (GB)' "$SM/bridge.log" | sed 's|^dsv3_proxy_pretrain/0 ||' > mlm.log
grep -q 'MODEL_TFLOP\|pretrain/0' mlm.log && fail "fixture edit did not apply"
run_align 0 ingest --db br.db mlm.log
REC='SELECT group_concat(step||name||text||phase||ifnull(dtype,'"'?'"')||ifnull(digits,0)||seq, ",") FROM (SELECT * FROM record WHERE run_id=(SELECT id FROM run WHERE name='"'%s'"') ORDER BY step, seq)'
expect_eq "Bridge = Megatron-LM records" "$(sql br.db "$(printf "$REC" mlm)")" "$(sql br.db "$(printf "$REC" bridge)")"
finish
