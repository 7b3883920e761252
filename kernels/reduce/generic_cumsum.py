"""Compiled cumsum of every dtype (``cumsum_kernel``), along one dim, in the reference's
accumulation type.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.reduce.generic import acc_code, is_int, ok, target_dtype
from pyruntime.kernels.fast.reduce_io import (A_F32, A_F64, CH, RED_WORDS, U, W_KC, W_KN, W_KO,
                                            W_KO2, W_KX, W_WORDS, advance_kept)
from pyruntime.kernels.fast.nb import OK, cast_like, descs, lazy, ptr_like, resize_like, scratch
from pyruntime.kernels.fast.runs import load_run, narrow_wrap, store_run


# ---- cumsum ------------------------------------------------------------------------------

@njit
def start_lines(x, o, d, sc):
    """Lines along dim ``d``: the other dims (with x and out strides; no second out) as
    the kept-dims counter; returns (number of lines, number of counter dims)."""
    nk = 0
    lines = 1
    for i in range(x[D_NDIM]):
        if i != d:
            sc[W_KN + nk] = x[D_SIZES + i]
            sc[W_KX + nk] = x[D_STRIDES + i]
            sc[W_KO + nk] = o[D_STRIDES + i]
            sc[W_KO2 + nk] = 0
            sc[W_KC + nk] = 0
            lines *= x[D_SIZES + i]
            nk += 1
    return lines, nk


@njit
def _cumsum_typed(x, o, d, sc, buf):
    m = buf[0]
    nd = x[D_NDIM]
    n = x[D_SIZES + d] if nd > 0 else 1
    xs = x[D_STRIDES + d] if nd > 0 else 0
    os_ = o[D_STRIDES + d] if nd > 0 else 0
    lines, nk = start_lines(x, o, d, sc)
    xb = 0
    ob = 0
    for t in range(lines):
        acc = cast_like(-0.0, m)
        c = 0
        while c < n:
            k = min(CH, n - c)
            load_run(buf, 0, x[D_DATA], x[D_DTYPE], xb + c * xs, xs, k)
            for i in range(k):
                acc += buf[U(i)]
                buf[U(i)] = acc
            store_run(o[D_DATA], o[D_DTYPE], ob + c * os_, os_, k, buf, 0, narrow_wrap)
            c += k
        xb, ob, _ = advance_kept(sc, nk, xb, ob, 0)
    return OK


def cumsum_kernel(block):
    x, o = descs(block, 0, 2)
    d = block[2]
    acc = block[3]
    sc = scratch(block[4], W_WORDS)
    bufa = block[4] + 8 * W_WORDS
    st = resize_like(o, x)
    if st != OK:
        return st
    if x[D_NUMEL] == 0:
        return OK
    if acc == A_F32:
        return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.float32(0)), CH))
    if acc == A_F64:
        return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.float64(0)), CH))
    return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.int64(0)), CH))


@register_fast("aten::cumsum.out")
def bind_cumsum(ctx, self, dim, dtype, out):
    if not ok(self, out) or not is_int(dim) or out.ndim != self.ndim:
        return None
    n = max(self.ndim, 1)
    if not -n <= dim < n:
        return None
    target = target_dtype(dtype, out)
    if target is None:
        return None
    return ctx.bind(lazy(cumsum_kernel), [ctx.desc(self), ctx.desc(out), int(dim) % n,
                                          acc_code(target), ctx.buffer(RED_WORDS * 8)])
