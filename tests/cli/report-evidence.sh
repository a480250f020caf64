#!/usr/bin/env bash
# report-evidence: what the report does with the evidence a record carries beyond exact bits.
#   1. AccProber (XTuner) runs whose first_10 differ in one bf16 element: the first difference is that
#      tensor, naming the element index and its ULP in bf16, on the fast path and with --no-stepsum;
#      a differing tensor_sum alone is a difference too (ULP in fp32).
#   2. equal AccProber heads and sums: equal-as-printed "equal in the summaries shown", never bitwise.
#   3. two ATF runs with fp32 payloads differing in 3 of 24 elements: the element-level detail (count,
#      max/median ULP, multi-dimensional first index, values, NaN/Inf) in text, Markdown, JSON and HTML;
#      a tensor known by digests only says that element-level detail needs payloads.
#   4. fp32 against fp64 exact values that differ: compared at fp32 (the coarser dtype), never "ulp of fp64".
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# --- 1. AccProber first_10 differ --------------------------------------------------------------------------
F=Step_1_MicroIter_0_RANK_0_forward_records.jsonl
mkdir -p xa xb xc xd
cat > xa/$F <<'EOF'
{"name": "[embed_tokens][before]input_ids", "tensor_sum": 1864736512.0, "shape": [1, 4096], "dtype": "torch.int64", "step": 1, "micro_batch_iter": 0, "first_10": [151644.0, 8948.0, 198.0, 2610.0, 525.0, 1207.0, 16948.0, 11.0, 3465.0, 553.0]}
{"name": "[layers.0.self_attn.q_proj][after]output", "tensor_sum": -3127.84521484375, "shape": [1, 4, 4096], "dtype": "torch.bfloat16", "step": 1, "micro_batch_iter": 0, "first_10": [0.0213623046875, -0.1103515625, 0.046875, 0.0, -0.005859375, 0.2734375, -0.0712890625, 0.01171875, 0.130859375, -0.193359375]}
{"name": "[lm_head][after]loss", "tensor_sum": 2.4172463417053223, "shape": [], "dtype": "torch.float32", "step": 1, "micro_batch_iter": 0, "first_10": [2.4172463417053223]}
EOF
# element 5: 0.2734375 (bf16 0x3e8c) -> 0.27734375 (0x3e8e), 2 bf16 ulps; the sum unchanged
sed 's/0.2734375, -0.0712890625/0.27734375, -0.0712890625/' xa/$F > xb/$F
# the sum one fp32 ulp (2^-12 at 3127) apart, the heads equal
sed 's/-3127.84521484375/-3127.845458984375/' xa/$F > xc/$F
sed 's/}$/} /' xa/$F > xd/$F # the same records, another file (ingest keeps one copy of a file per content)
grep -q 0.27734375 xb/$F && grep -q 3127.845458984375 xc/$F || fail "fixture edits did not apply"
for r in a b c d; do run_align 0 ingest --db x$r.db --as a --quiet xa/$F; run_align 0 ingest --db x$r.db --as $r --quiet x$r/$F; done
for opt in "" --no-stepsum; do
	run_align 1 report --db xb.db $opt --format json --out xb.json
	expect_eq "first_10 differ $opt" "$(pyj xb.json '[d["first_diff"][k] for k in ("name", "verdict", "ulp", "ulp_dtype")]')" \
		"['[layers.0.self_attn.q_proj][after]output', 'differ', 2, 'bf16']"
	expect_eq "reason names the element $opt" "$(pyj xb.json '"first element 5 (flat index): 0.2734375 vs 0.27734375, 2 ulp of bf16" in d["first_diff"]["reason"]')" "True"
	expect_eq "head detail $opt" "$(pyj xb.json '[d["first_diff"]["elements"][k] for k in ("source", "compared", "total", "differ", "max_ulp", "first_index", "first_a", "first_b", "first_b_bits")]')" \
		"['head', 10, 16384, 1, 2, [0, 0, 5], '0.2734375', '0.27734375', '0x3e8e']"
done
run_align 1 report --db xb.db
expect_out "^first difference: \[layers.0.self_attn.q_proj\]\[after\]output at step 1, micro 0, rank 0: differ: summaries differ: 1 of the first 10 elements differ, first element 5"
expect_out "^  elements \(the first 10 of 16384 only, from the printed heads\): 1 of 10 differ \(bitwise\); ulp \(bf16\) max 2, median 2; first at \[0, 0, 5\]"
run_align 1 report --db xc.db --format json --out xc.json
expect_eq "sum differs" "$(pyj xc.json '[d["first_diff"][k] for k in ("name", "verdict", "ulp", "ulp_dtype")]')" \
	"['[layers.0.self_attn.q_proj][after]output', 'differ', 1, 'fp32']"
expect_eq "sum reason" "$(pyj xc.json '"sum: -3127.84521484375 vs -3127.845458984375, 1 ulp of fp32" in d["first_diff"]["reason"]')" "True"

# --- 2. equal heads and sums: equal in the summaries shown -------------------------------------------------
for opt in "" --no-stepsum; do
	run_align 0 report --db xd.db $opt --format json --out xd.json
	expect_eq "equal summaries $opt" "$(pyj xd.json '[d["totals"][k] for k in ("bitwise_equal", "equal_as_printed", "differ")]')" "[1, 2, 0]"
