"""More of the partitioner's registry: resize (``resize.comp``), pixel shuffle and unfold
(strided copies), group norm, arange / scalar_tensor / copy, hardshrink, log10,
bitwise_not, int8-weight linear (``_weight_int8pack_mm``)."""
from __future__ import annotations

import math

from pyruntime.delegates.vulkan.commands import pack
from pyruntime.delegates.vulkan.graph import Tensor, ValueList
from pyruntime.delegates.vulkan.ops import (bad, broadcast_shape, broadcast_strides, contiguous, ct_of,
                                  dims8, nargs, norm_dim, numel, op, unsupported)
from pyruntime.delegates.vulkan.ops.elementwise import unary
from pyruntime.delegates.vulkan.ops.linalg import mm_dispatch
from pyruntime.delegates.vulkan.ops.norm import rownorm
from pyruntime.delegates.vulkan.ops.shape import copy, view_copy, view_op


@op("aten.hardshrink.default")
def _hardshrink(g, args, where):
    nargs(args, 2, where)
    lam = g.val(args[1]) if len(args) > 2 and g.val(args[1]) is not None else 0.5
    return unary(g, g.t(args[0], where), g.t(args[-1], where), 33, float(lam), where=where)


@op("aten.log10.default")
def _log10(g, args, where):
    return unary(g, g.t(args[0], where), g.t(args[-1], where), 34, where=where)


@op("aten.bitwise_not.default")
def _bitwise_not(g, args, where):
    x, out = g.t(args[0], where), g.t(args[-1], where)
    return unary(g, x, out, 26 if x.dtype.name == "bool" else 35, where=where)


def _fill_range(g, out, args_fn, shape_fn, where):
    """out[i] = start + i * step, ``args_fn() -> (start, step)`` read at plan time (a SymInt
    may change between executions)."""
    ct, defs = ct_of(out.dtype)
    conv = int if ct == "int" else float
    defines = (("FILL", 1),) + defs

    def plan():
        start, step = args_fn()
        out.resize(shape_fn(), where)
        n = out.numel
        p = pack(n, 1, conv(start), 0, *dims8([n], 1), conv(step), *dims8([0])[1:],
                 *dims8([1]))
        return [g.dispatch("copy", defines, [], [("Y", out)], p, g.groups(n), where)] if n else []
    return plan


@op("aten.arange.start_step")
def _arange(g, args, where):
    nargs(args, 4, where)
    out = g.t(args[-1], where)

    def bounds():  # start, end and step may be SymInts
        start, end = g.val(args[0]), g.val(args[1])
        step = g.val(args[2]) if g.val(args[2]) is not None else 1
        if not all(isinstance(v, (int, float)) for v in (start, end, step)) or step == 0:
            raise bad(where, f"arange({start}, {end}, {step})")
        return start, end, step

    def shape():
        start, end, step = bounds()
        return [max(0, math.ceil((end - start) / step))]
    bounds()
    return _fill_range(g, out, lambda: bounds()[::2], shape, where)


@op("aten.scalar_tensor.default")
def _scalar_tensor(g, args, where):
    out = g.t(args[-1], where)
    return _fill_range(g, out, lambda: (g.val(args[0]), 0), lambda: list(out.dims), where)


@op("aten.copy.default")
def _copy(g, args, where):
    nargs(args, 3, where)
    x, src, out = g.t(args[0], where), g.t(args[1], where), g.t(args[-1], where)

    def plan():
        shape = list(x.shape)
        if tuple(broadcast_shape(src.shape, shape, where=where)) != tuple(shape):
            raise bad(where, f"cannot copy {list(src.shape)} into {shape}")
        out.resize(shape, where)
        return [copy(g, src, out, shape, broadcast_strides(src.shape, shape), where=where)] \
            if out.numel else []
    return plan


