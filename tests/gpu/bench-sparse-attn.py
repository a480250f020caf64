#!/usr/bin/env python3
"""bench-sparse-attn.py: align's sparse_attn CUDA twin against PyTorch eager on the same shapes, in one run.

usage: python3 tests/gpu/bench-sparse-attn.py BENCH_BINARY [T] [--skip-missing]

Runs BENCH_BINARY (build-gpu/tests/gpu/bench-gpu-sparse-attn, T tokens, default 1024) and then the same
math in PyTorch eager on CUDA at the same DSv4-Flash shapes (H = 64, D = 512, N = 640 = 128 window + 512
top-k, S = T + T/4 kv rows, int32 indices with -1 slots):
  megatron path (the unfused MCore / PaddleFleet form): kv[idx] gathered and upcast to fp32, fp32 einsum
    q.kv * scale, -inf on invalid slots, m = max(max_j S_j, sink), e = exp(S - m), p = e / (sum e +
    exp(sink - m)), fp32 einsum p.kv, cast to bf16 (TF32 off);
  bf16 path (the same math with bf16 GEMMs, DS-ref's precision: bf16 q.kv with fp32 output, bf16 P).
Torch is processed in chunks of tokens so the gathered kv fits; times are CUDA-event medians of 5 runs
after 2 warm-ups. Prints both, and per align profile its time, its fraction of the non-FMA fp32
roofline (the binary's roofline= field: SMs x 128 lanes x clock), both eager times and the speed-ups.
Exit 0; 1 when align's binary failed; 2 when it could not run; 77 with --skip-missing and no torch/GPU.
"""
import re
import subprocess
import sys


def eager(torch, T, H=64, D=512, N=640, chunk=256):
    S = T + T // 4
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(T, H, D, device="cuda", generator=g).bfloat16()
    kv = torch.randn(S, D, device="cuda", generator=g).bfloat16()
    idx = torch.randint(-1, S, (T, N), device="cuda", generator=g, dtype=torch.int32)
    sink = torch.randn(H, device="cuda", generator=g)
    scale = D ** -0.5

    def fp32_path():
        outs = []
        for t0 in range(0, T, chunk):
            i = idx[t0:t0 + chunk]
            valid = i >= 0
            kvg = kv[i.clamp(min=0).long()].float()  # [c, N, D]
            s = torch.einsum("thd,tnd->thn", q[t0:t0 + chunk].float(), kvg) * scale
            s = s.masked_fill(~valid.unsqueeze(1), float("-inf"))
            sk = sink.view(1, H, 1)
            m = torch.maximum(s.amax(-1, keepdim=True), sk)
            e = torch.exp(s - m)
            p = e / (e.sum(-1, keepdim=True) + torch.exp(sk - m))
            outs.append(torch.einsum("thn,tnd->thd", p, kvg).bfloat16())
        return torch.cat(outs)

    def bf16_path():
        outs = []
        for t0 in range(0, T, chunk):
            i = idx[t0:t0 + chunk]
            valid = i >= 0
            kvg = kv[i.clamp(min=0).long()]  # bf16 [c, N, D]
            s = torch.matmul(q[t0:t0 + chunk], kvg.transpose(1, 2)).float() * scale
            s = s.masked_fill(~valid.unsqueeze(1), float("-inf"))
            sk = sink.view(1, H, 1)
            m = s.amax(-1, keepdim=True)
            e = torch.exp(s - m)
            l = e.sum(-1, keepdim=True) + torch.exp(sk - m)
            outs.append((torch.matmul(e.bfloat16(), kvg).float() / l).bfloat16())
        return torch.cat(outs)

    res = {}
    for name, fn in (("megatron-fp32", fp32_path), ("bf16-gemm", bf16_path)):
        ms = []
        for r in range(7):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            if r >= 2:
                ms.append(a.elapsed_time(b))
        res[name] = sorted(ms)[len(ms) // 2]
    return res


def main(argv):
    args = [a for a in argv[1:] if a != "--skip-missing"]
    skip = len(args) != len(argv) - 1
    if not args:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    T = int(args[1]) if len(args) > 1 else 1024
    pr = subprocess.run([args[0], str(T)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = pr.stdout.decode(errors="replace")
    print(out, end="")
    if pr.returncode == 77:
        return 77
    if pr.returncode != 0:
        return 1
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print("bench-sparse-attn: cannot import torch: %s" % e, file=sys.stderr)
        return 77 if skip else 2
    if not torch.cuda.is_available():
        print("bench-sparse-attn: no CUDA in torch", file=sys.stderr)
        return 77 if skip else 2
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        res = eager(torch, T)
    align = {m.group(1): float(m.group(2)) for m in re.finditer(r"profile=(\S+) .*? ms=([0-9.]+)", out)}
    roof = {m.group(1): float(m.group(2)) for m in re.finditer(r"profile=(\S+) .*? roofline=([0-9.]+)", out)}
    print("torch %s eager, T=%d H=64 D=512 N=640: %s" % (
        torch.__version__, T, ", ".join("%s %.3f ms" % kv for kv in res.items())))
    for prof, ms in align.items():
        print("align %s %.3f ms (%.0f%% of the non-FMA fp32 roofline), eager megatron-fp32 %.3f ms, "
              "eager bf16-gemm %.3f ms: speed-up %.2fx over fp32 eager, %.2fx over bf16 eager" % (
                  prof, ms, 100.0 * roof.get(prof, 0.0), res["megatron-fp32"], res["bf16-gemm"],
                  res["megatron-fp32"] / ms, res["bf16-gemm"] / ms))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
