"""Overhead of the probe (and of msprobe) on the DSv4 block at benchmark sizes, on the CPU.

    bench.py --framework torch|paddle [--steps 20] [--warmup 3] [--tokens 256] [--dim 512]

Per mode, the median (min, max) of the step time (forward + backward + SGD, plus the probe's own
records: loss, parameters after the step) over --steps steps after --warmup, one fresh model per mode,
all in one process, and the ratio to the plain step (ratio = median / plain median). Modes: plain;
probe digests only (inputs, outputs, output gradients, parameter gradients, parameters: xxh3t64);
probe with payloads of every tensor; for torch, msprobe (mindstudio-probe) statistics in md5 mode at
level L0 (modules) and L1 (APIs). The plain step is measured again after each group (the spread
between plain rows is the machine's noise: a shared CPU). Each mode's final weights are compared bitwise with the plain run's
(the observer effect at benchmark size: "weights equal" or the count of differing tensors).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import dsv4_block as B  # noqa: E402


def run(fw, w, steps, warmup, mode, tmp):
    m, step, to_input = (B.build_torch if fw == "torch" else B.build_paddle)(w)
    probe = dbg = None
    if mode.startswith("probe"):
        from align_probe import Probe
        probe = Probe(os.path.join(tmp, mode), run=mode, payload=["*"] if mode == "probe-payloads" else [])
        probe.watch(m)
    elif mode.startswith("msprobe"):
        from msprobe.pytorch import PrecisionDebugger
        cfg = os.path.join(tmp, mode + ".json")
        json.dump({"task": "statistics", "dump_path": os.path.join(tmp, mode), "rank": [], "step": [],
                   "level": mode.split("-")[1], "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                              "summary_mode": "md5"}}, open(cfg, "w"))
        dbg = PrecisionDebugger(config_path=cfg)
    times = []
    for s in range(1, warmup + steps + 1):
        x = to_input(w["input.%d" % (1 + (s - 1) % 3)])
        t0 = time.perf_counter()
        if probe:
            with probe.step(s):
                _, loss, _ = step(x, keep=False)
                probe.record("loss", loss)
            probe.params(m)
        elif dbg:
            dbg.start(m)
            step(x, keep=False)
            dbg.stop()
            dbg.step()
        else:
            step(x, keep=False)
        if s > warmup:
            times.append(time.perf_counter() - t0)
    if probe:
        probe.close()
    return times, [B.raw(p) for _, p in m.named_parameters()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", default="torch")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--dim", type=int, default=512)
    a = ap.parse_args()
    B.T, B.D, B.F = a.tokens, a.dim, a.dim
    # one thread: the figures should not depend on what else the machine runs on its other cores
    if a.framework == "torch":
        import torch
        torch.set_num_threads(1)
    else:
        import paddle
        paddle.set_device("cpu")
    w = B.make_weights()
    modes = ["plain", "probe-digests", "probe-payloads", "plain"]
    if a.framework == "torch":
        try:
            import msprobe  # noqa: F401
            modes += ["msprobe-L0", "msprobe-L1", "plain"]  # last: msprobe patches torch for the process
        except ImportError:
            print("msprobe: not installed (mindstudio-probe); its rows are left out")
    fwv = __import__(a.framework).__version__
    commit = subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    print("%s %s, DSv4 block T=%d D=%d F=%d E=%d k=%d fp32, %d steps after %d warm-up; CPU: %s, %d cores (1 thread); commit %s"
          % (a.framework, fwv, B.T, B.D, B.F, B.E, B.K, a.steps, a.warmup, platform.processor() or platform.machine(),
             os.cpu_count(), commit))
    print("%-16s %10s %10s %10s %8s  %s" % ("mode", "median ms", "min ms", "max ms", "ratio", "weights after"))
    tmp = tempfile.mkdtemp()
    base = None
    for mode in modes:
        times, weights = run(a.framework, w, a.steps, a.warmup, mode, tmp)
        med = statistics.median(times)
        if base is None:
            base, base_w = med, weights
        nd = sum(x != y for x, y in zip(weights, base_w))
        print("%-16s %10.2f %10.2f %10.2f %7.2fx  %s" % (mode, 1e3 * med, 1e3 * min(times), 1e3 * max(times),
                                                         med / base, "equal" if nd == 0 else "%d of %d tensors differ" % (nd, len(weights))))
    print("ratio = median step time / plain median step time")


if __name__ == "__main__":
    main()
