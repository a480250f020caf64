#!/usr/bin/env bash
# report-rootcause-xtuner: the root-cause flag on XTuner AccProber traces. Ingest maps a call's
# "[M][before]T" records to io 'in' and its "[M][after]T" records to io 'out' of call "M#K" (the K-th call
# of M in the forward file; calls nest: a decoder layer's call holds its attention's and MLP's). The
# tensors are known by their summaries (tensor_sum, first_10): inputs equal in every element and
# statistic shown count as equal, said apart ("not proven bitwise"). Cases, each against run a:
#   b: the attention's output differs while its input is equal: the candidate (and the first
#      difference); the MLP, the layer and the LM head downstream of it differ too and are not flagged;
#   c: only the checkpointed q_proj's recomputation during backward differs: its second call;
#   d: the MLP's input differs first (its producer, the residual add, is not hooked): the first
#      difference is an input, and the candidate is the decoder layer (input equal, output differs);
#   e: the input ids differ (data, no producer): everything downstream differs, no candidate.
# An [after] run without its [before]: kept without a link, with a warning. Bad input: a tensor twice in
# one side of a call (exit 2, file,
# line and field named, database unchanged).
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# rec NAME SUM HEAD0 [SHAPE] [DTYPE]: one AccProber forward record (json.dumps layout)
rec() {
	printf '{"name": "%s", "tensor_sum": %s, "shape": %s, "dtype": "torch.%s", "step": 1, "micro_batch_iter": 0, "first_10": [%s, -0.0081787109375, 0.046875]}\n' \
		"$1" "$2" "${4:-[1, 16, 64]}" "${5:-bfloat16}" "$3"
}
# trace DIR ATTN_OUT MLP_X RECOMPUTED_Q DATA: a one-layer model's micro-batch 0 at step 1, rank 0; each
# flag (0 or 1) changes one value and, as a real run would, every value computed downstream of it
trace() {
	local d=$1 attn=$2 mlpx=$3 rq=$4 data=$5 down=0
	[ "$attn$mlpx$data" != 000 ] && down=1
	local a2=$((attn | data)) m2=$((attn | mlpx | data))
	mkdir -p "$d"
	{
		rec "[embed_tokens][before]input_ids" "186473$data.0" 151644.0 "[1, 16]" int64
		rec "[embed_tokens][after]hidden_states" "12.062$data" 0.0012969970703125
		rec "[rotary_emb][before]x" "12.062$data" 0.0012969970703125
		rec "[rotary_emb][before]position_ids" 120.0 0.0 "[1, 16]" int64
		rec "[rotary_emb][after]cos" 80.5 1.0
		rec "[rotary_emb][after]sin" 3.25 0.0
		rec "[layers.0][before]hidden_states" "12.062$data" 0.0012969970703125
		rec "[layers.0.self_attn][before]hidden_states" "-3.5$data" 0.0849609375
		rec "[layers.0.self_attn.q_proj][before]input" "-3.5$data" 0.0849609375
		rec "[layers.0.self_attn.q_proj][after]output" "-31.2$data" 0.0213623046875
		rec "[layers.0.self_attn][after]outputs" "7.7$a2" 0.130859375
		rec "[layers.0.mlp][before]x" "2.2$m2" -0.193359375
		rec "[layers.0.mlp][after]output" "5.1$m2" 0.2734375
		rec "[layers.0][after]hidden_states" "19.9$down" 0.01171875
		rec "[norm][before]hidden_states" "19.9$down" 0.01171875
		rec "[norm][after]hidden_states" "8.25$down" 0.5
		rec "[lm_head][before]hidden_states" "8.25$down" 0.5
		rec "[lm_head][after]loss" "10.$((5 + 2 * down))5" "10.$((5 + 2 * down))5" "[]" float32
		# the checkpointed layer's attention recomputed during backward (q_proj's second call)
		rec "[layers.0.self_attn.q_proj][before]input" "-3.5$data" 0.0849609375
		rec "[layers.0.self_attn.q_proj][after]output" "-31.2$data$rq" 0.0213623046875
	} > "$d/Step_1_MicroIter_0_RANK_0_forward_records.jsonl"
}
trace a 0 0 0 0
trace b 1 0 0 0
trace c 0 0 1 0
trace d 0 1 0 0
trace e 0 0 0 1
for r in a b c d e; do
	run_align 0 ingest --db r.db --as $r --quiet $r/Step_1_MicroIter_0_RANK_0_forward_records.jsonl
done
expect_eq "links of the layer's call" "$(sql r.db "SELECT group_concat(call||':'||io, ' ') FROM (SELECT * FROM record WHERE run_id=(SELECT id FROM run WHERE name='a') AND name LIKE '[layers.0]%' ORDER BY seq)")" "layers.0#0:in layers.0#0:out"

RC='[d["root_cause"][k] for k in ("step", "micro", "rank", "name", "verdict", "inputs", "inputs_by_summary", "is_first_diff")] + [d["root_cause"][s][k] for s in ("a", "b") for k in ("call", "io")] + [d["root_cause_reason"]]'
FD='[d["first_diff"][k] for k in ("name", "verdict")]'

