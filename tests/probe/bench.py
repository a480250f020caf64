"""Overhead of the probe (and of msprobe) on the DSv4 block at benchmark sizes, on the CPU or a GPU.

    bench.py --framework torch|paddle [--steps 20] [--warmup 3] [--tokens 256] [--dim 512]
    bench.py --framework torch --device cuda [--dtype fp32|bf16]   # defaults T=4096, D=F=2048
    bench.py --framework torch --device mock --mock-lib DIR        # defaults T=64, D=F=128

--device mock (tests/probe/bench-host.sh): the probe's host-side cost of a record on the deferred GPU path,
measured on the CPU. The CPU tensors are declared CUDA tensors to the probe and its native part is
harness/probe/native/probe_cuda.cu built against tests/probe/cuda-mock.h (DIR/libalign_probe_cuda.so:
device memory is host memory, the leaf digests run on the host), so everything the probe does per record
on a GPU (hooks, bookkeeping, the ctypes calls, the batch, writing the records) runs as there; the step is
small so that this dominates. It prints the probe's CPU time a record: (cpu ms of the mode - cpu ms of
plain) / records a step (the mock's host digests of the small tensors included: an upper bound).

On the GPU (--device cuda: torch; Paddle where it has CUDA) the model, inputs and optimizer live on the
device, the step is timed between two torch.cuda.synchronize() calls, and the probe modes are
probe-digests (deferred GPU digests: one wait per step), probe-digests-eager (defer=False: one wait per
tensor) and probe-payloads (3 steps after 1 warm-up: every tensor is copied and written); the sizes
make the step GPU-bound. By --modes only: probe-digests-dedup (Probe(dedup=True): a tensor recorded twice
in a step digested once; also on the CPU), probe-digests-side (side_stream=True: the digest kernels on the
probe's own stream) and probe-digests-side-dedup (both). The probe-digests row also prints its digested records and bytes a step;
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
    if device in ("cpu", "mock"):
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


def mock_cuda(lib_dir):
    """--device mock: CPU tensors are CUDA tensors to the probe (tests/probe/deferred.py does the same), so
    it takes the deferred GPU path through the mock library in lib_dir."""
    import align_probe.frameworks as F
    if not os.path.exists(os.path.join(lib_dir, "libalign_probe_cuda.so")):
        sys.exit("error: --mock-lib %s: no libalign_probe_cuda.so there (tests/probe/bench-host.sh builds it)" % lib_dir)
    info = F.Torch.info

    def cuda_info(self, t):
        i = info(self, t)
        i.cuda = True
        return i
    F.Torch.info = cuda_info
    F.Torch.stream = lambda self, t: 0


def run(fw, w, steps, warmup, mode, tmp, device="cpu", dtype="fp32", mock_lib=None):
    m, step, to_input = (B.build_torch if fw == "torch" else B.build_paddle)(w, dtype)
    m, to_input, sync = on_device(fw, device, m, to_input)
    probe = dbg = None
    if mode.startswith("probe"):
        from align_probe import Probe
        probe = Probe(os.path.join(tmp, mode), run=mode, payload=["*"] if mode == "probe-payloads" else [],
                      defer=mode != "probe-digests-eager", side_stream="-side" in mode, dedup="-dedup" in mode,
                      native=mock_lib if device == "mock" else None)
        probe.watch(m)
        split = os.environ.get("ALIGN_BENCH_DIGEST_SPLIT_BELOW")
        if split is not None and device == "cuda":  # which leaf kernel the GPU digests take (digest_cuda.h)
            import ctypes
            lib = ctypes.CDLL(os.path.join(os.environ["ALIGNPROBE_LIB_DIR"], "libalign_probe_cuda.so"))
            lib.align_digest_cuda_set_split_below.argtypes = [ctypes.c_uint64]
            lib.align_digest_cuda_set_split_below.restype = ctypes.c_uint64
            lib.align_digest_cuda_set_split_below(int(split))
    elif mode.startswith("msprobe"):
        from msprobe.pytorch import PrecisionDebugger
        cfg = os.path.join(tmp, mode + ".json")
        json.dump({"task": "statistics", "dump_path": os.path.join(tmp, mode), "rank": [], "step": [],
                   "level": mode.split("-")[1], "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                                              "summary_mode": "md5"}}, open(cfg, "w"))
        dbg = PrecisionDebugger(config_path=cfg)
    times, cpu = [], []
    prof = None
    if probe and os.environ.get("ALIGN_BENCH_PROFILE") and mode == "probe-digests":
        import cProfile
        prof = cProfile.Profile()
    for s in range(1, warmup + steps + 1):
        x = to_input(w["input.%d" % (1 + (s - 1) % 3)])
        sync()
        t0, c0 = time.perf_counter(), time.process_time()
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
        c1 = time.process_time()  # before the wait: a CUDA synchronize spins, and would count as CPU time
        sync()
        if prof and s > warmup:
            prof.disable()
        if s > warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(c1 - c0)
    weights = [B.raw(p) for _, p in m.named_parameters()]  # before any profiled steps (same step count)
    cuda_prof = os.environ.get("ALIGN_BENCH_CUDA_PROFILE")
    if cuda_prof and fw == "torch" and device == "cuda" and mode in ("plain", "probe-digests"):
        profile_cuda(cuda_prof, mode, lambda s: one_step(s, probe, step, to_input, w, m), sync, warmup + steps)
    if probe:
        path = probe.close()
        if path and mode.startswith("probe-digests"):
            run.records = count_records(path, warmup + steps, mode)
    if prof:
        dump_profile(prof, os.environ["ALIGN_BENCH_PROFILE"], steps)
    if probe is not None and probe.dedup:
        print("  (%s: %.1f records a step digested once for two)" % (mode, probe.dedup_hits / (warmup + steps)))
    return times, weights, cpu


def one_step(s, probe, step, to_input, w, m):
    """Step s as the timed loop runs it (plain or probe-digests), for profile_cuda."""
    x = to_input(w["input.%d" % (1 + (s - 1) % 3)])
    if probe:
        with probe.step(s):
            _, loss, _ = step(x, keep=False)
            probe.record("loss", loss)
        probe.params(m)
    else:
        step(x, keep=False)


def profile_cuda(where, mode, run_step, sync, done, n=5):
    """ALIGN_BENCH_CUDA_PROFILE=DIR: n more steps under torch.profiler (after the timed ones, which it does
    not disturb); the kernels by total CUDA time to DIR/MODE-cuda-profile.txt (printed), a Chrome trace of
    the steps to DIR/MODE-trace.json."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for s in range(done + 1, done + n + 1):
            run_step(s)
        sync()
    os.makedirs(where, exist_ok=True)
    table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=40)
    text = "torch.profiler, %s, %d steps (totals over all of them)\n%s" % (mode, n, table)
    with open(os.path.join(where, mode + "-cuda-profile.txt"), "w") as f:
        f.write(text)
    prof.export_chrome_trace(os.path.join(where, mode + "-trace.json"))
    print(text)


