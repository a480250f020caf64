#!/usr/bin/env bash
# report-order: what "first" means when two runs record in different orders, and a report people can
# read: (1) the first difference does not depend on which run is named first (--runs A,B and B,A
# give the same record; both runs' positions are shown); (2) records of a name only one run has are
# grouped into one line per (name, run) after the differing values; (3) a 70-character metric name
# keeps the text report's columns aligned.
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# --- (1) the same two differing tensors, recorded in opposite orders ------------------------------------
# run p records x then y at step 1, run q records y then x; both differ. Step 0 is equal and recorded
# in the same order.
{
	printf '{"align_trace":1,"run":"p","rank":0}\n'
	printf '{"step":0,"name":"w","dtype":"bf16","shape":[2],"digest":"0000000000000001"}\n'
	printf '{"step":1,"name":"w","dtype":"bf16","shape":[2],"digest":"0000000000000001"}\n'
	printf '{"step":1,"name":"x","dtype":"bf16","shape":[2],"digest":"00000000000000a1"}\n'
	printf '{"step":1,"name":"y","dtype":"bf16","shape":[2],"digest":"00000000000000b1"}\n'
} > p.atf
{
	printf '{"align_trace":1,"run":"q","rank":0}\n'
	printf '{"step":0,"name":"w","dtype":"bf16","shape":[2],"digest":"0000000000000001"}\n'
	printf '{"step":1,"name":"w","dtype":"bf16","shape":[2],"digest":"0000000000000001"}\n'
	printf '{"step":1,"name":"y","dtype":"bf16","shape":[2],"digest":"00000000000000b2"}\n'
	printf '{"step":1,"name":"x","dtype":"bf16","shape":[2],"digest":"00000000000000a2"}\n'
} > q.atf
run_align 0 ingest --db s.db --quiet p.atf q.atf
run_align 1 report --db s.db --runs p,q --format json --out pq.json
run_align 1 report --db s.db --runs q,p --format json --out qp.json
FIRST='[d["first_diff"][k] for k in ("step", "rank", "name")]'
expect_eq "first diff, p first" "$(pyj pq.json "$FIRST")" "[1, 0, 'x']"
expect_eq "first diff, q first" "$(pyj qp.json "$FIRST")" "[1, 0, 'x']"
expect_eq "listed alike" "$(pyj pq.json '[x["name"] for x in d["diffs"]]')" "$(pyj qp.json '[x["name"] for x in d["diffs"]]')"
# both positions (ordinal in the step's rank and micro) and both seqs are shown
expect_eq "positions p,q" "$(pyj pq.json '[(d["first_diff"][s]["pos"], d["first_diff"][s]["seq"]) for s in ("a", "b")]')" "[(1, 2), (2, 3)]"
expect_eq "positions q,p" "$(pyj qp.json '[(d["first_diff"][s]["pos"], d["first_diff"][s]["seq"]) for s in ("a", "b")]')" "[(2, 3), (1, 2)]"
run_align 1 report --db s.db --runs q,p --first-diff
expect_out "^first difference: x at step 1, micro 0, rank 0: differ"
expect_out "^  position in its step \(rank, micro\): q 2 \(seq 3\), p 1 \(seq 2\)$"
run_align 1 report --db s.db --runs p,q --first-diff --format json --out pqf.json
expect_eq "--first-diff alike" "$(pyj pqf.json "$FIRST")" "[1, 0, 'x']"
run_align 1 report --db s.db --runs q,p --no-stepsum --format json --out qps.json
expect_eq "every record read alike" "$(pyj qps.json "$FIRST")" "[1, 0, 'x']"

# --- (2) a name in one run only: one line, after the differing values -----------------------------------
trace() { # trace RUN LOSS_AT_10 WITH_SCALE
	printf '{"align_trace":1,"run":"%s","rank":0}\n' "$1"
	for s in $(seq 1 15); do
		[ "$3" = 1 ] && printf '{"step":%d,"name":"loss scale","phase":"metric","value":65536}\n' "$s"
		v=2.5
		[ "$s" -ge 10 ] && v=$2
		printf '{"step":%d,"name":"lm loss","phase":"loss","value":%s}\n' "$s" "$v"
	done
}
trace m 2.5 1 > m.atf
trace n 2.75 0 > n.atf
run_align 0 ingest --db g.db --quiet m.atf n.atf
run_align 1 report --db g.db --runs m,n --format json --out g.json
expect_eq "only_in grouped" "$(pyj g.json 'd["only_in"]')" \
	"[{'name': 'loss_scale', 'run': 'm', 'count': 15, 'first_step': 1, 'last_step': 15}]"
