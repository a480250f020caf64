"""probe-digest-cuda.py ALIGN LIBDIR: the probe's GPU digest (libalign_probe_cuda.so, kernels/cuda/digest.cu
on a device pointer and torch's current stream, no host copy) equals its CPU digest
(libalign_probe_digest.so) and align's own: every case is written as an ATF record carrying the device
digest and the payload copied to the host, and `align ingest` recomputes the payload's xxh3t64 and
refuses a record whose digest differs (a wrong digest is refused: the control). Then a probed model on
the GPU (contiguous and transposed outputs, fp32 and bf16, forward and backward) is traced with
payloads and ingested the same way.

The deferred digest (DeviceBatch, harness/probe/native/probe_cuda.cu: leaf kernels enqueued per tensor
on torch's stream, leaves copied back once, roots on the host): every case above plus slices, expanded
(stride 0), permuted 3-d and 9-d, bf16 transposes and a 17-dimensional permutation (the copy fallback), several
hundred tensors per batch and three batches through one context (chunk and scratch reuse), each equal
to the CPU digest of the same tensor; a tensor whose last reference is dropped right after it was
enqueued, its memory then overwritten by the next allocation, still gets the digest of the values it
had. A probed model traced deferred and per tensor (defer=False) gives the same records, digests
included. No observer effect on the GPU: a small MLP trained 3 steps without a probe, twice (the
control: the GPU run is deterministic), and with a deferred probe recording everything: every output,
input gradient and updated weight equal bitwise. Exit 77 without torch or a CUDA device.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile

align, libdir = sys.argv[1], sys.argv[2]
try:
    import torch
except ImportError:
    print("SKIP: no torch in %s" % sys.executable)
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP: no CUDA device")
    sys.exit(77)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness", "probe"))
from align_probe import Digester, Probe  # noqa: E402

dg = Digester(libdir)
g = torch.Generator(device="cuda").manual_seed(7)
tmp = tempfile.mkdtemp()
fails = 0


def ingest(path, want_rc):
    r = subprocess.run([align, "ingest", "--db", os.path.join(tmp, "x.db"), "--as", os.path.basename(path), path],
                       capture_output=True, text=True)
    return r.returncode == want_rc, r.stdout + r.stderr


cases = []
for n in [0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 65535, 65536, 65537, 3 * 65536 + 17, (1 << 22) + 5]:
    cases.append(("uint8[%d]" % n, torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda", generator=g)))
cases.append(("fp32[257,300]", torch.randn(257, 300, device="cuda", generator=g)))
cases.append(("bf16[1000,129]", torch.randn(1000, 129, device="cuda", generator=g).bfloat16()))
cases.append(("fp32[300,257].T", torch.randn(300, 257, device="cuda", generator=g).t()))
names = {torch.uint8: "uint8", torch.float32: "fp32", torch.bfloat16: "bf16"}
lines = [json.dumps({"align_trace": 1, "run": "gpu", "framework": "torch"})]
for i, (label, t) in enumerate(cases):
    c = t.contiguous()
    dev = dg.device(c.data_ptr(), c.numel() * c.element_size(), torch.cuda.current_stream().cuda_stream)
    host_t = t.cpu()
    host = dg.host(host_t.data_ptr(), host_t.element_size(), tuple(host_t.shape), tuple(host_t.stride()))
    if dev != host:
        print("FAIL: %s: GPU digest %s, CPU digest %s" % (label, dev, host))
        fails += 1
    raw = bytes(c.cpu().view(torch.uint8).numpy().tobytes()) if c.numel() else b""
    rec = {"step": 1, "name": "case%d" % i, "dtype": names[t.dtype], "shape": list(t.shape), "digest": dev}
    if raw:  # ATF refuses an empty payload
        rec["payload"] = base64.b64encode(raw).decode()
    lines.append(json.dumps(rec))
good = os.path.join(tmp, "cases.atf")
open(good, "w").write("\n".join(lines) + "\n")
ok, msg = ingest(good, 0)
if not ok:
    print("FAIL: align refuses the GPU digests: " + msg)
    fails += 1
bad = json.loads(lines[-1])
bad["digest"] = "%016x" % (int(bad["digest"], 16) ^ 1)
badp = os.path.join(tmp, "bad.atf")
open(badp, "w").write(lines[0] + "\n" + json.dumps(bad) + "\n")
ok, msg = ingest(badp, 2)
if not ok:
    print("FAIL: the control (a wrong digest) was not refused: " + msg)
    fails += 1
print("%d cases: GPU digest == CPU digest == align's xxh3t64 of the payload" % len(cases))


class T(torch.nn.Module):
    def forward(self, x):
        return x.t()


for dt in (torch.float32, torch.bfloat16):
    m = torch.nn.Sequential(torch.nn.Linear(300, 257), T(), torch.nn.GELU()).cuda().to(dt)
    p = Probe(os.path.join(tmp, "tr"), run="gpu-%s" % str(dt)[6:], payload=["*"], native=libdir)
    p.watch(m)
    with p.step(1):
        y = m(torch.randn(64, 300, device="cuda", dtype=dt, generator=g))
        y.float().pow(2).mean().backward()
    path = p.close()
    ok, msg = ingest(path, 0)
    print(msg.strip())
    if not ok:
        print("FAIL: the GPU trace (%s) does not ingest: %s" % (dt, msg))
        fails += 1

# --- the deferred digest -------------------------------------------------------------------------
def cpu_digest(t):
    h = t.cpu()
    return dg.host(h.data_ptr(), h.element_size(), tuple(h.shape), tuple(h.stride()))


def row_major(t):
    want = 1
    for n, st in zip(reversed(t.shape), reversed(t.stride())):
        if n != 1 and st != want:
            return False
        want *= n
    return True


dcases = list(cases)
base = torch.randn(64, 96, 40, device="cuda", generator=g)
dcases += [("fp32[64,96,40][:, 5:70:3, ::2]", base[:, 5:70:3, ::2]),
           ("fp32 permute(2,0,1)", base.permute(2, 0, 1)),
           ("bf16 permute(1,2,0)", base.bfloat16().permute(1, 2, 0)),
           ("bf16[2048,1536].T", torch.randn(2048, 1536, device="cuda", generator=g).bfloat16().t()),
           ("fp16[300,257].T", torch.randn(300, 257, device="cuda", generator=g).half().t()),
           ("fp32 expand", torch.randn(1, 513, device="cuda", generator=g).expand(77, 513)),
           ("int64[1000,3].T", torch.randint(-9, 9, (1000, 3), device="cuda", generator=g).t()),
           ("fp32[2]*9 permuted", torch.randn([2] * 9, device="cuda", generator=g).permute(8, 7, 6, 5, 4, 3, 2, 1, 0)),
           ("fp32[2]*17 permuted (copy fallback)", torch.randn([2] * 17, device="cuda", generator=g).permute(*range(16, -1, -1))),
           ("fp32[0,5].T", torch.randn(0, 5, device="cuda").t())]
for i in range(300):  # many tensors per batch
    k = (i * 7919) % 5000 + 1
    t = torch.randn(k, 3, device="cuda", generator=g).to(torch.bfloat16 if i % 3 == 0 else torch.float32)
    dcases.append(("many[%d]" % i, t if i % 2 else t.t()))
stream = torch.cuda.current_stream().cuda_stream
batch = dg.batch()
nd = 0
for rnd in range(3):  # three batches through one context: chunks, scratch and events reused
    want, got_labels = [], []
    order = dcases if rnd != 1 else list(reversed(dcases))
    for label, t in order:
        sz = t.numel() * t.element_size()
        strides = None if row_major(t) else tuple(t.stride())
        if not batch.add(t.data_ptr(), t.element_size(), tuple(t.shape), strides, sz, stream, t):
            c = t.contiguous()  # what the probe does when the library declines
            if not batch.add(c.data_ptr(), c.element_size(), tuple(c.shape), None, sz, stream, c):
                print("FAIL: %s: declined twice" % label)
                fails += 1
                continue
        want.append(cpu_digest(t))
        got_labels.append(label)
    got = batch.finish()
    for label, w_, d in zip(got_labels, want, got):
        nd += 1
        if w_ != d:
            print("FAIL: deferred %s (batch %d): %s, CPU %s" % (label, rnd, d, w_))
            fails += 1
# lifetime: the last reference dropped after add(); the next allocation reuses the memory
want = []
for i in range(20):
    t = torch.randn(4096, 1024, device="cuda", generator=g)
    want.append(cpu_digest(t))
    batch.add(t.data_ptr(), 4, (4096, 1024), None, 4096 * 1024 * 4, stream, t)
    del t
    torch.full((4096, 1024), float(i), device="cuda")
for i, (w_, d) in enumerate(zip(want, batch.finish())):
    nd += 1
    if w_ != d:
        print("FAIL: deferred digest of a dropped tensor %d: %s, CPU %s (memory reused too early)" % (i, d, w_))
        fails += 1
batch.close()
print("%d deferred digests (3 batches + dropped tensors) == CPU digest" % nd)


def trace(defer, dt, tag, **kw):
    torch.manual_seed(3)
    m = torch.nn.Sequential(torch.nn.Linear(300, 257), T(), torch.nn.GELU()).cuda().to(dt)
    p = Probe(os.path.join(tmp, "def"), run="%s-%s" % (tag, str(dt)[6:]), payload=["0.*"], native=libdir, defer=defer,
              **kw)
    p.watch(m)
    gg = torch.Generator(device="cuda").manual_seed(11)
    for step in (1, 2):
        with p.step(step):
            y = m(torch.randn(64, 300, device="cuda", dtype=dt, generator=gg))
            y.float().pow(2).mean().backward()
            p.record("loss", y.float().pow(2).mean())
        p.params(m)
    path = p.close()
    return path, [json.loads(x) for x in open(path).read().splitlines()[1:]]


for dt in (torch.float32, torch.bfloat16):
    pd, rd = trace(True, dt, "deferred")
    pi, ri = trace(False, dt, "eager")
    if rd != ri:
        diff = [(a_.get("name"), a_.get("digest"), b_.get("digest")) for a_, b_ in zip(rd, ri) if a_ != b_]
        print("FAIL: deferred and per-tensor traces differ (%s): %d vs %d records, first %s"
              % (dt, len(rd), len(ri), diff[:3]))
        fails += 1
    ok, msg = ingest(pd, 0)
    if not ok:
        print("FAIL: the deferred trace (%s) does not ingest: %s" % (dt, msg))
        fails += 1
    print("%s: deferred trace == per-tensor trace, %d records, ingested" % (dt, len(rd)))
    # the opt-in modes (no module here writes in place): the same records
    for kw in ({"side_stream": True}, {"dedup": True}, {"side_stream": True, "dedup": True}):
        _, rk = trace(True, dt, "opt", **kw)
        if rk != ri:
            diff = [(a_.get("name"), a_.get("digest"), b_.get("digest")) for a_, b_ in zip(rk, ri) if a_ != b_]
            print("FAIL: %s trace differs from the per-tensor trace (%s): %d vs %d records, first %s"
                  % (kw, dt, len(rk), len(ri), diff[:3]))
            fails += 1
    print("%s: side_stream, dedup and both: traces == per-tensor trace" % dt)


# --- no observer effect on the GPU ------------------------------------------------------------------
def train(probe_on, **kw):
    torch.manual_seed(5)
    m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512),
                            T()).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    p = None
    if probe_on:
        p = Probe(os.path.join(tmp, "obs"), run="obs", native=libdir, **kw)
        p.watch(m)
    gg = torch.Generator(device="cuda").manual_seed(13)
    seen = []
    for step in (1, 2, 3):
        x = torch.randn(256, 512, device="cuda", generator=gg, requires_grad=True)
        ctx = p.step(step) if p else contextlib.nullcontext()
        with ctx:
            opt.zero_grad()
            y = m(x)
            y.pow(2).mean().backward()
            opt.step()
        if p:
            p.params(m)
        seen += [y.detach().cpu(), x.grad.cpu()] + [q.detach().cpu() for q in m.parameters()]
    if p:
        p.close()
    return seen


import contextlib  # noqa: E402
a0, a1 = train(False), train(False)
if any(not torch.equal(x, y) for x, y in zip(a0, a1)):
    print("SKIP (observer check): two runs without the probe differ on this GPU (not deterministic)")
else:
    for kw in ({}, {"side_stream": True, "dedup": True}):
        b = train(True, **kw)
        nd = sum(not torch.equal(x, y) for x, y in zip(a0, b))
        if nd:
            print("FAIL: the deferred probe %s changes %d of %d tensors (outputs, input gradients, weights)"
                  % (kw, nd, len(b)))
            fails += 1
        print("no observer effect on the GPU (%s): %d tensors over 3 steps equal bitwise with and without the "
              "probe" % (kw or "defaults", len(b)))

# --- CUDA graphs: a watched module captured into a graph (torch.cuda.graph) ---------------------------------
# the capture runs the hooks: they must leave the capture intact and write nothing (said once on stderr);
# the graph's replays give the eager outputs; records outside the capture are written as usual
gm = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU()).cuda()
gp = Probe(tempfile.mkdtemp(), run="graph", grads=False)
gp.watch(gm)
static_x = torch.randn(8, 64, device="cuda")
with torch.no_grad():
    with gp.step(1):
        want_y = gm(static_x).clone()  # eager, recorded
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph's docs ask
        with gp.step(2):
            gm(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    try:
        with gp.step(3):
            with torch.cuda.graph(g):
                static_y = gm(static_x)
        g.replay()
        torch.cuda.synchronize()
        ok = torch.equal(static_y, want_y)
    except Exception as e:  # noqa: BLE001 - the capture broken by the probe is the failure
        ok = False
        print("FAIL: CUDA graph capture with the probe watching: %s" % e)
graph_recs = [json.loads(x) for x in open(gp.close()).read().splitlines()[1:]]
per = [sum(1 for r in graph_recs if r["step"] == k) for k in (1, 2, 3)]
if not ok or per[0] == 0 or per[1] != per[0] or per[2] != 0:
    print("FAIL: CUDA graph: replay equal to eager %s, records per step %s (want none in the captured step 3)"
          % (ok, per))
    fails += 1
print("CUDA graph capture with the probe watching: the capture holds, replay equals eager, records per step %s"
      % per)
print("%d failures" % fails)
sys.exit(1 if fails else 0)