def count_records(path, steps, mode):
    """Prints the records a step and the bytes they digest (from the trace: dtype and shape); returns the
    records a step."""
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
    print("  (%s: %.1f digested records a step, %.1f MB a step)" % (mode, n / steps, nbytes / steps / 1e6))
    return n / steps


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
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "mock"])
    ap.add_argument("--mock-lib", default=None, help="--device mock: the folder of the mock libalign_probe_cuda.so")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--tokens", type=int, default=None, help="T (default 256 on the CPU, 4096 on the GPU)")
    ap.add_argument("--dim", type=int, default=None, help="D = F (default 512 on the CPU, 2048 on the GPU)")
    ap.add_argument("--modes", default=None,
                    help="comma-separated modes to run, in order (default: all that apply; the first should be plain)")
    a = ap.parse_args()
    gpu = a.device == "cuda"
    mock = a.device == "mock"
    if mock:
        if a.framework != "torch" or not a.mock_lib:
            ap.error("--device mock takes --framework torch and --mock-lib DIR")
        mock_cuda(a.mock_lib)
    B.T = a.tokens or (4096 if gpu else 64 if mock else 256)
    B.D = B.F = a.dim or (2048 if gpu else 128 if mock else 512)
    # one thread: the figures should not depend on what else the machine runs on its other cores
    if a.framework == "torch":
        import torch
        torch.set_num_threads(1)
        if gpu and not torch.cuda.is_available():
            print("SKIP: torch %s has no CUDA device" % torch.__version__)
            sys.exit(77)
        where = ("GPU: %s" % torch.cuda.get_device_name()) if gpu else \
            ("CPU through the mock CUDA runtime (%s)" % a.mock_lib) if mock else None
    else:
        import paddle
        if gpu and not paddle.device.is_compiled_with_cuda():
            print("SKIP: paddle %s is not built with CUDA" % paddle.__version__)
            sys.exit(77)
        paddle.set_device("gpu" if gpu else "cpu")
        where = ("GPU: %s" % paddle.device.cuda.get_device_name()) if gpu else None
    w = B.make_weights()
    modes = ["plain", "probe-digests", "probe-payloads", "plain"]
    if mock:
        modes = ["plain", "probe-digests", "probe-digests-dedup", "plain"]
    elif gpu:
        modes = ["plain", "probe-digests", "probe-digests-eager", "plain", "probe-payloads", "plain"]
    if a.framework == "torch" and not mock:
        try:
            import msprobe  # noqa: F401
            modes += ["msprobe-L0", "msprobe-L1", "plain"]  # last: msprobe patches torch for the process
        except ImportError:
            print("msprobe: not installed (mindstudio-probe); its rows are left out")
    if a.modes:
        known = set(modes) | {"probe-digests-eager", "probe-digests-dedup"}
        if gpu:
            known |= {"probe-digests-side", "probe-digests-side-dedup"}
        modes = a.modes.split(",")
        if not any(m.startswith("msprobe") for m in known):  # not installed: said above
            modes = [m for m in modes if not m.startswith("msprobe")]
        bad = [m for m in modes if m not in known]
        if bad:
            ap.error("unknown mode(s) %s (known: %s)" % (", ".join(bad), ", ".join(sorted(known))))
    fwv = __import__(a.framework).__version__
    commit = subprocess.run(["git", "-C", here, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    cpu = "CPU: %s, %d cores (1 thread)" % (platform.processor() or platform.machine(), os.cpu_count())
    print("%s %s, DSv4 block T=%d D=%d F=%d E=%d k=%d %s, %d steps after %d warm-up; %s; commit %s"
          % (a.framework, fwv, B.T, B.D, B.F, B.E, B.K, a.dtype, a.steps, a.warmup, where or cpu, commit))
    print("%-16s %10s %10s %10s %8s %10s  %s" % ("mode", "median ms", "min ms", "max ms", "ratio", "cpu ms", "weights after"))
    tmp = tempfile.mkdtemp()
    base = None
    plain_w = {}  # (steps, warmup) -> weights after a plain run of that length
    base_cpu = [0.0]
    host = {}  # --device mock: mode -> (median CPU seconds a step, digested records a step)
    for mode in modes:
        steps, warmup = a.steps, a.warmup
        if gpu and mode == "probe-payloads":  # every tensor to the host and base64: ~1.7 GB of trace a step
            steps, warmup = min(steps, 3), min(warmup, 1)
        run.records = None
        times, weights, cpu = run(a.framework, w, steps, warmup, mode, tmp, a.device, a.dtype, a.mock_lib)
        shutil.rmtree(os.path.join(tmp, mode), ignore_errors=True)
        med = statistics.median(times)
        if base is None:
            base = med
            base_cpu[0] = statistics.median(cpu)
        # weights after the same number of steps without the probe (the payload mode runs fewer on the GPU):
        # a difference there is an observer effect, a difference in step count is not
        if (steps, warmup) not in plain_w:
            plain_w[(steps, warmup)] = weights if mode == "plain" else \
                run(a.framework, w, steps, warmup, "plain", tmp, a.device, a.dtype)[1]
        nd = sum(x != y for x, y in zip(weights, plain_w[(steps, warmup)]))
        if mock and run.records:
            host[mode] = (statistics.median(cpu), run.records)
        print("%-16s %10.2f %10.2f %10.2f %7.2fx %10.2f  %s" % (mode, 1e3 * med, 1e3 * min(times), 1e3 * max(times),
                                                                med / base, 1e3 * statistics.median(cpu),
                                                                "equal" if nd == 0 else "%d of %d tensors differ" % (nd, len(weights))))
    print("ratio = median step time / plain median step time; cpu ms = the process's median CPU time a step up to "
          "the closing synchronize (all threads; near the step time, the step waits for the CPU, not the GPU)")
    if mock:
        plain_cpu = base_cpu[0]
        for mode, (c, n) in host.items():
            print("%s: the probe's CPU time %.1f us a record ((%.3f - %.3f ms) / %.1f records a step)"
                  % (mode, (c - plain_cpu) * 1e6 / n, 1e3 * c, 1e3 * plain_cpu, n))


if __name__ == "__main__":
    main()
