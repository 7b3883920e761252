"""QNN context binaries: what ``QnnSystemContext_getBinaryInfo`` says is in them (graphs,
their input and output tensors with data types, shapes and quantization), and the
contexts created from them, shared by every delegate that carries the same binary.

ExecuTorch's runtime keeps one context per payload signature (its multi-method
programs repeat one context binary, holding one graph per method, in every
method's delegate); so does this module, keyed by the signature and the bytes'
hash, and freed when the last delegate using it is destroyed. Executions on one
context are serialized: the simulator's graphs are not reentrant.
"""
from __future__ import annotations

import ctypes
import hashlib
import re
import threading
from dataclasses import dataclass

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.qnn import ctypes_api as api
from pyruntime.delegates.qnn.library import QnnLibrary, guarded
from pyruntime.delegates.qnn.payload import BACKEND, payload_error

_MAX_GRAPHS, _MAX_TENSORS, _MAX_RANK, _MAX_CHANNELS = 4096, 65536, 16, 1 << 24


@dataclass(frozen=True)
class Quant:
    """Scale/offset quantization: ``float = (q + offset) * scale`` (QNN's offset is the
    negated zero point). Per-tensor: one entry; per-axis: one per channel of ``axis``."""

    encoding: int
    scale: np.ndarray  # float32
    offset: np.ndarray  # int32
    axis: int | None = None
    bitwidth: int | None = None

    @property
    def zero_point(self) -> np.ndarray:
        return -self.offset

    def describe(self) -> str:
        if self.axis is None:
            return f"scale {float(self.scale[0]):.6g} offset {int(self.offset[0])}"
        return f"per-axis {self.axis} ({len(self.scale)} scales)"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    id: int
    version: int
    type: int
    data_format: int
    data_type: int
    dims: tuple
    dynamic: tuple | None  # per-dimension dynamic flags (V2 tensors), None if all static
    quant: Quant | None
    sparse: tuple = (0, 0, 0)

    @property
    def dtype_name(self) -> str:
        return api.DATATYPES[self.data_type][0]

    @property
    def elsize(self) -> int:
        return api.DATATYPES[self.data_type][1]

    @property
    def numel(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * self.elsize

    def describe(self) -> str:
        q = f", {self.quant.describe()}" if self.quant else ""
        return f"{self.name!r} {self.dtype_name}{list(self.dims)}{q}"


@dataclass(frozen=True)
class GraphInfo:
    name: str
    inputs: tuple
    outputs: tuple


@dataclass(frozen=True)
class BinaryInfo:
    version: int
    backend_id: int
    build_id: str
    core_api: str
    backend_api: str
    soc_version: str
    graphs: dict  # name -> GraphInfo, in the binary's order


# ---- reading the binary info -------------------------------------------------------------
def _str(p) -> str:
    if isinstance(p, bytes):
        return p.decode("utf-8", "replace")
    if not p:
        return ""
    return ctypes.string_at(p).decode("utf-8", "replace")


def _tensor(t: api.Tensor, where: str) -> TensorInfo:
    if t.version not in (1, 2):
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: {where}: tensor struct version {t.version} "
                              "(this bridge reads versions 1 and 2)")
    v = t.v1 if t.version == 1 else t.v2
    if not v.name:
        raise payload_error(f"{where}: tensor without a name")
    name = _str(v.name)
    if v.data_type not in api.DATATYPES:
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: {where}: tensor {name!r} has QNN data type "
                              f"0x{v.data_type:04x}, which the bridge does not bind")
    if v.rank > _MAX_RANK or (v.rank and not v.dims):
        raise payload_error(f"{where}: tensor {name!r} has rank {v.rank} and dims "
                            f"{'set' if v.dims else 'missing'}")
    dims = tuple(int(v.dims[i]) for i in range(v.rank))
    dynamic = None
    if t.version == 2 and v.is_dynamic_dims and v.rank:
        flags = tuple(bool(v.is_dynamic_dims[i]) for i in range(v.rank))
        dynamic = flags if any(flags) else None
    sparse = (t.v2.sparse.type, t.v2.sparse.num_specified, t.v2.sparse.num_sparse_dims) \
        if t.version == 2 else (0, 0, 0)
    return TensorInfo(name, int(v.id), int(t.version), int(v.type), int(v.data_format),
                      int(v.data_type), dims, dynamic, _quant(v.quant, name, where), sparse)


