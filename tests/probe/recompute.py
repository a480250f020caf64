"""recompute.py torch|paddle ALIGN: activation recomputation does not change a probe trace.

The same three-block model (one block a tuple-returning layer) trains 2 steps three times: without
recomputation, and with the middle blocks recomputed in backward, reentrant and not (torch:
torch.utils.checkpoint; Paddle: fleet.utils.recompute). With Probe's default (recompute=False) the three
traces hold the same records (step, micro, name, phase, call, io, dtype, shape, digest or bits; the
gradient records may come in another order), no key twice, and `align report` finds the runs bitwise
equal with no name in one run only. With recompute=True the recomputed forwards are further calls
(MOD#1) whose records equal the first call's. Exit 0 when all holds.
"""
import json
import os
import subprocess
import sys
import tempfile

from align_probe import Probe

fw, align = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
fails = []

if fw == "torch":
    import torch
    import torch.utils.checkpoint as ckpt

    torch.manual_seed(0)
    Module, Linear, silu = torch.nn.Module, torch.nn.Linear, torch.nn.functional.silu

    def recompute(f, x, reentrant):
        return ckpt.checkpoint(f, x, use_reentrant=reentrant)

    def randn(*shape):
        return torch.randn(*shape)

    def leaf(x):
        return x.requires_grad_(True)

    def sgd(m):
        return torch.optim.SGD(m.parameters(), lr=0.1)

    def copy_into(dst, src):
        dst.load_state_dict(src.state_dict())
else:
    import paddle
    from paddle.distributed.fleet.utils import recompute as pd_recompute

    paddle.seed(0)
    Module, Linear, silu = paddle.nn.Layer, paddle.nn.Linear, paddle.nn.functional.silu

    def recompute(f, x, reentrant):
        return pd_recompute(f, x, use_reentrant=reentrant)

    def randn(*shape):
        return paddle.randn(list(shape))

    def leaf(x):
        x.stop_gradient = False
        return x

    def sgd(m):
        return paddle.optimizer.SGD(learning_rate=0.1, parameters=m.parameters())

    def copy_into(dst, src):
        dst.set_state_dict(src.state_dict())


class Block(Module):
    def __init__(self):
        super().__init__()
        self.a = Linear(8, 16)
        self.b = Linear(16, 8)

    def forward(self, x):
        return self.b(silu(self.a(x)))


class Pair(Module):  # returns a tuple, as Megatron's layers return (output, bias)
    def __init__(self):
        super().__init__()
        self.p = Linear(8, 8)

    def forward(self, x):
        y = self.p(x)
        return y, y * 0.5


class Model(Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.l0 = Block()
        self.l1 = Block()
        self.l2 = Pair()

    def blocks(self, x):
        return self.l1(self.l0(x))

    def forward(self, x):
        h = self.blocks(x) if self.mode == "plain" else recompute(self.blocks, x, self.mode == "reentrant")
        y, z = self.l2(h)
        return y + z


init = Model("plain")
inputs = [randn(4, 8) for _ in range(2)]


def run(mode, record_recompute=False):
    m = Model(mode)
    copy_into(m, init)
    opt = sgd(m)
    p = Probe(os.path.join(tmp, mode + ("-rc" if record_recompute else "")), run=mode, recompute=record_recompute)
    p.watch(m)
    for step in (1, 2):
        with p.step(step):
            loss = (m(leaf(inputs[step - 1] * 1.0)) ** 2).mean()
            loss.backward()
            opt.step()
            if fw == "torch":
                opt.zero_grad()
            else:
                opt.clear_grad()
            p.record("loss", loss)
        p.params(m)
    return p.close()


def records(path):
    out = []
    for line in open(path).read().splitlines()[1:]:
        r = json.loads(line)
        out.append((r["step"], r.get("micro"), r["name"], r["phase"], r.get("call"), r.get("io"), r.get("dtype"),
                    tuple(r.get("shape", [])), r.get("digest") or r.get("bits")))
    return out


paths = {mode: run(mode) for mode in ("plain", "reentrant", "nonreentrant")}
recs = {mode: records(p) for mode, p in paths.items()}
for mode, rs in recs.items():
    keys = [(r[0], r[1], r[2], r[4]) for r in rs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        fails.append("%s: the key (step, micro, name, call) %r is written twice" % (mode, dup))
for mode in ("reentrant", "nonreentrant"):
    a, b = sorted(recs["plain"], key=repr), sorted(recs[mode], key=repr)
    if a != b:
        only_a = [r for r in a if r not in b][:3]
        only_b = [r for r in b if r not in a][:3]
        fails.append("%s recompute: the trace differs from the run without (%d vs %d records; only without: %r; "
                     "only with: %r)" % (mode, len(a), len(b), only_a, only_b))
n_fwd = sum(1 for r in recs["plain"] if r[3] == "fwd")
n_grad = sum(1 for r in recs["plain"] if r[3] in ("bwd", "grad"))
if not n_fwd or not n_grad or not any(r[2] == "l0.a.out.grad" for r in recs["plain"]):
    fails.append("the plain trace lacks forward or gradient records (%d fwd, %d bwd/grad)" % (n_fwd, n_grad))

# align sees the runs equal: nothing differs, no name in one run only
db = os.path.join(tmp, "r.db")
for path in (paths["plain"], paths["reentrant"]):
    r = subprocess.run([align, "ingest", "--db", db, "--quiet", path], capture_output=True, text=True)
    if r.returncode:
        fails.append("align ingest %s: exit %d: %s" % (path, r.returncode, r.stderr.strip()))
r = subprocess.run([align, "report", "--db", db, "--runs", "plain,reentrant"], capture_output=True, text=True)
if r.returncode != 0 or "only in" in r.stdout:
    fails.append("align report plain vs reentrant: exit %d (want 0):\n%s%s" % (r.returncode, r.stdout[:1500], r.stderr))

# recompute=True: the recomputed forwards are further calls with the first call's records
rc = records(run("reentrant", record_recompute=True))
again = [r for r in rc if r[3] == "fwd" and r[4] and r[4].endswith("#1")]
first = {(r[0], r[2], r[4].rsplit("#", 1)[0]): r for r in rc if r[3] == "fwd" and r[4] and r[4].endswith("#0")}
names = sorted({r[2] for r in again})
want = ["l0.a.in", "l0.a.out", "l0.b.in", "l0.b.out", "l1.a.in", "l1.a.out", "l1.b.in", "l1.b.out", "l0.in",
        "l0.out", "l1.in", "l1.out"]
if names != sorted(want):
    fails.append("recompute=True: recomputed records %r, want %r" % (names, sorted(want)))
for r in again:
    f = first.get((r[0], r[2], r[4].rsplit("#", 1)[0]))
    if f is None or f[6:] != r[6:]:
        fails.append("recompute=True: %s (step %d, call %s) differs from the first call's record %r" % (r[2], r[0], r[4], f))
        break
if len(rc) != len(recs["reentrant"]) + len(again):
    fails.append("recompute=True: %d records, want %d + %d" % (len(rc), len(recs["reentrant"]), len(again)))

for f in fails:
    print("FAIL: " + f)
if fails:
    sys.exit(1)
print("%s: traces with recompute (reentrant, non-reentrant) equal the trace without (%d records, %d forward); "
      "recompute=True adds %d records equal to the first calls'" % (fw, len(recs["plain"]), n_fwd, len(again)))
