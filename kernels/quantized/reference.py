"""Quantized kernels: ``quantized_decomposed::`` (spec 7.3, ExecuTorch's ``kernels/quantized``).

The arithmetic follows the C++ kernels bit for bit where it can:

* quantize: ``q = clamp(int64(float32(zp) + nearbyint(float32(x * inv_scale))), qmin, qmax)``
  with ``inv_scale = 1.0f / float(scale)`` in float32 and round-half-to-even;
  NaN or out-of-range values become INT64_MIN before the clamp (what the C++
  float -> int64 cast does on x86), so they land on ``quant_min``;
* dequantize: ``(q - zp) * float(scale)`` in float32, then cast to ``out``;
* ScalarType arguments arrive as ExecuTorch ScalarType codes (ints).

The 4-bit and 2-bit embeddings unpack like the C++ kernels: for 4 bits,
element ``2k`` is the high nibble of byte ``k``, element ``2k+1`` the low one,
minus 8; for 2 bits, element ``4k+i`` is bits ``2i..2i+1`` of byte ``k``, minus 2.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.cython_ext.errors import ErrorCode, ExecuTorchError
from pyruntime.cython_ext.tensor import ETensor
from pyruntime.kernels.registry import register

F32 = np.dtype(np.float32)
_QUANT_DTYPES = {np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.uint16, np.int32)}
_INT64_MIN = np.int64(-(1 << 63))


def _invalid(op: str, arg: str, expected: str, got) -> ExecuTorchError:
    return ExecuTorchError(ErrorCode.InvalidArgument, f"{op}: {arg}: expected {expected}, got {got}")


def _np(t) -> np.ndarray:
    return t.numpy() if isinstance(t, ETensor) else np.asarray(t)


def _f32(a) -> np.ndarray:
    return np.asarray(a).astype(F32, copy=False)


def _is_float(dt) -> bool:
    dt = np.dtype(dt)
    return dt.kind == "f" or dt.name == "bfloat16"


def _check_dtype_arg(op: str, arg: str, code, t: ETensor, what: str) -> None:
    """A ScalarType argument must name the dtype of ``t`` (C++: ``out.scalar_type() == dtype``)."""
    if code is not None and to_numpy_dtype(code) != t.dtype:
        raise _invalid(op, arg, f"the dtype of {what} ({t.dtype.name})", to_numpy_dtype(code).name)


def _check_quant_out(op: str, input: ETensor, quant_min: int, quant_max: int, dtype, out: ETensor):
    if not _is_float(input.dtype):
        raise _invalid(op, "input", "a floating tensor", input.dtype.name)
    _check_dtype_arg(op, "dtype", dtype, out, "out")
    if out.dtype not in _QUANT_DTYPES:
        raise _invalid(op, "out", "uint8, int8, int16, uint16 or int32", out.dtype.name)
    info = np.iinfo(out.dtype)
    if not info.min <= quant_min <= quant_max <= info.max:
        raise _invalid(op, "quant_min/quant_max", f"a range within {out.dtype.name}",
                       f"[{quant_min}, {quant_max}]")


def _check_dequant(op: str, input: ETensor, dtype, out_dtype, out: ETensor):
    if input.dtype not in _QUANT_DTYPES:
        raise _invalid(op, "input", "uint8, int8, int16, uint16 or int32", input.dtype.name)
    _check_dtype_arg(op, "dtype", dtype, input, "input")
    _check_dtype_arg(op, "out_dtype", out_dtype, out, "out")
    if not _is_float(out.dtype):
        raise _invalid(op, "out", "a floating tensor", out.dtype.name)


def quantize(x: np.ndarray, scale, zero_point, quant_min: int, quant_max: int) -> np.ndarray:
    """ExecuTorch's quantize_val, vectorized; ``scale``/``zero_point`` broadcast against ``x``."""
    inv_scale = F32.type(1.0) / _f32(scale)
    if x.dtype == np.float64:
        scaled = (inv_scale.astype(np.float64) * x).astype(F32)
    else:
        scaled = inv_scale * _f32(x)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.asarray(_f32(np.asarray(zero_point).astype(np.int32)) + np.rint(scaled), F32)
        ok = np.isfinite(r) & (np.abs(r) < 2.0**63)
        q = np.where(ok, r, 0).astype(np.int64)
    q = np.where(ok, q, _INT64_MIN)
    return np.clip(q, quant_min, quant_max)


