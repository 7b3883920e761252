"""Build an XNNPACK subgraph from a parsed XNNGraph (what ExecuTorch's XNNCompiler does).

Every XValue becomes an ``xnn_define_*_tensor_value`` (constant bytes checked
against the dims first, since the library reads ``numel * element size`` from
the pointer it is given), every XNode one ``xnn_define_*`` call. Serialized
value ids are remapped to the ids the library hands out.
"""
from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass, field

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.delegates.xnnpack.blob import BACKEND, XnnBlob, blob_error, constant_bytes
from pyruntime.delegates.xnnpack.ctypes_api import (
    BINARY, STATUS, UNARY, XNN_INVALID_VALUE_ID, XNN_MAX_TENSOR_DIMS, BinaryParams,
)
from pyruntime.delegates.xnnpack.library import ET_TO_XNN_DATATYPE, XnnLibrary
from pyruntime.delegates.xnnpack.nodes import HANDLERS, io_fields, sizes as _sizes
from pyruntime.delegates.xnnpack.schema import ET_DATATYPES, XNODE_TYPES

INVALID = XNN_INVALID_VALUE_ID
EXTERNAL_INPUT, EXTERNAL_OUTPUT = 0x1, 0x2
# bits per element of each ExecuTorch datatype code
_BITS = {1: 32, 2: 16, 3: 8, 4: 8, 5: 32, 6: 8, 7: 32, 8: 4, 9: 8, 10: 4, 11: 8, 12: 32, 13: 32,
         14: 16}
_MAX_DIM = 1 << 31
_MAX_VALUES = 1 << 22
# The runtime allocates every internal value at its serialized size when it is created:
# refuse graphs whose internal values add up to more than this (a corrupt dim would
# otherwise make the library allocate and touch gigabytes).
MAX_BYTES_ENV = "PYRUNTIME_XNNPACK_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30


def max_internal_bytes() -> int:
    env = os.environ.get(MAX_BYTES_ENV, "")
    return int(env) if env.isdigit() else DEFAULT_MAX_BYTES


@dataclass
class External:
    """One external value: ``args[ext_id]`` of the DelegateCall."""

    ext_id: int
    datatype: int  # ExecuTorch code
    dims: tuple  # as serialized (NHWC where the partitioner permuted)
    elsize: int


@dataclass
class Subgraph:
    handle: ctypes.c_void_p
    inputs: list[External]
    outputs: list[External]
    keep: list = field(default_factory=list)  # arrays XNNPACK points into


