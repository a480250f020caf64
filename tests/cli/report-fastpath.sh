#!/usr/bin/env bash
# report-fastpath: the step-summary fast path (skip (rank, step) units whose summaries are equal)
# must give the same answers as reading every record (--no-stepsum): totals, per-metric counts and
# first differences, first_diff, first_unproven, proven_equal_through_step and the listed records,
# on runs where several steps are identical and later ones differ; with printed values (golden JSON:
# bits unknown), units mixing exact and printed records, NaN prints, --metric, --first-diff; and a
# resumed run (Megatron restart), flagged in every format.
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# trace RUN RANK: 8 steps x 2 micro-batches x (loss bits, x and y digests)
trace() {
	printf '{"align_trace":1,"run":"%s","framework":"align","rank":%d}\n' "$1" "$2"
	for s in 1 2 3 4 5 6 7 8; do
		for m in 0 1; do
			printf '{"step":%d,"micro":%d,"name":"loss","dtype":"fp32","bits":"0x41%02x%02x%02x"}\n' "$s" "$m" "$s" "$m" "$2"
			printf '{"step":%d,"micro":%d,"name":"x","dtype":"bf16","shape":[8],"digest":"%016x"}\n' "$s" "$m" "$((s * 100 + m * 10 + $2))"
			printf '{"step":%d,"micro":%d,"name":"y","dtype":"bf16","shape":[8],"digest":"%016x"}\n' "$s" "$m" "$((s * 1000 + m * 10 + $2))"
		done
	done
}
# golden RUN LOSS7: printed losses (5 decimals) from step 3, exact-by-print num-zeros, a NaN at step 5
golden() {
	printf '{"lm loss": {"start_step": 3, "end_step": 8, "step_interval": 1, "values": {"3": 10.88426, "4": 10.8841, "5": "nan", "6": 10.86391, "7": %s, "8": 10.8}},\n' "$2"
	printf ' "num-zeros": {"start_step": 3, "end_step": 8, "step_interval": 1, "values": {"3": 1830.0, "4": 1781.0, "5": 1790.0, "6": 1801.0, "7": 1802.0, "8": 1803.0}}}\n'
}
trace a 0 > a0.atf; trace a 1 > a1.atf; golden a 10.82613 > a.json
trace b 0 > b0.atf
# run B: step 6 micro 1 rank 1 'y' differs; step 7 rank 0 has a record run A lacks; golden loss 7 differs
trace b 1 | sed '/"step":6,"micro":1,"name":"y"/s/"digest":"[0-9a-f]*"/"digest":"00000000deadbeef"/' > b1.atf
printf '{"step":7,"micro":0,"name":"z","value":3}\n' >> b0.atf
golden b 10.82611 > b.json
grep -q deadbeef b1.atf || fail "fixture edit did not apply"
run_align 0 ingest --db f.db --as a --quiet a0.atf a1.atf a.json
run_align 0 ingest --db f.db --as b --quiet b0.atf b1.atf b.json

