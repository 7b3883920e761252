"""int8 ops: ExecuTorch's fused ``et_vk.q8ta_*`` (static per-tensor activations, symmetric
per-output-channel int8 weights) and the quantize / dequantize ops at delegate edges.

Quantization is ExecuTorch's: q = clamp(round_half_even(x * f32(1 / scale)) + zp),
x = (q - zp) * scale. Convolutions and linears accumulate (x - zp) * w in integers
(exact), then scale by x_scale * w_scale[oc], add the float bias, clamp (relu) and
requantize. Packed weight layouts (the partitioner's): conv [OC_pad, K_pad] with K
ordered (kh, kw, ic); depthwise [KH, KW, OC_pad]; linear [N, K].
"""
from __future__ import annotations

import math

from pyruntime.delegates.vulkan.graph import Tensor
from pyruntime.delegates.vulkan.ops import bad, nargs, numel, op, unsupported
from pyruntime.delegates.vulkan.ops.conv import conv
from pyruntime.delegates.vulkan.ops.elementwise import binary, unary
from pyruntime.delegates.vulkan.ops.linalg import mm_dispatch


def _f(g, vid, where, what):
    v = g.val(vid)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise bad(where, f"{what} {v!r} is not a number")
    return float(v)


def _i(g, vid, where, what):
    return g.ival(vid, f"{where} {what}")


def _scale(v, where, what):
    if not (v > 0 and math.isfinite(v)):
        raise bad(where, f"{what} {v} is not a positive finite scale")
    return v


def _qscale(g, vid, where, what, label="scale"):
    """The scale argument ``what``, checked positive and finite (the error says ``label``)."""
    return _scale(_f(g, vid, where, what), where, label)


def _int8(t, where, what):
    if t.dtype.name != "int8":
        raise unsupported(where, f"{what} of type {t.dtype.name} (int8 expected)")
    return t


def _act(g, vid, where):
    a = g.val(vid)
    if a not in ("none", "relu", None):
        raise unsupported(where, f"activation {a!r}")
    return (0.0, math.inf) if a == "relu" else (-math.inf, math.inf)


# The fused int8 convolutions and linears share their first arguments: input, input scale
# and zero point, weights, weight sums, weight scales, output scale and zero point, bias.
def _q8_weighted(g, args, where):
    """(input, weights, weight scales, output, bias or None)."""
    x = _int8(g.t(args[0], where), where, "input")
    w = _int8(g.t(args[3], where), where, "weights")
    ws, out = g.t(args[5], where), _int8(g.t(args[-1], where), where, "output")
    bias = g.values[args[8]]
    return x, w, ws, out, bias if isinstance(bias, Tensor) else None


def _q8_params(g, args, where, ws, labels=("scale", "scale")):
    """The ``quant`` entries of ``mm_dispatch`` and ``conv``: weight scales, activation
    scales and zero points (``labels``: what a bad input / output scale is called)."""
    return dict(ws=ws, x_scale=_qscale(g, args[1], where, "input_scale", labels[0]),
                x_zp=_i(g, args[2], where, "input_zero_point"),
                y_scale=_qscale(g, args[6], where, "output_scale", labels[1]),
                y_zp=_i(g, args[7], where, "output_zero_point"))


