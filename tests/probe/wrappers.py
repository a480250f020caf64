"""wrappers.py: Probe.watch / Probe.params look through data-parallel and precision wrappers.

The same model trains 2 steps bare and wrapped: torch DistributedDataParallel (gloo, one rank) around
a Float16Module-named wrapper (Megatron-Core's class name and attribute, `module`) and
torch.nn.DataParallel; paddle.DataParallel. With the default (unwrap=True) each wrapped run's trace
holds the bare run's records (names, calls, digests) exactly; with unwrap=False the names carry the
wrappers' prefixes (module.module.0, _layers.0). A DTensor is recorded as its local shard; sparse, meta and
storage-less subclass tensors as `missing` records with the reason. Two pipeline stages of a Megatron-style
model (decoder layers with layer_number) trace their layers as the whole model does. Exit 0 when all holds.
"""
import json
import os
import sys
import tempfile

from align_probe import Probe

tmp = tempfile.mkdtemp()
fails = []


def records(path):
    out = []
    for line in open(path).read().splitlines()[1:]:
        r = json.loads(line)
        out.append((r["step"], r.get("micro"), r["name"], r["phase"], r.get("call"), r.get("io"),
                    r.get("digest") or r.get("bits")))
    return out


def train(fw, name, make, unwrap=True):
    m, wrapped, opt, x = make()
    p = Probe(os.path.join(tmp, fw, name), run=name, unwrap=unwrap)
    p.watch(wrapped)
    for step in (1, 2):
        with p.step(step):
            loss = (wrapped(x) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad() if fw == "torch" else opt.clear_grad()
            p.record("loss", loss)
        p.params(wrapped)
    return records(p.close())


def check(fw, runs, bare_name, prefixed):
    bare = runs[bare_name]
    if not any(r[2].endswith(".grad") for r in bare) or not any(r[3] == "param" for r in bare):
        fails.append("%s: the bare trace lacks gradient or parameter records" % fw)
    for name, rs in runs.items():
        if name in (bare_name, "raw"):
            continue
        if rs != bare:
            diff = next((a, b) for a, b in zip(rs + [None] * len(bare), bare + [None] * len(rs)) if a != b)
            fails.append("%s: %s: the trace differs from the bare model's (first: %r vs %r)" % (fw, name, diff[0], diff[1]))
    raw = {r[2] for r in runs["raw"]}
    if not any(n.startswith(prefixed) for n in raw):
        fails.append("%s: unwrap=False: no name starts with %r (%r)" % (fw, prefixed, sorted(raw)[:4]))


# torch
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(20000 + os.getpid() % 20000))
dist.init_process_group("gloo", rank=0, world_size=1)


class Float16Module(torch.nn.Module):  # Megatron-Core's precision wrapper: the wrapped model in .module
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *a):
        return self.module(*a)


torch.manual_seed(0)
init = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.SiLU(), torch.nn.Linear(16, 8))
tx = torch.randn(4, 8)


def torch_make(wrap):
    def make():
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.SiLU(), torch.nn.Linear(16, 8))
        m.load_state_dict(init.state_dict())
        w = wrap(m)
        return m, w, torch.optim.SGD(m.parameters(), lr=0.1), tx
    return make


runs = {
    "bare": train("torch", "bare", torch_make(lambda m: m)),
    "ddp-f16": train("torch", "ddp-f16", torch_make(
        lambda m: torch.nn.parallel.DistributedDataParallel(Float16Module(m)))),
    "dp": train("torch", "dp", torch_make(torch.nn.DataParallel)),
    "raw": train("torch", "raw", torch_make(
        lambda m: torch.nn.parallel.DistributedDataParallel(Float16Module(m))), unwrap=False),
}
check("torch", runs, "bare", "module.module.")

# tensors whose memory is not their own: a DTensor is digested as its local shard; sparse, meta and
# storage-less wrapper subclasses are `missing` records with the reason (never a crash of the run)
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import Shard, distribute_tensor  # noqa: E402


class NoStorage(torch.Tensor):  # a wrapper subclass without storage, as Transformer Engine's Float8Tensor
    @staticmethod
    def __new__(cls, shape):
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.float32)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(str(func))


local = torch.arange(16, dtype=torch.float32).reshape(4, 4) / 3
dt = distribute_tensor(local, init_device_mesh("cpu", (1,)), [Shard(0)])
sp = Probe(os.path.join(tmp, "torch", "special"), run="special")
with sp.step(1):
    sp.record("dtensor", dt)
    sp.record("sparse", torch.eye(3).to_sparse())
    sp.record("meta", torch.ones(3, device="meta"))
    sp.record("nostorage", NoStorage((2, 3)))
