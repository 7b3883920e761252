"""Elementwise ops on the device: unary math, binary arithmetic with broadcasting,
comparisons, ``where``, fills. One generated kernel per expression and dtype: each
work-item reads its inputs through their strides (broadcast dims have stride 0) and
writes one element of the contiguous out.

Exact where IEEE is (``+ - * /``, comparisons, min/max, selects: the same single
rounding as numpy and the C++ loops, ``FP_CONTRACT OFF``); the transcendentals (exp,
tanh, erf, ...) are the device's, within a few ulp of the C library's
(docs/NUMERICS.md has the measured error)."""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.opencl.api import DTensor, Launch, register_cl, table
from pyruntime.kernels.opencl.device import CL_TYPES

BOOL = np.dtype(np.bool_)
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
INTS = (np.dtype(np.int32), np.dtype(np.int64))


def _source(n_in: int, in_types, out_type: str, expr: str, scalar_type: str | None) -> str:
    ins = "".join(f", __global const {t}* in{i}, long off{i}" for i, t in enumerate(in_types))
    sc = f", {scalar_type} s0, {scalar_type} s1" if scalar_type else ""
    idx = "".join(f"    long i{i} = off{i};\n" for i in range(n_in))
    step = "".join(f"        i{i} += c * meta[{i + 1} * rank + k];\n" for i in range(n_in))
    loads = "".join(f"    {t} x{i} = in{i}[i{i}];\n" for i, t in enumerate(in_types))
    return (f"__kernel void ew(__global {out_type}* out, long ooff{ins}, "
            f"__global const long* meta, int rank{sc}) {{\n"
            f"    long r = get_global_id(0), o = ooff + r;\n{idx}"
            f"    for (int k = rank - 1; k >= 0; --k) {{\n"
            f"        long n = meta[k], c = r % n;\n        r /= n;\n{step}    }}\n"
            f"{loads}    out[o] = ({out_type})({expr});\n}}\n")


def bcast_strides(x: DTensor, shape) -> list | None:
    lead = len(shape) - len(x.sizes)
    if lead < 0:
        return None
    st = [0] * lead
    for i, (n, s) in enumerate(zip(x.sizes, x.strides())):
        if n == shape[lead + i]:
            st.append(s if n != 1 else 0)
        elif n == 1:
            st.append(0)
        else:
            return None
    return st


def launch(dev, out: DTensor, ins, expr: str, scalars=None, scalar_dtype=None):
    """``out = expr(x0, x1, ...)`` elementwise over ``ins`` broadcast to ``out``; the
    scalars ``s0``, ``s1`` in ``scalar_dtype``. None when a shape does not broadcast."""
    if not out.contiguous() or out.dtype not in CL_TYPES:
        return None
    shape = out.sizes
    strides = []
    for x in ins:
        if x.dtype not in CL_TYPES:
            return None
        st = bcast_strides(x, shape)
        if st is None:
            return None
        strides.extend(st)
    n = out.numel
    if n == 0:
        return Launch([])
    st_type = CL_TYPES[np.dtype(scalar_dtype)] if scalar_dtype is not None else None
    src = _source(len(ins), [CL_TYPES[x.dtype] for x in ins], CL_TYPES[out.dtype], expr,
                  st_type)
    meta = table(dev, list(shape) + strides)
    k = dev.kernel(src, "ew")
    args = [out.buf, np.int64(out.off)]
    for x in ins:
        args += [x.buf, np.int64(x.off)]
    args += [meta, np.int32(len(shape))]
    if st_type:
        sc = list(scalars or ()) + [0, 0]
        args += [np.dtype(scalar_dtype).type(sc[0]), np.dtype(scalar_dtype).type(sc[1])]
    k.set_args(*args)
    return Launch([(k, (n,))], [meta])


def _float_like(x, out) -> bool:
    return isinstance(x, DTensor) and isinstance(out, DTensor) and x.dtype in FLOATS \
        and out.dtype == x.dtype


# ---- unary float math -----------------------------------------------------------------
UNARY = {
    "aten::relu.out": "(x0 != x0 || x0 > (T)0) ? x0 : (T)0",  # np.maximum(x, 0)
    "aten::sigmoid.out": "(T)1 / ((T)1 + exp(-x0))",
    "aten::tanh.out": "tanh(x0)",
    "aten::exp.out": "exp(x0)",
    "aten::log.out": "log(x0)",
    "aten::log10.out": "log10(x0)",
    "aten::sqrt.out": "sqrt(x0)",
    "aten::rsqrt.out": "(T)1 / sqrt(x0)",
    "aten::abs.out": "fabs(x0)",
    "aten::neg.out": "-x0",
    "aten::sin.out": "sin(x0)",
    "aten::cos.out": "cos(x0)",
    "aten::reciprocal.out": "(T)1 / x0",
}


