#!/usr/bin/env python3
"""torch-compare.py: align's CUDA twins against PyTorch eager on CUDA, bit for bit.

usage: python3 tests/gpu/torch-compare.py [ALIGN] [--device cuda|cpu] [--keep DIR] [--skip-missing]
                                        [--explain OP,OP...] [--ops OP,OP...] [--probe]
       python3 tests/gpu/torch-compare.py [ALIGN] --self-test      (no torch needed)

ALIGN defaults to build-gpu/harness/align (--self-test: build/harness/align, device cpu).
--skip-missing: exit 77 (skip) instead of 2 when torch, CUDA or a GPU is missing (the suite-gpu test).
--explain OPS: also hand PyTorch's outputs of these ops (the *-cuda cases) to `ALIGN explain --device D`
(issue 19: PyTorch eager CUDA outputs explained as the *-cuda profiles' choices) and print, per case,
whether an assignment reproduces them and whether the case's own profile is among those that do; these
rows are reported, not judged (the exit status is the comparison's).
--ops OPS: only the cases of these ops (a short GPU call that re-checks one op).
--probe: only the reduction-order probes (probe_orders, probe_cols), then exit 0.

For each case the script writes the inputs itself (hand-written safetensors, with pathological
values), runs `ALIGN run OP --device D --profile P --inputs in.st --outputs out.st --shape ...`,
computes the same op with PyTorch eager ops on CUDA in the unfused order the framework uses, and
compares the bit patterns element by element (differing elements, max ULP distance).

Profiles: megatron-cuda and deepseek-ref-cuda (GPU only: the framework-mimic modes, MATH_IMPL=cuda,
ROUTER_TOPK_ORDER=torch, ROUTER_SUM=torch, MHC_SUM_ORDER=torch on top of megatron / deepseek-ref) are the
verdict rows: they must be bitwise equal to PyTorch. The portable megatron and deepseek-ref profiles are
run as well, for contrast (their differences are expected: portable numerics are not CUDA's).
Cases (contracts in kernels/ops/swiglu.h, router.h, mhc_pre.h):
  swiglu_bwd  dg, du of swiglu_bwd.h (inclusive clamp masks, factored silu', d = F(da) * p) as torch fp32 ops.
  router_bwd  dl: autograd of the router case's sqrt(softplus) forward on its exact logits (dx, dw: GEMMs, left out).
  swiglu   clamp(u,-10,10), min(g,10), silu, * u in fp32; megatron: R(F(R(a)) * p) (two
           roundings, SWIGLU_ROUND=double); deepseek-ref: R(a * p) (one rounding).
  router   D=2 logits that are exact in fp32 whatever the GEMM order (so only the score, top-k and
           normalisation are measured); sqrt(softplus(l)) [+1e-20 inside the sqrt in the
           '+sqrtsoftplus_eps' rows], torch.topk(sorted) on s + bias, gather, w / sum(w)
           (deepseek-ref) or w / (sum(w) + 1e-20) (megatron), * 1.5. Outputs idx and wt.
  mhc_pre  fn = 0, so h = base exactly on both sides; the Sinkhorn C1 contract, pre = sigmoid + eps,
           post = 2 sigmoid, y = R(sum_j pre'_j x_j). deepseek-ref: torch.exp/sigmoid/softmax;
           megatron (MHC_EXP=exp2, MHC_COEF=bf16): exp2(x * log2e) and pre' = F(R(pre)).
  router-sigmoid  `align run router --variant 1` (V3.2 gate): sigmoid(l), 8 groups keep 4 (group score =
           top-K/4 values summed, torch.topk on the group scores), other groups' b = -inf
           (masked_fill), torch.topk(K) on b, w / sum(w) [+ 1e-20 for megatron], * 2.5.
  sparse_attn  megatron-cuda only (its unfused fp32 path; DS-ref's online bf16-P TileLang kernel has no
           eager form): S = where(valid, (F(q)*F(kv_g)).sum(-1) * scale, -inf), m = max(S.amax(-1), sink),
           e = exp(S - m), p = e / (e.sum(-1) + exp(sink - m)), o = R((p * kv_g).sum(-2)), the sink in the
           max, fp32 throughout; kv_g = kv[idx] with invalid rows 0. Inputs with tied slots (repeated
           indices), all -1 rows, huge logits (exp underflow), tiny logits (uniform weights).
  sparse_attn_bwd  megatron-cuda with CSA_BWD_SOFTMAX=autograd (kernels/ops/sparse_attn_bwd_ag.h): autograd
           of the sparse_attn reference above with q a bf16 leaf (dq = its bf16 grad), kv an fp32 leaf
           (dkv fp32), sink an fp32 leaf; o.backward(do): the max's gradient (amax, maximum with the
           sink), DivBackward0, the H sums of kv_g's gradient before index_put_'s sorted scatter.
  mhc_post_bwd, mhc_pre_bwd  deepseek-ref-cuda with autograd's orders (MHC_BWD_DSUM=torch; pre also
           MHC_BWD_SINKHORN=autograd, MHC_BWD_TSUM=torch): autograd of x_new = R(post f + comb^T x)
           (fp32, the comb^T x by torch.matmul), and of the mhc_pre reference above (fn = 0, the Sinkhorn
           loop unrolled by autograd: DivBackward0's g / d and -(g * ((m / d) / d)) summed by sum_to,
           softmax's backward kernel, the base's expand summed over the tokens).
  rope     x[T,H,D] bf16, pos[T] i32 (0, 1, 65535, 1048575 and random positions; signed zeros, bf16
           extremes that keep every sum finite). Frequencies as the frameworks compute them on the GPU:
           base ** (arange(0, 64, 2) / 64) (powf), YaRN ramp from the binary64 correction range;
           deepseek-ref: freqs / factor * (1 - smooth) + freqs * smooth, cos/sin of outer(pos, freqs) in
           fp32, the complex product written as fp32 tensor ops (xr*c - xi*s, xr*s + xi*c), one bf16
           rounding; megatron: 1 / (factor * pos_freqs), cos/sin cast to bf16, de-interleave,
           t*cos + rotate_half(t)*sin on bf16 tensors, re-interleave. Variants: 0 YaRN (DSv4 compressed
           layer), 1 inverse (sin negated), 2 plain RoPE (window layer), 3 DS-V3.2 indexer (first 64 dims,
           rotate-half pairs). The row "deepseek-ref-cuda+complex64-informational" is not judged: the same math through
           torch.view_as_complex(x) * polar(1, angle) (c10::complex multiply, which nvcc may contract into
           fused multiply-adds; align's fp32 arith is the unfused form).
  rope_bwd autograd of the rope case's reference (x a bf16 leaf, y.backward(dy)) for the four variants: the
           slices' gradients summed into x.grad, Megatron's bf16 products summed in bf16; dy has no zeros, so
           no dx element is a signed zero (PyTorch's zero-filled slice sums give +0 where rope_bwd keeps -0).
  indexer  q, k small integers and w bf16 values chosen so that every dot product and head sum is exact in
           fp32 whatever the einsum/cuBLAS order (only the roundings, relu, mask and top-k are measured),
           with duplicated key rows and zero rows (exact score ties, +0 scores) and rows with fewer
           visible entries than k (-1 padding). deepseek-ref: weights R(w * (D^-0.5 H^-0.5)), bf16 einsum,
           relu, bf16 multiply, bf16 head sum; megatron: R(R(w * H^-0.5) * D^-0.5), fp32 einsum, relu,
           * weights, fp32 head sum. Then -inf for c >= (t+1)//4, torch.topk(min(K,S), sorted=True),
           causal-invalid -> -1, others + offset 0; K=4 (bitonic sort) and K=36 (stable sort). Outputs idx
           and score.
  compressor  deepseek-ref-cuda with CSA_QAT=off and RMSNORM_REDUCE=torch: DS-ref's Compressor.forward as eager
           ops (fp32 projections on inputs that make them exact, + ape, the [T, N K, F] window, softmax(dim=1),
           (kv * score).sum(dim=1), RMSNorm of the bf16 entry, RoPE on the last 64 dims at g K); K = 4 (N = 2,
           overlapping) and K = 128 (N = 1). Output c.
  xent     F.cross_entropy(logits.float(), labels, ignore_index=-1) with reduction 'none' (output loss)
           and 'mean' (output mean) on CUDA, V = 512 and V = 1000 (<= 1024: PyTorch's persistent
           log_softmax kernel, XENT_SUM=torch; nll_loss's 32-lane mean, XENT_MEAN=torch32); logits bf16
           under megatron (LMHEAD_LOGITS=bf16: Megatron's bf16 output layer, widened as its loss does)
           and f32 under deepseek-ref; rows with ties, a constant row, a row of large logits, and
           ignored labels (-1) including one whole sequence. lse is not compared (torch.logsumexp
           sums in another kernel).
  embedding_bwd  autograd of F.embedding(ids, w) (times 0.1 in variant 2) with w the bf16 parameter: ATen's
           feature kernel at T = 100 (chunks of 32 tokens, bf16 adds per chunk), its sorted two-step sum at
           T = 4000, V = 600 (partials of 10); ids with heavy repeats. EMBED_BWD_ORDER=torch is portable (every
           profile's default), so the portable rows must match too.
  xent_bwd autograd of the xent case's F.cross_entropy(logits.float(), labels, ignore_index=-1): reduction
           'none' backward from a dloss with zeros of both signs, tiny and huge values, and 'mean' backward
           from 1 (align's dloss: R32(1 / count), nll_loss's grad / total_weight); the *-cuda profiles'
           XENT_BWD_PROB=explsm, XENT_BWD_FORM=lsm_fma (exp of the saved log_softmax, gO - exp(out) * sum
           as nvcc's fmaf). Output dlogits (bf16 under megatron: the .float() backward's rounding).
  lm_head  informational only, as matmul: MATMUL_IMPL=cublas against F.linear(x, w.bfloat16()) (megatron,
           bf16 logits) or x.float() @ w.t() without TF32 (deepseek-ref, fp32 logits).
  dsa_indexer (megatron profiles only: the unfused fp32 DSAIndexer; the FP8 path is TileLang, not torch) q, k
           small integers, D = 16 (Hadamard scale 1/4: the fp32 butterfly written as torch ops, strides ascending,
           then * D^-0.5 and bf16, is exact), w bf16 values: R(R(w * H^-0.5) * D^-0.5), fp32 einsum, relu,
           * weights, fp32 head sum, -inf for keys j > t, torch.topk(min(K,S), sorted=True), masked -> -1;
           duplicated key rows and zero rows give exact ties. Outputs idx and score.
  matmul   informational only (not part of the verdict): MATMUL_IMPL=cublas against torch's a @ b.t()
           in bf16 (both cuBLAS; equal bits need the same algorithm choice, which depends on the
           workspace and heuristics of each library build).
Before the cases, a probe (torch only) reports which association PyTorch's CUDA sum(-1), sum(-2) and
softmax use on this machine, against align's model in kernels/core/torch_order.h.

Exit 0 when every output of the mimic profiles is bitwise equal to PyTorch, 1 when one differs (the
portable rows never fail the run: their differences are expected), 2 when something could not be
run (align failed, outputs missing, torch or CUDA missing).
"""
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
from fractions import Fraction

# ---------------------------------------------------------------------------------------------
# tensors as (dtype, shape, list of raw bit patterns as unsigned ints); no numpy

WIDTH = {"BF16": 2, "F32": 4, "I32": 4}
PACK = {"BF16": "H", "F32": "I", "I32": "I"}


class Fail(Exception):
    pass


class Missing(Fail):
    """torch, CUDA or a GPU is not there (a skip for the suite-gpu test)"""


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
    if base_profile(profile) == "megatron":  # clamped_weighted_swiglu: R(a), * fp32 probs, R()
        out = (a.to(torch.bfloat16) * p).to(torch.bfloat16)
    else:  # DS-ref: p * a in fp32, one rounding
        out = (p * a).to(torch.bfloat16)
    return {"a": out}


def swiglu_bwd_inputs(T, F):
    inp = dict(swiglu_inputs(T, F))
    r = random.Random(4321)
    da = [bf16_bits(v) for v in [1.0, -1.0, 0.0, -0.0] + [r.uniform(-3, 3) for _ in range(T * F)]][:T * F]
    inp["da"] = tensor("BF16", [T, F], da)
    return inp


