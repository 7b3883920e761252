"""Elementwise ops: unary (``unary.comp``), binary with broadcasting (``binary.comp``),
``where`` (``where.comp``) and fills (``copy.comp`` with FILL)."""
from __future__ import annotations

import math

from pyruntime.delegates.vulkan.commands import pack
from pyruntime.delegates.vulkan.ops import (bad, broadcast_shape, broadcast_strides, coalesce, ct_of, dims8,
                                  nargs, op, unsupported)

# ---- unary --------------------------------------------------------------------------
UNARY = {  # op name -> shader OP code (see unary.comp)
    "aten.relu.default": 1, "aten.sigmoid.default": 3, "aten.tanh.default": 4,
    "aten.silu.default": 7, "aten.hardswish.default": 8, "aten.hardsigmoid.default": 9,
    "aten.exp.default": 10, "aten.log.default": 11, "aten.sqrt.default": 12,
    "aten.rsqrt.default": 13, "aten.neg.default": 14, "aten.abs.default": 15,
    "aten.sin.default": 16, "aten.cos.default": 17, "aten.floor.default": 21,
    "aten.ceil.default": 22, "aten.round.default": 23, "aten.square.default": 24,
    "aten.reciprocal.default": 25, "aten.logical_not.default": 26, "aten.sign.default": 27,
    "aten.erf.default": 28,
}


def unary(g, x, out, code, a=0.0, b=0.0, where="", extra=()):
    """out = f(x) (unary.comp op ``code``); ``a``, ``b``: float parameters, ``extra``: ints."""
    ct, ct_defs = ct_of(out.dtype if code != 26 else x.dtype)
    if ct == "int" and code not in (0, 1, 2, 14, 15, 26, 27):
        ct, ct_defs = "float", ()
    defines = (("OP", code), ("CT", ct)) + ct_defs
    params = (float(a), float(b)) + tuple(int(v) for v in extra)

    def plan():
        out.resize(x.shape, where)
        n = x.numel
        return [g.dispatch("unary", defines, [("X", x)], [("Y", out)], pack(n, *params),
                           g.groups(n), where)] \
            if n else []
    return plan


def _simple(code):
    def build(g, args, where):
        nargs(args, 2, where)
        return unary(g, g.t(args[0], where), g.t(args[-1], where), code, where=where)
    return build


for _name, _code in UNARY.items():
    op(_name)(_simple(_code))


@op("aten.clamp.default", "aten.hardtanh.default")
def _clamp(g, args, where):
    nargs(args, 4, where)
    lo_def, hi_def = (-math.inf, math.inf) if "clamp" in where else (-1.0, 1.0)
    return unary(g, g.t(args[0], where), g.t(args[-1], where), 2, g.fval(args[1], lo_def),
                 g.fval(args[2], hi_def), where)


@op("aten.relu6.default")
def _relu6(g, args, where):
    return unary(g, g.t(args[0], where), g.t(args[-1], where), 2, 0.0, 6.0, where)


@op("aten.gelu.default")
def _gelu(g, args, where):
    nargs(args, 2, where)
    approx = g.val(args[1]) if len(args) > 2 else "none"
    return unary(g, g.t(args[0], where), g.t(args[-1], where), 6 if approx == "tanh" else 5,
                 where=where)


@op("aten.leaky_relu.default")
def _leaky(g, args, where):
    slope = g.fval(args[1], 0.01) if len(args) > 2 else 0.01
    return unary(g, g.t(args[0], where), g.t(args[-1], where), 18, slope, where=where)


@op("aten.elu.default")
def _elu(g, args, where):
    nargs(args, 2, where)
    alpha = g.fval(args[1], 1.0) if len(args) > 2 else 1.0
    if len(args) > 4 and (g.fval(args[2], 1.0) != 1.0 or g.fval(args[3], 1.0) != 1.0):
        raise unsupported(where, "elu with scale or input_scale other than 1")
    return unary(g, g.t(args[0], where), g.t(args[-1], where), 19, alpha, where=where)


