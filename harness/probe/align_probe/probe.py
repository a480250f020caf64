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
  PARAM.main_grad       instead of PARAM.grad where the layer accumulated into param.main_grad itself
                        and delivered a placeholder (Megatron / Transformer Engine wgrad fusion:
                        param.grad_added_to_main_grad); the accumulated main_grad, phase grad
  PARAM                 parameter values (Probe.params)   phase param (or the phase given)
K counts the calls of MOD within (step, micro-batch). The micro-batch is the one Probe.micro(k) set,
or else counts the calls of the watched model within the step (0, 1, ...). Tensors carry the xxh3t64
digest of their logical row-major bytes, and their payload when the name matches a `payload` pattern
(fnmatch: "*", "layers.3.*"); one-element values given to Probe.record carry exact bits.

CUDA tensors are digested deferred (defer=True, the default): the leaf kernel is enqueued on the
framework's current stream and the record waits in memory; at the end of `with probe.step(...)` (and at
close) the probe waits for the GPU once, finishes every digest on the host and writes the records in
their order. So that this wait never holds the CPU while the GPU has nothing to do, a step's records
are written at the end of the next step (when their kernels ran long ago), at flush() or at close();
records made outside a step (Probe.params after the step) go with the next step's. A one-element CUDA
tensor given to Probe.record is copied on its stream into the probe's memory (no .item(), no wait) and
written with them. defer=False digests each CUDA tensor when it is recorded (one wait per tensor). A
tensor with more than 16 dimensions that do not merge is digested as with defer=False (a row-major
copy made by the framework).

side_stream=True (deferred digests): the digest kernels run on a stream of the probe's library, after an
event recorded on the framework's stream, instead of on the framework's stream itself; the framework's
later kernels then never wait behind a digest (harness/probe/native/probe_cuda.cu says why the tensor's
memory stays valid). A later in-place write of the tensor on the framework's stream could then run before
the digest read it: a record whose tensor's version counter moved before its digest was known to have run
gets its payload's digest when it has a payload, else `missing` with that reason (never a digest of
other bytes). Writes the counter does not see (dedup, below) are not caught. Default False.

