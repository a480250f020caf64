#!/usr/bin/env bash
# report-basic: align report on ATF traces written here: equal runs (exit 0, JSON totals field by
# field), a tensor digest differing at step 3 (first_diff step 3, exit 1, proven through step 2),
# loss bits 3 ulp apart, only-in-a / only-in-b (first_only_in, never first_diff, not where --first-diff
# stops), "first" meaning first executed (seq before rank), and
# the text and Markdown formats.
. "$SRCROOT/tests/cli/lib.sh"

# pyj FILE EXPR: evaluate a Python expression over the JSON document d (json.load validates it)
pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# trace RUN RANK: 5 steps x (loss fp32 bits, x tensor digest, gn fp64 value) on one rank
trace() {
	printf '{"align_trace":1,"run":"%s","framework":"align","rank":%d}\n' "$1" "$2"
	for s in 1 2 3 4 5; do
		printf '{"step":%d,"name":"lm loss","phase":"loss","dtype":"fp32","bits":"0x412de6%02x"}\n' "$s" "$((s + $2))"
		printf '{"step":%d,"name":"x","dtype":"bf16","shape":[4],"digest":"00000000000000%02x"}\n' "$s" "$((s * 3 + $2))"
		printf '{"step":%d,"name":"grad norm","phase":"grad","value":%d.25}\n' "$s" "$s"
	done
}

# --- equal runs ----------------------------------------------------------------------------------------
trace a 0 > a0.atf; trace a 1 > a1.atf
trace b 0 > b0.atf; trace b 1 > b1.atf
run_align 0 ingest --db eq.db --as a --quiet a0.atf a1.atf
run_align 0 ingest --db eq.db --as b --quiet b0.atf b1.atf
run_align 0 report --db eq.db --format json --out eq.json && expect_eq "stdout empty with --out" "$OUT_TXT" ""
expect_eq "json totals" "$(pyj eq.json '[d["align_report"], d["totals"]["compared"], d["totals"]["bitwise_equal"], d["totals"]["equal_as_printed"], d["totals"]["differ"], d["totals"]["only_in_a"], d["totals"]["only_in_b"]]')" "[1, 30, 30, 0, 0, 0, 0]"
expect_eq "runs" "$(pyj eq.json '[d["runs"]["a"]["name"], d["runs"]["b"]["name"], d["runs"]["a"]["records"], d["runs"]["a"]["framework"], d["runs"]["a"]["format"], d["runs"]["a"]["resumed"]]')" "['a', 'b', 30, 'align', 'atf', False]"
expect_eq "no diff" "$(pyj eq.json '[d["first_diff"], d["first_unproven"], d["proven_equal_through_step"], d["diffs"]]')" "[None, None, 5, []]"
expect_eq "metrics" "$(pyj eq.json '[(m["name"], m["compared"], m["bitwise_equal"], m["first_diff_step"]) for m in d["metrics"]]')" \
	"[('grad_norm', 10, 10, None), ('loss', 10, 10, None), ('x', 10, 10, None)]"
expect_eq "all steps skipped" "$(pyj eq.json '[d["fast_path"], d["totals"]["skipped_units"], d["totals"]["skipped_records"]]')" "[True, 10, 30]"
run_align 0 report --db eq.db && expect_out "^totals: 30/30 bitwise-equal$" && expect_out "bitwise-equal through step 5; no difference"
expect_out "^  loss +10/10 bitwise-equal$"

# --- a tensor digest differs at step 3 on rank 1, loss bits 3 ulp apart at step 4 on rank 0 --------------
trace c 0 | sed '/"step":4,"name":"lm loss"/s/0x412de604"/0x412de607"/' > c0.atf
trace c 1 | sed '/"step":3,"name":"x"/s/"000000000000000a"/"000000000000000b"/' > c1.atf
grep -q 0x412de607 c0.atf && grep -q 000000000000000b c1.atf || fail "fixture edits did not apply"
run_align 0 ingest --db d.db --as a --quiet a0.atf a1.atf
run_align 0 ingest --db d.db --as c --quiet c0.atf c1.atf
run_align 1 report --db d.db --format json --out d.json
expect_eq "first diff" "$(pyj d.json '[d["first_diff"][k] for k in ("step", "micro", "rank", "name", "verdict")]')" "[3, 0, 1, 'x', 'differ']"
expect_eq "first diff sides" "$(pyj d.json '[d["first_diff"]["a"]["digest"], d["first_diff"]["b"]["digest"], d["first_diff"]["b"]["digest_alg"], d["first_diff"]["b"]["file"], d["first_diff"]["b"]["line"]]')" \
	"['000000000000000a', '000000000000000b', 'xxh3t64', 'c1.atf', 9]"
