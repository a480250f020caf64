"""A tiny DSv4-flavoured block written once for PyTorch and once for Paddle, for the probe's tests.

    h = RMSNorm(x)                         norm   (fp32 mean of squares, rsqrt, weight)
    topv, topi = top-k(softmax(h Wr^T))    router (fp32 logits, k of E experts)
    u = h Wu^T;  g, l = split(u)           up     (Linear D -> 2F)
    a = silu(g) * l * sum(topv)            act    (SwiGLU scaled by the router probabilities)
    y = x + a Wd^T                         down   (Linear F -> D), residual
    loss = mean(y^2)

Weights are stored as torch lays out nn.Linear ([out, in]); the Paddle block keeps that layout and
multiplies with transpose_y, so both read the same safetensors bytes. `dtype` bf16 runs the block in
bf16 with the router in fp32; Paddle's CPU build has no bf16 matmul/softmax/silu kernels, so its block
casts to fp32 around them (as a port to Paddle CPU would) and back.

The training loop (train) keeps, when asked, every intermediate, the loss, each parameter's .grad, the
input's gradient (the input requires grad) and the updated parameters as raw bytes: the tests compare those independently of any probe.
"""
import numpy as np

T, D, F, E, K = 16, 64, 32, 8, 2
EPS = 1e-6
LR = 0.05
NAMES = ["norm.weight", "router.weight", "up.weight", "down.weight"]


def make_weights(seed=1234, steps=3):
    rng = np.random.default_rng(seed)
    w = {"norm.weight": (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32),
         "router.weight": (rng.standard_normal((E, D)) / np.sqrt(D)).astype(np.float32),
         "up.weight": (rng.standard_normal((2 * F, D)) / np.sqrt(D)).astype(np.float32),
         "down.weight": (rng.standard_normal((D, F)) / np.sqrt(F)).astype(np.float32)}
    for s in range(1, steps + 1):
        w["input.%d" % s] = rng.standard_normal((T, D)).astype(np.float32)
    return w


def raw(a):
    """Raw little-endian bytes of a framework tensor (host copy; tests only)."""
    if hasattr(a, "detach"):
        a = a.detach()
    if hasattr(a, "cpu"):
        a = a.cpu()
    try:
        import torch
        if isinstance(a, torch.Tensor):
            if a.dtype == torch.bfloat16:
                a = a.view(torch.int16)
            return a.contiguous().numpy().tobytes()
    except ImportError:
        pass
    import paddle
    if a.dtype == paddle.bfloat16:
        return a.view(paddle.int16).contiguous().numpy().tobytes() if hasattr(a, "view") else a.numpy().tobytes()
    return a.contiguous().numpy().tobytes()


def build_torch(w, dtype="fp32"):
    import torch
    import torch.nn.functional as Fn
    dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]

    class RMSNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.from_numpy(w["norm.weight"].copy()).to(dt))

        def forward(self, x):
            xf = x.float()
            var = xf.pow(2).mean(-1, keepdim=True)
            return (xf * torch.rsqrt(var + EPS)).to(dt) * self.weight

    class Router(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.from_numpy(w["router.weight"].copy()))

        def forward(self, h):
            logits = Fn.linear(h.float(), self.weight)
            probs = torch.softmax(logits, dim=-1)
            return torch.topk(probs, K, dim=-1)

    class SwiGLU(torch.nn.Module):
        def forward(self, u, scale):
            g, l = u.chunk(2, dim=-1)
            return Fn.silu(g) * l * scale

    class Linear(torch.nn.Module):
        def __init__(self, key):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.from_numpy(w[key].copy()).to(dt))

        def forward(self, x):
            return Fn.linear(x, self.weight)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.router, self.up = RMSNorm(), Router(), Linear("up.weight")
            self.act, self.down = SwiGLU(), Linear("down.weight")
            self.keep = None
            self.watched = None  # watched(block, tensors): the forward's tensors by name (op_records.py)

        def forward(self, x):
            h = self.norm(x)
            topv, topi = self.router(h)
            scale = topv.sum(-1, keepdim=True).to(dt)
            u = self.up(h)
            a = self.act(u, scale)
            d = self.down(a)
            y = x + d
            if self.watched is not None:
                self.watched(self, dict(x=x, h=h, topv=topv, topi=topi, scale=scale, u=u, a=a, d=d))
            if self.keep is not None:
                for n, t in (("norm.out", h), ("router.out.0", topv), ("router.out.1", topi), ("up.out", u),
                             ("act.out", a), ("model.out", y)):
                    self.keep.append((n, raw(t)))
            return y

    m = Block()
    opt = torch.optim.SGD(m.parameters(), lr=LR)

    def step(x, keep=True):
        y = m(x)
        loss = y.float().pow(2).mean()
        loss.backward()
        grads = [(n + ".grad", raw(p.grad)) for n, p in m.named_parameters()] if keep else []
        opt.step()
        opt.zero_grad(set_to_none=True)
        return y, loss, grads

    def to_input(a):  # a leaf that requires grad: its gradient sums the norm and residual paths
        return torch.from_numpy(a.copy()).to(dt).requires_grad_(True)
    return m, step, to_input