done
run_align 0 report --db xd.db --no-stepsum
expect_out "first unproven: \[embed_tokens\]\[before\]input_ids at step 1, micro 0, rank 0: equal-as-printed: equal in the summaries shown \(first 10 elements, sum\); not bitwise"

# --- 3. ATF payloads differing in a few elements -----------------------------------------------------------
cat > gen.py <<'EOF'
import base64, json, struct, sys
run = sys.argv[1]
bits = [struct.unpack('<I', struct.pack('<f', 0.25 * i - 2))[0] for i in range(24)]
bits[2] = 0x7fc00000          # a NaN both runs share
if run == 'b':
    bits[5] += 1; bits[17] += 4; bits[23] += 9; bits[20] = 0x7f800000  # 1, 4, 9 ulps; 3.0 -> Inf: 0x7f800000 - 0x40400000 ulps
raw = b''.join(struct.pack('<I', b) for b in bits)
print(json.dumps({"align_trace": 1, "run": run, "framework": "align", "rank": 0}))
print(json.dumps({"step": 1, "name": "layers.0.out", "dtype": "fp32", "shape": [2, 3, 4], "payload": base64.b64encode(raw).decode()}))
print(json.dumps({"step": 1, "name": "layers.1.out", "dtype": "bf16", "shape": [4], "digest": "000000000000000" + ("a" if run == "a" else "b")}))
# 4. fp32 0.1f against an fp64 3 fp32-ulps (and a little) above it
print(json.dumps({"step": 1, "name": "loss", "dtype": "fp32", "bits": "0x3dcccccd"} if run == "a" else
                 {"step": 1, "name": "loss", "dtype": "fp64", "value": float.fromhex("0x1.99999a0000000p-4") + 3 * 2**-27 + 2**-40}))
EOF
python3 gen.py a > a.atf && python3 gen.py b > b.atf || fail "generating the traces"
run_align 0 ingest --db p.db --quiet a.atf b.atf
run_align 1 report --db p.db --format json --out p.json
expect_eq "payload detail" "$(pyj p.json '[d["first_diff"]["elements"][k] for k in ("source", "dtype", "shape", "compared", "total", "differ", "max_ulp", "median_ulp", "first_index", "first_flat", "first_a", "first_b", "first_a_bits", "first_b_bits", "nan_a", "nan_b", "inf_a", "inf_b")]')" \
	"['payload', 'fp32', [2, 3, 4], 24, 24, 4, 1061158912, 4, [0, 1, 1], 5, '-0.75', '-0.75000006', '0xbf400000', '0xbf400001', 1, 1, 0, 1]"
expect_eq "listed differences carry it too" "$(pyj p.json '[(x["name"], x["elements"] and x["elements"]["source"]) for x in d["diffs"]]')" \
	"[('layers.0.out', 'payload'), ('layers.1.out', 'none'), ('loss', None)]"
expect_eq "digests only" "$(pyj p.json '[x["elements"]["note"] for x in d["diffs"] if x["name"] == "layers.1.out"]')" \
	"['digests differ; no payload: element-level detail needs payloads (ATF payload)']"
line='elements: 4 of 24 differ \(bitwise\); ulp \(fp32\) max 1061158912, median 4; first at \[0, 1, 1\] \(flat 5\): -0.75 \(0xbf400000\) vs -0.75000006 \(0xbf400001\); NaN 1 vs 1; Inf 0 vs 1'
run_align 1 report --db p.db
expect_out "^  $line$"
expect_out "^    elements: digests differ; no payload: element-level detail needs payloads \(ATF payload\)$"
run_align 1 report --db p.db --format md
expect_out "^## Element-level detail$"
expect_out "^- \*\*first difference\*\* \`layers.0.out\` at step 1, micro 0, rank 0: $line$"
run_align 1 report --db p.db --format html --out p.html
grep -Eq "<p class=\"note elements\">$line</p>" p.html || fail "html lacks the element-level detail"
grep -Eq "<li><code>layers.1.out</code> at step 1, micro 0, rank 0: elements: digests differ" p.html || fail "html lacks the digests-only note"

# --- 4. fp32 vs fp64 exact values that differ: the coarser precision, no ulp of fp64 -----------------------
expect_eq "loss at fp32" "$(pyj p.json '[(x["verdict"], x["ulp"], x["ulp_dtype"]) for x in d["diffs"] if x["name"] == "loss"]')" "[('differ', 3, 'fp32')]"
run_align 1 report --db p.db --metric loss
expect_out "differ at fp32 precision \(fp32 vs fp64, compared at the coarser dtype\): b's fp64 value 0.1000000238427674 is outside \[0.099999997764825821, 0.10000000521540642\], the reals that round to a's fp32 value 0.100000001; it rounds to 0.100000024, 3 ulp of fp32 away"
if grep -q "ulp of fp64" out.txt; then fail "an fp32/fp64 pair measured in ulp of fp64: $(grep 'ulp of fp64' out.txt)"; fi

finish
