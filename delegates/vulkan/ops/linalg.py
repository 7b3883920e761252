"""Matrix products on ``matmul.comp``: linear, mm, bmm, addmm, matmul (broadcast batches)."""
from __future__ import annotations

import math

from pyruntime.delegates.vulkan.commands import pack
from pyruntime.delegates.vulkan.graph import Tensor
from pyruntime.delegates.vulkan.ops import bad, broadcast_shape, contiguous, nargs, numel, op, unsupported

_TILE = 32  # outputs per workgroup side (8 invocations x 4)


def mm_dispatch(g, a, b, out, M, N, K, batch, sa, sb, bias=None, sbias=(0, 0, 0, 0),
                alpha=1.0, beta=1.0, lo=-math.inf, hi=math.inf, where="", quant=None,
                wscale=None):
    """C[z, m, n] (contiguous) for z = b0 * nb1 + b1 over batch = (nb0, nb1); ``sa`` =
    (off, b0, b1, m, k), ``sb`` = (off, b0, b1, k, n), ``sbias`` = (b0, b1, m, n).
    ``quant``: dict(ws=Tensor, x_scale, x_zp, y_scale, y_zp) for int8 A and B; ``wscale``: a
    per-column scale (int8 B, float A)."""
    nb0, nb1 = batch
    if nb0 * nb1 > g.dev.max_groups[2]:
        raise unsupported(where, f"batch of {nb0 * nb1} matrices exceeds the device's "
                                 f"{g.dev.max_groups[2]} workgroups in z")
    bt = bias if bias is not None else a
    defines = (("QUANT", 1),) if quant else (("WSCALE", 1),) if wscale is not None else ()
    qp = () if not quant else (float(quant["x_scale"]), int(quant["x_zp"]),
                               1.0 / float(quant["y_scale"]), int(quant["y_zp"]))
    p = pack(M, N, K, nb1, *sa, *sb, int(bias is not None), *sbias, float(alpha), float(beta),
             float(lo), float(hi), *qp)
    groups = (-(-N // _TILE), -(-M // _TILE), nb0 * nb1)
    ins = [("A", a), ("B", b), ("BIAS", bt)] + ([("WS", quant["ws"])] if quant else []) + \
        ([("WS", wscale)] if wscale is not None else [])
    return g.dispatch("matmul", defines, ins, [("Y", out)], p, groups, where)


def linear(g, x, w, bias, out, where, lo=-math.inf, hi=math.inf):
    """out[..., n] = x[..., :] . w[n, :] + bias[n] (w: [N, K] as torch stores it)."""
    if len(w.dims) != 2:
        raise bad(where, f"weight of rank {len(w.dims)}, expected 2")
    N, K = w.dims
    if bias is not None and numel(bias.dims) < N:
        raise bad(where, f"bias {list(bias.dims)} for {N} outputs")

    def plan():
        if not x.shape or x.shape[-1] != K:
            raise bad(where, f"input {list(x.shape)} does not end in {K}")
        M = numel(x.shape[:-1])
        out.resize(list(x.shape[:-1]) + [N], where)
        if not out.numel:
            return []
        return [mm_dispatch(g, x, w, out, M, N, K, (1, 1), (0, 0, 0, K, 1), (0, 0, 0, 1, K),
                            bias, (0, 0, 0, 1), lo=lo, hi=hi, where=where)]
    return plan


@op("aten.linear.default")
def _linear(g, args, where):
    nargs(args, 3, where)
    x, w, out = g.t(args[0], where), g.t(args[1], where), g.t(args[-1], where)
    bias = g.values[args[2]] if len(args) > 3 else None
    return linear(g, x, w, bias if isinstance(bias, Tensor) else None, out, where)


def matmul(g, a, b, out, where, bias=None, alpha=1.0, beta=1.0):
    def plan():
        sa_shape, sb_shape = list(a.shape), list(b.shape)
        if not sa_shape or not sb_shape:
            raise bad(where, "matmul of a 0-d tensor")
        squeeze_m, squeeze_n = len(sa_shape) == 1, len(sb_shape) == 1
        if squeeze_m:
            sa_shape = [1] + sa_shape
        if squeeze_n:
            sb_shape = sb_shape + [1]
        M, K = sa_shape[-2:]
        K2, N = sb_shape[-2:]
        if K != K2:
            raise bad(where, f"cannot multiply {list(a.shape)} by {list(b.shape)}")
        batch = list(broadcast_shape(sa_shape[:-2], sb_shape[:-2], where=where))
        shape = batch + ([] if squeeze_m else [M]) + ([] if squeeze_n else [N])
        out.resize(shape, where)
        if not out.numel:
            return []
        while len(batch) > 2 and batch[0] == 1:
            batch = batch[1:]
        if len(batch) > 2:
            raise unsupported(where, f"matmul with {len(batch)} batch dims {batch}")
        bt = [1] * (2 - len(batch)) + batch

        def bstrides(shape):
            st = contiguous(shape)
            lead = shape[:-2]
            pad = len(bt) - len(lead)
            res = []
            for d in range(2):
                k = d - pad
                res.append(0 if k < 0 or lead[k] == 1 else st[k])
            return res, st[-2], st[-1]
        (a0, a1), am, ak = bstrides(sa_shape)
        (b0, b1), bk, bn = bstrides(sb_shape)
        sbias = (0, 0, 0, 0)
        if bias is not None:
            bs = list(bias.shape)
            broadcast_shape(bs, [M, N], where=where)
            if len(bs) > 2 or (len(bs) == 2 and bs[0] not in (1, M)) or bs[-1] not in (1, N):
                raise bad(where, f"bias {bs} for a [{M}, {N}] product")
            sbias = (0, 0, 0 if len(bs) < 2 or bs[-2] == 1 else bs[-1], 0 if bs[-1] == 1 else 1)
        return [mm_dispatch(g, a, b, out, M, N, K, tuple(bt), (0, a0, a1, am, ak),
                            (0, b0, b1, bk, bn), bias, sbias, alpha, beta, where=where)]
    return plan


@op("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def _mm(g, args, where):
    nargs(args, 3, where)
    return matmul(g, g.t(args[0], where), g.t(args[1], where), g.t(args[-1], where), where)


@op("aten.addmm.default")
def _addmm(g, args, where):
    nargs(args, 4, where)
    bias, a, b, out = (g.t(args[i], where) for i in (0, 1, 2, -1))
    beta = g.val(args[3]) if len(args) > 4 and g.val(args[3]) is not None else 1.0
    alpha = g.val(args[4]) if len(args) > 5 and g.val(args[4]) is not None else 1.0
    if len(bias.dims) > 2:
        raise bad(where, f"bias of rank {len(bias.dims)}")
    return matmul(g, a, b, out, where, bias, alpha, beta)