# same(F1, F2, EXPR): EXPR over both documents is equal
same() {
	local x y
	x=$(pyj "$1" "$3") y=$(pyj "$2" "$3")
	expect_eq "$4: fast path vs every record" "$x" "$y"
}
ANSWERS='[d[k] for k in ("first_diff", "first_only_in", "first_unproven", "proven_equal_through_step")]'
run_align 1 report --db f.db --format json --limit 100 --out fast.json
run_align 1 report --db f.db --format json --limit 100 --no-stepsum --out slow.json
same fast.json slow.json '{k: v for k, v in d["totals"].items() if not k.startswith("skipped")}' "totals"
same fast.json slow.json 'd["metrics"]' "metrics"
same fast.json slow.json "$ANSWERS" "answers"
same fast.json slow.json '[d["diffs"], d["diffs_total"], d["only_in"], d["root_cause"], d["root_cause_reason"]]' "listed records"
expect_eq "fast path used" "$(pyj fast.json '[d["fast_path"], d["totals"]["skipped_units"] > 0]')" "[True, True]"
expect_eq "slow path read all" "$(pyj slow.json '[d["fast_path"], d["totals"]["skipped_units"]]')" "[False, 0]"
# and the answers themselves
expect_eq "totals" "$(pyj fast.json '[d["totals"][k] for k in ("compared", "bitwise_equal", "equal_as_printed", "differ", "only_in_a", "only_in_b")]')" "[108, 101, 5, 2, 0, 1]"
expect_eq "first diff" "$(pyj fast.json '[d["first_diff"][k] for k in ("step", "micro", "rank", "name", "verdict")]')" "[6, 1, 1, 'y', 'differ']"
expect_eq "first only in" "$(pyj fast.json '[d["first_only_in"][k] for k in ("step", "micro", "rank", "name", "verdict")]')" "[7, 0, 0, 'z', 'only-in-b']"
expect_eq "first unproven" "$(pyj fast.json '[d["first_unproven"][k] for k in ("step", "micro", "rank", "name", "verdict", "digits")]')" "[3, None, None, 'loss', 'equal-as-printed', 7]"
expect_eq "proven" "$(pyj fast.json 'd["proven_equal_through_step"]')" "2"
expect_eq "metrics" "$(pyj fast.json '[(m["name"], m["bitwise_equal"], m["equal_as_printed"], m["differ"], m["only_in_b"], m["first_diff_step"]) for m in d["metrics"]]')" \
	"[('loss', 32, 5, 1, 0, 7), ('num_zeros', 6, 0, 0, 0, None), ('x', 32, 0, 0, 0, None), ('y', 31, 0, 1, 0, 6), ('z', 0, 0, 0, 1, 7)]"
# step 7: the golden loss (micro -1, step-level) runs before run B's extra record at micro 0
expect_eq "listed in execution order" "$(pyj fast.json '[(x["step"], x["name"], x["verdict"]) for x in d["diffs"]] + [(o["name"], o["run"], o["count"]) for o in d["only_in"]]')" \
	"[(6, 'y', 'differ'), (7, 'loss', 'differ'), ('z', 'b', 1)]"
expect_eq "nan as printed" "$(pyj slow.json '[m["equal_as_printed"] for m in d["metrics"] if m["name"] == "loss"]')" "[5]"