Wrappers (unwrap=True, the default): watch() and params() look through data-parallel and precision
wrappers (torch and Megatron-Core DistributedDataParallel, DataParallel, Megatron's Float16Module;
paddle.DataParallel and fleet.distributed_model's *Parallel wrappers), so names are the model's own
(decoder.layers.3.mlp, not module.module.decoder.layers.3.mlp: the names of its checkpoints and of the
name maps). unwrap=False keeps the wrapper's names.

include / exclude (fnmatch patterns, like payload): which modules and parameters are recorded, by the
names the records would carry ("decoder.layers.3.*", "*.experts.*"): a module or parameter is recorded
when some include pattern matches its name (or there is none) and no exclude pattern does; the records
under a module are its calls' .in / .out / .out.grad, a parameter's its .grad and its values. A model
left out still counts the micro-batches.

Layer numbers (global_layers=True, the default): Megatron numbers the decoder layers of each pipeline
stage (and virtual stage) from 0 in module names, but each TransformerLayer's layer_number is its
1-based number in the whole model; records under decoder.layers.N take layer_number - 1 as N, so stage 2
of 4 writes decoder.layers.30.mlp.out for its first layer, as a run without pipeline parallelism does and
as the name maps expect. global_layers=False keeps the local numbers.

Activation recomputation (torch.utils.checkpoint, Megatron's recompute, Paddle's fleet.utils.recompute,
reentrant or not): a watched module's forward that runs inside the framework's backward (the engine says
so: torch._C._current_graph_task_id, Paddle's core.eager._is_run_in_backward) re-runs a forward the step
has recorded, so by default (recompute=False) it writes no record and counts no call; only its outputs'
gradient hooks are registered, since with reentrant recompute the gradients flow through the recomputed
outputs. Whether a framework recomputes, and how much (torch's non-reentrant checkpoint stops early), is
a memory setting, so a run with recompute traces as one without. recompute=True records those forwards
as further calls (MOD#1, ...) of the same names, to compare a recompute with the first forward. A watched
module called by a custom backward is treated the same way.

CUDA graphs (Megatron's --cuda-graph-impl, Transformer Engine's make_graphed_callables): a CUDA tensor
recorded while a graph is captured gets no record (its digest kernel would be captured into the graph,
and the graph's replays run no hooks); stderr says so once. Graphed layers are not traced: leave them out
of the graph to trace them.

A run that stops: an exception leaving `with probe.step(...)` (a NaN check, an OOM, Ctrl-C) writes every
pending record before it propagates, so the trace ends with the failing step; a probe not closed when the
interpreter exits is closed then (atexit).

dedup=True: a tensor recorded again within a step (a module's output that the next module takes as its
input, a gradient seen by two hooks) is digested once when it is the very same tensor object with the same
shape, strides, dtype and address, and its version counter (torch `_version`, Paddle
`_inplace_version()`) has not moved since: the framework bumps that counter at every in-place write it
makes. A write it does not count (through `.data`, or by a native extension or collective that bypasses
the counter) between the two records would go unseen, so the default is False.
"""
import atexit
import contextlib
import fnmatch
import os
import sys
import threading
import types
import weakref

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


def _one_chunk(model, what):
    """Megatron passes its model as a list of chunks: a list of one is its chunk; several chunks (virtual
    pipeline stages) are refused, since their roots and micro-batch counts would mix."""
    if isinstance(model, (list, tuple)):
        if len(model) != 1:
            raise TypeError("align_probe: %s() takes one model, not a list of %d chunks (virtual pipeline "
                            "stages): one Probe per chunk (run='...-chunk0', ...), or %s(model[i])"
                            % (what, len(model), what))
        return model[0]
    return model


def _trec_dict(r):
    """The record dict of a _TRec tuple (step, micro, name, phase, call, io, dtype, shape), digest None."""
    rec = {"step": r[0], "micro": r[1], "name": r[2], "phase": r[3]}
    if r[4]:
        rec["call"], rec["io"] = r[4], r[5]
    rec.update(atf.tensor_fields(r[6], r[7], None))
    return rec


def _names(base, n):
    return [base] if n == 1 else ["%s.%d" % (base, i) for i in range(n)]


class Probe:
    def __init__(self, out_dir, run="run", framework=None, payload=(), inputs=True, grads=True,
                 rank=None, world_size=None, root="model", native=None, defer=True, side_stream=False,
                 dedup=False, recompute=False, unwrap=True, global_layers=True, include=(), exclude=()):
        self.out_dir = out_dir
        self.run = run
        self.framework = framework
        self.payload = [payload] if isinstance(payload, str) else list(payload)
        self.include = [include] if isinstance(include, str) else list(include)
        self.exclude = [exclude] if isinstance(exclude, str) else list(exclude)
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
        self.side_stream = side_stream
        self.dedup = dedup
        self.recompute = recompute
        self.unwrap = unwrap
        self.global_layers = global_layers
        self._param_names = {}  # id(model) -> (model, [(record name, parameter)]) for params()
        self._seen = {}           # dedup: id(tensor) -> (weakref, version, signature, ("slot", k) | ("digest", hex))
        self.dedup_hits = 0       # records that took an earlier record's digest (dedup=True)
        self._batch = None        # DeviceBatch of the deferred CUDA digests (this step's)
        self._pending = []        # records waiting for those digests, in write order: (rec, slot)
        self._prev = None         # (DeviceBatch, pending) of the step before, written at this step's end
        self._spare = None        # a finished DeviceBatch, reused
        self._plock = threading.RLock()
        self._step = 0
        self._micro = None
        self._root_calls = 0
        self._calls = {}
        self._open_calls = {}
        self.path = None
        self._closed = False
        self._watched_ids = set()  # id() of the models watch() hooked (a second watch() is refused)
        self._followed = None  # follow(): (optimizer, the probe's wrapper of its step, the step it replaced)
        self._capture_warned = False
        self._pid = os.getpid()
        atexit.register(self._at_exit)  # a run that ends without close() still gets its last records

    # --- run structure -------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, step):
        """Records inside belong to `step` (1 is the first optimizer step; 0 is before it)."""
        if not isinstance(step, int) or step < 0:
            raise ValueError("align_probe: step must be an integer >= 0, not %r" % (step,))
        if self._followed:
            raise ValueError("align_probe: step() and follow() both count steps; use one of them")
        self._begin_step(step)
        try:
            yield self
        except BaseException:
            # the run is stopping (a NaN check, an OOM, Ctrl-C): this step's records, the ones that show
            # what went wrong, reach the file now instead of waiting for a next step that will not come
            self._flush_on_error()
            raise
        self._flush_device(lag=True)
        if self._writer:
            self._writer.flush()

    def _begin_step(self, step):
        with self._lock:
            self._step, self._micro, self._root_calls, self._calls = step, None, 0, {}
            self._seen, self._open_calls = {}, {}  # calls a recompute left open (recompute=True) end here

    def follow(self, optimizer, first_step=1, params=None):
        """Steps counted by the optimizer instead of `with probe.step(...)`: records belong to first_step
        until optimizer.step() returns, then to the next step, and so on (Megatron counts an iteration whose
        update was skipped as well; so does this). params: a model whose parameters are recorded after each
        optimizer step (Probe.params). Works with any object with a step() method (torch.optim, Megatron's
        MegatronOptimizer, paddle.optimizer): step is wrapped on the instance, and close() restores it
        (unwatch() does not: unwatch() before an evaluation pass and watch() after it keeps the count).
        With watch(), two lines instrument a training loop."""
        if not callable(getattr(optimizer, "step", None)):
            raise TypeError("align_probe: follow() takes an optimizer (an object with a step() method)")
        if not isinstance(first_step, int) or first_step < 0:
            raise ValueError("align_probe: first_step must be an integer >= 0, not %r" % (first_step,))
        if self._followed:
            raise ValueError("align_probe: follow() was called already (one optimizer counts the steps)")
        orig = optimizer.step
        prev = getattr(optimizer, "__dict__", {}).get("step")  # an instance wrapper already there (an LR
        probe = self                                            # scheduler's step counter): put back at close

        def step_fn(opt, *args, **kwargs):
            out = orig(*args, **kwargs)
            if probe._followed is not None and probe._followed[0] is opt:  # not after close()
                probe._end_followed_step(params)
            return out
        # a bound method, as the class's step is: torch's LR schedulers wrap optimizer.step through __func__;
        # where one already did, its mark is kept (its wrapper, called inside, still counts the steps)
        if getattr(orig, "_wrapped_by_lr_sched", False):
            step_fn._wrapped_by_lr_sched = True
        step = types.MethodType(step_fn, optimizer)
        try:
            optimizer.step = step  # the instance attribute shadows the class's method
        except AttributeError:
            raise TypeError("align_probe: follow() cannot wrap %s.step (no instance attributes)"
                            % type(optimizer).__name__) from None
        self._followed = (optimizer, step, prev)
        self._begin_step(first_step)
        return self

    def _end_followed_step(self, model):
        if model is not None:
            self.params(model)
        self._flush_device(lag=True)
        if self._writer:
            self._writer.flush()
        self._begin_step(self._step + 1)

    def _unfollow(self):
        if self._followed:
            opt, wrapper, prev = self._followed
            self._followed = None  # the wrapper, if something wrapped it in turn, now only calls through
            if getattr(opt, "__dict__", {}).get("step") is wrapper:
                if prev is None:
                    del opt.step  # the class's step() again
                else:
                    opt.step = prev

    def _flush_on_error(self):
        """Writes every record made so far, as flush() does; an error doing so (the GPU failing is often
        why the run stops) is printed, not raised over the run's own."""
        try:
            self.flush()
        except Exception as e:  # noqa: BLE001 - the run's exception is the one to see
            sys.stderr.write("align_probe: the records pending at the error could not be written: %s\n" % e)

    def flush(self):
        """Writes every record made so far (one wait for the GPU), as close() does, and keeps the probe
        open."""
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
        t = a.local(t)
        info = a.info(t)
        if info.cuda and a.capturing():
            self._captured(name)
            return
        step = self._step if step is None else step
        micro = self._cur_micro() if micro is None else micro
        # a plain tensor record (no payload) waiting for its digest is kept as a tuple, _TRec's fields,
        # and written by the writer's shortcut (atf.Writer.write_tensor): no dict per record
        wants = self._wants_payload(name)
        known = self._seen_before(t, info) if self.dedup and info.dtype is not None else None
        if info.dtype is not None and not wants:
            if known is not None and known[0] == "slot":
                self.dedup_hits += 1
                with self._plock:
                    self._pending.append(((step, micro, name, phase, call, io, info.dtype, info.shape), known[1]))
                return
            if known is None and info.cuda and self.defer and \
                    self._defer((step, micro, name, phase, call, io, info.dtype, info.shape), t, info, None):
                return
        rec = {"step": step, "micro": micro, "name": name, "phase": phase}
        if call:
            rec["call"], rec["io"] = call, io
        if info.dtype is None:
            rec["missing"] = info.missing or "dtype %s has no ATF name" % info.fw_dtype
        elif known is not None:
            self.dedup_hits += 1
            payload = a.raw_bytes(t, info.nbytes) if wants else None
            if known[0] == "slot":
                rec.update(atf.tensor_fields(info.dtype, info.shape, None, payload))
                with self._plock:
                    self._pending.append((rec, known[1]))
                return
            rec.update(atf.tensor_fields(info.dtype, info.shape, known[1], payload))
        elif info.cuda and self.defer and self._defer(rec, t, info, a.raw_bytes(t, info.nbytes) if wants else None):
            return
        else:
            if info.cuda:  # strided: a row-major copy on the device (the caching allocator's memory)
                copy = None if info.row_major else a.contiguous_device(t)
                ptr = info.ptr if copy is None else a.info(copy).ptr
                digest = self._digest.device(ptr, info.nbytes, a.stream(t))
                del copy
            else:
                digest = self._digest.host(info.ptr, info.elem_size, info.shape, info.strides)
            payload = a.raw_bytes(t, info.nbytes) if wants else None
            rec.update(atf.tensor_fields(info.dtype, info.shape, digest, payload))
            if self.dedup:
                self._remember(t, info, ("digest", digest))
        self._emit(rec)

    def _captured(self, name):
        """A CUDA tensor recorded while a CUDA graph is captured: no record (its digest kernel would be
        captured into the graph, and hooks do not run when the graph is replayed); said once."""
        if not self._capture_warned:
            self._capture_warned = True
            sys.stderr.write("align_probe: records made while a CUDA graph is captured are left out (the graph's "
                             "replays run no hooks), the first: %s\n" % name)

    def _seen_before(self, t, info):
        """dedup: what an earlier record of this step made of the same tensor object, if nothing the
        framework counts has written to it since (class docstring), else None."""
        e = self._seen.get(id(t))
        if e is None or e[0]() is not t or e[2] != (info.ptr, info.shape, info.strides, info.dtype):
            return None
        v = self._adapter.version_counter(t)
        return e[3] if v is not None and v == e[1] else None

    def _remember(self, t, info, result):
        v = self._adapter.version_counter(t)
        if v is None:
            return
        try:
            ref = weakref.ref(t)
        except TypeError:  # a tensor type without weak references: never deduplicated
            return
        self._seen[id(t)] = (ref, v, (info.ptr, info.shape, info.strides, info.dtype), result)

    def _defer(self, rec, t, info, payload):
        """Enqueues the digest of a CUDA tensor; the record (a dict, or a _TRec tuple: no payload) waits
        for it. False: digest it now."""
        a = self._adapter
        with self._plock:
            if self._batch is None:
                self._batch = self._digest.batch(self.side_stream, a.version_counter)
            slot = len(self._batch)
            strides = None if info.row_major else info.strides
            if not self._batch.add(info.ptr, info.elem_size, info.shape, strides, info.nbytes, a.stream(t), t):
                return False
            if type(rec) is dict:
                rec.update(atf.tensor_fields(info.dtype, info.shape, None, payload))
            if self._writer is None:
                self._open(a)
            self._pending.append((rec, slot))
            if self.dedup:
                self._remember(t, info, ("slot", slot))
        return True

    def _emit(self, rec):
        """Writes rec, or queues it behind records waiting for deferred digests (order is kept)."""
        self._open(self._adapter)
        with self._plock:
            if self._pending or self._prev:
                self._pending.append((rec, None))
                return
        self._writer.write(rec)

    def _write_batch(self, batch, pending):
        """Waits for batch's kernels (once), completes its records and writes them, in order."""
        got = batch.finish() if batch is not None else []
        w = self._writer
        for rec, slot in pending:
            if slot is not None:
                v = got[slot]
                if type(rec) is tuple:  # a _TRec: a plain tensor record
                    if v is not None:
                        w.write_tensor(rec, v)
                        continue
                    rec = _trec_dict(rec)
                if v is None:  # written in place before its side-stream digest surely ran (DeviceBatch)
                    self._unknown(rec)
                elif isinstance(v, bytes):  # a one-element tensor's bits (Probe.record)
                    info = rec.pop("_scalar")
                    rec.update(atf.scalar_fields(info[0], info[1], v))
                else:
                    rec["digest"] = v
            w.write(rec)

    def _unknown(self, rec):
        """rec's tensor was written in place while its digest ran on the side stream: the digest of its
        payload (copied at the record, in stream order) where it has one, else the record says so."""
        info = rec.pop("_scalar", None)
        if "payload" in rec:
            import base64
            rec["digest"] = self._digest.host_bytes(base64.b64decode(rec["payload"]))
            return
        for k in ("digest", "bits", "value"):
            rec.pop(k, None)
        if info is not None:
            rec["dtype"], rec["shape"] = info[0], list(info[1])
        rec["missing"] = ("written in place before its digest on the probe's side stream had run "
                          "(side_stream=True; the version counter moved)")

    def _flush_device(self, lag=False):
        """Writes the records waiting for deferred GPU digests. lag (a step's end): the step before's,
        whose kernels ran long ago, so the CPU does not wait for the GPU and write records while the GPU
        sits idle; this step's wait until the next step's end, a flush() or close(). Otherwise all."""
        with self._plock:
            self._seen = {}  # its slots name the batch that is written or put aside now
            if self._prev:
                batch, pending = self._prev
                self._prev = None
                self._write_batch(batch, pending)
                self._spare = batch
            if not self._pending:
                return
            if lag:
                self._prev = (self._batch, self._pending)
                self._batch, self._spare = self._spare, None
            else:
                self._write_batch(self._batch, self._pending)
            self._pending = []

    # --- watching a model ----------------------------------------------------------------------
    def watch(self, model):
        """Hooks every submodule / sublayer of model (and the model itself, named `root`). A data-parallel
        or precision wrapper (unwrap=True) is looked through: names are the wrapped model's."""
        model = _one_chunk(model, "watch")
        a = self._adapter_for(model)
        if not a.is_module(model):
            raise TypeError("align_probe: watch() takes a torch.nn.Module or a paddle.nn.Layer")
        if self.unwrap:
            model = a.unwrap(model)
        if id(model) in self._watched_ids:
            raise ValueError("align_probe: this model is watched already (a second watch() would write every "
                             "record twice); unwatch() first")
        self._open(a)
        mods = a.modules(model)
        self._watched_ids.add(id(model))
        ren = self._renamer(mods)
        for qual, mod in mods:
            name = ren(qual) or self.root
            if self._watched(name):
                self._handles += a.hook_module(mod, self._pre_hook(name, mod is model), self._post_hook(name))
            elif mod is model:  # left out, but its calls still count the micro-batches
                self._handles += a.hook_module(mod, self._pre_hook(name, True, count_only=True), lambda out: None)
        if self.grads:
            for pname, p in a.params(model):
                pname = ren(pname)
                if a.requires_grad(p) and self._watched(pname):
                    self._handles.append(a.hook_grad(p, self._param_grad_fn(pname, p)))
        return self

    def _watched(self, name):
        """Whether records under name (a module's or parameter's) are written: include / exclude."""
        if self.include and not any(fnmatch.fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)

    def _renamer(self, mods):
        """global_layers=True: a function mapping qualified names under a Megatron decoder layer (a
        `decoder.layers.N` module with an integer `layer_number`, the 1-based number in the whole model:
        pipeline stages and virtual stages number their layers from 0 locally) to the global index,
        decoder.layers.N -> decoder.layers.(layer_number - 1); identity where there is none."""
        pre = {}
        if self.global_layers:
            for qual, mod in mods:
                head, _, idx = qual.rpartition(".")
                num = getattr(mod, "layer_number", None)
                if idx.isdigit() and (head == "decoder.layers" or head.endswith(".decoder.layers")) and \
                        type(num) is int and num >= 1 and num - 1 != int(idx):
                    pre[qual] = "%s.%d" % (head, num - 1)
        if not pre:
            return lambda q: q

        def ren(q):
            parts = q.split(".")
            for k in range(len(parts), 0, -1):  # the longest renamed prefix
                new = pre.get(".".join(parts[:k]))
                if new is not None:
                    return ".".join([new] + parts[k:])
            return q
        return ren

    def unwatch(self):
        for h in self._handles:
            h.remove()
        self._handles = []
        self._watched_ids = set()

    def _pre_hook(self, name, is_root, count_only=False):
        def pre(args, kwargs):
            if not self.recompute and self._adapter.in_backward():
                return  # activation recomputation: the step's forward records are written already
            if is_root:
                self._root_calls += 1
            if count_only:
                return
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
            a = self._adapter
            rec = self.recompute or not a.in_backward()
            if rec:
                stack = self._open_calls.get(name)
                call = stack.pop() if stack else None
            ts = _flatten(out, a, [])
            for n, t in zip(_names(name + ".out", len(ts)), ts):
                if rec:
                    self._tensor(n, t, "fwd", call, "out" if call else None)
                # a recomputed output still gets its gradient hook: in reentrant recompute it is the
                # tensor the gradient flows through (the first forward ran without autograd)
                if self.grads and a.requires_grad(t):
                    a.hook_grad(t, self._grad_fn(n + ".grad", "bwd"))
        return post

    def _param_grad_fn(self, pname, p):
        """The gradient a backward delivers to parameter p, as PARAM.grad; or, where the layer added it
        into p.main_grad itself and delivered a placeholder (Megatron's gradient_accumulation_fusion and
        Transformer Engine's fuse_wgrad_accumulation: p.grad_added_to_main_grad set, the gradient a
        torch.empty or torch.zeros of main_grad's shape, or None), p.main_grad as PARAM.main_grad: the
        accumulated gradient, never the placeholder's uninitialised bytes."""
        grad_name, main_name = pname + ".grad", pname + ".main_grad"

        def fn(g):
            if g is None:
                return
            if getattr(p, "grad_added_to_main_grad", False):
                main = getattr(p, "main_grad", None)
                if main is not None:
                    self._tensor(main_name, main, "grad")
                return
            self._tensor(grad_name, g, "grad")
        return fn

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
            value = a.local(value)
            info = a.info(value)
            n = 1
            for s in info.shape:
                n *= s
            if n != 1 or info.dtype is None:
                self._tensor(name, value, phase)
                return
            if info.cuda and a.capturing():
                self._captured(name)
                return
            if info.cuda and self.defer and 0 < info.nbytes <= 16:
                self._defer_scalar(rec, value, info)
                return
            rec.update(atf.scalar_fields(info.dtype, info.shape, a.raw_bytes(value, info.nbytes)))
        self._emit(rec)

    def _defer_scalar(self, rec, t, info):
        """A one-element CUDA tensor's bits, copied on its stream into the probe's memory without a wait
        (.item() or a copy to pageable memory would stop the CPU until the GPU catches up)."""
        a = self._adapter
        with self._plock:
            if self._batch is None:
                self._batch = self._digest.batch(self.side_stream, self._adapter.version_counter)
            slot = len(self._batch)
            self._batch.add_bytes(info.ptr, info.nbytes, a.stream(t), t)
            rec["_scalar"] = (info.dtype, info.shape)
            self._open(a)
            self._pending.append((rec, slot))

    def params(self, model, phase="param"):
        """Records every parameter of model (its values now: after the optimizer step, or the initial
        weights before the first step)."""
        model = _one_chunk(model, "params")
        a = self._adapter_for(model)
        m = a.unwrap(model) if self.unwrap else model
        key = id(m)
        if self._param_names.get(key, (None,))[0] is not m:  # names worked out once per model
            ren = self._renamer(a.modules(m))
            self._param_names[key] = (m, [(ren(n), p) for n, p in a.params(m) if self._watched(ren(n))])
        for pname, p in self._param_names[key][1]:
            self._tensor(pname, p, phase)
        if self._writer:
            self._writer.flush()

    def _at_exit(self):
        if not self._closed and os.getpid() == self._pid:  # not in a forked child: the trace is the parent's
            try:
                self.close()
            except Exception as e:  # noqa: BLE001 - at interpreter exit: report, do not raise
                sys.stderr.write("align_probe: closing %s at exit failed: %s\n" % (self.path, e))

    def close(self):
        """Removes the hooks, writes the records waiting for GPU digests, closes the trace; returns its
        path."""
        self._closed = True
        atexit.unregister(self._at_exit)
        self.unwatch()
        self._unfollow()
        self._flush_device()
        for b in (self._batch, self._spare):
            if b is not None:
                b.close()
        self._batch = self._spare = None
        if self._writer:
            self._writer.close()
        return self.path

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

