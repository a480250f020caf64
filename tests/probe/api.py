"""api.py ALIGN: the Probe API's bookkeeping on torch: micro-batches counted per model call and set with
probe.micro(k), call names per (step, micro), Python numbers with exact bits, RANK/WORLD_SIZE, bad
arguments refused, and a missing native library refused with the message that says how to build it.
The trace must ingest (align checks seq, call/io links and bits)."""
import json
import os
import subprocess
import sys
import tempfile

import torch

from align_probe import Probe

align = sys.argv[1]
tmp = tempfile.mkdtemp()
fails = []
os.environ["RANK"], os.environ["WORLD_SIZE"] = "3", "4"
m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
p = Probe(tmp, run="api")
p.watch(m)
with p.step(1):
    for _ in range(2):  # two micro-batches, counted by the model's calls
        m(torch.ones(2, 4)).sum().backward()
    p.record("lr", 0.1)
    p.record("tokens", 4096)
with p.step(2):
    with p.micro(5):
        m(torch.ones(2, 4)).sum().backward()
        p.record("loss", torch.tensor(2.5, dtype=torch.bfloat16))
for bad in (-1, 1.5):
    try:
        with p.step(bad):
            pass
        fails.append("step(%r) was accepted" % bad)
    except ValueError:
        pass