expect_eq "proven through" "$(pyj d.json 'd["proven_equal_through_step"]')" "2"
expect_eq "totals" "$(pyj d.json '[d["totals"][k] for k in ("compared", "bitwise_equal", "differ")]')" "[30, 28, 2]"
expect_eq "loss diff" "$(pyj d.json '[(x["step"], x["rank"], x["a"]["bits"], x["b"]["bits"], x["ulp"], x["ulp_dtype"], x["a"]["dtype"]) for x in d["diffs"] if x["name"] == "loss"]')" \
	"[(4, 0, '0x412de604', '0x412de607', 3, 'fp32', 'fp32')]"
# rel_diff = |a - b| / max(|a|, |b|) of the two float32 values
f32() { python3 -c 'import struct,sys; print(repr(struct.unpack("<f", struct.pack("<I", int(sys.argv[1], 16)))[0]))' "$1"; }
fa=$(f32 412de604) fb=$(f32 412de607)
expect_eq "rel diff" "$(pyj d.json '[x["rel_diff"] == abs('"$fa - $fb"') / '"$fb"' for x in d["diffs"] if x["name"] == "loss"]')" "[True]"
expect_eq "per metric first diff" "$(pyj d.json '[(m["name"], m["differ"], m["first_diff_step"]) for m in d["metrics"]]')" \
	"[('grad_norm', 0, None), ('loss', 1, 4), ('x', 1, 3)]"
run_align 1 report --db d.db --first-diff
expect_out "bitwise-equal through step 2; first difference: x at step 3"
expect_out "^  c: xxh3t64:000000000000000b \(bf16\)  'x' at c1.atf:9$"
run_align 1 report --db d.db --metric "lm loss"
expect_out "first difference: loss at step 4, micro 0, rank 0: differ: bits differ by 3 ulp \(fp32\)"
expect_out "^  a: 0x412de604 \(fp32\)  'lm loss' at a0.atf:11$"
expect_out "ulp distance 3 \(fp32\), relative difference 2.63e-07"

# --- only in one run ---------------------------------------------------------------------------------
trace e 0 | grep -v '"step":2,"name":"grad norm"' > e0.atf
{ trace e 1; printf '{"step":5,"name":"extra","value":1}\n'; } > e1.atf
run_align 0 ingest --db o.db --as a --quiet a0.atf a1.atf
run_align 0 ingest --db o.db --as e --quiet e0.atf e1.atf
run_align 1 report --db o.db --format json --out o.json
expect_eq "only in" "$(pyj o.json '[d["totals"][k] for k in ("compared", "bitwise_equal", "only_in_a", "only_in_b")]')" "[29, 29, 1, 1]"
# a name in one run only is a difference (exit 1) but not the first divergent record
expect_eq "first only-in" "$(pyj o.json '[d["first_only_in"][k] for k in ("step", "rank", "name", "verdict")] + [d["first_only_in"]["b"], d["first_diff"]]')" "[2, 0, 'grad_norm', 'only-in-a', None, None]"
# records of names in one run only are grouped per (name, run), not listed one by one with the values
expect_eq "only-in grouped" "$(pyj o.json '[d["diffs"], d["only_in"]]')" \
	"[[], [{'name': 'grad_norm', 'run': 'a', 'count': 1, 'first_step': 2, 'last_step': 2}, {'name': 'extra', 'run': 'e', 'count': 1, 'first_step': 5, 'last_step': 5}]]"
run_align 1 report --db o.db
expect_out "^bitwise-equal through step 1; no difference in values; first name in one run only: grad_norm at step 2 \(only in 'a'\)$"
expect_out "^first only in one run: grad_norm at step 2, micro 0, rank 0: only-in-a: only in run 'a'$"
run_align 1 report --db o.db --format md
expect_out "^\| first only in one run \| 2 \| 0 \| 0 \| grad_norm \| only-in-a \| 2.25 \| \(absent\) \|"
# --first-diff does not stop at an only-in record: a later value difference is still found
sed 's/"step":4,"name":"grad norm","phase":"grad","value":4.25/"step":4,"name":"grad norm","phase":"grad","value":4.5/' e0.atf | sed 's/"run":"e"/"run":"f"/' > f0.atf
sed 's/"run":"e"/"run":"f"/' e1.atf > f1.atf
grep -q '"value":4.5' f0.atf || fail "fixture edit did not apply"
run_align 0 ingest --db o.db --as f --quiet f0.atf f1.atf
run_align 1 report --db o.db --runs a,f --first-diff --format json --out of.json
expect_eq "value diff after only-in" "$(pyj of.json '[(d[k]["step"], d[k]["name"], d[k]["verdict"]) for k in ("first_diff", "first_only_in")] + [d["searched_through_step"]]')" \
	"[(4, 'grad_norm', 'differ'), (2, 'grad_norm', 'only-in-a'), 4]"
