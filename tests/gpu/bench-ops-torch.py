#!/usr/bin/env python3
"""bench-ops-torch.py: the ops of bench-gpu-ops against PyTorch eager on the same shapes and dtypes, in one run.

usage: python3 tests/gpu/bench-ops-torch.py BENCH_BINARY [--op NAME] [--skip-missing] [--torch-only]
       python3 tests/gpu/bench-ops-torch.py --self-test   (every torch form at tiny shapes on the CPU)

Runs `BENCH_BINARY --no-sweep [--op NAME]` (build-gpu/tests/gpu/bench-gpu-ops), prints its output and takes
the median of each "bench <op> <profile> <dims>: median ... us" line, then times the unfused PyTorch eager
forms of the same ops on CUDA at the dims of those lines (the DSv4-Flash sizes of bench-ops.cu; --torch-only:
no binary, the sizes of BENCH_DIMS below). Inputs have the sizes and dtypes of the op's registry inputs
(kernels/ops/<op>.c), random and seeded (not the binary's fill values: only the sizes and dtypes are shared);
layouts a framework holds ready (moe_combine's expert-sorted rows for index_add_, matmul's bf16 operands) are
made once, outside the timing. Torch forms (the math of tests/gpu/torch-compare.py, at large shapes):
  rmsnorm   w * (x.float() * rsqrt(mean(x^2) + eps)), cast to bf16 (DS-ref; w.bfloat16() for megatron and
            paddle, eps 1e-5 for paddle); F.rms_norm(x, (D,), w, eps) with w fp32 or bf16
  qnorm     q * rsqrt(mean(q^2) + eps) on bf16 tensors (DS-ref eager); the same in fp32, one rounding
            (megatron); F.rms_norm(q, (D,), None, eps)
  swiglu    silu(min(g,10)) * clamp(u,-10,10) in fp32, then R(p a) (DS-ref) or R(R(a) p) (megatron;
            paddle: p.bfloat16())
  moe_combine  (eo.float().sum(1) + shared).bfloat16() (fp32 accumulate); zeros(T,D) bf16, index_add_ of
            the expert-sorted rows, + shared (MCore unpermute). w is not read: SWIGLU_PROBS=before_w2
  mhc_post  R(post f + comb^T x) in fp32 (torch.matmul over the streams); bf16 bmm + R(R(post) f) (megatron)
  mhc_pre   rs = rsqrt(mean(x^2) + eps) (megatron, paddle: 1 / (sqrt(mean) + eps)), h = (F.linear(x, fn)
            rs) scale + base, sigmoid(+eps), 2 sigmoid, softmax + Sinkhorn (20 rounds), y = R(sum pre x);
            megatron: exp2(z log2e) for exp, R(pre) as the coefficient
  mhc_head  the same projection, pre = sigmoid(h) + eps, y = R(sum pre x)
  router    F.linear(x.float(), w) (fp32 GEMM; megatron w.bfloat16()), sqrt(softplus) (+1e-20 paddle),
            torch.topk(s + bias, K), gather, w / sum (+1e-20 megatron, paddle) * 1.5; no groups, no hash
            (the registry's default params, which bench-gpu-ops runs)
  matmul    F.linear(a.bfloat16(), b.bfloat16()); the same on bf16 copies (casts not timed); F.linear(a, b)
            in fp32
Method (as bench-ops.cu): CUDA events around each call, synchronised; 3 warm-up calls, then 20 timed;
median (mean of the middle two), min, max; TF32 off (torch.backends.cuda.matmul.allow_tf32 = False); when
the inputs' bytes are below twice the L2 size, up to 8 copies of them and the calls rotate through them.
Eager timing includes Python dispatch and one kernel launch per torch op: that is what eager costs.
Derived figure: align/torch = t_align_median / t_torch_median (< 1: align is faster).
The math column says how the torch form relates to the align profile's contract (kernels/ops/<op>.h):
align's portable profiles are bitwise equal to their C twins; torch follows its own reduction orders,
CUDA libdevice transcendentals and cuBLAS, so "same math" never means the same bits.
Exit 0 done; 1 the binary failed; 2 cannot run; 77 with --skip-missing when torch, CUDA or a GPU is
missing; --self-test: 0 when every check passes, 1 otherwise.
"""
import re
import subprocess
import sys
import warnings