def dequantize(q: np.ndarray, scale, zero_point) -> np.ndarray:
    """``(q - zero_point) * float(scale)`` in float32."""
    diff = q.astype(np.int64) - np.asarray(zero_point, np.int64)
    return _f32(diff) * _f32(scale)


def _scalar_param(op: str, arg: str, t: ETensor, kind: str):
    a = _np(t).reshape(-1)
    if a.size != 1:
        raise _invalid(op, arg, "a one-element tensor", t.describe())
    if kind == "f" and not _is_float(a.dtype) or kind == "i" and a.dtype.kind not in "iu":
        raise _invalid(op, arg, "a floating tensor" if kind == "f" else "an integer tensor",
                       a.dtype.name)
    return float(a[0]) if kind == "f" else int(a[0])


def _channel_shape(op: str, input: ETensor, axis: int, t: ETensor | None, arg: str):
    """Broadcast shape for per-channel params along ``axis`` (normalized)."""
    n = input.sizes[axis]
    if t is not None and t.numel != n:
        raise _invalid(op, arg, f"{n} elements (input.size({axis}))", t.describe())
    shape = [1] * input.ndim
    shape[axis] = n
    return shape


def _norm_axis(op: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise _invalid(op, "axis", f"a dim of a rank-{ndim} tensor", axis)
    return axis % max(ndim, 1)


# ---- quantize / dequantize ------------------------------------------------------------

@register("quantized_decomposed::quantize_per_tensor.out")
def quantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out):
    _check_quant_out("quantize_per_tensor.out", input, quant_min, quant_max, dtype, out)
    out.write(quantize(_np(input), scale, zero_point, quant_min, quant_max))


@register("quantized_decomposed::quantize_per_tensor.Tensor_out")
def quantize_per_tensor_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out):
    op = "quantize_per_tensor.Tensor_out"
    s = _scalar_param(op, "scale", scale, "f")
    z = _scalar_param(op, "zero_point", zero_point, "i")
    quantize_per_tensor_out(input, s, z, quant_min, quant_max, dtype, out)


@register("quantized_decomposed::dequantize_per_tensor.out")
def dequantize_per_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype, out_dtype, out):
    _check_dequant("dequantize_per_tensor.out", input, dtype, out_dtype, out)
    out.write(dequantize(_np(input), scale, zero_point))


@register("quantized_decomposed::dequantize_per_tensor.Tensor_out")
def dequantize_per_tensor_tensor_out(input, scale, zero_point, quant_min, quant_max, dtype,
                                     out_dtype, out):
    op = "dequantize_per_tensor.Tensor_out"
    s = _scalar_param(op, "scale", scale, "f")
    z = _scalar_param(op, "zero_point", zero_point, "i")
    dequantize_per_tensor_out(input, s, z, quant_min, quant_max, dtype, out_dtype, out)


@register("quantized_decomposed::quantize_per_channel.out")
def quantize_per_channel_out(input, scales, zero_points, axis, quant_min, quant_max, dtype, out):
    op = "quantize_per_channel.out"
    _check_quant_out(op, input, quant_min, quant_max, dtype, out)
    axis = _norm_axis(op, axis, input.ndim)
    shape = _channel_shape(op, input, axis, scales, "scales")
    _channel_shape(op, input, axis, zero_points, "zero_points")
    s = _np(scales).reshape(shape)
    z = _np(zero_points).reshape(shape)
    out.write(quantize(_np(input), s, z, quant_min, quant_max))


@register("quantized_decomposed::dequantize_per_channel.out")
def dequantize_per_channel_out(input, scales, zero_points, axis, quant_min, quant_max, dtype,
                               out_dtype, out):
    op = "dequantize_per_channel.out"
    _check_dequant(op, input, dtype, out_dtype, out)
    axis = _norm_axis(op, axis, input.ndim)
    shape = _channel_shape(op, input, axis, scales, "scales")
    _channel_shape(op, input, axis, zero_points, "zero_points")
    z = 0 if zero_points is None else _np(zero_points).reshape(shape)
    out.write(dequantize(_np(input), _np(scales).reshape(shape), z))


def _token_params(op: str, input: ETensor, scales: ETensor, zero_points: ETensor):
    """Per-token params reshaped to broadcast over the last dim of ``input``."""
    shape = tuple(input.sizes[:-1]) + (1,)
    ntok = int(np.prod(shape))
    for name, t in (("scales", scales), ("zero_points", zero_points)):
        if t.numel != ntok:
            raise _invalid(op, name, f"{ntok} elements (one per token)", t.describe())
    return _np(scales).reshape(shape), _np(zero_points).reshape(shape)


