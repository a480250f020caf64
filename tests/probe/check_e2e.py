"""Checks `align report --first-diff --format json` on the two probe traces against an independent byte
comparison of the tensors the two runs kept (run_block.py --keep, no probe involved in the values).

    check_e2e.py REPORT.json KEEP_A.npz KEEP_B.npz

The independent first difference is the first (step, name), in the order the block computes them
(forward intermediates, model.out, loss, parameter gradients, updated parameters), whose raw bytes
differ between the two runs. It must be in a forward pass (where that order is the execution order the
traces record) and equal the report's first_diff; the report must flag it as the root-cause candidate
where its inputs are equal in both runs (here: its input is the previous kept tensor's output or the
step's input), and its element-level detail (from payloads) must give the same count of differing
elements, the same largest ULP distance and the same first differing element as the bytes do.
Exit 0 when all hold, 1 with one line per failed check.
"""
import json
import sys

import numpy as np

def load(path):
    z = np.load(path)
    keys = [str(k) for k in z["keys"]]
    return [(k, z["v%d" % i].tobytes()) for i, k in enumerate(keys)]


def ulp_key(bits, width):
    """Monotone integer image of IEEE bit patterns (sign-magnitude -> two's complement order)."""
    b = bits.astype(np.int64)
    sign = 1 << (width - 1)
    return np.where(b & sign, -(b & (sign - 1)), b)


def main():
    report, ka, kb = sys.argv[1], sys.argv[2], sys.argv[3]
    r = json.load(open(report))
    a, b = load(ka), load(kb)
    fails = []
    if [k for k, _ in a] != [k for k, _ in b]:
        print("FAIL: the two runs kept different tensors")
        return 1
    first = next(((k, x, y) for (k, x), (_, y) in zip(a, b) if x != y), None)
    if first is None:
        print("FAIL: the runs' kept bytes are all equal; the test needs a difference")
        return 1
    key, x, y = first
    step, name = key.split("/", 1)
    print("independent first difference: %s at step %s" % (name, step))
    fwd = ("norm.", "router.", "up.", "act.", "down.", "model.out")
    if not name.startswith(fwd):
        fails.append("the first byte difference (%s) is not in a forward pass; its order is not checkable" % key)
    fd = r.get("first_diff") or {}
    if (fd.get("name"), fd.get("step")) != (name, int(step)):
        fails.append("report first_diff is %s at step %s, bytes say %s at step %s"
                     % (fd.get("name"), fd.get("step"), name, step))
    # root cause: the kept tensor before it is its input; equal by construction of "first"
    rc = r.get("root_cause") or {}
    if (rc.get("name"), rc.get("step")) != (name, int(step)) or not rc.get("is_first_diff"):
        fails.append("root cause is %s at step %s (is_first_diff %s), expected %s at step %s"
                     % (rc.get("name"), rc.get("step"), rc.get("is_first_diff"), name, step))
    el = fd.get("elements") or {}
    width = {"fp32": 32, "bf16": 16, "fp16": 16}.get((fd.get("a") or {}).get("dtype"))
    if width is None:
        print("FAIL: the first difference has dtype %s; this check reads fp32, bf16, fp16"
              % (fd.get("a") or {}).get("dtype"))
        return 1
    ut = np.uint32 if width == 32 else np.uint16
    ba, bb = np.frombuffer(x, dtype=ut), np.frombuffer(y, dtype=ut)
    diff = np.nonzero(ba != bb)[0]
    ulp = np.abs(ulp_key(ba[diff], width) - ulp_key(bb[diff], width))
    want = {"source": "payload", "differ": int(diff.size), "total": int(ba.size), "max_ulp": int(ulp.max()),
            "first_flat": int(diff[0]), "first_a_bits": "0x%0*x" % (width // 4, int(ba[diff[0]])),
            "first_b_bits": "0x%0*x" % (width // 4, int(bb[diff[0]]))}
    for k, v in want.items():
        if el.get(k) != v:
            fails.append("elements.%s is %r, the bytes say %r" % (k, el.get(k), v))
    print("bytes: %d of %d elements differ, max %d ulp, first flat %d (%s vs %s)"
          % (want["differ"], want["total"], want["max_ulp"], want["first_flat"], want["first_a_bits"],
             want["first_b_bits"]))
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
