#!/usr/bin/env python3
"""paddle-dsv4-gen: writes the synthetic PaddleFleet workerlog refs/logs/paddle-dsv4.log and the table
of the exact float32 values behind it, refs/logs/paddle-dsv4.values.tsv.

Synthetic: no real training ran. The run mirrors refs/logs/megatron-dsv4.log (its values are read from
refs/logs/megatron-dsv4.values.tsv, the exact float32 behind every Megatron print): the same 20 steps of
the same DSv4-style model, ported to PaddleFleet and launched with LOG_LOSS_MD5=1 and logging_steps=1,
so every trainer line carries loss_md5 and mtp_1_loss_md5 (md5 of the float32 little-endian bytes).

The numbers, by construction (asserted below):
  steps 1..14  loss, mtp_1_loss, global_norm are float32s whose Megatron prints ({:.6E}, grad norm
               {:.3f}) equal the Megatron line's. Most are the very same float32; at step 7 the loss and
               at step 11 the mtp_1_loss are the nearest other float32 that prints the same {:.6E}: equal
               as printed, but not bitwise (Paddle's round(x, 8) and the md5 show the difference).
  steps 15..20 loss and mtp_1_loss are 24 ulps above Megatron's, global_norm 0.2% above: they print
               differently with {:.6E} / {:.3f}, a provable difference from step 15 on.
  eval_loss    at step 10 the float32 of Megatron's validation lm loss, at step 20 24 ulps above it.
Layout (specs/formats.md section 3): Paddle glog lines, colorlog prefix with ANSI colours, the training
banner, a tqdm bar written with \\r in front of some trainer lines, a [Profile ...] timer line, evaluation
banners and eval lines at steps 10 and 20.

Usage: python3 refs/logs/paddle-dsv4-gen.py refs/logs
"""
import hashlib
import os
import struct
import sys

