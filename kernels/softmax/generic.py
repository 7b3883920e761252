"""Compiled _softmax/_log_softmax fallback (``softmax_kernel``) for half floats,
non-contiguous layouts and mixed dtypes.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.reduce.generic_cumsum import _lines, _next_line
from pyruntime.kernels.reduce.generic import _is_int, _ok, seg_extreme
from pyruntime.kernels.fast.reduce_io import FLOAT_ST, U, W_WORDS
from pyruntime.kernels.fast.nb import (OK, ST_F64, bits_to_f64, cast_like, desc, lazy, ptr_like, resize_like,
                             scratch, sum_seg)
from pyruntime.kernels.fast.runs import load_run, narrow_wrap, store_run


# ---- softmax / log_softmax ------------------------------------------------------------------

LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10


@njit(inline="always")
def _exp_poly(xd):
    """exp(x) for float32-precision results: a degree-8 polynomial on [-ln2/2, ln2/2]
    (relative error ~2e-10) times 2**n built from bits; branch-free, so loops vectorize.
    NaN -> NaN; below -110 (far under float32's smallest subnormal) it stays ~1e-48."""
    xc = min(max(xd, -110.0), 89.0)
    n = math.floor(xc * LOG2E + 0.5)
    r = (xc - n * LN2_HI) - n * LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (
        1.0 / 120 + r * (1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320))))))))
    e = p * bits_to_f64((np.int64(n) + 1023) << 52)
    return e if xd == xd else xd


@njit(inline="always")
def _sum_exp(buf, n):
    """sum of exp(buf[:n]) in four lanes (no serial dependency chain)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    i = 0
    while i + 4 <= n:
        s0 += _exp_poly(buf[U(i)])
        s1 += _exp_poly(buf[U(i + 1)])
        s2 += _exp_poly(buf[U(i + 2)])
        s3 += _exp_poly(buf[U(i + 3)])
        i += 4
    while i < n:
        s0 += _exp_poly(buf[U(i)])
        i += 1
    return (s0 + s1) + (s2 + s3)


@njit
def _softmax_typed(log, x, o, d, sc, buf, m):
    """Line by line: the line in float64 (exact for every float input), its max, then
    ``x - max`` rounded to the compute type ``m``, exp and sum in float64."""
    nd = x[2]
    n = x[8 + d] if nd > 0 else 1
    xs = x[24 + d] if nd > 0 else 0
    os_ = o[24 + d] if nd > 0 else 0
    lines, nk = _lines(x, o, d, sc)
    wide = x[1] == ST_F64  # float64 input: libm exp; else the float32-grade polynomial
    xb = 0
    ob = 0
    for t in range(lines):
        load_run(buf, 0, x[0], x[1], xb, xs, n)
        mxm = cast_like(seg_extreme(buf, n, True), m)
        for k in range(n):
            buf[U(k)] = np.float64(cast_like(buf[U(k)], m) - mxm)
        if log:
            s = 0.0
            if wide:
                for k in range(n):
                    s += math.exp(buf[U(k)])
            else:
                s = _sum_exp(buf, n)
            ls = math.log(s)
            for k in range(n):
                buf[U(k)] = buf[U(k)] - ls
        else:
            if wide:
                for k in range(n):
                    buf[U(k)] = math.exp(buf[U(k)])
            else:
                for k in range(n):
                    buf[U(k)] = _exp_poly(buf[U(k)])
            s = sum_seg(buf, 0, n)
            for k in range(n):
                buf[U(k)] = buf[U(k)] / s
        store_run(o[0], o[1], ob, os_, n, buf, 0, narrow_wrap)
        xb, ob = _next_line(sc, nk, xb, ob)
    return OK


def softmax_kernel(block):
    log = block[0] != 0
    x = desc(block[1])
    o = desc(block[2])
    d = block[3]
    sc = scratch(block[4], W_WORDS)
    cap = block[5]
    st = resize_like(o, x)
    if st != OK:
        return st
    if x[3] == 0:
        return OK
    n = x[8 + d] if x[2] > 0 else 1
    if n <= cap:
        buf = carray(ptr_like(block[4] + 8 * W_WORDS, np.float64(0)), max(cap, 1))
    else:  # a line longer than at load (dynamic shapes): per-call scratch
        buf = np.empty(n, np.float64)
    if x[1] == ST_F64:
        return _softmax_typed(log, x, o, d, sc, buf, np.float64(0))
    return _softmax_typed(log, x, o, d, sc, buf, np.float32(0))


def _bind_softmax(ctx, log, self, dim, out):
    # half_to_float is ignored, as by the reference (it writes in out's dtype)
    if not _ok(self, out) or self.scalar_type not in FLOAT_ST or out.ndim != self.ndim:
        return None  # non-float input: the reference raises
    n = max(self.ndim, 1)
    if not _is_int(dim) or not -n <= dim < n:
        return None
    dim = int(dim) % n
    cap = self.shape[dim] if self.ndim else 1
    return ctx.bind(lazy(softmax_kernel), [int(log), ctx.desc(self), ctx.desc(out), dim,
                                           ctx.buffer((W_WORDS + cap) * 8), cap])


@register_fast("aten::_softmax.out", fallback=True)
def bind_softmax(ctx, self, dim, half_to_float, out):
    return _bind_softmax(ctx, False, self, dim, out)


@register_fast("aten::_log_softmax.out", fallback=True)
def bind_log_softmax(ctx, self, dim, half_to_float, out):
    return _bind_softmax(ctx, True, self, dim, out)
