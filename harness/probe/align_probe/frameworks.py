"""Framework adapters: what the probe needs from PyTorch and from Paddle, and nothing that changes a
run. Every function here only reads: data pointers, strides, dtypes, devices; hooks are registered
with functions that return None (a forward hook returning None keeps the output; a tensor hook
returning None keeps the gradient), so the autograd graph, the accumulation order, dtypes, streams
and the framework's allocator see no difference. Copies to the host happen only for payloads (names
matching `payload=`) and for the scalars passed to Probe.record.

Which hooks and why:
- module inputs / outputs: forward pre-hooks and forward (post-)hooks, reading the tensors;
- gradients w.r.t. a module's outputs: a hook on each output tensor that requires grad
  (torch Tensor.register_hook, Paddle Tensor.register_hook): it runs when that gradient is complete
  and adds no node to the graph. Not torch's register_full_backward_hook: it wraps the module's inputs
  and outputs in an identity autograd Function (BackwardHookFunction), new nodes in the graph;
- parameter gradients: a hook on each parameter (leaf) tensor: the gradient this backward delivers to
  it, before it is added to .grad.
"""
import ctypes

TORCH_DTYPES = {"torch.float64": "fp64", "torch.float32": "fp32", "torch.bfloat16": "bf16",
                "torch.float16": "fp16", "torch.float8_e4m3fn": "fp8_e4m3", "torch.float8_e5m2": "fp8_e5m2",
                "torch.int64": "int64", "torch.int32": "int32", "torch.int16": "int16", "torch.int8": "int8",
                "torch.uint8": "uint8", "torch.bool": "bool"}
PADDLE_DTYPES = {"paddle.float64": "fp64", "paddle.float32": "fp32", "paddle.bfloat16": "bf16",
                 "paddle.float16": "fp16", "paddle.float8_e4m3fn": "fp8_e4m3", "paddle.float8_e5m2": "fp8_e5m2",
                 "paddle.int64": "int64", "paddle.int32": "int32", "paddle.int16": "int16", "paddle.int8": "int8",
                 "paddle.uint8": "uint8", "paddle.bool": "bool"}


class TensorInfo:
    __slots__ = ("dtype", "fw_dtype", "shape", "strides", "elem_size", "ptr", "cuda", "nbytes", "row_major",
                 "missing")


def _missing(shape, fw_dtype, why):
    """The TensorInfo of a tensor the probe does not digest: dtype None, `missing` says why."""
    i = TensorInfo()
    i.dtype, i.fw_dtype, i.shape, i.missing = None, fw_dtype, shape, why
    i.strides, i.elem_size, i.ptr, i.cuda, i.nbytes, i.row_major = (), 0, 0, False, 0, True
    return i


