"""Elementwise binders: the argument block of ``anyelem_kernel`` from the instruction's
values (type promotion, compute dtype, casts, scalar operands).
"""
from __future__ import annotations

import ctypes

import numpy as np

from pyruntime.cython_ext import from_numpy_dtype
from pyruntime.kernels.elementwise.reference import cast
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.elementwise.generic import anyelem_kernel
from pyruntime.kernels.fast.nb import ST_BF16, ST_F32, ST_F64, ST_I64, lazy
from pyruntime.kernels.promote import category, compute_dtype


# ---- binders -------------------------------------------------------------------------------
# Each mirrors its reference kernel's dtype decisions; a case the reference refuses (raises)
# is declined so the reference reports it.

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
_CODES = {np.dtype(n): int(from_numpy_dtype(np.dtype(n))) for n in (
    np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32,
    np.float64)}
_CODES[np.dtype(__import__("ml_dtypes").bfloat16)] = ST_BF16


class Scalar:
    """A Python-scalar operand, already cast to the compute dtype."""

    def __init__(self, value):
        self.value = value
        self.ndim = 0
        self.shape = ()


def _code(dt):
    return _CODES[np.dtype(dt)]


def is_tensor(x):
    return hasattr(x, "dim_order")


def supported(*xs):
    return all(x.dtype in _CODES for x in xs if is_tensor(x))


def out_ok(dt, out, *tensors):
    """torch's canCast into ``out``, and ``out``'s rank = the broadcast rank."""
    if category(dt) > category(out.dtype) or not supported(out, *tensors):
        return False
    try:
        shape = np.broadcast_shapes(*(t.shape for t in tensors if t is not None))
    except ValueError:
        return False
    return len(shape) == out.ndim


def _cast_code(x, ct, fpath):
    """How an input is cast to the compute dtype after loading (-1: exact already)."""
    dt = x.dtype
    if fpath:
        return ST_F32 if ct == F32 and dt in (I32, I64, F64) else -1
    return -1 if np.can_cast(dt, ct, "safe") else _code(ct)


def _scalar_desc(ctx, value, fpath):
    """A rank-0 descriptor over a float64 (float path) or int64 word holding ``value``."""
    addr = ctx.buffer(65 * 8)
    words = (ctypes.c_int64 * 65).from_address(addr)
    words[0] = addr + 64 * 8
    words[1] = ST_F64 if fpath else ST_I64
    words[3] = words[4] = 1
    words[64] = ctx.f64(value) if fpath else int(value)
    return addr


def bind_anyelem(ctx, op, out, ins, dt, fpath=None, ct=None, params=(), casts=None, skip=0,
                 extra=0):
    """Block for ``anyelem_kernel``: ``ins`` are ETensors or ``Scalar``s (None: virtual)."""
    ct = compute_dtype(dt) if ct is None else np.dtype(ct)
    if fpath is None:
        fpath = category(ct) == 2
    words = [op, int(fpath), _code(ct), -1 if out.dtype == dt else _code(dt), ctx.desc(out)]
    descs, codes = [], []
    for k in range(3):
        x = ins[k] if k < len(ins) else None
        if isinstance(x, Scalar):
            descs.append(_scalar_desc(ctx, x.value, fpath))
            codes.append(-1)
        elif x is None:
            descs.append(0)
            codes.append(-1)
        else:
            descs.append(ctx.desc(x))
            codes.append(_cast_code(x, ct, fpath) if casts is None or casts[k] is None
                         else casts[k])
    params = list(params) + [0] * (6 - len(params))
    # float path: every parameter as float64 bits; int path: ints as is, floats as bits
    params = [ctx.f64(p) if fpath or isinstance(p, float) else int(p) for p in params]
    return ctx.bind(lazy(anyelem_kernel), words + descs + codes + [skip] + params + [extra])


def scalar_operand(x, ct):
    """A tensor as is; a Python scalar cast to ``ct`` the way the reference casts it."""
    if is_tensor(x):
        return x
    v = cast(x, ct)
    return Scalar(float(v) if category(ct) == 2 else int(v))


def num(v, ct):
    """A bound/parameter as the reference casts it to ``ct`` (float or int)."""
    v = cast(v, ct)
    return float(v) if category(ct) == 2 else int(v)


# Ops with a second binder elsewhere (a typed one, or the complex kernel's): their
# generic binder waits in HELD for the family's choose.py to register the pair.
PAIRED = {f"aten::{n}" for n in (
    "abs.out neg.out relu.out exp.out sqrt.out rsqrt.out sigmoid.out tanh.out logical_not.out "
    "gelu.out hardtanh.out clamp.out add.out add.Scalar_out sub.out mul.out mul.Scalar_out "
    "div.out maximum.out minimum.out where.self_out eq.Scalar_out ne.Scalar_out lt.Scalar_out "
    "le.Scalar_out gt.Scalar_out ge.Scalar_out _conj_physical.out").split()}
HELD: dict = {}


def register(names, fn):
    """Register ``fn`` under ``names`` (or hold it, for the ``PAIRED`` ones); it never
    raises (a failure to bind is a decline)."""
    def binder(ctx, *values):
        try:
            return fn(ctx, *values)
        except Exception:  # noqa: BLE001 - the reference kernel reports bad arguments
            return None
    binder.__name__ = fn.__name__
    binder.__wrapped__ = fn
    for n in [names] if isinstance(names, str) else names:
        if n in PAIRED:
            HELD[n] = binder
        else:
            register_fast(n)(binder)
    return fn


def anyelem_binder(*names):
    return lambda fn: register(names, fn)