def _quant(q: api.QuantizeParams, name: str, where: str) -> Quant | None:
    if q.encoding == api.ENC_UNDEFINED or q.definition != api.DEFINITION_DEFINED:
        return None
    if q.encoding == api.ENC_SCALE_OFFSET:
        s = q.scale_offset
        return Quant(q.encoding, np.array([s.scale], np.float32), np.array([s.offset], np.int32))
    if q.encoding == api.ENC_BW_SCALE_OFFSET:
        s = q.bw_scale_offset
        return Quant(q.encoding, np.array([s.scale], np.float32), np.array([s.offset], np.int32),
                     bitwidth=int(s.bitwidth))
    if q.encoding == api.ENC_AXIS_SCALE_OFFSET:
        a = q.axis_scale_offset
        if a.num > _MAX_CHANNELS or (a.num and not a.scale_offset):
            raise payload_error(f"{where}: tensor {name!r} has {a.num} per-axis encodings")
        pairs = np.ctypeslib.as_array(ctypes.cast(a.scale_offset, ctypes.POINTER(ctypes.c_uint8)),
                                      (a.num * 8,)).view(np.dtype([("s", "<f4"), ("o", "<i4")])) \
            if a.num else np.zeros(0, [("s", "<f4"), ("o", "<i4")])
        return Quant(q.encoding, pairs["s"].copy(), pairs["o"].copy(), axis=int(a.axis))
    if q.encoding == api.ENC_BW_AXIS_SCALE_OFFSET:
        a = q.bw_axis_scale_offset
        if a.num > _MAX_CHANNELS or (a.num and not a.scales):
            raise payload_error(f"{where}: tensor {name!r} has {a.num} per-axis encodings")
        scales = np.ctypeslib.as_array(a.scales, (a.num,)).copy() if a.num else np.zeros(0, np.float32)
        offsets = np.ctypeslib.as_array(a.offsets, (a.num,)).copy() if a.num and a.offsets \
            else np.zeros(a.num, np.int32)
        return Quant(q.encoding, scales.astype(np.float32), offsets.astype(np.int32),
                     axis=int(a.axis), bitwidth=int(a.bitwidth))
    # block / vector / float-block encodings only appear on weights, never on graph I/O
    return Quant(int(q.encoding), np.zeros(0, np.float32), np.zeros(0, np.int32))


def read_binary_info(lib: QnnLibrary, binary: np.ndarray) -> BinaryInfo:
    """What the context binary holds, from QnnSystemContext_getBinaryInfo (deep-copied)."""
    sysctx = ctypes.c_void_p()
    lib.call("systemContextCreate", ctypes.byref(sysctx), what="QnnSystemContext_create")
    try:
        work = guarded(binary)  # the call takes a non-const buffer
        info = ctypes.POINTER(api.BinaryInfo)()
        size = ctypes.c_uint64()
        lib.call("systemContextGetBinaryInfo", sysctx, work.ctypes.data, len(work),
                 ctypes.byref(info), ctypes.byref(size),
                 what="QnnSystemContext_getBinaryInfo (reading the context binary)",
                 code=ErrorCode.InvalidProgram)
        if not info:
            raise payload_error("QnnSystemContext_getBinaryInfo returned no information")
        return _binary_info(info.contents)
    finally:
        lib.sys_fn.systemContextFree(sysctx)


def _binary_info(bi: api.BinaryInfo) -> BinaryInfo:
    if bi.version not in (1, 2, 3):
        raise ExecuTorchError(ErrorCode.NotSupported,
                              f"{BACKEND}: context binary info version {bi.version} (this "
                              "bridge reads versions 1 to 3)")
    v = {1: bi.v1, 2: bi.v2, 3: bi.v3}[bi.version]
    if v.num_graphs > _MAX_GRAPHS or (v.num_graphs and not v.graphs):
        raise payload_error(f"the context binary lists {v.num_graphs} graphs")
    graphs = {}
    for gi in range(v.num_graphs):
        g = v.graphs[gi]
        if g.version not in (1, 2, 3):
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: graph info version {g.version} (this bridge "
                                  "reads versions 1 to 3)")
        gv = {1: g.v1, 2: g.v2, 3: g.v3}[g.version]
        name = _str(gv.name)
        where = f"graph {name!r}"
        lists = []
        for what, arr, n in (("input", gv.inputs, gv.num_inputs),
                             ("output", gv.outputs, gv.num_outputs)):
            if n > _MAX_TENSORS or (n and not arr):
                raise payload_error(f"{where} lists {n} {what}s")
            lists.append(tuple(_tensor(arr[i], f"{where} {what} {i}") for i in range(n)))
        if name in graphs:
            raise payload_error(f"the context binary has two graphs named {name!r}")
        graphs[name] = GraphInfo(name, *lists)
    return BinaryInfo(int(bi.version), int(v.backend_id), _str(v.build_id), str(v.core_api),
                      str(v.backend_api), _str(v.soc_version), graphs)


# ---- ExecuTorch's tensor-name conventions -------------------------------------------------
_LEADING_INT = re.compile(r"\s*([+-]?\d+)")


