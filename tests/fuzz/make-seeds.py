#!/usr/bin/env python3
"""make-seeds.py: (re)build tests/fuzz/corpus/<target>/ seeds from the repository's inputs (refs/,
tests/samples/) and a few hand-written cases per surface. Run from anywhere; it only adds files
(named seed-*), so inputs a fuzzing run added to a corpus stay. Stdlib only."""
import gzip, json, os, struct, glob

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def put(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def read(path, limit=32768):
    with open(os.path.join(root, path), "rb") as f:
        return f.read(limit)


samples = {
    "atf": ["tests/samples/atf/demo.atf"],
    "megatron-log": glob.glob(root + "/tests/samples/megatron-log/*") + [root + "/refs/logs/megatron-dsv4.log"],
    "megatron-golden": glob.glob(root + "/refs/real/megatron_golden/*.json"),
    "torchtitan": glob.glob(root + "/refs/real/torchtitan_losses/*"),
    "torchtitan-log": glob.glob(root + "/tests/samples/torchtitan-log/*"),
    "anchor": glob.glob(root + "/tests/samples/anchor/*"),
    "paddle-log": glob.glob(root + "/tests/samples/paddle-log/*") + [root + "/refs/logs/paddle-dsv4.log"],
    "paddle-metrics": glob.glob(root + "/tests/samples/paddle-metrics/*"),
    "xtuner": glob.glob(root + "/tests/samples/xtuner/*"),
    "xtuner-log": glob.glob(root + "/tests/samples/xtuner-log/*"),
    "msprobe": glob.glob(root + "/tests/samples/msprobe/*/step0/proc1/dump.json"),
}
atf_records = [
    '{"rank":0,"step":1,"micro":0,"seq":0,"name":"loss","phase":"loss","dtype":"fp32","bits":"0x412de666"}',
    '{"rank":0,"step":1,"micro":0,"seq":1,"name":"x","phase":"fwd","dtype":"fp32","shape":[2],"payload":"AACAPwAAAEA="}',
    '{"rank":0,"step":1,"micro":0,"seq":2,"name":"y","phase":"fwd","dtype":"bf16","shape":[2],"digest":"a000000000000002","digest_alg":"xxh3t64"}',
    '{"rank":0,"step":1,"micro":0,"seq":3,"name":"z","phase":"grad","dtype":"fp32","missing":"not captured"}',
    '{"rank":0,"step":2,"micro":0,"name":"lr","phase":"optim","dtype":"fp64","value":0.0001}',
    '{"rank":0,"step":2,"micro":0,"name":"loss","phase":"loss","dtype":"fp32","text":"2.5","digits":6}',
    '{"rank":0,"step":2,"micro":1,"name":"w","phase":"param","dtype":"fp32","shape":[1],"stats":{"mean":1.0},"head":[1.0]}',
    '{"rank":0,"step":2,"micro":0,"name":"a","phase":"fwd","dtype":"fp32","shape":[1],"payload":"AACAPw==","call":"mlp#0","io":"in"}',
    '{"rank":0,"step":2,"micro":0,"name":"b","phase":"fwd","dtype":"fp32","shape":[1],"payload":"AACAPw==","call":"mlp#0","io":"out"}',
]
for i, line in enumerate(atf_records):
    put("atf-records", "rec%d" % i, line + "\n")
put("atf-records", "all", "\n".join(atf_records) + "\n")
header = '{"align_trace":1,"run":"demo","framework":"align","rank":0,"world_size":1,"env":{}}\n'
put("ingest-atf", "records", header + "\n".join(atf_records) + "\n")
for fmt, paths in samples.items():
    for p in paths:
        data = read(p)
        base = os.path.basename(p)
        if base == "dump.json":  # msprobe: one per sample directory
            base = os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(p)))) + "-dump.json"
        put("ingest-" + fmt, base, data)
        put("ingest-detect", fmt + "-" + base, data)
        put("reader", fmt + "-" + base, data[:4096])
