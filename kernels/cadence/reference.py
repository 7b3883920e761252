"""Cadence's int8 kernels (``cadence::*``, ExecuTorch's DSP flow: ``CadenceDefaultQuantizer``
and its fusion passes rewrite a PT2E-quantized graph to these out variants).

The numbers are the quantizer's intended ones, those of the PT2E-converted model the
flow starts from: integer accumulations (exact), requantized in float32 the way
``quantized_decomposed`` quantizes (``round_half_even(x * f32(1 / scale)) + zero_point``,
clamped). A requantizing op carries its scale as a fixed-point multiplier and shift,
``scale = out_multiplier * 2**(out_shift - 31)``. ExecuTorch 1.5.1's fusion pass stores
positive multipliers while the wheel's Python reference kernels
(``backends/cadence/aot/ref_implementations.py``) read them as ``-out_multiplier``, which
flips every requantized result about its zero point; these kernels take the multiplier
as stored (the sign the pass means), so a lowered program equals the converted model.

>>> import numpy as np
>>> from pyruntime.cython_ext.tensor import ETensor
>>> q = ETensor.from_array(np.zeros(3, np.int8))
>>> quantize_per_tensor_out(ETensor.from_array(np.array([0.1, -0.2, 9.0], np.float32)),
...                         0.05, 3, -128, 127, 1, q)
>>> q.numpy().tolist()
[5, -1, 127]
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.pool import reference as pool
from pyruntime.kernels.conv.reference import conv_nd
from pyruntime.kernels.registry import register

F32 = np.float32
_INT = {0: np.uint8, 1: np.int8, 2: np.int16, 3: np.int32, 27: np.uint16}


def _bad(op: str, msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"cadence::{op}: {msg}")


def _np(t) -> np.ndarray:
    return t.numpy() if isinstance(t, ETensor) else np.asarray(t)


def inverse_scale(scale) -> np.float32:
    """``f32(1 / scale)``, the reciprocal taken in double (``requantize``'s multiplier)."""
    return F32(1.0 / float(scale))


def requantize(x: np.ndarray, scale: float, zero_point: int, qmin: int, qmax: int,
               dtype) -> np.ndarray:
    """``quantized_decomposed.quantize_per_tensor``: float32 ``x * f32(1 / scale)`` (the
    reciprocal in double), rounded half to even, plus the zero point, clamped."""
    inv = inverse_scale(scale)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.rint(x.astype(F32, copy=False) * inv) + F32(zero_point)
        r = np.where(np.isfinite(r), r, 0)
    return np.clip(r, qmin, qmax).astype(dtype)


def _multiplier_scale(out_multiplier: int, out_shift: int) -> float:
    """The output scale a (multiplier, shift) pair stands for: 1 / (m * 2**(shift - 31)),
    computed as the reference kernels compute it, with the multiplier's sign as stored."""
    m = out_multiplier * (1 / (1 << 31)) * (2 ** out_shift)
    if m == 0:
        raise ExecuTorchError(ErrorCode.InvalidArgument,
                              f"cadence: out_multiplier {out_multiplier} is zero")
    return 1.0 / m


def _int_dtype(op: str, t: ETensor, what: str):
    a = _np(t)
    if a.dtype.kind not in "iu":
        raise _bad(op, f"{what} must be an integer tensor, got {a.dtype}")
    return a


def _limits(dtype):
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


@register("cadence::quantize_per_tensor.out")
def quantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out):
    if dtype not in _INT or _INT[dtype] != out.dtype:
        raise _bad("quantize_per_tensor.out", f"dtype {dtype} and out {out.dtype} disagree")
    x = _np(input)
    if x.dtype.kind != "f":
        raise _bad("quantize_per_tensor.out", f"input must be float, got {x.dtype}")
    out.write(requantize(x, scale, zero_point, quant_min, quant_max, out.dtype))


@register("cadence::dequantize_per_tensor.out")
def dequantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out):
    q = _int_dtype("dequantize_per_tensor.out", input, "input")
    out.write((q.astype(F32) - F32(zero_point)) * F32(scale))