@register("quantized_decomposed::quantize_per_token.out")
def quantize_per_token_out(input, scales, zero_points, quant_min, quant_max, dtype, out):
    op = "quantize_per_token.out"
    _check_quant_out(op, input, quant_min, quant_max, dtype, out)
    s, z = _token_params(op, input, scales, zero_points)
    out.write(quantize(_np(input), s, z, quant_min, quant_max))


@register("quantized_decomposed::dequantize_per_token.out")
def dequantize_per_token_out(input, scales, zero_points, quant_min, quant_max, dtype,
                             output_dtype, out):
    op = "dequantize_per_token.out"
    _check_dequant(op, input, dtype, output_dtype, out)
    s, z = _token_params(op, input, scales, zero_points)
    out.write(dequantize(_np(input), s, z))


# ---- choosing qparams -----------------------------------------------------------------

_SMALL_SCALE = float(np.float32(6.1e-5))


def choose_qparams(xmin, xmax, qmin: int, qmax: int):
    """ExecuTorch's calculate_scale_and_zero_point, vectorized over float32 min/max arrays."""
    xmin = np.minimum(_f32(xmin), F32.type(0))
    xmax = np.maximum(_f32(xmax), F32.type(0))
    span = qmax - qmin
    scale = (xmax.astype(np.float64) - xmin) / span
    with np.errstate(divide="ignore", over="ignore"):
        s32 = scale.astype(F32)
        bad = (s32 == 0) | np.isinf(F32.type(1) / s32)
    scale = np.where(bad, 0.1, scale)
    # Cut off a tiny scale, widening [min, max] to match it.
    small = scale < _SMALL_SCALE
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        amp = F32.type(_SMALL_SCALE) / scale.astype(F32)
    grow_max = F32.type(_SMALL_SCALE) * F32.type(span)
    new_min = np.where(xmin == 0, xmin, np.where(xmax == 0, -grow_max, xmin * amp))
    new_max = np.where(xmin == 0, grow_max, np.where(xmax == 0, xmax, xmax * amp))
    xmin = np.where(small, new_min, xmin).astype(F32)
    xmax = np.where(small, new_max, xmax).astype(F32)
    scale = np.where(small, _SMALL_SCALE, scale)
    # Zero point from whichever end adds the smaller terms, nudged to an integer.
    lo, hi = xmin / scale, xmax / scale
    zp_lo, zp_hi = qmin - lo, qmax - hi
    initial = np.where(abs(qmin) - np.abs(lo) < abs(qmax) - np.abs(hi), zp_lo, zp_hi)
    # A NaN input leaves a NaN here, which the C++ kernel casts to an integer: what x86
    # gives (the integer indefinite, INT64_MIN), written out so no CPU depends on the cast
    nudged = np.clip(np.rint(initial), qmin, qmax)
    zp = np.where(np.isnan(nudged), np.iinfo(np.int64).min, nudged).astype(np.int64)
    return scale, zp


@register("quantized_decomposed::choose_qparams.Tensor_out")
def choose_qparams_tensor_out(input, quant_min, quant_max, eps, dtype, scale_out, zero_point_out):
    op = "choose_qparams.Tensor_out"
    if input.dtype != F32:
        raise _invalid(op, "input", "a float32 tensor", input.dtype.name)
    if quant_min >= quant_max:
        raise _invalid(op, "quant_min", f"less than quant_max ({quant_max})", quant_min)
    for name, t in (("scale_out", scale_out), ("zero_point_out", zero_point_out)):
        if t.numel != 1:
            raise _invalid(op, name, "a one-element tensor", t.describe())
    x = _np(input)
    lo, hi = (x.min(), x.max()) if x.size else (F32.type(0), F32.type(0))
    scale, zp = choose_qparams(lo, hi, quant_min, quant_max)
    scale_out.write(np.full(scale_out.shape, scale))
    zero_point_out.write(np.full(zero_point_out.shape, zp))