# probe-written traces (harness/probe/align_probe/atf.py: its writer, spacing and field order, call/io
# records with payloads, digests and exact scalar bits), as a PyTorch and a Paddle run write them
import importlib.util
import struct as _st
import tempfile
_spec = importlib.util.spec_from_file_location("probe_atf", os.path.join(root, "harness/probe/align_probe/atf.py"))
probe_atf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe_atf)
for fw in ("torch", "paddle"):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "probe-rank0.atf")
        wr = probe_atf.Writer(path, {"align_trace": 1, "run": "probe", "framework": fw, "rank": 0, "world_size": 1,
                                     "env": {"probe": "align_probe 1", fw: "2.11.0"}})
        x = _st.pack("<4f", 1.0, -2.5, 0.0, float("inf"))
        for step in (1, 2):
            rec = {"step": step, "micro": 0, "name": "layers.0.mlp", "phase": "fwd", "call": "layers.0.mlp#0", "io": "in"}
            rec.update(probe_atf.tensor_fields("fp32", [2, 2], "96b817d452149b03", x))  # xxh3t64 of x
            wr.write(rec)
            rec = {"step": step, "micro": 0, "name": "layers.0.mlp", "phase": "fwd", "call": "layers.0.mlp#0", "io": "out"}
            rec.update(probe_atf.tensor_fields("bf16", [4], "fedcba9876543210"))
            rec["digest_alg"] = "xxh3t64"
            wr.write(rec)
            rec = {"step": step, "micro": 0, "name": "loss", "phase": "loss"}
            rec.update(probe_atf.scalar_fields("fp32", [], _st.pack("<f", 2.5 / step)))
            wr.write(rec)
        wr.close()
        data = open(path, "rb").read()
    put("ingest-atf", "probe-" + fw, data)
    put("ingest-detect", "probe-" + fw, data)
put("ingest-detect", "atf-records", header + "\n".join(atf_records) + "\n")
put("ingest-detect", "atf.gz", gzip.compress(read("tests/samples/atf/demo.atf"), mtime=0))
put("ingest-megatron-golden", "empty-values", '{"lm loss":{"start_step":1,"end_step":2,"step_interval":1,"values":{"1":2.5}}}')
for name, data in [("empty", b""), ("one-line", b"a\n"), ("no-newline", b"a\nb"), ("crlf", b"a\r\nb\r\n"),
                   ("nul", b"a\x00b\n")]:
    put("reader", name, data)
put("reader", "gzip", gzip.compress(b"line 1\nline 2\n", mtime=0))
put("reader", "gzip-two-members", gzip.compress(b"a\n", mtime=0) + gzip.compress(b"b\n", mtime=0))
put("reader", "gzip-truncated", gzip.compress(b"x" * 1000 + b"\n", mtime=0)[:20])
for i, t in enumerate(["1.086875E+01", "INF", "NAN", "2.999e-05", "0.0001499", "nan", "-inf", "NaN", "Infinity",
                       "-Infinity", "10.86875057220458984375", "0", "-0.0", "1e-45", "3.4028235e+38", "1e309",
                       "0x1p3", "12345678901234567890123", ".5", "5.", "+1"]):
    put("numtext", "n%02d" % i, t)


def safetensors(tensors, meta=None):
    hdr, blob = {}, b""
    for name, dtype, shape, data in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if meta is not None:
        hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + blob


put("safetensors", "one", safetensors([("x", "F32", [2], struct.pack("<2f", 1.0, 2.0))]))
put("safetensors", "two-meta", safetensors([("a", "BF16", [2, 1], b"\x80\x3f\x00\x40"), ("b", "I64", [], b"\x01" + b"\0" * 7)],
                                           {"format": "pt"}))
put("safetensors", "empty-shape", safetensors([("e", "F16", [0], b"")]))
put("safetensors", "short", b"\x08\0\0\0\0\0\0\0{}")
put("map", "rules", "# rules\n^(decoder|model)\\.layers\\.[0-9]+\\.mlp\\.out$ -> mlp out\n\n^never$ -> loss\n")
put("map", "classes", "[[:digit:]]+ -> n\n^lm loss$ -> loss\na{2,3}b? -> ab\n")
put("map", "bad", "a(( -> x\n")
for name, spec in [("list", "A=1,B=2"), ("file", "@A=1\n# c\n\nB=x y\n"), ("profile", "profile:strict"),
                   ("both", "A=1,B=2\0A=2,C=3"), ("unset", "A=\0A=1"), ("empty", "")]:
    put("bisect-spec", name, spec)
