"""The DSv4 block's ops (dsv4_block.py) as align ops: each op's inputs and outputs under the names,
dtypes and shapes `align run --list` gives, recorded from a real framework run, for `align explain`.

    rec = OpRecorder(DIR, "torch", run="torch", dtype="bf16")
    dsv4_block.train("torch", w, 1, watched=rec)      # rec.step(s) around each step, rec(block, tensors)

writes, per step s and block op PREFIX:
  DIR/<run>-rank0.atf                       the records PREFIX.<tensor> with payloads, through align_probe
                                            (Probe.record), for `align explain --runs A,B --record PREFIX`
  DIR/s<s>-PREFIX.in.safetensors, .out.     the same tensors, for `align explain --inputs/--output`
  DIR/ops.json                              PREFIX -> [op, variant] (what to pass to --op / --variant)

The block ops and what each is as an align op (conversions are exact: bf16 -> fp32 and int64 -> int32
of small ids change no value; chunk and reshape only move bytes):
  norm   rmsnorm       x = the block input, w = F(norm weight); y = norm output
  router router v3     x = norm output, w = router weight (fp32), bias = 0, ids = 0, tid2eid = 0 (unused:
                       softmax, no groups, no hash, route scale 1); idx = int32(top-k ids), wt = top-k probs
  up     matmul        a = F(norm output), b = F(up weight); y = up output
  act    swiglu v2     g, u = the halves of the up output, p = F(sum of the top-k probs as the block rounds
                       it) [T]; no clamp (variant 2); a = act output
  down   matmul        a = F(act output), b = F(down weight); y = down output (before the residual)
An op whose inputs have a dtype its align op does not take (rmsnorm, router and swiglu take bf16
activations; the fp32 block gives fp32) is recorded all the same: `align explain` refuses it (exit 2).
"""
import contextlib
import json
import os
import struct

import dsv4_block

OPS = {"norm": ["rmsnorm", 0], "router": ["router", 3], "up": ["matmul", 0], "act": ["swiglu", 2],
       "down": ["matmul", 0]}
ST_DTYPE = {"bfloat16": "BF16", "float32": "F32", "int32": "I32"}


def _dtype_name(t):
    s = str(t.dtype)
    for k in ST_DTYPE:
        if k in s:
            return k
    raise ValueError("op_records: tensor dtype %s has no safetensors name here" % s)


def write_safetensors(path, tensors):
    """tensors: [(name, dtype ('bfloat16'|'float32'|'int32'), shape, raw bytes)] -> a safetensors file
    (8-byte little-endian header length, JSON header, data), written here so that Paddle's process,
    which has no torch, needs nothing else."""
    header, off, blobs = {}, 0, []
    for name, dt, shape, b in tensors:
        header[name] = {"dtype": ST_DTYPE[dt], "shape": list(shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


class _Torch:
    def __init__(self):
        import torch
        self.t = torch

    def f32(self, x):
        return x.detach().float()

    def i32(self, x):
        return x.detach().to(self.t.int32)

    def halves(self, x):
        g, u = x.detach().chunk(2, dim=-1)
        return g.contiguous(), u.contiguous()

    def flat(self, x):
        return x.detach().reshape(-1).contiguous()

    def zeros(self, shape, dt):
        return self.t.zeros(shape, dtype={"f32": self.t.float32, "i32": self.t.int32}[dt])

    def same(self, x):
        return x.detach()


class _Paddle:
    def __init__(self):
        import paddle
        self.p = paddle

    def f32(self, x):
        return x.detach().astype("float32")

    def i32(self, x):
        return x.detach().astype("int32")

    def halves(self, x):
        g, u = self.p.chunk(x.detach(), 2, axis=-1)
        return g.contiguous(), u.contiguous()

    def flat(self, x):
        return x.detach().reshape([-1]).contiguous()

    def zeros(self, shape, dt):
        return self.p.zeros(shape, dtype={"f32": "float32", "i32": "int32"}[dt])

    def same(self, x):
        return x.detach()


def block_ops(fw, block, t):
    """{PREFIX: ({input: tensor}, {output: tensor})} of the block's forward tensors t (dsv4_block)."""
    T, E, K = dsv4_block.T, dsv4_block.E, dsv4_block.K
    g, u = fw.halves(t["u"])
    return {
        "norm": ({"x": fw.same(t["x"]), "w": fw.f32(block.norm.weight)}, {"y": fw.same(t["h"])}),
        "router": ({"x": fw.same(t["h"]), "w": fw.f32(block.router.weight), "bias": fw.zeros([E], "f32"),
                    "ids": fw.zeros([T], "i32"), "tid2eid": fw.zeros([1, K], "i32")},
                   {"idx": fw.i32(t["topi"]), "wt": fw.same(t["topv"])}),
        "up": ({"a": fw.f32(t["h"]), "b": fw.f32(block.up.weight)}, {"y": fw.same(t["u"])}),
        "act": ({"g": g, "u": u, "p": fw.flat(fw.f32(t["scale"]))}, {"a": fw.same(t["a"])}),
        "down": ({"a": fw.f32(t["a"]), "b": fw.f32(block.down.weight)}, {"y": fw.same(t["d"])}),
    }


class OpRecorder:
    """dsv4_block.train(..., watched=OpRecorder(...)): records every block op of every step."""

    def __init__(self, out_dir, framework, run, native=None):
        from align_probe import Probe
        os.makedirs(out_dir, exist_ok=True)
        self.dir = out_dir
        self.fw = _Torch() if framework == "torch" else _Paddle()
        self.probe = Probe(out_dir, run=run, framework=framework, payload=["*"], native=native)
        self.cur = None
        with open(os.path.join(out_dir, "ops.json"), "w") as f:
            json.dump(OPS, f)

    @contextlib.contextmanager
    def step(self, s):
        self.cur = s
        with self.probe.step(s):
            yield

    def __call__(self, block, tensors):
        for prefix, (ins, outs) in block_ops(self.fw, block, tensors).items():
            for kind, group in (("in", ins), ("out", outs)):
                rows = []
                for name, x in group.items():
                    self.probe.record("%s.%s" % (prefix, name), x, phase="fwd")
                    rows.append((name, _dtype_name(x), list(x.shape), dsv4_block.raw(x)))
                write_safetensors(os.path.join(self.dir, "s%d-%s.%s.safetensors" % (self.cur, prefix, kind)), rows)

    def close(self):
        return self.probe.close()
