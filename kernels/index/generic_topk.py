"""Compiled top-k of every dtype (``topk_kernel``): a heap over a total order (value,
then position), so ties and NaN come out as the reference's stable sort gives them.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.index.generic_gather import wrap_dim
from pyruntime.kernels.fast.index_io import ALL, BOOL, E, R_OFF, move, next_row
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, desc, f64_to_bits, is_float_st, lazy,
                             load_f64, load_i64, resize_to, scratch, store_i64)


# ---- topk ---------------------------------------------------------------------------
# words: a walk over the other dims (strides: self, values, indices), then the heap's keys (k)
# and positions (k)
TK_HEAP = R_OFF + 4


@njit(inline="always")
def _key(a, q):
    """An int64 that orders elements as their values do; NaN largest, -0.0 == 0.0."""
    if not is_float_st(a[D_DTYPE]):
        return load_i64(a[D_DATA], a[D_DTYPE], q)
    v = load_f64(a[D_DATA], a[D_DTYPE], q)
    if v != v:
        return np.int64(0x7FFFFFFFFFFFFFFF)
    if v == 0.0:
        return np.int64(0)
    b = f64_to_bits(v)
    return b ^ np.int64(0x7FFFFFFFFFFFFFFF) if b < 0 else b


@njit(inline="always")
def _better(ka, ia, kb, ib, largest):
    if ka == kb:
        return ia < ib
    return ka > kb if largest else ka < kb


@njit
def _sift_down(w, h, k, size, i, largest):
    """Heap of the kept elements with the worst at the root."""
    while True:
        c = 2 * i + 1
        if c >= size:
            return
        if c + 1 < size and _better(w[h + c], w[h + k + c], w[h + c + 1], w[h + k + c + 1],
                                    largest):
            c += 1
        if not _better(w[h + i], w[h + k + i], w[h + c], w[h + k + c], largest):
            return
        for base in (h, h + k):
            t = w[base + i]
            w[base + i] = w[base + c]
            w[base + c] = t
        i = c


@njit
def _topk(a, ov, oi, w, k, d, largest):
    nd = a[D_NDIM]
    n = a[D_SIZES + d] if nd > 0 else 1
    sd = a[D_STRIDES + d] if nd > 0 else 0
    if k > n or (nd == 0 and k != 1):
        return INVALID_ARGUMENT
    for i in range(nd):
        w[TK_HEAP + i] = k if i == d else a[D_SIZES + i]  # (the heap's words, free until used)
    st = resize_to(ov, w[TK_HEAP:], nd)
    if st == OK:
        st = resize_to(oi, w[TK_HEAP:], nd)
    if st != OK:
        return st
    vd = ov[D_STRIDES + d] if nd > 0 else 0
    idd = oi[D_STRIDES + d] if nd > 0 else 0
    m = 0
    rows = 1
    for i in range(nd):
        if i != d:
            w[E + m] = a[D_SIZES + i]
            w[E + 16 + m] = a[D_STRIDES + i]
            w[E + 32 + m] = ov[D_STRIDES + i]
            w[E + 48 + m] = oi[D_STRIDES + i]
            w[E + 64 + m] = 0
            rows *= a[D_SIZES + i]
            m += 1
    if k == 0:
        return OK
    h = TK_HEAP
    w[R_OFF] = 0
    w[R_OFF + 1] = 0
    w[R_OFF + 2] = 0
    for _ in range(rows):
        pa = w[R_OFF]
        pv = w[R_OFF + 1]
        pi = w[R_OFF + 2]
        size = 0
        for j in range(n):
            key = _key(a, pa + j * sd)
            if size < k:  # push, sift up
                c = size
                size += 1
                while c > 0:
                    par = (c - 1) // 2
                    if not _better(w[h + par], w[h + k + par], key, j, largest):
                        break
                    w[h + c] = w[h + par]
                    w[h + k + c] = w[h + k + par]
                    c = par
                w[h + c] = key
                w[h + k + c] = j
            elif _better(key, j, w[h], w[h + k], largest):
                w[h] = key
                w[h + k] = j
                _sift_down(w, h, k, size, 0, largest)
        while size > 1:  # heap sort: the worst goes last
            size -= 1
            for base in (h, h + k):
                t = w[base]
                w[base] = w[base + size]
                w[base + size] = t
            _sift_down(w, h, k, size, 0, largest)
        for j in range(k):
            q = w[h + k + j]
            move(a[D_DATA], a[D_DTYPE], pa + q * sd, ov[D_DATA], ov[D_DTYPE], pv + j * vd)
            store_i64(oi[D_DATA], oi[D_DTYPE], pi + j * idd, q)
        next_row(w, m)
    return OK


def topk_kernel(block):
    k = block[4]
    return _topk(desc(block[0]), desc(block[1]), desc(block[2]),
                 scratch(block[3], TK_HEAP + 2 * k + 16), k, block[5], block[6])


@register_fast("aten::topk.values")
def bind_topk(ctx, self, k, dim, largest, sorted, values, indices):  # noqa: A002 (schema names)
    # sorted=False may return any order; the sorted order is one (the reference's too)
    d = wrap_dim(dim, self.ndim)
    if d is None or isinstance(k, bool) or not isinstance(k, int) or k < 0 \
            or self.dtype not in ALL or self.dtype == BOOL or values.dtype not in ALL \
            or indices.dtype not in ALL or values.ndim != self.ndim \
            or indices.ndim != self.ndim or not isinstance(largest, bool):
        return None
    if k > (self.capacity if self.ndim else 1):
        return None
    return ctx.bind(lazy(topk_kernel), [ctx.desc(self), ctx.desc(values), ctx.desc(indices),
                                        ctx.buffer((TK_HEAP + 2 * k + 16) * 8), k, d,
                                        int(largest)])