@register("quantized_decomposed::choose_qparams_per_token_asymmetric.out")
def choose_qparams_per_token_asymmetric_out(input, dtype, scale_out, zero_point_out):
    op = "choose_qparams_per_token_asymmetric.out"
    if input.dtype != F32:
        raise _invalid(op, "input", "a float32 tensor", input.dtype.name)
    if input.ndim == 0 or input.sizes[-1] == 0:
        raise _invalid(op, "input", "a tensor with a non-empty last dim", input.describe())
    x = _np(input)
    # The C++ kernel always targets int8's range, whatever ``dtype`` says.
    scale, zp = choose_qparams(x.min(axis=-1, keepdims=True), x.max(axis=-1, keepdims=True),
                               -128, 127)
    for t, v in ((scale_out, scale), (zero_point_out, zp)):
        t.write(v.reshape(t.shape) if t.numel == v.size else v)


# ---- quantized add ----------------------------------------------------------------------

@register("quantized_decomposed::add.out")
def add_out(a, a_scale, a_zero_point, a_quant_min, a_quant_max,
            b, b_scale, b_zero_point, b_quant_min, b_quant_max,
            out_scale, out_zero_point, out_quant_min, out_quant_max, out):
    """Dequantize both, add in float32, requantize: what the C++ kernel computes per element."""
    op = "add.out"
    if a.shape != b.shape or a.dtype != b.dtype or a.dtype != out.dtype:
        raise _invalid(op, "a/b/out", "the same shape and dtype",
                       f"{a.describe()}, {b.describe()}, {out.describe()}")
    if a.dtype.kind not in "iu":
        raise _invalid(op, "a", "an integer tensor", a.dtype.name)
    for name, lo, hi in (("a", a_quant_min, a_quant_max), ("b", b_quant_min, b_quant_max),
                         ("out", out_quant_min, out_quant_max)):
        if not 0 <= lo <= hi <= 255:
            raise _invalid(op, f"{name}_quant_min/max", "0 <= min <= max <= 255", f"[{lo}, {hi}]")

    def dq(t, scale, zp):  # (q - zp) * double(float(scale)), rounded to float32
        diff = _np(t).astype(np.int64) - np.int64(np.int32(zp))
        return (diff * np.float64(F32.type(scale))).astype(F32)

    acc = dq(a, a_scale, a_zero_point) + dq(b, b_scale, b_zero_point)
    out.write(quantize(acc, out_scale, np.int32(out_zero_point), out_quant_min, out_quant_max))


# ---- quantized embeddings ----------------------------------------------------------------

def _unpack(rows: np.ndarray, nbit: int) -> np.ndarray:
    """Packed uint8 rows -> signed values, ``8 // nbit`` per byte (see module docstring)."""
    if nbit == 8:
        return rows.astype(np.int32)
    if nbit == 4:
        parts = (rows >> 4, rows & 0x0F)
        offset = 8
    else:
        parts = tuple((rows >> s) & 3 for s in (0, 2, 4, 6))
        offset = 2
    vals = np.stack(parts, axis=-1).reshape(rows.shape[:-1] + (-1,))
    return vals.astype(np.int32) - offset


