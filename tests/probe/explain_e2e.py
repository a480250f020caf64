"""Checks `align explain` on the DSv4 block's ops recorded from a real PyTorch and Paddle CPU run
(op_records.py), one dtype at a time:

    explain_e2e.py ALIGN DTYPE DB DIR_TORCH DIR_PADDLE

1. the first divergent record: `align report --first-diff` on the two op-record traces; its prefix is
   the block op explained first (and must be the expected one);
2. every block op: `align explain --runs torch,paddle --record PREFIX` (json), and per side
   `--inputs/--output` on the same tensors from safetensors: both paths must give the same answer;
3. every description of an explained side is replayed by `align run OP --inputs ... --mode ...` (the
   first value of each switch it names, the 'any' switches at their first and at their last value):
   the output tensors must equal the observed bytes (compared tensor by tensor);
4. the verdicts (below, with their reasons) must be those measured on this CPU's class (cpu_class.py).
   They depend on the kernels the libraries dispatch by vendor and ISA: on a CPU of no measured class a
   verdict that differs is printed as a note, not a failure; checks 1-3 hold on any CPU.
Exit 0 when every check holds; prints 'ok: ...', 'note: ...' and 'FAIL: ...' lines.
"""
import json
import os
import struct
import subprocess
import sys

import cpu_class

ORDER = ["norm", "router", "up", "act", "down"]  # the block's execution order

# dtype -> first divergent op, and per op: (torch verdict, paddle verdict, switches that differ, reason).
# verdicts: "found" (an assignment reproduces the output), "none" (no assignment does, exit 1),
# "refused" (the recorded dtypes are not the align op's: exit 2).
EXPECT = {
    "bf16": {
        "first": "router",
        "norm": ("found", "found", {}, "both eager RMSNorms round x*rsqrt to bf16 before the bf16 weight "
                 "multiply (ALIGN_RMSNORM_CAST=before_weight)"),
        "router": ("none", "none", None, "torch's GEMM sums K in 4 lanes and its softmax uses a vectorised "
                   "exp and a reciprocal; Paddle's softmax sums in AVX pairs and uses a reciprocal: no mode "
                   "models them (explain_diag.py reproduces both)"),
        "up": ("found", "found", {}, "the bf16 output rounding hides the GEMMs' K order at K=64"),
        "act": ("none", "found", None, "Paddle computes silu(g)*u*p in fp32 and rounds once "
                "(ALIGN_SWIGLU_ROUND=single); torch's eager bf16 rounds silu(g), then *u, then *p: three "
                "roundings, which no mode models"),
        "down": ("found", "found", {}, "as up"),
    },
    "fp32": {
        "first": "norm",
        "norm": ("refused", "refused", None, "align's rmsnorm takes bf16 x; the fp32 block's is fp32"),
        "router": ("refused", "refused", None, "align's router takes bf16 x"),
        "up": None,  # per CPU class: FP32_GEMM
        "act": ("refused", "refused", None, "align's swiglu takes bf16 g and u"),
        "down": None,
    },
}
# the fp32 up and down GEMMs (K = 64), per CPU class (cpu_class.py): MKL's kernels differ by vendor
FP32_GEMM = {
    "amd-avx512": ("found", "found", {"ALIGN_MATMUL_FMA": ("on", "off")}, "torch's fp32 CPU GEMM accumulates K "
                   "in order with fused multiply-adds, Paddle's without"),
    "intel-amx": ("found", "found", {}, "both fp32 CPU GEMMs accumulate K in order with fused multiply-adds "
                  "(ALIGN_MATMUL_FMA=on)"),
}

fails = []


def fail(msg):
    fails.append(msg)
    print("FAIL: " + msg)


