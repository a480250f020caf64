"""No observer effect: trains the DSv4 block (dsv4_block.py) twice in one framework, without and with
the probe watching everything (inputs, outputs, output gradients, parameter gradients, payloads of every
tensor, parameters after every step, the loss), and compares every model output, loss, parameter
gradient and updated parameter bitwise. Then checks the trace against the same bytes: each traced
parameter gradient and parameter has the xxh3t64 digest of the bytes the unprobed run produced.

    observer.py --framework torch|paddle --dtype fp32|bf16 --out DIR [--steps N]

A self-check first proves the comparison can fail (one flipped bit is reported). Exit 0 or 1.
"""
import argparse
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import dsv4_block  # noqa: E402
from align_probe import Probe, Digester  # noqa: E402


def compare(a, b):
    """[(step, name)] of entries whose bytes differ (and a message for a structural mismatch)."""
    if [(s, n) for s, n, _ in a] != [(s, n) for s, n, _ in b]:
        return ["the runs kept different tensors"]
    return ["%s at step %d" % (n, s) for (s, n, x), (_, _, y) in zip(a, b) if x != y]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", required=True)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    w = dsv4_block.make_weights(steps=a.steps)
    plain = dsv4_block.train(a.framework, w, a.steps, dtype=a.dtype)
    flipped = list(plain)
    s, n, b = flipped[0]
    flipped[0] = (s, n, bytes([b[0] ^ 1]) + b[1:])
    if compare(plain, flipped) != ["%s at step %d" % (n, s)]:
        print("FAIL: the comparison does not see a flipped bit")
        return 1
    probe = Probe(a.out, run="%s-%s" % (a.framework, a.dtype), payload=["*"])
    probed = dsv4_block.train(a.framework, w, a.steps, probe=probe, dtype=a.dtype)
    diffs = compare(plain, probed)
    print("%s %s: %d tensors compared over %d steps (model outputs, losses, parameter gradients, updated "
          "parameters); %d differ" % (a.framework, a.dtype, len(plain), a.steps, len(diffs)))
    for d in diffs[:10]:
        print("FAIL: differs with the probe: " + d)
    # the trace holds the unprobed run's bytes
    dg = Digester()
    want = {(s, n): dg.host_bytes(b) for s, n, b in plain if n != "model.out" and n != "loss"}
    seen = 0
    with open(probe.path) as f:
        next(f)
        for line in f:
            r = json.loads(line)
            key = (r["step"], r["name"])
            if key in want and r.get("phase") in ("grad", "param"):
                seen += 1
                if r["digest"] != want[key]:
                    diffs.append(key)
                    print("FAIL: trace digest of %s at step %d is %s, the bytes give %s"
                          % (key[1], key[0], r["digest"], want[key]))
    if seen != len(want):
        print("FAIL: the trace has %d of the %d parameter and gradient records" % (seen, len(want)))
        return 1
    print("trace: %d parameter and gradient digests equal the unprobed run's bytes" % seen)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
