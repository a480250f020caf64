"""ATF v1 writer (README: "The align trace (ATF v1)"): a header line, then one JSON object per record.

The writer knows nothing about frameworks: it takes names, dtypes in align's spelling, shapes, digests,
payload bytes and scalar bits. seq is assigned here, in the order records are written: unique per rank
across the whole run (one writer per rank), which is what `align ingest` requires.
"""
import base64
import json
import math
import os
import struct
import threading

# align's dtype names and their sizes in bytes (README's `dtype` row)
DTYPE_SIZE = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "int64": 8,
              "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


def value_of_bits(dtype, bits):
    """The number a scalar's bits stand for, as ATF's `value` (a JSON number or "nan"/"inf"/"-inf"),
    or None where no exact JSON number is cheap to give (fp8, bf16 and fp16 are widened exactly)."""
    if dtype == "fp64":
        v = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    elif dtype == "fp32":
        v = struct.unpack("<f", bits.to_bytes(4, "little"))[0]
    elif dtype == "bf16":
        v = struct.unpack("<f", (bits << 16).to_bytes(4, "little"))[0]
    elif dtype == "fp16":
        v = struct.unpack("<e", bits.to_bytes(2, "little"))[0]
    elif dtype == "bool":
        return bits
    elif dtype.startswith("int") or dtype == "uint8":
        size = DTYPE_SIZE[dtype]
        if dtype != "uint8" and bits >= 1 << (8 * size - 1):
            return bits - (1 << (8 * size))
        return bits
    else:
        return None
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


class Writer:
    def __init__(self, path, header):
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        self.path = path
        self._f = open(path, "w", encoding="utf-8")
        # one encoder for every record (json.dumps with separators builds a new encoder per call); the
        # same text as json.dumps(rec, separators=(", ", ": "))
        self._enc = json.JSONEncoder(separators=(", ", ": "))
        self._f.write(self._enc.encode(header) + "\n")
        self._seq = 0
        self._lock = threading.Lock()
        self.records = 0
        self._mid = {}  # the encoded fields between seq and digest of a tensor record, by their values

    def write(self, rec):
        """rec: the record's fields but seq (dict, written in insertion order after step and seq)."""
        with self._lock:
            line = self._fast(rec)
            if line is None:
                out = {"step": rec.pop("step"), "seq": self._seq}
                out.update(rec)
                line = self._enc.encode(out)
            self._seq += 1
            self.records += 1
            self._f.write(line + "\n")

    def write_tensor(self, r, digest):
        """Writes a plain tensor record given as the tuple (step, micro, name, phase, call, io, dtype, shape)
        (call and io None: no call) and its digest (16 lowercase hex digits): the line write() gives for
        the same record as a dict, from the repeating fields' encoding made once."""
        mid = self._mid.get(r[1:])
        if mid is None:
            if len(self._mid) > 1 << 16:
                self._mid.clear()
            f = {"micro": r[1], "name": r[2], "phase": r[3]}
            if r[4]:
                f["call"], f["io"] = r[4], r[5]
            f["dtype"], f["shape"] = r[6], list(r[7])
            mid = self._mid[r[1:]] = self._enc.encode(f)[1:-1]
        with self._lock:
            self._f.write('{"step": %d, "seq": %d, %s, "digest": "%s"}\n' % (r[0], self._seq, mid, digest))
            self._seq += 1
            self.records += 1

    def _fast(self, rec):
        """The line of a plain tensor record (micro, name, phase, [call, io], dtype, shape, digest: the fields
        repeat every step but step, seq and digest), from an encoding of the repeating fields made once: the
        same text as the encoder gives (tests/probe/api.py compares them), or None for any other record."""
        keys = tuple(rec)
        if keys not in _FAST_KEYS:
            return None
        step, digest = rec["step"], rec["digest"]
        if type(step) is not int or type(rec["micro"]) is not int or type(digest) is not str or not _is_hex(digest):
            return None
        if len(keys) == 9:
            k = (rec["micro"], rec["name"], rec["phase"], rec["call"], rec["io"], rec["dtype"], tuple(rec["shape"]))
        else:
            k = (rec["micro"], rec["name"], rec["phase"], rec["dtype"], tuple(rec["shape"]))
        mid = self._mid.get(k)
        if mid is None:
            if len(self._mid) > 1 << 16:  # names are finite in practice; keep memory bounded anyway
                self._mid.clear()
            mid = self._enc.encode({f: rec[f] for f in keys[1:-1]})[1:-1]
            self._mid[k] = mid
        return '{"step": %d, "seq": %d, %s, "digest": "%s"}' % (step, self._seq, mid, digest)

    def flush(self):
        with self._lock:
            self._f.flush()

    def close(self):
        with self._lock:
            if not self._f.closed:
                self._f.close()


_FAST_KEYS = {("step", "micro", "name", "phase", "dtype", "shape", "digest"),
              ("step", "micro", "name", "phase", "call", "io", "dtype", "shape", "digest")}
_HEX = frozenset("0123456789abcdef")


def _is_hex(s):
    return len(s) == 16 and _HEX.issuperset(s)


def tensor_fields(dtype, shape, digest, payload=None):
    """The fields of a tensor record: dtype, shape, digest and, when given, the payload bytes."""
    out = {"dtype": dtype, "shape": list(shape), "digest": digest}
    if payload:  # ATF refuses an empty payload: a zero-element tensor has only its digest
        out["payload"] = base64.b64encode(payload).decode("ascii")
    return out


def scalar_fields(dtype, shape, raw):
    """The fields of a one-element record from its raw little-endian bytes: exact bits and value."""
    bits = int.from_bytes(raw, "little")
    out = {"dtype": dtype, "shape": list(shape), "bits": "0x%0*x" % (2 * len(raw), bits)}
    v = value_of_bits(dtype, bits)
    if v is not None and dtype != "bool":
        out["value"] = v
    return out
