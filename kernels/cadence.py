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
from pyruntime.kernels.registry import register

F32 = np.float32
_INT = {0: np.uint8, 1: np.int8, 2: np.int16, 3: np.int32, 27: np.uint16}


def _bad(op: str, msg: str) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"cadence::{op}: {msg}")


def _np(t) -> np.ndarray:
    return t.numpy() if isinstance(t, ETensor) else np.asarray(t)


def requantize(x: np.ndarray, scale: float, zero_point: int, qmin: int, qmax: int,
               dtype) -> np.ndarray:
    """``quantized_decomposed.quantize_per_tensor``: float32 ``x * f32(1 / scale)`` (the
    reciprocal in double), rounded half to even, plus the zero point, clamped."""
    inv = F32(1.0 / float(scale))
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
    (sh, sw), (ph, pw), (dh, dw) = (tuple(int(v) for v in a[-2:]) for a in
                                    (stride, padding, dilation))
    xi = np.pad(x.astype(np.int64) - input_zero_point, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    wi = w.astype(np.int64) - weight_zero_point
    oc, kh, kw, cg = wi.shape
    oh = (xi.shape[1] - dh * (kh - 1) - 1) // sh + 1
    ow = (xi.shape[2] - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise _bad(op, f"the kernel does not fit the padded input {list(xi.shape)}")
    acc = np.zeros((x.shape[0], oh, ow, oc), np.int64)
    og = oc // groups
    for i in range(kh):
        for j in range(kw):
            patch = xi[:, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                       j * dw:j * dw + (ow - 1) * sw + 1:sw, :]
            for g in range(groups):
                acc[..., g * og:(g + 1) * og] += patch[..., g * cg:(g + 1) * cg] @ \
                    wi[g * og:(g + 1) * og, i, j, :].T
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


def _pool_size(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    span = d * (k - 1) + 1
    out = (n + 2 * p - span + ((s - 1) if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + p:  # the last window must start inside the input
        out -= 1
    return out


@register("cadence::quantized_max_pool2d_nhwc.out")
def quantized_max_pool2d_nhwc_out(input, kernel_size, stride, padding, dilation, ceil_mode, out):
    """Max pooling on the integers (order-preserving: no requantization), NHWC; padding
    never wins (it is the dtype's minimum)."""
    op = "quantized_max_pool2d_nhwc.out"
    x = _np(input)
    if x.ndim != 4:
        raise _bad(op, f"input must be [N, H, W, C], got {list(x.shape)}")

    def pair(v, name, default=None):
        v = list(v) or ([] if default is None else [default])
        if len(v) == 1:
            v = v * 2
        if len(v) != 2 or min(v) < (0 if name == "padding" else 1):
            raise _bad(op, f"{name} {v}")
        return v

    (kh, kw), (ph, pw) = pair(kernel_size, "kernel_size"), pair(padding, "padding", 0)
    (sh, sw) = pair(stride, "stride", None) if list(stride) else (kh, kw)
    (dh, dw) = pair(dilation, "dilation", 1)
    oh = _pool_size(x.shape[1], kh, sh, ph, dh, bool(ceil_mode))
    ow = _pool_size(x.shape[2], kw, sw, pw, dw, bool(ceil_mode))
    if oh <= 0 or ow <= 0:
        raise _bad(op, f"the window does not fit the input {list(x.shape)}")
    lo = np.iinfo(x.dtype).min
    need_h = (oh - 1) * sh + dh * (kh - 1) + 1
    need_w = (ow - 1) * sw + dw * (kw - 1) + 1
    xp = np.pad(x, ((0, 0), (ph, max(0, need_h - x.shape[1] - ph)),
                    (pw, max(0, need_w - x.shape[2] - pw)), (0, 0)), constant_values=lo)
    y = np.full((x.shape[0], oh, ow, x.shape[3]), lo, x.dtype)
    for i in range(kh):
        for j in range(kw):
            np.maximum(y, xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh,
                             j * dw:j * dw + (ow - 1) * sw + 1:sw, :], out=y)
    out.write(y)
