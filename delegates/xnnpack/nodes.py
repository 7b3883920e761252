"""One handler per XNodeUnion member: validate the node against its values, then
``xnn_define_*`` it. A handler gets the graph builder ``b`` (remapped ids, value
dims, the library), the node table ``n``, the fused output range and a ``where``
string for errors.
"""
from __future__ import annotations

import ctypes
import math

from pyruntime.delegates.xnnpack.blob import blob_error
from pyruntime.delegates.xnnpack.ctypes_api import BINARY, XNN_INVALID_VALUE_ID, XNN_MAX_TENSOR_DIMS, \
    UnaryParams

INVALID = XNN_INVALID_VALUE_ID

_IN1, _IN2 = ("input_id",), ("input1_id", "input2_id")
_WEIGHTED = ("input1_id", "filter_id", "bias_id")
# node -> (input fields, output fields): checked for a topological order before defining
IO_FIELDS = {
    **{n: (_IN2, ("output_id",)) for n in (
        "Add", "Subtract", "Multiply", "Div", "Minimum", "Maximum", "PReLU",
        "BatchMatrixMultiply")},
    **{n: (_WEIGHTED, ("output_id",)) for n in (
        "FullyConnected", "Conv2d", "DepthwiseConv2d", "ConvTranspose2d")},
    **{f"Concatenate{k}": (tuple(f"input{j}_id" for j in range(1, k + 1)), ("output_id",))
       for k in (2, 3, 4, 5)},
    "ArgMaxPooling2d": (_IN1, ("output_value_id", "output_index_id")),
}


def io_fields(name: str):
    return IO_FIELDS.get(name, (_IN1, ("output_id",)))


def sizes(values, n=XNN_MAX_TENSOR_DIMS):
    """A ``size_t`` array of at least ``n`` entries (zero-filled) holding ``values``."""
    arr = (ctypes.c_size_t * max(n, len(values), 1))()
    for i, v in enumerate(values):
        arr[i] = v
    return arr


_IO = ("input_id", "output_id")
_UNARY_OPS = {"Sigmoid": "sigmoid", "Floor": "floor", "SquareRoot": "square_root",
              "ReciprocalSquareRoot": "reciprocal_square_root", "Ceiling": "ceiling",
              "Gelu": "gelu", "Hardswish": "hardswish", "Log": "log", "Negate": "negate",
              "Square": "square", "Abs": "abs", "Sin": "sine", "Cos": "cosine", "Tanh": "tanh",
              "Exp": "exp"}
_LEGACY_UNARY = {"sine": "xnn_define_sin", "cosine": "xnn_define_cos"}
# unary ops of one scalar parameter: node -> (op, UnaryParams field, node field)
_PARAM_UNARY_OPS = {"LeakyReLU": ("leaky_relu", "leaky_relu_slope", "negative_slope"),
                    "ELU": ("elu", "elu_alpha", "alpha")}
_BINARY_OPS = {"Add": ("add", "xnn_define_add2", True),
               "Subtract": ("subtract", "xnn_define_subtract", True),
               "Multiply": ("multiply", "xnn_define_multiply2", True),
               "Div": ("divide", "xnn_define_divide", True),
               "Maximum": ("maximum", "xnn_define_maximum2", False),
               "Minimum": ("minimum", "xnn_define_minimum2", False)}
HANDLERS = {}


def _handler(*names):
    def deco(f):
        for nm in names:
            HANDLERS[nm] = f
        return f
    return deco


def _make_unary(op):
    def h(b, n, lo, hi, where):
        a, o = b.ids(n, _IO, where)
        b.unary(op, None, a, o, n.flags, where, _LEGACY_UNARY.get(op))
    return h


for _name, _op in _UNARY_OPS.items():
    HANDLERS[_name] = _make_unary(_op)


def _make_param_unary(op, param, field):
    def h(b, n, lo, hi, where):
        a, o = b.ids(n, _IO, where)
        value = getattr(n, field)
        p = UnaryParams()
        setattr(p, param, value)
        b.unary(op, p, a, o, n.flags, where, legacy_args=(value,))
    return h


for _name, (_op, _param, _field) in _PARAM_UNARY_OPS.items():
    HANDLERS[_name] = _make_param_unary(_op, _param, _field)


def _make_binary(op, legacy, minmax):
    def h(b, n, lo, hi, where):
        a, c, o = b.ids(n, ("input1_id", "input2_id", "output_id"), where)
        b.binary(op, lo, hi, a, c, o, n.flags, where, legacy, minmax)
    return h


for _name, (_op, _legacy, _mm) in _BINARY_OPS.items():
    HANDLERS[_name] = _make_binary(_op, _legacy, _mm)


@_handler("Clamp")
def _clamp(b, n, lo, hi, where):
    a, o = b.ids(n, _IO, where)
    p = UnaryParams()
    p.clamp.min, p.clamp.max = lo, hi
    b.unary("clamp", p, a, o, n.flags, where, legacy_args=(lo, hi))


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
    fd = b.dims_of.get(n.filter_id)
    if fd is not None:
        if len(fd) != 2:
            raise blob_error(f"{where}: filter dims {list(fd)} are not 2-d")
        _check_weights(b, n, fd, fd[1] if n.flags & 1 else fd[0], where)
    ids = b.ids(n, ("input1_id", "filter_id", "bias_id", "output_id"), where)
    b.call("xnn_define_fully_connected", where, lo, hi, *ids, n.flags)