WARMUP, REPS, MAXCOPIES = 3, 20, 8
PROFILES = ("default", "megatron", "paddle")  # bench-ops.cu profiles[] (NULL prints as "default")
BENCH_DIMS = {  # bench-ops.cu bench_dims[]
    "matmul": "T=4096,D=4096,F=4096", "rmsnorm": "T=16384,D=4096", "qnorm": "T=4096,H=64,D=512",
    "swiglu": "T=16384,F=2048", "router": "T=16384,D=4096,E=256,K=6,V=1024", "mhc_pre": "T=16384,N=4,D=4096",
    "mhc_post": "T=16384,N=4,D=4096", "mhc_head": "T=16384,N=4,D=4096", "moe_combine": "T=16384,K=6,D=4096,E=256",
}
OPS = tuple(BENCH_DIMS)
TINY_DIMS = {"matmul": "T=8,D=32,F=16", "rmsnorm": "T=4,D=64", "qnorm": "T=2,H=3,D=32", "swiglu": "T=4,F=32",
             "router": "T=8,D=32,E=16,K=4,V=16", "mhc_pre": "T=3,N=4,D=16", "mhc_post": "T=3,N=4,D=16",
             "mhc_head": "T=3,N=4,D=16", "moe_combine": "T=4,K=2,D=16,E=8"}
# registry outputs (kernels/ops/<op>.c) as (dims, dtype); a form may override the dtypes
OUTPUTS = {"rmsnorm": [("T,D", "bf16")], "qnorm": [("T,H,D", "bf16")], "swiglu": [("T,F", "bf16")],
           "moe_combine": [("T,D", "bf16")], "mhc_post": [("T,N,D", "bf16")],
           "mhc_pre": [("T,D", "bf16"), ("T,N", "f32"), ("T,N", "f32"), ("T,N,N", "f32")],
           "mhc_head": [("T,D", "bf16")], "router": [("T,K", "i32"), ("T,K", "f32")], "matmul": [("T,F", "bf16")]}
LOG2E = 1.4426950408889634
BENCH_RE = re.compile(r"^bench (\S+)\s+(\S+)\s+(\S+): (?:median\s+([0-9.]+) us \(min\s+([0-9.]+), max\s+([0-9.]+)\)"
                      r"|(not supported on the GPU))", re.M)
torch = F = None  # set by load_torch()


def load_torch():
    global torch, F
    import torch as t
    import torch.nn.functional as f
    torch, F = t, f
    warnings.filterwarnings("ignore", message=".*Mismatch dtype between input and weight.*")


def parse_dims(s):
    return {k: int(v) for k, v in (kv.split("=") for kv in s.split(","))}


# ---------------------------------------------------------------------------------------------
# inputs: the registry's sizes and dtypes, random and seeded


