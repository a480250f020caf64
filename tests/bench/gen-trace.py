#!/usr/bin/env python3
"""gen-trace.py: synthetic ATF v1 tensor traces for the ingest/report benchmark (stdlib only).

usage: gen-trace.py N_RECORDS OUT.atf [OUT.csv] [--differ-at STEP] [--records-per-step K]
Writes N tensor records (K per step, rank 0, micro 0) with xxh3t64-shaped digests; with --differ-at,
the digests of that step onward differ from the default run. The CSV holds the same rows as align
stores them (the columns the benchmark's sqlite3 .import table has)."""
import sys

args = sys.argv[1:]
differ_at = None
per_step = 1000
if "--differ-at" in args:
    i = args.index("--differ-at"); differ_at = int(args[i + 1]); del args[i:i + 2]
if "--records-per-step" in args:
    i = args.index("--records-per-step"); per_step = int(args[i + 1]); del args[i:i + 2]
n, out = int(args[0]), args[1]
csv_path = args[2] if len(args) > 2 else None
M = (1 << 64) - 1
atf = open(out, "w", buffering=1 << 22)
csv = open(csv_path, "w", buffering=1 << 22) if csv_path else None
atf.write('{"align_trace":1,"run":"bench","framework":"align","rank":0,"world_size":1}\n')
for i in range(n):
    step = i // per_step + 1
    j = i % per_step
    name = "layers.%d.%s" % (j // 4, ("attn_out", "mlp_out", "norm_out", "router_logits")[j % 4])
    h = (i * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & M
    if differ_at is not None and step >= differ_at:
        h ^= 0xDEADBEEF
    digest = "%016x" % h
    atf.write('{"step":%d,"micro":0,"seq":%d,"name":"%s","phase":"fwd","dtype":"bf16",'
              '"shape":[4096,%d],"digest":"%s"}\n' % (step, i, name, 512 + j % 7, digest))
    if csv:
        csv.write('1,1,%d,0,%d,0,%d,0,%s,%s,fwd,bf16,"[4096,%d]",%s,xxh3t64\n'
                  % (i + 2, step, i, name, name, 512 + j % 7, digest))
atf.close()
if csv:
    csv.close()
