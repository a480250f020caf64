"""probe-digest-cuda.py ALIGN LIBDIR: the probe's GPU digest (libalign_probe_cuda.so, kernels/cuda/digest.cu
on a device pointer and torch's current stream, no host copy) equals its CPU digest
(libalign_probe_digest.so) and align's own: every case is written as an ATF record carrying the device
digest and the payload copied to the host, and `align ingest` recomputes the payload's xxh3t64 and
refuses a record whose digest differs (a wrong digest is refused: the control). Then a probed model on
the GPU (contiguous and transposed outputs, fp32 and bf16, forward and backward) is traced with
payloads and ingested the same way. Exit 77 without torch or a CUDA device.
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
print("%d failures" % fails)
sys.exit(1 if fails else 0)
