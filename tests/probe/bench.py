"""Overhead of the probe (and of msprobe) on the DSv4 block at benchmark sizes, on the CPU or a GPU.

    bench.py --framework torch|paddle [--steps 20] [--warmup 3] [--tokens 256] [--dim 512]
    bench.py --framework torch --device cuda [--dtype fp32|bf16]   # defaults T=4096, D=F=2048

On the GPU (--device cuda: torch; Paddle where it has CUDA) the model, inputs and optimizer live on the
device, the step is timed between two torch.cuda.synchronize() calls, and the probe modes are
probe-digests (deferred GPU digests: one wait per step), probe-digests-eager (defer=False: one wait per
tensor) and probe-payloads (3 steps after 1 warm-up: every tensor is copied and written); the sizes
make the step GPU-bound. The probe-digests row also prints its digested records and bytes a step;
ALIGN_BENCH_PROFILE=DIR runs its timed steps under cProfile and writes (and prints) the top functions by
own time to DIR/probe-digests-profile.txt.

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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import dsv4_block as B  # noqa: E402


def on_device(fw, device, m, to_input):
    """The model and its inputs moved to the GPU (the optimizer keeps the same parameter objects);
    sync(): wait for the device."""
    if device == "cpu":
        return m, to_input, lambda: None
    if fw == "torch":
        import torch
        m.cuda()
        return m, lambda a: to_input(a).detach().cuda().requires_grad_(True), torch.cuda.synchronize
    import paddle
    paddle.set_device("gpu")
    m.to("gpu")

    def to_gpu(a):
        t = to_input(a).detach().cuda()
        t.stop_gradient = False
        return t
    return m, to_gpu, paddle.device.synchronize


def run(fw, w, steps, warmup, mode, tmp, device="cpu", dtype="fp32"):
    m, step, to_input = (B.build_torch if fw == "torch" else B.build_paddle)(w, dtype)
    m, to_input, sync = on_device(fw, device, m, to_input)
    probe = dbg = None
    if mode.startswith("probe"):
        from align_probe import Probe
        probe = Probe(os.path.join(tmp, mode), run=mode, payload=["*"] if mode == "probe-payloads" else [],
                      defer=mode != "probe-digests-eager")
        probe.watch(m)
    elif mode.startswith("msprobe"):
        from msprobe.pytorch import PrecisionDebugger
        cfg = os.path.join(tmp, mode + ".json")
        json.dump({"task": "statistics", "dump_path": os.path.join(tmp, mode), "rank": [], "step": [],
                   "level": mode.split("-")[1], "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                              "summary_mode": "md5"}}, open(cfg, "w"))
        dbg = PrecisionDebugger(config_path=cfg)
    times = []
    prof = None
    if probe and os.environ.get("ALIGN_BENCH_PROFILE") and mode == "probe-digests":
        import cProfile
        prof = cProfile.Profile()
    for s in range(1, warmup + steps + 1):
        x = to_input(w["input.%d" % (1 + (s - 1) % 3)])
        sync()
        t0 = time.perf_counter()
        if prof and s > warmup:
            prof.enable()
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
        sync()
        if prof and s > warmup:
            prof.disable()
        if s > warmup:
            times.append(time.perf_counter() - t0)
    if probe:
        path = probe.close()
        if path and mode == "probe-digests":
            count_records(path, warmup + steps)
    if prof:
        dump_profile(prof, os.environ["ALIGN_BENCH_PROFILE"], steps)
    return times, [B.raw(p) for _, p in m.named_parameters()]


def count_records(path, steps):
    """Prints the records a step and the bytes they digest (from the trace: dtype and shape)."""
    size = {"fp32": 4, "bf16": 2, "fp16": 2, "fp64": 8, "int64": 8, "int32": 4, "bool": 1}
    n = nbytes = 0
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "digest" not in r:
                continue
            n += 1
            e = size.get(r.get("dtype"), 0)
            for d in r.get("shape", []):
                e *= d
            nbytes += e
    print("  (probe-digests: %.1f digested records a step, %.1f MB a step)" % (n / steps, nbytes / steps / 1e6))


def dump_profile(prof, where, steps):
    """ALIGN_BENCH_PROFILE=DIR: cProfile of the timed probe-digests steps, the top functions by own time,
    written to DIR/probe-digests-profile.txt and printed."""
    import io
    import pstats
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_stats(30)
    text = "cProfile of %d timed probe-digests steps (totals over all of them)\n%s" % (steps, buf.getvalue())
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, "probe-digests-profile.txt"), "w") as f:
        f.write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", default="torch")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--tokens", type=int, default=None, help="T (default 256 on the CPU, 4096 on the GPU)")
    ap.add_argument("--dim", type=int, default=None, help="D = F (default 512 on the CPU, 2048 on the GPU)")
    a = ap.parse_args()
    gpu = a.device == "cuda"
    B.T = a.tokens or (4096 if gpu else 256)
    B.D = B.F = a.dim or (2048 if gpu else 512)
    # one thread: the figures should not depend on what else the machine runs on its other cores
    if a.framework == "torch":
        import torch
        torch.set_num_threads(1)
        if gpu and not torch.cuda.is_available():
            print("SKIP: torch %s has no CUDA device" % torch.__version__)
            sys.exit(77)
        where = ("GPU: %s" % torch.cuda.get_device_name()) if gpu else None
    else:
        import paddle
        if gpu and not paddle.device.is_compiled_with_cuda():
            print("SKIP: paddle %s is not built with CUDA" % paddle.__version__)
            sys.exit(77)
        paddle.set_device("gpu" if gpu else "cpu")
        where = ("GPU: %s" % paddle.device.cuda.get_device_name()) if gpu else None
    w = B.make_weights()
    modes = ["plain", "probe-digests", "probe-payloads", "plain"]
    if gpu:
        modes = ["plain", "probe-digests", "probe-digests-eager", "plain", "probe-payloads", "plain"]
    if a.framework == "torch":
        try:
            import msprobe  # noqa: F401
            modes += ["msprobe-L0", "msprobe-L1", "plain"]  # last: msprobe patches torch for the process
        except ImportError:
            print("msprobe: not installed (mindstudio-probe); its rows are left out")
    fwv = __import__(a.framework).__version__
    commit = subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    cpu = "CPU: %s, %d cores (1 thread)" % (platform.processor() or platform.machine(), os.cpu_count())
    print("%s %s, DSv4 block T=%d D=%d F=%d E=%d k=%d %s, %d steps after %d warm-up; %s; commit %s"
          % (a.framework, fwv, B.T, B.D, B.F, B.E, B.K, a.dtype, a.steps, a.warmup, where or cpu, commit))
    print("%-16s %10s %10s %10s %8s  %s" % ("mode", "median ms", "min ms", "max ms", "ratio", "weights after"))
    tmp = tempfile.mkdtemp()
    base = None
    plain_w = {}  # (steps, warmup) -> weights after a plain run of that length
    for mode in modes:
        steps, warmup = a.steps, a.warmup
        if gpu and mode == "probe-payloads":  # every tensor to the host and base64: ~1.7 GB of trace a step
            steps, warmup = min(steps, 3), min(warmup, 1)
        times, weights = run(a.framework, w, steps, warmup, mode, tmp, a.device, a.dtype)
        shutil.rmtree(os.path.join(tmp, mode), ignore_errors=True)
        med = statistics.median(times)
        if base is None:
            base = med
        # weights after the same number of steps without the probe (the payload mode runs fewer on the GPU):
        # a difference there is an observer effect, a difference in step count is not
        if (steps, warmup) not in plain_w:
            plain_w[(steps, warmup)] = weights if mode == "plain" else \
                run(a.framework, w, steps, warmup, "plain", tmp, a.device, a.dtype)[1]
        nd = sum(x != y for x, y in zip(weights, plain_w[(steps, warmup)]))
        print("%-16s %10.2f %10.2f %10.2f %7.2fx  %s" % (mode, 1e3 * med, 1e3 * min(times), 1e3 * max(times),
                                                         med / base, "equal" if nd == 0 else "%d of %d tensors differ" % (nd, len(weights))))
    print("ratio = median step time / plain median step time")


if __name__ == "__main__":
    main()