expect_eq "diffs: the values" "$(pyj g.json '[(x["step"], x["name"], x["verdict"]) for x in d["diffs"]][:2] + [d["diffs_total"], d["totals"]["only_in_a"]]')" \
	"[(10, 'loss', 'differ'), (11, 'loss', 'differ'), 6, 15]"
run_align 1 report --db g.db --runs m,n
expect_out "^differing values \(first 6 of 6\):$"
expect_out "^only in one run \(1 name, 15 records\):$"
expect_out "^  name +run +records +steps$"
expect_out "^  loss_scale +'m' +15 +1\.\.15$"
expect_eq "one line for loss_scale" "$(grep -c 'loss_scale' out.txt)" "4" # metrics, summary, first only-in, group
# the values come before the names in one run only
expect_eq "values first" "$(grep -n -e '^differing values' -e '^only in one run' out.txt | cut -d: -f2 | tr '\n' ,)" \
	"differing values (first 6 of 6),only in one run (1 name, 15 records),"
run_align 1 report --db g.db --runs m,n --format html --out g.html
grep -q '<h3>Only in one run</h3>' g.html || fail "html: only-in table"
grep -q '<td class="mono">loss_scale</td><td>m</td><td class="num">15</td><td class="num">1</td><td class="num">15</td>' g.html || fail "html: loss_scale row"
expect_eq "html: one row for loss_scale in the records" "$(grep -c "<td class=\"mono\">loss_scale</td>" g.html)" "1"
run_align 1 report --db g.db --runs m,n --format md
expect_out "^## Only in one run$"
expect_out "^\| loss_scale \| m \| 15 \| 1 \| 15 \|$"

# --- (3) a 70-character name keeps the columns --------------------------------------------------------
long=model_decoder_layers_17_self_attention_linear_qkv_layer_norm_weight_gn
expect_eq "name length" "${#long}" "70"
{
	printf '{"align_trace":1,"run":"u","rank":0}\n'
	printf '{"step":1,"name":"lm loss","phase":"loss","value":1.5}\n'
	printf '{"step":1,"name":"%s","phase":"grad","value":0.5}\n' "$long"
	printf '{"step":1,"name":"zz","phase":"grad","value":0.25}\n'
} > u.atf
sed 's/"run":"u"/"run":"v"/; s/0\.25/0.375/; s/"value":0\.5/"value":0.625/' u.atf > v.atf
run_align 0 ingest --db l.db --quiet u.atf v.atf
run_align 1 report --db l.db --runs u,v
# in the metrics table every count starts in one column (a long name takes a line of its own)
cols=$(awk '/^metrics/ {m = 1; next} m && /^  / {if (match($0, /[0-9]+\/[0-9]+ bitwise-equal/)) print RSTART; next} m {m = 0}' out.txt | sort -u)
expect_eq "metrics: one column for the counts" "$cols" "$(awk '/^metrics/ {m = 1; next} m && /^  loss / {match($0, /[0-9]+\/[0-9]+ bitwise-equal/); print RSTART}' out.txt)"
expect_eq "metrics: three rows" "$(awk '/^metrics/ {m = 1; next} m && /^  / && /bitwise-equal/ {n++} END {print n}' out.txt)" "3"
expect_out "^  $long$"
# in the differing values every verdict starts in one column too
vcols=$(awk '/^differing values/ {m = 1; next} m && /^  / {if (match($0, / differ: /)) print RSTART; next} m {m = 0}' out.txt | sort -u)
expect_eq "differing values: one column for the verdict" "$(echo "$vcols" | wc -l)" "1"
expect_eq "differing values: two rows" "$(awk '/^differing values/ {m = 1; next} m && /^  / && / differ: / {n++} END {print n}' out.txt)" "2"
finish
