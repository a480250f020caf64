#!/usr/bin/env bash
# report-rootcause: the root-cause candidate (DESIGN: a record whose inputs matched but whose output
# differs). ATF records carry the input/output link ("call", "io"). In step 2 the attention call's two
# inputs are bitwise-equal and its output differs (the candidate); the MLP downstream of it differs in
# input and output, and the step's loss (recorded first in the step, so first in execution order) differs too:
# the first difference is a downstream consequence, the candidate is reported apart from it (text,
# JSON root_cause with its inputs' count, Markdown, HTML), in either order of the runs. Also: the
# candidate that is the first difference itself (said once); an input missing in one run (no
# candidate); --first-diff not searching past the first differing step; runs without links (nothing
# said, JSON null with the reason); a bad "io" field (exit 2, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# rec STEP NAME CALL IO DIGEST_BYTE: a linked tensor record at micro 0
rec() {
	printf '{"step":%d,"name":"%s","dtype":"bf16","shape":[4],"digest":"00000000000000%s","call":"%s","io":"%s"}\n' \
		"$1" "$2" "$5" "$3" "$4"
}
# step RUN STEP LOSS ATTN_OUT MLP_IN MLP_OUT [WITH_W]: one step of the model, the loss first;
# WITH_W 0: the attention's second input is not recorded
step() {
	printf '{"step":%d,"name":"lm loss","phase":"loss","value":%s}\n' "$2" "$3"
	rec "$2" embed.in "embed#0" in 01
	rec "$2" embed.out "embed#0" out 02
	rec "$2" attn.in "attn#0" in 02
	[ "${7:-1}" = 1 ] && rec "$2" attn.w "attn#0" in 03
	rec "$2" attn.out "attn#0" out "$4"
	rec "$2" mlp.in "mlp#0" in "$5"
	rec "$2" mlp.out "mlp#0" out "$6"
}
header() { printf '{"align_trace":1,"run":"%s","framework":"align","rank":0}\n' "$1"; }

# --- a downstream first difference and the root-cause candidate ------------------------------------------
{ header g; step g 1 2.5 04 04 05; step g 2 2.25 04 04 05; } > g.atf
{ header h; step h 1 2.5 04 04 05; step h 2 2.375 14 14 15; } > h.atf
run_align 0 ingest --db r.db --quiet g.atf h.atf
run_align 1 report --db r.db --runs g,h --format json --out gh.json
run_align 1 report --db r.db --runs h,g --format json --out hg.json
expect_eq "first difference: the loss" "$(pyj gh.json '[d["first_diff"][k] for k in ("step", "micro", "name")]')" "[2, 0, 'loss']"
RC='[d["root_cause"][k] for k in ("step", "micro", "rank", "name", "verdict", "inputs", "is_first_diff")] + [d["root_cause"][s][k] for s in ("a", "b") for k in ("call", "io")] + [d["root_cause_reason"]]'
expect_eq "root cause" "$(pyj gh.json "$RC")" "[2, 0, 0, 'attn.out', 'differ', 2, False, 'attn#0', 'out', 'attn#0', 'out', None]"
expect_eq "root cause, runs swapped" "$(pyj hg.json "$RC")" "[2, 0, 0, 'attn.out', 'differ', 2, False, 'attn#0', 'out', 'attn#0', 'out', None]"
expect_eq "digests: every input bitwise" "$(pyj gh.json 'd["root_cause"]["inputs_by_summary"]')" "0"
run_align 1 report --db r.db --runs g,h
expect_out "^first difference: loss at step 2, micro 0, rank 0: differ"
expect_out "^root cause candidate: attn.out \(inputs equal, output differs\) at step 2, micro 0, rank 0: call 'attn#0', 2 inputs bitwise-equal$"
expect_out "^  g: xxh3t64:0000000000000004 \(bf16\)  'attn.out' at g.atf:"
run_align 1 report --db r.db --runs g,h --no-stepsum --format json --out ghs.json
expect_eq "root cause, every record read" "$(pyj ghs.json "$RC")" "$(pyj gh.json "$RC")"
# --first-diff reads the first differing step: the candidate is in it
run_align 1 report --db r.db --runs g,h --first-diff --format json --out ghf.json
expect_eq "--first-diff root cause" "$(pyj ghf.json "$RC")" "[2, 0, 0, 'attn.out', 'differ', 2, False, 'attn#0', 'out', 'attn#0', 'out', None]"
run_align 1 report --db r.db --runs g,h --format md
expect_out "^\| root cause candidate \| 2 \| 0 \| 0 \| attn.out \| differ \|"
expect_out "^\*\*Root cause candidate:\*\* attn.out \(inputs equal, output differs\) at step 2"
run_align 1 report --db r.db --runs g,h --format html --out r.html
grep -q '<h3>Root cause candidate: <code>attn.out</code> at step 2, micro 0, rank 0' r.html || fail "html: root cause"
grep -q 'inputs equal, output differs: call <code>attn#0</code>, 2 inputs bitwise-equal' r.html || fail "html: inputs"