def _embedding(op, nbit, weight, weight_scales, weight_zero_points, indices, dtype, out):
    w = _np(weight)
    if weight.ndim != 2:
        raise _invalid(op, "weight", "a 2-D tensor", weight.describe())
    if nbit == 8 and w.dtype not in (np.uint8, np.int8) or nbit < 8 and w.dtype != np.uint8:
        raise _invalid(op, "weight", "uint8" if nbit < 8 else "uint8 or int8", w.dtype.name)
    s = _np(weight_scales)
    if s.ndim not in (1, 2) or s.shape[0] != w.shape[0] or not _is_float(s.dtype):
        raise _invalid(op, "weight_scales", f"a float tensor [{w.shape[0]}] or [{w.shape[0]}, groups]",
                       weight_scales.describe())
    z = None if weight_zero_points is None else _np(weight_zero_points)
    if z is not None and z.shape != s.shape:
        raise _invalid(op, "weight_zero_points", f"the shape of weight_scales {list(s.shape)}",
                       list(z.shape))
    _check_dtype_arg(op, "dtype", dtype, out, "out")
    if not _is_float(out.dtype):
        raise _invalid(op, "out", "a floating tensor", out.dtype.name)
    idx = _np(indices)
    if idx.dtype.kind not in "iu":
        raise _invalid(op, "indices", "an integer tensor", idx.dtype.name)
    if idx.size and (idx.min() < 0 or idx.max() >= w.shape[0]):
        raise _invalid(op, "indices", f"values in [0, {w.shape[0]})",
                       f"range [{idx.min()}, {idx.max()}]")
    dim = w.shape[1] * (8 // nbit)
    groups = 1 if s.ndim == 1 else s.shape[1]
    if dim % groups:
        raise _invalid(op, "weight_scales", f"a group count dividing embedding dim {dim}", groups)
    vals = _unpack(w[idx.reshape(-1)], nbit).reshape(-1, groups, dim // groups)
    rs = _f32(s.reshape(w.shape[0], groups)[idx.reshape(-1)])[..., None]
    rz = 0 if z is None else _f32(z.reshape(w.shape[0], groups)[idx.reshape(-1)])[..., None]
    res = (_f32(vals) - rz) * rs
    out.write(res.reshape(idx.shape + (dim,)))


for _nbit, _name in ((8, "byte"), (4, "4bit"), (2, "2bit")):
    def _make(nbit, name):
        @register(f"quantized_decomposed::embedding_{name}.out")
        def emb_out(weight, weight_scales, weight_zero_points, weight_quant_min,
                    weight_quant_max, indices, out):
            _embedding(f"embedding_{name}.out", nbit, weight, weight_scales,
                       weight_zero_points, indices, None, out)

        @register(f"quantized_decomposed::embedding_{name}.dtype_out")
        def emb_dtype_out(weight, weight_scales, weight_zero_points, weight_quant_min,
                          weight_quant_max, indices, dtype, out):
            _embedding(f"embedding_{name}.dtype_out", nbit, weight, weight_scales,
                       weight_zero_points, indices, dtype, out)

        emb_out.__name__ = f"embedding_{name}_out"
        emb_dtype_out.__name__ = f"embedding_{name}_dtype_out"

    _make(_nbit, _name)


# ---- mixed-precision matmuls -----------------------------------------------------------

def _check_mixed(op, input, weight, weight_scales, weight_zero_points):
    if input.ndim != 2 or weight.ndim != 2:
        raise _invalid(op, "input/weight", "2-D tensors", f"{input.describe()}, {weight.describe()}")
    if weight.dtype != np.int8:
        raise _invalid(op, "weight", "int8", weight.dtype.name)
    if not _is_float(input.dtype):
        raise _invalid(op, "input", "a floating tensor", input.dtype.name)
    if weight_zero_points is not None:
        raise _invalid(op, "weight_zero_points", "None (zero points are not supported)",
                       weight_zero_points.describe())


@register("quantized_decomposed::mixed_mm.out")
def mixed_mm_out(input, weight, weight_scales, weight_zero_points, out):
    """``input [m, n] @ (weight [n, p] * scales[n, None])``."""
    op = "mixed_mm.out"
    _check_mixed(op, input, weight, weight_scales, weight_zero_points)
    n = weight.sizes[0]
    if input.sizes[1] != n or weight_scales.shape != (n,):
        raise _invalid(op, "input/weight_scales", f"input [m, {n}] and weight_scales [{n}]",
                       f"{input.describe()}, {weight_scales.describe()}")
    w = _f32(_np(weight)) * _f32(_np(weight_scales))[:, None]
    out.write(_f32(_np(input)) @ w)


@register("quantized_decomposed::mixed_linear.out")
def mixed_linear_out(input, weight, weight_scales, weight_zero_points, dtype, out):
    """``input [m, n] @ (weight [p, n] * group scales).T``; scales are [p] or [p, groups]."""
    op = "mixed_linear.out"
    _check_mixed(op, input, weight, weight_scales, weight_zero_points)
    _check_dtype_arg(op, "dtype", dtype, out, "out")
    p, n = weight.sizes
    if (input.sizes[1] != n or weight_scales.ndim not in (1, 2) or weight_scales.sizes[0] != p
            or weight_scales.numel == 0):
        raise _invalid(op, "input/weight_scales", f"input [m, {n}] and weight_scales [{p}(, groups)]",
                       f"{input.describe()}, {weight_scales.describe()}")
    s = _f32(_np(weight_scales)).reshape(p, -1)
    g = -(-n // s.shape[1])  # group size
    if -(-n // g) != s.shape[1]:
        raise _invalid(op, "weight_scales", f"a group count that splits {n} columns evenly",
                       s.shape[1])
    w = _f32(_np(weight)) * np.repeat(s, g, axis=1)[:, :n]
    out.write(_f32(_np(input)) @ w.T)