# --- b: the attention's output differs, its input does not -------------------------------------------------
run_align 1 report --db r.db --runs a,b --format json --out ab.json
expect_eq "b: root cause" "$(pyj ab.json "$RC")" "[1, 0, 0, '[layers.0.self_attn][after]outputs', 'differ', 1, 1, True, 'layers.0.self_attn#0', 'out', 'layers.0.self_attn#0', 'out', None]"
expect_eq "b: first difference" "$(pyj ab.json "$FD")" "['[layers.0.self_attn][after]outputs', 'differ']"
expect_eq "b: downstream differences (not flagged)" "$(pyj ab.json 'sorted(x["name"] for x in d["diffs"])')" \
	"['[layers.0.mlp][after]output', '[layers.0.mlp][before]x', '[layers.0.self_attn][after]outputs', '[layers.0][after]hidden_states', '[lm_head][after]loss', '[lm_head][before]hidden_states', '[norm][after]hidden_states', '[norm][before]hidden_states']"
run_align 1 report --db r.db --runs b,a --format json --out ba.json
expect_eq "b: root cause, runs swapped" "$(pyj ba.json "$RC")" "$(pyj ab.json "$RC")"
run_align 1 report --db r.db --runs a,b
expect_out "^root cause candidate: \[layers\.0\.self_attn\]\[after\]outputs \(inputs equal, output differs\) at step 1, micro 0, rank 0: call 'layers\.0\.self_attn#0', 1 input equal \(1 only in the summaries shown, not proven bitwise\); it is the first difference$"
run_align 1 report --db r.db --runs a,b --format html --out ab.html
grep -q 'call <code>layers.0.self_attn#0</code>, 1 input equal (1 only in the summaries shown, not proven bitwise)' ab.html || fail "html: root cause inputs"

# --- c: only the recomputation differs --------------------------------------------------------------------
run_align 1 report --db r.db --runs a,c --format json --out ac.json
expect_eq "c: root cause" "$(pyj ac.json "$RC")" "[1, 0, 0, '[layers.0.self_attn.q_proj][after]output', 'differ', 1, 1, True, 'layers.0.self_attn.q_proj#1', 'out', 'layers.0.self_attn.q_proj#1', 'out', None]"

# --- d: the first difference is the MLP's input; the candidate is the layer around it ------------------------
run_align 1 report --db r.db --runs a,d --format json --out ad.json
expect_eq "d: first difference" "$(pyj ad.json "$FD")" "['[layers.0.mlp][before]x', 'differ']"
expect_eq "d: root cause" "$(pyj ad.json "$RC")" "[1, 0, 0, '[layers.0][after]hidden_states', 'differ', 1, 1, False, 'layers.0#0', 'out', 'layers.0#0', 'out', None]"
run_align 1 report --db r.db --runs a,d
expect_out "^root cause candidate: \[layers\.0\]\[after\]hidden_states \(inputs equal, output differs\) at step 1, micro 0, rank 0: call 'layers\.0#0', 1 input equal \(1 only in the summaries shown, not proven bitwise\)$"

# --- e: the difference enters with the data: no call has equal inputs and a differing output ----------------
run_align 1 report --db r.db --runs a,e --format json --out ae.json
expect_eq "e: no candidate" "$(pyj ae.json '[d["first_diff"]["name"], d["root_cause"], d["root_cause_reason"]]')" \
	"['[embed_tokens][before]input_ids', None, 'no differing output whose inputs are all equal (bitwise or in their summaries)']"

# --- bad input: exit 2, file, line and field named, the database unchanged ------------------------------------
S=Step_1_MicroIter_0_RANK_0_forward_records.jsonl
bad() { # bad DIR PATTERN: exit 2, PATTERN on stderr, database unchanged
	local before
	before=$(sqlite3 r.db .dump | sha256sum)
	run_align 2 ingest --db r.db --as "bad-$1" "$1/$S" && expect_err "$2"
	expect_eq "database unchanged after $1" "$(sqlite3 r.db .dump | sha256sum)" "$before"
}
mkdir f g h i
# an [after] whose call never opened (the [before] line lost, or a prober recording outputs alone): kept,
# without a link, in one warning naming the first such line; the rest of the file keeps its links
sed '9d' a/$S > f/$S
run_align 0 ingest --db o.db --as f "f/$S" &&
	expect_err "f/$S:9: 1 \[after\] record with no \[before\] of its module \(outputs recorded alone\?\): kept without an input/output link"
expect_eq "the orphan [after] has no link" \
	"$(sqlite3 o.db "SELECT coalesce(call,'-')||':'||coalesce(io,'-') FROM record WHERE name='[layers.0.self_attn.q_proj][after]output' ORDER BY seq LIMIT 1")" "-:-"
expect_eq "the other calls keep theirs" \
	"$(sqlite3 o.db "SELECT call||':'||io FROM record WHERE name='[lm_head][after]loss'")" "lm_head#0:out"
# an [after] of a call already closed (its module has no open call left): the same
{ cat a/$S; rec "[lm_head][after]loss" 1.5 1.5 "[]" float32; } > g/$S
run_align 0 ingest --db o.db --as g "g/$S" && expect_err "g/$S:21: 1 \[after\] record with no \[before\]"
# one input recorded twice in one call, one output recorded twice
sed '9p' a/$S > h/$S
bad h "h/$S:10: field 'name': '\[layers\.0\.self_attn\.q_proj\]\[before\]input' is a duplicate: line 9 already gave input 'input' of call 'layers\.0\.self_attn\.q_proj#0'"
sed '5p' a/$S > i/$S
bad i "i/$S:6: field 'name': '\[rotary_emb\]\[after\]cos' is a duplicate: line 5 already gave output 'cos' of call 'rotary_emb#0'"
finish
