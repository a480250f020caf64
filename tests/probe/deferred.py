"""deferred.py MOCKDIR: the deferred device digest (harness/probe/native/probe_cuda.cu, compiled on the host
against tests/probe/cuda-mock.h into MOCKDIR/libalign_probe_cuda.so by deferred.sh) and its Python side,
with CPU torch tensors standing in for device tensors:
1. DeviceBatch: contiguous, sliced, permuted (3-d, 9-d), expanded, bf16 and int64 transposes, zero-element
   and one-element tensors and 300 small ones, in three batches through one context (the 8-leaf chunks
   roll over, the scratch grows), each digest equal to libalign_probe_digest.so's of the same tensor; a
   17-dimensional permutation is declined (the copy fallback); the references of tensors whose kernels
   ran (at the last poll, every 8th add: all but the last two then; the mock's GPU runs two tensors behind)
   are dropped before finish(), and the rest at finish();
2. Probe(defer=True) with the tensors reported as CUDA: the same trace, record for record (order, seq,
   digests, payloads, the loss's bits through align_probe_cuda_enqueue_bytes), as the host digests give;
   a step's records reach the file at the next step's end (params recorded after it with them), all at
   flush().
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import torch

mock = sys.argv[1]
from align_probe import Digester, Probe  # noqa: E402
import align_probe.frameworks as F  # noqa: E402

dg = Digester(mock)
g = torch.Generator().manual_seed(1)
fails = 0


def host(t):
    return dg.host(t.data_ptr(), t.element_size(), tuple(t.shape), tuple(t.stride()))


def row_major(t):
    want = 1
    for n, st in zip(reversed(t.shape), reversed(t.stride())):
        if n != 1 and st != want:
            return False
        want *= n
    return True


base = torch.randn(64, 96, 40, generator=g)
cases = [torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)
         for n in [0, 1, 240, 241, 65535, 65536, 65537, 3 * 65536 + 17, 9 * 65536 + 1, (1 << 22) + 5]]
cases += [base[:, 5:70:3, ::2], base.permute(2, 0, 1), base.bfloat16().permute(1, 2, 0),
          torch.randn(2048, 1536, generator=g).bfloat16().t(), torch.randn(1, 513, generator=g).expand(77, 513),
          torch.randint(-9, 9, (1000, 3), generator=g).t(), torch.randn([2] * 9, generator=g).permute(*range(8, -1, -1)),
          torch.randn([2] * 17, generator=g).permute(*range(16, -1, -1)), torch.randn(0, 5).t(), torch.tensor(3.0),
          torch.randn(5, 1, 7, generator=g).transpose(0, 2), torch.randn(300, 257, generator=g).half().t()]
for i in range(300):
    k = (i * 7919) % 5000 + 1
    t = torch.randn(k, 3, generator=g).to(torch.bfloat16 if i % 3 == 0 else torch.float32)
    cases.append(t if i % 2 else t.t())
batch = dg.batch()
n = declined = 0
for rnd in range(3):
    want = []
    for t in (cases if rnd != 1 else cases[::-1]):
        size = t.numel() * t.element_size()
        if not batch.add(t.data_ptr(), t.element_size(), tuple(t.shape), None if row_major(t) else tuple(t.stride()),
                         size, 0, t):
            declined += 1
            c = t.contiguous()
            batch.add(c.data_ptr(), c.element_size(), tuple(c.shape), None, size, 0, c)
        want.append(host(t))
    kept = sum(k is not None for k in batch._keep)
    # DeviceBatch polls the events at every 8th add (DeviceBatch.add), and the mock's events complete two
    # records later: held are the tensors added since the last poll, and the two before it
    last = len(want) // 8 * 8
    if kept != len(want) - last + 2:
        print("FAIL: batch %d holds %d of %d tensors before finish (want %d: those whose kernels had not run "
              "at the last poll, add %d)" % (rnd, kept, len(want), len(want) - last + 2, last))
        fails += 1
    got = batch.finish()
    if len(got) != len(want) or batch._keep:
        print("FAIL: batch %d: %d digests for %d tensors, %d references left" % (rnd, len(got), len(want), len(batch._keep)))
        fails += 1
    for i, (w, d) in enumerate(zip(want, got)):
        n += 1
        if w != d:
            print("FAIL: batch %d tensor %d: deferred %s, host %s" % (rnd, i, d, w))
            fails += 1
batch.close()
if declined != 3:
    print("FAIL: %d tensors declined, want 3 (the 17-dimensional permutation, once a batch)" % declined)
    fails += 1
print("DeviceBatch: %d deferred digests equal the host's (%d device allocations)"
      % (n, dg._cuda_lib().align_probe_mock_mallocs()))


class T(torch.nn.Module):
    def forward(self, x):
        return x.t()


class Inc(torch.nn.Module):
    """Writes its input in place (the version counter moves): its output is the input object, changed."""
    def forward(self, x):
        return x.add_(1.0)


def trace(native, as_cuda, inc=False, **kw):
    torch.manual_seed(3)
    mods = [torch.nn.Linear(300, 257), T(), torch.nn.GELU(), torch.nn.Linear(64, 9)]
    if inc:
        mods.insert(1, Inc())
    m = torch.nn.Sequential(*mods)
    p = Probe(tempfile.mkdtemp(), run="x", payload=["0.*"], native=native, **kw)
    info = F.Torch.info
    if as_cuda:
        def cuda_info(self, t):
            i = info(self, t)
            i.cuda = True
            return i
        F.Torch.info = cuda_info
        F.Torch.stream = lambda self, t: 0
    seen = []  # records in the file after each step's end, and after flush()

    def written():
        return len(open(p.path).read().splitlines()) - 1
    try:
        p.watch(m)
        gg = torch.Generator().manual_seed(11)
        for step in (1, 2, 3):
            with p.step(step):
                y = m(torch.randn(64, 300, generator=gg, requires_grad=True))
                y.pow(2).mean().backward()
                p.record("loss", y.pow(2).mean())
            p.params(m)
            seen.append(written())
        p.flush()
        seen.append(written())
        path = p.close()
    finally:
        F.Torch.info = info
    return [json.loads(x) for x in open(path).read().splitlines()[1:]], seen


(a, seen_a), (b, seen_b) = trace(mock, True), trace(os.environ["ALIGNPROBE_LIB_DIR"], False)
# deferred: a step's records are written at the next step's end (the parameters recorded after it at the end
# of the step after),
# everything at flush(); the host digests write each record at once
inside = [sum(1 for r in a if r.get("step") == k and r["phase"] != "param") for k in (1, 2, 3)]
params = sum(1 for r in a if r.get("step") == 1 and r["phase"] == "param")
want_a = [0, inside[0], inside[0] + params + inside[1], len(a)]
if seen_a != want_a or seen_b[-1] != len(b):
    print("FAIL: records written after steps 1, 2, 3 and flush(): deferred %s (want %s), host %s"
          % (seen_a, want_a, seen_b))
    fails += 1
losses = [r for r in a if r["name"] == "loss"]
if len(losses) != 3 or any("bits" not in r for r in losses):
    print("FAIL: the deferred loss records lack their bits: %s" % losses)
    fails += 1
print("Probe(defer=True): records written one step behind (%s after steps 1-3 and flush), the loss's bits "
      "copied without a wait" % seen_a)


def same(x, y, what):
    global fails
    if x != y:
        diff = [(r.get("name"), r.get("digest"), q.get("digest")) for r, q in zip(x, y) if r != q]
        print("FAIL: %s: %d vs %d records, first differences %s" % (what, len(x), len(y), diff[:3]))
        fails += 1
        return False
    return True


same(a, b, "deferred trace vs the host-digest trace")
print("Probe(defer=True): %d records equal the host-digest trace's, in order" % len(a))

# side_stream: the same trace, and every kernel and copy on the library's stream (none on the caller's, 0)
launches = dg._cuda_lib().align_probe_mock_launches
launches.argtypes, launches.restype = [ctypes.c_int], ctypes.c_ulong
own0, side0 = launches(0), launches(1)
c, _ = trace(mock, True, side_stream=True)
own, side = launches(0) - own0, launches(1) - side0
if same(c, b, "side-stream deferred trace vs the host-digest trace") and (own != 0 or side == 0):
    print("FAIL: side stream: %d launches on the caller's stream (want 0), %d on the library's" % (own, side))
    fails += 1
print("Probe(side_stream=True): the same %d records; %d kernels and copies, none on the caller's stream"
      % (len(c), side))
# side_stream with a module that writes its input in place: the tensor's digest may have read it after the
# write, so its records carry the payload's digest (0.out has a payload) or say `missing` (1.in), never a
# digest of unknown bytes; every other record as on the host
want, _ = trace(os.environ["ALIGNPROBE_LIB_DIR"], False, inc=True)
got, _ = trace(mock, True, inc=True, side_stream=True)
odd = [(r["step"], r["name"]) for r, q in zip(got, want) if r != q]
miss = [(r["step"], r["name"]) for r in got if "missing" in r]
if len(got) != len(want) or sorted(odd) != sorted(miss) or {n for _, n in miss} != {"1.in"} or \
        any("digest" in r for r in got if "missing" in r):
    print("FAIL: side stream, in-place module: records differing from the host's %s, missing %s (want 1.in of "
          "each step only)" % (odd, miss))
    fails += 1
print("Probe(side_stream=True), a module writing its input in place: 1.in says missing in %d steps, 0.out "
      "(payload) has its payload's digest, the rest as on the host" % len(miss))

# child processes: CPU tensors declared CUDA tensors to the probe (its deferred path, through the mock library)
MOCK_CHILD = r"""
import sys, torch
import align_probe.frameworks as F
from align_probe import Probe
info = F.Torch.info
def cuda_info(self, t):
    i = info(self, t)
    i.cuda = True
    return i
