#!/usr/bin/env bash
# ingest-golden: Megatron golden values JSON (formats.md §2). Schema v2 (dict of step strings, "nan",
# numeric step order, text kept as written, 5-decimal precision, bits only where the float32 spacing
# exceeds 1e-5) and v1 (a slice of the iteration list, top-level scalars ignored), gzip, the real
# fixtures of refs/real/megatron_golden, and bad input (message, exit 2, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"

q() { sql a.db "$1"; }
# rec RUN STEP NAME COLUMNS
rec() { q "SELECT $4 FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND step=$2 AND r.name='$3'"; }

# --- schema v2 ---------------------------------------------------------------------------------------
cat > v2.json <<'J'
{
    "lm loss": {
        "start_step": 1,
        "end_step": 10,
        "step_interval": 1,
        "values": {
            "10": 10.17,
            "2": 10.84010,
            "1": 10.95659,
            "3": "nan"
        }
    },
    "num-zeros": {"start_step": 1, "end_step": 10, "step_interval": 1, "values": {"1": 22986408.0, "2": 1759, "10": 1.5e-05}},
    "iteration-time": {"start_step": 2, "end_step": 10, "step_interval": 1, "values": {"2": 5.21366, "10": 0.06645}},
    "mem-allocated-bytes": {"start_step": 1, "end_step": 1, "step_interval": 1, "values": {"1": 581489664.0}}
}
J
run_align 0 ingest --db a.db v2.json && expect_out "v2.json: megatron-golden, 10 records into run 'v2'"
expect_eq "format" "$(q "SELECT format||' '||framework FROM run WHERE name='v2'")" "megatron-golden megatron"
# steps sort numerically (1, 2, 3, 10, not "1", "10", "2", "3"); at one step, metrics in file order
expect_eq "execution order" "$(q "SELECT group_concat(step||':'||name, ';') FROM (SELECT step, name FROM record WHERE run_id=1 ORDER BY seq)")" \
	"1:lm loss;1:num-zeros;1:mem-allocated-bytes;2:lm loss;2:num-zeros;2:iteration-time;3:lm loss;10:lm loss;10:num-zeros;10:iteration-time"
expect_eq "global rank, no micro" "$(q "SELECT DISTINCT rank||','||micro FROM record")" "-1,-1"
# the text as written in the file, not as re-rendered (trailing zero, integer, exponent form)
expect_eq "texts" "$(rec v2 2 'lm loss' text)|$(rec v2 2 num-zeros text)|$(rec v2 10 num-zeros text)" "10.84010|1759|1.5e-05"
# the source line of each value
expect_eq "lines" "$(rec v2 10 'lm loss' line)|$(rec v2 1 'lm loss' line)|$(rec v2 2 'iteration-time' line)" "7|9|14"
# round(x, 5): the interval is +-5e-6 whatever the printed digits; 10.95659 holds ~10 float32 values
expect_eq "interval" "$(rec v2 1 'lm loss' "printf('%.6f %.6f', lo, hi)||' '||dtype||' '||(bits IS NULL)")" "10.956585 10.956595 fp32 1"
expect_eq "no bits from 10.84010" "$(rec v2 2 'lm loss' "bits IS NULL")" "1"
# large integer-valued metrics: one float32 in the interval, so the exact bits
expect_eq "num-zeros bits" "$(rec v2 1 num-zeros "printf('%x', bits)")|$(rec v2 2 num-zeros "printf('%x', bits)")" "4baf5f54|44dbe000"
expect_eq "mem bits" "$(rec v2 1 mem-allocated-bytes "printf('%x', bits)")" "4e0aa350"
expect_eq "nan" "$(rec v2 3 'lm loss' "text||' '||(value IS NULL)||' '||(bits IS NULL)||' '||(missing IS NULL)")" "nan 1 1 1"
expect_eq "phases" "$(rec v2 1 'lm loss' phase)|$(rec v2 1 num-zeros phase)|$(rec v2 2 iteration-time phase)|$(rec v2 1 mem-allocated-bytes phase)" \
	"loss|metric|meta|meta"
expect_eq "canon" "$(rec v2 1 'lm loss' canon)|$(rec v2 1 num-zeros canon)" "loss|num_zeros"

