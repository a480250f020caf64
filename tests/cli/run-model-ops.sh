#!/usr/bin/env bash
# run-model-ops: the embedding, lm_head and xent ops from the command line: inputs a framework wrote
# (safetensors) give the contract's results (ignored labels left out of the mean, the mean over the valid
# tokens); bad ids and labels exit 2 naming the token and the value, with no outputs written; xent's torch
# order refuses a vocabulary above PyTorch's persistent-kernel limit (exit 2, naming the switch).
. "$SRCROOT/tests/cli/lib.sh"

python3 - <<'PY'
import json, struct
def st(path, tensors):
    hdr, blob = {}, b""
    for name, (dt, shape, data) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    j = json.dumps(hdr).encode(); j += b" " * ((8 - len(j) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + blob)
f32 = lambda xs: b"".join(struct.pack("<f", x) for x in xs)
i32 = lambda xs: b"".join(struct.pack("<i", x) for x in xs)
# embedding: V=4, D=2; table values exact in bf16
table = f32([0.5, -1.0, 2.0, 3.0, -0.25, 8.0, 1.5, -2.5])
st("emb.st", {"ids": ("I32", [3], i32([2, 0, 3])), "table": ("F32", [4, 2], table)})
st("emb-bad.st", {"ids": ("I32", [3], i32([2, 9, 3])), "table": ("F32", [4, 2], table)})
# xent: T=4 tokens of one sequence, V=3; labels 1, -1 (ignored), 2, 0
logits = f32([0.0, 1.0, 2.0,  5.0, 5.0, 5.0,  -1.0, 0.5, 0.25,  3.0, 0.0, 0.0])
st("xent.st", {"logits": ("F32", [4, 3], logits), "labels": ("I32", [4], i32([1, -1, 2, 0]))})
st("xent-bad.st", {"logits": ("F32", [4, 3], logits), "labels": ("I32", [4], i32([1, -1, 3, 0]))})
PY
[ $? -eq 0 ] || fail "writing the inputs"

# embedding: y = the bf16 rows of the ids, in order
run_align 0 run embedding --shape T=3,V=4,D=2 --inputs emb.st --outputs emb-out.st
python3 - <<'PY' || fail "embedding rows"
import json, struct
raw = open("emb-out.st", "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
a, b = h["y"]["data_offsets"]; d = raw[8 + n + a:8 + n + b]
y = [struct.unpack("<f", struct.pack("<I", struct.unpack("<H", d[i:i + 2])[0] << 16))[0] for i in range(0, len(d), 2)]
assert h["y"]["dtype"] == "BF16" and h["y"]["shape"] == [3, 2], h
assert y == [-0.25, 8.0, 0.5, -1.0, 1.5, -2.5], y
PY
run_align 2 run embedding --shape T=3,V=4,D=2 --inputs emb-bad.st --outputs bad1.st &&
	expect_err "embedding: ids\[1\] = 9 is outside \[0, 4\)"
[ ! -e bad1.st ] || fail "a refused embedding wrote outputs"

# xent: the ignored token has loss 0 and stays out of the mean (3 valid tokens)
run_align 0 run xent --shape T=4,V=3,S=4 --inputs xent.st --outputs xent-out.st
python3 - <<'PY' || fail "xent values"
import json, math, struct
raw = open("xent-out.st", "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
def get(k):
    a, b = h[k]["data_offsets"]; d = raw[8 + n + a:8 + n + b]
    return [struct.unpack("<f", d[i:i + 4])[0] for i in range(0, len(d), 4)]
loss, mean = get("loss"), get("mean")
rows = [[0.0, 1.0, 2.0], [5.0, 5.0, 5.0], [-1.0, 0.5, 0.25], [3.0, 0.0, 0.0]]
labels = [1, -1, 2, 0]
for r, y, l in zip(rows, labels, loss):
    want = 0.0 if y < 0 else math.log(sum(math.exp(x - max(r)) for x in r)) - (r[y] - max(r))
    assert abs(l - want) <= 1e-6 * (1 + abs(want)), (l, want)
assert loss[1] == 0.0
valid = [l for l, y in zip(loss, labels) if y >= 0]
assert abs(mean[0] - sum(valid) / 3) <= 1e-6 * mean[0], (mean, valid)
PY
run_align 2 run xent --shape T=4,V=3,S=4 --inputs xent-bad.st --outputs bad2.st &&
	expect_err "xent: labels\[2\] = 3 is outside \[0, 3\)"
[ ! -e bad2.st ] || fail "a refused xent wrote outputs"
run_align 2 run xent --shape T=4,V=3,S=3 --inputs xent.st && expect_err "not whole sequences of S = 3"

# XENT_SUM=torch models PyTorch's persistent log_softmax only up to V = 1024
run_align 0 run xent --shape T=4,V=1024,S=4 --mode ALIGN_XENT_SUM=torch
run_align 2 run xent --shape T=4,V=1025,S=4 --mode ALIGN_XENT_SUM=torch && expect_err "ALIGN_XENT_SUM=torch"

# lm_head: the logits dtype follows LMHEAD_LOGITS (fp32 under deepseek-ref, bf16 under megatron)
run_align 0 run lm_head --profile deepseek-ref --trace a.atf && grep -q '"name":"lm_head.logits".*"dtype":"fp32"' a.atf ||
	fail "deepseek-ref logits not fp32"
run_align 0 run lm_head --profile megatron --trace b.atf && grep -q '"name":"lm_head.logits".*"dtype":"bf16"' b.atf ||
	fail "megatron logits not bf16"
# seeded ids follow --shape: labels / ids / kv and expert indices are drawn from the shape's V, S or E
# (they were drawn from the default V = 512 whatever --shape said, so V=64 was refused as out of range)
for spec in "xent --shape T=8,V=64,S=4" "embedding --shape T=8,V=16,D=32" "router --shape T=4,D=128,E=16,K=2,V=8" \
	"sparse_attn --shape T=4,H=2,S=8"; do # sparse_attn last: its idx is checked below
	run_align 0 run $spec --steps 2 --save-inputs ids.st || fail "align run $spec refused its own seeded inputs"
done
python3 - ids.st <<'PY' || fail "sparse_attn idx outside [-1, 8)"
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
off = h["step2.idx"]["data_offsets"]; data = b[8 + n + off[0]:8 + n + off[1]]
ids = struct.unpack("<%di" % (len(data) // 4), data)
sys.exit(0 if ids and all(-1 <= i < 8 for i in ids) and max(ids) >= 0 else 1)
PY
run_align 2 run moe_combine --shape E=4 --steps 1 && expect_err "cannot fill input 'idx' of moe_combine for these dims"
finish