def make_inputs(op, d, dev, seed=1):
    g = torch.Generator(device=dev).manual_seed(seed)
    bf = torch.bfloat16

    def rn(*shape, s=1.0, dt=torch.float32):
        return (torch.randn(*shape, generator=g, device=dev) * s).to(dt)

    def ru(*shape, lo=0.0, hi=1.0):
        return torch.rand(*shape, generator=g, device=dev) * (hi - lo) + lo

    T = d["T"]
    if op == "rmsnorm":
        return {"x": rn(T, d["D"], dt=bf), "w": ru(d["D"], lo=0.5, hi=2.0)}
    if op == "qnorm":
        return {"q": rn(T, d["H"], d["D"], dt=bf)}
    if op == "swiglu":
        return {"g": rn(T, d["F"], s=4.0, dt=bf), "u": rn(T, d["F"], s=4.0, dt=bf), "p": ru(T)}
    if op == "moe_combine":
        K, D, E = d["K"], d["D"], d["E"]
        idx = torch.rand(T, E, generator=g, device=dev).argsort(-1)[:, :K].to(torch.int32)  # distinct per token
        i = {"eo": rn(T, K, D, dt=bf), "idx": idx, "w": ru(T, K), "shared": rn(T, D, dt=bf)}
        order = idx.reshape(-1).long().argsort(stable=True)  # the expert-sorted rows MCore's unpermute receives
        i["eo_perm"], i["tok"] = i["eo"].reshape(T * K, D)[order].contiguous(), order // K
        return i
    if op in ("mhc_post", "mhc_pre", "mhc_head"):
        N, D = d["N"], d["D"]
        x = rn(T, N, D, dt=bf)
        if op == "mhc_post":
            return {"x": x, "f": rn(T, D, dt=bf), "post": ru(T, N, hi=2.0), "comb": ru(T, N, N, hi=0.5)}
        R, S = ((2 + N) * N, 3) if op == "mhc_pre" else (N, 1)
        return {"x": x, "fn": rn(R, N * D, s=0.02), "base": rn(R, s=0.5), "scale": ru(S, lo=0.5, hi=1.5)}
    if op == "router":
        D, E, K, V = d["D"], d["E"], d["K"], d["V"]
        return {"x": rn(T, D, dt=bf), "w": rn(E, D, s=0.03), "bias": rn(E, s=0.01),
                "ids": torch.randint(0, V, (T,), generator=g, device=dev, dtype=torch.int32),
                "tid2eid": torch.randint(0, E, (V, K), generator=g, device=dev, dtype=torch.int32)}
    if op == "matmul":
        a, b = rn(T, d["D"]), rn(d["F"], d["D"], s=0.03)
        return {"a": a, "b": b, "a16": a.bfloat16(), "b16": b.bfloat16()}
    raise KeyError(op)


# ---------------------------------------------------------------------------------------------
# the torch eager forms (each returns its outputs in the registry's order)


def rms_unfused(i, d, eps, wbf16):
    xf = i["x"].float()
    w = i["w"].bfloat16().float() if wbf16 else i["w"]
    return (w * (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps))).bfloat16()


def qnorm_bf16(i, d, eps):  # every op on the bf16 tensor: R(x^2), R(mean), R(+eps), R(rsqrt), R(x r)
    q = i["q"]
    return q * torch.rsqrt(q.square().mean(-1, keepdim=True) + eps)


def qnorm_fp32(i, d, eps):
    qf = i["q"].float()
    return (qf * torch.rsqrt(qf.square().mean(-1, keepdim=True) + eps)).bfloat16()


def swiglu(i, d, double, pbf16, limit=10.0):
    g = torch.clamp(i["g"].float(), max=limit)
    u = torch.clamp(i["u"].float(), -limit, limit)
    p = i["p"].unsqueeze(-1)
    a = F.silu(g) * u
    if not double:
        return (p * a).bfloat16()
    return (a.bfloat16() * (p.bfloat16() if pbf16 else p)).bfloat16()


def moe_index_add(i, d):
    out = torch.zeros_like(i["shared"])
    out.index_add_(0, i["tok"], i["eo_perm"])
    return out + i["shared"]


def mhc_post_fp32(i, d):  # x_new = R(post f + comb^T x), comb rows = source stream (MHC_HRES_TRANSPOSE=on)
    mixed = torch.matmul(i["comb"].transpose(-1, -2), i["x"].float())
    return (i["post"].unsqueeze(-1) * i["f"].float().unsqueeze(1) + mixed).bfloat16()


def mhc_post_bf16(i, d):  # MCore: bf16 bmm, bf16 h_post times f, bf16 add
    mixed = torch.matmul(i["comb"].transpose(-1, -2).bfloat16(), i["x"])
    return mixed + i["post"].bfloat16().unsqueeze(-1) * i["f"].unsqueeze(1)


def mhc_sig(z, exp2):
    return 1.0 / (1.0 + torch.exp2(-z * LOG2E)) if exp2 else torch.sigmoid(z)


def mhc_softmax(z, exp2):
    if not exp2:
        return torch.softmax(z, dim=-1)
    e = torch.exp2((z - z.amax(dim=-1, keepdim=True)) * LOG2E)
    return e / e.sum(dim=-1, keepdim=True)


