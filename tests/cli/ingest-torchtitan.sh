#!/usr/bin/env bash
# ingest-torchtitan: torchtitan loss baselines (formats.md §8). "<step> <loss>" lines whose repr gives
# the exact float32 bits; blank lines and trailing blanks; nan/inf; gzip; a truncated last line
# (warning); the real files of refs/real/torchtitan_losses (100 steps, the bits at step 24, first
# difference at step 24); detection that neither steals nor is stolen; bad input: message, exit 2,
# database unchanged.
. "$SRCROOT/tests/cli/lib.sh"

q() { sql a.db "$1"; }
# rec RUN STEP COLUMNS
rec() { q "SELECT $3 FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$1' AND step=$2"; }

# --- synthetic: exact float32 reprs, a double that is no float32, nan/inf, blanks ---------------------
printf '1 8.049056053161621\n2 7.751435279846191  \r\n\n3 nan\n4 inf\n7 2.95\n8 0.1\n' > s.txt
run_align 0 ingest --db a.db s.txt && expect_out "s.txt: torchtitan, 6 records into run 's'"
expect_eq "format" "$(q "SELECT format||' '||framework FROM run WHERE name='s'")" "torchtitan torchtitan"
expect_eq "keys" "$(q "SELECT DISTINCT r.name||' '||canon||' '||phase||' '||rank||' '||micro FROM record r")" "loss loss loss -1 -1"
expect_eq "steps" "$(q "SELECT group_concat(step) FROM (SELECT step FROM record ORDER BY seq)")" "1,2,3,4,7,8"
expect_eq "exact bits" "$(rec s 1 "printf('%x', bits)||' '||dtype||' '||(digits IS NULL)")" "4100c8ef fp32 1"
expect_eq "trailing blanks and CR" "$(rec s 2 "text||' '||printf('%x', bits)")" "7.751435279846191 40f80bc2"
expect_eq "nan" "$(rec s 3 "text||' '||(value IS NULL)||' '||(bits IS NULL)")" "nan 1 1"
expect_eq "inf" "$(rec s 4 "printf('%x', bits)")" "7f800000"
# 2.95 is a float32 (rounded old-style files): repr of the float32 would be 2.950000047683716, so this
# is a double that no float32 equals: kept exact as fp64, never passed off as float32 bits
expect_eq "not a float32" "$(rec s 7 "dtype||' '||printf('%x', bits)")" "fp64 400799999999999a"
expect_eq "0.1 as fp64" "$(rec s 8 dtype)" "fp64"

# --- gzip and a truncated last line -------------------------------------------------------------------
printf '1 8.049056053161621\n2 7.751435279846191\n' | gzip -c > z.txt.gz
run_align 0 ingest --db a.db z.txt.gz && expect_out "z.txt.gz: torchtitan, 2 records into run 'z'"
printf '1 8.049056053161621\n2 7.751435279846191\n3 7.03' > cut.txt
run_align 0 ingest --db a.db cut.txt && expect_err "warning: cut.txt:3: last line is not terminated"
expect_eq "truncated line ignored" "$(q "SELECT group_concat(step) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='cut'")" "1,2"

# --- the real files (refs/real/torchtitan_losses, copied from pytorch/torchtitan) ---------------------
R=$SRCROOT/refs/real/torchtitan_losses
for f in "$R"/*.txt; do
	rel=${f#"$SRCROOT"/}
	expect_eq "sha256 of $rel" "$(sha256sum < "$f" | cut -d' ' -f1)" "$(awk -F'\t' -v p="$rel" '$2==p {print $1}' "$SRCROOT/refs/MANIFEST")"
done
run_align 0 ingest --db a.db --as old "$R/llama3_cuda.at-3f71477c88.txt" && expect_out "100 records"
run_align 0 ingest --db a.db --as new "$R/llama3_cuda.at-1b04fc1c35.txt" && expect_out "100 records"
for run in old new; do
	expect_eq "$run steps" "$(q "SELECT count(*)||' '||min(step)||' '||max(step)||' '||count(bits) FROM record r JOIN run ON run.id=r.run_id WHERE run.name='$run'")" "100 1 100 100"
done
# README.md: steps 1..23 bit-identical, first difference at step 24 (2.928952693939209 vs 2.93280029296875)
expect_eq "step 24 old" "$(rec old 24 "text||' '||printf('%x', bits)||' '||dtype")" "2.928952693939209 403b73f6 fp32"
expect_eq "step 24 new" "$(rec new 24 "text||' '||printf('%x', bits)||' '||dtype")" "2.93280029296875 403bb300 fp32"
expect_eq "first differing bits" "$(q "SELECT min(a.step)||' '||sum(a.bits<>b.bits) FROM record a JOIN record b ON a.step=b.step
	WHERE a.run_id=(SELECT id FROM run WHERE name='old') AND b.run_id=(SELECT id FROM run WHERE name='new') AND a.bits<>b.bits")" "24 77"

# --- detection: a loss file is not taken for something else, and others are not taken for it ---------
printf ' iteration        1/      10 | lm loss: 1.0E+01 |\n' > meg.log
run_align 0 ingest --db a.db meg.log
expect_eq "megatron log not stolen" "$(q "SELECT format FROM run WHERE name='meg'")" "megatron-log"
printf '{"lm loss": {"start_step": 1, "end_step": 1, "step_interval": 1, "values": {"1": 10.9}}}\n' > gold.json
run_align 0 ingest --db a.db gold.json
expect_eq "golden not stolen" "$(q "SELECT format FROM run WHERE name='gold'")" "megatron-golden"
printf '1 2.5\n2 2.4\n' > plain.txt
run_align 0 ingest --db a.db plain.txt
expect_eq "loss file detected" "$(q "SELECT format FROM run WHERE name='plain'")" "torchtitan"

# --- bad input: message, exit 2, database unchanged ----------------------------------------------------
bad() { # bad FILE PATTERN [ARGS...]
	local before f=$1 pat=$2
	shift 2
	before=$(db_count a.db)
	run_align 2 ingest --db a.db --as "bad-$f" "$@" "$f" && expect_err "$pat"
	expect_eq "unchanged after $f" "$(db_count a.db)" "$before"
}
printf '1 8.0\n2 7.5\n2 7.4\n' > dup.txt
bad dup.txt "dup.txt:3: duplicate step 2 \\(first at line 2\\)"
printf '1 8.0\n3 7.5\n2 7.4\n' > back.txt
bad back.txt "back.txt:3: step 2 after step 3: steps must increase"
printf '1 8.0\n2 7.5\nstep 3 loss 7.4\n' > garbage.txt
bad garbage.txt "garbage.txt:3: expected '<step> <loss>'" --format torchtitan
bad garbage.txt "garbage.txt: cannot detect the format"
printf '1 8.0\n2 7.5 extra\n' > extra.txt
bad extra.txt "extra.txt:2: expected '<step> <loss>'" --format torchtitan
printf '1 8.0\n2 zzz\n' > notnum.txt
bad notnum.txt "notnum.txt:2: expected '<step> <loss>'" --format torchtitan
printf '\n\n' > blank.txt
bad blank.txt "blank.txt:[0-9]+: no '<step> <loss>' line" --format torchtitan
finish