def build_paddle(w, dtype="fp32"):
    import paddle
    import paddle.nn.functional as Fn
    paddle.set_device("cpu")
    dt = {"fp32": "float32", "bf16": "bfloat16"}[dtype]

    def param(layer, key, dtype_=dt):
        a = w[key]
        p = layer.create_parameter(shape=list(a.shape), dtype="float32")
        p.set_value(a)
        if dtype_ != "float32":
            p = layer.create_parameter(shape=list(a.shape), dtype=dtype_)
            p.set_value(paddle.to_tensor(a).astype(dtype_))
        return p

    def f32(t):
        return t if t.dtype == paddle.float32 else t.astype("float32")

    class RMSNorm(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = param(self, "norm.weight")

        def forward(self, x):
            xf = f32(x)
            var = xf.pow(2).mean(-1, keepdim=True)
            if dt == "float32":
                return (xf * paddle.rsqrt(var + EPS)) * self.weight
            return ((xf * paddle.rsqrt(var + EPS)).astype(dt).astype("float32") * f32(self.weight)).astype(dt)

    class Router(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.weight = param(self, "router.weight", "float32")

        def forward(self, h):
            logits = paddle.matmul(f32(h), self.weight, transpose_y=True)
            probs = Fn.softmax(logits, axis=-1)
            return paddle.topk(probs, K, axis=-1)

    class SwiGLU(paddle.nn.Layer):
        def forward(self, u, scale):
            g, l = paddle.chunk(f32(u), 2, axis=-1)
            return (Fn.silu(g) * l * f32(scale)).astype(dt)

    class Linear(paddle.nn.Layer):
        def __init__(self, key):
            super().__init__()
            self.weight = param(self, key)

        def forward(self, x):
            if dt == "float32":
                return paddle.matmul(x, self.weight, transpose_y=True)
            return paddle.matmul(f32(x), f32(self.weight), transpose_y=True).astype(dt)

    class Block(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.router, self.up = RMSNorm(), Router(), Linear("up.weight")
            self.act, self.down = SwiGLU(), Linear("down.weight")
            self.keep = None
            self.watched = None  # watched(block, tensors): the forward's tensors by name (op_records.py)

        def forward(self, x):
            h = self.norm(x)
            topv, topi = self.router(h)
            scale = topv.sum(-1, keepdim=True).astype(dt)
            u = self.up(h)
            a = self.act(u, scale)
            d = self.down(a)
            y = x + d if dt == "float32" else (f32(x) + f32(d)).astype(dt)
            if self.watched is not None:
                self.watched(self, dict(x=x, h=h, topv=topv, topi=topi, scale=scale, u=u, a=a, d=d))
            if self.keep is not None:
                for n, t in (("norm.out", h), ("router.out.0", topv), ("router.out.1", topi), ("up.out", u),
                             ("act.out", a), ("model.out", y)):
                    self.keep.append((n, raw(t)))
            return y

    m = Block()
    opt = paddle.optimizer.SGD(learning_rate=LR, parameters=m.parameters())

    def step(x, keep=True):
        y = m(x)
        loss = f32(y).pow(2).mean()
        loss.backward()
        grads = [(n + ".grad", raw(p.grad)) for n, p in m.named_parameters()] if keep else []
        opt.step()
        opt.clear_grad(set_to_zero=False)
        return y, loss, grads

    def to_input(a):  # a leaf that requires grad: its gradient sums the norm and residual paths
        t = paddle.to_tensor(a.copy())
        t = t if dt == "float32" else t.astype(dt)
        t.stop_gradient = False
        return t
    return m, step, to_input


def train(framework, w, steps, probe=None, keep=False, dtype="fp32", around=None, watched=None):
    """Trains `steps` SGD steps; returns [(step, name, bytes)] in execution order: the forward
    intermediates (keep), model.out, loss, each parameter's .grad, the updated parameters.
    around(model) -> (start, stop): called before and after each step (another tool's switches).
    watched: called as watched(block, tensors) after each forward (op_records.OpRecorder), with
    watched.step(s) around the step (a context manager)."""
    m, step, to_input = (build_torch if framework == "torch" else build_paddle)(w, dtype)
    m.watched = watched
    start, stop = around(m) if around else (None, None)
    if probe is not None:
        probe.watch(m)
        probe.params(m)
    out = []
    for s in range(1, steps + 1):
        x = to_input(w["input.%d" % s])
        m.keep = [] if keep else None
        if probe is not None:
            with probe.step(s):
                y, loss, grads = step(x)
                probe.record("loss", loss)
            probe.params(m)
        elif watched is not None:
            with watched.step(s):
                y, loss, grads = step(x)
        elif start:
            start()
            y, loss, grads = step(x)
            stop()
        else:
            y, loss, grads = step(x)
        if keep:
            out += [(s, n, b) for n, b in [("norm.in", raw(x))] + m.keep]
        out += [(s, "model.out", raw(y)), (s, "loss", raw(loss))]
        out += [(s, n, b) for n, b in grads] + [(s, "input.grad", raw(x.grad))]
        out += [(s, n, raw(p)) for n, p in m.named_parameters()]
    if probe is not None:
        probe.close()
    if watched is not None:
        watched.close()
    return out