run_align 1 report --db o.db --runs a,f --first-diff
expect_out "^bitwise-equal through step 1; first difference: grad_norm at step 4 \(4.25 vs 4.5\); first name in one run only: grad_norm at step 2 \(only in 'a'\)$"

# --- first means first executed: seq decides before rank --------------------------------------------------
# step 2: rank 1 differs at seq 0, rank 0 at seq 4 (rank 0 < rank 1, but rank 1's record ran first)
printf '{"align_trace":1,"run":"p","rank":0}\n{"step":2,"seq":4,"name":"u","value":1}\n' > p0.atf
printf '{"align_trace":1,"run":"p","rank":1}\n{"step":2,"seq":0,"name":"v","value":1}\n' > p1.atf
printf '{"align_trace":1,"run":"q","rank":0}\n{"step":2,"seq":4,"name":"u","value":2}\n' > q0.atf
printf '{"align_trace":1,"run":"q","rank":1}\n{"step":2,"seq":0,"name":"v","value":2}\n' > q1.atf
run_align 0 ingest --db x.db --as p --quiet p0.atf p1.atf
run_align 0 ingest --db x.db --as q --quiet q0.atf q1.atf
run_align 1 report --db x.db --format json --out x.json
expect_eq "executed first" "$(pyj x.json '[d["first_diff"]["rank"], d["first_diff"]["name"], [x["name"] for x in d["diffs"]]]')" "[1, 'v', ['v', 'u']]"

# --- md5 of the float32 on one side, exact bits on the other (md5 of 10.8125 = 0x412d0000, little-endian) ---
printf '{"align_trace":1,"run":"bits"}\n{"step":1,"name":"loss","dtype":"fp32","bits":"0x412d0000"}\n{"step":2,"name":"loss","dtype":"fp32","bits":"0x412d0001"}\n' > bits.atf
printf '{"align_trace":1,"run":"md5"}\n{"step":1,"name":"loss","digest":"5d9e731bd86cd80cea9fb3632051d88b","digest_alg":"md5"}\n{"step":2,"name":"loss","digest":"5d9e731bd86cd80cea9fb3632051d88b","digest_alg":"md5"}\n' > md5.atf
run_align 0 ingest --db md5.db --quiet bits.atf md5.atf
run_align 1 report --db md5.db --format json --out md5.json
expect_eq "md5 vs bits" "$(pyj md5.json '[d["totals"]["bitwise_equal"], d["totals"]["differ"], d["first_diff"]["step"], d["proven_equal_through_step"]]')" "[1, 1, 2, 1]"
expect_eq "md5 reason" "$(pyj md5.json 'd["first_diff"]["reason"]')" "md5 of a's fp32 bits 0x412d0001 is $(printf '\x01\x00\x2d\x41' | md5sum | cut -c1-32), b's md5 digest is 5d9e731bd86cd80cea9fb3632051d88b"

# --- Markdown -------------------------------------------------------------------------------------------
run_align 1 report --db d.db --format md
expect_out '^# align report: `a` vs `c`$'
expect_out '^\| metric \| compared \| bitwise-equal \| equal as printed \| differ \|'
expect_out '^\| x \| 10 \| 9 \| 0 \| 1 \| 0 \| 0 \| 0 \| 3 \|$'
expect_out '^\| \*\*total\*\* \| 30 \| 28 \| 0 \| 2 \|'
expect_out '^\| 3 \| 0 \| 1 \| x \| differ \| xxh3t64:000000000000000a \| xxh3t64:000000000000000b \|'
expect_out '^\*\*bitwise-equal through step 2; first difference: x at step 3'
# --limit caps the listed rows, not the verdict
run_align 1 report --db d.db --format json --limit 1 --out l.json
expect_eq "limit" "$(pyj l.json '[len(d["diffs"]), d["diffs_total"], d["limit"]]')" "[1, 2, 1]"
finish