def st_tensors(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__"}


def align(*args):
    p = subprocess.run([ALIGN] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def replay(op, variant, dims, ins, outs, assignment, what):
    """align run OP on the recorded inputs under assignment; its outputs must be the observed bytes."""
    shape = ",".join("%s=%d" % kv for kv in dims.items())
    modes = []
    for env, v in assignment.items():
        modes += ["--mode", "%s=%s" % (env, v)]
    rc, _, err = align("run", op, "--variant", str(variant), "--shape", shape, "--inputs", ins, "--outputs",
                       "replay.st", *modes)
    if rc != 0:
        fail("%s: align run exited %d: %s" % (what, rc, err.strip()))
        return False
    got, want = st_tensors("replay.st"), st_tensors(outs)
    for name, (_, _, b) in want.items():
        if name not in got or got[name][2] != b:
            fail("%s: replayed %s differs from the observed bytes" % (what, name))
            return False
    return True


def check_side(prefix, op, variant, side, run_json, d):
    """per-side --inputs/--output gives the --runs answer; every description replays bitwise."""
    ins, outs = os.path.join(d, "s1-%s.in.safetensors" % prefix), os.path.join(d, "s1-%s.out.safetensors" % prefix)
    rc, out, err = align("explain", "--op", op, "--variant", str(variant), "--inputs", ins, "--output", outs,
                         "--format", "json")
    if rc not in (0, 1):
        fail("%s %s: explain --inputs exited %d: %s" % (prefix, side, rc, err.strip()))
        return
    j = json.loads(out)
    for k in ("found", "matches", "descriptions"):
        if j[k] != run_json[k]:
            fail("%s %s: --inputs/--output gives %s %s, --runs %s" % (prefix, side, k, j[k], run_json[k]))
    values = {s["env"]: s["values"] for s in j["search"]["switches"]}
    n = 0
    for desc in j["descriptions"]:
        for pick in (0, -1):
            a = {env: vals[0] for env, vals in desc["switches"].items()}
            a.update({env: values[env][pick] for env in desc["any"]})
            n += replay(op, variant, j["dims"], ins, outs, a, "%s %s %s" % (prefix, side, a))
    if j["found"]:
        print("ok: %s %s: %d description(s), %d replays by align run equal the observed bytes; --inputs/--output "
              "agrees with --runs" % (prefix, side, len(j["descriptions"]), n))


def verdict(side_json):
    return "found" if side_json["found"] else "none"


def main():
    global ALIGN
    ALIGN, dt, db, dirs = sys.argv[1], sys.argv[2], sys.argv[3], {"torch": sys.argv[4], "paddle": sys.argv[5]}
    cls = cpu_class.cpu_class()
    ops = json.load(open(os.path.join(dirs["torch"], "ops.json")))
    exp = dict(EXPECT[dt])
    for k in ("up", "down"):
        if exp[k] is None:  # an unmeasured class: the Intel figures, printed as notes
            exp[k] = FP32_GEMM.get(cls, FP32_GEMM["intel-amx"])
    exp["down"] = exp["down"][:3] + ("as up",)

    def verdict_fail(msg):
        if cls:
            fail(msg)
        else:
            print("note: %s (this CPU is of no measured class (cpu_class.py): the frameworks' CPU paths differ "
                  "from those measured)" % msg)

    rc, out, err = align("report", "--db", db, "--runs", "torch,paddle", "--first-diff", "--format", "json")
    first = (json.loads(out).get("first_diff") or {}).get("name", "") if out else ""
    prefix1 = first.split(".")[0]
    if prefix1 != exp["first"]:
        verdict_fail("%s: the first divergent record is %r, expected one of %s" % (dt, first, exp["first"]))
    else:
        print("ok: %s: first divergent record %s (op %s)" % (dt, first, ops[prefix1][0]))
    for prefix in [prefix1] + [p for p in ORDER if p != prefix1]:
        if prefix not in ops:
            continue
        op, variant = ops[prefix]
        want_t, want_p, want_diff, reason = exp[prefix]
        args = ["explain", "--db", db, "--op", op, "--variant", str(variant), "--runs", "torch,paddle",
                "--record", prefix]
        rc, out, err = align(*args, "--format", "json")
        if rc == 2:
            got = ("refused", "refused")
            if "takes bf16" not in err:
                fail("%s %s: exit 2 without the dtype message: %s" % (dt, prefix, err.strip()))
        elif rc in (0, 1):
            j = json.loads(out)
            got = (verdict(j["a"]), verdict(j["b"]))
            if (rc == 0) != (got == ("found", "found")):
                fail("%s %s: exit %d with verdicts %s" % (dt, prefix, rc, got))
            nx = [n for n, s in (("torch", j["a"]), ("paddle", j["b"])) if not s["found"]]
            if j["not_explained"] != nx:
                fail("%s %s: not_explained %s, expected %s" % (dt, prefix, j["not_explained"], nx))
            diff = {x["env"]: (x["torch"], x["paddle"]) for x in j["differ"]}
            if want_diff is not None and diff != want_diff:
                verdict_fail("%s %s: switches that differ %s, expected %s" % (dt, prefix, diff, want_diff))
            for side, key in (("torch", "a"), ("paddle", "b")):
                check_side(prefix, op, variant, side, j[key], dirs[side])
            if dt == "bf16" and prefix == "act" and j["b"]["found"]:
                if not any(d["switches"].get("ALIGN_SWIGLU_ROUND") == ["single"] for d in j["b"]["descriptions"]):
                    verdict_fail("bf16 act: paddle's descriptions do not name ALIGN_SWIGLU_ROUND=single")
        else:
            fail("%s %s: explain exited %d: %s" % (dt, prefix, rc, err.strip()))
            continue
        if got != (want_t, want_p):
            verdict_fail("%s %s: torch %s, paddle %s; expected %s, %s (%s)" % (dt, prefix, got[0], got[1], want_t,
                                                                              want_p, reason))
        else:
            print("ok: %s %s (%s): torch %s, paddle %s: %s" % (dt, prefix, op, got[0], got[1], reason))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
