"""Compiled creation ops of every dtype: fills (full, ones, zeros, empty, full_like,
scalar_tensor) and ranges (arange, linspace, logspace) computed element by element in
the reference kernel's accumulate type (``kernels/creation/reference.py``).
"""
from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NUMEL
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.shape.generic import ints, ok, fill_pattern
from pyruntime.kernels.fast.move_copy import fill
from pyruntime.kernels.fast.nb import (OK, bf16_to_f64, bits_to_f64, desc, elem_size, f64_to_bf16,
                             f64_to_half, half_to_f64, lazy, resize_like, resize_to, store_f64,
                             store_i64)
from pyruntime.kernels.promote import compute_dtype


# ---- creation: fills and ranges ------------------------------------------------------------
C_FILL, C_EMPTY, C_ARANGE, C_LINSPACE, C_LOGSPACE = range(5)
A_INT, A_F64, A_F32, A_F16, A_BF16 = range(5)  # accumulate types


@njit(inline="always")
def _round_acc(x, kind):
    """A float32 result rounded to the accumulate type (numpy half / ml_dtypes bfloat16 ops
    compute in float32 and round)."""
    if kind == A_F16:
        return np.float32(half_to_f64(f64_to_half(np.float64(x))))
    if kind == A_BF16:
        return np.float32(bf16_to_f64(f64_to_bf16(np.float64(x))))
    return x


@njit
def _linspace_at(i, steps, kind, s0, s1, step):
    """Element ``i``: the first half forward from start, the second backward from end."""
    if kind == A_F64:
        if i < steps // 2:
            return s0 + step * np.float64(i)
        return s1 - step * np.float64(steps - 1 - i)
    f0 = np.float32(s0)
    f1 = np.float32(s1)
    fs = np.float32(step)
    if i < steps // 2:
        return np.float64(_round_acc(f0 + _round_acc(fs * _round_acc(np.float32(i), kind), kind),
                                     kind))
    j = _round_acc(np.float32(steps - 1 - i), kind)
    return np.float64(_round_acc(f1 - _round_acc(fs * j, kind), kind))


@njit
def _range_at(op, kind, i, n, w0, w1, w2, w3):
    """Element ``i`` of a float range: arange (start ``w0``, step ``w1``), linspace (start, end,
    step), logspace (the same and base ``w3``)."""
    if op == C_ARANGE:
        if kind == A_F64:
            return w0 + w1 * np.float64(i)
        return np.float64(np.float32(w0) + np.float32(w1) * np.float32(i))
    if op == C_LINSPACE:
        return _linspace_at(i, n, kind, w0, w1, w2)
    return w3 ** _linspace_at(i, n, A_F64, w0, w1, w2)


def create_kernel(block):
    op = block[0]
    o = desc(block[1])
    like = block[2]
    if op == C_FILL or op == C_EMPTY:
        nd = block[4]
        if like != 0:
            st = resize_like(o, desc(like))
        else:
            st = resize_to(o, carray(block, 5 + nd)[5:], nd)
        if st != OK:
            return st
        if op == C_FILL:
            fill(o[D_DATA], elem_size(o[D_DTYPE]), o[D_NUMEL], block[3], 1)
        return OK
    n = block[3]
    st = resize_to(o, carray(block, 4)[3:], 1)
    if st != OK:
        return st
    dp = o[D_DATA]
    dst = o[D_DTYPE]
    kind = block[4]
    if op == C_ARANGE and kind == A_INT:
        for i in range(n):
            store_i64(dp, dst, i, block[5] + block[6] * i)
        return OK
    w0 = bits_to_f64(block[5])
    w1 = bits_to_f64(block[6])
    w2 = bits_to_f64(block[7]) if op != C_ARANGE else 0.0
    w3 = bits_to_f64(block[8]) if op == C_LOGSPACE else 0.0
    for i in range(n):
        store_f64(dp, dst, i, _range_at(op, kind, i, n, w0, w1, w2, w3))
    return OK


def _bind_fill(ctx, op, out, pattern, size=None, like=None):
    if not ok(out):
        return None
    if like is None:
        if not ints(size, 0, 1 << 50) or len(size) != out.ndim:
            return None
        tail = [len(size)] + list(size)
    else:
        if like.ndim != out.ndim:
            return None
        tail = [out.ndim]
    return ctx.bind(lazy(create_kernel), [op, ctx.desc(out), 0 if like is None else ctx.desc(like),
                                          pattern] + tail)


def _scalar(v) -> bool:
    return isinstance(v, (bool, int, float))


def _full_pattern(value, dt):
    # as the reference: np.full(..., np.asarray(value), compute_dtype(dt)), then out's cast
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        v = np.full((), np.asarray(value), compute_dtype(dt))
    return fill_pattern(v, dt)


@register_fast("aten::full.out")
def bind_full(ctx, size, fill_value, out):
    if not _scalar(fill_value) or not ok(out):
        return None
    return _bind_fill(ctx, C_FILL, out, _full_pattern(fill_value, out.dtype), size)


@register_fast("aten::ones.out")
def bind_ones(ctx, size, out):
    return _bind_fill(ctx, C_FILL, out, fill_pattern(np.ones((), out.dtype), out.dtype), size) \
        if ok(out) else None


@register_fast("aten::zeros.out")
def bind_zeros(ctx, size, out):
    return _bind_fill(ctx, C_FILL, out, 0, size)


