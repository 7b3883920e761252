"""Build an XNNPACK subgraph from a parsed XNNGraph (what ExecuTorch's XNNCompiler does).

Every XValue becomes an ``xnn_define_*_tensor_value`` (constant bytes checked
against the dims first, since the library reads ``numel * element size`` from
the pointer it is given), every XNode one ``xnn_define_*`` call. Serialized
value ids are remapped to the ids the library hands out.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field

import numpy as np

from cython_ext.errors import ErrorCode, ExecuTorchError
from delegates.xnnpack.blob import BACKEND, XnnBlob, blob_error, constant_bytes
from delegates.xnnpack.ctypes_api import (
    BINARY, STATUS, UNARY, XNN_INVALID_VALUE_ID, XNN_MAX_TENSOR_DIMS, BinaryParams, UnaryParams,
)
from delegates.xnnpack.library import ET_TO_XNN_DATATYPE, XnnLibrary
from delegates.xnnpack.schema import ET_DATATYPES, XNODE_TYPES

INVALID = XNN_INVALID_VALUE_ID
EXTERNAL_INPUT, EXTERNAL_OUTPUT = 0x1, 0x2
# bits per element of each ExecuTorch datatype code
_BITS = {1: 32, 2: 16, 3: 8, 4: 8, 5: 32, 6: 8, 7: 32, 8: 4, 9: 8, 10: 4, 11: 8, 12: 32, 13: 32,
         14: 16}
_MAX_DIM = 1 << 31
_MAX_VALUES = 1 << 22


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


def _sizes(values, n=XNN_MAX_TENSOR_DIMS):
    arr = (ctypes.c_size_t * max(n, len(values), 1))()
    for i, v in enumerate(values):
        arr[i] = v
    return arr


class _Builder:
    def __init__(self, lib: XnnLibrary, xb: XnnBlob, named_data):
        self.lib, self.api, self.xb, self.g = lib, lib.api, xb, xb.graph
        self.named = named_data
        self.keep: list = [xb.source]
        self.remap = {INVALID: INVALID}
        self.dtype_of: dict[int, int] = {}
        self.inputs: list[External] = []
        self.outputs: list[External] = []
        self.sg = ctypes.c_void_p()

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
        if bool(tv.flags) and (not external or tv.external_id >= self.g.num_externs):
            raise blob_error(f"{where}: external id {tv.external_id} outside [0, "
                             f"{self.g.num_externs})")
        dt = self.xnn_dtype(tv.datatype, where)
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
        self.dtype_of[tv.id_out] = tv.datatype
        if external:
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
        if q.scale_buffer_idx:
            raw = constant_bytes(self.xb, q.scale_buffer_idx, self.named, where + " scales")
            item = np.dtype(dtype).itemsize
            if len(raw) < count * item:
                raise blob_error(f"{where}: {len(raw) // item} scales for {count} channels")
            s = np.frombuffer(raw[:count * item].tobytes(), dtype)
        else:
            s = np.asarray(q.scale or [], dtype)
            if len(s) < count:
                raise blob_error(f"{where}: {len(s)} scales for {count} channels")
        s = np.concatenate([s[:count], np.zeros(16, dtype)])  # aligned copy with slack
        self.keep.append(s)
        return s

    def block_scales(self, q, count, where) -> np.ndarray:
        if q.scale_buffer_idx:  # serialized as bf16
            return self.scales(q, count, np.uint16, where)
        f32 = np.asarray(q.scale or [], np.float32)
        if len(f32) < count:
            raise blob_error(f"{where}: {len(f32)} block scales for {count} blocks")
        # fp32 -> bf16 the way ExecuTorch does: nudge so truncation rounds, keep the top half
        bits = (f32[:count] * np.float32(1.00389105)).view(np.uint32) >> 16
        s = np.concatenate([bits.astype(np.uint16), np.zeros(16, np.uint16)])
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
        handler = _HANDLERS.get(name)
        if handler is None:
            raise ExecuTorchError(ErrorCode.NotSupported,
                                  f"{BACKEND}: {where} is not supported (ExecuTorch's own "
                                  "XNNPACK runtime does not support it either)")
        handler(self, n, lo, hi, where)

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


# ---- node handlers (one per XNodeUnion member) --------------------------------------
_IO = ("input_id", "output_id")
_UNARY_OPS = {"Sigmoid": "sigmoid", "Floor": "floor", "SquareRoot": "square_root",
              "ReciprocalSquareRoot": "reciprocal_square_root", "Ceiling": "ceiling",
              "Gelu": "gelu", "Hardswish": "hardswish", "Log": "log", "Negate": "negate",
              "Square": "square", "Abs": "abs", "Sin": "sine", "Cos": "cosine", "Tanh": "tanh",
              "Exp": "exp"}
_LEGACY_UNARY = {"sine": "xnn_define_sin", "cosine": "xnn_define_cos"}
_BINARY_OPS = {"Add": ("add", "xnn_define_add2", True),
               "Subtract": ("subtract", "xnn_define_subtract", True),
               "Multiply": ("multiply", "xnn_define_multiply2", True),
               "Div": ("divide", "xnn_define_divide", True),
               "Maximum": ("maximum", "xnn_define_maximum2", False),
               "Minimum": ("minimum", "xnn_define_minimum2", False)}
_HANDLERS = {}


def _handler(*names):
    def deco(f):
        for nm in names:
            _HANDLERS[nm] = f
        return f
    return deco


def _make_unary(op):
    def h(b, n, lo, hi, where):
        a, o = b.ids(n, _IO, where)
        b.unary(op, None, a, o, n.flags, where, _LEGACY_UNARY.get(op))
    return h


for _name, _op in _UNARY_OPS.items():
    _HANDLERS[_name] = _make_unary(_op)


def _make_binary(op, legacy, minmax):
    def h(b, n, lo, hi, where):
        a, c, o = b.ids(n, ("input1_id", "input2_id", "output_id"), where)
        b.binary(op, lo, hi, a, c, o, n.flags, where, legacy, minmax)
    return h


for _name, (_op, _legacy, _mm) in _BINARY_OPS.items():
    _HANDLERS[_name] = _make_binary(_op, _legacy, _mm)


@_handler("Clamp")
def _clamp(b, n, lo, hi, where):
    a, o = b.ids(n, _IO, where)
    p = UnaryParams()
    p.clamp.min, p.clamp.max = lo, hi
    b.unary("clamp", p, a, o, n.flags, where, legacy_args=(lo, hi))


@_handler("LeakyReLU")
def _leaky_relu(b, n, lo, hi, where):
    a, o = b.ids(n, _IO, where)
    p = UnaryParams()
    p.leaky_relu_slope = n.negative_slope
    b.unary("leaky_relu", p, a, o, n.flags, where, legacy_args=(n.negative_slope,))


@_handler("ELU")
def _elu(b, n, lo, hi, where):
    a, o = b.ids(n, _IO, where)
    p = UnaryParams()
    p.elu_alpha = n.alpha
    b.unary("elu", p, a, o, n.flags, where, legacy_args=(n.alpha,))


@_handler("PReLU")
def _prelu(b, n, lo, hi, where):
    a, s, o = b.ids(n, ("input1_id", "input2_id", "output_id"), where)
    if b.api.xnn_define_prelu is not None:
        b.call("xnn_define_prelu", where, a, s, o, n.flags)
    else:
        b.call("xnn_define_binary", where, BINARY["prelu"], None, a, s, o, n.flags)


@_handler("Softmax")
def _softmax(b, n, lo, hi, where):
    b.call("xnn_define_softmax", where, *b.ids(n, _IO, where), n.flags)


@_handler("Convert")
def _convert(b, n, lo, hi, where):
    a, o = b.ids(n, _IO, where)
    b.convert(a, o, n.flags, where)


@_handler("Copy")
def _copy(b, n, lo, hi, where):
    b.call("xnn_define_copy", where, *b.ids(n, _IO, where), n.flags)


@_handler("FullyConnected")
def _fully_connected(b, n, lo, hi, where):
    ids = b.ids(n, ("input1_id", "filter_id", "bias_id", "output_id"), where)
    b.call("xnn_define_fully_connected", where, lo, hi, *ids, n.flags)


_CONV_IDS = ("input1_id", "filter_id", "bias_id", "output_id")


@_handler("Conv2d")
def _conv2d(b, n, lo, hi, where):
    b.call("xnn_define_convolution_2d", where, n.padding_top, n.padding_right, n.padding_bottom,
           n.padding_left, n.kernel_height, n.kernel_width, n.subsampling_height,
           n.subsampling_width, n.dilation_height, n.dilation_width, n.groups,
           n.group_input_channels, n.group_output_channels, lo, hi,
           *b.ids(n, _CONV_IDS, where), n.flags)


@_handler("DepthwiseConv2d")
def _depthwise(b, n, lo, hi, where):
    if n.group_input_channels == 0:
        raise blob_error(f"{where}: group_input_channels is 0")
    b.call("xnn_define_depthwise_convolution_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.kernel_height, n.kernel_width,
           n.subsampling_height, n.subsampling_width, n.dilation_height, n.dilation_width,
           n.group_output_channels // n.group_input_channels, n.groups, lo, hi,
           *b.ids(n, _CONV_IDS, where), n.flags)


@_handler("ConvTranspose2d")
def _deconv(b, n, lo, hi, where):
    b.call("xnn_define_deconvolution_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.adjustment_height, n.adjustment_width,
           n.kernel_height, n.kernel_width, n.subsampling_height, n.subsampling_width,
           n.dilation_height, n.dilation_width, n.groups, n.group_input_channels,
           n.group_output_channels, lo, hi, *b.ids(n, _CONV_IDS, where), n.flags)


@_handler("AvgPooling2d")
def _avg_pool(b, n, lo, hi, where):
    b.call("xnn_define_average_pooling_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.pooling_height, n.pooling_width,
           n.stride_height, n.stride_width, lo, hi, *b.ids(n, _IO, where), n.flags)


@_handler("MaxPooling2d")
def _max_pool(b, n, lo, hi, where):
    b.call("xnn_define_max_pooling_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.pooling_height, n.pooling_width,
           n.stride_height, n.stride_width, n.dilation_height, n.dilation_width, lo, hi,
           *b.ids(n, _IO, where), n.flags)


@_handler("ArgMaxPooling2d")
def _argmax_pool(b, n, lo, hi, where):
    b.call("xnn_define_argmax_pooling_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.pooling_height, n.pooling_width,
           *b.ids(n, ("input_id", "output_value_id", "output_index_id"), where), n.flags)


@_handler("GlobalAvgPooling2d")
def _global_avg_pool(b, n, lo, hi, where):
    b.call("xnn_define_global_average_pooling_2d", where, lo, hi, *b.ids(n, _IO, where),
           n.flags)


def _shape_list(values, num_dims, what, where):
    values = list(values or [])
    if num_dims is not None and num_dims != len(values):
        raise blob_error(f"{where}: num_dims {num_dims} but {len(values)} {what}")
    if len(values) > XNN_MAX_TENSOR_DIMS:
        raise blob_error(f"{where}: {len(values)} {what} (at most {XNN_MAX_TENSOR_DIMS})")
    return values


@_handler("StaticTranspose")
def _transpose(b, n, lo, hi, where):
    perm = _shape_list(n.perm, n.num_dims, "perm entries", where)
    b.call("xnn_define_static_transpose", where, len(perm), _sizes(perm),
           *b.ids(n, _IO, where), n.flags)


@_handler("StaticReshape")
def _reshape(b, n, lo, hi, where):
    shape = _shape_list(n.new_shape, n.num_dims, "new_shape entries", where)
    b.call("xnn_define_static_reshape", where, len(shape), _sizes(shape),
           *b.ids(n, _IO, where), n.flags)


@_handler("StaticSlice")
def _slice(b, n, lo, hi, where):
    offsets = _shape_list(n.offsets, n.num_dims, "offsets", where)
    sizes = _shape_list(n.sizes, n.num_dims, "sizes", where)
    b.call("xnn_define_static_slice", where, len(offsets), _sizes(offsets), _sizes(sizes),
           *b.ids(n, _IO, where), n.flags)


@_handler("StaticConstantPad")
def _pad(b, n, lo, hi, where):
    pre = _shape_list(n.pre_paddings, None, "pre_paddings", where)
    post = _shape_list(n.post_paddings, len(pre), "post_paddings", where)
    # the library reads as many paddings as the input has dims: pass full-size arrays
    b.call("xnn_define_static_constant_pad", where, _sizes(pre), _sizes(post),
           n.padding_value, *b.ids(n, _IO, where), n.flags)


@_handler("StaticResizeBilinear2D")
def _resize_bilinear(b, n, lo, hi, where):
    b.call("xnn_define_static_resize_bilinear_2d", where, n.new_height, n.new_width,
           *b.ids(n, _IO, where), n.flags)


def _make_concat(count):
    def h(b, n, lo, hi, where):
        ins = b.ids(n, [f"input{j}_id" for j in range(1, count + 1)], where)
        out = b.id(n, "output_id", where)
        fname = f"xnn_define_concatenate{count}"
        if getattr(b.api, fname) is not None:
            b.call(fname, where, n.axis, *ins, out, n.flags)
        else:
            arr = (ctypes.c_uint32 * count)(*ins)
            b.call("xnn_define_concatenate", where, n.axis, count, arr, out, n.flags)
    return h


for _k in (2, 3, 4, 5):
    _HANDLERS[f"Concatenate{_k}"] = _make_concat(_k)


@_handler("BatchMatrixMultiply")
def _bmm(b, n, lo, hi, where):
    b.call("xnn_define_batch_matrix_multiply", where,
           *b.ids(n, ("input1_id", "input2_id", "output_id"), where), n.flags)


def _fptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def build_subgraph(lib: XnnLibrary, xb: XnnBlob, named_data) -> Subgraph:
    """Define every value and node of ``xb`` in a new subgraph (the caller deletes it)."""
    return _Builder(lib, xb, named_data).build()
