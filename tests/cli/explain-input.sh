#!/usr/bin/env bash
# explain-input: `align explain` on bad input exits 2 with one message naming the file and the tensor or
# option (a missing input tensor, a tensor that is not an output, a wrong dtype, a wrong shape, an output
# dtype the op never writes, bad options), and an output that no assignment reproduces (one element
# changed) exits 1 and names the closest assignment with exactly that one element differing by 1 ulp.
. "$SRCROOT/tests/cli/lib.sh"
"$ALIGN" run swiglu --profile paddle --shape T=8,F=64 --save-inputs in.st --outputs out.st >/dev/null ||
	fail "align run swiglu"
"$ALIGN" run rmsnorm --shape T=8,D=64 --save-inputs rin.st --outputs rout.st >/dev/null || fail "align run rmsnorm"
"$ALIGN" run matmul --shape T=4,D=64,F=8 --save-inputs min.st --outputs mout.st >/dev/null || fail "align run matmul"
# st.py SRC DST EDIT...: copy a safetensors file, EDIT = name:dtype (re-typed, bytes cut or padded),
# name:drop, name=new (renamed) or flip:name:index (one element's lowest bit flipped)
cat > st.py <<'PY'
import json, struct, sys
src, dst, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); data = b[8 + n:]
size = {"F32": 4, "BF16": 2, "F16": 2, "I32": 4}
ts = {k: (v["dtype"], v["shape"], bytearray(data[v["data_offsets"][0]:v["data_offsets"][1]]))
      for k, v in h.items() if k != "__metadata__"}
for e in edits:
    if e.startswith("flip:"):
        _, name, i = e.split(":"); d, s, raw = ts[name]; raw[int(i) * size[d]] ^= 1
    elif e.endswith(":drop"):
        del ts[e[:-5]]
    elif "=" in e:
        a, b2 = e.split("="); ts[b2] = ts.pop(a)
    else:
        name, d = e.split(":"); _, s, raw = ts[name]; cnt = len(raw) // size[_]
        ts[name] = (d, s, bytearray(cnt * size[d]))
out, hdr, off = b"", {}, 0
for k, (d, s, raw) in ts.items():
    hdr[k] = {"dtype": d, "shape": s, "data_offsets": [off, off + len(raw)]}; out += raw; off += len(raw)
hj = json.dumps(hdr).encode(); hj += b" " * (-len(hj) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hj)) + hj + out)
PY
EX=(explain --op swiglu --inputs in.st --output out.st)
run_align 0 "${EX[@]}" && expect_out "^closest profile: paddle" && ok "the planted profile explains its output"
python3 st.py in.st noG.st g:drop
run_align 2 explain --op swiglu --inputs noG.st --output out.st &&
	expect_err "^error: noG.st: no tensor 'g' \(op 'swiglu' takes g, u, p\)$" && ok "missing input tensor"
python3 st.py out.st renamed.st a=y
run_align 2 explain --op swiglu --inputs in.st --output renamed.st &&
	expect_err "^error: renamed.st: tensor 'y' is not an output of op 'swiglu' \(its outputs: a\)$" &&
	ok "a tensor that is not an output"
python3 st.py in.st pbf16.st p:BF16
run_align 2 explain --op swiglu --inputs pbf16.st --output out.st &&
	expect_err "^error: pbf16.st: tensor 'p' is bf16, op 'swiglu' takes fp32$" && ok "wrong input dtype"
run_align 2 "${EX[@]}" --shape T=4 &&
	expect_err "^error: in.st: tensor 'g' has shape \[8,64\], op 'swiglu' needs \[4,64\] \(T,F\)" && ok "wrong shape"
run_align 2 explain --op swiglu --inputs rin.st --output rout.st &&
	expect_err "^error: rin.st: no tensor 'g'" && ok "another op's files"
python3 st.py mout.st yf16.st y:F16
run_align 2 explain --op matmul --inputs min.st --output yf16.st &&
	expect_err "^error: yf16.st: tensor 'y' is fp16, which op 'matmul' never writes under the switches searched$" &&
	ok "an output dtype the op never writes"