# --- schema v1: values[i] is iteration start + i*interval + 1; top-level scalars ignored -------------
cat > v1.json <<'J'
{"lm loss": {"start_step": 0, "end_step": 12, "step_interval": 4, "values": [10.8401, 10.87262, "nan"]}, "num-zeros": {"start_step": 2, "end_step": 5, "step_interval": 1, "values": [1670.0, 1901.0]}, "iteration_timing_avg": 0.0958791176470588}
J
run_align 0 ingest --db a.db v1.json && expect_out "5 records into run 'v1'"
expect_eq "v1 steps" "$(q "SELECT group_concat(step||':'||r.name||'='||text, ';') FROM (SELECT * FROM record ORDER BY seq) r JOIN run ON run.id=r.run_id WHERE run.name='v1'")" \
	"1:lm loss=10.8401;3:num-zeros=1670.0;4:num-zeros=1901.0;5:lm loss=10.87262;9:lm loss=nan"
expect_eq "scalar ignored" "$(q "SELECT count(*) FROM record WHERE name='iteration_timing_avg'")" "0"

# --- gzip ----------------------------------------------------------------------------------------------
sed 's/10.95659/10.95658/' v2.json | gzip -c > v2b.json.gz
run_align 0 ingest --db a.db v2b.json.gz && expect_out "megatron-golden, 10 records into run 'v2b'"