@op("aten.pixel_shuffle.default")
def _pixel_shuffle(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    r = g.ival(args[1], where)
    if r < 1:
        raise bad(where, f"upscale factor {r!r}")

    def layout():
        if len(x.shape) != 4 or x.shape[1] % (r * r):
            raise bad(where, f"pixel_shuffle of {list(x.shape)} by {r}")
        N, C, H, W = x.shape
        c = C // (r * r)
        # out viewed as [N, c, H, r, W, r] reads in[n, c * r * r + i * r + j, h, w]
        strides = [C * H * W, r * r * H * W, W, r * H * W, 1, H * W]
        return [N, c, H * r, W * r], strides, 0, [N, c, H, r, W, r]
    return view_copy(g, x, out, layout, where)


@view_op("aten.unfold_copy.default", n_args=5)
def _unfold(g, args, x, where):
    nd = len(x.shape)
    d = norm_dim(g.ival(args[1], where), nd, where)
    size, step = g.ival(args[2], where), g.ival(args[3], where)
    if step < 1 or not 0 <= size <= x.shape[d]:
        raise bad(where, f"unfold size {size} step {step} of dim size {x.shape[d]}")
    n = (x.shape[d] - size) // step + 1
    shape = list(x.shape)
    shape[d] = n
    st = contiguous(x.shape)
    strides = list(st)
    strides[d] = st[d] * step
    return shape + [size], strides + [st[d]], 0


def _size_arg(g, vid, where):
    v = g.val(vid)
    return None if v is None else g.ints(vid, where)


@op("aten.upsample_nearest2d.vec", "aten.upsample_bilinear2d.vec")
def _upsample(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    nearest = "nearest" in where
    _size_arg(g, args[1], where)  # checked now, read at plan time: sizes may be SymInts
    align = False if nearest else bool(g.val(args[2]))
    sv = g.val(args[2 if nearest else 3]) if len(args) > (3 if nearest else 4) else None
    scales = None if sv is None else [float(v) for v in sv]
    defines = (("NEAREST", 1),) if nearest else ()

    def plan():
        if len(x.shape) != 4:
            raise bad(where, f"input {list(x.shape)}")
        N, C, IH, IW = x.shape
        size = _size_arg(g, args[1], where)
        if size is not None:
            OH, OW = size
        elif scales is not None:
            OH, OW = int(math.floor(IH * scales[0])), int(math.floor(IW * scales[1]))
        else:
            raise bad(where, "neither output_size nor scale_factors")
        if OH < 1 or OW < 1:
            raise bad(where, f"output size {[OH, OW]}")
        out.resize([N, C, OH, OW], where)

        def scale(i, o, k):
            if align:
                return (i - 1) / (o - 1) if o > 1 else 0.0
            return 1.0 / scales[k] if scales is not None and scales[k] > 0 else i / o
        p = pack(N * C, IH, IW, OH, OW, scale(IH, OH, 0), scale(IW, OW, 1), int(align))
        n = out.numel
        return [g.dispatch("resize", defines, [("X", x)], [("Y", out)], p, g.groups(n),
                           where)] if n else []
    return plan


@op("aten.native_group_norm.default")
def _group_norm(g, args, where):
    nargs(args, 9, where)
    x = g.t(args[0], where)
    w, b = (g.values[args[i]] for i in (1, 2))
    w, b = (t if isinstance(t, Tensor) else None for t in (w, b))
    G, eps = g.ival(args[6], where), float(g.val(args[7]))
    res = g.val(args[-1])
    if not isinstance(res, ValueList) or len(res) != 3:
        raise bad(where, "expected three outputs")
    out, mean, rstd = (g.t(v, where) for v in res)
    C = x.dims[1] if len(x.dims) > 1 else 0
    if G < 1 or C % G or any(
            t is not None and numel(t.dims) != C for t in (w, b)):
        raise bad(where, f"group norm of {list(x.dims)} in {G} groups")
    return rownorm(g, x, out, 4, lambda: (C // G) * numel(x.shape[2:]), lambda: 1, w, b, eps,
                   mean, rstd, lambda: [x.shape[0], G], where,
                   extra=lambda: (max(numel(x.shape[2:]), 1), G))


@op("aten._weight_int8pack_mm.default")
def _int8pack_mm(g, args, where):
    nargs(args, 4, where)
    x, w, s, out = (g.t(args[i], where) for i in (0, 1, 2, -1))
    if w.dtype.name != "int8" or len(w.dims) != 2 or numel(s.dims) < w.dims[0]:
        raise unsupported(where, f"weights {w.dtype.name}{list(w.dims)}, scales {list(s.dims)}")
    N, K = w.dims

    def plan():
        if len(x.shape) != 2 or x.shape[1] != K:
            raise bad(where, f"input {list(x.shape)} for weights [{N}, {K}]")
        M = x.shape[0]
        out.resize([M, N], where)
        return [mm_dispatch(g, x, w, out, M, N, K, (1, 1), (0, 0, 0, K, 1), (0, 0, 0, 1, K),
                            where=where, wscale=s)] if out.numel else []
    return plan