run_align 2 explain --op nosuch --inputs in.st --output out.st && expect_err "unknown op 'nosuch'" && ok "unknown op"
run_align 2 explain --op swiglu --inputs in.st && expect_err "give --inputs and --output" && ok "no --output"
run_align 2 "${EX[@]}" --mode ALIGN_SWIGLU_ROUND=triple && expect_err "option '--mode'" && ok "bad --mode value"
run_align 2 "${EX[@]}" --mode ALIGN_RMSNORM_EPS=1e-5 && expect_err "op 'swiglu' does not read ALIGN_RMSNORM_EPS" &&
	ok "--mode of another op's switch"
run_align 2 "${EX[@]}" --format xml && expect_err "'xml' is not text, json or md" && ok "bad --format"
if "$ALIGN" run --help | grep -q "this build has no CUDA"; then
	run_align 2 "${EX[@]}" --device cuda && expect_err "this build has no CUDA" && ok "--device cuda said plainly"
fi
run_align 2 "${EX[@]}" --mode ALIGN_MATH_IMPL=cuda && expect_err "ALIGN_MATH_IMPL=cuda cannot run on the CPU" &&
	ok "a GPU-only value fixed on the CPU"
run_align 2 explain --op swiglu --inputs missing.st --output out.st && expect_err "missing.st" && ok "missing file"
ALIGN_SWIGLU_ROUNDING=x "$ALIGN" "${EX[@]}" >/dev/null 2>err.txt
expect_eq "unknown ALIGN_ variable exit" "$?" "2"
# one element changed: no assignment reproduces it; the closest differ in that element only, by 1 ulp
python3 st.py out.st flip.st flip:a:77
run_align 1 explain --op swiglu --inputs in.st --output flip.st &&
	expect_out "^no assignment reproduces the output$" &&
	expect_out "^  1\. .*ALIGN_SWIGLU_SCALE=bf16.*: 1 of 512 elements differ, max 1 ulp$" &&
	expect_out "^     a: 1 differ, max 1 ulp; first at \[1,13\]: replayed .*, observed " &&
	expect_out "^closest profile: paddle" && ok "no match: the closest, with one element"
run_align 1 explain --op swiglu --inputs in.st --output flip.st --format json
python3 - <<'PY' || fail "no-match JSON"
import json
j = json.load(open("out.txt"))
assert not j["found"] and j["matches"] == 0 and j["search"]["exhaustive"], j["search"]
c = j["closest"][0]
assert c["differ"] == 1 and c["max_ulp"] == 1 and c["elements"] == 512, c
assert c["outputs"][0]["first"] == [1, 13], c
assert c["assignment"]["ALIGN_SWIGLU_SCALE"] == "bf16", c
PY
# a space larger than --max-replays: only the profiles and their one-switch neighbours, and it says so
run_align 0 "${EX[@]}" --max-replays 10 && expect_out "NOT exhaustive: over --max-replays" &&
	expect_out "^reproduced bitwise by [0-9]+ assignments?, 1 description \(of those tried\):$" &&
	ok "not exhaustive, match among those tried"
run_align 1 explain --op swiglu --inputs in.st --output flip.st --max-replays 10 &&
	expect_out "^no assignment reproduces the output among those tried \(the search was not exhaustive: others may\)$" &&
	ok "not exhaustive: no claim that none reproduces"
run_align 0 "${EX[@]}" --format md && expect_out "^### explain swiglu \(T=8,F=64\), inputs in.st$" && ok "md"
# a parameter variant: the header names it with its number (router variant 3: softmax scores, scale 1)
"$ALIGN" run router --variant 3 --shape T=4,D=64,E=8,K=2,V=16 --seed 5 --save-inputs rin.st --outputs rout.st \
	>/dev/null || fail "router variant 3"
run_align 0 explain --op router --variant 3 --inputs rin.st --output rout.st &&
	expect_out "^explain router \(T=4,D=64,E=8,K=2,V=16, variant 3\), inputs rin.st$" &&
	expect_out "^  parameter variant 3$" && ok "variant named in the header"
finish