got = {r["name"]: r for r in (json.loads(line) for line in open(sp.close()).read().splitlines()[1:])}
want_digest = sp._digest.host(local.data_ptr(), 4, (4, 4), None)
if got.get("dtensor", {}).get("digest") != want_digest:
    fails.append("DTensor: %r, want the local shard's digest %s" % (got.get("dtensor"), want_digest))
for name, word in (("sparse", "sparse_coo"), ("meta", "meta"), ("nostorage", "NoStorage")):
    if word not in got.get(name, {}).get("missing", ""):
        fails.append("%s tensor: %r, want a missing record naming %r" % (name, got.get(name), word))
dist.destroy_process_group()


# pipeline stages: Megatron numbers a stage's decoder layers from 0 in module names, and keeps the global
# 1-based number in TransformerLayer.layer_number; the two stages of a 4-layer model trace their layers
# as the whole model does (decoder.layers.2 and .3 on stage 1), and global_layers=False keeps 0 and 1
class Layer(torch.nn.Module):
    def __init__(self, number):
        super().__init__()
        self.layer_number = number
        self.mlp = torch.nn.Linear(8, 8)

    def forward(self, x):
        return x + self.mlp(x)


class Decoder(torch.nn.Module):
    def __init__(self, numbers):
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer(n) for n in numbers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class GPT(torch.nn.Module):
    def __init__(self, numbers):
        super().__init__()
        self.decoder = Decoder(numbers)

    def forward(self, x):
        return self.decoder(x)


torch.manual_seed(1)
full = GPT([1, 2, 3, 4])
stages = [GPT([1, 2]), GPT([3, 4])]
for k, st in enumerate(stages):
    for i in range(2):
        st.decoder.layers[i].load_state_dict(full.decoder.layers[2 * k + i].state_dict())


def layer_records(path):
    return sorted((r[2], r[6]) for r in records(path) if r[2].startswith("decoder.layers."))


def stage_run(global_layers):
    ps = [Probe(os.path.join(tmp, "pp%d" % global_layers, "s%d" % k), run="s%d" % k, global_layers=global_layers)
          for k in range(2)]
    for p, st in zip(ps, stages):
        p.watch(st)
    with ps[0].step(1), ps[1].step(1):
        stages[1](stages[0](tx)).sum().backward()
    for p, st in zip(ps, stages):
        p.params(st)
    return sorted(layer_records(ps[0].close()) + layer_records(ps[1].close()))


pf = Probe(os.path.join(tmp, "pp", "full"), run="full")
pf.watch(full)
with pf.step(1):
    full(tx).sum().backward()
pf.params(full)
want_pp = layer_records(pf.close())
got_pp = stage_run(True)
if got_pp != want_pp or not any(n.startswith("decoder.layers.3.mlp.weight") for n, _ in want_pp):
    fails.append("pipeline stages: the stages' decoder-layer records differ from the whole model's (first: %r)"
                 % (next((a, b) for a, b in zip(got_pp + [None], want_pp + [None]) if a != b),))
local = {n.split(".")[2] for n, _ in stage_run(False)}
if local != {"0", "1"}:
    fails.append("global_layers=False: layer indices %r, want the local 0 and 1" % sorted(local))

# paddle
import paddle  # noqa: E402

paddle.seed(0)
pinit = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.Silu(), paddle.nn.Linear(16, 8))
px = paddle.randn([4, 8])


def paddle_make(wrap):
    def make():
        m = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.Silu(), paddle.nn.Linear(16, 8))
        m.set_state_dict(pinit.state_dict())
        return m, wrap(m), paddle.optimizer.SGD(learning_rate=0.1, parameters=m.parameters()), px
    return make


pruns = {
    "bare": train("paddle", "bare", paddle_make(lambda m: m)),
    "dp": train("paddle", "dp", paddle_make(paddle.DataParallel)),
    "raw": train("paddle", "raw", paddle_make(paddle.DataParallel), unwrap=False),
}
check("paddle", pruns, "bare", "_layers.")

for f in fails:
    print("FAIL: " + f)
if fails:
    sys.exit(1)
print("torch DDP(Float16Module), DataParallel and paddle.DataParallel trace as the bare model (%d and %d "
      "records); unwrap=False keeps module.module. / _layers.; DTensor = its local shard; sparse, meta, "
      "storage-less subclass: missing; pipeline stages named as the whole model" % (len(runs["bare"]), len(pruns["bare"])))