@op("aten.pow.Tensor_Scalar")
def _pow_scalar(g, args, where):
    nargs(args, 3, where)
    return unary(g, g.t(args[0], where), g.t(args[-1], where), 20, g.fval(args[1], 1.0),
                 where=where)


# ---- binary -------------------------------------------------------------------------
BINARY = {"add": 0, "sub": 1, "mul": 2, "div": 3, "pow": 4, "maximum": 5, "minimum": 6,
          "eq": 7, "ne": 8, "lt": 9, "le": 10, "gt": 11, "ge": 12, "logical_and": 13,
          "logical_or": 14, "logical_xor": 18, "bitwise_and": 13, "bitwise_or": 14,
          "remainder": 17, "floor_divide": 15}
_COMPARE = {7, 8, 9, 10, 11, 12, 13, 14, 18}


def binary(g, a, b, out, code, alpha=1, where="", scalar=None, qadd=None, addend=None):
    """out = a (op) b; ``b`` is a Tensor, or None with ``scalar`` a Python number.
    ``qadd`` = (a_scale, a_zp, b_scale, b_zp, 1 / y_scale, y_zp): int8 add (q8ta_add).
    ``addend``: a tensor of b's shape, out = a * b + addend (code 2) rounded once."""
    if qadd is not None:
        ct, extra = "float", (("QADD", 1),)
    elif code in _COMPARE:
        dt = a.dtype if b is None or b.dtype == a.dtype else out.dtype
        if b is not None and a.dtype != b.dtype:
            dt = a.dtype if a.dtype.kind == "f" else b.dtype
        ct, extra = ct_of(dt)
        if ct == "int" and scalar is not None and float(scalar) != int(scalar):
            ct, extra = "float", ()
    else:
        ct, extra = ct_of(out.dtype)
    if ct == "int" and code in (3, 4):
        ct, extra = "float", ()
    is_int = ct == "int"

    def word(v):
        return int(v) if is_int else float(v)
    bt = b if b is not None else a
    if addend is not None and (code != 2 or b is None or addend.dims != b.dims):
        raise bad(where, "an addend needs a multiply by a tensor of its shape")
    extra += (("AFFINE", 1),) if addend is not None else ()
    ins = [("A", a), ("B", bt)] + ([("C", addend)] if addend is not None else [])
    defines = (("OP", code), ("CT", ct)) + extra
    head = (word(alpha), int(b is None), word(scalar if scalar is not None else 0))
    tail = () if qadd is None else (float(qadd[0]), int(qadd[1]), float(qadd[2]), int(qadd[3]),
                                    float(qadd[4]), int(qadd[5]))

    def plan():
        shape = broadcast_shape(a.shape, bt.shape if b is not None else (), where=where)
        out.resize(shape, where)
        n = out.numel
        if not n:
            return []
        sa = broadcast_strides(a.shape, shape)
        sb = broadcast_strides(b.shape, shape) if b is not None else [0] * len(shape)
        sz, (sa, sb) = coalesce(shape, sa, sb)
        p = pack(n, len(sz), *head, *dims8(sz, 1), *dims8(sa), *dims8(sb), *tail)
        return [g.dispatch("binary", defines, ins, [("Y", out)], p, g.groups(n), where)]
    return plan


def _binary_builder(code, kind):
    def build(g, args, where):
        nargs(args, 3, where)
        a, out = g.t(args[0], where), g.t(args[-1], where)
        alpha = 1
        if kind in ("Tensor", "Scalar") and code in (0, 1) and len(args) >= 4:
            alpha = g.val(args[2])
            alpha = 1 if alpha is None else alpha
        other = g.values[args[1]] if 0 <= args[1] < len(g.values) else None
        from pyruntime.delegates.vulkan.graph import Tensor
        if isinstance(other, Tensor):
            return binary(g, a, other, out, code, alpha, where)
        s = g.val(args[1])
        if not isinstance(s, (int, float, bool)):
            raise bad(where, f"second operand {s!r} is neither a tensor nor a number")
        return binary(g, a, None, out, code, alpha, where, scalar=s)
    return build