# --first-diff: same answers, each metric's first difference too
run_align 1 report --db f.db --format json --first-diff --out ffast.json
run_align 1 report --db f.db --format json --first-diff --no-stepsum --out fslow.json
same ffast.json fslow.json "$ANSWERS" "first-diff answers"
same ffast.json fslow.json '[[(m["name"], m["first_diff_step"]) for m in d["metrics"]], d["searched_through_step"]]' "first-diff per metric"
same ffast.json fast.json '[d[k] for k in ("first_diff", "first_unproven", "proven_equal_through_step")]' "first-diff vs full"
# the only-in record of step 7 lies past the first differing step: --first-diff does not look there
expect_eq "first-diff first only in" "$(pyj ffast.json 'd["first_only_in"]')" "None"
# past step 6 the fast path still counts units with equal summaries; what is left is unread
expect_eq "first-diff stopped early" "$(pyj ffast.json '[d["mode"], d["metrics_cover_skipped"], d["searched_through_step"], d["totals"]["unread_a"], d["totals"]["unread_b"]]')" "['first-diff', False, 6, 8, 9]"
expect_eq "records" "$(pyj ffast.json "[d[\"runs\"][\"a\"][\"records\"], d[\"runs\"][\"b\"][\"records\"]]")" "[108, 109]"
expect_eq "every record accounted for" "$(pyj ffast.json '(lambda t: [t["compared"] + t["only_in_a"] + t["unread_a"], t["compared"] + t["only_in_b"] + t["unread_b"]])(d["totals"])')" "[108, 109]"
expect_eq "every record accounted for (slow)" "$(pyj fslow.json '(lambda t: [t["compared"] + t["only_in_a"] + t["unread_a"], t["compared"] + t["only_in_b"] + t["unread_b"], t["unread_a"]])(d["totals"])')" "[108, 109, 28]"
expect_eq "first-diff per metric through step 6" "$(pyj ffast.json '[(m["name"], m["first_diff_step"]) for m in d["metrics"]]')" \
	"[('loss', None), ('num_zeros', None), ('x', None), ('y', 6), ('z', None)]"
# with named metrics it goes on until each has its first difference
run_align 1 report --db f.db --format json --first-diff --metric y --metric z --metric loss --metric x --out fm.json
run_align 1 report --db f.db --format json --first-diff --metric y --metric z --metric loss --metric x --no-stepsum --out fms.json
expect_eq "named metrics' first differences" "$(pyj fm.json '[(m["name"], m["first_diff_step"]) for m in d["metrics"]] + [d["searched_through_step"]]')" \
	"[('loss', 7), ('x', None), ('y', 6), ('z', 7), None]"
same fm.json fms.json '[(m["name"], m["first_diff_step"]) for m in d["metrics"]]' "named metrics"
same fm.json fms.json "$ANSWERS" "named metrics answers"
# --metric: the fast path with per-name counts of skipped units
for m in y "lm loss" num-zeros; do
	run_align "$([ "$m" = num-zeros ] && echo 0 || echo 1)" report --db f.db --format json --metric "$m" --out mf.json
	run_align "$([ "$m" = num-zeros ] && echo 0 || echo 1)" report --db f.db --format json --metric "$m" --no-stepsum --out ms.json
	same mf.json ms.json '[d["totals"]["compared"], d["totals"]["bitwise_equal"], d["totals"]["equal_as_printed"], d["metrics"]]' "--metric $m"
	same mf.json ms.json "$ANSWERS" "--metric $m answers"
	run_align "$([ "$m" = num-zeros ] && echo 0 || echo 1)" report --db f.db --format json --metric "$m" --first-diff --out mff.json
	same mff.json ms.json "$ANSWERS" "--metric $m --first-diff answers"
done
run_align 1 report --db f.db --first-diff --metric "lm loss"
expect_out "^bits unknown from step 3 \(loss printed with 5 decimals, 7 significant digits: '10.88426'\); first provable difference: loss at step 7 \(10.82613 vs 10.82611\)$"

# --- a resumed run: the later occurrences of repeated steps are compared, and the report says so --------
cat > restart.log <<'L'
 iteration        1/       5 | lm loss: 1.100000E+01 | num zeros: 12 |
 iteration        2/       5 | lm loss: 1.090000E+01 | num zeros: 13 |
 iteration        3/       5 | lm loss: 1.080000E+01 | num zeros: 14 |
 iteration        4/       5 | lm loss: 1.070000E+01 | num zeros: 15 |
> loading checkpoint from /ckpt at iteration 2
 iteration        3/       5 | lm loss: 1.080001E+01 | num zeros: 14 |
 iteration        4/       5 | lm loss: 1.070001E+01 | num zeros: 15 |
 iteration        5/       5 | lm loss: 1.060001E+01 | num zeros: 16 |
L
grep -v -e '^>' restart.log | sed -n '1,2p;5,7p' > clean.log
run_align 0 ingest --db r.db --quiet restart.log clean.log
run_align 0 report --db r.db --format json --out r.json
expect_eq "resumed flagged" "$(pyj r.json '[d["runs"]["a"]["resumed"], d["runs"]["b"]["resumed"], d["warnings"]]')" \
	"[True, False, [\"run 'restart' was resumed: later occurrences of repeated steps were used\"]]"
expect_eq "resumed totals" "$(pyj r.json '[d["totals"][k] for k in ("compared", "equal_as_printed", "bitwise_equal", "differ")]')" "[10, 5, 5, 0]"
run_align 0 report --db r.db --format json --no-stepsum --out rs.json
same r.json rs.json 'd["metrics"]' "resumed metrics"
run_align 0 report --db r.db && expect_out "^note: run 'restart' was resumed: later occurrences of repeated steps were used$"
run_align 0 report --db r.db --format md && expect_out "^> \*\*Note:\*\* run 'restart' was resumed: later occurrences of repeated steps were used$"
finish
