#!/usr/bin/env bash
# explain-runs: `align explain --op swiglu --runs A,B` reads the op's inputs and outputs from the ingested
# runs' payloads (ATF `payload`), goes to the first invocation where the outputs differ (step 2 here:
# step 1 is the same in both runs), explains each side and names the switches whose values differ, in the words of
# `align modes --diff megatron paddle` words them (swiglu: ALIGN_SWIGLU_SCALE, fp32 vs bf16). The database
# is not changed; bad requests exit 2 with their message.
. "$SRCROOT/tests/cli/lib.sh"
S=T=8,F=64
"$ALIGN" run swiglu --shape $S --seed 3 --save-inputs in1.st --outputs ref1.st >/dev/null || fail "step 1"
"$ALIGN" run swiglu --shape $S --seed 4 --save-inputs in2.st --profile megatron --outputs meg2.st >/dev/null &&
	"$ALIGN" run swiglu --shape $S --inputs in2.st --profile paddle --outputs pad2.st >/dev/null || fail "step 2"
# atf.py RUN OUT STEP:INPUTS:OUTPUTS...: an ATF trace whose records carry the tensors as payloads
cat > atf.py <<'PY'
import base64, json, struct, sys
run, out, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
dt = {"F32": "fp32", "BF16": "bf16", "I32": "int32"}
lines = [json.dumps({"align_trace": 1, "run": run, "framework": "align", "rank": 0, "world_size": 1})]
seq = 0
for s in steps:
    step, *files = s.split(":")
    for f, phase in zip(files, ("input", "fwd")):
        b = open(f, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
        for name, v in h.items():
            if name == "__metadata__":
                continue
            raw = b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            lines.append(json.dumps({"rank": 0, "step": int(step), "micro": 0, "seq": seq, "name": "swiglu." + name,
                                     "phase": phase, "dtype": dt[v["dtype"]], "shape": v["shape"],
                                     "payload": base64.b64encode(raw).decode()}))
            seq += 1
open(out, "w").write("\n".join(lines) + "\n")
PY
python3 atf.py A a.atf 1:in1.st:ref1.st 2:in2.st:meg2.st && python3 atf.py B b.atf 1:in1.st:ref1.st 2:in2.st:pad2.st ||
	fail "traces"
"$ALIGN" ingest --db r.db a.atf b.atf >/dev/null || fail "ingest"
before=$(sqlite3 r.db .dump | sha256sum)
run_align 0 explain --db r.db --op swiglu --runs A,B &&
	expect_out "^explain swiglu \(T=8,F=64\), inputs run 'A' rank 0 step 2 micro 0$" &&
	expect_out "^== run B ==$" && expect_out "^closest profile: paddle" &&
	expect_out "^ALIGN_SWIGLU_SCALE +fp32 +bf16 +dtype of the routing probability" &&
	expect_out "^1 switch differs between 'A' and 'B'$" && ok "the divergence explained: ALIGN_SWIGLU_SCALE"
grep -q "^closest profiles: megatron, paddle-accuracy " out.txt || fail "side A is not closest to megatron"
"$ALIGN" modes --diff megatron paddle | grep -q "^ALIGN_SWIGLU_SCALE " || fail "modes --diff words it otherwise"
run_align 0 explain --db r.db --op swiglu --runs A,B --format json
python3 - <<'PY' || fail "--runs JSON"
import json
j = json.load(open("out.txt"))
assert j["differ"] == [{"env": "ALIGN_SWIGLU_SCALE", "A": "fp32", "B": "bf16"}], j["differ"]
assert j["a"]["found"] and j["b"]["found"] and [p["name"] for p in j["a"]["closest_profiles"]] == ["megatron", "paddle-accuracy"]
PY
expect_eq "database unchanged" "$(sqlite3 r.db .dump | sha256sum)" "$before"
run_align 2 explain --db r.db --op swiglu --runs A,C && expect_err "no run 'C' \(runs: 'A', 'B'\)" && ok "unknown run"
run_align 2 explain --db r.db --op swiglu --runs A && expect_err "expected two run names A,B" && ok "one run"
run_align 2 explain --db r.db --op rmsnorm --runs A,B && expect_err "run 'A' has no record 'rmsnorm.<tensor>'" &&
	ok "no records of the op"
run_align 2 explain --db r.db --op swiglu --runs A,B --inputs in1.st && expect_err "drop --inputs" && ok "both sources"
expect_eq "database unchanged after errors" "$(sqlite3 r.db .dump | sha256sum)" "$before"
# a side that no assignment reproduces (run C: B with one element of step 2's output changed): it is
# said to be unexplained and no switch is compared (its closest assignment is no explanation)
python3 - <<'PY' || fail "flipped payload"
import json, struct
b = bytearray(open("pad2.st", "rb").read()); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
o = 8 + n + h["a"]["data_offsets"][0] + 2 * 77
b[o] ^= 1
open("bad2.st", "wb").write(b)
PY
python3 atf.py C c.atf 1:in1.st:ref1.st 2:in2.st:bad2.st && "$ALIGN" ingest --db r.db c.atf >/dev/null || fail "run C"
run_align 1 explain --db r.db --op swiglu --runs A,C &&
	expect_out "^not explained: 'C': no assignment reproduces its output; its closest assignments are not" &&
	expect_out "^no switches compared: one side is not explained$" && ok "an unexplained side: no switch compared"
grep -q "^ALIGN_SWIGLU_SCALE " out.txt && fail "a switch taken from the unexplained side's closest assignment"
run_align 1 explain --db r.db --op swiglu --runs A,C --format json
python3 - <<'PY' || fail "--runs JSON, unexplained side"
import json
j = json.load(open("out.txt"))
assert j["differ"] == [] and j["not_explained"] == ["C"] and not j["b"]["found"], (j["differ"], j["not_explained"])
PY
finish
