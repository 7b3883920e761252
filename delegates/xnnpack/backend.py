"""XnnpackBackend: runs ExecuTorch's XNNPACK delegate blobs on a real XNNPACK via ctypes.

``init`` parses the blob, defines the subgraph and creates the runtime (weights
are packed once, here). ``execute`` follows ExecuTorch's XNNExecutor: reshape
the external inputs from the argument tensors' sizes (channels-last tensors as
NHWC), re-plan, resize the output tensors, point the external values straight
at the tensors' bytes and invoke. Shapes and pointers that did not change since
the last call skip the reshape and setup calls.

Inputs are read in place when their buffer has ``XNN_EXTRA_BYTES`` of slack
after the data (planned arenas do); otherwise they are copied into a padded
staging buffer, because XNNPACK may read up to 16 bytes past an input.

On the fast tier a DelegateCall does not come here: ``bind_fast`` gives the loop
a compiled entry doing the same steps without Python (``delegates.xnnpack.fast``;
``PYRUNTIME_XNNPACK_COMPILED=0`` keeps every call on this Python path).
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.delegates.availability import LibraryBackend
from pyruntime.delegates.bridge_checks import reading_payload
from pyruntime.delegates.xnnpack import library
from pyruntime.delegates.xnnpack.blob import BACKEND, parse_blob
from pyruntime.delegates.xnnpack.ctypes_api import STATUS, XNN_EXTRA_BYTES, XNN_MAX_TENSOR_DIMS, \
    ExternalValue
from pyruntime.delegates.xnnpack.graph import build_subgraph
from pyruntime.delegates.xnnpack.schema import ET_DATATYPES

_CHANNELS_LAST = (0, 2, 3, 1)
# ExecuTorch datatype code of an external value -> ScalarTypes its tensor may have
# (Byte 0, Char 1, Int 3, Half 5, Float 6, QInt8 12, QUInt8 13, QInt32 14, BFloat16 15)
_SCALAR_TYPES = {1: {6}, 2: {5}, 14: {15}, 3: {1, 12}, 6: {1, 12}, 9: {1, 12}, 4: {0, 13},
                 5: {3, 14}, 7: {3, 14}, 12: {3, 14}}
_LONG = 4


def _default_threads() -> int:
    env = os.environ.get("PYRUNTIME_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _buffer_end(a: np.ndarray) -> int:
    """Address one past the end of the allocation ``a`` views (its outermost ndarray)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root.ctypes.data + root.nbytes


class _Ext:
    """Per-handle state of one external value (``args[ext_id]``)."""

    __slots__ = ("ext_id", "slot", "elsize", "datatype", "static_dims", "dims", "shape",
                 "storage", "ptr",
                 "base", "end", "staging", "widen", "tensor")

    def __init__(self, e, slot):
        self.ext_id, self.slot, self.elsize, self.datatype = e.ext_id, slot, e.elsize, e.datatype
        self.static_dims = e.dims
        self.dims = None  # XNNPACK dims last reshaped to (inputs)
        self.shape = e.dims  # ExecuTorch-order output shape of the current plan (outputs)
        self.storage = None  # last storage array seen, with its address and end
        self.ptr = 0
        self.end = 0
        self.base = 0  # address of the storage's first byte
        self.staging = None
        self.widen = False  # int32 written by XNNPACK into an int64 output
        self.tensor = None  # the argument last checked against the value's datatype


