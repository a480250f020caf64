#!/usr/bin/env python3
"""torch-compare.py: align's CUDA twins against PyTorch eager on CUDA, bit for bit.

usage: python3 tests/gpu/torch-compare.py [ALIGN] [--device cuda|cpu] [--keep DIR]
       python3 tests/gpu/torch-compare.py [ALIGN] --self-test      (no torch needed)

ALIGN defaults to build-gpu/harness/align (--self-test: build/harness/align, device cpu).

For each case the script writes the inputs itself (hand-written safetensors, with pathological
values), runs `ALIGN run OP --device D --profile P --inputs in.st --outputs out.st --shape ...`,
computes the same op with PyTorch eager ops on CUDA in the unfused order the framework uses, and
compares the bit patterns element by element (differing elements, max ULP distance).

Cases (profiles megatron and deepseek-ref; contracts in kernels/swiglu.h, router.h, mhc_pre.h):
  swiglu   clamp(u,-10,10), min(g,10), silu, * u in fp32; megatron: R(F(R(a)) * p) (two
           roundings, SWIGLU_ROUND=double); deepseek-ref: R(a * p) (one rounding).
  router   D=2 logits that are exact in fp32 whatever the GEMM order (so only the score, top-k and
           normalisation are measured); sqrt(softplus(l)) [+1e-20 inside the sqrt in the
           '+sqrtsoftplus_eps' rows], torch.topk(sorted) on s + bias, gather, w / sum(w)
           (deepseek-ref) or w / (sum(w) + 1e-20) (megatron), * 1.5. Outputs idx and wt.
  mhc_pre  fn = 0, so h = base exactly on both sides; the Sinkhorn C1 contract, pre = sigmoid + eps,
           post = 2 sigmoid, y = R(sum_j pre'_j x_j). deepseek-ref: torch.exp/sigmoid/softmax;
           megatron (MHC_EXP=exp2, MHC_COEF=bf16): exp2(x * log2e) and pre' = F(R(pre)).
Sigmoid router scores are computed by align only through params variants that `align run` does
not expose (it runs params_default = sqrtsoftplus), so they are not compared here.

Differences are expected (align's portable exp/log1p versus CUDA's expf/log1pf, torch's reduction
orders, torch.topk's tie order): they are the data. Exit 0 after measuring; 2 when something could
not be run (align failed, outputs missing, torch or CUDA missing).
"""
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

# ---------------------------------------------------------------------------------------------
# tensors as (dtype, shape, list of raw bit patterns as unsigned ints); no numpy

WIDTH = {"BF16": 2, "F32": 4, "I32": 4}
PACK = {"BF16": "H", "F32": "I", "I32": "I"}