def _linear(op, src, weight, bias, src_zero_point, weight_zero_point, out_multiplier,
            out_shift, out_zero_point, out):
    x = _int_dtype(op, src, "src")
    w = _int_dtype(op, weight, "weight")
    if w.ndim != 2 or x.shape[-1] != w.shape[1]:
        raise _bad(op, f"src {list(x.shape)} and weight {list(w.shape)} do not multiply")
    acc = (x.reshape(-1, w.shape[1]).astype(np.int64) - src_zero_point) @ \
        (w.astype(np.int64) - weight_zero_point).T
    if bias is not None:
        acc = acc + _np(bias).astype(np.int64)
    y = requantize(acc.astype(F32), _multiplier_scale(out_multiplier, out_shift),
                   out_zero_point, *_limits(x.dtype), x.dtype)
    out.write(y.reshape(*x.shape[:-1], w.shape[0]))


@register("cadence::quantized_linear.per_tensor_out")
def quantized_linear_per_tensor_out(src, weight, bias, src_zero_point, weight_zero_point,
                                    out_multiplier, out_shift, out_zero_point, offset, out):
    _linear("quantized_linear.per_tensor_out", src, weight, bias, src_zero_point,
            weight_zero_point, out_multiplier, out_shift, out_zero_point, out)


@register("cadence::quantized_fully_connected.per_tensor_out")
def quantized_fully_connected_per_tensor_out(src, weight, bias, src_zero_point,
                                             weight_zero_point, out_multiplier, out_shift,
                                             out_zero_point, offset, out):
    _linear("quantized_fully_connected.per_tensor_out", src, weight, bias, src_zero_point,
            weight_zero_point, out_multiplier, out_shift, out_zero_point, out)


@register("cadence::quantized_relu.per_tensor_out")
def quantized_relu_per_tensor_out(X, X_zero_point, out_zero_point, out_multiplier, out_shift,
                                  out):
    x = _int_dtype("quantized_relu.per_tensor_out", X, "X")
    d = np.maximum(x.astype(np.int64) - X_zero_point, 0).astype(F32)
    out.write(requantize(d, _multiplier_scale(out_multiplier, out_shift), out_zero_point,
                         *_limits(x.dtype), x.dtype))


@register("cadence::quantized_conv2d_nhwc.per_tensor_out")
def quantized_conv2d_nhwc_per_tensor_out(input, weight, bias, stride, padding, dilation,
                                         groups, input_zero_point, weight_zero_point,
                                         bias_scale, out_scale, out_zero_point,
                                         out_multiplier, out_shift, offset, out):
    """x [N, H, W, C], weight [OC, KH, KW, C / groups] (depthwise: [KH, KW, OC]), bias
    int32 [OC]: the exact integer accumulation, times ``bias_scale`` in float32, quantized
    with ``out_scale``."""
    op = "quantized_conv2d_nhwc.per_tensor_out"
    x = _int_dtype(op, input, "input")
    w = _int_dtype(op, weight, "weight")
    if x.ndim != 4:
        raise _bad(op, f"input must be [N, H, W, C], got {list(x.shape)}")
    if w.ndim == 3:  # depthwise [KH, KW, OC] -> [OC, KH, KW, 1]
        w = np.transpose(w, (2, 0, 1))[..., None]
    if w.ndim != 4 or groups < 1 or x.shape[3] != w.shape[3] * groups or w.shape[0] % groups:
        raise _bad(op, f"input {list(x.shape)}, weight {list(w.shape)} and groups {groups} "
                       "do not fit")
    stride, padding, dilation = ([int(v) for v in a[-2:]] for a in (stride, padding, dilation))
    if len(stride + padding + dilation) != 6 or min(stride + dilation) < 1 or min(padding) < 0:
        raise _bad(op, f"stride {stride}, padding {padding}, dilation {dilation}: two values "
                       "each, stride and dilation positive, padding not negative")
    xi = np.transpose(x.astype(np.int64) - input_zero_point, (0, 3, 1, 2))
    wi = np.transpose(w.astype(np.int64) - weight_zero_point, (0, 3, 1, 2))
    if any(x.shape[1 + i] + 2 * padding[i] < dilation[i] * (wi.shape[2 + i] - 1) + 1
           for i in range(2)):
        raise _bad(op, f"the kernel does not fit the padded input {list(x.shape)}")
    # integer operands: conv_nd's products and sums are exact
    acc = np.transpose(conv_nd(xi, wi, stride, padding, dilation, groups), (0, 2, 3, 1))
    if bias is not None:
        acc = acc + _np(bias).astype(np.int64)
    y = acc.astype(F32) * F32(bias_scale)
    out.write(requantize(y, out_scale, out_zero_point, *_limits(x.dtype), x.dtype))


