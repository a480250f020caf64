#!/usr/bin/env bash
# run-model-mtp: the mtp op (kernels/ops/mtp.h) in 'align run model' (issue 15 item 1).
# - 'align run --list' shows mtp with its switches and the model's block list names it;
# - two runs of the model under profiles that differ in one MTP switch only (megatron, and megatron with
#   ALIGN_MTP_COMBINE=concat_eh: Megatron's eh_proj on cat([e, h]) instead of DSv4's e_proj + h_proj):
#   'align bisect' names exactly that switch, and 'align report' on the two traces puts the first divergent
#   record in the MTP block (mtp1.input.x, the op's X0), with every record before it equal (the main
#   model, the MTP embedding, enorm, hnorm, e_proj and h_proj); the lm loss is the same and the mtp_1 loss not;
# - the default (add) leaves the model's log and trace as they were before the op existed: the pre-op
#   records are still there, under their names;
# - bad input to the op exits 2 with one message and writes nothing.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

run_align 0 run --list
awk '$1 == "mtp:" {on = 1; next} /^[a-z_]+:/ {on = 0} on && /switches:/' out.txt | grep -qw ALIGN_MTP_COMBINE ||
	fail "'align run --list': ALIGN_MTP_COMBINE is not a switch of mtp"
awk '$1 == "mtp:" {on = 1; next} /^[a-z_]+:/ {on = 0} on && /switches:/' out.txt | grep -qw ALIGN_MTP_SHIFT ||
	fail "'align run --list': ALIGN_MTP_SHIFT is not a switch of mtp"
grep -q '^model: block of .* mtp' out.txt || fail "'align run --list': the model's blocks do not name mtp"

kv=ALIGN_MTP_COMBINE=concat_eh
run_align 0 bisect --db b.db --good profile:megatron --bad profile:megatron --bad "$kv" --format json --out r.json -- "$ALIGN" run model --steps 2
expect_eq "$kv: bisect names exactly that switch" "$(culprit_of r.json)" "ALIGN_MTP_COMBINE"
run_align 0 run model --profile megatron --steps 2 --trace good.atf && cp out.txt good.log
run_align 0 run model --profile megatron --steps 2 --mode "$kv" --trace bad.atf && cp out.txt bad.log
run_align 0 ingest --db t.db --as good good.atf
run_align 0 ingest --db t.db --as bad bad.atf
run_align 1 report --db t.db --first-diff --format json --out rep.json
expect_eq "$kv: first divergent block" "$(jget rep.json "r['first_diff']['name']")" "mtp1.input.x"
expect_eq "$kv: at step 1" "$(jget rep.json "r['first_diff']['step']")" "1"
# the records before it are equal, one by one (the MTP inputs the op computes the same way in both forms)
python3 - good.atf bad.atf <<'PY' || fail "records before mtp1.input.x differ, or the MTP records are missing"
import json, sys
a, b = ([json.loads(l) for l in list(open(p))[1:]] for p in sys.argv[1:3])
assert [r["name"] for r in a] == [r["name"] for r in b]
first = next(i for i, (x, y) in enumerate(zip(a, b)) if x["digest"] != y["digest"])
assert a[first]["name"] == "mtp1.input.x" and a[first]["step"] == 1, a[first]
names = [r["name"] for r in a[:first]]
for n in ("mtp1.embedding.y", "mtp1.enorm.rmsnorm.y", "mtp1.hnorm.rmsnorm.y", "mtp1.e_proj.y", "mtp1.h_proj.y"):
    assert n in names, n
PY
lm() { sed 's/.*lm loss: \([^ ]*\) .*/\1/' "$1"; }
mtp() { sed 's/.*mtp_1 loss: \([^ ]*\) .*/\1/' "$1"; }
expect_eq "$kv: the lm loss is the same" "$(lm bad.log)" "$(lm good.log)"
[ "$(mtp bad.log)" != "$(mtp good.log)" ] || fail "$kv: the mtp_1 loss did not move"

# bad input: exit 2, one message, nothing written
run_align 2 run mtp --shape T=6,S=4 --trace x.atf
expect_err "mtp: S = 4 tokens per sequence does not divide T = 6"
[ -e x.atf ] && fail "a refused run wrote its trace"
run_align 2 run mtp --mode ALIGN_MTP_COMBINE=cat
expect_err "ALIGN_MTP_COMBINE"
finish