def mhc_project(i, inv_rms, eps, scv):
    """x flattened to fp32 [T, N*D], h = (F.linear(x, fn) * rs) * scale + base"""
    x = i["x"]
    xf = x.reshape(x.shape[0], -1).float()
    ms = xf.square().mean(-1, keepdim=True)
    rs = 1.0 / (torch.sqrt(ms) + eps) if inv_rms else torch.rsqrt(ms + eps)
    return xf, (F.linear(xf, i["fn"]) * rs) * scv + i["base"]


def mhc_pre(i, d, inv_rms, exp2, coef_bf16, iters=20, hc_eps=1e-6, norm_eps=1e-6):
    T, N, D = i["x"].shape
    s = i["scale"]
    scv = torch.cat([s[0:1].expand(N), s[1:2].expand(N), s[2:3].expand(N * N)])
    xf, h = mhc_project(i, inv_rms, norm_eps, scv)
    pre = mhc_sig(h[:, :N], exp2) + hc_eps
    post = 2 * mhc_sig(h[:, N:2 * N], exp2)
    m = mhc_softmax(h[:, 2 * N:].reshape(T, N, N), exp2) + hc_eps
    m = m / (m.sum(dim=-2, keepdim=True) + hc_eps)
    for _ in range(iters - 1):
        m = m / (m.sum(dim=-1, keepdim=True) + hc_eps)
        m = m / (m.sum(dim=-2, keepdim=True) + hc_eps)
    coef = pre.bfloat16().float() if coef_bf16 else pre
    y = (coef.unsqueeze(-1) * xf.view(T, N, D)).sum(dim=1).bfloat16()
    return y, pre.contiguous(), post.contiguous(), m


def mhc_head(i, d, inv_rms, exp2, coef_bf16, hc_eps=1e-6, norm_eps=1e-6):
    T, N, D = i["x"].shape
    xf, h = mhc_project(i, inv_rms, norm_eps, i["scale"])
    pre = mhc_sig(h, exp2) + hc_eps
    coef = pre.bfloat16().float() if coef_bf16 else pre
    return (coef.unsqueeze(-1) * xf.view(T, N, D)).sum(dim=1).bfloat16()


def router(i, d, bf16w, sp_eps, norm_eps, route_scale=1.5):
    w = i["w"].bfloat16().float() if bf16w else i["w"]
    logits = F.linear(i["x"].float(), w)
    sp = F.softplus(logits)
    s = torch.sqrt(sp + 1e-20) if sp_eps else torch.sqrt(sp)
    idx = torch.topk(s + i["bias"], d["K"], dim=-1, sorted=True).indices
    wt = s.gather(1, idx)
    den = wt.sum(dim=-1, keepdim=True)
    if norm_eps:
        den = den + 1e-20
    return idx.to(torch.int32), wt / den * route_scale