# the ops of UNARY also defined for integers, and their integer form
INT_UNARY = {"aten::abs.out": "abs(x0)", "aten::neg.out": "-x0"}


def _unary(name):
    expr = UNARY[name]

    def bind(dev, args):
        x, out = args[0], args[-1]
        if name in INT_UNARY and isinstance(x, DTensor) and isinstance(out, DTensor) \
                and x.dtype in INTS and out.dtype == x.dtype:
            return launch(dev, out, [x], INT_UNARY[name])  # wraps at the minimum as C++
        if not _float_like(x, out):
            return None
        return launch(dev, out, [x], expr.replace("T", CL_TYPES[x.dtype]))
    return bind


for _n in UNARY:
    register_cl(_n)(_unary(_n))


@register_cl("aten::gelu.out")
def gelu(dev, args):
    x, approximate, out = args[0], args[1], args[-1]
    if not _float_like(x, out) or approximate not in (None, "none"):
        return None  # the tanh form stays on the host
    t = CL_TYPES[x.dtype]
    c = f"({t})0.70710678118654752440"
    return launch(dev, out, [x], f"x0 * ({t})0.5 * (({t})1 + erf(x0 * {c}))")


@register_cl("aten::hardtanh.out", "aten::clamp.out")
def hardtanh(dev, args):
    x, lo, hi, out = args[0], args[1], args[2], args[-1]
    if not _float_like(x, out):
        return None
    # np.maximum then np.minimum: a NaN stays, an equal bound (0 vs -0) gives the bound
    t = "x0" if lo is None else "((x0 != x0 || x0 > s0) ? x0 : s0)"
    expr = t if hi is None else f"(({t}) != ({t}) || ({t}) < s1) ? ({t}) : s1"
    return launch(dev, out, [x], expr, [0 if lo is None else lo, 0 if hi is None else hi],
                  x.dtype)


# ---- binary arithmetic ----------------------------------------------------------------
ARITH = {"add": "x0 + x1", "sub": "x0 - x1", "mul": "x0 * x1", "div": "x0 / x1"}


def _arith(op, scalar: bool):
    def bind(dev, args):
        a, b, out = args[0], args[1], args[-1]
        alpha = args[2] if op in ("add", "sub") else 1
        if not isinstance(a, DTensor) or not isinstance(out, DTensor) or a.dtype != out.dtype:
            return None
        dt = a.dtype
        if dt not in FLOATS and not (dt in INTS and op != "div"):
            return None
        if isinstance(alpha, bool) or (dt in INTS and not isinstance(alpha, int)):
            return None
        if scalar:
            if isinstance(b, bool) or not isinstance(b, (int, float)) or \
                    (dt in INTS and not isinstance(b, int)):
                return None
            rhs = "s0" if alpha == 1 else "s0 * s1"
            return launch(dev, out, [a], ARITH[op].replace("x1", f"({rhs})"), [b, alpha], dt)
        if not isinstance(b, DTensor) or b.dtype != dt:
            return None
        rhs = "x1" if alpha == 1 else "(x1 * s1)"
        return launch(dev, out, [a, b], ARITH[op].replace("x1", rhs), [0, alpha], dt)
    return bind


for _op in ARITH:
    register_cl(f"aten::{_op}.out")(_arith(_op, False))
    register_cl(f"aten::{_op}.Scalar_out")(_arith(_op, True))


def _extremum(cmp):
    def bind(dev, args):
        a, b, out = args[0], args[1], args[-1]
        if not (_float_like(a, out) and isinstance(b, DTensor) and b.dtype == a.dtype):
            return None
        # numpy's maximum/minimum: a NaN from either side; of two equal values the second
        return launch(dev, out, [a, b],
                      f"(x0 != x0 || x1 != x1) ? x0 + x1 : (x0 {cmp} x1 ? x0 : x1)")
    return bind


register_cl("aten::maximum.out")(_extremum(">"))
register_cl("aten::minimum.out")(_extremum("<"))


@register_cl("aten::pow.Tensor_Scalar_out")
def pow_scalar(dev, args):
    x, e, out = args[0], args[1], args[-1]
    if not _float_like(x, out) or e != 2:
        return None  # x ** 2 is x * x in numpy and in the C++ (exact); others stay on the host
    return launch(dev, out, [x], "x0 * x0")


