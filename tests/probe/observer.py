"""No observer effect: trains the DSv4 block (dsv4_block.py) twice in one framework, without and with
the probe watching everything (inputs, outputs, output gradients, parameter gradients, payloads of every
tensor, parameters after every step, the loss), and compares every model output, loss, parameter
gradient and updated parameter bitwise. Then checks the trace against the same bytes: each traced
parameter gradient and parameter has the xxh3t64 digest of the bytes the unprobed run produced.

    observer.py --framework torch|paddle --dtype fp32|bf16 --out DIR [--steps N]

A self-check first proves the comparison can fail (one flipped bit is reported). Exit 0 or 1.
"""
import argparse
import base64
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


def measure_msprobe(a, w, plain):
    """The same comparison with msprobe's PrecisionDebugger (md5 statistics) in place of the probe: a
    measurement for README, printed, exit 0 whatever it finds."""
    from msprobe.pytorch import PrecisionDebugger
    cfg = os.path.join(a.out, "msprobe.json")
    os.makedirs(a.out, exist_ok=True)
    json.dump({"task": "statistics", "dump_path": os.path.join(a.out, "dump"), "rank": [], "step": [],
               "level": a.msprobe, "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                  "summary_mode": "md5"}}, open(cfg, "w"))
    dbg = PrecisionDebugger(config_path=cfg)

    def around(m):
        def stop():
            dbg.stop()
            dbg.step()
        return (lambda: dbg.start(m)), stop
    other = dsv4_block.train(a.framework, w, a.steps, dtype=a.dtype, around=around)
    diffs = compare(plain, other)
    print("msprobe %s md5, %s %s: %d tensors compared over %d steps; %d differ"
          % (a.msprobe, a.framework, a.dtype, len(plain), a.steps, len(diffs)))
    import numpy as np
    width, ut = (32, np.uint32) if a.dtype == "fp32" else (16, np.uint16)
    for (s, n, x), (_, _, y) in zip(plain, other):
        if x != y:
            bx, by = np.frombuffer(x, ut).astype(np.int64), np.frombuffer(y, ut).astype(np.int64)
            sign = 1 << (width - 1)
            kx = np.where(bx & sign, -(bx & (sign - 1)), bx)
            ky = np.where(by & sign, -(by & (sign - 1)), by)
            d = np.abs(kx - ky)
            print("  %s at step %d: %d of %d elements differ, up to %d ulp of %s"
                  % (n, s, int((d != 0).sum()), d.size, int(d.max()), a.dtype))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", required=True)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--msprobe", help="measure msprobe (md5 statistics at this level, L0 or L1) instead")
    a = ap.parse_args()
    w = dsv4_block.make_weights(steps=a.steps)
    plain = dsv4_block.train(a.framework, w, a.steps, dtype=a.dtype)
    flipped = list(plain)
    s, n, b = flipped[0]
    flipped[0] = (s, n, bytes([b[0] ^ 1]) + b[1:])
    if compare(plain, flipped) != ["%s at step %d" % (n, s)]:
        print("FAIL: the comparison does not see a flipped bit")
        return 1
    if a.msprobe:
        return measure_msprobe(a, w, plain)
    probe = Probe(a.out, run="%s-%s" % (a.framework, a.dtype), payload=["*"])
    probed = dsv4_block.train(a.framework, w, a.steps, probe=probe, dtype=a.dtype)
    diffs = compare(plain, probed)
    print("%s %s: %d tensors compared over %d steps (model outputs, losses, parameter and input gradients, "
          "updated parameters); %d differ" % (a.framework, a.dtype, len(plain), a.steps, len(diffs)))
    for d in diffs[:10]:
        print("FAIL: differs with the probe: " + d)
    # the trace holds the unprobed run's bytes
    dg = Digester()
    want = {(s, n): dg.host_bytes(b) for s, n, b in plain if n not in ("model.out", "loss", "input.grad")}
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
    # dedup=True: the same run and records (a tensor seen twice in a step digested once), and every
    # record's digest is that of its own payload (the bytes the framework held at that record)
    probe2 = Probe(a.out + "-dedup", run="%s-%s" % (a.framework, a.dtype), payload=["*"], dedup=True)
    deduped = dsv4_block.train(a.framework, w, a.steps, probe=probe2, dtype=a.dtype)
    d2 = compare(plain, deduped)
    for d in d2[:10]:
        print("FAIL: differs with the probe (dedup=True): " + d)
    recs = [open(p_.path).read().splitlines()[1:] for p_ in (probe, probe2)]
    if recs[0] != recs[1]:
        print("FAIL: dedup=True changes the trace: %d vs %d records, first differing %s"
              % (len(recs[0]), len(recs[1]), next(((x, y) for x, y in zip(*recs) if x != y), None)))
        d2.append("trace")
    bad = 0
    for line in recs[1]:
        r = json.loads(line)
        if "payload" in r and r["digest"] != dg.host_bytes(base64.b64decode(r["payload"])):
            bad += 1
            if bad <= 3:
                print("FAIL: dedup=True: %s at step %d has digest %s, its payload another" % (r["name"], r["step"], r["digest"]))
    print("dedup=True: the same %d records, %d of them digested once for two, each digest its payload's (%d not)"
          % (len(recs[1]), probe2.dedup_hits, bad))
    if probe2.dedup_hits == 0:
        print("FAIL: dedup=True found no tensor recorded twice (the block's norm output is the router's and up's input)")
        bad += 1
    return 1 if diffs or d2 or bad else 0


if __name__ == "__main__":
    sys.exit(main())
