"""Compiled cumsum of every dtype (``cumsum_kernel``), along one dim, in the reference's
accumulation type.
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.reduce.generic import _acc_code, _is_int, _ok, _target
from pyruntime.kernels.fast.reduce_io import (A_F32, A_F64, CH, RED_WORDS, U, W_KC, W_KN, W_KO, W_KX,
                                            W_WORDS)
from pyruntime.kernels.fast.nb import OK, cast_like, desc, lazy, ptr_like, resize_like, scratch
from pyruntime.kernels.fast.runs import load_run, narrow_wrap, store_run


# ---- cumsum ------------------------------------------------------------------------------

@njit
def _lines(x, o, d, sc):
    """Lines along dim ``d``: the other dims (with x and out strides) as the kept-dims
    counter; returns (number of lines, number of counter dims)."""
    nk = 0
    lines = 1
    for i in range(x[2]):
        if i != d:
            sc[W_KN + nk] = x[8 + i]
            sc[W_KX + nk] = x[24 + i]
            sc[W_KO + nk] = o[24 + i]
            sc[W_KC + nk] = 0
            lines *= x[8 + i]
            nk += 1
    return lines, nk


@njit(inline="always")
def _next_line(sc, nk, xb, ob):
    for j in range(nk - 1, -1, -1):
        sc[W_KC + j] += 1
        xb += sc[W_KX + j]
        ob += sc[W_KO + j]
        if sc[W_KC + j] < sc[W_KN + j]:
            break
        xb -= sc[W_KX + j] * sc[W_KN + j]
        ob -= sc[W_KO + j] * sc[W_KN + j]
        sc[W_KC + j] = 0
    return xb, ob


@njit
def _cumsum_typed(x, o, d, sc, buf):
    m = buf[0]
    nd = x[2]
    n = x[8 + d] if nd > 0 else 1
    xs = x[24 + d] if nd > 0 else 0
    os_ = o[24 + d] if nd > 0 else 0
    lines, nk = _lines(x, o, d, sc)
    xb = 0
    ob = 0
    for t in range(lines):
        acc = cast_like(-0.0, m)
        c = 0
        while c < n:
            k = min(CH, n - c)
            load_run(buf, 0, x[0], x[1], xb + c * xs, xs, k)
            for i in range(k):
                acc += buf[U(i)]
                buf[U(i)] = acc
            store_run(o[0], o[1], ob + c * os_, os_, k, buf, 0, narrow_wrap)
            c += k
        xb, ob = _next_line(sc, nk, xb, ob)
    return OK


def cumsum_kernel(block):
    x = desc(block[0])
    o = desc(block[1])
    d = block[2]
    acc = block[3]
    sc = scratch(block[4], W_WORDS)
    bufa = block[4] + 8 * W_WORDS
    st = resize_like(o, x)
    if st != OK:
        return st
    if x[3] == 0:
        return OK
    if acc == A_F32:
        return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.float32(0)), CH))
    if acc == A_F64:
        return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.float64(0)), CH))
    return _cumsum_typed(x, o, d, sc, carray(ptr_like(bufa, np.int64(0)), CH))


@register_fast("aten::cumsum.out")
def bind_cumsum(ctx, self, dim, dtype, out):
    if not _ok(self, out) or not _is_int(dim) or out.ndim != self.ndim:
        return None
    n = max(self.ndim, 1)
    if not -n <= dim < n:
        return None
    target = _target(dtype, out)
    if target is None:
        return None
    return ctx.bind(lazy(cumsum_kernel), [ctx.desc(self), ctx.desc(out), int(dim) % n,
                                          _acc_code(target), ctx.buffer(RED_WORDS * 8)])