# --- the candidate is the first difference: said once ---------------------------------------------------
{ header i; step i 1 2.5 04 04 05; step i 2 2.375 04 04 05; } > i.atf
run_align 0 ingest --db r.db --quiet i.atf
run_align 1 report --db r.db --runs i,h --format json --out ih.json
expect_eq "first diff is the candidate" "$(pyj ih.json '[d["first_diff"]["name"], d["root_cause"]["name"], d["root_cause"]["is_first_diff"]]')" "['attn.out', 'attn.out', True]"
run_align 1 report --db r.db --runs i,h
expect_out "^root cause candidate: attn.out \(inputs equal, output differs\) at step 2, micro 0, rank 0: call 'attn#0', 2 inputs bitwise-equal; it is the first difference$"
expect_eq "candidate shown once" "$(grep -c "'attn.out' at h.atf" out.txt)" "1"

# --- an input missing in one run: no candidate; the first difference is still reported -----------------
{ header j; step j 1 2.5 04 04 05 0; step j 2 2.25 14 14 15 0; } > j.atf
run_align 0 ingest --db r.db --quiet j.atf
run_align 1 report --db r.db --runs g,j --format json --out gj.json
expect_eq "input missing" "$(pyj gj.json '[d["first_diff"]["name"], d["root_cause"], d["root_cause_reason"]]')" \
	"['attn.out', None, 'no differing output whose inputs are all equal (bitwise or in their summaries)']"
run_align 1 report --db r.db --runs g,j
expect_out "^root cause candidate: none \(no differing output whose inputs are all equal \(bitwise or in their summaries\)\)$"

# --- --first-diff searches through the first differing step only ------------------------------------------
# step 2: only the MLP's input and output differ (its producer is not recorded); step 3: the attention
{ header k; step k 1 2.5 04 04 05; step k 2 2.5 04 04 05; step k 3 2.5 04 04 05; } > k.atf
{ header l; step l 1 2.5 04 04 05; step l 2 2.5 04 24 25; step l 3 2.5 14 14 15; } > l.atf
run_align 0 ingest --db s.db --quiet k.atf l.atf
run_align 1 report --db s.db --runs k,l --first-diff --format json --out klf.json
expect_eq "--first-diff: not found" "$(pyj klf.json '[d["first_diff"]["step"], d["first_diff"]["name"], d["root_cause"], d["root_cause_reason"]]')" \
	"[2, 'mlp.in', None, 'not found through step 2']"
run_align 1 report --db s.db --runs k,l --first-diff
expect_out "^root cause candidate: none \(not found through step 2\)$"
run_align 1 report --db s.db --runs k,l --format json --out kl.json
expect_eq "full report: found later" "$(pyj kl.json '[d["root_cause"][k] for k in ("step", "name", "inputs")]')" "[3, 'attn.out', 2]"

# --- no links: nothing said, JSON null with the reason ------------------------------------------------------
sed 's/,"call":"[^"]*","io":"[^"]*"//' g.atf | sed 's/"run":"g"/"run":"m"/' > m.atf
sed 's/,"call":"[^"]*","io":"[^"]*"//' h.atf | sed 's/"run":"h"/"run":"n"/' > n.atf
grep -q '"call"' m.atf n.atf && fail "fixture edit did not apply"
run_align 0 ingest --db n.db --quiet m.atf n.atf
run_align 1 report --db n.db --runs m,n --format json --out mn.json
expect_eq "no links" "$(pyj mn.json '[d["first_diff"]["name"], d["root_cause"], d["root_cause_reason"]]')" \
	"['loss', None, 'no input/output links (call, io) in the records read']"
run_align 1 report --db n.db --runs m,n
grep -q "root cause" out.txt && fail "text says something about a root cause without links"

# --- a bad io field: exit 2, the database unchanged ---------------------------------------------------------
before=$(sqlite3 n.db .dump | sha256sum)
{ header o; printf '{"step":1,"name":"attn.out","dtype":"bf16","shape":[4],"digest":"0000000000000001","call":"attn#0","io":"sideways"}\n'; } > o.atf
run_align 2 ingest --db n.db --quiet o.atf
expect_err "o.atf:2: .*field 'io': 'sideways' is not \"in\" or \"out\""
{ header o; printf '{"step":1,"name":"attn.out","dtype":"bf16","shape":[4],"digest":"0000000000000001","io":"out"}\n'; } > o.atf
run_align 2 ingest --db n.db --quiet o.atf
expect_err "o.atf:2: .*field 'io': needs 'call'"
expect_eq "database unchanged" "$(sqlite3 n.db .dump | sha256sum)" "$before"
finish
