"""Compiled _softmax/_log_softmax fallback (``softmax_kernel``) for half floats,
non-contiguous layouts and mixed dtypes.
"""
from __future__ import annotations

import math

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.reduce.generic_cumsum import start_lines
from pyruntime.kernels.reduce.generic import is_int, ok, seg_extreme
from pyruntime.kernels.softmax.typed import exp_poly
from pyruntime.kernels.fast.reduce_io import FLOAT_ST, U, W_WORDS, advance_kept
from pyruntime.kernels.fast.nb import (OK, ST_F64, cast_like, descs, lane_sum, lazy, ptr_like,
                                       resize_like, scratch, sum_seg)
from pyruntime.kernels.fast.runs import load_run, narrow_wrap, store_run


# ---- softmax / log_softmax ------------------------------------------------------------------

@njit(inline="always")
def _exp_of(v, c):
    return exp_poly(v)


_sum_exp = lane_sum(_exp_of)  # sum of exp(buf[b:b+n]) in four lanes


@njit
def _softmax_typed(log, x, o, d, sc, buf, m):
    """Line by line: the line in float64 (exact for every float input), its max, then
    ``x - max`` rounded to the compute type ``m``, exp and sum in float64."""
    nd = x[D_NDIM]
    n = x[D_SIZES + d] if nd > 0 else 1
    xs = x[D_STRIDES + d] if nd > 0 else 0
    os_ = o[D_STRIDES + d] if nd > 0 else 0
    lines, nk = start_lines(x, o, d, sc)
    wide = x[D_DTYPE] == ST_F64  # float64 input: libm exp; else the float32-grade polynomial
    xb = 0
    ob = 0
    for t in range(lines):
        load_run(buf, 0, x[D_DATA], x[D_DTYPE], xb, xs, n)
        mxm = cast_like(seg_extreme(buf, n, True), m)
        for k in range(n):
            buf[U(k)] = np.float64(cast_like(buf[U(k)], m) - mxm)
        if log:
            s = 0.0
            if wide:
                for k in range(n):
                    s += math.exp(buf[U(k)])
            else:
                s = _sum_exp(buf, 0, n, 0)
            ls = math.log(s)
            for k in range(n):
                buf[U(k)] = buf[U(k)] - ls
        else:
            if wide:
                for k in range(n):
                    buf[U(k)] = math.exp(buf[U(k)])
            else:
                for k in range(n):
                    buf[U(k)] = exp_poly(buf[U(k)])
            s = sum_seg(buf, 0, n)
            for k in range(n):
                buf[U(k)] = buf[U(k)] / s
        store_run(o[D_DATA], o[D_DTYPE], ob, os_, n, buf, 0, narrow_wrap)
        xb, ob, _ = advance_kept(sc, nk, xb, ob, 0)
    return OK


def softmax_kernel(block):
    log = block[0] != 0
    x, o = descs(block, 1, 2)
    d = block[3]
    sc = scratch(block[4], W_WORDS)
    cap = block[5]
    st = resize_like(o, x)
    if st != OK:
        return st
    if x[D_NUMEL] == 0:
        return OK
    n = x[D_SIZES + d] if x[D_NDIM] > 0 else 1
    if n <= cap:
        buf = carray(ptr_like(block[4] + 8 * W_WORDS, np.float64(0)), max(cap, 1))
    else:  # a line longer than at load (dynamic shapes): per-call scratch
        buf = np.empty(n, np.float64)
    if x[D_DTYPE] == ST_F64:
        return _softmax_typed(log, x, o, d, sc, buf, np.float64(0))
    return _softmax_typed(log, x, o, d, sc, buf, np.float32(0))


def _bind_softmax(ctx, log, self, dim, out):
    # half_to_float is ignored, as by the reference (it writes in out's dtype)
    if not ok(self, out) or self.scalar_type not in FLOAT_ST or out.ndim != self.ndim:
        return None  # non-float input: the reference raises
    n = max(self.ndim, 1)
    if not is_int(dim) or not -n <= dim < n:
        return None
    dim = int(dim) % n
    cap = self.shape[dim] if self.ndim else 1
    return ctx.bind(lazy(softmax_kernel), [int(log), ctx.desc(self), ctx.desc(out), dim,
                                           ctx.buffer((W_WORDS + cap) * 8), cap])


def bind_softmax(ctx, self, dim, half_to_float, out):
    return _bind_softmax(ctx, False, self, dim, out)


def bind_log_softmax(ctx, self, dim, half_to_float, out):
    return _bind_softmax(ctx, True, self, dim, out)
