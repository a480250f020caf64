"""The xxh3t64 digest (README: "The align trace (ATF v1)") of tensor memory, through align's native code.

Host memory: libalign_probe_digest.so (harness/probe/native/probe_digest.c over harness/core/digest.c,
the code `align ingest` checks payloads with), any strides, no copy. Device memory:
libalign_probe_cuda.so (kernels/cuda/digest.cu), a device pointer and the framework's current stream,
no host copy; deferred (DeviceBatch, harness/probe/native/probe_cuda.cu): the leaf kernel is enqueued
per tensor, the leaves come back once per flush, the roots are finished by the host library. There is no Python copy of the algorithm: without the library the probe refuses to start
and says how to build it (no silent fallback).

Where the libraries are looked for, in order: the `native` argument (a folder), the ALIGNPROBE_LIB_DIR
variable (not ALIGN_*: align refuses unknown ALIGN_* variables), the package's own native/ folder,
then the system's library path (meson installs both to libdir).
"""
import ctypes
import ctypes.util
import os

_HOST = "align_probe_digest"
_ARGDIMS = 16  # DeviceBatch's reused shape/stride argument arrays (more dimensions: a fresh array)
_CUDA = "align_probe_cuda"
_LEAF = 65536  # bytes a leaf digest covers (harness/core/digest.h)


class DigestUnavailable(RuntimeError):
    pass


def _candidates(stem, native):
    dirs = []
    if native:
        dirs.append(native)
    if os.environ.get("ALIGNPROBE_LIB_DIR"):
        dirs.append(os.environ["ALIGNPROBE_LIB_DIR"])
    dirs.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "native"))
    out = [os.path.join(d, "lib%s.so" % stem) for d in dirs]
    found = ctypes.util.find_library(stem)
    if found:
        out.append(found)
    return out


def _load(stem, native):
    tried = []
    for path in _candidates(stem, native):
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    return None, tried


