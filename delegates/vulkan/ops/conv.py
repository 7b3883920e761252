"""Convolution (``conv2d.comp``: 1-D, 2-D, grouped, depthwise, transposed, fused clamp) and
pooling (``pool2d.comp``)."""
from __future__ import annotations

import math

from pyruntime.delegates.vulkan.commands import pack
from pyruntime.delegates.vulkan.graph import Tensor, ValueList
from pyruntime.delegates.vulkan.ops import bad, nargs, op, unsupported


def _pair(v, n, where, what):
    v = list(v)
    if len(v) == 1:
        v = v * n
    if len(v) != n:
        raise bad(where, f"{what} {v} for a {n}-d convolution")
    return v


def conv(g, x, w, bias, out, stride, padding, dilation, transposed, out_pad, groups, lo, hi,
         where, quant=None):
    """``quant``: None for float, else dict(kernel=[KH, KW], oc=OC, ws=Tensor, x_scale, x_zp,
    y_scale, y_zp, layout="conv" | "dw") for ExecuTorch's packed int8 weights."""
    nd = len(w.dims) - 2 if quant is None else 2
    if nd not in (1, 2):
        raise unsupported(where, f"{nd}-d convolution")
    if len(x.dims) != nd + 2:
        raise bad(where, f"input of rank {len(x.dims)} for a {nd}-d convolution")
    stride, padding, dilation = (_pair(v, nd, where, k) for v, k in (
        (stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    out_pad = _pair(out_pad or [0], nd, where, "output_padding")
    if nd == 1:  # a 1-d convolution is a 2-d one with H = 1
        stride, dilation = [1] + stride, [1] + dilation
        padding, out_pad = [0] + padding, [0] + out_pad
    if groups < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise bad(where, f"groups {groups}, stride {stride}, padding {padding}, "
                         f"dilation {dilation}")
    kdims = list(w.dims[2:]) if quant is None else list(quant["kernel"])
    KH, KW = ([1] + kdims) if nd == 1 else kdims
    if quant is not None:
        OC = quant["oc"]
        if quant["layout"] == "dw":  # [KH, KW, OC_pad]
            IC, icg, ocg = OC, 1, 1
        else:  # [OC_pad, K_pad], K ordered (kh, kw, ic)
            IC = x.dims[1]
            icg, ocg = IC // groups, OC // groups
    elif transposed:
        IC, ocg = w.dims[0], w.dims[1]
        OC, icg = ocg * groups, IC // groups
    else:
        OC, icg = w.dims[0], w.dims[1]
        IC, ocg = icg * groups, OC // groups
    if OC % groups or (transposed and IC % groups):
        raise bad(where, f"{OC} output channels in {groups} groups")
    if bias is not None and bias.dims != (OC,):
        raise bad(where, f"bias {list(bias.dims)} for {OC} output channels")
    tile = 4 if ocg % 4 == 0 else 1
    bt = bias if bias is not None else w
    defines = (("TILE_OC", tile),) + ((("TRANSPOSED", 1),) if transposed else ()) + \
        ((("QUANT", 1),) if quant is not None else ())
    if quant is None and transposed:
        wst = (KH * KW, ocg * KH * KW, KW, 1)
    elif quant is None:
        wst = (icg * KH * KW, KH * KW, KW, 1)
    elif quant["layout"] == "dw":
        wst = (1, 0, KW * w.dims[-1], w.dims[-1])
    else:
        wst = (w.dims[-1], 1, KW * icg, icg)
    qp = () if quant is None else (float(quant["x_scale"]), int(quant["x_zp"]),
                                   1.0 / float(quant["y_scale"]), int(quant["y_zp"]))
    ins = [("X", x), ("W", w), ("BIAS", bt)] + ([("WS", quant["ws"])] if quant else [])
    sh, sw = stride
    ph, pw = padding
    dh, dw = dilation

    def plan():
        shape = list(x.shape)
        if nd == 1:
            shape = shape[:2] + [1] + shape[2:]
        N, C, IH, IW = shape
        if C != IC:
            raise bad(where, f"input has {C} channels, the weight expects {IC}")
        if transposed:
            OH = (IH - 1) * sh - 2 * ph + dh * (KH - 1) + out_pad[0] + 1
            OW = (IW - 1) * sw - 2 * pw + dw * (KW - 1) + out_pad[1] + 1
        else:
            OH = (IH + 2 * ph - dh * (KH - 1) - 1) // sh + 1
            OW = (IW + 2 * pw - dw * (KW - 1) - 1) // sw + 1
        if OH < 1 or OW < 1:
            raise bad(where, f"input {list(x.shape)} is too small for the kernel")
        out.resize([N, OC, OW] if nd == 1 else [N, OC, OH, OW], where)
        p = pack(N, IC, IH, IW, OC, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups,
                 int(bias is not None), float(lo), float(hi), *wst, *qp)
        n = N * (OC // tile) * OH * -(-OW // 4)
        return [g.dispatch("conv2d", defines, ins, [("Y", out)], p, g.groups(n), where)]
    return plan


@op("aten.convolution.default", "et_vk.conv_with_clamp.default")
def _convolution(g, args, where):
    nargs(args, 10, where)
    x, w, out = g.t(args[0], where), g.t(args[1], where), g.t(args[-1], where)
    bias = g.values[args[2]]
    bias = bias if isinstance(bias, Tensor) else None
    lo, hi = -math.inf, math.inf
    if "conv_with_clamp" in where:
        nargs(args, 12, where)
        lo, hi = g.fval(args[9], -math.inf), g.fval(args[10], math.inf)
    return conv(g, x, w, bias, out, g.ints(args[3], where), g.ints(args[4], where),
                g.ints(args[5], where), bool(g.val(args[6])), g.ints(args[7], where),
                g.ival(args[8], where), lo, hi, where)


# ---- pooling -----------------------------------------------------------------------------
def _pool_out(size, k, s, p, d, ceil):
    num = size + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= size + p:
        o -= 1
    return o


def pool(g, x, out, idx, kernel, stride, padding, dilation, ceil, is_max, include_pad, divisor,
         where):
    kernel = _pair(kernel, 2, where, "kernel_size")
    stride = _pair(stride or kernel, 2, where, "stride")
    padding = _pair(padding, 2, where, "padding")
    dilation = _pair(dilation, 2, where, "dilation")
    if len(x.dims) not in (3, 4):
        raise bad(where, f"input of rank {len(x.dims)}")
    defines = ((("MAX", 1),) if is_max else ()) + \
        ((("WITH_INDICES", 1),) if idx is not None else ())

    def plan():
        *lead, IH, IW = x.shape
        OH = _pool_out(IH, kernel[0], stride[0], padding[0], dilation[0], ceil)
        OW = _pool_out(IW, kernel[1], stride[1], padding[1], dilation[1], ceil)
        out.resize(lead + [OH, OW], where)
        outs = [("Y", out)]
        if idx is not None:
            idx.resize(lead + [OH, OW], where)
            outs.append(("I", idx))
        NC = 1
        for v in lead:
            NC *= v
        p = pack(NC, IH, IW, OH, OW, *kernel, *stride, *padding, *dilation, int(include_pad),
                 int(divisor or 0))
        n = NC * OH * OW
        return [g.dispatch("pool2d", defines, [("X", x)], outs, p, g.groups(n), where)] if n else []
    return plan


@op("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default")
def _max_pool(g, args, where):
    nargs(args, 3, where)
    x = g.t(args[0], where)
    res = g.val(args[-1])
    idx = None
    if isinstance(res, ValueList):
        if len(res) != 2:
            raise bad(where, f"{len(res)} outputs, expected 2")
        out, idx = g.t(res[0], where), g.t(res[1], where)
        if idx.dtype.name != "int32":
            raise unsupported(where, f"indices of type {idx.dtype.name}")
    else:
        out = g.t(args[-1], where)
    opt = [g.val(a) for a in args[1:-1]] + [None] * 5
    return pool(g, x, out, idx, g.ints(args[1], where),
                g.ints(args[2], where) if opt[1] not in (None, []) else None,
                g.ints(args[3], where) if opt[2] is not None else [0],
                g.ints(args[4], where) if opt[3] is not None else [1],
                bool(opt[4]), True, False, 0, where)


@op("aten.avg_pool2d.default")
def _avg_pool(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    opt = [g.val(a) for a in args[1:-1]] + [None] * 6
    return pool(g, x, out, None, g.ints(args[1], where),
                g.ints(args[2], where) if opt[1] not in (None, []) else None,
                g.ints(args[3], where) if opt[2] is not None else [0], [1, 1],
                bool(opt[3]), False, True if opt[4] is None else bool(opt[4]), opt[5], where)


@op("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool2d.default")
def _adaptive(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    size = g.ints(args[1], where)
    if len(size) == 1:
        size = size * 2
    IH, IW = x.dims[-2:]
    if IH % size[0] or IW % size[1]:
        raise unsupported(where, f"adaptive pooling {list(x.dims)} -> {size} with uneven bins")
    k = [IH // size[0], IW // size[1]]
    return pool(g, x, out, None, k, k, [0], [1], False, False, True, 0, where)