def nbytes(datatype: int, dims) -> int:
    bits = _BITS[datatype]
    if bits == 4:  # packed two per byte along the innermost dimension
        inner = dims[-1] if dims else 1
        return math.prod(dims[:-1]) * ((inner + 1) // 2)
    return math.prod(dims) * bits // 8


class _Builder:
    def __init__(self, lib: XnnLibrary, xb: XnnBlob, named_data):
        self.lib, self.api, self.xb, self.g = lib, lib.api, xb, xb.graph
        self.named = named_data
        self.keep: list = [xb.source]
        self.remap = {INVALID: INVALID}
        self.dtype_of: dict[int, int] = {}
        self.dims_of: dict[int, tuple] = {}
        self.inputs: list[External] = []
        self.outputs: list[External] = []
        self.sg = ctypes.c_void_p()
        self.internal_bytes = 0
        self.max_bytes = max_internal_bytes()
        self.ext_ids: set[int] = set()
        self.ready: set[int] = set()  # values with data before any node runs, or produced
        self.produced: set[int] = set()

    # ---- errors ----------------------------------------------------------------
    def status(self, st: int, what: str) -> None:
        if st != 0:
            code = ErrorCode.NotSupported if st in (4, 5) else ErrorCode.Internal
            if st == 6:
                code = ErrorCode.MemoryAllocationFailed
            raise ExecuTorchError(code, f"{BACKEND}: {what} failed with xnn_status "
                                        f"{STATUS.get(st, st)}")

    def fn(self, name: str, what: str):
        f = getattr(self.api, name, None)
        if f is None:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: {what} needs {name}, which the XNNPACK library "
                                  f"{self.lib.path} ({self.lib.source}) lacks; install a newer "
                                  "one (pip install --no-deps executorch==1.5.1)")
        return f

    # ---- subgraph --------------------------------------------------------------
    def build(self) -> Subgraph:
        g = self.g
        if g.num_externs > 1 << 16:
            raise blob_error(f"num_externs {g.num_externs} is implausible")
        if len(g.xvalues) > _MAX_VALUES:
            raise blob_error(f"{len(g.xvalues)} values is too many")
        self.status(self.api.xnn_create_subgraph(g.num_externs, 0, ctypes.byref(self.sg)),
                    "xnn_create_subgraph")
        try:
            for i, v in enumerate(g.xvalues):
                self.define_value(i, v)
            for i, n in enumerate(g.xnodes or []):
                self.define_node(i, n)
        except BaseException:
            self.api.xnn_delete_subgraph(self.sg)
            raise
        return Subgraph(self.sg, sorted(self.inputs, key=lambda e: e.ext_id),
                        sorted(self.outputs, key=lambda e: e.ext_id), self.keep)

    # ---- values ----------------------------------------------------------------
    def xnn_dtype(self, et: int, where: str) -> int:
        if et not in ET_TO_XNN_DATATYPE or et == 0:
            raise blob_error(f"{where}: unknown datatype {et}")
        return ET_TO_XNN_DATATYPE[et]

    def define_value(self, i: int, v) -> None:
        code, member = v.xvalue_union
        where = f"value {i}"
        if member is None:
            raise blob_error(f"{where}: empty value (union type {code})")
        tv, qp = (member, None) if code == 1 else (member.tensor_value, member.quant_params)
        if tv is None:
            raise blob_error(f"{where}: quantized value without a tensor_value")
        dims = tuple(tv.dims or ())
        if tv.num_dims != len(dims) or len(dims) > XNN_MAX_TENSOR_DIMS:
            raise blob_error(f"{where}: num_dims {tv.num_dims} with {len(dims)} dims (at most "
                             f"{XNN_MAX_TENSOR_DIMS})")
        if any(d >= _MAX_DIM for d in dims):
            raise blob_error(f"{where}: dimension out of range in {list(dims)}")
        where = f"value {i} (id {tv.id_out}, {ET_DATATYPES.get(tv.datatype, tv.datatype)}" \
                f"{list(dims)})"
        if tv.id_out in self.remap:
            raise blob_error(f"{where}: id {tv.id_out} defined twice")
        if tv.flags & ~(EXTERNAL_INPUT | EXTERNAL_OUTPUT):
            raise blob_error(f"{where}: unknown value flags 0x{tv.flags:x}")
        external = tv.external_id != INVALID
        if external != bool(tv.flags) or tv.flags == EXTERNAL_INPUT | EXTERNAL_OUTPUT:
            raise blob_error(f"{where}: external id {tv.external_id} with flags {tv.flags} "
                             "(an external value is either an input or an output)")
        if external and (tv.external_id >= self.g.num_externs or tv.external_id in self.ext_ids):
            raise blob_error(f"{where}: external id {tv.external_id} is out of [0, "
                             f"{self.g.num_externs}) or used twice")
        dt = self.xnn_dtype(tv.datatype, where)
        if not external and not tv.constant_buffer_idx:
            self.internal_bytes += nbytes(tv.datatype, dims)
            if self.internal_bytes > self.max_bytes:
                raise ExecuTorchError(
                    ErrorCode.MemoryAllocationFailed,
                    f"{BACKEND}: {where}: the graph's intermediate values need more than "
                    f"{self.max_bytes} bytes (raise ${MAX_BYTES_ENV} if this is intended)")
        data = constant_bytes(self.xb, tv.constant_buffer_idx, self.named, where)
        if data is not None:
            if external:
                raise blob_error(f"{where}: an external value cannot have constant data")
            need = nbytes(tv.datatype, dims)
            if len(data) < need:
                raise blob_error(f"{where}: constant data has {len(data)} bytes, the dims "
                                 f"need {need}")
            self.keep.append(data)
        ptr = None if data is None else data.ctypes.data
        cdims = _sizes(dims)
        out = ctypes.c_uint32(INVALID)
        api = self.api
        dq = getattr(tv, "dq_datatype", 0)
        if qp is None and dq:  # XN00: an fp input quantized dynamically per token
            self.define_legacy_dq(tv, dims, dt, dq, where, out)
        elif qp is None:
            self.status(api.xnn_define_tensor_value(self.sg, dt, len(dims), cdims, ptr,
                                                    tv.external_id, tv.flags, ctypes.byref(out)),
                        f"{where}: xnn_define_tensor_value")
        else:
            self.define_quantized(tv, qp, dims, cdims, dt, ptr, data, where, out)
        self.remap[tv.id_out] = out.value
        if data is not None or tv.flags & EXTERNAL_INPUT:
            self.ready.add(tv.id_out)
        self.dtype_of[tv.id_out] = tv.datatype
        self.dims_of[tv.id_out] = dims
        if external:
            self.ext_ids.add(tv.external_id)
            bits = _BITS.get(tv.datatype, 8)
            ext = External(tv.external_id, tv.datatype, dims, max(bits // 8, 1))
            if tv.flags & EXTERNAL_INPUT:
                self.inputs.append(ext)
            if tv.flags & EXTERNAL_OUTPUT:
                self.outputs.append(ext)

    def define_legacy_dq(self, tv, dims, dt, dq, where, out):
        if dq != 3 or not tv.flags & EXTERNAL_INPUT:
            raise blob_error(f"{where}: dynamic quantization to datatype {dq} of a non-input")
        fn = self.fn("xnn_define_dynamically_quantized_tensor_value", where)
        cdims = _sizes(dims)
        self.status(fn(self.sg, self.xnn_dtype(9, where), len(dims), 1, cdims, INVALID, 0,
                       ctypes.byref(out)), f"{where}: dynamically quantized value")
        fp = ctypes.c_uint32(INVALID)
        self.status(self.api.xnn_define_tensor_value(self.sg, dt, len(dims), cdims, None,
                                                     tv.external_id, tv.flags, ctypes.byref(fp)),
                    f"{where}: xnn_define_tensor_value")
        self.convert(fp.value, out.value, 0, where)

    def define_quantized(self, tv, qp, dims, cdims, dt, ptr, data, where, out):
        code, q = qp
        api, n = self.api, len(dims)
        if q is None:
            raise blob_error(f"{where}: quantized value without quantization parameters")
        if code == 2:  # PerTensorQuant
            fn = self.fn("xnn_define_quantized_tensor_value", where)
            self.status(fn(self.sg, dt, q.zero_point, q.scale, n, cdims, ptr, tv.external_id,
                           tv.flags, ctypes.byref(out)), f"{where}: quantized value")
        elif code == 1:  # PerChannelQuant
            if not 0 <= q.channel_dim < n:
                raise blob_error(f"{where}: channel_dim {q.channel_dim} outside rank {n}")
            scale = self.scales(q, dims[q.channel_dim], np.float32, where)
            zp = 8 if tv.datatype == 8 else 0
            if api.xnn_define_channelwise_quantized_tensor_value_v2 is not None:
                st = api.xnn_define_channelwise_quantized_tensor_value_v2(
                    self.sg, dt, zp, _fptr(scale), n, q.channel_dim, cdims, ptr, tv.external_id,
                    tv.flags, ctypes.byref(out))
            else:
                if zp:
                    self.fn("xnn_define_channelwise_quantized_tensor_value_v2", where)
                fn = self.fn("xnn_define_channelwise_quantized_tensor_value", where)
                st = fn(self.sg, dt, _fptr(scale), n, q.channel_dim, cdims, ptr, tv.external_id,
                        tv.flags, ctypes.byref(out))
            self.status(st, f"{where}: channelwise quantized value")
        elif code == 4:  # PerChannelGroupQuant (blockwise, 4-bit weights [out, in])
            if tv.datatype != 10 or n != 2 or not 0 <= q.channel_dim < n:
                raise blob_error(f"{where}: blockwise quantization needs a 2-d qbint4 value")
            gs = q.group_size
            if gs <= 0 or dims[1] % gs:
                raise blob_error(f"{where}: group size {gs} does not divide {dims[1]}")
            count = dims[0] * dims[1] // gs
            scale = self.block_scales(q, count, where)
            fn = self.fn("xnn_define_blockwise_quantized_tensor_value", where)
            self.status(fn(self.sg, dt, 8, scale.ctypes.data_as(ctypes.POINTER(ctypes.c_uint16)),
                           n, q.channel_dim, gs, cdims, ptr, tv.external_id, tv.flags,
                           ctypes.byref(out)), f"{where}: blockwise quantized value")
        elif code == 3:  # PerTokenDynamicQuant
            if data is not None or not 0 <= q.num_nonbatch_dims <= n:
                raise blob_error(f"{where}: bad dynamically quantized value")
            fn = self.fn("xnn_define_dynamically_quantized_tensor_value", where)
            self.status(fn(self.sg, dt, n, q.num_nonbatch_dims, cdims, tv.external_id, tv.flags,
                           ctypes.byref(out)), f"{where}: dynamically quantized value")
        else:
            raise blob_error(f"{where}: unknown quantization parameters type {code}")

    def scales(self, q, count, dtype, where) -> np.ndarray:
        s = read_scales(self.xb, self.named, q, count, dtype, where)
        self.keep.append(s)
        return s

    def block_scales(self, q, count, where) -> np.ndarray:
        s = block_scale_bits(self.xb, self.named, q, count, where)
        self.keep.append(s)
        return s

    # ---- nodes -----------------------------------------------------------------
    def define_node(self, i: int, node) -> None:
        code, n = node.xnode_union
        name = XNODE_TYPES.get(code, (f"type {code}",))[0]
        where = f"node {i} ({name}, debug handle {node.debug_handle})"
        if n is None:
            raise blob_error(f"{where}: empty node")
        mm = node.output_min_max
        lo, hi = (-math.inf, math.inf) if mm is None else (mm.output_min, mm.output_max)
        handler = HANDLERS.get(name)
        if handler is None:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: {where} is not supported (ExecuTorch's own "
                                  "XNNPACK runtime does not support it either)")
        self.check_order(n, name, where)
        handler(self, n, lo, hi, where)

    def check_order(self, n, name, where) -> None:
        # The library runs nodes in the order given and plans memory by it (a node that
        # reads a value no earlier node produced trips an assertion in the library).
        ins, outs = io_fields(name)
        for f in ins:
            v = getattr(n, f)
            if v == INVALID and f == "bias_id":
                continue
            if v not in self.ready:
                raise blob_error(f"{where}: {f} reads value {v}, which is neither an input, a "
                                 "constant nor the output of an earlier node")
        for f in outs:
            v = getattr(n, f)
            if v not in self.remap or v in self.ready or v in self.produced:
                raise blob_error(f"{where}: {f} writes value {v}, which is undefined, an "
                                 "input, a constant or written by an earlier node")
        for f in outs:
            v = getattr(n, f)
            self.produced.add(v)
            self.ready.add(v)

    def id(self, n, fieldname: str, where: str) -> int:
        v = getattr(n, fieldname)
        try:
            return self.remap[v]
        except KeyError:
            raise blob_error(f"{where}: {fieldname} refers to undefined value id {v}") from None

    def ids(self, n, names, where):
        return [self.id(n, f, where) for f in names]

    def call(self, fname: str, where: str, *args) -> None:
        self.status(self.fn(fname, where)(self.sg, *args), f"{where}: {fname}")

    def convert(self, a, b, flags, where):
        if self.api.xnn_define_convert is not None:
            self.call("xnn_define_convert", where, a, b, flags)
        else:
            self.unary("convert", None, a, b, flags, where)

    def unary(self, op, params, a, b, flags, where, legacy=None, legacy_args=()):
        if self.api.xnn_define_unary is not None:
            p = None if params is None else ctypes.byref(params)
            self.call("xnn_define_unary", where, UNARY[op], p, a, b, flags)
        else:
            self.call(legacy or f"xnn_define_{op}", where, *legacy_args, a, b, flags)

    def binary(self, op, lo, hi, a, b, out, flags, where, legacy, minmax=True):
        if self.api.xnn_define_binary is not None:
            p = ctypes.byref(BinaryParams(lo, hi)) if minmax else None
            self.call("xnn_define_binary", where, BINARY[op], p, a, b, out, flags)
        elif minmax:
            self.call(legacy, where, lo, hi, a, b, out, flags)
        else:
            self.call(legacy, where, a, b, out, flags)


def read_scales(xb: XnnBlob, named_data, q, count, dtype, where) -> np.ndarray:
    """``count`` scales of ``dtype`` from the quantization parameters ``q`` (their constant
    buffer, else their inline list), then 16 zeros of slack."""
    if q.scale_buffer_idx:
        raw = constant_bytes(xb, q.scale_buffer_idx, named_data, where + " scales")
        item = np.dtype(dtype).itemsize
        if len(raw) < count * item:
            raise blob_error(f"{where}: {len(raw) // item} scales for {count} channels")
        s = np.frombuffer(raw[:count * item].tobytes(), dtype)
    else:
        s = np.asarray(q.scale or [], dtype)
        if len(s) < count:
            raise blob_error(f"{where}: {len(s)} scales for {count} channels")
    return np.concatenate([s[:count], np.zeros(16, dtype)])  # aligned copy with slack


def block_scale_bits(xb: XnnBlob, named_data, q, count, where) -> np.ndarray:
    """A PerChannelGroupQuant's ``count`` block scales as bf16 bits (uint16), then 16
    zeros of slack."""
    if q.scale_buffer_idx:  # serialized as bf16
        return read_scales(xb, named_data, q, count, np.uint16, where)
    f32 = np.asarray(q.scale or [], np.float32)
    if len(f32) < count:
        raise blob_error(f"{where}: {len(f32)} block scales for {count} blocks")
    # fp32 -> bf16 the way ExecuTorch does: nudge so truncation rounds, keep the top half
    bits = (f32[:count] * np.float32(1.00389105)).view(np.uint32) >> 16
    return np.concatenate([bits.astype(np.uint16), np.zeros(16, np.uint16)])


def _fptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def build_subgraph(lib: XnnLibrary, xb: XnnBlob, named_data) -> Subgraph:
    """Define every value and node of ``xb`` in a new subgraph (the caller deletes it)."""
    return _Builder(lib, xb, named_data).build()