path = p.close()
# the writer's shortcuts for plain tensor records (atf.Writer._fast, and write_tensor of the probe's tuple
# records) write the text json.dumps writes
from align_probe import atf  # noqa: E402
wpath = os.path.join(tmp, "w.atf")
w = atf.Writer(wpath, {"align_trace": 1, "run": "w"})
want = []
for i in range(40):
    name = ["a.b", 'q"uote\\s', "\u00e9t\u00e9.\u4e2d", "ctl\x01\n"][i % 4]
    rec = {"step": i // 8, "micro": i % 3, "name": name, "phase": "fwd"}
    if i % 2:
        rec["call"], rec["io"] = name + "#%d" % (i % 5), "out"
    rec.update(atf.tensor_fields("fp32", [i % 7, 2048] if i % 5 else [], "%016x" % (i * 0x9e3779b97f4a7c15 % (1 << 64))))
    if i % 9 == 8:
        rec["digest"] = "NOT-HEX"  # not the shortcut's: the encoder's path
    if i % 11 == 10:
        rec["payload"] = "AAAA"
    want.append(json.dumps(dict([("step", rec["step"]), ("seq", i)] + [(k, v) for k, v in rec.items() if k != "step"]),
                           separators=(", ", ": ")))
    if i % 3 == 2 and i % 9 != 8 and i % 11 != 10:  # the tuple form the probe keeps for deferred records
        w.write_tensor((rec["step"], rec["micro"], name, "fwd", rec.get("call"), rec.get("io"), "fp32",
                        tuple(rec["shape"])), rec["digest"])
    else:
        w.write(rec)
w.close()
got = open(wpath).read().splitlines()[1:]
if got != want:
    bad = next(i for i, (g, x) in enumerate(zip(got, want + [None] * len(got))) if g != x)
    fails.append("the writer's line %d differs from json.dumps: %r vs %r" % (bad, got[bad], want[bad]))
recs = [json.loads(line) for line in open(path)]
h = recs[0]
if (h["rank"], h["world_size"], os.path.basename(path)) != (3, 4, "api-rank3.atf"):
    fails.append("rank/world/file: %r %r %s" % (h["rank"], h["world_size"], path))
outs = [(r["step"], r["micro"], r.get("call")) for r in recs[1:] if r["name"] == "0.out"]
if outs != [(1, 0, "0#0"), (1, 1, "0#0"), (2, 5, "0#0")]:
    fails.append("0.out records (step, micro, call): %r" % outs)
grads = [(r["step"], r["micro"]) for r in recs[1:] if r["name"] == "0.weight.grad"]
if grads != [(1, 0), (1, 1), (2, 5)]:
    fails.append("0.weight.grad records (step, micro): %r" % grads)
by = {r["name"]: r for r in recs[1:]}
want = {"lr": ("fp64", "0x3fb999999999999a", 0.1), "tokens": ("int64", "0x0000000000001000", 4096),
        "loss": ("bf16", "0x4020", 2.5)}
for n, (dt, bits, v) in want.items():
    r = by.get(n, {})
    if (r.get("dtype"), r.get("bits"), r.get("value")) != (dt, bits, v):
        fails.append("%s: %r" % (n, r))
seqs = [r["seq"] for r in recs[1:]]
if seqs != list(range(len(seqs))):
    fails.append("seq is not 0..n-1 in file order")
r = subprocess.run([align, "ingest", "--db", os.path.join(tmp, "a.db"), path], capture_output=True, text=True)
if r.returncode:
    fails.append("align ingest: " + r.stderr)
# without the library anywhere (no ALIGNPROBE_LIB_DIR, no LD_LIBRARY_PATH, which meson sets for tests)
env = {k: v for k, v in os.environ.items() if k not in ("ALIGNPROBE_LIB_DIR", "LD_LIBRARY_PATH")}
r = subprocess.run([sys.executable, "-c", "from align_probe import Probe; Probe(%r, native=%r)"
                    % (tmp, os.path.join(tmp, "nowhere"))], capture_output=True, text=True, env=env)
if r.returncode == 0:
    fails.append("a Probe without its native library was created")
elif "DigestUnavailable" not in r.stderr or "ninja -C build" not in r.stderr:
    fails.append("the missing-library error does not say how to build it: %s" % r.stderr[-400:])


# a second watch() of the same model would write every record twice: refused, naming unwatch()
wp = Probe(os.path.join(tmp, "twice"), run="twice")
wp.watch(m)
try:
    wp.watch(torch.nn.DataParallel(m))
    fails.append("a second watch() of the same model (through a wrapper) was accepted")
except ValueError as e:
    if "unwatch()" not in str(e):
        fails.append("the second watch() refusal does not say what to do: %s" % e)
wp.unwatch()
wp.watch([m])  # after unwatch(), watching again is fine; Megatron's list of one model chunk is that chunk
try:
    wp.params([m, m])
    fails.append("params() of a list of two model chunks was accepted")
except TypeError as e:
    if "one Probe per chunk" not in str(e):
        fails.append("the refusal of two model chunks does not say what to do: %s" % e)
wp.close()

# include / exclude: only the modules and parameters whose names pass, the micro-batches still counted
m2 = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
ip = Probe(os.path.join(tmp, "filter"), run="filter", include=["0*", "2.weight"], exclude=["*.bias*"])
ip.watch(m2)
with ip.step(1):
    for _ in range(2):
        m2(torch.ones(2, 4)).sum().backward()
ip.params(m2)
got = sorted({(r["name"], r["micro"]) for r in (json.loads(line) for line in open(ip.close())) if "name" in r})
want = sorted({(n, mi) for mi in (0, 1) for n in ("0.in", "0.out", "0.out.grad", "0.weight.grad", "2.weight.grad")}
              | {("0.weight", 1), ("2.weight", 1)})
if got != want:
    fails.append("include/exclude: records %r, want %r" % (got, want))

# Megatron's gradient_accumulation_fusion (and Transformer Engine's fuse_wgrad_accumulation): the layer adds
# its weight gradient into weight.main_grad, sets weight.grad_added_to_main_grad and delivers a placeholder
# (torch.empty: uninitialised bytes); the probe records PARAM.main_grad, the accumulated gradient
class FusedWgradLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        w.main_grad.add_(dy.t() @ x)
        w.grad_added_to_main_grad = True
        return dy @ w, torch.empty(w.main_grad.shape, dtype=x.dtype).fill_(float("nan"))


class Fused(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7)
        self.weight.main_grad = torch.zeros(3, 4)
        self.weight.grad_added_to_main_grad = False
        self.bias = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return FusedWgradLinear.apply(x, self.weight) + self.bias


fm = Fused()
fp = Probe(os.path.join(tmp, "fused"), run="fused")
fp.watch(fm)
mains = []
with fp.step(1):
    for k in range(2):  # two micro-batches: main_grad accumulates
        fm(torch.arange(8, dtype=torch.float32).reshape(2, 4) + k).sum().backward()
        mains.append(fp._digest.host(fm.weight.main_grad.data_ptr(), 4, (3, 4), None))
frecs = [json.loads(line) for line in open(fp.close())][1:]
got = sorted((r["name"], r["micro"], r.get("digest")) for r in frecs if r["phase"] == "grad")
names = [(n, m) for n, m, _ in got]
if names != [("bias.grad", 0), ("bias.grad", 1), ("weight.main_grad", 0), ("weight.main_grad", 1)] or \
        [d for n, _, d in got if n == "weight.main_grad"] != mains:
    fails.append("fused wgrad: parameter gradient records %r, want bias.grad and weight.main_grad (digests %r) "
                 "for micro-batches 0 and 1, no weight.grad" % (got, mains))

for f in fails:
    print("FAIL: " + f)
print("%d records; micro-batches, calls, scalars, rank, refusals, include/exclude, fused-wgrad main_grad checked"
      % (len(recs) - 1))
sys.exit(1 if fails else 0)