_TS = ("Tensor", "Scalar")
_OVERLOADS = {"add": _TS, "sub": _TS, "mul": _TS, "div": _TS, "pow": ("Tensor_Tensor",),
              "eq": _TS, "ne": _TS, "lt": _TS, "le": _TS, "gt": _TS, "ge": _TS,
              "remainder": _TS, "bitwise_and": ("Tensor",), "bitwise_or": ("Tensor",)}
for _base, _code in BINARY.items():
    for _ov in _OVERLOADS.get(_base, ("default",)):
        op(f"aten.{_base}.{_ov}")(_binary_builder(_code, _ov))


@op("aten.rsub.Scalar")
def _rsub(g, args, where):
    nargs(args, 3, where)
    # other - alpha * self == (self * -alpha) + other
    a, out = g.t(args[0], where), g.t(args[-1], where)
    alpha = g.val(args[2]) if len(args) >= 4 and g.val(args[2]) is not None else 1
    p1 = binary(g, a, None, out, 2, where=where, scalar=-alpha)
    p2 = binary(g, out, None, out, 0, where=where, scalar=g.val(args[1]))
    return lambda: p1() + p2()


@op("aten.div.Tensor_mode")
def _div_mode(g, args, where):
    nargs(args, 4, where)
    mode = g.val(args[2])
    code = {None: 3, "floor": 15, "trunc": 16}.get(mode)
    if code is None:
        raise bad(where, f"rounding_mode {mode!r}")
    a, out = g.t(args[0], where), g.t(args[-1], where)
    from pyruntime.delegates.vulkan.graph import Tensor
    other = g.values[args[1]]
    if isinstance(other, Tensor):
        return binary(g, a, other, out, code, where=where)
    return binary(g, a, None, out, code, where=where, scalar=g.val(args[1]))


# ---- where ----------------------------------------------------------------------------
@op("aten.where.self")
def _where(g, args, where):
    nargs(args, 4, where)
    c, a, b, out = (g.t(args[i], where) for i in (0, 1, 2, 3))
    defines = ()

    def plan():
        shape = broadcast_shape(c.shape, a.shape, b.shape, where=where)
        out.resize(shape, where)
        n = out.numel
        if not n:
            return []
        sz, sts = coalesce(shape, *(broadcast_strides(t.shape, shape) for t in (c, a, b)))
        p = pack(n, len(sz), *dims8(sz, 1), *(w for s in sts for w in dims8(s)))
        return [g.dispatch("where", defines, [("C", c), ("A", a), ("B", b)], [("Y", out)], p,
                           g.groups(n), where)]
    return plan


# ---- fills ----------------------------------------------------------------------------
def fill(g, out, value, shape_fn, where):
    ct, extra = ct_of(out.dtype)
    word = int(value) if ct == "int" else float(value)
    defines = (("FILL", 1),) + extra

    def plan():
        out.resize(shape_fn(), where)
        n = out.numel
        p = pack(n, 1, word, 0, *dims8([n], 1), *dims8([0]), *dims8([1]))
        return [g.dispatch("copy", defines, [], [("Y", out)], p, g.groups(n), where)] if n else []
    return plan


@op("aten.full_like.default")
def _full_like(g, args, where):
    nargs(args, 3, where)
    x, out = g.t(args[0], where), g.t(args[-1], where)
    return fill(g, out, g.val(args[1]), lambda: x.shape, where)


@op("aten.zeros_like.default", "aten.ones_like.default")
def _zeros_like(g, args, where):
    x, out = g.t(args[0], where), g.t(args[-1], where)
    return fill(g, out, 1 if "ones" in where else 0, lambda: x.shape, where)


@op("aten.full.default")
def _full(g, args, where):
    nargs(args, 3, where)
    out = g.t(args[-1], where)
    return fill(g, out, g.val(args[1]), lambda: g.ints(args[0], where), where)


@op("aten.zeros.default", "aten.ones.default")
def _zeros(g, args, where):
    out = g.t(args[-1], where)
    return fill(g, out, 1 if "ones" in where else 0, lambda: g.ints(args[0], where), where)
