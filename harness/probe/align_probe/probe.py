"""Probe: tensor traces (ATF v1) from PyTorch and Paddle runs, the framework detected from the objects.

    probe = Probe("traces/", run="megatron", framework="megatron")   # one ATF file per rank
    probe.watch(model)
    for step in range(1, n + 1):
        with probe.step(step):
            loss = model(batch).mean(); loss.backward(); opt.step()
            probe.record("loss", loss)
        probe.params(model, phase="param")
    probe.close()

Records (names are the framework's qualified module/parameter names; `root` names the model itself):
  MOD.in / MOD.in.I     inputs of a call of MOD   phase fwd, call "MOD#K", io "in"  (inputs=True)
  MOD.out / MOD.out.I   outputs of that call      phase fwd, call "MOD#K", io "out"
  MOD.out.grad / MOD.out.I.grad   gradient w.r.t. that output   phase bwd
  PARAM.grad            gradient delivered to a parameter by a backward   phase grad
  PARAM                 parameter values (Probe.params)   phase param (or the phase given)
K counts the calls of MOD within (step, micro-batch). The micro-batch is the one Probe.micro(k) set,
or else counts the calls of the watched model within the step (0, 1, ...). Tensors carry the xxh3t64
digest of their logical row-major bytes, and their payload when the name matches a `payload` pattern
(fnmatch: "*", "layers.3.*"); one-element values given to Probe.record carry exact bits.

CUDA tensors are digested deferred (defer=True, the default): the leaf kernel is enqueued on the
framework's current stream and the record waits in memory; at the end of `with probe.step(...)` (and at
close) the probe waits for the GPU once, finishes every digest on the host and writes the records in
their order. Records made outside a step (Probe.params after the step) are written at the next step's
end or at close. defer=False digests each CUDA tensor when it is recorded (one wait per tensor). A
tensor with more than 16 dimensions that do not merge is digested as with defer=False (a row-major
copy made by the framework).
"""
import contextlib
import fnmatch
import os
import threading

from . import atf
from .digest import Digester
from .frameworks import detect

__all__ = ["Probe"]


def _flatten(x, adapter, out):
    """Tensors in x (nested tuples, lists, dicts by sorted key) in order."""
    if adapter.is_tensor(x):
        out.append(x)
    elif isinstance(x, (tuple, list)):
        for v in x:
            _flatten(v, adapter, out)
    elif isinstance(x, dict):
        for k in sorted(x, key=str):
            _flatten(x[k], adapter, out)
    return out


def _names(base, n):
    return [base] if n == 1 else ["%s.%d" % (base, i) for i in range(n)]