@op("et_vk.q8ta_conv2d.default", "et_vk.q8ta_conv2d_pw.default", "et_vk.q8ta_conv2d_dw.default")
def _q8_conv(g, args, where):
    nargs(args, 16, where)
    x, w, ws, out, bias = _q8_weighted(g, args, where)
    kernel = g.ints(args[9], where)
    if len(kernel) != 2 or len(x.dims) != 4 or len(out.dims) != 4:
        raise bad(where, f"kernel {kernel} / input {list(x.dims)}: 2-D convolutions only")
    dw = "conv2d_dw" in where
    if len(w.dims) != (3 if dw else 2):
        raise bad(where, f"packed weights {list(w.dims)}")
    quant = dict(kernel=kernel, oc=out.dims[1], layout="dw" if dw else "conv",
                 **_q8_params(g, args, where, ws, ("input_scale", "output_scale")))
    lo, hi = _act(g, args[14], where)
    groups = _i(g, args[13], where, "groups")
    OC, IC = out.dims[1], x.dims[1]
    if dw and (groups != OC or IC != OC or w.dims[-1] < OC):
        raise bad(where, f"depthwise weights {list(w.dims)} for {IC} -> {OC} channels")
    if not dw and (groups < 1 or IC % groups or OC % groups or w.dims[0] < OC or
                   w.dims[1] < kernel[0] * kernel[1] * (IC // groups)):
        raise bad(where, f"packed weights {list(w.dims)} for {IC} -> {OC} channels, kernel "
                         f"{kernel}, {groups} groups")
    if numel(ws.dims) < OC or (bias is not None and numel(bias.dims) < OC):
        raise bad(where, "weight scales or bias shorter than the output channels")
    return conv(g, x, w, bias, out, g.ints(args[10], where), g.ints(args[11], where),
                g.ints(args[12], where), False, [0], groups, lo, hi, where, quant)


@op("et_vk.q8ta_linear.default", "et_vk.q8ta_linear_gemv.default")
def _q8_linear(g, args, where):
    nargs(args, 11, where)
    x, w, ws, out, bias = _q8_weighted(g, args, where)
    quant = _q8_params(g, args, where, ws)
    lo, hi = _act(g, args[9], where)
    if len(w.dims) != 2:
        raise bad(where, f"weights {list(w.dims)}")
    N = out.dims[-1]
    Kw = w.dims[1]
    if w.dims[0] < N or numel(ws.dims) < N or (bias is not None and numel(bias.dims) < N):
        raise bad(where, f"weights {list(w.dims)} / scales for {N} outputs")

    def plan():
        K = x.shape[-1]
        if K > Kw:
            raise bad(where, f"input {list(x.shape)} wider than the weights {list(w.dims)}")
        M = numel(x.shape[:-1])
        out.resize(list(x.shape[:-1]) + [N], where)
        if not out.numel:
            return []
        return [mm_dispatch(g, x, w, out, M, N, K, (1, 1), (0, 0, 0, K, 1), (0, 0, 0, 1, Kw),
                            bias, (0, 0, 0, 1), lo=lo, hi=hi, where=where, quant=quant)]
    return plan


@op("et_vk.q8ta_add.default")
def _q8_add(g, args, where):
    nargs(args, 10, where)
    a = _int8(g.t(args[0], where), where, "input_a")
    b = _int8(g.t(args[1], where), where, "input_b")
    out = _int8(g.t(args[-1], where), where, "output")
    q = (_qscale(g, args[2], where, "input_a_scale"), _i(g, args[3], where, "input_a_zero_point"),
         _qscale(g, args[4], where, "input_b_scale"), _i(g, args[5], where, "input_b_zero_point"),
         1.0 / _qscale(g, args[6], where, "output_scale"),
         _i(g, args[7], where, "output_zero_point"))
    return binary(g, a, b, out, 0, _f(g, args[8], where, "alpha"), where, qadd=q)


@op("et_vk.q8ta_relu.default")
def _q8_relu(g, args, where):
    nargs(args, 6, where)
    x = _int8(g.t(args[0], where), where, "input")
    out = _int8(g.t(args[-1], where), where, "output")
    return unary(g, x, out, 32, _qscale(g, args[1], where, "input_scale"),
                 1.0 / _qscale(g, args[3], where, "output_scale"), where,
                 extra=(_i(g, args[2], where, "zp"), -128, 127, _i(g, args[4], where, "zp")))


@op("quantized_decomposed.quantize_per_tensor.default")
def _quantize(g, args, where):
    nargs(args, 7, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    scale = _qscale(g, args[1], where, "scale")
    zp, qmin, qmax = (_i(g, args[k], where, n) for k, n in ((2, "zero_point"),
                                                            (3, "quant_min"), (4, "quant_max")))
    return unary(g, x, out, 30, 1.0 / scale, 0.0, where, extra=(zp, qmin, qmax, 0))


@op("quantized_decomposed.dequantize_per_tensor.default")
def _dequantize(g, args, where):
    nargs(args, 7, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    scale = _qscale(g, args[1], where, "scale")
    return unary(g, x, out, 31, scale, 0.0, where,
                 extra=(_i(g, args[2], where, "zero_point"), 0, 0, 0))

