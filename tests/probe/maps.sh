#!/usr/bin/env bash
# maps.sh: the built-in Megatron-Core -> PaddleFleet name map (harness/probe/align_probe/rules/) is what
# `python -m align_probe.maps --layers 61` generates, and with `align report --map` it makes a trace in
# Megatron names (decoder.layers.3.mlp.experts.out, ...) meet one in PaddleFleet names
# (layers.3.mlp.experts.out, ...): all bitwise-equal, nothing only in one run; without it every name is
# only in one run. Plain python3 (the map needs no framework).
. "$SRCROOT/tests/cli/lib.sh"
rules=$SRCROOT/harness/probe/align_probe/rules/megatron-paddlefleet-dsv4.map
PYTHONPATH=$SRCROOT/harness/probe python3 -m align_probe.maps --layers 61 >gen.map || fail "the generator failed"
cmp -s gen.map "$rules" && ok "the built-in map is the generator's output" ||
	fail "harness/probe/align_probe/rules/megatron-paddlefleet-dsv4.map differs from python -m align_probe.maps --layers 61"
PYTHONPATH=$SRCROOT/harness/probe python3 - <<'PYEOF' || fail "writing the traces failed"
import json
from align_probe.maps import LAYER_PAIRS
for run, prefix, idx in (("meg", "decoder.layers.{L}", 0), ("pdl", "layers.{L}", 1)):
    with open(run + ".atf", "w") as f:
        f.write(json.dumps({"align_trace": 1, "run": run, "framework": run}) + "\n")
        seq = 0
        for L in (0, 3, 60):
            for pair in LAYER_PAIRS:
                for sfx, io in ((".in", "in"), (".out", "out")):
                    name = prefix.format(L=L) + "." + pair[idx] + sfx
                    call = prefix.format(L=L) + "." + pair[idx] + "#0"
                    d = "%016x" % (hash((L, pair[0], sfx)) & (2**64 - 1))
                    f.write(json.dumps({"step": 1, "seq": seq, "name": name, "call": call, "io": io,
                                        "dtype": "bf16", "shape": [4, 8], "digest": d}) + "\n")
                    seq += 1
PYEOF
run_align 0 ingest --db m.db meg.atf pdl.atf
run_align 1 report --db m.db --runs meg,pdl --format json --out nomap.json
python3 -c "import json,sys; r=json.load(open('nomap.json'))['totals']; sys.exit(0 if r['only_in_a'] == 84 and r['bitwise_equal'] == 0 else 1)" &&
	ok "without --map: 84 records only in each run" || fail "without --map: $(head -c 400 nomap.json)"
start=$(date +%s%N)
run_align 0 report --db m.db --runs meg,pdl --map "$rules" --format json --out map.json
ms=$((($(date +%s%N) - start) / 1000000))
python3 -c "import json,sys; r=json.load(open('map.json'))['totals']; sys.exit(0 if r['bitwise_equal'] == 84 and r['only_in_a'] == 0 and r['only_in_b'] == 0 else 1)" &&
	ok "with --map (5124 rules, ${ms} ms): 84 of 84 bitwise-equal, none only in one run" || fail "with --map: $(head -c 600 map.json)"
[ "$FAILS" = 0 ]