_CONV_IDS = ("input1_id", "filter_id", "bias_id", "output_id")


# The library reads weights by the node's parameters, not by the value's dims: a node
# that disagrees with its filter or bias would make it read past their bytes.
def _check_weights(b, n, filter_dims, out_channels, where, filter_field="filter_id"):
    got = b.dims_of.get(getattr(n, filter_field))
    if got is not None and tuple(got) != tuple(filter_dims):
        raise blob_error(f"{where}: filter dims {list(got)} do not match the node's "
                         f"{list(filter_dims)}")
    if n.bias_id != INVALID:
        bias = b.dims_of.get(n.bias_id)
        if bias is not None and math.prod(bias) != out_channels:
            raise blob_error(f"{where}: bias dims {list(bias)} for {out_channels} output "
                             "channels")


def _check_conv(b, n, where):
    oc = n.groups * n.group_output_channels
    _check_weights(b, n, (oc, n.kernel_height, n.kernel_width, n.group_input_channels), oc, where)


# The library sizes intermediate buffers from the node's parameters and its inputs' shapes.
# A node whose parameters give a bigger output than its serialized output value (a corrupt
# padding, stride, size, ...) is refused: with inputs within their bounds, a valid graph's
# outputs never exceed the serialized (upper-bound) dims.
def _check_output(b, n, inferred, where, out_field="output_id"):
    out = b.dims_of.get(getattr(n, out_field))
    if out is None:
        return
    if len(out) != len(inferred) or any(i > o for i, o in zip(inferred, out)) or any(
            i <= 0 for i in inferred):
        raise blob_error(f"{where}: the node's parameters give output dims {list(inferred)}, "
                         f"its output value has {list(out)}")


def _nhwc_input(b, n, where, field="input_id"):
    d = b.dims_of.get(getattr(n, field))
    if d is None or len(d) != 4:
        raise blob_error(f"{where}: input is not a 4-d (NHWC) value: {d}")
    return d


def _window(size, pad_a, pad_b, kernel, stride, dilation, where):
    if kernel == 0 or stride == 0 or dilation == 0:
        raise blob_error(f"{where}: zero kernel size, stride or dilation")
    return (size + pad_a + pad_b - ((kernel - 1) * dilation + 1)) // stride + 1


def _spatial(b, n, kh, kw, sh, sw, dh, dw, channels, where, field="input_id"):
    if n.flags & 0x4:  # TensorFlow SAME padding: computed by the library
        return
    d = _nhwc_input(b, n, where, field)
    _check_output(b, n, (d[0], _window(d[1], n.padding_top, n.padding_bottom, kh, sh, dh, where),
                         _window(d[2], n.padding_left, n.padding_right, kw, sw, dw, where),
                         d[3] if channels is None else channels), where)


@_handler("Conv2d")
def _conv2d(b, n, lo, hi, where):
    _check_conv(b, n, where)
    _spatial(b, n, n.kernel_height, n.kernel_width, n.subsampling_height, n.subsampling_width,
             n.dilation_height, n.dilation_width, n.groups * n.group_output_channels, where,
             "input1_id")
    b.call("xnn_define_convolution_2d", where, n.padding_top, n.padding_right, n.padding_bottom,
           n.padding_left, n.kernel_height, n.kernel_width, n.subsampling_height,
           n.subsampling_width, n.dilation_height, n.dilation_width, n.groups,
           n.group_input_channels, n.group_output_channels, lo, hi,
           *b.ids(n, _CONV_IDS, where), n.flags)