ORD = "other reduction order"
MM = "same operands and output (bf16, fp32 accumulate); cuBLAS tensor-core order (split-K may round)"
MOE = "same math (bf16 accumulator); CUDA atomics: order not deterministic (align: expert id)"
POST = "same math (one rounding); torch.matmul's order over the streams"
FMA = "align forms h by fmaf (MHC_COMPUTEH_FMA=on), torch rounds twice; other orders, CUDA expf"
TF32 = "differs: align's projection is TF32 (MHC_PROJ_GEMM=tf32), torch fp32; fmaf h; other orders"
RT = "cuBLAS SGEMM vs seq dot, CUDA log1pf/expf, torch.topk's tie order"
SILU = "CUDA expf in silu (align: its portable exp)"
NS = dict(inv_rms=False, exp2=False, coef_bf16=False)  # mHC: DS-ref
NP = dict(inv_rms=True, exp2=False, coef_bf16=False)  # paddle
NM = dict(inv_rms=True, exp2=True, coef_bf16=True)  # megatron
# (op, torch form as printed, function(inputs, dims, **kw), kw, output dtypes (None: OUTPUTS), {align profile: math})
FORMS = [
    ("rmsnorm", "w*(x.float()*rsqrt(mean(x^2)+1e-6)), bf16", rms_unfused, dict(eps=1e-6, wbf16=False), None,
     {"default": "same math (fp32 w, one rounding); %s, CUDA rsqrtf" % ORD}),
    ("rmsnorm", "w.bf16()*(x.float()*rsqrt(mean(x^2)+1e-6)), bf16", rms_unfused, dict(eps=1e-6, wbf16=True), None,
     {"megatron": "same math (bf16 w, one rounding); align warp32 sum, torch its own; CUDA rsqrtf"}),
    ("rmsnorm", "w.bf16()*(x.float()*rsqrt(mean(x^2)+1e-5)), bf16", rms_unfused, dict(eps=1e-5, wbf16=True), None,
     {"paddle": "same math (bf16 w, eps 1e-5, one rounding); align warp32 sum, torch its own; CUDA rsqrtf"}),
    ("rmsnorm", "F.rms_norm(x, w fp32, 1e-6)", lambda i, d: F.rms_norm(i["x"], (d["D"],), i["w"], 1e-6), {}, None,
     {"default": "same rounding points (composite path: w and x dtypes differ); %s" % ORD}),
    ("rmsnorm", "F.rms_norm(x, w.bf16(), 1e-6)",
     lambda i, d: F.rms_norm(i["x"], (d["D"],), i["w"].bfloat16(), 1e-6), {}, None,
     {"megatron": "torch's fused kernel: one rounding after the bf16 w (as on the CPU), its own order"}),
    ("rmsnorm", "F.rms_norm(x, w.bf16(), 1e-5)",
     lambda i, d: F.rms_norm(i["x"], (d["D"],), i["w"].bfloat16(), 1e-5), {}, None,
     {"paddle": "torch's fused kernel: one rounding after the bf16 w (as on the CPU), its own order"}),
    ("qnorm", "q*rsqrt(mean(q^2)+1e-6) on bf16", qnorm_bf16, dict(eps=1e-6), None,
     {"default": "same math (bf16_eager, 4 bf16 roundings); %s, CUDA rsqrtf" % ORD}),
    ("qnorm", "q*rsqrt(mean(q^2)+1e-5) on bf16", qnorm_bf16, dict(eps=1e-5), None,
     {"paddle": "same math (bf16_eager, eps 1e-5); %s, CUDA rsqrtf" % ORD}),
    ("qnorm", "q.float()*rsqrt(mean(q^2)+1e-6), bf16", qnorm_fp32, dict(eps=1e-6), None,
     {"megatron": "same math (fp32_fused, one rounding); %s, CUDA rsqrtf" % ORD}),
    ("qnorm", "F.rms_norm(q, None, 1e-6)", lambda i, d: F.rms_norm(i["q"], (d["D"],), None, 1e-6), {}, None,
     {"megatron": "fp32_fused's rounding (torch upcasts bf16); torch's fused kernel order"}),
    ("swiglu", "R(p*silu(g)*u) fp32 (clamp 10)", swiglu, dict(double=False, pbf16=False), None,
     {"default": "same formula, one rounding; " + SILU}),
    ("swiglu", "R(R(silu(g)*u)*p) (clamp 10)", swiglu, dict(double=True, pbf16=False), None,
     {"megatron": "same formula, two roundings; " + SILU}),
    ("swiglu", "R(silu(g)*u)*p.bf16() (clamp 10)", swiglu, dict(double=True, pbf16=True), None,
     {"paddle": "same formula (bf16 p, two roundings); " + SILU}),
    ("moe_combine", "(eo.float().sum(1)+shared).bf16()",
     lambda i, d: (i["eo"].float().sum(dim=1) + i["shared"].float()).bfloat16(), {}, None,
     {"default": "same math (fp32 accumulator); torch sums the slots in its order, align by expert id"}),
    ("moe_combine", "zeros bf16 .index_add_(sorted rows)+shared", moe_index_add, {}, None,
     {"megatron": MOE, "paddle": MOE}),
    ("mhc_post", "R(post*f + comb^T@x) fp32", mhc_post_fp32, {}, None, {"default": POST, "paddle": POST}),
    ("mhc_post", "bf16 comb^T@x + post.bf16()*f", mhc_post_bf16, {}, None,
     {"megatron": "same math (MHC_POST_ROUND=double: bf16 bmm and product); cuBLAS bmm order"}),
    ("mhc_pre", "rsqrt, F.linear fp32, sigmoid, Sinkhorn x20", mhc_pre, NS, None,
     {"default": "same math; cuBLAS and torch sum orders, CUDA expf"}),
    ("mhc_pre", "1/(sqrt+eps), F.linear fp32, sigmoid, Sinkhorn x20", mhc_pre, NP, None, {"paddle": FMA}),
    ("mhc_pre", "1/(sqrt+eps), F.linear fp32, exp2, R(pre), Sinkhorn x20", mhc_pre, NM, None, {"megatron": TF32}),
    ("mhc_head", "rsqrt, F.linear fp32, sigmoid+eps, sum", mhc_head, NS, None,
     {"default": "same math; cuBLAS and torch sum orders, CUDA expf"}),
    ("mhc_head", "1/(sqrt+eps), F.linear fp32, sigmoid+eps, sum", mhc_head, NP, None, {"paddle": FMA}),
    ("mhc_head", "1/(sqrt+eps), F.linear fp32, exp2, R(pre), sum", mhc_head, NM, None, {"megatron": TF32}),
    ("router", "F.linear fp32, sqrt(softplus), topk(s+bias), norm", router,
     dict(bf16w=False, sp_eps=False, norm_eps=False), None, {"default": "same math; " + RT}),
    ("router", "w.bf16(), F.linear fp32, sqrt(softplus), topk, /(sum+1e-20)", router,
     dict(bf16w=True, sp_eps=False, norm_eps=True), None, {"megatron": "same math (bf16w); " + RT}),
    ("router", "F.linear fp32, sqrt(softplus+1e-20), topk, /(sum+1e-20)", router,
     dict(bf16w=False, sp_eps=True, norm_eps=True), None, {"paddle": "same math; " + RT}),
    ("matmul", "F.linear(a.bf16(), b.bf16())", lambda i, d: F.linear(i["a"].bfloat16(), i["b"].bfloat16()), {}, None,
     {p: MM for p in PROFILES}),
    ("matmul", "F.linear(a16, b16), bf16 inputs held", lambda i, d: F.linear(i["a16"], i["b16"]), {}, None,
     {"default": "as the row above; the casts are not timed (inputs already bf16)"}),
    ("matmul", "F.linear(a, b) fp32, TF32 off", lambda i, d: F.linear(i["a"], i["b"]), {}, ["f32"],
     {"default": "other math: fp32 operands and output (align rounds operands to bf16, bf16 out)"}),
]