F.Torch.info, F.Torch.stream = cuda_info, lambda self, t: 0
"""

# a run that stops: an exception inside step 2 (deferred digests pending for steps 1 and 2) writes every
# record made before it; a run that ends without close() gets its records at exit
crash = MOCK_CHILD + r"""
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
p = Probe(sys.argv[1], run="crash", native=sys.argv[2])
p.watch(m)
for step in (1, 2):
    with p.step(step):
        m(torch.ones(2, 8)).sum().backward()
        if step == 2 and sys.argv[3] == "raise":
            raise RuntimeError("loss is nan")
"""
for how in ("raise", "exit"):
    d = tempfile.mkdtemp()
    r = subprocess.run([sys.executable, "-c", crash, d, mock, how], capture_output=True, text=True)
    path = os.path.join(d, "crash-rank0.atf")
    recs = [json.loads(x) for x in open(path).read().splitlines()[1:]] if os.path.exists(path) else []
    steps = sorted({(x["step"], x["name"]) for x in recs if x["name"] == "1.out"})
    if steps != [(1, "1.out"), (2, "1.out")] or (how == "raise") != ("loss is nan" in r.stderr):
        print("FAIL: a run stopped by %s: the trace holds %s of 1.out (want steps 1 and 2); stderr %s"
              % (how, steps, r.stderr[-300:]))
        fails += 1
print("a run stopped by an exception in a step, or ending without close(): every record written")

# CUDA graph capture: CUDA tensors recorded while the current stream captures are left out (said once);
# steps outside the capture are traced as usual
capture = MOCK_CHILD + r"""
state = {"on": False}
F.Torch.capturing = lambda self: state["on"]
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
p = Probe(sys.argv[1], run="cap", native=sys.argv[2])
p.watch(m)
for step in (1, 2, 3):
    state["on"] = step == 2
    with p.step(step):
        loss = m(torch.ones(2, 8)).sum()
        loss.backward()
        p.record("loss", loss)