@register_fast("aten::empty.out")
def bind_empty(ctx, size, memory_format, out):
    return _bind_fill(ctx, C_EMPTY, out, 0, size) if memory_format in (None, 0, 1) else None


@register_fast("dim_order_ops::_empty_dim_order.out")
def bind_empty_dim_order(ctx, size, dim_order, out):
    if dim_order is not None and (sorted(dim_order) != list(range(len(size)))
                                  or tuple(dim_order) != tuple(out.dim_order)):
        return None
    return _bind_fill(ctx, C_EMPTY, out, 0, size)


def bind_full_like_any(ctx, self, fill_value, memory_format, out):
    if not _scalar(fill_value) or not ok(out):
        return None
    return _bind_fill(ctx, C_FILL, out, _full_pattern(fill_value, out.dtype), like=self)


def bind_scalar_tensor_any(ctx, s, out):
    if not _scalar(s) or not ok(out) or out.ndim != 0:
        return None
    return _bind_fill(ctx, C_FILL, out, fill_pattern(np.asarray(s), out.dtype), [])


def _bind_range(ctx, op, out, n, kind, words):
    if not ok(out) or out.ndim != 1 or not 0 <= n <= (1 << 50):
        return None
    return ctx.bind(lazy(create_kernel), [op, ctx.desc(out), 0, n, kind] + words)


def _bind_arange(ctx, start, end, step, out):
    if not all(_scalar(v) for v in (start, end, step)) or not ok(out):
        return None
    # as the reference (and ATen): start + i * step in the accumulate type; the length from
    # the double values, except that an int64 out sizes from the truncated ones
    dt = out.dtype
    integral = dt.kind in "iub"
    try:
        xs = [int(v) for v in (start, end, step)] if integral else [start, end, step]
    except (OverflowError, ValueError):
        return None
    if xs[2] == 0 or (xs[1] - xs[0]) * xs[2] < 0:
        return None
    try:
        n = math.ceil((xs[1] - xs[0]) / xs[2] if dt == np.int64 else (end - start) / step)
    except (OverflowError, ValueError):
        return None
    if integral:
        if not ints(xs[:1] + xs[2:], -(1 << 63), (1 << 63) - 1):
            return None
        return _bind_range(ctx, C_ARANGE, out, n, A_INT, [xs[0], xs[2]])
    kind = A_F64 if dt.itemsize >= 4 else A_F32
    acc = np.float64 if kind == A_F64 else np.float32
    with np.errstate(all="ignore"):
        words = [ctx.f64(float(acc(xs[0]))), ctx.f64(float(acc(xs[2])))]
    return _bind_range(ctx, C_ARANGE, out, n, kind, words)


@register_fast("aten::arange.out")
def bind_arange(ctx, end, out):
    return _bind_arange(ctx, 0, end, 1, out)


@register_fast("aten::arange.start_out")
def bind_arange_start(ctx, start, end, step, out):
    return _bind_arange(ctx, start, end, step, out)


def _linspace_words(ctx, start, end, steps, dt):
    """(accumulate kind, [start, end, step] words) as the reference computes them."""
    kinds = {np.dtype(np.float32): A_F32, np.dtype(np.float16): A_F16,
             np.dtype(ml_dtypes.bfloat16): A_BF16}
    if dt.kind in "iub":  # the Scalars convert to the out dtype first (wrapping)
        acc = np.float64
        start, end = (int(np.asarray(int(v)).astype(dt)) for v in (start, end))
    else:
        acc = dt.type
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        s0, s1 = acc(start), acc(end)
        step = (s1 - s0) / acc(steps - 1)
    return kinds.get(dt, A_F64), [ctx.f64(float(v)) for v in (s0, s1, step)]


def _tiny_range(ctx, out, steps, value):
    """0 or 1 steps: np.full(steps, value, float64) cast to out's dtype."""
    return _bind_fill(ctx, C_FILL, out, fill_pattern(np.float64(value), out.dtype), [steps])


@register_fast("aten::linspace.out")
def bind_linspace(ctx, start, end, steps, out):
    if not (_scalar(start) and _scalar(end) and ints([steps], 0, 1 << 50)) or not ok(out):
        return None
    dt = out.dtype
    try:
        if steps <= 1:
            v = int(np.asarray(int(start)).astype(dt)) if dt.kind in "iub" else start
            return _tiny_range(ctx, out, steps, v)
        kind, words = _linspace_words(ctx, start, end, steps, dt)
    except (OverflowError, ValueError):
        return None  # the reference kernel reports it
    return _bind_range(ctx, C_LINSPACE, out, steps, kind, words)


@register_fast("aten::logspace.out")
def bind_logspace(ctx, start, end, steps, base, out):
    if not (_scalar(start) and _scalar(end) and _scalar(base) and ints([steps], 0, 1 << 50)) \
            or not ok(out):
        return None
    if steps <= 1:
        with np.errstate(all="ignore"):  # as the reference: an array power
            v = np.power(np.float64(base), np.full(1, start, np.float64))[0]
        return _tiny_range(ctx, out, steps, v)
    _, words = _linspace_words(ctx, start, end, steps, np.dtype(np.float64))
    return _bind_range(ctx, C_LOGSPACE, out, steps, A_F64, words + [ctx.f64(float(base))])