FIRST_DIFF = 15
ESC = "\x1b"


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f32(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def md5(x):
    return hashlib.md5(struct.pack("<f", x)).hexdigest()


def read_megatron(path):
    vals = {}
    with open(path) as f:
        next(f)
        for line in f:
            step, name, hexbits, _, printed = line.rstrip("\n").split("\t")
            vals[(int(step), name)] = (f32(int(hexbits, 16)), printed)
    return vals


def neighbour_same_print(x):
    """The nearest other float32 that Megatron would print as it prints x ({:.6E})."""
    for d in (1, -1, 2, -2, 3, -3):
        y = f32(bits(x) + d)
        if "%.6E" % y == "%.6E" % x:
            return y
    raise AssertionError("no neighbour of %r prints the same" % x)


def paddle_values(mg, step):
    lm, lm_p = mg[(step, "lm loss")]
    mtp, mtp_p = mg[(step, "mtp_1 loss")]
    gn, gn_p = mg[(step, "grad norm")]
    if step >= FIRST_DIFF:
        lm, mtp, gn = f32(bits(lm) + 24), f32(bits(mtp) + 24), f32(bits(gn * 1.002))
        assert "%.6E" % lm != lm_p and "%.6E" % mtp != mtp_p and "%.3f" % gn != gn_p, step
    else:
        if step == 7:
            lm = neighbour_same_print(lm)
        if step == 11:
            mtp = neighbour_same_print(mtp)
        assert "%.6E" % lm == lm_p and "%.6E" % mtp == mtp_p and "%.3f" % gn == gn_p, step
    assert abs(lm) >= 0.125 and f32(bits(float(repr(round(lm, 8))))) == lm  # round(x, 8) identifies it
    return lm, mtp, gn


def prefix(t, level="INFO", colour="32"):
    sec = int(t)
    ms = int(round((t - sec) * 1000))
    return "%s[%sm[2026-08-20 10:%02d:%02d,%03d] [%8s]%s[0m - " % (ESC, colour, 15 + sec // 60, sec % 60, ms, level, ESC)


def main(outdir):
    mg = read_megatron(os.path.join(outdir, "megatron-dsv4.values.tsv"))
    log, tsv = [], ["step\tname\tfloat32_hex\tfloat32_repr\tprinted\tmd5\tmegatron_float32_hex\trelation"]
    log += [
        "I0820 10:15:01.114000  2214 init.cc:239] ENV [CUSTOM_DEVICE_ROOT]=/usr/local/lib/python3.10/dist-packages/paddle_custom_device",
        "I0820 10:15:01.114100  2214 init.cc:145] Before Parse: argc is 2, Init commandline: dummy --tryfromenv=",
        prefix(2.001) + "The default value for the training argument `--report_to` will change in v5 (from all installed integrations to none).",
        prefix(2.002) + "============================================================",
        prefix(2.003) + "      Training Configuration Arguments      ",
        prefix(2.004) + "paddle commit id              : 9a7c2f1e0b4d",
        prefix(2.005) + "per_device_train_batch_size   : 1",
        prefix(2.006) + "gradient_accumulation_steps   : 4",
        prefix(2.007) + "logging_steps                 : 1",
        prefix(2.008) + "max_steps                     : 20",
        prefix(2.009) + "LOG_LOSS_MD5                  : 1",
        prefix(30.100) + "***** Running training *****",
        prefix(30.101) + "  Num examples = 640",
        prefix(30.102) + "  Num Epochs = 1",
        prefix(30.103) + "  Total optimization steps = 20",
        prefix(30.104) + "  Total num train samples = 640",
        "TrainProcess:   0%|          | 0/20 [00:00<?, ?it/s]",
    ]
    clock = 42.123
    for step in range(1, 21):
        lm, mtp, gn = paddle_values(mg, step)
        runtime = 15.8772 if step == 1 else 1.2034 + 0.0007 * (step % 5)
        clock += runtime if step > 1 else 0.0
        lr = float("{0:.3e}".format(0.00022 * step / 2000.0))
        line = prefix(clock) + ", ".join("%s: %s" % kv for kv in [
            ("loss", repr(round(lm, 8))), ("learning_rate", repr(lr)), ("global_step", step),
            ("loss_md5", md5(lm)), ("current_memory_allocated", 41.27812194824219),
            ("current_memory_reserved", 52.0), ("max_memory_allocated", 47.9921875), ("max_memory_reserved", 52.0),
            ("interval_runtime", round(runtime, 4)), ("interval_samples_per_second", round(32 / runtime, 4)),
            ("interval_tokens_per_second_per_device", round(32 * 4096 / 8 / runtime, 4)),
            ("interval_hardware_tflops_per_device", round(201.7 * 1.2034 / runtime, 2)),
            ("interval_steps_per_second", round(1 / runtime, 4)), ("global_norm", repr(gn)),
            ("mtp_1_loss", repr(mtp)), ("mtp_1_loss_md5", md5(mtp)), ("progress_or_epoch", round(step / 20, 4)),
            ("cpu_used_memory", 211.43), ("cpu_available_memory", 1780.12)])
        pct = step * 100 // 20
        bar = "TrainProcess: %3d%%|%-10s| %d/20 [00:%02d<00:%02d, %5.2fs/it]" % (
            pct, "\u2588" * (pct // 10), step, int(clock - 42) % 60, int((20 - step) * 1.2), runtime)
        if step % 4 == 1:  # the bar, \r, then the log record
            log.append(bar + "\r" + line)
        elif step % 4 == 3:  # the record glued right after the bar
            log.append("\r" + bar + line)
        else:
            log += [bar, line]
        if step == 5:
            log.append("[Profile global_step: 5] forward-backward: 1163.21 | optimizer: 31.77 | "
                       "all-reduce: 12.40")
        for name, v, mv in [("loss", lm, mg[(step, "lm loss")][0]), ("mtp_1_loss", mtp, mg[(step, "mtp_1 loss")][0]),
                            ("global_norm", gn, mg[(step, "grad norm")][0])]:
            mprint, pprint = ("%.3f" if name == "global_norm" else "%.6E"), None
            rel = ("bitwise equal" if bits(v) == bits(mv) else
                   "equal as printed (%s)" % (mprint % v) if mprint % v == mprint % mv else
                   "different as printed (%s vs %s)" % (mprint % v, mprint % mv))
            pprint = repr(round(v, 8)) if name == "loss" else repr(v)
            tsv.append("%d\t%s\t0x%08x\t%r\t%s\t%s\t0x%08x\t%s" % (step, name, bits(v), v, pprint, md5(v), bits(mv), rel))
        if step % 10 == 0:
            ev = mg[(step, "validation lm loss")][0]
            ev = f32(bits(ev) + 24) if step >= FIRST_DIFF else ev
            log += [prefix(clock + 0.5) + "***** Running Evaluation *****",
                    prefix(clock + 0.501) + "  Num examples = 128",
                    prefix(clock + 0.502) + "  Total prediction steps = 16",
                    prefix(clock + 12.9) + "eval_loss: %r, eval_runtime: 12.4467, eval_samples_per_second: 10.2838, "
                    "eval_steps_per_second: 1.2855, progress_or_epoch: %r" % (ev, round(step / 20, 4))]
            clock += 12.9
            mv = mg[(step, "validation lm loss")][0]
            rel = "bitwise equal" if bits(ev) == bits(mv) else "different as printed (%.6E vs %.6E)" % (ev, mv)
            tsv.append("%d\teval_loss\t0x%08x\t%r\t%r\t%s\t0x%08x\t%s" % (step, bits(ev), ev, ev, md5(ev), bits(mv), rel))
    log.append(prefix(clock + 1.0) + "Training completed. ")
    with open(os.path.join(outdir, "paddle-dsv4.log"), "w", encoding="utf-8") as f:
        f.write("\n".join(log) + "\n")
    with open(os.path.join(outdir, "paddle-dsv4.values.tsv"), "w") as f:
        f.write("\n".join(tsv) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
