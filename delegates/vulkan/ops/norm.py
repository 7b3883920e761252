"""Normalization and softmax (``rownorm.comp``, a workgroup per row), reductions
(``reduce.comp``), and inference batch norm (a per-channel affine on ``binary.comp``)."""
from __future__ import annotations

from pyruntime.delegates.vulkan.commands import pack
from pyruntime.delegates.vulkan.graph import Tensor, ValueList
from pyruntime.delegates.vulkan.ops import (bad, coalesce, contiguous, nargs, norm_dim, numel, op,
                                  unsupported)


def rownorm(g, x, out, code, R_fn, inner_fn, w=None, b=None, eps=0.0, mean=None, rstd=None,
            stats_shape=None, where="", extra=lambda: ()):
    wt = w if w is not None else x
    bt = b if b is not None else wt
    mt = mean if mean is not None else out
    rt = rstd if rstd is not None else out
    if b is not None and w is not None and b.dtype != w.dtype:
        raise unsupported(where, "weight and bias of different types")
    defines = (("OP", code),)

    def plan():
        out.resize(x.shape, where)
        if mean is not None:
            mean.resize(stats_shape(), where)
            rstd.resize(stats_shape(), where)
        R, inner = R_fn(), inner_fn()
        rows = x.numel // max(R, 1)
        if not rows or not R:
            return []
        p = pack(rows, R, inner, float(eps), int(w is not None), int(b is not None), *extra())
        gx = min(rows, 65535)
        return [g.dispatch("rownorm", defines, [("X", x), ("W", wt), ("B", bt)],
                           [("Y", out), ("MEAN", mt), ("RSTD", rt)], p,
                           (gx, -(-rows // gx), 1), where)]
    return plan


def _opt_tensor(g, vid):
    v = g.values[vid]
    return v if isinstance(v, Tensor) else None


@op("aten.native_layer_norm.default")
def _layer_norm(g, args, where):
    nargs(args, 6, where)
    x = g.t(args[0], where)
    shape = g.ints(args[1], where)
    w, b = _opt_tensor(g, args[2]), _opt_tensor(g, args[3])
    eps = float(g.val(args[4]))
    res = g.val(args[-1])
    if isinstance(res, ValueList):
        if len(res) != 3:
            raise bad(where, f"{len(res)} outputs, expected 3")
        out, mean, rstd = (g.t(v, where) for v in res)
    else:
        out, mean, rstd = g.t(args[-1], where), None, None
    k = len(shape)
    for t in (w, b):
        if t is not None and list(t.dims) != shape:
            raise bad(where, f"weight/bias {list(t.dims)} for normalized shape {shape}")

    def stats():
        return list(x.shape[:len(x.shape) - k]) + [1] * k
    return rownorm(g, x, out, 0, lambda: numel(shape), lambda: 1, w, b, eps, mean, rstd, stats,
                   where)


@op("aten.layer_norm.default")
def _layer_norm_plain(g, args, where):
    nargs(args, 6, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    shape = g.ints(args[1], where)
    return rownorm(g, x, out, 0, lambda: numel(shape), lambda: 1, _opt_tensor(g, args[2]),
                   _opt_tensor(g, args[3]), float(g.val(args[4])), where=where)


@op("et_vk.rms_norm.default")
def _rms_norm(g, args, where):
    nargs(args, 4, where)
    x, w, out = g.t(args[0], where), g.t(args[1], where), g.t(args[-1], where)
    R = w.dims[-1] if w.dims else 1
    return rownorm(g, x, out, 1, lambda: R, lambda: 1, w, None, float(g.val(args[2])),
                   where=where)


@op("aten._softmax.default", "aten._log_softmax.default", "aten.softmax.int",
    "aten.log_softmax.int")
def _softmax(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    code = 3 if "log_softmax" in where else 2

    def dim():
        return norm_dim(g.ival(args[1], where), len(x.shape), where)
    return rownorm(g, x, out, code, lambda: x.shape[dim()] if x.shape else 1,
                   lambda: numel(x.shape[dim() + 1:]), where=where)


# ---- reductions --------------------------------------------------------------------------
REDUCE = {"sum": 0, "mean": 1, "amax": 2, "amin": 3, "argmax": 4, "argmin": 5, "any": 6,
          "all": 7, "prod": 8}


def reduce(g, x, out, code, dims_fn, keepdim, where):
    defines = (("OP", code),)

    def plan():
        nd = len(x.shape)
        dims = dims_fn()
        red = sorted({norm_dim(d, nd, where) for d in dims}) if dims is not None \
            else list(range(nd))
        keep = [d for d in range(nd) if d not in red]
        shape = [1 if d in red else s for d, s in enumerate(x.shape)] if keepdim \
            else [x.shape[d] for d in keep]
        out.resize(shape, where)
        st = contiguous(x.shape)
        ks, (kst,) = coalesce([x.shape[d] for d in keep], [st[d] for d in keep])
        rs, (rst,) = coalesce([x.shape[d] for d in red], [st[d] for d in red])
        if len(ks) > 4 or len(rs) > 4:
            raise unsupported(where, f"reduction of {list(x.shape)} over {red}")
        R = numel([x.shape[d] for d in red])
        n = out.numel
        if not n:
            return []
        p = pack(n, R, len(ks), len(rs), *(ks + [1] * (4 - len(ks))),
                 *(kst + [0] * (4 - len(kst))), *(rs + [1] * (4 - len(rs))),
                 *(rst + [0] * (4 - len(rst))), 1.0 / max(R, 1))
        return [g.dispatch("reduce", defines, [("X", x)], [("Y", out)], p, g.groups(n), where)]
    return plan


def _reduce_builder(code, kind):
    def build(g, args, where):
        nargs(args, 2, where)
        x, out = g.t(args[0], where), g.t(args[-1], where)
        if kind == "all":  # sum.default, any.default, ...
            return reduce(g, x, out, code, lambda: None, False, where)
        if kind == "dim":  # argmax(self, dim?, keepdim), any.dim(self, dim, keepdim)
            def dims():
                return None if g.val(args[1]) is None else [g.ival(args[1], where)]
            keep = len(args) > 3 and bool(g.val(args[2]))
            return reduce(g, x, out, code, dims, keep, where)
        keep = len(args) > 3 and bool(g.val(args[2]))

        def dims():
            d = g.val(args[1])
            return None if d is None or d == [] else g.ints(args[1], where)
        return reduce(g, x, out, code, dims, keep, where)
    return build


for _name, _ov, _kind in (("sum", "dim_IntList", "list"), ("mean", "dim", "list"),
                          ("amax", "default", "list"), ("amin", "default", "list"),
                          ("argmax", "default", "dim"), ("argmin", "default", "dim"),
                          ("any", "dim", "dim"), ("any", "dims", "list"), ("any", "default", "all"),
                          ("all", "default", "all"), ("sum", "default", "all"),
                          ("mean", "default", "all")):
    op(f"aten.{_name}.{_ov}")(_reduce_builder(REDUCE[_name], _kind))


@op("aten._native_batch_norm_legit_no_training.default")
def _batch_norm(g, args, where):
    """y = (x - mean) * rsqrt(var + eps) * w + b per channel (dim 1): folded at load into a
    scale and a shift, then one broadcast multiply-add (binary.comp's AFFINE)."""
    import numpy as np
    from pyruntime.delegates.vulkan.ops.elementwise import binary
    nargs(args, 8, where)
    x = g.t(args[0], where)
    res = g.val(args[-1])
    out = g.t(res[0], where) if isinstance(res, ValueList) else g.t(args[-1], where)
    w, b, rm, rv = (_opt_tensor(g, args[i]) for i in (1, 2, 3, 4))
    eps = float(g.val(args[6]))
    if rm is None or rv is None or any(t is not None and t.const_id < 0 for t in (w, b, rm, rv)):
        raise unsupported(where, "batch norm whose statistics are not constants")
    C = rm.dims[0]
    if len(x.dims) < 2 or x.dims[1] != C or any(
            t is not None and numel(t.dims) != C for t in (w, b, rv)):
        raise bad(where, f"batch norm of {list(x.dims)} with {C}-channel statistics")

    def host(t, default):
        return default if t is None else t.buf.view(t.dtype, C).astype(np.float64)
    scale = host(w, 1.0) / np.sqrt(host(rv, 0.0) + eps)
    shift = host(b, 0.0) - host(rm, 0.0) * scale
    shape = [C] + [1] * (len(x.dims) - 2)
    # fp32 constants and one fused multiply-add: an fp16 graph rounds once, on the store
    scale_t, shift_t = (g.const_tensor(v.astype(np.float32).reshape(shape))
                        for v in (scale, shift))
    return binary(g, x, scale_t, out, 2, where=where, addend=shift_t)