class Fail(Exception):
    pass


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_f32(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def bf16_bits(x):
    """fp32 value -> bf16 bits, round to nearest even (NaN kept quiet)."""
    b = f32_bits(x)
    if (b & 0x7F800000) == 0x7F800000 and (b & 0x7FFFFF):
        return (b >> 16) | 0x40
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def bits_bf16(h):
    return bits_f32(h << 16)


def i32_bits(v):
    return v & 0xFFFFFFFF


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def tensor(dtype, shape, bits):
    if len(bits) != numel(shape):
        raise Fail("tensor of shape %s given %d values" % (shape, len(bits)))
    return (dtype, list(shape), list(bits))


def st_write(path, tensors):
    """safetensors: u64 LE header length, JSON header, raw little-endian data."""
    header, blobs, off = {}, [], 0
    for name, (dt, shape, bits) in tensors.items():
        blob = struct.pack("<%d%s" % (len(bits), PACK[dt]), *bits)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def st_read(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise Fail("%s: too short for safetensors" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise Fail("%s: header length %d beyond the file" % (path, n))
    header = json.loads(raw[8:8 + n].decode())
    data = raw[8 + n:]
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        dt = d["dtype"]
        if dt not in WIDTH:
            raise Fail("%s: tensor %s has dtype %s (expected BF16, F32 or I32)" % (path, name, dt))
        a, b = d["data_offsets"]
        cnt = (b - a) // WIDTH[dt]
        if cnt != numel(d["shape"]) or b > len(data):
            raise Fail("%s: tensor %s: offsets do not match its shape" % (path, name))
        out[name] = (dt, list(d["shape"]), list(struct.unpack("<%d%s" % (cnt, PACK[dt]), data[a:b])))
    return out


# ---------------------------------------------------------------------------------------------
# bit comparison


def ordered(dt, b):
    """bits -> integer on a line where adjacent floats are 1 apart (+0 and -0 both 0)."""
    if dt == "BF16":
        mag, sign = b & 0x7FFF, b & 0x8000
    else:
        mag, sign = b & 0x7FFFFFFF, b & 0x80000000
    return -mag if sign else mag


def is_nan(dt, b):
    if dt == "BF16":
        return (b & 0x7F80) == 0x7F80 and (b & 0x7F) != 0
    return (b & 0x7F800000) == 0x7F800000 and (b & 0x7FFFFF) != 0


def compare(dt, a, b):
    """-> (elements, differing, max ULP distance as a string, first differing index)."""
    if len(a) != len(b):
        raise Fail("element counts differ: %d vs %d" % (len(a), len(b)))
    diff, worst, first = 0, 0, None
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y:
            continue
        diff += 1
        if first is None:
            first = i
        if dt == "I32":
            continue
        nx, ny = is_nan(dt, x), is_nan(dt, y)
        if nx and ny:
            continue  # NaN payloads differ only
        d = math.inf if nx or ny else abs(ordered(dt, x) - ordered(dt, y))
        worst = max(worst, d)
    if dt == "I32":
        return len(a), diff, "-", first
    return len(a), diff, ("inf" if worst == math.inf else str(worst)), first


def show(dt, b):
    if dt == "I32":
        v = b - (1 << 32) if b & 0x80000000 else b
        return str(v)
    v = bits_bf16(b) if dt == "BF16" else bits_f32(b)
    return "%r (0x%0*x)" % (v, 4 if dt == "BF16" else 8, b)


# ---------------------------------------------------------------------------------------------
# inputs (deterministic; values chosen so the interesting points are hit exactly)

ULP20 = 2.0 ** -19  # fp32 ulp in [16, 32): 20 and 30 live there


def rnd_bf16(r, lo, hi):
    return bf16_bits(r.uniform(lo, hi))


def swiglu_inputs(T, F):
    r = random.Random(1234)
    special_g = [10.0, -10.0, 10.0625, -10.0625, 9.9375, 0.0, -0.0, 20.0, -20.0, -88.0, -100.0,
                 1e-30, -1e-30, 2.0 ** -126, 0.5, -0.5]
    special_u = [10.0, -10.0, 10.0625, -10.0625, -0.0, 0.0, 10.0, -10.0, 1.0, -1.0, 3.0,
                 -0.0, 0.0, 10.0, 10.0, -10.0]
    g, u = [], []
    for i in range(T * F):
        if i < len(special_g):
            g.append(bf16_bits(special_g[i]))
            u.append(bf16_bits(special_u[i]))
        elif i % 7 == 0:  # the clamp limit, exactly, with random partners
            g.append(bf16_bits(10.0 if i % 2 else -10.0))
            u.append(bf16_bits(-10.0 if i % 3 else 10.0))
        elif i % 11 == 0:  # signed zeros against random partners
            g.append(bf16_bits(-0.0))
            u.append(rnd_bf16(r, -12, 12))
        else:
            g.append(rnd_bf16(r, -12, 12))
            u.append(rnd_bf16(r, -12, 12))
    p = [f32_bits(v) for v in ([1.0, 0.0, 1.0 / 3.0, 0.1, 2.0 ** -20] + [r.random() for _ in range(T)])[:T]]
    return {"g": tensor("BF16", [T, F], g), "u": tensor("BF16", [T, F], u), "p": tensor("F32", [T], p)}


# router: D = 2, w[e] = [1, e - E/2] (bf16-exact, so the megatron bf16w rounding is the identity),
# x[t] = [a_t, b_t] bf16 with b_t (e - E/2) exact: logit = a_t + b_t (e - E/2), one rounding, the
# same in any summation order (and with or without FMA).
ROUTER_ROWS = [
    (20.0, ULP20),    # logits 20 - 8 ulp .. 20 + 7 ulp: the softplus threshold (x > 20 -> x)
    (20.0, -ULP20),   # the same sweep, mirrored over the experts
    (1.5, 0.0),       # every logit equal: 16-way exact tie in s and s + bias
    (30.0, ULP20),    # 1-ulp apart logits above the threshold: sqrt maps neighbours together (ties)
    (-0.0, -0.0),     # signed zero logits (+0 and -0 mixed): softplus(0) = log 2 everywhere
    (-20.0, 1.0),     # logits -28 .. -13: softplus ~ exp(l)
    (19.875, 0.0625),  # bf16 neighbours of 20 as the base
    (0.0, 0.25),      # plain row
]


def router_inputs(T, E, K):
    r = random.Random(99)
    rows = list(ROUTER_ROWS)
    while len(rows) < T:
        rows.append((bits_bf16(rnd_bf16(r, -4, 4)), bits_bf16(rnd_bf16(r, -1, 1))))
    rows = rows[:T]
    x = []
    for a, b in rows:
        x += [bf16_bits(a), bf16_bits(b)]
    w = []
    for e in range(E):
        w += [f32_bits(1.0), f32_bits(float(e - E // 2))]
    # bias: zero except one expert (selection only; wt uses the unbiased s)
    bias = [0.0] * E
    bias[E - 2] = 0.125
    return {
        "x": tensor("BF16", [T, 2], x),
        "w": tensor("F32", [E, 2], w),
        "bias": tensor("F32", [E], [f32_bits(v) for v in bias]),
        "ids": tensor("I32", [T], [0] * T),
        "tid2eid": tensor("I32", [1, K], [i32_bits(j) for j in range(K)]),
    }


# mhc_pre: fn = 0 so h = base exactly (mix = +-0); one run per base pattern.
def mhc_bases(N):
    r = random.Random(7)
    n = (2 + N) * N
    pats = {
        "random": [r.uniform(-3, 3) for _ in range(n)],
        "ties": [0.5] * n,
        "spread": [0.0] * (2 * N) + [(100.0 if (i % (N + 1)) == 0 else -100.0) for i in range(N * N)],
        "zeros": [(-0.0 if i % 2 else 0.0) for i in range(n)],
        "large": [20.0 + ULP20 * (i - n // 2) for i in range(n)],
    }
    return pats


def mhc_inputs(T, N, D, base):
    r = random.Random(5)
    n = (2 + N) * N
    return {
        "x": tensor("BF16", [T, N, D], [rnd_bf16(r, -2, 2) for _ in range(T * N * D)]),
        "fn": tensor("F32", [n, N * D], [0] * (n * N * D)),
        "base": tensor("F32", [n], [f32_bits(v) for v in base]),
        "scale": tensor("F32", [3], [f32_bits(1.0)] * 3),
    }


# ---------------------------------------------------------------------------------------------
# PyTorch eager references (only imported for the GPU run)


def to_torch(torch, t, dev):
    dt, shape, bits = t
    if dt == "BF16":
        v = torch.tensor([b - 0x10000 if b & 0x8000 else b for b in bits], dtype=torch.int16)
        v = v.view(torch.bfloat16)
    elif dt == "F32":
        v = torch.tensor([b - (1 << 32) if b & 0x80000000 else b for b in bits], dtype=torch.int32)
        v = v.view(torch.float32)
    else:
        v = torch.tensor([b - (1 << 32) if b & 0x80000000 else b for b in bits], dtype=torch.int32)
    return v.reshape(shape).to(dev)


def from_torch(torch, v):
    v = v.detach().to("cpu").contiguous()
    if v.dtype == torch.bfloat16:
        return ("BF16", list(v.shape), [x & 0xFFFF for x in v.view(torch.int16).flatten().tolist()])
    if v.dtype == torch.float32:
        return ("F32", list(v.shape), [x & 0xFFFFFFFF for x in v.view(torch.int32).flatten().tolist()])
    v = v.to(torch.int32)
    return ("I32", list(v.shape), [x & 0xFFFFFFFF for x in v.flatten().tolist()])


def torch_swiglu(torch, F, inp, profile, dev, limit=10.0):
    g32 = to_torch(torch, inp["g"], dev).float()
    u32 = to_torch(torch, inp["u"], dev).float()
    p = to_torch(torch, inp["p"], dev).unsqueeze(-1)
    u32 = torch.clamp(u32, -limit, limit)
    g32 = torch.clamp(g32, max=limit)
    a = F.silu(g32) * u32  # fp32
    if profile == "megatron":  # clamped_weighted_swiglu: R(a), * fp32 probs, R()
        out = (a.to(torch.bfloat16) * p).to(torch.bfloat16)
    else:  # DS-ref: p * a in fp32, one rounding
        out = (p * a).to(torch.bfloat16)
    return {"a": out}


def torch_router(torch, F, inp, profile, dev, K, sp_eps, route_scale=1.5):
    x = to_torch(torch, inp["x"], dev)
    w = to_torch(torch, inp["w"], dev)
    bias = to_torch(torch, inp["bias"], dev)
    if profile == "megatron":  # weight cast to params_dtype (bf16), fp32 GEMM output
        w = w.to(torch.bfloat16)
    logits = x.float() @ w.float().t()
    sp = F.softplus(logits)
    s = torch.sqrt(sp + 1e-20) if sp_eps else torch.sqrt(sp)
    idx = torch.topk(s + bias, K, dim=-1, sorted=True).indices
    wt = s.gather(1, idx)
    den = wt.sum(dim=-1, keepdim=True)
    if profile == "megatron":
        den = den + 1e-20
    wt = wt / den * route_scale
    return {"idx": idx.to(torch.int32), "wt": wt}


LOG2E_F = 1.4426950408889634  # rounded to fp32 when it multiplies an fp32 tensor


def torch_mhc_pre(torch, F, inp, profile, dev, N, iters=20, eps=1e-6):
    x = to_torch(torch, inp["x"], dev)
    base = to_torch(torch, inp["base"], dev)
    T = x.shape[0]
    h = base.unsqueeze(0).expand(T, -1)  # fn = 0: mix = 0, h = (0 * rs) * scale + base = base
    if profile == "megatron":  # Triton/cuTile: exp2((.) * log2e)
        def sig(z):
            return 1.0 / (1.0 + torch.exp2(-z * LOG2E_F))

        def softmax(z):
            e = torch.exp2((z - z.amax(dim=-1, keepdim=True)) * LOG2E_F)
            return e / e.sum(dim=-1, keepdim=True)
    else:
        sig = torch.sigmoid

        def softmax(z):
            return torch.softmax(z, dim=-1)
    pre = sig(h[:, :N]) + eps
    post = 2 * sig(h[:, N:2 * N])
    m = softmax(h[:, 2 * N:].reshape(T, N, N)) + eps
    m = m / (m.sum(dim=-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        m = m / (m.sum(dim=-1, keepdim=True) + eps)
        m = m / (m.sum(dim=-2, keepdim=True) + eps)
    coef = pre.to(torch.bfloat16).float() if profile == "megatron" else pre
    y = (coef.unsqueeze(-1) * x.float()).sum(dim=1).to(torch.bfloat16)
    return {"y": y, "pre": pre.contiguous(), "post": post.contiguous(), "comb": m.contiguous()}


# ---------------------------------------------------------------------------------------------
# cases

SW_T, SW_F = 4, 64
R_T, R_E, R_K = 8, 16, 4
M_T, M_N, M_D = 2, 4, 8
PROFILES = ["megatron", "deepseek-ref"]


def cases():
    out = []
    sw = swiglu_inputs(SW_T, SW_F)
    for prof in PROFILES:
        out.append(dict(op="swiglu", label=prof, profile=prof, modes=[], shape="T=%d,F=%d" % (SW_T, SW_F),
                        inputs=sw, outputs=["a"], ref=("swiglu", {})))
    ro = router_inputs(R_T, R_E, R_K)
    for prof in PROFILES:
        for eps in (False, True):
            out.append(dict(op="router", label=prof + ("+sqrtsoftplus_eps" if eps else ""), profile=prof,
                            modes=["ALIGN_ROUTER_SQRTSOFTPLUS_EPS=1e-20"] if eps else [],
                            shape="T=%d,D=2,E=%d,K=%d,V=1" % (R_T, R_E, R_K), inputs=ro,
                            outputs=["idx", "wt"], ref=("router", {"sp_eps": eps})))
    for name, base in mhc_bases(M_N).items():
        mi = mhc_inputs(M_T, M_N, M_D, base)
        for prof in PROFILES:
            out.append(dict(op="mhc_pre[%s]" % name, label=prof, profile=prof, modes=[],
                            shape="T=%d,N=%d,D=%d" % (M_T, M_N, M_D), inputs=mi,
                            outputs=["comb", "pre", "post", "y"], ref=("mhc_pre", {})))
    return out


def run_align(align, device, case, workdir, idx):
    op = case["op"].split("[")[0]
    ins = os.path.join(workdir, "in%02d.safetensors" % idx)
    outs = os.path.join(workdir, "out%02d.safetensors" % idx)
    st_write(ins, case["inputs"])
    back = st_read(ins)
    if back != {k: (v[0], list(v[1]), list(v[2])) for k, v in case["inputs"].items()}:
        raise Fail("safetensors round trip of %s differs" % ins)
    cmd = [align, "run", op, "--device", device, "--profile", case["profile"], "--inputs", ins,
           "--outputs", outs, "--shape", case["shape"]]
    for m in case["modes"]:
        cmd += ["--mode", m]
    try:
        pr = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Fail("%s: %s" % (" ".join(cmd), e))
    if pr.returncode != 0:
        raise Fail("%s: exit %d\n%s" % (" ".join(cmd), pr.returncode, pr.stdout.decode(errors="replace")))
    got = st_read(outs)
    for name in case["outputs"]:
        if name not in got:
            raise Fail("%s: output %s missing (has %s)" % (outs, name, sorted(got)))
    return cmd, got


def main(argv):
    args = list(argv[1:])
    self_test = "--self-test" in args
    if self_test:
        args.remove("--self-test")
    device = "cpu" if self_test else "cuda"
    keep = None
    if "--device" in args:
        i = args.index("--device")
        device = args[i + 1]
        del args[i:i + 2]
    if "--keep" in args:
        i = args.index("--keep")
        keep = args[i + 1]
        del args[i:i + 2]
    if any(a.startswith("-") for a in args) or len(args) > 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    align = args[0] if args else ("build/harness/align" if self_test else "build-gpu/harness/align")
    if not os.access(align, os.X_OK):
        print("torch-compare: %s is not an executable align" % align, file=sys.stderr)
        return 2
    workdir = keep or tempfile.mkdtemp(prefix="torch-compare.")
    os.makedirs(workdir, exist_ok=True)
    try:
        if self_test:
            return self_test_run(align, device, workdir)
        return compare_run(align, device, workdir)
    except Fail as e:
        print("torch-compare: FAILED TO RUN: %s" % e, file=sys.stderr)
        return 2


def self_test_run(align, device, workdir):
    # 1. format round trip, with specials, through bytes written by hand
    t = {"a": tensor("BF16", [2, 3], [bf16_bits(v) for v in (10.0, -10.0, -0.0, 0.0, 1.0 / 3, float("nan"))]),
         "b": tensor("F32", [3], [f32_bits(v) for v in (20.0, 20.0 + ULP20, -0.0)]),
         "c": tensor("I32", [2, 2], [i32_bits(v) for v in (-1, 0, 7, -(1 << 31))])}
    p = os.path.join(workdir, "roundtrip.safetensors")
    st_write(p, t)
    if st_read(p) != t:
        raise Fail("safetensors round trip differs")
    with open(p, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    if n % 8 or raw[8:9] != b"{" or len(raw) != 8 + n + 12 + 12 + 16:
        raise Fail("safetensors layout unexpected (header %d, file %d)" % (n, len(raw)))
    if struct.unpack("<H", raw[8 + n:8 + n + 2])[0] != 0x4120:  # 10.0 in bf16, little-endian
        raise Fail("bf16 byte order wrong")
    if bf16_bits(1.0 + 2.0 ** -8) != 0x3F80 or bf16_bits(1.0 + 3 * 2.0 ** -8) != 0x3F82:
        raise Fail("bf16 round-to-nearest-even wrong")
    if compare("F32", [f32_bits(1.0), f32_bits(-0.0)], [f32_bits(1.0) + 3, f32_bits(0.0)])[1:3] != (2, "3"):
        raise Fail("ULP distance wrong")
    if compare("BF16", [bf16_bits(-1.0)], [bf16_bits(1.0)])[2] != str(2 * 0x3F80):
        raise Fail("ULP distance across zero wrong")
    print("self-test: safetensors writer/reader round trip, byte order, bf16 rounding, ULP distance: ok")
    # 2. align accepts every input file the GPU run writes, and its outputs read back
    for i, c in enumerate(cases()):
        cmd, got = run_align(align, device, c, workdir, i)
        shapes = ", ".join("%s%s %s" % (k, got[k][1], got[k][0]) for k in c["outputs"])
        print("self-test: %-16s %-30s accepted; outputs %s" % (c["op"], c["label"], shapes))
    # 3. a few values the reference contract fixes, on align's own output (CPU)
    c = cases()[1]  # swiglu deepseek-ref
    _, got = run_align(align, device, c, workdir, 99)
    a = got["a"][2]
    want = 10.0 / (1.0 + math.exp(-10.0)) * 10.0  # g = u = 10 (the clamp limit), p = 1
    if abs(bits_bf16(a[0]) - want) > 0.5:
        raise Fail("swiglu g=10, u=10, p=1 gives %s, want about %r" % (show("BF16", a[0]), want))
    if a[5] not in (0x0000, 0x8000) or a[6] not in (0x0000, 0x8000):
        raise Fail("swiglu g=+-0 gives a nonzero: %s %s" % (show("BF16", a[5]), show("BF16", a[6])))
    if a[3] != bf16_bits(-10.0625 / (1.0 + math.exp(10.0625)) * -10.0):
        print("self-test: note: g=-10.0625, u=-10.0625 gives %s" % show("BF16", a[3]))
    print("self-test: swiglu spot values (g=u=10 at the clamp, g=0): ok")
    print("self-test: passed (torch not used; the GPU run is: python3 tests/gpu/torch-compare.py "
          "build-gpu/harness/align)")
    return 0


def compare_run(align, device, workdir):
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means this cannot run
        raise Fail("cannot import torch: %s" % e)
    dev = "cuda" if device == "cuda" else "cpu"
    if dev == "cuda" and not torch.cuda.is_available():
        raise Fail("torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch %s, device %s%s, align %s --device %s" % (
        torch.__version__, dev, (" (%s)" % torch.cuda.get_device_name(0)) if dev == "cuda" else "", align, device))
    rows = []
    for i, c in enumerate(cases()):
        cmd, got = run_align(align, device, c, workdir, i)
        kind, extra = c["ref"]
        with torch.no_grad():
            if kind == "swiglu":
                ref = torch_swiglu(torch, F, c["inputs"], c["profile"], dev)
            elif kind == "router":
                ref = torch_router(torch, F, c["inputs"], c["profile"], dev, R_K, extra["sp_eps"])
            else:
                ref = torch_mhc_pre(torch, F, c["inputs"], c["profile"], dev, M_N)
        print("\n## %s, profile %s\n$ %s" % (c["op"], c["label"], " ".join(cmd)))
        for name in c["outputs"]:
            at = got[name]
            tt = from_torch(torch, ref[name])
            if at[0] != tt[0] or at[1] != tt[1]:
                raise Fail("%s %s: align gives %s%s, torch %s%s" % (c["op"], name, at[0], at[1], tt[0], tt[1]))
            n, d, ulp, first = compare(at[0], at[2], tt[2])
            verdict = "bitwise equal" if d == 0 else "differ"
            print("op=%s profile=%s output=%s elements=%d differing=%d max_ulp=%s" % (
                c["op"], c["label"], name, n, d, ulp))
            if first is not None:
                print("  first difference at flat index %d: align %s, torch %s" % (
                    first, show(at[0], at[2][first]), show(at[0], tt[2][first])))
            print("  verdict: %s" % verdict)
            rows.append((c["op"], c["label"], name, n, d, ulp, verdict))
    print("\n| op | profile | output | elements | differing | max ULP | verdict |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- |")
    for r in rows:
        print("| `%s` | %s | `%s` | %d | %d | %s | %s |" % r)
    print("\n(files in %s)" % workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