# ---------------------------------------------------------------------------------------------
# timing


def summarize(ms):
    ms = sorted(ms)
    n = len(ms)
    med = ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2])
    return med, ms[0], ms[-1]


def input_copies(inp, l2):
    """bench-ops.cu's rule: add copies while ncopies * input bytes < 2 L2, at most MAXCOPIES"""
    nbytes = sum(t.numel() * t.element_size() for t in inp.values())
    copies = [inp]
    while len(copies) < MAXCOPIES and len(copies) * nbytes < 2 * l2:
        copies.append({k: v.clone() for k, v in inp.items()})
    return copies


def time_form(fn, kw, d, copies):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for r in range(WARMUP + REPS):
        inp = copies[r % len(copies)]
        e0.record()
        fn(inp, d, **kw)
        e1.record()
        e1.synchronize()
        if r >= WARMUP:
            ms.append(e0.elapsed_time(e1))
    return summarize(ms)


def run_binary(binary, op):
    cmd = [binary, "--no-sweep"] + (["--op", op] if op else [])
    try:
        pr = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as e:
        print("bench-ops-torch: cannot run '%s': %s" % (binary, e), file=sys.stderr)
        return None, 2
    out = pr.stdout.decode(errors="replace")
    print(out, end="")
    return out, pr.returncode


