"""follow.py: Probe.follow(optimizer) counts the steps by the optimizer, so watch() + follow() instrument a
training loop without touching it. For torch and Paddle, the same model trains 3 steps of 2 micro-batches
twice: once with `with probe.step(s)` and probe.params(model) after each step, once with
probe.follow(opt, params=model) and the loop untouched; the two traces hold the same records in the same
order (seq aside). close() gives the optimizer its own step() back; step() and follow() together are
refused. Exit 0 when all holds."""
import json
import os
import sys
import tempfile

import paddle
import torch

from align_probe import Probe

tmp = tempfile.mkdtemp()
fails = []


def records(path):
    return [{k: v for k, v in json.loads(line).items() if k != "seq"} for line in open(path).read().splitlines()[1:]]


def torch_setup():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def micro(k, s):
        (m(torch.full((3, 4), 0.1 * (s + k))) ** 2).mean().backward()
    return m, opt, micro, lambda: opt.zero_grad()


def paddle_setup():
    paddle.seed(0)
    m = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.Tanh(), paddle.nn.Linear(8, 2))
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=m.parameters())

    def micro(k, s):
        (m(paddle.full([3, 4], 0.1 * (s + k))) ** 2).mean().backward()
    return m, opt, micro, lambda: opt.clear_grad()


for fw, setup in (("torch", torch_setup), ("paddle", paddle_setup)):
    m, opt, micro, zero = setup()
    p = Probe(os.path.join(tmp, fw, "step"), run="step")
    p.watch(m)
    for s in (1, 2, 3):
        with p.step(s):
            for k in range(2):
                micro(k, s)
            opt.step()
            zero()
        p.params(m)
    want = records(p.close())

    m, opt, micro, zero = setup()
    p = Probe(os.path.join(tmp, fw, "follow"), run="follow")
    p.watch(m)
    p.follow(opt, params=m)
    for s in (1, 2, 3):  # the loop as it was, without the probe
        for k in range(2):
            micro(k, s)
        opt.step()
        zero()
    try:
        with p.step(9):
            pass
        fails.append("%s: step() inside follow() was accepted" % fw)
    except ValueError:
        pass
    got = records(p.close())
    if got != want or not any(r["phase"] == "param" for r in got):
        diff = next(((a, b) for a, b in zip(got + [None] * len(want), want + [None] * len(got)) if a != b), None)
        fails.append("%s: follow() trace differs from the step() trace (%d vs %d records; first: %r)"
                     % (fw, len(got), len(want), diff))
    if "step" in vars(opt):
        fails.append("%s: close() left the probe's wrapper on optimizer.step" % fw)

# torch's LR schedulers wrap optimizer.step on the instance (through its __func__): one made before follow()
# is put back by close(); one made after it wraps the probe's bound-method wrapper, which then only calls
# through once the probe is closed
for when in ("before", "after"):
    m, opt, micro, zero = torch_setup()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1) if when == "before" else None
    theirs = vars(opt).get("step")
    p = Probe(os.path.join(tmp, "sched-" + when), run="sched")
    p.watch(m)
    p.follow(opt, params=m)
    try:
        if sched is None:
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
        for s in (1, 2):
            micro(0, s)
            opt.step()
            sched.step()
            zero()
        p.close()
        micro(0, 3)
        opt.step()  # after close(): no record, no error
    except Exception as e:  # noqa: BLE001 - the failure to report
        fails.append("LR scheduler made %s follow(): %s: %s" % (when, type(e).__name__, e))
        continue
    if when == "before" and vars(opt).get("step") is not theirs:
        fails.append("close() did not put back the step wrapper of an LR scheduler made before follow()")
    steps = sorted({r["step"] for r in records(p.path)})
    if steps != [1, 2]:
        fails.append("LR scheduler made %s follow(): steps %r in the trace, want [1, 2]" % (when, steps))

for f in fails:
    print("FAIL: " + f)
if fails:
    sys.exit(1)
print("torch and Paddle: follow(optimizer) traces 3 steps x 2 micro-batches as step() does (%d records); "
      "close() restores optimizer.step" % len(want))