@register("cadence::quantized_matmul.out")
def quantized_matmul_out(X, X_zero_point, Y, Y_zero_point, bias, out_multiplier, out_shift,
                         out_zero_point, transposed, out):
    """Batched ``(X - zx) @ (Y - zy)`` (``Y`` transposed first if asked), exact in the
    integers, requantized by the multiplier; a bias must be absent or zero (the kernel
    has none)."""
    op = "quantized_matmul.out"
    x = _int_dtype(op, X, "X")
    y = _int_dtype(op, Y, "Y")
    if bias is not None and np.any(_np(bias)):
        raise _bad(op, "bias must be None or all zeros (the out variant adds none)")
    if transposed:
        y = np.swapaxes(y, -1, -2)
    if x.ndim < 2 or y.ndim < 2 or x.shape[-1] != y.shape[-2]:
        raise _bad(op, f"X {list(x.shape)} and Y {list(y.shape)} do not multiply")
    acc = np.matmul(x.astype(np.int64) - X_zero_point, y.astype(np.int64) - Y_zero_point)
    out.write(requantize(acc.astype(F32), _multiplier_scale(out_multiplier, out_shift),
                         out_zero_point, *_limits(x.dtype), x.dtype))


@register("cadence::quantized_layer_norm.per_tensor_out")
def quantized_layer_norm_per_tensor_out(X, X_scale, X_zero_point, normalized_shape, weight,
                                        bias, eps, output_scale, output_zero_point, out):
    """Dequantize, layer norm in float32 over ``normalized_shape``, quantize."""
    op = "quantized_layer_norm.per_tensor_out"
    x = _int_dtype(op, X, "X")
    ns = tuple(int(v) for v in normalized_shape)
    if not ns or x.shape[x.ndim - len(ns):] != ns:
        raise _bad(op, f"normalized_shape {list(ns)} is not the end of X's {list(x.shape)}")
    f = (x.astype(F32) - F32(X_zero_point)) * F32(X_scale)
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    mean = f.mean(axis=axes, keepdims=True, dtype=F32)
    c = f - mean
    var = np.mean(c * c, axis=axes, keepdims=True, dtype=F32)
    y = c * (F32(1) / np.sqrt(var + F32(eps)))
    if weight is not None:
        y = y * _np(weight).astype(F32).reshape(ns)
    if bias is not None:
        y = y + _np(bias).astype(F32).reshape(ns)
    out.write(requantize(y, output_scale, output_zero_point, *_limits(x.dtype), x.dtype))


@register("cadence::quantized_max_pool2d_nhwc.out")
def quantized_max_pool2d_nhwc_out(input, kernel_size, stride, padding, dilation, ceil_mode, out):
    """Max pooling on the integers (order-preserving: no requantization), NHWC, with ATen's
    parameters and window rules (kernels/pool/reference.py); padding never wins (the dtype's minimum)."""
    op = "cadence::quantized_max_pool2d_nhwc.out"
    x = _np(input)
    if x.ndim != 4:
        raise _bad("quantized_max_pool2d_nhwc.out", f"input must be [N, H, W, C], got "
                                                     f"{list(x.shape)}")
    nchw = np.transpose(x, (0, 3, 1, 2))
    k, s, p, d, osz = pool._params(op, ETensor.from_array(nchw), kernel_size, stride, padding,
                                   dilation, ceil_mode)
    win = pool._windows(nchw, k, s, p, d, osz, np.iinfo(x.dtype).min)
    out.write(np.transpose(win.max(axis=(-2, -1)), (0, 2, 3, 1)))
