"""Runs the DSv4 block (dsv4_block.py) in one framework, with or without the probe.

    run_block.py --framework torch|paddle --weights W.safetensors --steps N [--probe DIR --run NAME]
                 [--payload PAT]... [--keep OUT.npz] [--dtype fp32|bf16] [--native LIBDIR]
                 [--op-records DIR]

--keep writes every kept tensor's raw bytes (step, name) in execution order to an .npz for the
independent byte comparison. --op-records writes each block op's inputs and outputs as align ops
(op_records.py: DIR/<run>-rank0.atf with payloads, per-step safetensors) for `align explain`; it runs
without --probe (one probe per process). One framework per process (torch and Paddle bundle conflicting libraries).
"""
import argparse
import os
import sys

import numpy as np
from safetensors.numpy import load_file

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import dsv4_block  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", required=True, choices=["torch", "paddle"])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--probe")
    ap.add_argument("--run")
    ap.add_argument("--payload", action="append", default=[])
    ap.add_argument("--keep")
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--native")
    ap.add_argument("--op-records")
    a = ap.parse_args()
    if a.op_records and a.probe:
        ap.error("--op-records and --probe: one at a time")
    w = load_file(a.weights)
    probe = None
    if a.probe:
        from align_probe import Probe
        probe = Probe(a.probe, run=a.run or a.framework, framework=a.framework, payload=a.payload,
                      native=a.native)
    watched = None
    if a.op_records:
        import op_records
        watched = op_records.OpRecorder(a.op_records, a.framework, a.run or a.framework, native=a.native)
    out = dsv4_block.train(a.framework, w, a.steps, probe=probe, keep=bool(a.keep), dtype=a.dtype,
                           watched=watched)
    if a.keep:
        np.savez(a.keep, keys=np.array(["%d/%s" % (s, n) for s, n, _ in out]),
                 **{"v%d" % i: np.frombuffer(b, dtype=np.uint8) for i, (_, _, b) in enumerate(out)})
    if probe:
        print(probe.path)


if __name__ == "__main__":
    main()