class Torch:
    name = "torch"

    def __init__(self):
        import torch
        self.torch = torch
        self.version = torch.__version__
        # per-record costs kept low (hooks run on every module call): dtypes looked up by object, the
        # current stream's raw handle without building a torch.cuda.Stream
        self._dtypes = {}
        for k, v in TORCH_DTYPES.items():
            d = getattr(torch, k.split(".", 1)[1], None)
            if d is not None:
                self._dtypes[d] = v
        self._plain = (torch.Tensor, torch.nn.Parameter)  # types whose memory is their own, as strided
        self._strided = torch.strided
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw if callable(raw) else None
        task = getattr(torch._C, "_current_graph_task_id", None)
        self._graph_task = task if callable(task) else None
        cap = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
        self._capturing = cap if callable(cap) and torch.cuda.is_available() else None

    def is_tensor(self, x):
        return isinstance(x, self.torch.Tensor)

    def is_module(self, x):
        return isinstance(x, self.torch.nn.Module)

    def local(self, t):
        """The tensor whose memory holds t's values on this rank: a DTensor's local shard (FSDP2, torch
        tensor parallel, Megatron-FSDP); t itself otherwise."""
        if type(t) in self._plain:
            return t
        loc = getattr(t, "_local_tensor", None)
        return loc if isinstance(loc, self.torch.Tensor) else t

    def info(self, t):
        if t.layout is not self._strided or t.is_meta or (type(t) not in self._plain and not self._has_storage(t)):
            what = ("a %s tensor" % str(t.layout).replace("torch.", "") if t.layout is not self._strided
                    else "a meta tensor (no data)" if t.is_meta
                    else "a %s without storage of its own (a wrapper subclass)" % type(t).__name__)
            return _missing(tuple(t.shape), t.dtype, "%s: not digested" % what)
        i = TensorInfo()
        i.missing = None
        d = t.dtype
        i.fw_dtype = d  # printed (as "torch.float32") only when it has no ATF name
        i.dtype = self._dtypes.get(d)
        i.shape = tuple(t.shape)
        i.strides = t.stride()
        i.elem_size = t.element_size()
        i.ptr = t.data_ptr()
        i.cuda = t.is_cuda
        i.nbytes = t.numel() * i.elem_size
        # torch's contiguity skips size-1 dimensions and calls an empty tensor contiguous: row-major in the
        # digest's sense (the logical bytes are the memory's, in order)
        i.row_major = t.is_contiguous()
        return i

    @staticmethod
    def _has_storage(t):
        """Whether a tensor subclass has memory of its own (a wrapper subclass's storage is a stand-in
        whose data pointer cannot be read, or there is none)."""
        try:
            return t.numel() == 0 or (t.data_ptr() != 0 and t.untyped_storage().data_ptr() != 0)
        except (RuntimeError, NotImplementedError, TypeError):
            return False

    def contiguous_device(self, t):
        """A row-major copy on the tensor's device, for the device digest of a strided tensor."""
        with self.torch.no_grad():
            return t.detach().contiguous()

    def raw_bytes(self, t, nbytes):
        with self.torch.no_grad():
            c = t.detach()
            if c.device.type != "cpu":
                c = c.cpu()
            c = c.contiguous()
            return ctypes.string_at(c.data_ptr(), nbytes) if nbytes else b""

    def stream(self, t):
        """The cudaStream_t (an integer) current on t's device: the kernels that made t ran there."""
        if self._raw_stream is not None:
            return self._raw_stream(t.get_device())
        return self.torch.cuda.current_stream(t.device).cuda_stream

    def requires_grad(self, t):
        return t.requires_grad

    def capturing(self):
        """Whether the current CUDA stream is capturing a CUDA graph (CUDA tensors only ask)."""
        return self._capturing is not None and self._capturing()

    def in_backward(self):
        """Whether the autograd engine is running a backward on this thread (a forward called now is
        activation recomputation: torch.utils.checkpoint, reentrant or not, Megatron's CheckpointFunction).
        False where this torch has no _current_graph_task_id (before 1.13?): then nothing is skipped."""
        return self._graph_task is not None and self._graph_task() != -1

    def version_counter(self, t):
        """The tensor's version counter (bumped by every in-place write autograd sees), for dedup."""
        return t._version

    # data-parallel and precision wrappers (class name -> the attribute holding the wrapped module):
    # torch's DistributedDataParallel and DataParallel, Megatron-Core's DistributedDataParallel and
    # Float16Module (megatron/core/distributed, megatron/core/transformer/module.py)
    WRAPPERS = {"DistributedDataParallel": "module", "DataParallel": "module", "Float16Module": "module"}

    def unwrap(self, model):
        """The module that model wraps, through every wrapper of WRAPPERS (model itself if none)."""
        while True:
            attr = self.WRAPPERS.get(type(model).__name__)
            inner = getattr(model, attr, None) if attr else None
            if not isinstance(inner, self.torch.nn.Module):
                return model
            model = inner

    def modules(self, model):
        return list(model.named_modules())

    def params(self, model):
        return list(model.named_parameters())

    def hook_module(self, mod, pre, post):
        """pre(args, kwargs) before forward; post(output) after. Both return None."""
        h1 = mod.register_forward_pre_hook(lambda m, args, kwargs: pre(args, kwargs), with_kwargs=True)
        h2 = mod.register_forward_hook(lambda m, args, out: post(out))
        return [h1, h2]

    def hook_grad(self, t, fn):
        """fn(grad) returns None (the gradient is kept as it is)."""
        return t.register_hook(fn)

    def rank_world(self):
        d = self.torch.distributed
        if d.is_available() and d.is_initialized():
            return d.get_rank(), d.get_world_size()
        return None