# --- the real fixtures (refs/real/megatron_golden, copied from NVIDIA/Megatron-LM) ---------------------
R=$SRCROOT/refs/real/megatron_golden
# the copies are the pinned bytes of refs/MANIFEST
for f in "$R"/*.json; do
	rel=${f#"$SRCROOT"/}
	expect_eq "sha256 of $rel" "$(sha256sum < "$f" | cut -d' ' -f1)" "$(awk -F'\t' -v p="$rel" '$2==p {print $1}' "$SRCROOT/refs/MANIFEST")"
done
run_align 0 ingest --db a.db --as dist "$R/gpt3_tp1_pp1_dist_optimizer.gb200.at-HEAD.json" && expect_out "499 records"
run_align 0 ingest --db a.db --as recomp "$R/gpt3_tp1_pp1_uniform_full_recompute.gb200.at-HEAD.json" && expect_out "499 records"
for run in dist recomp; do
	expect_eq "$run lm loss steps" "$(q "SELECT count(*)||' '||min(step)||' '||max(step) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$run' AND r.name='lm loss'")" "100 1 100"
	expect_eq "$run iteration-time starts at 2" "$(q "SELECT min(step)||' '||count(*) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$run' AND r.name='iteration-time'")" "2 99"
done
# README.md: lm loss equal for steps 1..17, first differs at step 18 (10.82613 vs 10.82611);
# num-zeros first differs at step 17 (1830 vs 1781)
expect_eq "step 1" "$(rec dist 1 'lm loss' text)|$(rec recomp 1 'lm loss' text)" "10.88426|10.88426"
expect_eq "step 18" "$(rec dist 18 'lm loss' text)|$(rec recomp 18 'lm loss' text)" "10.82613|10.82611"
expect_eq "step 100" "$(rec dist 100 'lm loss' text)" "9.71399"
expect_eq "num-zeros 17" "$(rec dist 17 num-zeros "text||' '||printf('%x', bits)")|$(rec recomp 17 num-zeros text)" "1830.0 44e4c000|1781.0"
first_diff() { # first step where two runs' texts of a metric differ
	q "SELECT min(a.step) FROM record a JOIN record b ON a.step=b.step AND a.name=b.name
	   WHERE a.run_id=(SELECT id FROM run WHERE name='dist') AND b.run_id=(SELECT id FROM run WHERE name='recomp')
	   AND a.name='$1' AND a.text<>b.text"
}
expect_eq "lm loss first differs" "$(first_diff 'lm loss')" "18"
expect_eq "num-zeros first differs" "$(first_diff num-zeros)" "17"
# the legacy list layout: start 0, end 50, interval 5 = slice indices 0, 5, ..., 45 = iterations 1, 6, ..., 46
run_align 0 ingest --db a.db --as legacy "$R/legacy_list_schema.gpt3_345m_tp1_pp1.at-6e1891ddc6.json" && expect_out "20 records"
expect_eq "legacy steps" "$(q "SELECT group_concat(step) FROM (SELECT step FROM record r JOIN run ON run.id=r.run_id WHERE run.name='legacy' AND r.name='lm loss' ORDER BY step)")" \
	"1,6,11,16,21,26,31,36,41,46"
expect_eq "legacy values" "$(rec legacy 1 'lm loss' text)|$(rec legacy 46 'lm loss' text)|$(rec legacy 46 num-zeros text)" "10.8401|9.82312|2324.0"

# --- bad input: message, exit 2, database unchanged ----------------------------------------------------
bad() { # bad FILE PATTERN [ARGS...]
	local before f=$1 pat=$2
	shift 2
	before=$(db_count a.db)
	run_align 2 ingest --db a.db --as "bad-$f" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(db_count a.db)" "$before"
}
printf '{"lm loss": {"start_step": 1, "end_step": 2, "step_interval": 1,\n "values": {"1": 10.9, "1": 10.8}}}\n' > dupstep.json
bad dupstep.json "dupstep.json:2: invalid JSON: duplicate object key"
printf '{"lm loss": {"start_step": 1, "end_step": 1, "step_interval": 1, "values": {"1": 10.9}},\n"lm loss": {"start_step": 1, "end_step": 1, "step_interval": 1, "values": {"1": 10.9}}}\n' > dupmetric.json
bad dupmetric.json "dupmetric.json:2: invalid JSON: duplicate object key"
printf '{"lm loss": {"start_step": 1, "end_step": 2, "step_interval": 1, "values": {"1": 10.9, "01": 10.8}}}\n' > dupnum.json
bad dupnum.json "dupnum.json:1: metric 'lm loss': step 1 appears twice"
printf '{"lm loss": {"start_step": 1, "end_step": 2, "step_interval": 1, "values": {\n"1": 10.9,\n"2": "10.8"}}}\n' > strval.json
bad strval.json "strval.json:3: metric 'lm loss': value \"10.8\" is not a number or \"nan\""
printf '{"lm loss": {"start_step": 1, "end_step": 2, "step_interval": 1, "values": {"1": true}}}\n' > boolval.json
bad boolval.json "boolval.json:1: metric 'lm loss': value true is not a number"
printf '{"lm loss": {"start_step": 1, "end_step": 2, "step_interval": 1, "values": {"x": 1.0}}}\n' > badstep.json
bad badstep.json "badstep.json:1: metric 'lm loss': step key \"x\" is not a decimal step number"
printf '{"lm loss": {"start_step": 1, "end_step": 2, "step_interval": 1, "values": "10.9"}}\n' > badvalues.json
bad badvalues.json "badvalues.json:1: metric 'lm loss': \"values\" must be an object of steps or a list"
printf '{"lm loss": {"start_step": "0", "end_step": 50, "step_interval": 5, "values": [1.0]}}\n' > badslice.json
bad badslice.json "badslice.json:1: metric 'lm loss': 'start_step' must be an integer"
printf '{"lm loss": {"start_step": 0, "end_step": 10, "step_interval": 5, "values": [1.0, 2.0, 3.0]}}\n' > long.json
bad long.json "long.json:1: metric 'lm loss': 3 values, but the slice 0:10:5 holds 2"
printf '{"0": {"input_prompt": "hi", "generated_tokens": [1, 2]}, "throughput": [12.5, 13.1]}\n' > inference.json
bad inference.json "inference.json:1: not a training-metric golden file: member '0' has no \"values\"" --format megatron-golden
printf '{}\n' > emptyobj.json
bad emptyobj.json "emptyobj.json:1: not a training-metric golden file" --format megatron-golden
printf '[1, 2]\n' > list.json
bad list.json "list.json:1: not a training-metric golden file" --format megatron-golden
: > empty.json
bad empty.json "empty.json:1: not a training-metric golden file \\(empty\\)" --format megatron-golden
bad empty.json "empty.json: empty file"
head -c 200 v2.json > cut.json
bad cut.json "cut.json:[0-9]+: invalid JSON"
finish