def torch_swiglu_bwd(torch, F, inp, profile, dev, limit=10.0):
    """swiglu_bwd.h with torch fp32 tensor ops in the contract's order (Megatron's weighted_swiglu_back as
    torch.compile runs it: fp32 inside, dg/du rounded once): clamp masks inclusive (torch.clamp's backward),
    the factored silu' (swiglu_back), d = F(da) * p. dp is not compared: torch.sum(-1)'s order is not one of
    ALIGN_SWIGLU_BWD_DP_SUM's."""
    g = to_torch(torch, inp["g"], dev).float()
    u = to_torch(torch, inp["u"], dev).float()
    p = to_torch(torch, inp["p"], dev).unsqueeze(-1)
    da = to_torch(torch, inp["da"], dev).float()
    mg = g <= limit
    mu = (u >= -limit) & (u <= limit)
    u = torch.clamp(u, -limit, limit)
    g = torch.clamp(g, max=limit)
    sig = torch.sigmoid(g)
    d = da * p
    t = (d * sig) * (1.0 + g * (1.0 - sig))
    zero = torch.zeros_like(g)
    return {"dg": torch.where(mg, t * u, zero).to(torch.bfloat16),
            "du": torch.where(mu, d * F.silu(g), zero).to(torch.bfloat16)}


def base_profile(profile):
    return profile[:-5] if profile.endswith("-cuda") else profile


