#!/usr/bin/env bash
# report-options: --metric (any alias), --map (rules, occurrence recount, bad lines as file:line with
# exit 2), --runs and run selection errors, --out (atomic: replaced only when complete, nothing left
# behind on error), bad options and bad databases (exit 2).
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# run A prints Megatron-style names, run B PaddleFleet-style ones; layer outputs named differently
trace() { # trace RUN LOSSNAME LAYERPREFIX
	printf '{"align_trace":1,"run":"%s","framework":"align","rank":0}\n' "$1"
	for s in 1 2 3; do
		printf '{"step":%d,"name":"%s","phase":"loss","dtype":"fp32","bits":"0x40%06x"}\n' "$s" "$2" "$s"
		printf '{"step":%d,"name":"%s.0.mlp.out","dtype":"bf16","shape":[2],"digest":"a00000000000000%d"}\n' "$s" "$3" "$s"
		printf '{"step":%d,"name":"%s.1.mlp.out","dtype":"bf16","shape":[2],"digest":"b00000000000000%d"}\n' "$s" "$3" "$s"
	done
}
trace a "lm loss" decoder.layers > a.atf
trace b "loss" model.layers > b.atf
run_align 0 ingest --db r.db --quiet a.atf b.atf

# --- --metric: any alias or canonical name -------------------------------------------------------------
run_align 0 report --db r.db --metric "lm loss" --format json --out m.json
expect_eq "metric alias" "$(pyj m.json '[[m["name"] for m in d["metrics"]], d["totals"]["compared"], d["totals"]["bitwise_equal"]]')" "[['loss'], 3, 3]"
run_align 0 report --db r.db --metric loss --format json --out m2.json
expect_eq "canonical metric" "$(pyj m2.json 'd["totals"]["compared"]')" "3"
run_align 2 report --db r.db --metric "no such thing" && expect_err "metric 'no such thing' \(canonical 'no_such_thing'\) is in neither run 'a' nor run 'b'"
# without a map the layer names do not meet: only in a / only in b
run_align 1 report --db r.db --format json --out nomap.json
expect_eq "unmapped" "$(pyj nomap.json '[d["totals"][k] for k in ("compared", "only_in_a", "only_in_b")]')" "[3, 6, 6]"

# --- --map: regex -> name on the printed name, first match wins, occurrences recounted ----------------------
cat > names.map <<'M'
# both frameworks' layer outputs are one name; the two layers become occurrences 0 and 1
^(decoder|model)\.layers\.[0-9]+\.mlp\.out$ -> mlp out

^never$ -> loss
M
run_align 0 report --db r.db --map names.map --format json --out map.json
expect_eq "mapped" "$(pyj map.json '[d["totals"][k] for k in ("compared", "bitwise_equal", "only_in_a", "only_in_b")] + [d["fast_path"]]')" "[9, 9, 0, 0, False]"
expect_eq "mapped metrics" "$(pyj map.json '[(m["name"], m["compared"]) for m in d["metrics"]]')" "[('loss', 3), ('mlp_out', 6)]"
run_align 0 report --db r.db --map names.map --metric "mlp out" --format json --out mapm.json
expect_eq "metric through the map" "$(pyj mapm.json '[[m["name"] for m in d["metrics"]], d["totals"]["compared"]]')" "[['mlp_out'], 6]"
# a layer swapped in run B's print order now differs (occurrences follow seq order)
sed 's/"name":"model.layers.0.mlp.out","dtype":"bf16","shape":\[2\],"digest":"a000000000000002"/"name":"model.layers.0.mlp.out","dtype":"bf16","shape":[2],"digest":"a00000000000000f"/' b.atf |
	sed 's/"run":"b"/"run":"c"/' > c.atf
run_align 0 ingest --db r.db --quiet c.atf
run_align 1 report --db r.db --runs a,c --map names.map --format json --out mapc.json
expect_eq "mapped diff" "$(pyj mapc.json '[d["first_diff"][k] for k in ("step", "name", "verdict")] + [d["first_diff"]["b"]["name"]]')" "[2, 'mlp_out', 'differ', 'model.layers.0.mlp.out']"
# bad map files: file:line: what, exit 2
printf '# ok\nloss -> loss\noops no arrow\n' > bad1.map
run_align 2 report --db r.db --runs a,b --map bad1.map && expect_err "^error: bad1.map:3: expected 'REGEX -> NAME'$"
printf 'a(( -> x\n' > bad2.map
run_align 2 report --db r.db --runs a,b --map bad2.map && expect_err "^error: bad2.map:1: bad regex 'a\(\(': "
printf ' -> x\n' > bad3.map
run_align 2 report --db r.db --runs a,b --map bad3.map && expect_err "^error: bad3.map:1: empty regex before '->'$"
printf 'x ->  \n' > bad4.map
run_align 2 report --db r.db --runs a,b --map bad4.map && expect_err "^error: bad4.map:1: empty name after '->'$"
run_align 2 report --db r.db --runs a,b --map missing.map && expect_err "^error: cannot open map 'missing.map': "

# --- run selection ---------------------------------------------------------------------------------------
run_align 2 report --db r.db && expect_err "^error: 'r.db' holds more than two runs \('a', 'b', 'c'\): name the two to compare with --runs A,B$"
run_align 2 report --db r.db --runs a,zz && expect_err "^error: no run 'zz' in 'r.db' \(runs: 'a', 'b', 'c'\)$"
run_align 2 report --db r.db --runs a && expect_err "option '--runs': expected two run names 'A,B', got 'a'"
run_align 2 report --db r.db --runs ,b && expect_err "option '--runs': expected two run names"
run_align 0 ingest --db one.db --quiet a.atf
run_align 2 report --db one.db && expect_err "'one.db' holds only one of the two runs \('a'\)"

# --- --out: atomic --------------------------------------------------------------------------------------
echo "previous report" > keep.txt
run_align 2 report --db r.db --runs a,zz --out keep.txt
expect_eq "out untouched on error" "$(cat keep.txt)" "previous report"
expect_eq "no temporary left" "$(ls keep.txt.tmp.* 2>/dev/null | wc -l)" "0"
run_align 1 report --db r.db --runs a,c --out keep.txt && expect_eq "nothing on stdout" "$OUT_TXT" ""
grep -q "^totals: " keep.txt || fail "--out did not write the report"
expect_eq "no temporary left after success" "$(ls keep.txt.tmp.* 2>/dev/null | wc -l)" "0"
expect_eq "mode follows umask" "$(umask 022; "$ALIGN" report --db r.db --runs a,b --out mode.txt; stat -c %a mode.txt)" "644"
run_align 2 report --db r.db --runs a,b --out no/such/dir/r.txt && expect_err "cannot write 'no/such/dir/r.txt': No such file"

# --- bad options and databases -----------------------------------------------------------------------------
run_align 2 report --db r.db --runs a,b --format pdf && expect_err "option '--format': unknown format 'pdf'"
run_align 2 report --db r.db --runs a,b --limit -1 && expect_err "option '--limit'"
run_align 2 report --db r.db --runs a,b stray && expect_err "unexpected argument 'stray'"
run_align 2 report --db nowhere.db && expect_err "no database 'nowhere.db'"
sqlite3 foreign.db "CREATE TABLE t(x)"
run_align 2 report --db foreign.db && expect_err "'foreign.db' is not an align database"
run_align 0 report --help && expect_out "^usage: align report"
finish
