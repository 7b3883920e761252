"""Compiled reductions: ``sum.IntList_out`` and ``mean.out`` (float32/float64).

Bit-identical to the reference tier (``kernels/reduce/reference.py``, ``_sequential_sum``):
every output element is accumulated in the output dtype, element by element,
in the input's index order over the reduced dims, then (mean) divided by the
count rounded to the output dtype. The loop walks the input once in memory
order and adds each element into its output slot; for a fixed output slot that
visits the reduced indices in row-major order, which is exactly the
sequential order, whatever the dim list. The slots start at -0.0 (the additive
identity that keeps a -0.0 first element), or +0.0 for an empty reduction.

Adjacent dims of the same kind (kept / reduced) are merged and size-1 dims
dropped, so the innermost loop is a contiguous run: a vectorizable
``out[k] += x[k]`` when the innermost dim is kept, or a register accumulation
when it is reduced (several rows at once, for instruction-level parallelism).
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DTYPE, D_NDIM, D_NUMEL, D_SIZES
from pyruntime.cython_ext.dtypes import to_numpy_dtype
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (NOT_SUPPORTED, OK, ST_F32, ST_F64, cast_like, descs, flat,
                                       lazy, resize_to, scratch)

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
R_SUM, R_MEAN = 0, 1
U = np.uint64  # unsigned indices: no negative-index wraparound code in inner loops


@njit(error_model="numpy")  # float x/0 gives inf/nan, as in C
def _reduce_typed(op, x, o, mask, keep, sc, m, cnt):
    nd = x[D_NDIM]
    # output sizes (scratch words 0..15), then resize
    ond = 0
    for i in range(nd):
        if (mask >> i) & 1:
            if keep:
                sc[ond] = 1
                ond += 1
        else:
            sc[ond] = x[D_SIZES + i]
            ond += 1
    st = resize_to(o, sc, ond)
    if st != OK:
        return st
    xv = flat(x, m)
    z = flat(o, m)
    onum = o[D_NUMEL]
    count = 1
    for i in range(nd):
        if (mask >> i) & 1:
            count *= x[D_SIZES + i]
    init = cast_like(-0.0, m) if count > 0 else cast_like(0.0, m)
    for i in range(onum):
        z[i] = init
    if x[D_NUMEL] > 0 and onum > 0:
        # merged dims: sizes at 16.., reduced flags at 32.., out strides at 48..
        ostride = 1
        for i in range(nd - 1, -1, -1):  # out strides of kept dims (contiguous out)
            if (mask >> i) & 1:
                sc[64 + i] = 0
            else:
                sc[64 + i] = ostride
                ostride *= x[D_SIZES + i]
        nm = 0
        for i in range(nd):
            s = x[D_SIZES + i]
            if s == 1:
                continue
            r = (mask >> i) & 1
            if nm > 0 and sc[32 + nm - 1] == r:
                sc[16 + nm - 1] *= s
                sc[48 + nm - 1] = sc[64 + i]  # the inner dim's out stride
            else:
                sc[16 + nm] = s
                sc[32 + nm] = r
                sc[48 + nm] = sc[64 + i]
                nm += 1
        if nm == 0:
            z[0] += xv[0]
        elif nm == 2 and sc[32] == 0 and sc[33] == 1:
            _rows(xv, z, sc[16], sc[17])
        else:
            _general(xv, z, sc, nm)
    if op == R_MEAN:
        for i in range(onum):
            z[i] = z[i] / cnt
    return OK


@njit(inline="always")
def _rows(xv, z, K, R):
    """out[k] += sum of row k (length R), sequentially; eight rows at a time (independent
    dependency chains), then four, then one."""
    k = 0
    while k + 8 <= K:
        b = k * R
        a0 = z[U(k)]
        a1 = z[U(k + 1)]
        a2 = z[U(k + 2)]
        a3 = z[U(k + 3)]
        a4 = z[U(k + 4)]
        a5 = z[U(k + 5)]
        a6 = z[U(k + 6)]
        a7 = z[U(k + 7)]
        for r in range(R):
            a0 += xv[U(b + r)]
            a1 += xv[U(b + R + r)]
            a2 += xv[U(b + 2 * R + r)]
            a3 += xv[U(b + 3 * R + r)]
            a4 += xv[U(b + 4 * R + r)]
            a5 += xv[U(b + 5 * R + r)]
            a6 += xv[U(b + 6 * R + r)]
            a7 += xv[U(b + 7 * R + r)]
        z[U(k)] = a0
        z[U(k + 1)] = a1
        z[U(k + 2)] = a2
        z[U(k + 3)] = a3
        z[U(k + 4)] = a4
        z[U(k + 5)] = a5
        z[U(k + 6)] = a6
        z[U(k + 7)] = a7
        k += 8
    while k < K:
        b = k * R
        a = z[U(k)]
        for r in range(R):
            a += xv[U(b + r)]
        z[U(k)] = a
        k += 1


@njit(inline="always")
def _general(xv, z, sc, nm):
    inner = sc[16 + nm - 1]
    red_inner = sc[32 + nm - 1] == 1
    n_outer = 1
    for j in range(nm - 1):
        n_outer *= sc[16 + j]
        sc[80 + j] = 0  # counter
    ib = 0
    ob = 0
    for t in range(n_outer):
        if red_inner:
            a = z[U(ob)]
            for r in range(inner):
                a += xv[U(ib + r)]
            z[U(ob)] = a
        else:
            for k in range(inner):
                z[U(ob + k)] += xv[U(ib + k)]
        ib += inner
        for j in range(nm - 2, -1, -1):
            sc[80 + j] += 1
            ob += sc[48 + j]
            if sc[80 + j] < sc[16 + j]:
                break
            ob -= sc[48 + j] * sc[16 + j]
            sc[80 + j] = 0


@njit(inline="always")
def _count(x, mask):
    c = 1
    for i in range(x[D_NDIM]):
        if (mask >> i) & 1:
            c *= x[D_SIZES + i]
    return c


def reduce_kernel(block):
    op = block[0]
    x, o = descs(block, 1, 2)
    mask = block[3]
    keep = block[4] != 0
    sc = scratch(block[5], 96)
    if x[D_DTYPE] != o[D_DTYPE]:
        return NOT_SUPPORTED
    if o[D_DTYPE] == ST_F32:
        return _reduce_typed(op, x, o, mask, keep, sc, np.float32(0),
                             np.float32(_count(x, mask)))
    if o[D_DTYPE] == ST_F64:
        return _reduce_typed(op, x, o, mask, keep, sc, np.float64(0),
                             np.float64(_count(x, mask)))
    return NOT_SUPPORTED


def _reduce_mask(dim, ndim):
    """Bit mask of reduced dims, or None for an invalid dim list (the reference raises)."""
    if dim is None:
        dim = []
    if isinstance(dim, int):
        dim = [dim]
    dim = list(dim)
    if ndim == 0:
        return 0 if all(d in (0, -1) for d in dim) else None
    if not dim:
        return (1 << ndim) - 1
    return dims_mask(dim, ndim)


def dims_mask(dims, n):
    """Bit mask of ``dims`` (ints in [-n, n)), or None for a bad or repeated dim."""
    axes = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not -n <= d < n:
            return None
        axes.append(int(d) % n)
    if len(set(axes)) != len(axes):
        return None
    mask = 0
    for a in axes:
        mask |= 1 << a
    return mask


def _bind_reduce(ctx, op, self, dim, keepdim, dtype, out):
    if self.dtype not in FLOATS or out.dtype != self.dtype:
        return None
    if dtype is not None and to_numpy_dtype(dtype) != out.dtype:
        return None
    if not self.is_contiguous() or not out.is_contiguous() or self.ndim > 16:
        return None
    mask = _reduce_mask(dim, self.ndim)
    if mask is None:
        return None
    keep = bool(keepdim)
    ond = self.ndim if keep else self.ndim - bin(mask).count("1")
    if out.ndim != ond:
        return None
    return ctx.bind(lazy(reduce_kernel), [op, ctx.desc(self), ctx.desc(out), mask, int(keep),
                                          ctx.buffer(96 * 8)])


def bind_sum(ctx, self, dim, keepdim, dtype, out):
    return _bind_reduce(ctx, R_SUM, self, dim, keepdim, dtype, out)


def bind_mean(ctx, self, dim, keepdim, dtype, out):
    return _bind_reduce(ctx, R_MEAN, self, dim, keepdim, dtype, out)
