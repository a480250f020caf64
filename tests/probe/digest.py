"""digest.py ALIGN: the probe's host digest (libalign_probe_digest.so) equals align's own xxh3t64.

Cases: byte strings at every XXH3 length class and leaf boundary, and framework tensors that are not
contiguous (torch transposes, slices with steps, expanded broadcasts; Paddle transposes), digested in
place through their strides. Each case is written as an ATF record with the probe's digest and the
payload (the row-major bytes, made independently with numpy); `align ingest` recomputes the payload's
xxh3t64 and refuses the file if any digest differs. A record with one bit of its digest flipped is
refused (the control). Also: the strided digest equals the digest of the contiguous copy.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from align_probe import Digester

align = sys.argv[1]
dg = Digester()
tmp = tempfile.mkdtemp()
rng = np.random.default_rng(3)
recs = []
fails = 0


def add(label, digest, raw, dtype, shape):
    r = {"step": 1, "name": label, "dtype": dtype, "shape": list(shape), "digest": digest}
    if raw:  # ATF refuses an empty payload
        r["payload"] = base64.b64encode(raw).decode()
    recs.append(r)


for n in [0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 65535, 65536, 65537, 3 * 65536 + 17, 300001]:
    b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    add("bytes%d" % n, dg.host_bytes(b), b, "uint8", [n])

import torch  # noqa: E402

base = torch.from_numpy(rng.standard_normal((300, 257)).astype(np.float32))
tensors = {"t.T": base.t(), "t[::3, 5:200:2]": base[::3, 5:200:2], "t.expand": base[:1, :].expand(70, 257),
           "t.bf16.T": base.bfloat16().t(), "t.int64[:, ::4]": torch.arange(40000).reshape(200, 200)[:, ::4],
           "t[1:, 1:]": base[1:, 1:], "t.permute": base.reshape(10, 30, 257).permute(2, 0, 1)}
for label, t in tensors.items():
    if t.is_contiguous():
        print("FAIL: case %s is contiguous" % label)
        fails += 1
    d = dg.host(t.data_ptr(), t.element_size(), tuple(t.shape), tuple(t.stride()))
    c = t.contiguous()
    if d != dg.host_bytes(c.view(torch.uint8).numpy().tobytes() if c.dtype == torch.bfloat16 else c.numpy().tobytes()):
        print("FAIL: %s: strided digest differs from the contiguous copy's" % label)
        fails += 1
    raw = c.view(torch.int16).numpy().tobytes() if c.dtype == torch.bfloat16 else c.numpy().tobytes()
    add(label, d, raw, {torch.float32: "fp32", torch.bfloat16: "bf16", torch.int64: "int64"}[t.dtype], t.shape)

good = os.path.join(tmp, "good.atf")
with open(good, "w") as f:
    f.write(json.dumps({"align_trace": 1, "run": "digests"}) + "\n")
    for r in recs:
        f.write(json.dumps(r) + "\n")
r = subprocess.run([align, "ingest", "--db", os.path.join(tmp, "a.db"), good], capture_output=True, text=True)
if r.returncode != 0:
    print("FAIL: align refuses the probe's digests: " + r.stderr)
    fails += 1
bad = dict(recs[-1])
bad["digest"] = "%016x" % (int(bad["digest"], 16) ^ 1)
badp = os.path.join(tmp, "bad.atf")
with open(badp, "w") as f:
    f.write(json.dumps({"align_trace": 1, "run": "bad"}) + "\n" + json.dumps(bad) + "\n")
r = subprocess.run([align, "ingest", "--db", os.path.join(tmp, "b.db"), badp], capture_output=True, text=True)
if r.returncode != 2 or "digest" not in r.stderr:
    print("FAIL: a flipped digest bit was not refused: rc %d %s" % (r.returncode, r.stderr))
    fails += 1
print("%d cases (%d strided tensors): the probe's digest is align's xxh3t64 of the payload" % (len(recs), len(tensors)))
sys.exit(1 if fails else 0)