class Digester:
    """Computes xxh3t64 of host (strided) and device (contiguous) memory. `impl` says which ran."""

    def __init__(self, native=None):
        lib, where = _load(_HOST, native)
        if lib is None:
            raise DigestUnavailable(
                "align_probe: no lib%s.so (tried %s); build it with `meson setup build && ninja -C build` "
                "and pass native='build/harness/probe' or set ALIGNPROBE_LIB_DIR" % (_HOST, ", ".join(where)))
        self.host_path = where
        self._host = lib
        lib.align_probe_digest_strided.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                   ctypes.POINTER(ctypes.c_int64),
                                                   ctypes.POINTER(ctypes.c_int64),
                                                   ctypes.POINTER(ctypes.c_uint64)]
        lib.align_probe_digest_strided.restype = ctypes.c_int
        lib.align_probe_digest_contiguous.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                                      ctypes.POINTER(ctypes.c_uint64)]
        lib.align_probe_digest_contiguous.restype = ctypes.c_int
        lib.align_probe_digest_roots.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                                                 ctypes.c_void_p]
        lib.align_probe_digest_roots.restype = ctypes.c_int
        self._native = native
        self._cuda = None
        self.cuda_path = None

    def host(self, ptr, elem_size, shape, strides):
        """Digest of the tensor at host address ptr; strides in elements (None: contiguous)."""
        n = len(shape)
        shp = (ctypes.c_int64 * max(n, 1))(*shape)
        std = (ctypes.c_int64 * max(n, 1))(*strides) if strides is not None else None
        out = ctypes.c_uint64()
        rc = self._host.align_probe_digest_strided(ctypes.c_void_p(ptr), elem_size, n, shp, std,
                                                   ctypes.byref(out))
        if rc:
            raise ValueError("align_probe: digest of a host tensor failed (shape %s, strides %s)"
                             % (list(shape), strides))
        return "%016x" % out.value

    def host_bytes(self, data):
        """Digest of a bytes-like object (tests: the library against align's own)."""
        buf = (ctypes.c_char * len(data)).from_buffer_copy(data) if len(data) else None
        out = ctypes.c_uint64()
        if self._host.align_probe_digest_contiguous(buf, len(data), ctypes.byref(out)):
            raise ValueError("align_probe: digest failed")
        return "%016x" % out.value

    def _cuda_lib(self):
        if self._cuda is None:
            lib, where = _load(_CUDA, self._native)
            if lib is None:
                raise DigestUnavailable(
                    "align_probe: a CUDA tensor, but no lib%s.so (tried %s); build with -Dcuda=enabled"
                    % (_CUDA, ", ".join(where)))
            lib.align_digest_cuda.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                              ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p]
            lib.align_digest_cuda.restype = ctypes.c_int
            lib.align_probe_cuda_open.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
            lib.align_probe_cuda_open.restype = ctypes.c_int
            lib.align_probe_cuda_close.argtypes = [ctypes.c_void_p]
            lib.align_probe_cuda_close.restype = None
            lib.align_probe_cuda_enqueue.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                     ctypes.POINTER(ctypes.c_int64),
                                                     ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
            lib.align_probe_cuda_enqueue.restype = ctypes.c_int
            lib.align_probe_cuda_enqueue_bytes.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                                           ctypes.c_void_p]
            lib.align_probe_cuda_enqueue_bytes.restype = ctypes.c_int
            lib.align_probe_cuda_side_stream.argtypes = [ctypes.c_void_p, ctypes.c_int]
            lib.align_probe_cuda_side_stream.restype = ctypes.c_int
            lib.align_probe_cuda_done.argtypes = [ctypes.c_void_p]
            lib.align_probe_cuda_done.restype = ctypes.c_size_t
            lib.align_probe_cuda_pending_leaves.argtypes = [ctypes.c_void_p]
            lib.align_probe_cuda_pending_leaves.restype = ctypes.c_size_t
            lib.align_probe_cuda_flush.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            lib.align_probe_cuda_flush.restype = ctypes.c_int
            self._cuda, self.cuda_path = lib, where
        return self._cuda

    def device(self, ptr, nbytes, stream):
        """Digest of nbytes contiguous bytes at a device address, enqueued on `stream` (a cudaStream_t
        as an integer) and waited for there; nothing is copied to the host but the 8-byte digest."""
        out = ctypes.c_uint64()
        rc = self._cuda_lib().align_digest_cuda(ctypes.c_void_p(ptr), nbytes, ctypes.byref(out),
                                                ctypes.c_void_p(stream))
        if rc:
            raise RuntimeError("align_probe: align_digest_cuda failed (%d)" % rc)
        return "%016x" % out.value

    def roots(self, leaves, sizes):
        """xxh3t64 of each tensor from its leaf digests (concatenated in `leaves`, a ctypes uint64
        array) and its byte count (harness/core/digest.c's root)."""
        n = len(sizes)
        b = (ctypes.c_uint64 * max(n, 1))(*sizes)
        out = (ctypes.c_uint64 * max(n, 1))()
        if self._host.align_probe_digest_roots(leaves, n, b, out):
            raise ValueError("align_probe: align_probe_digest_roots failed")
        return ["%016x" % out[i] for i in range(n)]

    def batch(self, side_stream=False, version=None):
        """A DeviceBatch: deferred device digests (one per device, on the device current now); side_stream:
        the kernels run on a stream of the library, after an event on the framework's (probe_cuda.cu), and
        version (a function of the tensor: its version counter) finds the tensors written in place before
        their digest was known to have run."""
        return DeviceBatch(self, side_stream, version)


