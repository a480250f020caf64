#!/usr/bin/env python3
"""megatron-dsv4-gen: writes the synthetic Megatron stdout log refs/logs/megatron-dsv4.log and the
table of the exact float32 values behind it, refs/logs/megatron-dsv4.values.tsv.

Synthetic: no real training ran. The numbers are deterministic (random.Random(20260820)) and chosen to
look like the first 20 iterations of a small DeepSeek-V4-style MoE + MTP model trained with
--log-interval 1 (so each printed loss is exactly that iteration's float32 loss, printed {:.6E} as
Megatron's training_log does). The layout follows specs/formats.md section 1: torchrun --tee prefixes
([defaultN]:) on rank output, launcher lines unprefixed, a timer block per iteration, a memory report
after the first iteration, a warning, validation at iterations 10 and 20.

Usage: python3 refs/logs/megatron-dsv4-gen.py refs/logs
"""
import math
import random
import struct
import sys

TRAIN_ITERS = 20
GBS = 32
WORLD = 8
LAST = WORLD - 1


def f32(x):
    """The float32 nearest to x, as a Python float (exact)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_hex(x):
    return "0x%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def main(outdir):
    rng = random.Random(20260820)
    log = []
    tsv = ["step\tname\tfloat32_hex\tfloat32_repr\tprinted"]

    def out(line, rank=None):
        log.append(("[default%d]:" % rank if rank is not None else "") + line)

    out("W0820 10:15:01.114000 2214 torch/distributed/run.py:766] Setting OMP_NUM_THREADS environment "
        "variable for each process to be 1 in default, to avoid your system being overloaded, please "
        "further tune the variable for optimal performance in your application as needed.")
    out("using world size: 8, data-parallel size: 8, context-parallel size: 1, tensor-model-parallel size: 1, "
        "pipeline-model-parallel size: 1", 0)
    out("------------------------ arguments ------------------------", 0)
    for k, v in [("expert_model_parallel_size", 8), ("global_batch_size", GBS), ("log_interval", 1),
                 ("lr", 0.00022), ("micro_batch_size", 1), ("mtp_num_layers", 1), ("num_experts", 64),
                 ("seed", 1234), ("seq_length", 4096), ("train_iters", TRAIN_ITERS), ("bf16", True)]:
        out("  %s %s %s" % (k, "." * (48 - len(k)), v), 0)
    out("-------------------- end of arguments ---------------------", 0)
    out("> building GPT model ...", 0)
    out("[after megatron is initialized] datetime: 2026-08-20 10:15:30 ", 0)
    out("[before the start of training step] datetime: 2026-08-20 10:15:41 ", 0)
    out("/usr/local/lib/python3.12/dist-packages/transformer_engine/pytorch/module/base.py:930: "
        "UserWarning: To guarantee overlapping TP and SP collectives with the backward GEMMs, set "
        "environment variable CUDA_DEVICE_MAX_CONNECTIONS = 1", 3)

    lm = 11.93
    clock = 42.123456  # seconds after 10:15:00 when the first iteration ends
    for it in range(1, TRAIN_ITERS + 1):
        lm = lm - 0.11 * math.exp(-it / 12.0) - rng.uniform(0.0, 0.03)
        lm32 = f32(lm)
        mtp32 = f32(lm + 0.052 + rng.uniform(0.0, 0.02))
        gn = f32(24.0 * math.exp(-it / 6.0) + 1.5 + rng.uniform(0.0, 0.4))
        lr = 0.00022 * it / 2000.0
        ms = 1203.4 + rng.uniform(-8.0, 8.0) if it > 1 else 15877.2
        clock += ms / 1000.0 if it > 1 else 0.0
        usec = int(round(clock * 1e6))
        ts = "2026-08-20 10:%02d:%02d.%06d" % (15 + usec // 60000000, usec // 1000000 % 60, usec % 1000000)
        line = (" [%s] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | "
                "throughput per GPU (TFLOP/s/GPU): %.1f | learning rate: %.6E | global batch size: %5d | "
                "lm loss: %.6E | mtp_1 loss: %.6E | loss scale: %.1f | grad norm: %.3f | "
                "number of skipped iterations: %3d | number of nan iterations: %3d |"
                % (ts, it, TRAIN_ITERS, it * GBS, ms, 201.7 * 1203.4 / ms, lr, GBS, lm32, mtp32, 1.0, gn, 0, 0))
        out(line, LAST)
        for name, v, printed in [("lm loss", lm32, "%.6E" % lm32), ("mtp_1 loss", mtp32, "%.6E" % mtp32),
                                 ("grad norm", gn, "%.3f" % gn)]:
            tsv.append("%d\t%s\t%s\t%r\t%s" % (it, name, f32_hex(v), v, printed))
        if it == 1:
            for r in (0, LAST):
                out("[Rank %d] (after 1 iterations) memory (MB) | allocated: 21544.62548828125 | max allocated: "
                    "39114.30908203125 | reserved: 41472.0 | max reserved: 41472.0" % r, r)
        out("(min, max) time across ranks (ms):", LAST)
        fb = ms - 40.0
        out("    forward-backward ...............................: (%.2f, %.2f)" % (fb - 1.3, fb), LAST)
        out("    optimizer ......................................: (%.2f, %.2f)" % (31.02, 31.77), LAST)
        if it % 10 == 0:
            vl = f32(lm + 0.021 + rng.uniform(0.0, 0.01))
            vm = f32(vl + 0.055)
            body = (" validation loss at iteration %d | lm loss value: %.6E | lm loss PPL: %.6E | "
                    "mtp_1 loss value: %.6E | mtp_1 loss PPL: %.6E | "
                    % (it, vl, math.exp(min(20, vl)), vm, math.exp(min(20, vm))))
            out("-" * len(body), LAST)
            out(body, LAST)
            out("-" * len(body), LAST)
            for name, v in [("validation lm loss", vl), ("validation mtp_1 loss", vm)]:
                tsv.append("%d\t%s\t%s\t%r\t%s" % (it, name, f32_hex(v), v, "%.6E" % v))
    out("[after training is done] datetime: 2026-08-20 10:%02d:%02d " % (15 + int(clock + 1) // 60, int(clock + 1) % 60), 0)
    with open(outdir + "/megatron-dsv4.log", "w") as f:
        f.write("\n".join(log) + "\n")
    with open(outdir + "/megatron-dsv4.values.tsv", "w") as f:
        f.write("\n".join(tsv) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