class Paddle:
    name = "paddle"

    def __init__(self):
        import paddle
        self.paddle = paddle
        self.version = paddle.__version__
        import inspect
        try:  # Paddle 2.6+ hands keyword arguments to forward pre-hooks that ask for them
            self._kwargs = "with_kwargs" in inspect.signature(paddle.nn.Layer.register_forward_pre_hook).parameters
        except (TypeError, ValueError):
            self._kwargs = False
        eager = getattr(getattr(getattr(paddle, "base", None), "core", None), "eager", None)
        f = getattr(eager, "_is_run_in_backward", None)
        self._in_bwd = f if callable(f) else None
        cap = getattr(getattr(getattr(paddle, "base", None), "core", None), "is_cuda_graph_capturing", None)
        self._capturing = cap if callable(cap) else None

    def capturing(self):
        """Whether a CUDA graph is being captured (CUDA tensors only ask)."""
        return self._capturing is not None and bool(self._capturing())

    def is_tensor(self, x):
        return isinstance(x, self.paddle.Tensor)

    def is_module(self, x):
        return isinstance(x, self.paddle.nn.Layer)

    def local(self, t):
        """The tensor whose memory holds t's values on this rank: an auto-parallel DistTensor's local
        value; t itself otherwise."""
        f = getattr(t, "is_dist", None)
        return t._local_value() if callable(f) and f() else t

    def info(self, t):
        sp = getattr(t, "is_sparse", None)
        if callable(sp) and sp():
            return _missing(tuple(t.shape), str(t.dtype), "a sparse tensor: not digested")
        i = TensorInfo()
        i.missing = None
        i.fw_dtype = str(t.dtype)
        i.dtype = PADDLE_DTYPES.get(i.fw_dtype)
        i.shape = tuple(t.shape)
        i.strides = tuple(t.strides) if len(i.shape) else ()
        i.elem_size = t.element_size()
        i.ptr = t.data_ptr() if t.numel() else 0
        i.cuda = t.place.is_gpu_place()
        i.nbytes = int(t.numel()) * i.elem_size
        i.row_major = row_major(i.shape, i.strides)
        return i

    def contiguous_device(self, t):
        with self.paddle.no_grad():
            return t.detach().contiguous()

    def raw_bytes(self, t, nbytes):
        with self.paddle.no_grad():
            c = t.detach()
            if not c.place.is_cpu_place():
                c = c.cpu()
            c = c.contiguous()
            return ctypes.string_at(c.data_ptr(), nbytes) if nbytes else b""

    def stream(self, t):
        """Paddle's current CUDA stream as an integer: the CUDA stream protocol (__cuda_stream__,
        Paddle 3), else the stream object's raw handle (older releases)."""
        s = self.paddle.device.current_stream()
        if hasattr(s, "__cuda_stream__"):
            return int(s.__cuda_stream__()[1])
        base = getattr(s, "stream_base", s)
        for attr in ("raw_stream", "cuda_stream"):
            if hasattr(base, attr):
                return int(getattr(base, attr))
        raise RuntimeError("align_probe: cannot find the handle of Paddle's current CUDA stream")

    def requires_grad(self, t):
        return not t.stop_gradient

    def in_backward(self):
        """Whether Paddle's eager engine is running a backward (a forward called now is recompute:
        fleet.utils.recompute, reentrant or not). False where this Paddle lacks _is_run_in_backward."""
        return self._in_bwd is not None and bool(self._in_bwd())

    def version_counter(self, t):
        """The tensor's in-place version (None where this Paddle has none: never deduplicated)."""
        f = getattr(t, "_inplace_version", None)
        return f() if callable(f) else None

    def unwrap(self, model):
        """The layer that model wraps: paddle.DataParallel and fleet's distributed_model wrappers
        (PipelineParallel and its interleaved kinds, TensorParallel, ShardingParallel, SegmentParallel:
        a class named DataParallel or *Parallel* holding the layer in `_layers`), model itself if none."""
        while True:
            name = type(model).__name__
            inner = getattr(model, "_layers", None) if "Parallel" in name else None
            if not isinstance(inner, self.paddle.nn.Layer):
                return model
            model = inner

    def modules(self, model):
        return list(model.named_sublayers(include_self=True))

    def params(self, model):
        return list(model.named_parameters())

    def hook_module(self, mod, pre, post):
        """pre(args, kwargs) before forward (kwargs {} on a Paddle without with_kwargs); post(output)."""
        if self._kwargs:
            h1 = mod.register_forward_pre_hook(lambda m, args, kwargs: pre(args, kwargs), with_kwargs=True)
        else:
            h1 = mod.register_forward_pre_hook(lambda m, inputs: pre(inputs, {}))
        h2 = mod.register_forward_post_hook(lambda m, inputs, out: post(out))
        return [h1, h2]

    def hook_grad(self, t, fn):
        """fn(grad) returns None (the gradient is kept as it is)."""
        return t.register_hook(fn)

    def rank_world(self):
        d = self.paddle.distributed
        try:
            if d.is_initialized():
                return d.get_rank(), d.get_world_size()
        except (AttributeError, RuntimeError):
            pass
        return None


def row_major(shape, strides):
    """Whether strides (in elements) lay shape out in row-major order, size-1 dimensions aside."""
    want = 1
    for s, st in zip(reversed(shape), reversed(strides)):
        if s != 1 and st != want:
            return False
        want *= s
    return True


def detect(obj):
    """The adapter for a model or tensor: torch or paddle, from the object's type (the module that
    defines it), without importing a framework the object does not come from."""
    mod = type(obj).__module__ or ""
    for base in type(obj).__mro__:
        m = base.__module__ or ""
        if m.startswith("torch"):
            return Torch()
        if m.startswith("paddle"):
            return Paddle()
    raise TypeError("align_probe: %s (from %s) is neither a PyTorch nor a Paddle object" % (type(obj).__name__, mod))