def input_number(name: str) -> int | None:
    """The number ExecuTorch sorts graph inputs by: the integer after the first ``_``
    (``input_3_x@0`` -> 3)."""
    i = name.find("_")
    m = _LEADING_INT.match(name, i + 1) if i >= 0 else None
    return int(m.group(1)) if m else None


def mutbuf_number(name: str) -> int | None:
    """The mutable-buffer id after ``mutbuf_`` (``input_2_mutbuf_0_k_cache@0`` -> 0)."""
    i = name.find("mutbuf_")
    if i < 0:
        return None
    m = _LEADING_INT.match(name, i + len("mutbuf_"))
    return int(m.group(1)) if m else -1


# ---- shared contexts ------------------------------------------------------------------
class SharedContext:
    """One QNN context made from one context binary, its graphs and their state."""

    def __init__(self, lib: QnnLibrary, key, info: BinaryInfo, handle: ctypes.c_void_p):
        self.lib, self.key, self.info, self.handle = lib, key, info, handle
        self.graphs: dict = {}  # name -> graph handle (retrieved on first use)
        self.state: dict = {}  # graph name -> {mutable-buffer id: ndarray}, as ExecuTorch
        self.refs = 0
        self.lock = threading.Lock()  # one execution at a time on this context

    def graph(self, name: str) -> ctypes.c_void_p:
        with self.lock:
            g = self.graphs.get(name)
            if g is None:
                g = ctypes.c_void_p()
                self.lib.call("graphRetrieve", self.handle, name.encode("utf-8"),
                              ctypes.byref(g), what=f"QnnGraph_retrieve({name!r})",
                              code=ErrorCode.InvalidProgram)
                self.graphs[name] = g
            return g

    def mutable_buffer(self, graph: str, number: int, nbytes: int) -> np.ndarray:
        """The delegate-owned (zero-initialized) storage of a mutable buffer."""
        bufs = self.state.setdefault(graph, {})
        buf = bufs.get(number)
        if buf is None or buf.nbytes < nbytes:
            buf = bufs[number] = np.zeros(max(nbytes, 1), np.uint8)
        return buf


_registry: dict = {}
_registry_lock = threading.Lock()
# Releases not yet counted: ``release`` runs in finalizers (``Method.__del__`` during a
# garbage collection), possibly on a thread that already holds ``_registry_lock`` (a
# collection inside ``acquire``); it must never wait for the lock, so it queues the
# release and counts it when the lock is free, or leaves it to the next holder.
_pending: list = []


def _count_pending() -> list:
    """Apply the queued releases (``_registry_lock`` held); the contexts left unused."""
    dead = []
    while _pending:
        ctx = _pending.pop()
        ctx.refs -= 1
        if ctx.refs <= 0 and _registry.get(ctx.key) is ctx:
            del _registry[ctx.key]
            dead.append(ctx)
    return dead


def _free(dead: list) -> None:
    for ctx in dead:
        with ctx.lock:
            ctx.graphs.clear()
            ctx.lib.free_context(ctx.handle)


def acquire(lib: QnnLibrary, signature: int, binary: np.ndarray, what: str,
            soc_model: int = 0) -> SharedContext:
    """The context for ``binary``: shared with every live delegate carrying the same
    signature and bytes, created (binary info read, context made) otherwise."""
    digest = hashlib.blake2b(memoryview(np.ascontiguousarray(binary)), digest_size=16).digest()
    key = (id(lib), signature, len(binary), digest, soc_model)
    with _registry_lock:
        dead = _count_pending()
    _free(dead)
    with _registry_lock:
        ctx = _registry.get(key)
        if ctx is None:
            info = read_binary_info(lib, binary)
            if info.backend_id not in (0, api.BACKEND_ID_HTP):
                raise ExecuTorchError(
                    ErrorCode.DelegateInvalidCompatibility,
                    f"{BACKEND}: the context binary was made for QNN backend id "
                    f"{info.backend_id}; the bridge runs HTP (id {api.BACKEND_ID_HTP}) binaries")
            handle = lib.create_context(binary, what, soc_model)
            ctx = _registry[key] = SharedContext(lib, key, info, handle)
        ctx.refs += 1
        return ctx


def release(ctx: SharedContext) -> None:
    """Drop one user of ``ctx``; the last one frees it. Never waits for the registry (see
    ``_pending``): a release made while another holds it is counted by that holder's next
    ``acquire``/``release``/``live_contexts``."""
    _pending.append(ctx)
    if not _registry_lock.acquire(blocking=False):
        return
    try:
        dead = _count_pending()
    finally:
        _registry_lock.release()
    _free(dead)


def live_contexts() -> int:
    with _registry_lock:
        dead = _count_pending()
        n = len(_registry)
    _free(dead)
    return n
