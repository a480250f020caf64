"""kwargs.py: the same model in torch and Paddle, a layer called with tensors as keyword arguments (as
PaddleFleet and Megatron layers take attention_mask=, position_ids=): both probes record the same names,
calls and io links (MOD.in.0 for the positional tensor, MOD.in.1 for the keyword one), so the traces meet.
Exit 0 when they do."""
import json
import os
import sys
import tempfile

import paddle
import torch

from align_probe import Probe

tmp = tempfile.mkdtemp()


def build(nn, tensor):
    class Gate(nn.Module if hasattr(nn, "Module") else nn.Layer):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x, scale=None, bias=None):
            y = self.proj(x) * scale
            return y if bias is None else y + bias

    class Model(nn.Module if hasattr(nn, "Module") else nn.Layer):
        def __init__(self):
            super().__init__()
            self.gate = Gate()

        def forward(self, x):
            return self.gate(x, scale=tensor([2.0]), bias=tensor([0.5]))
    return Model()


def names(model, x, fw):
    p = Probe(os.path.join(tmp, fw), run=fw, grads=False)
    p.watch(model)
    with p.step(1):
        model(x)
    return sorted((r["name"], r.get("call"), r.get("io"))
                  for r in (json.loads(line) for line in open(p.close()).read().splitlines()[1:]))


t = names(build(torch.nn, torch.tensor), torch.ones(2, 4), "torch")
p = names(build(paddle.nn, paddle.to_tensor), paddle.ones([2, 4]), "paddle")
want = ("gate.in.2", "gate#0", "in")
if t != p or want not in t:
    print("FAIL: torch and Paddle record different names for a call with keyword tensors:\n  torch  %r\n  paddle %r"
          % (t, p))
    sys.exit(1)
print("torch and Paddle: %d records, the same names, calls and io (keyword tensors as MOD.in.1, MOD.in.2)" % len(t))