class XnnpackHandle:
    """One initialized delegate: an XNNPACK runtime and its external-value table."""

    def __init__(self, lib, runtime, workspace, sub, threads):
        self.lib, self.api = lib, lib.api
        self.runtime, self.workspace = runtime, workspace
        self.keep = sub.keep
        self.threads = threads
        self.inputs = [_Ext(e, i) for i, e in enumerate(sub.inputs)]
        self.outputs = [_Ext(e, len(sub.inputs) + i) for i, e in enumerate(sub.outputs)]
        self.n_ext = len(self.inputs) + len(self.outputs)
        self.ext = (ExternalValue * max(self.n_ext, 1))()
        for e in self.inputs + self.outputs:
            self.ext[e.slot].id = e.ext_id
        self.n_args = max([e.ext_id for e in self.inputs + self.outputs], default=-1) + 1
        self.dynamic = lib.level == "dynamic"
        self.fresh = True  # nothing reshaped or set up yet
        self.ndim = ctypes.c_size_t()
        self.dims = (ctypes.c_size_t * XNN_MAX_TENSOR_DIMS)()
        # shared with compiled entries (delegates.xnnpack.fast): [owner, runtime address, ...];
        # owner 0 = the Python path set the runtime up last, k > 0 = compiled entry k
        self.state = np.zeros(4, np.int64)
        self.state[1] = runtime.value or 0
        self.tokens = 0
        self.kernels = []  # state arrays of the compiled entries bound to this handle
        # the parsed graph, for math="fast" entries that run it on our kernels (qb4w)
        self.blob, self.named_data, self.qb4w = None, None, None

    def close(self) -> None:
        """Delete the runtime and release the workspace (idempotent)."""
        rt, self.runtime = self.runtime, None
        self.state[1] = 0  # compiled entries now fail with DelegateInvalidHandle
        if rt is not None:
            self.api.xnn_delete_runtime(rt)
            if self.workspace.value and self.api.xnn_release_workspace is not None:
                self.api.xnn_release_workspace(self.workspace)
        self.keep = []
        self.blob, self.named_data, self.qb4w = None, None, None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer (interpreter exit)
            pass

    def reset(self) -> None:
        self.fresh = True
        for e in self.inputs + self.outputs:
            e.dims, e.storage, e.tensor, e.ptr = None, None, None, 0


def _fail(st, what, code=ErrorCode.Internal):
    return ExecuTorchError(code, f"{BACKEND}: {what} failed with xnn_status {STATUS.get(st, st)}")