def torch_router(torch, F, inp, profile, dev, K, sp_eps, sigmoid=False, groups=0, keep=0):
    route_scale = 2.5 if sigmoid else 1.5
    x = to_torch(torch, inp["x"], dev)
    w = to_torch(torch, inp["w"], dev)
    bias = to_torch(torch, inp["bias"], dev)
    if base_profile(profile) == "megatron":  # weight cast to params_dtype (bf16), fp32 GEMM output
        w = w.to(torch.bfloat16)
    logits = x.float() @ w.float().t()
    if sigmoid:
        s = torch.sigmoid(logits)
    else:
        sp = F.softplus(logits)
        s = torch.sqrt(sp + 1e-20) if sp_eps else torch.sqrt(sp)
    b = s + bias
    if groups > 1:  # group-limited: top K/keep values per group summed, keep the best groups
        T, E = b.shape
        per = max(K // keep, 1)
        gs = b.view(T, groups, E // groups).topk(per, dim=-1, sorted=True).values.sum(dim=-1)
        gidx = torch.topk(gs, keep, dim=-1, sorted=True).indices
        gmask = torch.zeros_like(gs).scatter_(1, gidx, 1.0)
        emask = gmask.unsqueeze(-1).expand(T, groups, E // groups).reshape(T, E)
        b = b.masked_fill(emask == 0, float("-inf"))
    idx = torch.topk(b, K, dim=-1, sorted=True).indices
    wt = s.gather(1, idx)
    den = wt.sum(dim=-1, keepdim=True)
    if base_profile(profile) == "megatron":
        den = den + 1e-20
    wt = wt / den * route_scale
    return {"idx": idx.to(torch.int32), "wt": wt}


def router_bwd_inputs(T, E, K):
    inp = dict(router_inputs(T, E, K))
    r = random.Random(77)
    dwt = [1.0, -1.0, 0.5, 0.0] + [r.uniform(-2, 2) for _ in range(T * K)]
    inp["dwt"] = tensor("F32", [T, K], [f32_bits(v) for v in dwt[:T * K]])
    return inp


def torch_router_bwd(torch, F, inp, profile, dev, K, sp_eps):
    """router_bwd.h's dl as PyTorch autograd computes it on the logits (exact here: D = 2) of the forward
    in torch_router: sqrt_backward, softplus_backward, gather's scatter, div and sum backward (the den
    gradient reduced over K by torch's sum, ROUTER_SUM=torch in the *-cuda profiles), mul by the scale.
    dx and dw (GEMMs) are not compared."""
    x = to_torch(torch, inp["x"], dev)
    w = to_torch(torch, inp["w"], dev)
    bias = to_torch(torch, inp["bias"], dev)
    dwt = to_torch(torch, inp["dwt"], dev)
    if base_profile(profile) == "megatron":
        w = w.to(torch.bfloat16)
    with torch.enable_grad():
        logits = (x.float() @ w.float().t()).detach().requires_grad_(True)
        sp = F.softplus(logits)
        s = torch.sqrt(sp + 1e-20) if sp_eps else torch.sqrt(sp)
        idx = torch.topk(s.detach() + bias, K, dim=-1, sorted=True).indices
        wt = s.gather(1, idx)
        den = wt.sum(dim=-1, keepdim=True)
        if base_profile(profile) == "megatron":
            den = den + 1e-20
        wt = wt / den * 1.5
        wt.backward(dwt)
    return {"dl": logits.grad}


LOG2E_F = 1.4426950408889634  # rounded to fp32 when it multiplies an fp32 tensor


def torch_mhc_pre(torch, F, inp, profile, dev, N, iters=20, eps=1e-6):
    x = to_torch(torch, inp["x"], dev)
    base = to_torch(torch, inp["base"], dev)
    T = x.shape[0]
    h = base.unsqueeze(0).expand(T, -1)  # fn = 0: mix = 0, h = (0 * rs) * scale + base = base
    if base_profile(profile) == "megatron":  # Triton/cuTile: exp2((.) * log2e)
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
    coef = pre.to(torch.bfloat16).float() if base_profile(profile) == "megatron" else pre
    y = (coef.unsqueeze(-1) * x.float()).sum(dim=1).to(torch.bfloat16)
    return {"y": y, "pre": pre.contiguous(), "post": post.contiguous(), "comb": m.contiguous()}


# ---------------------------------------------------------------------------------------------
# cases

SW_T, SW_F = 4, 64
R_T, R_E, R_K = 8, 16, 4
M_T, M_N, M_D = 2, 4, 8
MM_T, MM_D, MM_F = 128, 1024, 512
SA_T, SA_H, SA_D, SA_S, SA_N = 8, 4, 64, 40, 48  # D < 128, N < 64: ALIGN_CSA_SUM_ORDER=torch's range
PROFILES = ["megatron-cuda", "deepseek-ref-cuda", "megatron", "deepseek-ref"]
VERDICT_PROFILES = ("megatron-cuda", "deepseek-ref-cuda")  # must be bitwise equal to PyTorch


RP_T, RP_H, RP_D = 16, 2, 128
RP_POS = [0, 1, 2, 65535, 65536, 1048575, 4096, 127, 128, 100000]


def rope_inputs(T, H, D):
    r = random.Random(4242)
    special = [0.0, -0.0, 1.0, -1.0, 3.0e30, -3.0e30, 2.0 ** -126, -(2.0 ** -130), 65504.0, 0.5]
    x = []
    for i in range(T * H * D):
        if i % 13 == 0:
            x.append(bf16_bits(special[(i // 13) % len(special)]))
        else:
            x.append(rnd_bf16(r, -4, 4))
    pos = (RP_POS + [r.randrange(0, 1 << 20) for _ in range(T)])[:T]
    return {"x": tensor("BF16", [T, H, D], x), "pos": tensor("I32", [T], [i32_bits(v) for v in pos])}


# rope variants of kernels/ops/rope.c params_variant: (base, factor, original_seq_len, inverse, first, half)
ROPE_VARIANTS = {0: (160000.0, 16.0, 65536, False, False, False), 1: (160000.0, 16.0, 65536, True, False, False),
                 2: (10000.0, 16.0, 0, False, False, False), 3: (10000.0, 40.0, 4096, False, True, True)}


def rope_freqs(torch, dev, base, factor, orig, mul_form, dim=64, beta_fast=32, beta_slow=1):
    pw = base ** (torch.arange(0, dim, 2, dtype=torch.float32, device=dev) / dim)
    f = 1.0 / pw
    if orig <= 0:
        return f

    def cdim(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(cdim(beta_fast)), 0)
    high = min(math.ceil(cdim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32, device=dev) - low) / (high - low), 0, 1)
    smooth = 1 - ramp
    fi = 1.0 / (factor * pw) if mul_form else f / factor
    return fi * (1 - smooth) + f * smooth


def torch_rope(torch, inp, profile, dev, variant, complex64=False, x=None):
    base, factor, orig, inverse, first, half = ROPE_VARIANTS[variant]
    x = to_torch(torch, inp["x"], dev) if x is None else x
    pos = to_torch(torch, inp["pos"], dev).float()
    meg = base_profile(profile) == "megatron"
    ang = torch.outer(pos, rope_freqs(torch, dev, base, factor, orig, meg)).unsqueeze(1)  # [T,1,32]
    rd = 64
    xr = x[..., :rd] if first else x[..., -rd:]
    if half:
        a, b = xr[..., :rd // 2], xr[..., rd // 2:]
    else:
        a, b = xr[..., 0::2], xr[..., 1::2]
    if meg:  # bf16 cos/sin, bf16 tensor ops (three roundings)
        c = torch.cos(ang).to(torch.bfloat16)
        s = torch.sin(ang).to(torch.bfloat16)
        if inverse:
            s = -s
        ya = a * c + (-b) * s
        yb = b * c + a * s
    elif complex64:
        z = torch.view_as_complex(torch.stack((a.float(), b.float()), -1).contiguous())
        cis = torch.polar(torch.ones_like(ang), ang)
        if inverse:
            cis = cis.conj()
        y = torch.view_as_real(z * cis)
        ya, yb = y[..., 0].to(torch.bfloat16), y[..., 1].to(torch.bfloat16)
    else:  # fp32 cos/sin, the complex product as unfused fp32 ops, one rounding
        c, s = torch.cos(ang), torch.sin(ang)
        if inverse:
            s = -s
        af, bf = a.float(), b.float()
        ya = (af * c - bf * s).to(torch.bfloat16)
        yb = (af * s + bf * c).to(torch.bfloat16)
    rot = torch.cat((ya, yb), -1) if half else torch.stack((ya, yb), -1).flatten(-2)
    out = torch.cat((rot, x[..., rd:]), -1) if first else torch.cat((x[..., :-rd], rot), -1)
    return {"y": out}


def rope_bwd_inputs(T, H, D):
    """dy without zeros (and no underflowing products), so no gradient element is a signed zero: PyTorch sums
    the slices' zero-filled gradients (+0 + -0 = +0), which rope_bwd.h does not model; rope_inputs' positions"""
    r = random.Random(4343)
    special = [1.0, -1.0, 3.0e30, -3.0e30, 65504.0, 0.5, 2.0 ** -60]
    dy = []
    for i in range(T * H * D):
        if i % 13 == 0:
            dy.append(bf16_bits(special[(i // 13) % len(special)]))
        else:
            v = rnd_bf16(r, -4, 4)
            dy.append(v if v & 0x7FFF else bf16_bits(0.25))
    return {"dy": tensor("BF16", [T, H, D], dy), "pos": rope_inputs(T, H, D)["pos"]}


def torch_rope_bwd(torch, inp, profile, dev, variant):
    """autograd of torch_rope (the rope case's reference) with x a bf16 leaf: y.backward(dy), dx = x.grad"""
    T, H, D = inp["dy"][1]
    with torch.enable_grad():
        x = torch.zeros((T, H, D), dtype=torch.bfloat16, device=dev, requires_grad=True)
        y = torch_rope(torch, {"pos": inp["pos"]}, profile, dev, variant, x=x)["y"]
        y.backward(to_torch(torch, inp["dy"], dev))
    return {"dx": x.grad}


def indexer_inputs(T, H, D, S):
    r = random.Random(777)
    q = [bf16_bits(float(r.randrange(-3, 4))) for _ in range(T * H * D)]
    kr = []
    for s_ in range(S):
        if s_ % 5 == 3:
            kr.append(list(kr[s_ - 2]))  # duplicate: exact ties
        elif s_ % 7 == 6:
            kr.append([0.0] * D)  # zero row: +0 scores
        else:
            kr.append([float(r.randrange(-3, 4)) for _ in range(D)])
    k = [bf16_bits(v) for row in kr for v in row]
    w = [bf16_bits(r.choice([1.0, -1.0, 0.5, 2.0, -0.75, 3.0, 0.0, 1.25])) for _ in range(T * H)]
    return {"q": tensor("BF16", [T, H, D], q), "k": tensor("BF16", [S, D], k), "w": tensor("BF16", [T, H], w)}


def torch_indexer(torch, inp, profile, dev, K, ratio=4):
    q = to_torch(torch, inp["q"], dev)
    k = to_torch(torch, inp["k"], dev)
    w = to_torch(torch, inp["w"], dev)
    T, H, D = q.shape
    S = k.shape[0]
    if base_profile(profile) == "megatron":
        wb = (w * H ** -0.5) * D ** -0.5
        sc = torch.einsum("thd,sd->ths", q.float(), k.float())
        sc = (torch.relu(sc) * wb.float().unsqueeze(-1)).sum(dim=1)
    else:
        wb = w * (D ** -0.5 * H ** -0.5)
        sc = torch.einsum("thd,sd->ths", q, k)
        sc = (sc.relu_() * wb.unsqueeze(-1)).sum(dim=1)
    t = torch.arange(T, device=dev).unsqueeze(1)
    c = torch.arange(S, device=dev).unsqueeze(0)
    masked = c >= (t + 1) // ratio
    sc = sc.masked_fill(masked, float("-inf"))
    kk = min(K, S)
    sel = sc.topk(kk, dim=-1, sorted=True)[1]
    sel = torch.where(sel >= ((t + 1) // ratio), torch.full_like(sel, -1), sel)
    if kk < K:
        sel = torch.cat((sel, torch.full((T, K - kk), -1, dtype=sel.dtype, device=dev)), -1)
    return {"idx": sel.to(torch.int32), "score": sc.float()}


def torch_hadamard_bf16(torch, x):
    """fp32 butterfly (strides 1, 2, 4, ... ascending; (a+b, a-b)), then * D**-0.5, bf16: hadamard.h BUTTERFLY"""
    D = x.shape[-1]
    y = x.float()
    h = 1
    while h < D:
        z = y.reshape(*y.shape[:-1], D // (2 * h), 2, h)
        a, b = z[..., 0, :], z[..., 1, :]
        y = torch.stack((a + b, a - b), -2).reshape(*y.shape[:-1], D)
        h *= 2
    return (y * D ** -0.5).to(torch.bfloat16)


def torch_dsa_indexer(torch, inp, dev, K):
    q = torch_hadamard_bf16(torch, to_torch(torch, inp["q"], dev))
    k = torch_hadamard_bf16(torch, to_torch(torch, inp["k"], dev))
    w = to_torch(torch, inp["w"], dev)
    T, H, D = q.shape
    S = k.shape[0]
    wb = (w * H ** -0.5) * D ** -0.5
    sc = torch.einsum("thd,sd->ths", q.float(), k.float())
    sc = (torch.relu(sc) * wb.float().unsqueeze(-1)).sum(dim=1)
    t = torch.arange(T, device=dev).unsqueeze(1)
    c = torch.arange(S, device=dev).unsqueeze(0)
    sc = sc.masked_fill(c > t, float("-inf"))
    kk = min(K, S)
    sel = sc.topk(kk, dim=-1, sorted=True)[1]
    sel = torch.where(sel > t, torch.full_like(sel, -1), sel)
    if kk < K:
        sel = torch.cat((sel, torch.full((T, K - kk), -1, dtype=sel.dtype, device=dev)), -1)
    return {"idx": sel.to(torch.int32), "score": sc.float()}


def matmul_inputs(T, D, F):
    r = random.Random(11)
    # the op takes f32 tensors; bf16-exact values, so MATMUL_OPERAND=bf16 rounds nothing away
    return {"a": tensor("F32", [T, D], [rnd_bf16(r, -2, 2) << 16 for _ in range(T * D)]),
            "b": tensor("F32", [F, D], [rnd_bf16(r, -0.1, 0.1) << 16 for _ in range(F * D)])}


def torch_matmul(torch, inp, dev):
    a = to_torch(torch, inp["a"], dev).bfloat16()
    b = to_torch(torch, inp["b"], dev).bfloat16()
    return {"y": a @ b.t()}  # nn.Linear without bias: cuBLAS bf16 GEMM, fp32 accumulate, bf16 out


# backward cases (issue 18): PyTorch autograd of the forward as the framework writes it, against the
# *_bwd ops. Informational until the torch sum orders of the backward reductions are modelled (the row
# sums of the norms, the token sums of the weight gradients) and a cuBLAS engine reads the matmul's.
BW_T, BW_D, BW_F, BW_H = 16, 64, 32, 4


def matmul_bwd_inputs(T, D, F):
    r = random.Random(18)
    return {"a": tensor("F32", [T, D], [rnd_bf16(r, -2, 2) << 16 for _ in range(T * D)]),
            "b": tensor("F32", [F, D], [rnd_bf16(r, -0.1, 0.1) << 16 for _ in range(F * D)]),
            "dy": tensor("F32", [T, F], [rnd_bf16(r, -0.01, 0.01) << 16 for _ in range(T * F)]),
            "main_grad": tensor("BF16", [F, D], [0] * (F * D))}  # WGRAD_ACCUM=fresh: not read


def torch_matmul_bwd(torch, inp, dev):
    with torch.enable_grad():
        a = to_torch(torch, inp["a"], dev).bfloat16().requires_grad_()
        b = to_torch(torch, inp["b"], dev).bfloat16().requires_grad_()
        (a @ b.t()).backward(to_torch(torch, inp["dy"], dev).bfloat16())  # nn.Linear's mm backward
    return {"da": a.grad, "db": b.grad}


def norm_bwd_inputs(shape, weight):
    r = random.Random(19)
    n, D = numel(shape), shape[-1]
    out = {"x" if weight else "q": tensor("BF16", shape, [rnd_bf16(r, -3, 3) for _ in range(n)])}
    if weight:
        out["w"] = tensor("F32", [D], [f32_bits(r.uniform(0.5, 1.5)) for _ in range(D)])
    out["dy"] = tensor("BF16", shape, [rnd_bf16(r, -0.05, 0.05) for _ in range(n)])
    return out


CP_T, CP_D, CP_F = 8, 16, 128  # groups, hidden, entry width (rope_dim 64 <= F)


def compressor_inputs(T, K, N, D, F):
    """x and the projections small multiples of 1/8 (every dot product over D = 16 is exact in fp32 and in
    bf16 whatever cuBLAS's order: only the window softmax, its sum, the norm and RoPE are measured), ape
    random fp32 (distinct softmax weights), the norm weight near 1."""
    r = random.Random(9090 + K)
    x = [bf16_bits(r.randint(-3, 3)) for _ in range(T * K * D)]
    wk = [bf16_bits(r.randint(-4, 4) / 8.0) for _ in range(N * F * D)]
    wz = [bf16_bits(r.randint(-4, 4) / 8.0) for _ in range(N * F * D)]
    ape = [f32_bits(r.uniform(-2.0, 2.0)) for _ in range(K * N * F)]
    w = [f32_bits(1.0 + r.uniform(-0.25, 0.25)) for _ in range(F)]
    return {"x": tensor("BF16", [T * K, D], x), "wkv": tensor("BF16", [N * F, D], wk),
            "wgate": tensor("BF16", [N * F, D], wz), "ape": tensor("F32", [K, N * F], ape), "w": tensor("F32", [F], w)}


def torch_compressor(torch, inp, dev, K, N, eps=1e-6):
    """DS-ref Compressor.forward (QAT off, main compressor: no Hadamard) as PyTorch eager ops on CUDA:
    fp32 projections, + ape, the [T, N K, F] window (the previous group's first F channels, -inf / 0 before
    group 0, then the own group's last F), softmax(dim=1) (ATen's spatial softmax: F > 64, one thread per
    (group, channel)), (kv * score).sum(dim=1) (ATen's strided-dim reduction), RMSNorm on the bf16 entry
    (fp32 inside, x.square().mean(-1): ALIGN_RMSNORM_REDUCE=torch), RoPE on the last 64 dims at g K."""
    x = to_torch(torch, inp["x"], dev).float()
    kv = x @ to_torch(torch, inp["wkv"], dev).float().t()
    sc = x @ to_torch(torch, inp["wgate"], dev).float().t()
    F = inp["w"][1][0]
    T = x.shape[0] // K
    sc = (sc.view(T, K, N * F) + to_torch(torch, inp["ape"], dev)).view(T * K, N * F)
    kv3, sc3 = kv.view(T, K, N * F), sc.view(T, K, N * F)
    if N == 2:
        kw = torch.zeros(T, 2 * K, F, dtype=torch.float32, device=dev)
        sw = torch.full((T, 2 * K, F), float("-inf"), dtype=torch.float32, device=dev)
        kw[1:, :K] = kv3[:-1, :, :F]
        sw[1:, :K] = sc3[:-1, :, :F]
        kw[:, K:] = kv3[:, :, F:]
        sw[:, K:] = sc3[:, :, F:]
    else:
        kw, sw = kv3.contiguous(), sc3.contiguous()
    c = (kw * sw.softmax(dim=1)).sum(dim=1)
    xf = c.to(torch.bfloat16).float()
    w = to_torch(torch, inp["w"], dev)
    y = (w * (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps))).to(torch.bfloat16)
    pos = {"pos": tensor("I32", [T], [i32_bits(g * K) for g in range(T)])}
    return {"c": torch_rope(torch, pos, "deepseek-ref-cuda", dev, 0, x=y.unsqueeze(1))["y"].squeeze(1)}


def torch_rmsnorm_bwd(torch, inp, dev, eps=1e-6):
    with torch.enable_grad():  # DS-ref RMSNorm: fp32 inside, fp32 weight, bf16 out
        x = to_torch(torch, inp["x"], dev).requires_grad_()
        w = to_torch(torch, inp["w"], dev).requires_grad_()
        xf = x.float()
        y = (w * (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps))).to(torch.bfloat16)
        y.backward(to_torch(torch, inp["dy"], dev))
    return {"dx": x.grad, "dw": w.grad}


def torch_rmsnorm(torch, inp, dev, eps=1e-6):  # DS-ref RMSNorm forward: fp32 inside, fp32 weight, bf16 out
    x = to_torch(torch, inp["x"], dev)
    w = to_torch(torch, inp["w"], dev)
    xf = x.float()
    return {"y": (w * (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps))).to(torch.bfloat16)}


# RMSNORM_REDUCE=torch (torch_order.h torch_rowsum): shapes that cover its plan's branches: scalar rows (D <=
# 128) and float4 rows, one row (block.x up to 512 lanes, shared tree), 8 rows (64 lanes), >= 16 rows (32),
# unaligned row starts (D % 4 != 0: the head and tail lanes). The block.y split (8 x 8192, 16 x 8200) is
# refused since 2026-12-03: y and dx were equal there on the H200 but dw, whose x.sum(0) order probe_cols
# confirmed at those shapes, differed (r on some rows, hidden by the bf16 outputs?): the next probe decides
TORCH_NORM_SHAPES = ((16, 64), (1, 64), (1, 4096), (1, 7168), (8, 4096), (16, 129), (3, 257), (200, 300),
                     (64, 4096), (2, 1000), (1, 9000),
                     (8, 8192), (16, 8200))  # rows split over block.y: block.x's tree first (H200, 2026-12-03)


def torch_qnorm_bwd(torch, inp, dev, eps=1e-6):
    with torch.enable_grad():  # DS-ref q norm: every op on the bf16 tensor
        q = to_torch(torch, inp["q"], dev).requires_grad_()
        y = q * torch.rsqrt(q.square().mean(-1, keepdim=True) + eps)
        y.backward(to_torch(torch, inp["dy"], dev))
    return {"dq": q.grad}


def sparse_attn_inputs(T, H, D, S, N):
    r = random.Random(17)
    q = []
    for t in range(T):
        mag = 16.0 if t == 3 else 1e-30 if t == 4 else 1.0  # huge logits; tiny logits
        q += [bf16_bits(r.uniform(-1, 1) * mag) for _ in range(H * D)]
    kv = [rnd_bf16(r, -2, 2) for _ in range(S * D)]
    idx = []
    for t in range(T):
        W = N // 2
        if t == 5:  # no valid slot at all
            idx += [-1] * N
            continue
        win = [j if j <= t + 8 else -1 for j in range(max(0, t - W + 1), max(0, t - W + 1) + W)]
        comp = [r.randrange(S) if r.random() < 0.8 else -1 for _ in range(N - W)]
        if t == 6:  # ties: one kv row repeated in every compressed slot
            comp = [7] * (N - W)
        idx += win + comp
    return {"q": tensor("BF16", [T, H, D], q), "kv": tensor("BF16", [S, D], kv),
            "idx": tensor("I32", [T, N], [v & 0xFFFFFFFF for v in idx]),
            "sink": tensor("F32", [H], [f32_bits(r.uniform(-2, 2)) for _ in range(H)])}


def torch_sparse_attn(torch, inp, dev, D):
    q = to_torch(torch, inp["q"], dev).float()
    kv = to_torch(torch, inp["kv"], dev).float()
    idx = to_torch(torch, inp["idx"], dev).long()
    sink = to_torch(torch, inp["sink"], dev).view(1, -1, 1)
    S = kv.shape[0]
    valid = (idx >= 0) & (idx < S)
    kvg = torch.where(valid.unsqueeze(-1), kv[idx.clamp(0, S - 1)], torch.zeros((), device=dev))  # [T,N,D]
    scale = struct.unpack("<f", struct.pack("<f", D ** -0.5))[0]
    dot = (q.unsqueeze(2) * kvg.unsqueeze(1)).sum(-1)  # [T,H,N]
    scores = torch.where(valid.unsqueeze(1), dot * scale, torch.full((), float("-inf"), device=dev))
    m = torch.maximum(scores.amax(-1, keepdim=True), sink)
    e = torch.exp(scores - m)
    den = e.sum(-1, keepdim=True) + torch.exp(sink - m)
    p = e / den
    return {"o": (p.unsqueeze(-1) * kvg.unsqueeze(1)).sum(-2).to(torch.bfloat16)}


def sparse_attn_bwd_inputs(T, H, D, S, N):
    inp = dict(sparse_attn_inputs(T, H, D, S, N))
    r = random.Random(19)
    inp["do"] = tensor("BF16", [T, H, D], [rnd_bf16(r, -1, 1) for _ in range(T * H * D)])
    return inp


def torch_sparse_attn_bwd(torch, inp, dev, D):
    """autograd of torch_sparse_attn's formula: dq (bf16 leaf), dkv (fp32 leaf), dsink"""
    with torch.enable_grad():
        qb = to_torch(torch, inp["q"], dev).detach().requires_grad_()
        kvf = to_torch(torch, inp["kv"], dev).float().detach().requires_grad_()
        sk = to_torch(torch, inp["sink"], dev).detach().requires_grad_()
        q = qb.float()
        idx = to_torch(torch, inp["idx"], dev).long()
        sink = sk.view(1, -1, 1)
        S = kvf.shape[0]
        valid = (idx >= 0) & (idx < S)
        kvg = torch.where(valid.unsqueeze(-1), kvf[idx.clamp(0, S - 1)], torch.zeros((), device=dev))
        scale = struct.unpack("<f", struct.pack("<f", D ** -0.5))[0]
        dot = (q.unsqueeze(2) * kvg.unsqueeze(1)).sum(-1)
        scores = torch.where(valid.unsqueeze(1), dot * scale, torch.full((), float("-inf"), device=dev))
        m = torch.maximum(scores.amax(-1, keepdim=True), sink)
        e = torch.exp(scores - m)
        den = e.sum(-1, keepdim=True) + torch.exp(sink - m)
        p = e / den
        o = (p.unsqueeze(-1) * kvg.unsqueeze(1)).sum(-2).to(torch.bfloat16)
        o.backward(to_torch(torch, inp["do"], dev))
    return {"dq": qb.grad, "dkv": kvf.grad, "dsink": sk.grad.reshape(-1)}


def mhc_post_bwd_inputs(T, N, D):
    r = random.Random(29)
    return {"x": tensor("BF16", [T, N, D], [rnd_bf16(r, -2, 2) for _ in range(T * N * D)]),
            "f": tensor("BF16", [T, D], [rnd_bf16(r, -2, 2) for _ in range(T * D)]),
            "post": tensor("F32", [T, N], [f32_bits(r.uniform(0, 2)) for _ in range(T * N)]),
            "comb": tensor("F32", [T, N, N], [f32_bits(r.uniform(0, 0.5)) for _ in range(T * N * N)]),
            "dy": tensor("BF16", [T, N, D], [rnd_bf16(r, -1, 1) for _ in range(T * N * D)])}


def torch_mhc_post_bwd(torch, inp, dev):
    """autograd of x_new = R(post * f + comb^T x) in fp32 (the single-rounding contract)"""
    with torch.enable_grad():
        x = to_torch(torch, inp["x"], dev).detach().requires_grad_()
        f = to_torch(torch, inp["f"], dev).detach().requires_grad_()
        post = to_torch(torch, inp["post"], dev).detach().requires_grad_()
        comb = to_torch(torch, inp["comb"], dev).detach().requires_grad_()
        y = post.unsqueeze(-1) * f.float().unsqueeze(1) + torch.matmul(comb.transpose(-1, -2), x.float())
        y.to(torch.bfloat16).backward(to_torch(torch, inp["dy"], dev))
    return {"dx": x.grad, "df": f.grad, "dpost": post.grad, "dcomb": comb.grad}


def mhc_pre_bwd_inputs(T, N, D, base):
    inp = dict(mhc_inputs(T, N, D, base))
    r = random.Random(31)
    inp["dy"] = tensor("BF16", [T, D], [rnd_bf16(r, -1, 1) for _ in range(T * D)])
    inp["dpost"] = tensor("F32", [T, N], [f32_bits(r.uniform(-1, 1)) for _ in range(T * N)])
    inp["dcomb"] = tensor("F32", [T, N, N], [f32_bits(r.uniform(-1, 1)) for _ in range(T * N * N)])
    return inp


def torch_mhc_pre_bwd(torch, inp, dev, N, iters=20, eps=1e-6):
    """autograd of torch_mhc_pre's deepseek-ref formula (fn = 0, so h = base): the Sinkhorn loop unrolled by
    autograd; x a bf16 leaf, base an fp32 leaf (dbase = the sum over the tokens)"""
    with torch.enable_grad():
        x = to_torch(torch, inp["x"], dev).detach().requires_grad_()
        base = to_torch(torch, inp["base"], dev).detach().requires_grad_()
        T = x.shape[0]
        h = base.unsqueeze(0).expand(T, -1)
        pre = torch.sigmoid(h[:, :N]) + eps
        post = 2 * torch.sigmoid(h[:, N:2 * N])
        m = torch.softmax(h[:, 2 * N:].reshape(T, N, N), dim=-1) + eps
        m = m / (m.sum(dim=-2, keepdim=True) + eps)
        for _ in range(iters - 1):
            m = m / (m.sum(dim=-1, keepdim=True) + eps)
            m = m / (m.sum(dim=-2, keepdim=True) + eps)
        y = (pre.unsqueeze(-1) * x.float()).sum(dim=1).to(torch.bfloat16)
        loss_terms = [(y, to_torch(torch, inp["dy"], dev)), (post, to_torch(torch, inp["dpost"], dev)),
                      (m, to_torch(torch, inp["dcomb"], dev))]
        torch.autograd.backward([a for a, _ in loss_terms], [g for _, g in loss_terms])
    return {"dx": x.grad, "dbase": base.grad}


def xent_inputs(T, V, bf16):
    r = random.Random(23 + V)
    vals = []
    for t in range(T):
        if t == 2:
            row = [1.5] * V  # a constant row: every exp is 1
        elif t == 3:
            row = [rnd_bf16_val(r, -4, 4) + 60.0 for _ in range(V)]  # large logits, max subtracted
        else:
            row = [rnd_bf16_val(r, -8, 8) for _ in range(V)]
            if t == 5:
                row[7] = row[11] = max(row) + 1.0  # a tied maximum
        vals += row
    labels = [r.randrange(V) if r.random() < 0.85 else -1 for _ in range(T)]
    labels[16:32] = [-1] * 16  # one whole sequence ignored
    lg = (tensor("BF16", [T, V], [bf16_bits(v) for v in vals]) if bf16
          else tensor("F32", [T, V], [f32_bits(v) for v in vals]))
    return {"logits": lg, "labels": tensor("I32", [T], [v & 0xFFFFFFFF for v in labels])}


def rnd_bf16_val(r, lo, hi):
    return bits_bf16(rnd_bf16(r, lo, hi))


def torch_xent(torch, F, inp, dev):
    lg = to_torch(torch, inp["logits"], dev).float()  # bf16 widened exactly, as Megatron's loss does
    y = to_torch(torch, inp["labels"], dev).long()
    return {"loss": F.cross_entropy(lg, y, ignore_index=-1, reduction="none"),
            "mean": F.cross_entropy(lg, y, ignore_index=-1, reduction="mean").reshape(1)}


def xent_bwd_inputs(T, V, bf16, mean):
    """xent's inputs and dloss: the mean's gradient R32(1 / count) on every token (ignored ones too: the op
    and torch both ignore it there), or per-token values with zeros of both signs, tiny and large ones"""
    inp = dict(xent_inputs(T, V, bf16))
    labels = [b - (1 << 32) if b >= 1 << 31 else b for b in inp["labels"][2]]
    if mean:
        d = [f32_round_exact(Fraction(1, sum(1 for y in labels if y >= 0)))] * T
    else:
        r = random.Random(31 + V)
        d = [f32(r.uniform(-2, 2)) for _ in range(T)]
        d[0], d[1], d[4], d[6], d[9] = 0.0, -0.0, 1e-30, 3e30, 1.0 / 64
    inp["dloss"] = tensor("F32", [T], [f32_bits(v) for v in d])
    return inp


def torch_xent_bwd(torch, F, inp, dev, mean):
    """autograd of F.cross_entropy(logits.float(), labels, ignore_index=-1): reduction 'mean' backward from
    1, or 'none' backward from dloss; dlogits is the logits leaf's gradient (bf16: ToCopyBackward's rounding)"""
    with torch.enable_grad():
        leaf = to_torch(torch, inp["logits"], dev).detach().requires_grad_()
        y = to_torch(torch, inp["labels"], dev).long()
        if mean:
            F.cross_entropy(leaf.float(), y, ignore_index=-1, reduction="mean").backward()
        else:
            F.cross_entropy(leaf.float(), y, ignore_index=-1, reduction="none").backward(
                to_torch(torch, inp["dloss"], dev))
    return {"dlogits": leaf.grad}


def embedding_bwd_inputs(T, V, D):
    """ids with heavy repeats (half the tokens on ids 0..9: chunks with several tokens of a row, segments of
    many partials), a table (its shape and the forward's values), dy bf16 in (-2, 2) with a 2^12 spread"""
    r = random.Random(37 + T)
    ids = [r.randrange(10) if r.random() < 0.5 else r.randrange(V) for _ in range(T)]
    dy = [bf16_bits(r.uniform(-2, 2) * 2.0 ** r.randrange(-6, 6)) for _ in range(T * D)]
    return {"ids": tensor("I32", [T], [i32_bits(v) for v in ids]),
            "table": tensor("F32", [V, D], [f32_bits(r.uniform(-1, 1)) for _ in range(V * D)]),
            "dy": tensor("BF16", [T, D], dy)}


def torch_embedding_bwd(torch, F, inp, dev, scale):
    """autograd of F.embedding(ids, w) [* scale] with w the bf16 parameter (the table rounded): w.grad"""
    with torch.enable_grad():
        w = to_torch(torch, inp["table"], dev).to(torch.bfloat16).detach().requires_grad_()
        y = F.embedding(to_torch(torch, inp["ids"], dev).long(), w)
        if scale:
            y = y * scale
        y.backward(to_torch(torch, inp["dy"], dev))
    return {"dtable": w.grad}


def torch_lm_head(torch, F, inp, profile, dev):
    x = to_torch(torch, inp["x"], dev)
    w = to_torch(torch, inp["w"], dev)
    if base_profile(profile) == "megatron":
        return {"logits": F.linear(x, w.bfloat16())}
    return {"logits": x.float() @ w.t()}


def lm_head_inputs(T, D, V):
    r = random.Random(29)
    return {"x": tensor("BF16", [T, D], [rnd_bf16(r, -2, 2) for _ in range(T * D)]),
            "w": tensor("F32", [V, D], [f32_bits(r.uniform(-0.1, 0.1)) for _ in range(V * D)])}


def cases():
    out = []
    lh = lm_head_inputs(16, 256, 512)
    for prof in PROFILES:
        out.append(dict(op="lm_head", label=prof + "+informational", profile=prof, modes=[],
                        shape="T=16,D=256,V=512", inputs=lh, outputs=["logits"], ref=("lm_head", {}),
                        informational=True))
    for V in (512, 1000):
        for prof in PROFILES:
            xi = xent_inputs(64, V, base_profile(prof) == "megatron")
            out.append(dict(op="xent[V=%d]" % V, label=prof, profile=prof, modes=[],
                            shape="T=64,V=%d,S=16" % V, inputs=xi, outputs=["loss", "mean"], ref=("xent", {})))
    # T = 100: ATen's embedding_backward_feature_kernel (T <= 3072); T = 4000 with V = 600: the sort and
    # two-step sum (min(T, V) >= 4 * 132 SMs keeps it off the atomic kernel); variant 2: the 0.1 scale
    for (T, V, D, var) in ((100, 16, 64, 0), (100, 16, 64, 2), (4000, 600, 64, 0)):
        eb = embedding_bwd_inputs(T, V, D)
        for prof in PROFILES:
            out.append(dict(op="embedding_bwd[T=%d,v%d]" % (T, var), label=prof, profile=prof, modes=[], variant=var,
                            shape="T=%d,V=%d,D=%d" % (T, V, D), inputs=eb, outputs=["dtable"],
                            ref=("embedding_bwd", {"scale": 0.1 if var == 2 else 0}), cpu_ok=True))
    for V in (512, 1000):
        for mean in (False, True):
            for prof in PROFILES:
                xb = xent_bwd_inputs(64, V, base_profile(prof) == "megatron", mean)
                out.append(dict(op="xent_bwd[V=%d,%s]" % (V, "mean" if mean else "none"), label=prof, profile=prof,
                                modes=[], shape="T=64,V=%d" % V, inputs=xb, outputs=["dlogits"],
                                ref=("xent_bwd", {"mean": mean})))
    mm = matmul_inputs(MM_T, MM_D, MM_F)
    for prof in PROFILES:
        out.append(dict(op="matmul", label=prof + "+informational", profile=prof, modes=[],
                        shape="T=%d,D=%d,F=%d" % (MM_T, MM_D, MM_F), inputs=mm, outputs=["y"],
                        ref=("matmul", {}), informational=True))
    sw = swiglu_inputs(SW_T, SW_F)
    for prof in PROFILES:
        out.append(dict(op="swiglu", label=prof, profile=prof, modes=[], shape="T=%d,F=%d" % (SW_T, SW_F),
                        inputs=sw, outputs=["a"], ref=("swiglu", {})))
    swb = swiglu_bwd_inputs(SW_T, SW_F)
    for prof in PROFILES:
        out.append(dict(op="swiglu_bwd", label=prof, profile=prof, modes=[], shape="T=%d,F=%d" % (SW_T, SW_F),
                        inputs=swb, outputs=["dg", "du"], ref=("swiglu_bwd", {})))
    ro = router_inputs(R_T, R_E, R_K)
    for prof in PROFILES:
        for eps in (False, True):
            out.append(dict(op="router", label=prof + ("+sqrtsoftplus_eps" if eps else ""), profile=prof,
                            modes=["ALIGN_ROUTER_SQRTSOFTPLUS_EPS=1e-20"] if eps else [],
                            shape="T=%d,D=2,E=%d,K=%d,V=1" % (R_T, R_E, R_K), inputs=ro,
                            outputs=["idx", "wt"], ref=("router", {"sp_eps": eps})))
    rb = router_bwd_inputs(R_T, R_E, R_K)
    for prof in PROFILES:
        out.append(dict(op="router_bwd", label=prof, profile=prof, modes=[],
                        shape="T=%d,D=2,E=%d,K=%d,V=1" % (R_T, R_E, R_K), inputs=rb, outputs=["dl"],
                        ref=("router_bwd", {})))
    for prof in PROFILES:
        out.append(dict(op="router", label=prof + "+sigmoid-groups", profile=prof, modes=[], variant=1,
                        shape="T=%d,D=2,E=%d,K=%d,V=1" % (R_T, R_E, R_K), inputs=ro, outputs=["idx", "wt"],
                        ref=("router", {"sp_eps": False, "sigmoid": True, "groups": 8, "keep": 4})))
    rp = rope_inputs(RP_T, RP_H, RP_D)
    for var in sorted(ROPE_VARIANTS):
        for prof in PROFILES:
            out.append(dict(op="rope[v%d]" % var, label=prof, profile=prof, modes=[], variant=var,
                            shape="T=%d,H=%d,D=%d" % (RP_T, RP_H, RP_D), inputs=rp, outputs=["y"],
                            ref=("rope", {"variant": var})))
        out.append(dict(op="rope[v%d]" % var, label="deepseek-ref-cuda+complex64-informational", profile="deepseek-ref-cuda",
                        modes=[], variant=var, shape="T=%d,H=%d,D=%d" % (RP_T, RP_H, RP_D), inputs=rp,
                        outputs=["y"], ref=("rope", {"variant": var, "complex64": True}), informational=True))
        for fm in ("fma_ac", "fma_bd"):  # issue 14: the contracted complex multiply candidates (probe_rope)
            out.append(dict(op="rope[v%d]" % var, label="deepseek-ref-cuda+complex64-%s-informational" % fm,
                            profile="deepseek-ref-cuda", modes=["ALIGN_ROPE_ARITH=%s" % fm], variant=var,
                            shape="T=%d,H=%d,D=%d" % (RP_T, RP_H, RP_D), inputs=rp, outputs=["y"],
                            ref=("rope", {"variant": var, "complex64": True}), informational=True))
    rb = rope_bwd_inputs(RP_T, RP_H, RP_D)
    for var in sorted(ROPE_VARIANTS):
        for prof in PROFILES:
            out.append(dict(op="rope_bwd[v%d]" % var, label=prof, profile=prof, modes=[], variant=var,
                            shape="T=%d,H=%d,D=%d" % (RP_T, RP_H, RP_D), inputs=rb, outputs=["dx"],
                            ref=("rope_bwd", {"variant": var})))
    for (T, H, D, S, K) in ((32, 4, 8, 8, 4), (160, 4, 8, 40, 36)):
        ix = indexer_inputs(T, H, D, S)
        for prof in PROFILES:
            out.append(dict(op="indexer[K=%d]" % K, label=prof, profile=prof, modes=[],
                            shape="T=%d,H=%d,D=%d,S=%d,K=%d" % (T, H, D, S, K), inputs=ix,
                            outputs=["idx", "score"], ref=("indexer", {"K": K}),
                            cpu_ok=True))  # the indexer's mimic values (INDEXER_TOPK_ORDER=torch) are portable
    for (T, H, D, S, K) in ((24, 4, 16, 24, 4), (48, 4, 16, 48, 36)):
        ix = indexer_inputs(T, H, D, S)
        for prof in ("megatron-cuda", "megatron"):
            out.append(dict(op="dsa_indexer[K=%d]" % K, label=prof, profile=prof, modes=[],
                            shape="T=%d,H=%d,D=%d,S=%d,K=%d" % (T, H, D, S, K), inputs=ix,
                            outputs=["idx", "score"], ref=("dsa_indexer", {"K": K}),
                            cpu_ok=True))  # dsa_indexer reads no GPU-only switch
    for name, base in mhc_bases(M_N).items():
        mi = mhc_inputs(M_T, M_N, M_D, base)
        for prof in PROFILES:
            out.append(dict(op="mhc_pre[%s]" % name, label=prof, profile=prof, modes=[],
                            shape="T=%d,N=%d,D=%d" % (M_T, M_N, M_D), inputs=mi,
                            outputs=["comb", "pre", "post", "y"], ref=("mhc_pre", {})))
    # the compressor's softmax pooling (issue 14): DS-ref's eager path, QAT off (its act_quant is a TileLang
    # kernel), CSA_COMP_SUM_ORDER=torch (the profile's) and RMSNORM_REDUCE=torch (DS-ref's RMSNorm module);
    # overlapping (K = 4, N = 2: n = 8 positions, one accumulator per four) and not (K = 128: n = 128, the
    # reduction's block.y split in four lanes). The portable row for contrast.
    for (K, N) in ((4, 2), (128, 1)):
        ci = compressor_inputs(CP_T, K, N, CP_D, CP_F)
        for prof, modes in (("deepseek-ref-cuda", ["ALIGN_CSA_QAT=off", "ALIGN_RMSNORM_REDUCE=torch"]),
                            ("deepseek-ref", ["ALIGN_CSA_QAT=off"])):
            out.append(dict(op="compressor[K=%d]" % K, label=prof, profile=prof, modes=modes,
                            shape="T=%d,K=%d,N=%d,D=%d,F=%d" % (CP_T, K, N, CP_D, CP_F), inputs=ci, outputs=["c"],
                            ref=("compressor", {"K": K, "N": N})))
    sa = sparse_attn_inputs(SA_T, SA_H, SA_D, SA_S, SA_N)
    for prof in ("megatron-cuda", "megatron"):
        out.append(dict(op="sparse_attn", label=prof, profile=prof, modes=[],
                        shape="T=%d,H=%d,D=%d,S=%d,N=%d" % (SA_T, SA_H, SA_D, SA_S, SA_N), inputs=sa,
                        outputs=["o"], ref=("sparse_attn", {})))
    why = "torch's backward sum orders are not modelled yet"
    out.append(dict(op="matmul_bwd", label="deepseek-ref-cuda+informational", profile="deepseek-ref-cuda", modes=[],
                    shape="T=%d,D=%d,F=%d,S=%d" % (BW_T, BW_D, BW_F, BW_T), inputs=matmul_bwd_inputs(BW_T, BW_D, BW_F),
                    outputs=["da", "db"], ref=("matmul_bwd", {}), informational=True, cpu_ok=True,
                    why="cuBLAS's dgrad/wgrad kernels vs the portable order"))  # reads no GPU-only switch
    # informational: the profile's own RMSNORM_REDUCE=pairwise, for contrast with the reduce-torch rows below:
    # dx equal, dw 12 of 64 differing (up to 128 ulp) on the H200 (2026-12-02, -03): r's mean order, which
    # ALIGN_RMSNORM_REDUCE=torch reproduces (the warp32 row that showed it at D = 64 is retired)
    out.append(dict(op="rmsnorm_bwd", label="deepseek-ref-cuda+informational", profile="deepseek-ref-cuda", modes=[],
                    shape="T=%d,D=%d" % (BW_T, BW_D), inputs=norm_bwd_inputs([BW_T, BW_D], True),
                    outputs=["dx", "dw"], ref=("rmsnorm_bwd", {}), informational=True,
                    why="RMSNORM_REDUCE=pairwise, not torch's mean order: see the reduce-torch rows"))
    for T, D in TORCH_NORM_SHAPES:  # verdict rows: ATen's row order (and r through it in the backward)
        out.append(dict(op="rmsnorm[%dx%d]" % (T, D), label="deepseek-ref-cuda+reduce-torch", profile="deepseek-ref-cuda",
                        modes=["ALIGN_RMSNORM_REDUCE=torch"], shape="T=%d,D=%d" % (T, D),
                        inputs={k: v for k, v in norm_bwd_inputs([T, D], True).items() if k != "dy"},
                        outputs=["y"], ref=("rmsnorm", {})))
        out.append(dict(op="rmsnorm_bwd[%dx%d]" % (T, D), label="deepseek-ref-cuda+reduce-torch",
                        profile="deepseek-ref-cuda", modes=["ALIGN_RMSNORM_REDUCE=torch"], shape="T=%d,D=%d" % (T, D),
                        inputs=norm_bwd_inputs([T, D], True), outputs=["dx", "dw"], ref=("rmsnorm_bwd", {})))
    out.append(dict(op="qnorm_bwd", label="deepseek-ref-cuda+informational", profile="deepseek-ref-cuda", modes=[],
                    shape="T=%d,H=%d,D=%d" % (BW_T, BW_H, BW_D), inputs=norm_bwd_inputs([BW_T, BW_H, BW_D], False),
                    outputs=["dq"], ref=("qnorm_bwd", {}), informational=True, why=why))
    # autograd's orders (2026-12-03): dpost as sum_to of the [T, N, D] product (MHC_BWD_DSUM=torch; seq
    # differed in 3 of 8 on the H200), D = 64 (scalar lanes) and 256 (float4 loads, unaligned rows)
    for T, D in ((M_T, 64), (3, 257)):
        out.append(dict(op="mhc_post_bwd[%dx%d]" % (T, D), label="deepseek-ref-cuda+autograd", profile="deepseek-ref-cuda",
                        modes=["ALIGN_MHC_BWD_DSUM=torch"], shape="T=%d,N=%d,D=%d" % (T, M_N, D),
                        inputs=mhc_post_bwd_inputs(T, M_N, D), outputs=["dx", "df", "dpost", "dcomb"],
                        ref=("mhc_post_bwd", {}), cpu_ok=True))  # mhc_post_bwd reads no GPU-only switch
    # the Sinkhorn loop through autograd term by term (MHC_BWD_SINKHORN=autograd), dpre and dbase in
    # autograd's sum_to orders (the analytic unrolled form differed in 9 and 12 of 24 dbase on the H200)
    bwd_modes = ["ALIGN_MHC_BWD_SINKHORN=autograd", "ALIGN_MHC_BWD_DSUM=torch", "ALIGN_MHC_BWD_TSUM=torch"]
    for name, base in mhc_bases(M_N).items():
        if name not in ("random", "ties"):
            continue
        for T, D in ((M_T, M_D), (64, 256)) if name == "random" else ((M_T, M_D),):
            out.append(dict(op="mhc_pre_bwd[%s,%dx%d]" % (name, T, D), label="deepseek-ref-cuda+autograd",
                            profile="deepseek-ref-cuda", modes=bwd_modes, shape="T=%d,N=%d,D=%d" % (T, M_N, D),
                            inputs=mhc_pre_bwd_inputs(T, M_N, D, base), outputs=["dx", "dbase"],
                            ref=("mhc_pre_bwd", {})))
    sab = sparse_attn_bwd_inputs(SA_T, SA_H, SA_D, SA_S, SA_N)
    # the hand-written full backward (dS = P (dP - delta)): dq 15/2048, dkv 2021/2560, dsink 4/4 differing on
    # the H200 (2026-12-03); CSA_BWD_SOFTMAX=autograd evaluates torch's graph term by term
    out.append(dict(op="sparse_attn_bwd", label="megatron-cuda", profile="megatron-cuda", modes=[],
                    shape="T=%d,H=%d,D=%d,S=%d,N=%d" % (SA_T, SA_H, SA_D, SA_S, SA_N), inputs=sab,
                    outputs=["dq", "dkv", "dsink"], ref=("sparse_attn_bwd", {})))
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
    if case.get("variant"):
        cmd += ["--variant", str(case["variant"])]
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


def run_align_refused(align, device, case, workdir, idx):
    """a GPU-only profile on the CPU: exit 2 and a message naming the GPU-only switch"""
    op = case["op"].split("[")[0]
    ins = os.path.join(workdir, "in%02d.safetensors" % idx)
    st_write(ins, case["inputs"])
    cmd = [align, "run", op, "--device", device, "--profile", case["profile"], "--inputs", ins, "--shape",
           case["shape"]] + (["--variant", str(case["variant"])] if case.get("variant") else [])
    pr = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    err = pr.stderr.decode(errors="replace").strip()
    if pr.returncode != 2 or "exists only in the CUDA twins" not in err:
        raise Fail("%s: want exit 2 naming the GPU-only switch, got %d: %s" % (" ".join(cmd), pr.returncode, err))
    return err.splitlines()[-1]


def main(argv):
    args = list(argv[1:])
    self_test = "--self-test" in args
    if self_test:
        args.remove("--self-test")
    skip_missing = "--skip-missing" in args
    if skip_missing:
        args.remove("--skip-missing")
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
    explain_ops = set()
    if "--explain" in args:
        i = args.index("--explain")
        explain_ops = set(args[i + 1].split(","))
        del args[i:i + 2]
    only_probe = "--probe" in args
    if only_probe:
        args.remove("--probe")
    only_ops = None
    if "--ops" in args:
        i = args.index("--ops")
        only_ops = set(args[i + 1].split(","))
        del args[i:i + 2]
        unknown = only_ops - {c["op"].split("[")[0] for c in cases()}
        if unknown:
            print("torch-compare: --ops: no case of %s" % ", ".join(sorted(unknown)), file=sys.stderr)
            return 2
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
        return compare_run(align, device, workdir, explain_ops, only_ops, only_probe)
    except Missing as e:
        print("torch-compare: %s" % e, file=sys.stderr)
        return 77 if skip_missing else 2
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
        if device == "cpu" and c["profile"] in VERDICT_PROFILES and not c.get("cpu_ok"):  # GPU-only modes: refused
            msg = run_align_refused(align, device, c, workdir, i)
            print("self-test: %-16s %-30s refused on the CPU: %s" % (c["op"], c["label"], msg))
            continue
        cmd, got = run_align(align, device, c, workdir, i)
        shapes = ", ".join("%s%s %s" % (k, got[k][1], got[k][0]) for k in c["outputs"])
        print("self-test: %-16s %-30s accepted; outputs %s" % (c["op"], c["label"], shapes))
    # 3. a few values the reference contract fixes, on align's own output (CPU)
    c = [c for c in cases() if c["op"] == "swiglu" and c["profile"] == "deepseek-ref"][0]
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


# ---------------------------------------------------------------------------------------------
# probe: which association do torch's CUDA reductions use here? (binary64 +, / then one rounding to
# binary32 is the binary32 operation exactly: double rounding is innocuous for them)


def f32(v):
    return bits_f32(f32_bits(v))


def tree_lanes(x, w, decreasing):
    lane = list(x[:w]) + [0.0] * (w - len(x[:w]))
    offs = []
    o = w // 2 if decreasing else 1
    while 0 < o < w:
        offs.append(o)
        o = o // 2 if decreasing else o * 2
    for o in offs:
        lane = [f32(lane[l] + lane[l + o]) if l + o < w else lane[l] for l in range(w)]
    return lane[0]


def model_sum_lastdim(x, decreasing=True):  # kernels/core/torch_order.h torch_sum_lastdim
    n, w = len(x), 1
    while w * 2 <= n and w < 32:
        w *= 2
    lanes = []
    for l in range(w):
        a = [0.0] * 4
        idx = l
        while idx + 3 * w < n:
            for i in range(4):
                a[i] = f32(a[i] + x[idx + i * w])
            idx += 4 * w
        for i in range(4):
            if idx + i * w < n:
                a[i] = f32(a[i] + x[idx + i * w])
        lanes.append(f32(f32(f32(a[0] + a[1]) + a[2]) + a[3]))
    return tree_lanes(lanes, w, decreasing)


def model_sum_strided(x):  # torch_sum_strided
    a, idx, n = [0.0] * 4, 0, len(x)
    while idx + 3 < n:
        for i in range(4):
            a[i] = f32(a[i] + x[idx + i])
        idx += 4
    for i in range(4):
        if idx + i < n:
            a[i] = f32(a[i] + x[idx + i])
    return f32(f32(f32(a[0] + a[1]) + a[2]) + a[3])


def model_seq(x):
    s = x[0]
    for v in x[1:]:
        s = f32(s + v)
    return s


def last_pow2(n):
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def cols_step(n, m, threshold=True):  # kernels/core/torch_order.h torch_sum_cols_step
    if m == 1:  # the C refuses m == 1, n > 1; the probe still tries the lastdim candidate (step 0) there
        return 0 if n <= 127 else -1
    if n == 1:
        return 1
    v = 4 if m % 4 == 0 else 2 if m % 2 == 0 else 1
    mnt, dim0 = 512 // v, m // v
    d0 = last_pow2(dim0) if dim0 < mnt else mnt
    d1 = last_pow2(n) if n < mnt else mnt
    bw = min(d0, 32)
    bh = min(d1, mnt // bw)
    if threshold and n < min(16 * bh, 256):
        return 1
    if (n + bh - 1) // bh >= 256:
        return -1
    return bh


def model_sum_cols(col, step, decreasing=True):  # torch_sum_cols
    if step == 0:
        return model_sum_lastdim(col, True)
    if step == 1:
        return model_sum_strided(col)
    lanes = [model_sum_strided(col[y::step]) for y in range(step)]
    return tree_lanes(lanes, step, decreasing)


def model_pairwise(x):  # a halving tree (left half + right half), for contrast
    if len(x) == 1:
        return x[0]
    h = (len(x) + 1) // 2
    return f32(model_pairwise(x[:h]) + model_pairwise(x[h:]))


def probe_cols(torch, dev):
    """x.sum(0) of a contiguous [T, D] fp32 tensor (autograd's sum_to of rmsnorm's broadcast weight):
    columns matching each candidate order; 'torch_sum_cols' is ALIGN_RMSNORM_BWD_DW_ORDER=torch."""
    r = random.Random(5)
    print("## probe: x.sum(0) of a [T, D] fp32 tensor (RMSNORM_BWD_DW_ORDER=torch; columns matching each model)")
    print("## a model is right for a shape when its count equals D; 'step' is the block.y split the model assumes")
    shapes = [(T, 64) for T in (2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64)]
    shapes += [(BW_T, BW_D), (32, 256), (100, 64), (127, 64), (128, 64), (129, 64), (200, 64), (256, 64),
               (1000, 64), (2047, 64), (16, 6), (300, 6), (33, 63), (600, 63), (16, 1), (100, 1), (64, 512)]
    # rmsnorm_bwd[8x8192] and [16x8200]'s dw differed on the H200 (2026-12-03: 3182 of 8192, 1967 of 8200)
    # while [8x4096], [64x4096] and [2x1000] were equal: the wide shapes, plain x.sum(0) and autograd's
    shapes += [(8, 4096), (8, 6144), (8, 8192), (16, 8200), (8, 16384), (64, 8192)]
    allok = {"torch_sum_cols": True, "4acc-one-thread": True, "split-increasing-tree": True}
    for (T, D) in shapes:
        rows = [[f32(r.uniform(-1, 1) * 2.0 ** r.randint(-12, 12)) for _ in range(D)] for _ in range(T)]
        t = torch.tensor(rows, dtype=torch.float32, device=dev)
        got = [bits_f32(b & 0xFFFFFFFF) for b in t.sum(dim=0).view(torch.int32).tolist()]
        cols = [[rows[i][j] for i in range(T)] for j in range(D)]
        step = cols_step(T, D)
        res = {}
        if step >= 0:
            res["torch_sum_cols"] = sum(1 for c, g in zip(cols, got)
                                        if f32_bits(model_sum_cols(c, step)) == f32_bits(g))
        res["4acc-one-thread"] = sum(1 for c, g in zip(cols, got) if f32_bits(model_sum_strided(c)) == f32_bits(g))
        st2 = cols_step(T, D, threshold=False)
        if step > 1 and st2 > 1:
            res["split-increasing-tree"] = sum(1 for c, g in zip(cols, got)
                                               if f32_bits(model_sum_cols(c, st2, False)) == f32_bits(g))
        res["seq"] = sum(1 for c, g in zip(cols, got) if f32_bits(model_seq(c)) == f32_bits(g))
        res["halving-pairwise"] = sum(1 for c, g in zip(cols, got) if f32_bits(model_pairwise(c)) == f32_bits(g))
        for k in allok:
            if k in res and res[k] != D:
                allok[k] = False
        print("sum(0) T=%-4d D=%-3d step=%-3s %s" % (T, D, step if step >= 0 else "n/m",
                                                   "  ".join("%s: %d/%d" % (k, v, D) for k, v in res.items())))
    # the autograd path itself: w.grad of (w * n).backward(g) against the model on g * n, and against
    # (g * n).sum(0) computed by torch itself (1: autograd reduces as x.sum(0) does)
    for T, D in ((BW_T, BW_D), (8, 4096), (8, 8192), (16, 8200)):
        with torch.enable_grad():
            n = torch.tensor([[f32(r.uniform(-2, 2)) for _ in range(D)] for _ in range(T)], device=dev)
            g = torch.tensor([[f32(r.uniform(-0.05, 0.05)) for _ in range(D)] for _ in range(T)], device=dev)
            w = torch.ones(D, device=dev, requires_grad=True)
            (w * n).backward(g)
        qt = g * n
        q = qt.tolist()
        got = [bits_f32(b & 0xFFFFFFFF) for b in w.grad.view(torch.int32).tolist()]
        direct = [bits_f32(b & 0xFFFFFFFF) for b in qt.sum(0).view(torch.int32).tolist()]
        step = cols_step(T, D)
        ok = sum(1 for j in range(D) if step >= 0 and f32_bits(model_sum_cols([f32(q[i][j]) for i in range(T)], step))
                 == f32_bits(got[j]))
        same = sum(1 for a, b in zip(got, direct) if f32_bits(a) == f32_bits(b))
        print("autograd (w * n).backward(g), w.grad T=%d D=%d: torch_sum_cols %d/%d, equal to (g * n).sum(0) %d/%d"
              % (T, D, ok, D, same, D))
    print("probe verdict: %s" % ", ".join("%s %s" % (k, "matches every shape" if v else "fails somewhere")
                                          for k, v in allok.items()))
    print()


def probe_orders(torch, dev):
    r = random.Random(3)
    print("## probe: association of PyTorch's CUDA reductions (rows matching each model)")
    for n in (2, 3, 4, 5, 6, 7, 8, 12, 16):
        rows = [[f32(r.uniform(-1, 1) * 2.0 ** r.randint(-12, 12)) for _ in range(n)] for _ in range(400)]
        t = torch.tensor(rows, dtype=torch.float32, device=dev)
        got = [bits_f32(b & 0xFFFFFFFF) for b in t.sum(dim=-1).view(torch.int32).tolist()]
        dec = sum(1 for x, g in zip(rows, got) if f32_bits(model_sum_lastdim(x, True)) == f32_bits(g))
        inc = sum(1 for x, g in zip(rows, got) if f32_bits(model_sum_lastdim(x, False)) == f32_bits(g))
        seq = sum(1 for x, g in zip(rows, got) if f32_bits(model_seq(x)) == f32_bits(g))
        t3 = t.view(400, 1, n).expand(400, n, n).contiguous().transpose(1, 2).contiguous()  # columns = rows
        got2 = [bits_f32(b & 0xFFFFFFFF) for b in t3.sum(dim=-2)[:, 0].contiguous().view(torch.int32).tolist()]
        stri = sum(1 for x, g in zip(rows, got2) if f32_bits(model_sum_strided(x)) == f32_bits(g))
        print("sum(-1) n=%-2d  lane tree, decreasing offsets (align's model): %3d/400  increasing: %3d/400  "
              "sequential: %3d/400 | sum(-2) 4-accumulator model: %3d/400" % (n, dec, inc, seq, stri))
    # RMSNorm's r: x.square().mean(-1) of fp32 rows (DS-ref's norm), against align's RMSNORM_REDUCE orders
    # (WARP32, PAIRWISE, SEQ: ss / n) and torch_sum_lastdim's (n < 128) times fl(1 / n) (ATen's MeanOps)
    print("## probe: x.square().mean(-1) of [200, n] fp32 rows (rows matching each model; rmsnorm_bwd's r)")
    for n in (16, 32, 48, 64, 100, 127, 128, 256, 512, 1024, 4096, 7168):
        rows = [[f32(r.uniform(-2, 2)) for _ in range(n)] for _ in range(200)]
        t = torch.tensor(rows, dtype=torch.float32, device=dev)
        got = [f32_bits(bits_f32(b & 0xFFFFFFFF)) for b in t.square().mean(-1).view(torch.int32).tolist()]
        sq = [[f32(v * v) for v in x] for x in rows]
        inv = f32(1.0 / n)
        res = {"warp32/n": [f32(model_warp32(x) / n) for x in sq],
               "pairwise/n": [f32(model_align_pairwise(x) / n) for x in sq],
               "seq/n": [f32(model_seq(x) / n) for x in sq]}
        if n < 128:
            res["lastdim*(1/n)"] = [f32(model_sum_lastdim(x, True) * inv) for x in sq]
        print("mean(-1) n=%-5d " % n + "  ".join("%s: %d/200" % (k, sum(1 for a, b in zip(v, got) if f32_bits(a) == b))
                                              for k, v in res.items()))
    print()


def probe_mean_aten(torch, dev):
    """x.square().mean(-1) of [rows, n] fp32 on the device against models of ATen's Reduce.cuh, computed with
    torch CPU float32 ops (elementwise adds round as the device's do): a row over bw lanes, each lane with 4
    accumulators (vec 4: float4 loads, lane l's chunk c is x[4 (l + bw c) + i] into acc[i], tail elements
    into acc[0]; vec 1: x[l + bw j] into acc[j % 4]), acc combined ((a0 + a1) + a2) + a3, lanes by a shared
    tree over offsets bw/2 .. 32 then a warp shuffle (offsets 16 .. 1 'dec' or 1 .. 16 'inc'), the sum times
    fl(rows / (rows n)) ('mul', MeanOps' factor) or divided by n ('div'). Prints the models matching every row."""
    print("## probe: x.square().mean(-1) against ATen Reduce.cuh models (rows, n: the models matching all rows)")
    g = torch.Generator().manual_seed(5)
    for rows in (1, 8, 16, 200):  # 8 x 8192, 16 x 8200: torch_rowsum's block.y split ('ysN' models)
        for n in (64, 127, 128, 129, 132, 256, 300, 512, 1024, 2048, 4096, 7168, 8192, 8200):
          common = None
          for trial in range(max(1, 200 // rows)):  # a model must match every row of every trial
            x = (torch.rand(rows, n, generator=g, dtype=torch.float32) * 4 - 2)
            got = x.to(dev).square().mean(-1).cpu().view(torch.int32)
            sq = x.square()
            hits = []
            for vec in (1, 4):
                for bw in (32, 64, 128, 256, 512):
                    acc = torch.zeros(rows, bw, 4, dtype=torch.float32)
                    if vec == 4:
                        full = (n // 4) * 4
                        c = 0
                        while True:
                            lo = 4 * bw * c
                            if lo >= full:
                                break
                            blk = sq[:, lo:min(lo + 4 * bw, full)]
                            k = blk.shape[1] // 4
                            acc[:, :k, :] = acc[:, :k, :] + blk.reshape(rows, k, 4)
                            c += 1
                        t = sq[:, full:]
                        acc[:, :t.shape[1], 0] = acc[:, :t.shape[1], 0] + t
                    else:
                        j = 0
                        while j * bw < n:
                            blk = sq[:, j * bw:min((j + 1) * bw, n)]
                            k = blk.shape[1]
                            acc[:, :k, j % 4] = acc[:, :k, j % 4] + blk
                            j += 1
                    lane = ((acc[:, :, 0] + acc[:, :, 1]) + acc[:, :, 2]) + acc[:, :, 3]
                    off = bw // 2
                    while off >= 32:
                        lane = torch.cat([lane[:, :off] + lane[:, off:2 * off], lane[:, off:]], 1)
                        off //= 2
                    for dirn in ("dec", "inc"):
                        v = lane[:, :32].clone()
                        offs = (16, 8, 4, 2, 1) if dirn == "dec" else (1, 2, 4, 8, 16)
                        for o in offs:
                            sh = torch.cat([v[:, o:], v[:, 32 - o:]], 1)  # shfl_down: lanes past 31 keep their own
                            sh[:, 32 - o:] = v[:, 32 - o:]
                            v = v + sh
                        tot = v[:, 0]
                        fac = torch.tensor(float(rows), dtype=torch.float32) / torch.tensor(float(rows * n),
                                                                                         dtype=torch.float32)
                        for proj, r in (("mul", tot * fac), ("div", tot / torch.tensor(float(n), dtype=torch.float32))):
                            ok = int((r.view(torch.int32) == got).sum())
                            if ok == rows:
                                hits.append("vec%d bw%d %s %s" % (vec, bw, dirn, proj))
            if n % 4 == 0 and n > 128:  # the block.y split (torch_rowsum with ys > 1): vector v to thread
                for bw, ys in ((32, 16), (64, 8), (32, 8), (64, 4), (128, 4), (256, 2)):  # v % (bw ys)
                    step = bw * ys
                    acc = torch.zeros(rows, step, 4, dtype=torch.float32)
                    nv = n // 4
                    for c in range(0, nv, step):
                        blk = sq[:, 4 * c:4 * min(c + step, nv)]
                        k = blk.shape[1] // 4
                        acc[:, :k, :] = acc[:, :k, :] + blk.reshape(rows, k, 4)
                    v = ((acc[:, :, 0] + acc[:, :, 1]) + acc[:, :, 2]) + acc[:, :, 3]  # [rows, y * bw + x]
                    v = v.reshape(rows, ys, bw)
                    fac = torch.tensor(float(rows), dtype=torch.float32) / torch.tensor(float(rows * n),
                                                                                     dtype=torch.float32)
                    # x first (block_x_reduce, then block_y_reduce over the per-y sums: torch_rowsum since
                    # 2026-12-03), then the older y-first order for contrast
                    xl = v.clone()
                    off = bw // 2
                    while off >= 32:
                        xl = torch.cat([xl[:, :, :off] + xl[:, :, off:2 * off], xl[:, :, off:]], 2)
                        off //= 2
                    wx = xl[:, :, :32].clone()
                    for o in (16, 8, 4, 2, 1):
                        sh = wx.clone()
                        sh[:, :, :32 - o] = wx[:, :, o:]
                        wx = wx + sh
                    yv = wx[:, :, 0]
                    off = ys // 2
                    while off >= 1:
                        yv = torch.cat([yv[:, :off] + yv[:, off:2 * off], yv[:, off:]], 1)
                        off //= 2
                    if int(((yv[:, 0] * fac).view(torch.int32) == got).sum()) == rows:
                        hits.append("vec4 bw%d ys%d xfirst dec mul" % (bw, ys))
                    off = ys // 2
                    while off >= 1:  # block_y_reduce
                        v = torch.cat([v[:, :off] + v[:, off:2 * off], v[:, off:]], 1)
                        off //= 2
                    lane = v[:, 0, :]
                    off = bw // 2
                    while off >= 32:  # block_x_reduce's shared tree
                        lane = torch.cat([lane[:, :off] + lane[:, off:2 * off], lane[:, off:]], 1)
                        off //= 2
                    w = lane[:, :32].clone()
                    for o in (16, 8, 4, 2, 1):
                        sh = w.clone()
                        sh[:, :32 - o] = w[:, o:]
                        w = w + sh
                    if int(((w[:, 0] * fac).view(torch.int32) == got).sum()) == rows:
                        hits.append("vec4 bw%d ys%d dec mul" % (bw, ys))
            common = hits if common is None else [h for h in common if h in hits]
          hits = common
          print("mean(-1) rows=%-3d n=%-5d matching: %s" % (rows, n, ", ".join(hits) if hits else "none"))
    print()


def model_warp32(x):  # kernels/core/reduce.h WARP32: lane l from +0 adds x[l], x[l+32], ...; xor tree 16..1
    lane = []
    for l in range(32):
        s = 0.0
        for i in range(l, len(x), 32):
            s = f32(s + x[i])
        lane.append(s)
    off = 16
    while off >= 1:
        lane = [f32(lane[l] + lane[l ^ off]) for l in range(32)]
        off //= 2
    return lane[0]


def model_align_pairwise(x):  # reduce.h PAIRWISE: sum(0..m) + sum(m..n), m the largest power of two < n
    n = len(x)
    if n == 1:
        return x[0]
    m = 1
    while m * 2 < n:
        m *= 2
    return f32(model_align_pairwise(x[:m]) + model_align_pairwise(x[m:]))


def f32_round_exact(q):
    """a Fraction -> the nearest binary32 (ties to even), without double rounding through binary64"""
    r = f32(float(q))
    best = None
    for b in (f32_bits(r), f32_bits(r) + 1, f32_bits(r) - 1):
        if b < 0 or (b & 0x7F800000) == 0x7F800000:
            continue
        v = bits_f32(b & 0xFFFFFFFF)
        d = abs(Fraction(v) - q)
        if best is None or d < best[0] or (d == best[0] and not (b & 1)):
            best = (d, v)
    return best[1] if best else r


def fma32(x, y, z):
    return f32_round_exact(Fraction(x) * Fraction(y) + Fraction(z))


def probe_rope(torch, dev):
    """issue 14: (1) t / python_scalar on the GPU: fl(t/s) or fl(t * fl(1/s)) (rope.h ROPE_YARN_FREQ=div_recip);
    (2) view_as_complex(z) * polar(1, angle): which real/imag formula (rope.h ROPE_ARITH fp32, fma_ac, fma_bd)"""
    r = random.Random(14)
    print("## probe: PyTorch CUDA division by a Python scalar, and the complex64 multiply (issue 14)")
    xs = [f32(r.uniform(-30, 30)) for _ in range(2000)] + [float(j - 10) for j in range(32)]
    t = torch.tensor(xs, dtype=torch.float32, device=dev)
    for sc in (13, 40.0, 10, 3, 13.001):
        got = [bits_f32(b & 0xFFFFFFFF) for b in (t / sc).view(torch.int32).tolist()]
        div = sum(1 for x, g in zip(xs, got) if f32_bits(f32(x / f32(sc))) == f32_bits(g))
        rec = sum(1 for x, g in zip(xs, got) if f32_bits(f32(x * f32(1.0 / f32(sc)))) == f32_bits(g))
        print("t / %-7r true division: %4d/%d  t * fl(1/s) (div_recip): %4d/%d" % (sc, div, len(xs), rec, len(xs)))
    n = 4000
    a = [bits_bf16(rnd_bf16(r, -4, 4)) for _ in range(n)]
    b = [bits_bf16(rnd_bf16(r, -4, 4)) for _ in range(n)]
    ang = torch.tensor([f32(r.uniform(-1e4, 1e4)) for _ in range(n)], dtype=torch.float32, device=dev)
    cis = torch.polar(torch.ones_like(ang), ang)
    cs = [bits_f32(v & 0xFFFFFFFF) for v in torch.view_as_real(cis)[:, 0].contiguous().view(torch.int32).tolist()]
    sn = [bits_f32(v & 0xFFFFFFFF) for v in torch.view_as_real(cis)[:, 1].contiguous().view(torch.int32).tolist()]
    z = torch.view_as_complex(torch.tensor([[x, y] for x, y in zip(a, b)], dtype=torch.float32, device=dev))
    y = torch.view_as_real(z * cis)
    re = [bits_f32(v & 0xFFFFFFFF) for v in y[:, 0].contiguous().view(torch.int32).tolist()]
    im = [bits_f32(v & 0xFFFFFFFF) for v in y[:, 1].contiguous().view(torch.int32).tolist()]
    cand_re = {"plain a*c - b*s": lambda a, b, c, s: f32(f32(a * c) - f32(b * s)),
               "fma(a, c, -(b*s)) [fma_ac]": lambda a, b, c, s: fma32(a, c, -f32(b * s)),
               "fma(-b, s, a*c) [fma_bd]": lambda a, b, c, s: fma32(-b, s, f32(a * c))}
    cand_im = {"plain a*s + b*c": lambda a, b, c, s: f32(f32(a * s) + f32(b * c)),
               "fma(a, s, b*c) [fma_ac]": lambda a, b, c, s: fma32(a, s, f32(b * c)),
               "fma(b, c, a*s) [fma_bd]": lambda a, b, c, s: fma32(b, c, f32(a * s))}
    for name, fn in cand_re.items():
        ok = sum(1 for i in range(n) if f32_bits(fn(a[i], b[i], cs[i], sn[i])) == f32_bits(re[i]))
        print("complex64 real: %-28s %4d/%d%s" % (name, ok, n, "  <- matches" if ok == n else ""))
    for name, fn in cand_im.items():
        ok = sum(1 for i in range(n) if f32_bits(fn(a[i], b[i], cs[i], sn[i])) == f32_bits(im[i]))
        print("complex64 imag: %-28s %4d/%d%s" % (name, ok, n, "  <- matches" if ok == n else ""))
    print()


def probe_softmax_bwd(torch, dev):
    """issue 18: torch.softmax's backward on the GPU (SoftMax.cu: tmp = grad * out, then the persistent warp
    kernel's tmp - out * s): is the last step contracted to fmaf(-out, s, tmp)? (torch_order.h
    torch_softmax_bwd, MHC_BWD_SINKHORN=autograd assume it)"""
    r = random.Random(18)
    print("## probe: torch.softmax backward on %s: fmaf(-y, s, g*y) or g*y - y*s (issue 18)" % dev)
    for n in (4, 24, 100):
        rows = 64
        with torch.enable_grad():
            x = torch.tensor([[f32(r.uniform(-4, 4)) for _ in range(n)] for _ in range(rows)], dtype=torch.float32,
                             device=dev, requires_grad=True)
            y = torch.softmax(x, dim=-1)
            g = torch.tensor([[f32(r.uniform(-1, 1)) for _ in range(n)] for _ in range(rows)], dtype=torch.float32,
                             device=dev)
            y.backward(g)
        yv = [[bits_f32(b & 0xFFFFFFFF) for b in row] for row in y.detach().view(torch.int32).tolist()]
        gv = [[bits_f32(b & 0xFFFFFFFF) for b in row] for row in g.view(torch.int32).tolist()]
        got = [[f32_bits(bits_f32(b & 0xFFFFFFFF)) for b in row] for row in x.grad.view(torch.int32).tolist()]
        w = 1
        while w < n and w < 32:
            w *= 2
        hits = {"fmaf(-y, s, g*y)": 0, "g*y - y*s": 0, "y * (g - s)": 0}
        for i in range(rows):
            tmp = [f32(gv[i][k] * yv[i][k]) for k in range(n)]
            lane = []
            for l in range(w):
                acc = 0.0
                for k in range(l, n, w):
                    acc = f32(acc + tmp[k])
                lane.append(acc)
            o = w // 2
            while o > 0:
                lane = [f32(lane[l] + lane[l + o]) if l + o < w else lane[l] for l in range(w)]
                o //= 2
            sm = lane[0]
            hits["fmaf(-y, s, g*y)"] += sum(1 for k in range(n) if f32_bits(fma32(-yv[i][k], sm, tmp[k])) == got[i][k])
            hits["g*y - y*s"] += sum(1 for k in range(n) if f32_bits(f32(tmp[k] - f32(yv[i][k] * sm))) == got[i][k])
            hits["y * (g - s)"] += sum(1 for k in range(n)
                                       if f32_bits(f32(yv[i][k] * f32(gv[i][k] - sm))) == got[i][k])
        print("n = %3d: " % n + ", ".join("%s %d/%d%s" % (k, v, rows * n, " <- matches" if v == rows * n else "")
                                          for k, v in hits.items()))
    print()


def compare_run(align, device, workdir, explain_ops=(), only_ops=None, only_probe=False):
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means this cannot run
        raise Missing("cannot import torch: %s" % e)
    dev = "cuda" if device == "cuda" else "cpu"
    if dev == "cuda" and not torch.cuda.is_available():
        raise Missing("torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch %s, device %s%s, align %s --device %s" % (
        torch.__version__, dev, (" (%s)" % torch.cuda.get_device_name(0)) if dev == "cuda" else "", align, device))
    probe_orders(torch, dev)
    try:
        probe_mean_aten(torch, dev)
    except Exception as e:  # noqa: BLE001 - a probe, informational: the comparison must still run
        print("probe_mean_aten failed: %r" % e)
    probe_cols(torch, dev)
    probe_rope(torch, dev)
    probe_softmax_bwd(torch, dev)
    if only_probe:
        return 0
    rows, explained = [], []
    for i, c in enumerate(cases()):
        if only_ops is not None and c["op"].split("[")[0] not in only_ops:
            continue
        cmd, got = run_align(align, device, c, workdir, i)
        kind, extra = c["ref"]
        with torch.no_grad():
            if kind == "matmul":
                ref = torch_matmul(torch, c["inputs"], dev)
            elif kind == "swiglu":
                ref = torch_swiglu(torch, F, c["inputs"], c["profile"], dev)
            elif kind == "swiglu_bwd":
                ref = torch_swiglu_bwd(torch, F, c["inputs"], c["profile"], dev)
            elif kind == "router_bwd":
                ref = torch_router_bwd(torch, F, c["inputs"], c["profile"], dev, R_K, False)
            elif kind == "router":
                ref = torch_router(torch, F, c["inputs"], c["profile"], dev, R_K, extra["sp_eps"],
                                   extra.get("sigmoid", False), extra.get("groups", 0), extra.get("keep", 0))
            elif kind == "sparse_attn":
                ref = torch_sparse_attn(torch, c["inputs"], dev, SA_D)
            elif kind == "mhc_post_bwd":
                ref = torch_mhc_post_bwd(torch, c["inputs"], dev)
            elif kind == "mhc_pre_bwd":
                ref = torch_mhc_pre_bwd(torch, c["inputs"], dev, M_N)
            elif kind == "sparse_attn_bwd":
                ref = torch_sparse_attn_bwd(torch, c["inputs"], dev, SA_D)
            elif kind == "indexer":
                ref = torch_indexer(torch, c["inputs"], c["profile"], dev, extra["K"])
            elif kind == "compressor":
                ref = torch_compressor(torch, c["inputs"], dev, extra["K"], extra["N"])
            elif kind == "xent":
                ref = torch_xent(torch, F, c["inputs"], dev)
            elif kind == "embedding_bwd":
                ref = torch_embedding_bwd(torch, F, c["inputs"], dev, extra["scale"])
            elif kind == "xent_bwd":
                ref = torch_xent_bwd(torch, F, c["inputs"], dev, extra["mean"])
            elif kind == "lm_head":
                ref = torch_lm_head(torch, F, c["inputs"], c["profile"], dev)
            elif kind == "dsa_indexer":
                ref = torch_dsa_indexer(torch, c["inputs"], dev, extra["K"])
            elif kind == "matmul_bwd":
                ref = torch_matmul_bwd(torch, c["inputs"], dev)
            elif kind == "rmsnorm":
                ref = torch_rmsnorm(torch, c["inputs"], dev)
            elif kind == "rmsnorm_bwd":
                ref = torch_rmsnorm_bwd(torch, c["inputs"], dev)
            elif kind == "qnorm_bwd":
                ref = torch_qnorm_bwd(torch, c["inputs"], dev)
            elif kind == "rope_bwd":
                ref = torch_rope_bwd(torch, c["inputs"], c["profile"], dev, extra["variant"])
            elif kind == "rope":
                ref = torch_rope(torch, c["inputs"], c["profile"], dev, extra["variant"], extra.get("complex64", False))
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
            if c.get("informational"):
                verdict += (" (informational: %s, not part of the verdict)" % c["why"] if c.get("why") else
                            " (informational: torch complex64 multiply, not part of the verdict)" if c["op"].startswith("rope")
                            else " (informational: torch's backward scatter and sum orders, not modelled yet)"
                            if "_bwd" in c["op"]
                            else " (informational: cuBLAS heuristics and workspace, not part of the verdict)")
            elif c["profile"] not in VERDICT_PROFILES:
                verdict += " (portable, for contrast)"
            print("op=%s profile=%s output=%s elements=%d differing=%d max_ulp=%s" % (
                c["op"], c["label"], name, n, d, ulp))
            if first is not None:
                print("  first difference at flat index %d: align %s, torch %s" % (
                    first, show(at[0], at[2][first]), show(at[0], tt[2][first])))
            print("  verdict: %s" % verdict)
            rows.append((c["op"], c["label"], name, n, d, ulp, verdict))
        if c["op"].split("[")[0] in explain_ops and c["profile"] in VERDICT_PROFILES:
            explained.append(explain_case(align, device, c, cmd, ref, torch, workdir, i))
    print("\n| op | profile | output | elements | differing | max ULP | verdict |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- |")
    for r in rows:
        print("| `%s` | %s | `%s` | %d | %d | %s | %s |" % r)
    judged = [r for r in rows if r[1].split("+")[0] in VERDICT_PROFILES and "informational" not in r[1]]
    bad = [r for r in judged if r[4] != 0]
    print("\nmimic profiles (%s): %d of %d outputs bitwise equal to PyTorch" % (
        ", ".join(VERDICT_PROFILES), len(judged) - len(bad), len(judged)))
    if explained:
        print("\n| explain: op | profile | exit | assignments reproducing torch | profile's own values reproduce | closest profiles |")
        print("| --- | --- | ---: | ---: | --- | --- |")
        for r in explained:
            print("| `%s` | %s | %s | %s | %s | %s |" % r)
        print("explain: %d of %d PyTorch outputs explained as their *-cuda profile's choices" % (
            sum(1 for r in explained if r[4] == "yes"), len(explained)))
    print("\n(files in %s)" % workdir)
    return 1 if bad else 0


def explain_case(align, device, c, cmd, ref, torch, workdir, idx):
    """`align explain` over PyTorch's outputs of case c: does the case's profile reproduce them?"""
    op = c["op"].split("[")[0]
    ins = cmd[cmd.index("--inputs") + 1]
    obs = os.path.join(workdir, "torch%02d.safetensors" % idx)
    st_write(obs, {name: from_torch(torch, ref[name]) for name in c["outputs"]})
    ecmd = [align, "explain", "--op", op, "--device", device, "--inputs", ins, "--output", obs, "--shape", c["shape"],
            "--format", "json"] + (["--variant", str(c["variant"])] if c.get("variant") else [])
    try:
        pr = subprocess.run(ecmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    except subprocess.TimeoutExpired:
        return (op, c["label"], "timeout", "-", "no", "-")
    try:
        j = json.loads(pr.stdout.decode())
    except ValueError:
        print("explain %s %s: exit %d: %s" % (op, c["label"], pr.returncode, pr.stderr.decode(errors="replace")[-400:]))
        return (op, c["label"], pr.returncode, "-", "no", "-")
    own = any(p["name"] == c["profile"] and not p["differ"] for p in j.get("closest_profiles", []))
    print("explain %s %s: exit %d, %s matches; closest %s" % (op, c["label"], pr.returncode, j.get("matches"),
                                                             [p["name"] for p in j.get("closest_profiles", [])]))
    return (op, c["label"], pr.returncode, j.get("matches"), "yes" if own and pr.returncode == 0 else "no",
            ", ".join(p["name"] for p in j.get("closest_profiles", [])))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