class Probe:
    def __init__(self, out_dir, run="run", framework=None, payload=(), inputs=True, grads=True,
                 rank=None, world_size=None, root="model", native=None, defer=True):
        self.out_dir = out_dir
        self.run = run
        self.framework = framework
        self.payload = [payload] if isinstance(payload, str) else list(payload)
        self._payload_names = {}
        self.inputs = inputs
        self.grads = grads
        self.root = root
        self._rank, self._world = rank, world_size
        self._digest = Digester(native)
        self._adapter = None
        self._writer = None
        self._handles = []
        self._lock = threading.Lock()
        self.defer = defer
        self._batch = None        # DeviceBatch of the deferred CUDA digests
        self._pending = []        # records waiting for those digests, in write order: (rec, slot)
        self._plock = threading.RLock()
        self._step = 0
        self._micro = None
        self._root_calls = 0
        self._calls = {}
        self._open_calls = {}
        self.path = None

    # --- run structure -------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, step):
        """Records inside belong to `step` (1 is the first optimizer step; 0 is before it)."""
        if not isinstance(step, int) or step < 0:
            raise ValueError("align_probe: step must be an integer >= 0, not %r" % (step,))
        with self._lock:
            self._step, self._micro, self._root_calls, self._calls = step, None, 0, {}
        try:
            yield self
        finally:
            self._flush_device()
            if self._writer:
                self._writer.flush()

    def micro(self, k):
        """Sets the micro-batch (also usable as `with probe.micro(k):`, which restores counting)."""
        if not isinstance(k, int) or k < 0:
            raise ValueError("align_probe: micro-batch must be an integer >= 0, not %r" % (k,))
        self._micro = k
        probe = self

        class _Ctx:
            def __enter__(self):
                return probe

            def __exit__(self, *exc):
                probe._micro = None
        return _Ctx()

    def _cur_micro(self):
        return self._micro if self._micro is not None else max(self._root_calls - 1, 0)

    # --- output --------------------------------------------------------------------------------
    def _open(self, adapter):
        if self._writer:
            return
        rw = adapter.rank_world() if adapter else None
        rank = self._rank if self._rank is not None else (rw[0] if rw else int(os.environ.get("RANK", 0)))
        world = self._world if self._world is not None else (rw[1] if rw else int(os.environ.get("WORLD_SIZE", 1)))
        env = {"probe": "align_probe 1", "digest_lib": self._digest.host_path}
        if adapter:
            env[adapter.name] = adapter.version
        header = {"align_trace": 1, "run": self.run, "framework": self.framework or (adapter.name if adapter else "python"),
                  "rank": rank, "world_size": world, "env": env}
        self.path = os.path.join(self.out_dir, "%s-rank%d.atf" % (self.run, rank))
        self._writer = atf.Writer(self.path, header)

    def _adapter_for(self, obj):
        if self._adapter is None:
            self._adapter = detect(obj)
        return self._adapter

    def _wants_payload(self, name):
        if not self.payload:
            return False
        w = self._payload_names.get(name)
        if w is None:  # names repeat every step: match each once
            w = self._payload_names[name] = any(fnmatch.fnmatchcase(name, p) for p in self.payload)
        return w

    def _tensor(self, name, t, phase, call=None, io=None, step=None, micro=None):
        a = self._adapter
        info = a.info(t)
        rec = {"step": self._step if step is None else step, "micro": self._cur_micro() if micro is None else micro,
               "name": name, "phase": phase}
        if call:
            rec["call"], rec["io"] = call, io
        if info.dtype is None:
            rec["missing"] = "dtype %s has no ATF name" % info.fw_dtype
        elif info.cuda and self.defer and self._defer(rec, t, info, name):
            return
        else:
            if info.cuda:  # strided: a row-major copy on the device (the caching allocator's memory)
                copy = None if _row_major(info) else a.contiguous_device(t)
                ptr = info.ptr if copy is None else a.info(copy).ptr
                digest = self._digest.device(ptr, info.nbytes, a.stream(t))
                del copy
            else:
                digest = self._digest.host(info.ptr, info.elem_size, info.shape, info.strides)
            payload = a.raw_bytes(t, info.nbytes) if self._wants_payload(name) else None
            rec.update(atf.tensor_fields(info.dtype, info.shape, digest, payload))
        self._emit(rec)

    def _defer(self, rec, t, info, name):
        """Enqueues the digest of a CUDA tensor; the record waits for it. False: digest it now."""
        a = self._adapter
        payload = a.raw_bytes(t, info.nbytes) if self._wants_payload(name) else None
        with self._plock:
            if self._batch is None:
                self._batch = self._digest.batch()
            slot = len(self._batch)
            strides = None if _row_major(info) else info.strides
            if not self._batch.add(info.ptr, info.elem_size, info.shape, strides, info.nbytes, a.stream(t), t):
                return False
            rec.update(atf.tensor_fields(info.dtype, info.shape, None, payload))
            self._open(a)
            self._pending.append((rec, slot))
        return True

    def _emit(self, rec):
        """Writes rec, or queues it behind records waiting for deferred digests (order is kept)."""
        self._open(self._adapter)
        with self._plock:
            if self._pending:
                self._pending.append((rec, None))
                return
        self._writer.write(rec)

    def _flush_device(self):
        """One wait for the GPU: finishes the deferred digests and writes the waiting records."""
        with self._plock:
            if not self._pending:
                return
            digests = self._batch.finish() if self._batch is not None else []
            for rec, slot in self._pending:
                if slot is not None:
                    rec["digest"] = digests[slot]
                self._writer.write(rec)
            self._pending = []

    # --- watching a model ----------------------------------------------------------------------
    def watch(self, model):
        """Hooks every submodule / sublayer of model (and the model itself, named `root`)."""
        a = self._adapter_for(model)
        if not a.is_module(model):
            raise TypeError("align_probe: watch() takes a torch.nn.Module or a paddle.nn.Layer")
        self._open(a)
        for qual, mod in a.modules(model):
            name = qual or self.root
            self._handles += a.hook_module(mod, self._pre_hook(name, mod is model), self._post_hook(name))
        if self.grads:
            for pname, p in a.params(model):
                if a.requires_grad(p):
                    self._handles.append(a.hook_grad(p, self._grad_fn(pname + ".grad", "grad")))
        return self

    def unwatch(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def _pre_hook(self, name, is_root):
        def pre(args, kwargs):
            if is_root:
                self._root_calls += 1
            key = (self._cur_micro(), name)
            k = self._calls.get(key, 0)
            self._calls[key] = k + 1
            call = "%s#%d" % (name, k)
            self._open_calls.setdefault(name, []).append(call)
            if self.inputs:
                ts = _flatten((args, kwargs), self._adapter, [])
                for n, t in zip(_names(name + ".in", len(ts)), ts):
                    self._tensor(n, t, "fwd", call, "in")
        return pre

    def _post_hook(self, name):
        def post(out):
            stack = self._open_calls.get(name)
            call = stack.pop() if stack else None
            ts = _flatten(out, self._adapter, [])
            for n, t in zip(_names(name + ".out", len(ts)), ts):
                self._tensor(n, t, "fwd", call, "out" if call else None)
                if self.grads and self._adapter.requires_grad(t):
                    self._adapter.hook_grad(t, self._grad_fn(n + ".grad", "bwd"))
        return post

    def _grad_fn(self, name, phase):
        def fn(g):
            if g is not None:
                self._tensor(name, g, phase)
        return fn

    # --- explicit records ----------------------------------------------------------------------
    def record(self, name, value, phase=None, dtype=None):
        """Records a tensor or a Python number under `name` (phase: "loss" for names containing
        "loss", else "metric"). A one-element tensor gets its exact bits (a device tensor is copied:
        4 bytes, as .item() would); a larger one its digest (and payload when its name matches)."""
        phase = phase or ("loss" if "loss" in name else "metric")
        rec = {"step": self._step, "micro": self._cur_micro(), "name": name, "phase": phase}
        if isinstance(value, bool):
            rec.update(atf.scalar_fields("bool", [], bytes([int(value)])))
        elif isinstance(value, int):
            rec.update(atf.scalar_fields("int64", [], (value & (2**64 - 1)).to_bytes(8, "little")))
        elif isinstance(value, float):
            import struct
            rec.update(atf.scalar_fields("fp64", [], struct.pack("<d", value)))
        else:
            a = self._adapter_for(value)
            info = a.info(value)
            n = 1
            for s in info.shape:
                n *= s
            if n != 1 or info.dtype is None:
                self._tensor(name, value, phase)
                return
            rec.update(atf.scalar_fields(info.dtype, info.shape, a.raw_bytes(value, info.nbytes)))
        self._emit(rec)

    def params(self, model, phase="param"):
        """Records every parameter of model (its values now: after the optimizer step, or the initial
        weights before the first step)."""
        a = self._adapter_for(model)
        for pname, p in a.params(model):
            self._tensor(pname, p, phase)
        if self._writer:
            self._writer.flush()

    def close(self):
        """Removes the hooks, writes the records waiting for GPU digests, closes the trace; returns its
        path."""
        self.unwatch()
        self._flush_device()
        if self._batch is not None:
            self._batch.close()
            self._batch = None
        if self._writer:
            self._writer.close()
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _row_major(info):
    want = 1
    for s, st in zip(reversed(info.shape), reversed(info.strides)):
        if s != 1 and st != want:
            return False
        want *= s
    return True
