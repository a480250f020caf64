#!/usr/bin/env python3
"""gen-lines.py: synthetic training logs of the line formats for the ingest benchmark (stdlib only).

usage: gen-lines.py FORMAT N_LINES OUT
Writes N_LINES loss lines of FORMAT (one loss line per step, steps 1..N), each the layout the parser
reads in the wild, with a value on every line. Where the format prints one value per line, one line is
one record; where its loss line carries several values, each of them is a record (the benchmark counts
the records align stores and imports the same rows). Values are fp32 losses drifting from 10.87 down,
printed the way each producer prints them (repr of the fp32, or a fixed number of decimals).

Formats and what one line holds:
  torchtitan      '<step> <loss>'                           1 record (repr of float(fp32 loss))
  torchtitan-log  '[rank0]:[titan] ... step: N  loss: X'     1 record (loss, 5 decimals)
  megatron-log    ' iteration N/ M | lm loss: X |'           1 record (lm loss, %E)
  paddle-log      '[    INFO] - loss: X, global_step: N'     1 record (loss, 8 decimals)
  paddle-metrics  '{"loss": X, "global_step": N}'           1 record (loss, json.dumps of a float)
  xtuner-log      '... Iter(train) [N/M]  loss: X'           1 record (loss, 4 decimals)
  anchor          'final_loss: rank=0 val=X md5=M'           1 record (loss, 20 decimals, md5 of its fp32)
"""
import hashlib
import struct
import sys

fmt, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def loss(i):
    # fp32 values, all distinct, slowly falling with a little noise
    return f32(10.87 - 8.0 * i / (n + 1) + ((i * 2654435761) % 1000) * 1e-6)


w = open(out, "w", buffering=1 << 22)
for i in range(n):
    s, x = i + 1, loss(i)
    if fmt == "torchtitan":
        w.write("%d %r\n" % (s, x))  # repr of float(fp32 scalar)
    elif fmt == "torchtitan-log":
        w.write("[rank0]:[titan] 2026-02-24 19:46:%02d,%03d - root - INFO - step: %2d  loss: %7.5f\n"
                % (s % 60, s % 1000, s, x))
    elif fmt == "megatron-log":
        w.write(" iteration %8d/%8d | lm loss: %E |\n" % (s, n, x))
    elif fmt == "paddle-log":
        w.write("[    INFO] - loss: %.8f, global_step: %d\n" % (x, s))
    elif fmt == "paddle-metrics":
        w.write('{"loss": %r, "global_step": %d}\n' % (float("%.8f" % x), s))
    elif fmt == "xtuner-log":
        w.write("2024/05/07 11:17:20 - mmengine - INFO - Iter(train) [%d/%d]  loss: %.4f\n" % (s, n, x))
    elif fmt == "anchor":
        w.write("final_loss: rank=0 val=%.20f md5=%s\n" % (x, hashlib.md5(struct.pack("<f", x)).hexdigest()))
    else:
        sys.exit("gen-lines.py: unknown format " + fmt)
w.close()