p.close()
"""
d = tempfile.mkdtemp()
r = subprocess.run([sys.executable, "-c", capture, d, mock], capture_output=True, text=True)
recs = [json.loads(x) for x in open(os.path.join(d, "cap-rank0.atf")).read().splitlines()[1:]] \
    if r.returncode == 0 else []
per = [sum(1 for x in recs if x["step"] == k) for k in (1, 2, 3)]
if r.returncode or per[1] != 0 or per[0] == 0 or per[0] != per[2] or r.stderr.count("CUDA graph is captured") != 1:
    print("FAIL: CUDA graph capture in step 2: records per step %s (want none in step 2), exit %d, stderr %s"
          % (per, r.returncode, r.stderr[-400:]))
    fails += 1
print("records made while a CUDA graph is captured are left out, said once (records per step %s)" % per)

# dedup: the same records (digests included) as without it, deferred and on the host, with fewer digests
# enqueued; a tensor written in place between two records (Inc) is digested again
for inc in (False, True):
    want, _ = trace(os.environ["ALIGNPROBE_LIB_DIR"], False, inc=inc)
    for as_cuda in (False, True):
        n0 = launches(1) + launches(0)
        got, _ = trace(mock if as_cuda else os.environ["ALIGNPROBE_LIB_DIR"], as_cuda, inc=inc, dedup=True)
        n_dedup = launches(1) + launches(0) - n0
        n0 = launches(1) + launches(0)
        trace(mock, True, inc=inc)
        n_plain = launches(1) + launches(0) - n0
        what = "dedup=True (%s%s) vs the host-digest trace" % ("deferred" if as_cuda else "host",
                                                             ", in-place module" if inc else "")
        if same(got, want, what) and as_cuda and not n_dedup < n_plain:
            print("FAIL: %s: %d digests enqueued, %d without dedup" % (what, n_dedup, n_plain))
            fails += 1
    if inc:
        byname = {r["name"]: r.get("digest") for r in want if r.get("step") == 1}
        if byname.get("1.in") == byname.get("1.out") or byname.get("0.out") != byname.get("1.in"):
            print("FAIL: the in-place module's input and output records: %s" % byname)
            fails += 1
print("Probe(dedup=True): the same records as without it, deferred (fewer digests enqueued) and on the host; "
      "a tensor written in place between two records digested again")
print("%d failures" % fails)
sys.exit(1 if fails else 0)