@_handler("DepthwiseConv2d")
def _depthwise(b, n, lo, hi, where):
    if n.group_input_channels == 0:
        raise blob_error(f"{where}: group_input_channels is 0")
    oc = n.groups * (n.group_output_channels // n.group_input_channels)
    _check_weights(b, n, (1, n.kernel_height, n.kernel_width, oc), oc, where)
    _spatial(b, n, n.kernel_height, n.kernel_width, n.subsampling_height, n.subsampling_width,
             n.dilation_height, n.dilation_width, oc, where, "input1_id")
    b.call("xnn_define_depthwise_convolution_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.kernel_height, n.kernel_width,
           n.subsampling_height, n.subsampling_width, n.dilation_height, n.dilation_width,
           n.group_output_channels // n.group_input_channels, n.groups, lo, hi,
           *b.ids(n, _CONV_IDS, where), n.flags)


@_handler("ConvTranspose2d")
def _deconv(b, n, lo, hi, where):
    _check_conv(b, n, where)
    d = _nhwc_input(b, n, where, "input1_id")
    if 0 in (n.kernel_height, n.kernel_width, n.subsampling_height, n.subsampling_width,
             n.dilation_height, n.dilation_width):
        raise blob_error(f"{where}: zero kernel size, stride or dilation")
    oh = ((d[1] - 1) * n.subsampling_height + n.adjustment_height +
          (n.kernel_height - 1) * n.dilation_height + 1 - n.padding_top - n.padding_bottom)
    ow = ((d[2] - 1) * n.subsampling_width + n.adjustment_width +
          (n.kernel_width - 1) * n.dilation_width + 1 - n.padding_left - n.padding_right)
    _check_output(b, n, (d[0], oh, ow, n.groups * n.group_output_channels), where)
    b.call("xnn_define_deconvolution_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.adjustment_height, n.adjustment_width,
           n.kernel_height, n.kernel_width, n.subsampling_height, n.subsampling_width,
           n.dilation_height, n.dilation_width, n.groups, n.group_input_channels,
           n.group_output_channels, lo, hi, *b.ids(n, _CONV_IDS, where), n.flags)


@_handler("AvgPooling2d")
def _avg_pool(b, n, lo, hi, where):
    _spatial(b, n, n.pooling_height, n.pooling_width, n.stride_height, n.stride_width, 1, 1,
             None, where)
    b.call("xnn_define_average_pooling_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.pooling_height, n.pooling_width,
           n.stride_height, n.stride_width, lo, hi, *b.ids(n, _IO, where), n.flags)


@_handler("MaxPooling2d")
def _max_pool(b, n, lo, hi, where):
    _spatial(b, n, n.pooling_height, n.pooling_width, n.stride_height, n.stride_width,
             n.dilation_height, n.dilation_width, None, where)
    b.call("xnn_define_max_pooling_2d", where, n.padding_top, n.padding_right,
           n.padding_bottom, n.padding_left, n.pooling_height, n.pooling_width,
           n.stride_height, n.stride_width, n.dilation_height, n.dilation_width, lo, hi,
           *b.ids(n, _IO, where), n.flags)


@_handler("ArgMaxPooling2d")
def _argmax_pool(b, n, lo, hi, where):
    d = _nhwc_input(b, n, where)
    dims = (d[0], _window(d[1], n.padding_top, n.padding_bottom, n.pooling_height,
                          n.pooling_height, 1, where),
            _window(d[2], n.padding_left, n.padding_right, n.pooling_width, n.pooling_width, 1,
                    where), d[3])
    _check_output(b, n, dims, where, "output_value_id")
    _check_output(b, n, dims, where, "output_index_id")
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
    b.call("xnn_define_static_transpose", where, len(perm), sizes(perm),
           *b.ids(n, _IO, where), n.flags)


@_handler("StaticReshape")
def _reshape(b, n, lo, hi, where):
    shape = _shape_list(n.new_shape, n.num_dims, "new_shape entries", where)
    b.call("xnn_define_static_reshape", where, len(shape), sizes(shape),
           *b.ids(n, _IO, where), n.flags)


@_handler("StaticSlice")
def _slice(b, n, lo, hi, where):
    offsets = _shape_list(n.offsets, n.num_dims, "offsets", where)
    lengths = _shape_list(n.sizes, n.num_dims, "sizes", where)
    d = b.dims_of.get(n.input_id)
    if d is not None:
        if len(d) != len(offsets):
            raise blob_error(f"{where}: {len(offsets)} offsets for a {len(d)}-d input")
        out = tuple(s or (i - o) for i, o, s in zip(d, offsets, lengths))
        if any(o + s > i for i, o, s in zip(d, offsets, out)):
            raise blob_error(f"{where}: slice {offsets}+{lengths} outside the input {list(d)}")
        _check_output(b, n, out, where)
    b.call("xnn_define_static_slice", where, len(offsets), sizes(offsets), sizes(lengths),
           *b.ids(n, _IO, where), n.flags)


@_handler("StaticConstantPad")
def _pad(b, n, lo, hi, where):
    pre = _shape_list(n.pre_paddings, None, "pre_paddings", where)
    post = _shape_list(n.post_paddings, len(pre), "post_paddings", where)
    d = b.dims_of.get(n.input_id)
    if d is not None:
        if len(d) != len(pre):
            raise blob_error(f"{where}: {len(pre)} paddings for a {len(d)}-d input")
        _check_output(b, n, tuple(i + a + c for i, a, c in zip(d, pre, post)), where)
    # the library reads as many paddings as the input has dims: pass full-size arrays
    b.call("xnn_define_static_constant_pad", where, sizes(pre), sizes(post),
           n.padding_value, *b.ids(n, _IO, where), n.flags)


@_handler("StaticResizeBilinear2D")
def _resize_bilinear(b, n, lo, hi, where):
    d = _nhwc_input(b, n, where)
    _check_output(b, n, (d[0], n.new_height, n.new_width, d[3]), where)
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
    HANDLERS[f"Concatenate{_k}"] = _make_concat(_k)


@_handler("BatchMatrixMultiply")
def _bmm(b, n, lo, hi, where):
    b.call("xnn_define_batch_matrix_multiply", where,
           *b.ids(n, ("input1_id", "input2_id", "output_id"), where), n.flags)