def cast(dev, x, out):
    """``out = x`` converted to out's dtype as numpy's ``astype`` converts (to bool:
    non-zero; from bool: 0 or 1; ints to floats and floats to floats round to nearest
    even; ints to ints keep the low bits). Float to int (undefined out of range in C++)
    stays on the host."""
    if not isinstance(x, DTensor) or not isinstance(out, DTensor) or x.dtype not in CL_TYPES:
        return None
    if out.dtype == BOOL:
        return launch(dev, out, [x], "x0 != 0")
    if x.dtype.kind == "f" and out.dtype.kind != "f":
        return None
    return launch(dev, out, [x], "x0")


# ---- comparisons, logic, where -------------------------------------------------------
CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _compare(op, scalar: bool):
    sym = CMP[op]

    def bind(dev, args):
        a, b, out = args[0], args[1], args[-1]
        if not isinstance(a, DTensor) or not isinstance(out, DTensor) or out.dtype != BOOL:
            return None
        dt = a.dtype
        if dt not in FLOATS + INTS:
            return None
        if scalar:
            if isinstance(b, bool) or not isinstance(b, (int, float)) or \
                    (dt in INTS and not isinstance(b, int)):
                return None
            return launch(dev, out, [a], f"x0 {sym} s0", [b], dt)
        if not isinstance(b, DTensor) or b.dtype != dt:
            return None
        return launch(dev, out, [a, b], f"x0 {sym} x1")
    return bind


for _op in CMP:
    register_cl(f"aten::{_op}.Scalar_out")(_compare(_op, True))
    register_cl(f"aten::{_op}.Tensor_out")(_compare(_op, False))


@register_cl("aten::logical_not.out")
def logical_not(dev, args):
    x, out = args[0], args[-1]
    if not isinstance(x, DTensor) or not isinstance(out, DTensor) or out.dtype != BOOL:
        return None
    return launch(dev, out, [x], "x0 == 0")


@register_cl("aten::where.self_out")
def where(dev, args):
    c, a, b, out = args[0], args[1], args[2], args[-1]
    if not all(isinstance(t, DTensor) for t in (c, a, b, out)) or c.dtype != BOOL \
            or not (a.dtype == b.dtype == out.dtype):
        return None
    return launch(dev, out, [c, a, b], "x0 ? x1 : x2")


# ---- fills ----------------------------------------------------------------------------
def _fill(dev, out, value):
    if not isinstance(out, DTensor) or isinstance(value, DTensor):
        return None
    dt = out.dtype
    if dt == BOOL:
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            return None
        value, sdt = int(value), np.dtype(np.int64)
    elif dt in FLOATS:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        sdt = dt
    elif dt in CL_TYPES and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dt)
        if not info.min <= value <= info.max:
            return None
        sdt = np.dtype(np.int64)
    else:
        return None
    return launch(dev, out, [], "s0", [value], sdt)


@register_cl("aten::full_like.out")
def full_like(dev, args):
    return _fill(dev, args[-1], args[1])


@register_cl("aten::full.out")
def full(dev, args):
    return _fill(dev, args[-1], args[1])


@register_cl("aten::scalar_tensor.out")
def scalar_tensor(dev, args):
    return _fill(dev, args[-1], args[0])


@register_cl("aten::arange.start_out", "aten::arange.out")
def arange(dev, args):
    """``start + i * step`` as the reference computes it: in int64 for an int64 out (the
    Scalars truncated), in double for float outs, then rounded once."""
    out = args[-1]
    start, end, step = (0, args[0], 1) if len(args) == 2 else args[:3]
    if not isinstance(out, DTensor) or any(isinstance(v, (bool, DTensor)) or
                                           not isinstance(v, (int, float))
                                           for v in (start, end, step)):
        return None
    if out.dtype == np.int64:
        start, end, step = int(start), int(end), int(step)
        acc = np.dtype(np.int64)
    elif out.dtype in FLOATS and dev.info.fp64:
        acc = np.dtype(np.float64)
    else:
        return None
    if step == 0 or out.sizes != (-(-(end - start) // step) if acc.kind == "i" else
                                  int(np.ceil((end - start) / step)),):
        return None
    return launch(dev, out, [], "s0 + s1 * (ACC)get_global_id(0)".replace(
        "ACC", CL_TYPES[acc]), [start, step], acc)