class XnnpackBackend(LibraryBackend):
    """The ``XnnpackBackend`` bridge (see the module docstring).

    ``threads`` (default: ``$PYRUNTIME_THREADS`` or the CPUs this process may use)
    applies to methods loaded after it is set; ``init(..., runtime_options={"threads":
    n})`` overrides it for one delegate (how a Method passes its ``threads=``).

    >>> from pyruntime.delegates import backend_registry
    >>> b = backend_registry.get("XnnpackBackend")   # NotFound if no library is installed
    >>> # b.library.describe(); b.set_option("threads", 4)
    """

    id = BACKEND
    install_hint = library.INSTALL_HINT
    library_module = library

    def __init__(self):
        self.threads = _default_threads()

    def set_option(self, key: str, value) -> None:
        if key not in ("threads", "num_threads"):
            raise ExecuTorchError(ErrorCode.InvalidArgument, f"{BACKEND}: unknown option {key!r}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: threads must be a positive int, got {value!r}")
        self.threads = value

    def get_option(self, key: str):
        if key in ("threads", "num_threads"):
            return self.threads
        raise ExecuTorchError(ErrorCode.InvalidArgument, f"{BACKEND}: unknown option {key!r}")

    # ---- init ------------------------------------------------------------------
    def init(self, processed, compile_specs, named_data, runtime_options=None):
        threads = (runtime_options or {}).get("threads", self.threads)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: threads must be a positive int, got {threads!r}")
        lib = self.require_library()
        with reading_payload(f"{BACKEND} blob"):
            xb = parse_blob(processed)
        sub = build_subgraph(lib, xb, named_data)
        api = lib.api
        runtime, workspace = ctypes.c_void_p(), ctypes.c_void_p()
        pool = lib.threadpool(threads)
        try:
            if api.has("xnn_create_runtime_v4", "xnn_create_workspace"):
                st = api.xnn_create_workspace(ctypes.byref(workspace))
                if st != 0:
                    raise _fail(st, "xnn_create_workspace")
                st = api.xnn_create_runtime_v4(sub.handle, None, workspace, pool, 0,
                                               ctypes.byref(runtime))
            elif api.xnn_create_runtime_v3 is not None:
                st = api.xnn_create_runtime_v3(sub.handle, None, pool, 0, ctypes.byref(runtime))
            else:
                st = api.xnn_create_runtime_v2(sub.handle, pool, 0, ctypes.byref(runtime))
            if st != 0:
                if workspace.value and api.xnn_release_workspace is not None:
                    api.xnn_release_workspace(workspace)
                raise _fail(st, "creating the XNNPACK runtime",
                            ErrorCode.MemoryAllocationFailed if st == 6 else ErrorCode.Internal)
        finally:
            api.xnn_delete_subgraph(sub.handle)  # the runtime does not need it
        h = XnnpackHandle(lib, runtime, workspace, sub, threads)
        h.blob, h.named_data = xb, named_data
        return h

    # ---- execute ---------------------------------------------------------------
    def execute(self, h: XnnpackHandle, args) -> None:
        if h.runtime is None:
            raise ExecuTorchError(ErrorCode.DelegateInvalidHandle, f"{BACKEND}: handle destroyed")
        if len(args) < h.n_args:
            raise ExecuTorchError(ErrorCode.InvalidArgument,
                                  f"{BACKEND}: {len(args)} arguments, the graph uses {h.n_args}")
        try:
            self._execute(h, args)
        except BaseException:
            h.reset()  # the runtime may be half re-planned: redo everything next time
            raise

    def _execute(self, h: XnnpackHandle, args) -> None:
        api, rt = h.api, h.runtime
        if h.state[0] != 0:  # a compiled entry set the runtime up since our last call
            h.reset()
            h.state[0] = 0
        reshape = setup = h.fresh
        for e in h.inputs:
            t = args[e.ext_id]
            if not isinstance(t, ETensor):
                raise _not_tensor(e, t)
            if t is not e.tensor:
                _check_elsize(e, t, "input")
            dims = t.sizes
            if len(dims) == 4 and t.dim_order == _CHANNELS_LAST:
                dims = (dims[0], dims[2], dims[3], dims[1])
            if dims != e.dims:
                if h.dynamic:
                    cdims = (ctypes.c_size_t * max(len(dims), 1))(*dims)
                    st = api.xnn_reshape_external_value(rt, e.ext_id, len(dims), cdims)
                    if st != 0:
                        raise _fail(st, f"reshaping input {e.ext_id} to {list(dims)}",
                                    ErrorCode.InvalidArgument)
                elif dims != e.static_dims:
                    raise ExecuTorchError(
                        ErrorCode.NotSupported,
                        f"{BACKEND}: input {e.ext_id} has shape {list(dims)}, the graph was "
                        f"built for {list(e.static_dims)} and the XNNPACK library "
                        f"({h.lib.source}) has no reshape API")
                e.dims = dims
                reshape = True
            if _bind_input(e, t, dims):
                h.ext[e.slot].data = e.ptr
                setup = True
        if reshape and h.dynamic:
            st = api.xnn_reshape_runtime(rt)
            if st != 0:
                raise _fail(st, "xnn_reshape_runtime", ErrorCode.InvalidArgument)
            setup = True  # a re-planned runtime must be set up again
            for e in h.outputs:
                st = api.xnn_get_external_value_shape(rt, e.ext_id, ctypes.byref(h.ndim), h.dims)
                if st != 0 or h.ndim.value > XNN_MAX_TENSOR_DIMS:
                    raise _fail(st, f"reading the shape of output {e.ext_id}")
                e.shape = tuple(h.dims[:h.ndim.value])
        for e in h.outputs:
            t = args[e.ext_id]
            if not isinstance(t, ETensor):
                raise _not_tensor(e, t)
            shape = e.shape
            if len(shape) == 4 and t.dim_order == _CHANNELS_LAST:
                shape = (shape[0], shape[3], shape[1], shape[2])
            if t is not e.tensor:
                _check_elsize(e, t, "output")
                e.storage = None
            if t.sizes != shape or e.storage is None:
                t.resize(shape)
                e.storage = None  # re-check the capacity below
            if _bind_output(e, t):
                h.ext[e.slot].data = e.ptr
                setup = True
        if setup:
            fn = api.xnn_setup_runtime_v2 if h.dynamic else api.xnn_setup_runtime
            st = fn(rt, h.n_ext, h.ext)
            if st != 0:
                raise _fail(st, "setting up the XNNPACK runtime")
        h.fresh = False
        st = api.xnn_invoke_runtime(rt)
        if st != 0:
            raise _fail(st, "xnn_invoke_runtime")
        for e in h.outputs:
            if e.widen:
                t = args[e.ext_id]
                n = t.numel
                narrow = np.frombuffer(t.storage, np.int32, n).copy()
                np.frombuffer(t.storage, np.int64, n)[:] = narrow

    def bind_fast(self, h: XnnpackHandle, ctx, args):
        """A compiled entry for a DelegateCall on the fast tier: ``(fn, block, explain)``
        with ``explain(status) -> message``, or None (see ``delegates.xnnpack.fast``)."""
        if os.environ.get("PYRUNTIME_XNNPACK_COMPILED", "1") == "0":
            return None
        if ctx.math == "fast" and h.runtime is not None:
            # an 8da4w linear graph on our own int4 kernels (delegates.xnnpack.qb4w); while
            # a background compile makes the kernel, KernelNotReady reaches the plan, which
            # binds the call once the kernel is there
            from pyruntime.delegates.xnnpack import qb4w
            try:
                r = qb4w.bind(h, ctx, args)
            except Exception:  # noqa: BLE001 - values it does not model: XNNPACK runs it
                r = None  # (KernelNotReady is a BaseException: it passes)
            if r is not None:
                return r
        try:
            from pyruntime.delegates.xnnpack import fast
            return fast.bind(h, ctx, args, _check_elsize)
        except Exception:  # noqa: BLE001 - odd values: the Python path runs and reports them
            return None

    def destroy(self, h: XnnpackHandle) -> None:
        if h is not None:
            h.close()