def parse_bench(out):
    """{(op, profile): (dims, median ms or None when not supported)} from the binary's bench lines"""
    res = {}
    for m in BENCH_RE.finditer(out):
        res[(m.group(1), m.group(2))] = (m.group(3), None if m.group(7) else float(m.group(4)) / 1e3)
    return res


def torch_side(align, header, ops, torch_only):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 0)
    print("\ntorch %s eager on %s (L2 %d MiB%s); %d warm-up + %d timed calls, median (min, max)" % (
        torch.__version__, torch.cuda.get_device_name(0), l2 >> 20, "" if l2 else ": unknown, one input copy",
        WARMUP, REPS))
    times, dims_of = {}, {}
    for op in ops:
        got = [v[0] for (o, _), v in align.items() if o == op]
        dims_of[op] = got[0] if got else BENCH_DIMS[op]
        d = parse_dims(dims_of[op])
        with torch.inference_mode():
            copies = input_copies(make_inputs(op, d, "cuda"), l2)
            for fop, label, fn, kw, _, _ in FORMS:
                if fop != op:
                    continue
                times[(op, label)] = t = time_form(fn, kw, d, copies)
                print("torch %-11s %-58s %s: median %9.3f ms (min %9.3f, max %9.3f), %d input cop%s" % (
                    op, label, dims_of[op], t[0], t[1], t[2], len(copies), "y" if len(copies) == 1 else "ies"))
        del copies
        torch.cuda.empty_cache()
    print("\n%s" % (header or "align: not run (--torch-only)"))
    print("| op | dims | align profile | align median ms | torch eager form | torch median ms | align/torch "
          "(< 1: align faster) | math vs the align profile |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | --- |")
    rows = []  # per op, per align profile (bench-ops.cu's order), the torch forms in FORMS order
    for k, (op, label, _, _, _, notes) in enumerate(FORMS):
        if op in ops:
            rows += [(OPS.index(op), PROFILES.index(prof), k, op, label, prof, note) for prof, note in notes.items()]
    for _, _, _, op, label, prof, note in sorted(rows):
        if not torch_only and (op, prof) not in align:
            continue
        a = None if torch_only else align[(op, prof)][1]
        ams = "-" if torch_only else ("not supported" if a is None else "%.3f" % a)
        tm = times[(op, label)][0]
        ratio = "%.2f" % (a / tm) if a is not None else "-"
        print("| %s | %s | %s | %s | `%s` | %.3f | %s | %s |" % (op, dims_of[op], prof, ams, label, tm, ratio, note))
    print("\nalign/torch = t_align_median / t_torch_median; align portable profiles are bitwise their C twins, "
          "torch eager is not")
    other = sorted({o for o, _ in align} - set(OPS))
    if other:
        print("no torch form here (timed by align only): %s" % ", ".join(other))


# ---------------------------------------------------------------------------------------------
# self-test: the forms at tiny shapes on the CPU, and the parser on lines printed as bench-ops.cu does


