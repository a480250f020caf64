#!/usr/bin/env bash
# run-explain: `align run allreduce|reduce_scatter --inputs X --explain Y` names the summation orders that
# reproduce Y bitwise (harness/run/run-explain.c): a result made by the ring model over 4 channels is
# reproduced by "ring, Simple, 4 channels" and not by fixed or the one-node tree; a fixed-order result by
# fixed; a one-node tree result by the tree; a doctored result by none (exit 1, the closest listed); bad
# requests exit 2 with their message.
. "$SRCROOT/tests/cli/lib.sh"
# x[4,D] in fp32 with mixed signs and magnitudes, so the orders round differently
python3 - <<'PY'
import json, random, struct
random.seed(11)
N, D = 4, 20000
vals = [random.gauss(0, 1) * 10 ** random.randint(-3, 3) for _ in range(N * D)]
data = struct.pack("<%df" % len(vals), *vals)
h = json.dumps({"x": {"dtype": "F32", "shape": [N, D], "data_offsets": [0, len(data)]}}).encode()
h += b" " * (-len(h) % 8)
open("x.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
shape=N=4,D=20000
NCCL_MAX_NCHANNELS=4 "$ALIGN" run allreduce --shape $shape --inputs x.safetensors --mode ALIGN_COLL_IMPL=nccl_model_ring \
	--outputs ring4.safetensors >/dev/null || fail "ring result"
"$ALIGN" run allreduce --shape $shape --inputs x.safetensors --outputs fixed.safetensors >/dev/null || fail "fixed result"
"$ALIGN" run allreduce --shape $shape --inputs x.safetensors --mode ALIGN_COLL_IMPL=nccl_model_tree \
	--outputs tree.safetensors >/dev/null || fail "tree result"

run_align 0 run allreduce --shape $shape --inputs x.safetensors --explain ring4.safetensors &&
	expect_out "^allreduce: 4 ranks x 20000, fp32; observed ring4.safetensors" &&
	expect_out "reproduces it bitwise: ring, Simple, 4 channels$" && ok "ring over 4 channels found"
grep -q "fixed" out.txt && fail "fixed reproduces the ring result: the inputs do not separate the orders"
grep -q "tree, 1 node" out.txt && fail "the one-node tree reproduces the ring result"
run_align 0 run allreduce --shape $shape --inputs x.safetensors --explain fixed.safetensors &&
	expect_out "reproduces it bitwise: fixed" && ok "fixed found"
grep -q "ring, Simple, 4 channels" out.txt && fail "ring 4 reproduces the fixed result"
run_align 0 run allreduce --shape $shape --inputs x.safetensors --explain tree.safetensors &&
	expect_out "reproduces it bitwise: tree, 1 node, Simple, 1 channel$" && ok "tree found"
# one element changed: nothing reproduces it; the closest is the ring with one element differing
python3 - <<'PY'
b = bytearray(open("ring4.safetensors", "rb").read())
b[-1] ^= 0x40
open("bad.safetensors", "wb").write(b)
PY
run_align 1 run allreduce --shape $shape --inputs x.safetensors --explain bad.safetensors &&
	expect_out "no candidate reproduces it; closest:" && expect_out "ring, Simple, 4 channels: 1 of 80000 elements differ" &&
	ok "doctored result: none, closest named"
run_align 2 run all_gather --shape $shape --inputs x.safetensors --explain fixed.safetensors &&
	expect_err "^error: --explain: 'all_gather' has no summation order" && ok "all_gather refused"
run_align 2 run allreduce --shape $shape --explain fixed.safetensors && expect_err "needs --inputs" && ok "inputs needed"
run_align 2 run allreduce --shape N=4,D=10 --inputs x.safetensors --explain fixed.safetensors &&
	expect_err "x.safetensors: tensor 'x' has the wrong shape" && ok "shape mismatch"
run_align 2 run allreduce --shape $shape --inputs x.safetensors --explain x.safetensors &&
	expect_err "x.safetensors: no tensor 'y'" && ok "no y"
run_align 2 run allreduce --shape $shape --inputs x.safetensors --explain fixed.safetensors --trace t.atf &&
	expect_err "runs the C twin once" && ok "other options refused"
[ "$FAILS" = 0 ]
