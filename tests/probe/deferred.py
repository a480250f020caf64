"""deferred.py MOCKDIR: the deferred device digest (harness/probe/native/probe_cuda.cu, compiled on the host
against tests/probe/cuda-mock.h into MOCKDIR/libalign_probe_cuda.so by deferred.sh) and its Python side,
with CPU torch tensors standing in for device tensors:
1. DeviceBatch: contiguous, sliced, permuted (3-d, 9-d), expanded, bf16 and int64 transposes, zero-element
   and one-element tensors and 300 small ones, in three batches through one context (the 8-leaf chunks
   roll over, the scratch grows), each digest equal to libalign_probe_digest.so's of the same tensor; a
   17-dimensional permutation is declined (the copy fallback); the references of tensors whose kernels
   ran (all but the last two: the mock's GPU runs two tensors behind) are dropped before finish(), and
   the rest at finish();
2. Probe(defer=True) with the tensors reported as CUDA: the same trace, record for record (order, seq,
   digests, payloads), as the host digests give.
"""
import json
import os
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
    if kept != 2:  # the mock's events complete two records later: the last two are still held
        print("FAIL: batch %d holds %d of %d tensors before finish (want 2: those whose kernels have not run)"
              % (rnd, kept, len(want)))
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


def trace(native, as_cuda):
    torch.manual_seed(3)
    m = torch.nn.Sequential(torch.nn.Linear(300, 257), T(), torch.nn.GELU(), torch.nn.Linear(64, 9))
    p = Probe(tempfile.mkdtemp(), run="x", payload=["0.*"], native=native)
    info = F.Torch.info
    if as_cuda:
        def cuda_info(self, t):
            i = info(self, t)
            i.cuda = True
            return i
        F.Torch.info = cuda_info
        F.Torch.stream = lambda self, t: 0
    try:
        p.watch(m)
        gg = torch.Generator().manual_seed(11)
        for step in (1, 2):
            with p.step(step):
                y = m(torch.randn(64, 300, generator=gg, requires_grad=True))
                y.pow(2).mean().backward()
                p.record("loss", y.pow(2).mean())
            p.params(m)
        path = p.close()
    finally:
        F.Torch.info = info
    return [json.loads(x) for x in open(path).read().splitlines()[1:]]


a, b = trace(mock, True), trace(os.environ["ALIGNPROBE_LIB_DIR"], False)
if a != b:
    diff = [(x.get("name"), x.get("digest"), y.get("digest")) for x, y in zip(a, b) if x != y]
    print("FAIL: deferred trace differs from the host-digest trace: %d vs %d records, first %s" % (len(a), len(b), diff[:3]))
    fails += 1
print("Probe(defer=True): %d records equal the host-digest trace's, in order" % len(a))
print("%d failures" % fails)
sys.exit(1 if fails else 0)