class DeviceBatch:
    """Deferred digests of device tensors: add() enqueues the leaf kernel on the given stream (or, with
    side_stream, on the library's stream after an event on the given one) and returns at once; finish() waits once, copies the leaves back and returns every digest in add order.
    The caller's `keep` object (the tensor) is held until its kernels ran (checked at each add and at
    finish), so the framework cannot reuse its memory before the probe read it."""

    def __init__(self, digester, side_stream=False, version=None):
        self._dg = digester
        self._lib = digester._cuda_lib()
        self._ctx = ctypes.c_void_p()
        rc = self._lib.align_probe_cuda_open(ctypes.byref(self._ctx))
        if rc:
            self._ctx = None
            raise RuntimeError("align_probe: align_probe_cuda_open failed (%d)" % rc)
        if side_stream:
            rc = self._lib.align_probe_cuda_side_stream(self._ctx, 1)
            if rc:
                self.close()
                raise RuntimeError("align_probe: align_probe_cuda_side_stream failed (%d)" % rc)
        self._sizes = []
        self._keep = []
        self._released = 0
        # side stream: the framework's stream does not wait for a digest, so a later in-place write of the
        # tensor (on that stream) may run before the digest read it. The tensor's version counter at add()
        # is compared once its digest is known to have run: moved means such a write was enqueued before
        # then, and the digest is given as None (unknown) instead
        self._version = version if side_stream else None
        self._vers = []
        self._stale = set()
        # shape / strides arguments reused from call to call (the library copies them at enqueue)
        self._shp = (ctypes.c_int64 * _ARGDIMS)()
        self._std = (ctypes.c_int64 * _ARGDIMS)()
        self._enqueue = self._lib.align_probe_cuda_enqueue
        self._done = self._lib.align_probe_cuda_done

    def add(self, ptr, elem_size, shape, strides, nbytes, stream, keep):
        """Enqueue one tensor (strides in elements, None: row-major). False when the library cannot
        (more than 16 dimensions that do not merge): the caller digests a row-major copy instead."""
        if strides is None:  # row-major: only the element count matters to the library (one dimension)
            n = 1
            shp = self._shp
            shp[0] = nbytes // elem_size
            std = None
        else:
            n = len(shape)
            if n <= _ARGDIMS:
                shp = self._shp
                shp[:n] = shape
                std = self._std
                std[:n] = strides
            else:
                shp = (ctypes.c_int64 * n)(*shape)
                std = (ctypes.c_int64 * n)(*strides)
        rc = self._enqueue(self._ctx, ptr, elem_size, n, shp, std, stream)
        if rc == 4:  # PROBE_EDIMS of probe_cuda.cu
            return False
        if rc:
            raise RuntimeError("align_probe: align_probe_cuda_enqueue failed (%d)" % rc)
        self._sizes.append(nbytes)
        self._keep.append(keep)
        if self._version is not None:
            self._vers.append(self._version(keep))
        # drop the tensors whose kernels ran (an event query): at every add on the side stream, where the
        # sooner a digest is known to have run the fewer in-place writes after it count against it (_release);
        # else at every 8th (a reference held a few records longer costs nothing)
        if self._version is not None or len(self._keep) & 7 == 0:
            done = self._done(self._ctx)
            if done > self._released:
                self._release(done)
        return True

    def add_bytes(self, ptr, nbytes, stream, keep):
        """Enqueue a copy of the nbytes (1..16) at device address ptr (a one-element tensor's bits) on
        `stream`, without waiting; finish() returns them (bytes) in its place."""
        rc = self._lib.align_probe_cuda_enqueue_bytes(self._ctx, ptr, nbytes, stream)
        if rc:
            raise RuntimeError("align_probe: align_probe_cuda_enqueue_bytes failed (%d)" % rc)
        self._sizes.append(-nbytes)  # negative: raw bytes in two leaf slots, not a digest
        self._keep.append(keep)
        if self._version is not None:
            self._vers.append(self._version(keep))
        done = self._done(self._ctx)
        if done > self._released:
            self._release(done)

    def _release(self, done):
        keep = self._keep
        for i in range(self._released, done):
            if self._version is not None and self._vers[i] is not None and self._version(keep[i]) != self._vers[i]:
                self._stale.add(i)
            keep[i] = None
        self._released = max(self._released, done)

    def __len__(self):
        return len(self._sizes)

    def finish(self):
        """Wait for the enqueued kernels (once), and return the digests (hex strings) and raw bytes (bytes,
        from add_bytes) in add order; None for a tensor written in place before its side-stream digest was
        known to have run."""
        if not self._sizes:
            return []
        n = self._lib.align_probe_cuda_pending_leaves(self._ctx)
        leaves = (ctypes.c_uint64 * max(n, 1))()
        rc = self._lib.align_probe_cuda_flush(self._ctx, leaves, n)
        if rc:
            raise RuntimeError("align_probe: align_probe_cuda_flush failed (%d)" % rc)
        self._release(len(self._sizes))  # every kernel ran: the version check of the rest
        out, run, at = [], [], 0  # run: digest sizes since the last raw-bytes entry, starting at leaf `at`
        for size in self._sizes + [None]:
            if size is None or size < 0:
                if run:
                    out += self._dg.roots(ctypes.cast(ctypes.byref(leaves, 8 * at), ctypes.POINTER(ctypes.c_uint64)),
                                          run)
                    at += sum((s + _LEAF - 1) // _LEAF for s in run)
                    run = []
                if size is not None:
                    out.append(ctypes.string_at(ctypes.byref(leaves, 8 * at), -size))
                    at += 2
            else:
                run.append(size)
        for i in self._stale:
            out[i] = None
        self._sizes, self._keep, self._released, self._vers, self._stale = [], [], 0, [], set()
        return out

    def close(self):
        if self._ctx:
            self._lib.align_probe_cuda_close(self._ctx)
            self._ctx = None