# ---- binding helpers ----------------------------------------------------------------
def _not_tensor(e, t):
    return ExecuTorchError(ErrorCode.InvalidArgument,
                           f"{BACKEND}: argument {e.ext_id} must be a tensor, got "
                           f"{type(t).__name__}")


def _check_elsize(e: _Ext, t: ETensor, what: str) -> None:
    allowed = _SCALAR_TYPES.get(e.datatype)
    st = t.scalar_type
    # argmax indices: XNNPACK writes int32, ExecuTorch's tensor is int64 (widened after)
    e.widen = what == "output" and st == _LONG and e.datatype in (5, 12)
    ok = e.widen or (st in allowed if allowed is not None else t.dtype.itemsize == e.elsize)
    if not ok:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"{BACKEND}: {what} {e.ext_id} is {t.describe()}, the graph "
                              f"expects {ET_DATATYPES.get(e.datatype, e.datatype)} data")
    e.tensor = t


def _bind_input(e: _Ext, t: ETensor, dims) -> bool:
    """Point external input ``e`` at ``t``'s bytes (or a padded copy); True if it moved."""
    st = t.storage
    if st is None:
        raise ExecuTorchError(ErrorCode.InvalidState, f"{BACKEND}: input {e.ext_id} has no data")
    if st is not e.storage:
        e.storage, e.base, e.end = st, st.ctypes.data, _buffer_end(st)
    base = e.base
    n = t.numel * e.elsize
    if n > st.nbytes:
        raise ExecuTorchError(ErrorCode.InvalidState,
                              f"{BACKEND}: input {e.ext_id} {t.describe()} needs {n} bytes, its "
                              f"storage has {st.nbytes}")
    if base + n + XNN_EXTRA_BYTES <= e.end:
        ptr = base
    else:  # no slack after the data: XNNPACK's over-read must land in our staging buffer
        if e.staging is None or e.staging.nbytes < n + XNN_EXTRA_BYTES:
            e.staging = np.zeros(n + XNN_EXTRA_BYTES + 64, np.uint8)
        e.staging[:n] = st[:n]
        ptr = e.staging.ctypes.data
    if ptr != e.ptr:
        e.ptr = ptr
        return True
    return False


def _bind_output(e: _Ext, t: ETensor) -> bool:
    st = t.storage
    if st is not e.storage:
        if st is None:
            raise ExecuTorchError(ErrorCode.InvalidState,
                                  f"{BACKEND}: output {e.ext_id} has no storage")
        if not st.flags.writeable:
            raise ExecuTorchError(ErrorCode.InvalidState,
                                  f"{BACKEND}: output {e.ext_id} is bound to read-only memory")
        need = t.numel * t.dtype.itemsize
        if need > st.nbytes:
            raise ExecuTorchError(ErrorCode.InvalidState,
                                  f"{BACKEND}: output {e.ext_id} {t.describe()} needs {need} "
                                  f"bytes, its storage has {st.nbytes}")
        e.storage = st
        ptr = st.ctypes.data
        if ptr != e.ptr:
            e.ptr = ptr
            return True
    return False