def self_test():
    load_torch()
    dt = {"bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32}
    bad = 0
    with torch.inference_mode():
        for op in OPS:
            d = parse_dims(TINY_DIMS[op])
            inp = make_inputs(op, d, "cpu")
            ref = None
            for fop, label, fn, kw, odt, _ in FORMS:
                if fop != op:
                    continue
                outs = fn(inp, d, **kw)
                outs = outs if isinstance(outs, tuple) else (outs,)
                want = [(tuple(d[k] for k in dims.split(",")), dt[odt[j] if odt else t])
                        for j, (dims, t) in enumerate(OUTPUTS[op])]
                have = [(tuple(o.shape), o.dtype) for o in outs]
                ok = have == want
                err = 0.0
                if ok and ref is not None:  # the forms of one op agree loosely (they differ in roundings only)
                    for a, b in zip(outs, ref):
                        if a.is_floating_point():
                            err = max(err, ((a.float() - b.float()).abs() / (b.float().abs() + 0.05)).max().item())
                    ok = err < 0.1
                if ok and op == "mhc_pre":  # Sinkhorn ends with a column normalisation: columns sum to ~1
                    ok = (outs[3].sum(dim=-2) - 1).abs().max().item() < 1e-3
                ref = ref if ref is not None else outs
                bad += not ok
                shapes = " ".join("%s %s" % (list(s), str(t)[6:]) for s, t in have)
                print("%s %-11s %-58s %s, max rel. diff to the first form %.2g" % (
                    "ok  " if ok else "FAIL", op, label, shapes, err))
    nb = sum(t.numel() * t.element_size() for t in inp.values())  # the last op's inputs: the copy rule
    ok = [len(input_copies(inp, l2)) for l2 in (0, nb, 2 * nb, 100 * nb)] == [1, 2, 4, MAXCOPIES]
    bad += not ok
    print("%s input copies below 2 L2: 1, 2, 4, %d copies for L2 = 0, 1, 2, 100 x the input bytes" % (
        "ok  " if ok else "FAIL", MAXCOPIES))
    fmt = ("bench %-11s %-17s %s: median %9.1f us (min %9.1f, max %9.1f), %8.1f MB, %7.1f GB/s, %5.1f%% of "
           "copy (%d input cop%s)%s\n")  # bench-ops.cu's printf of a bench line
    text = (fmt % ("rmsnorm", "megatron", BENCH_DIMS["rmsnorm"], 123.4, 120.0, 130.5, 268.4, 2175.0, 51.2, 1, "y", "") +
            "bench %-11s %-17s %s: not supported on the GPU\n" % ("matmul", "paddle", BENCH_DIMS["matmul"]) +
            "bench copy        cudaMemcpy D2D 1 GiB: median  1000.0 us (min  990.0, max 1010.0), copy traffic\n")
    got = {k: (v[0], v[1] if v[1] is None else round(v[1], 9)) for k, v in parse_bench(text).items()}
    ok = got == {("rmsnorm", "megatron"): (BENCH_DIMS["rmsnorm"], 0.1234),
                 ("matmul", "paddle"): (BENCH_DIMS["matmul"], None)}
    bad += not ok
    print("%s parser of bench-ops.cu's lines: %s" % ("ok  " if ok else "FAIL", got))
    print("self-test: %d failure%s" % (bad, "" if bad == 1 else "s"))
    return 1 if bad else 0


def main(argv):
    flags = {"--skip-missing", "--torch-only", "--self-test"}
    args, op, pos, i = set(), None, [], 1
    while i < len(argv):
        if argv[i] in flags:
            args.add(argv[i])
        elif argv[i] == "--op" and i + 1 < len(argv):
            op, i = argv[i + 1], i + 1
        elif argv[i].startswith("-") or pos:
            print("\n".join(__doc__.strip().splitlines()[2:4]), file=sys.stderr)
            return 2
        else:
            pos.append(argv[i])
        i += 1
    skip = 77 if "--skip-missing" in args else 2
    try:
        if "--self-test" in args:
            return self_test()
        load_torch()
    except ImportError as e:
        print("bench-ops-torch: cannot import torch: %s" % e, file=sys.stderr)
        return skip
    torch_only = "--torch-only" in args
    if torch_only and op is not None and op not in OPS:
        print("bench-ops-torch: no torch form of op '%s' (these have one: %s)" % (op, ", ".join(OPS)), file=sys.stderr)
        return 2
    if not pos and not torch_only:
        print("\n".join(__doc__.strip().splitlines()[2:4]), file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench-ops-torch: no CUDA device in torch", file=sys.stderr)
        return skip
    align, header = {}, None
    if not torch_only:
        out, rc = run_binary(pos[0], op)
        if out is None:
            return 2
        if rc == 77:
            return skip
        if rc != 0:
            print("bench-ops-torch: %s failed (exit %d)" % (pos[0], rc), file=sys.stderr)
            return 1
        align = parse_bench(out)
        m = re.search(r"^bench-ops on .*$", out, re.M)
        header = "align: " + (m.group(0) if m else "%s printed no commit line" % pos[0])
    ops = [o for o in OPS if op is None or o == op]
    try:
        torch_side(align, header, ops, torch_only)
    except (RuntimeError, ValueError, KeyError) as e:  # CUDA errors and out-of-memory are RuntimeErrors
        print("bench-ops-torch: torch run failed: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
