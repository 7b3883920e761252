"""Compiled gathers along one dim: embedding, index_select, index.Tensor with one index on dim 0.

One kernel moves, per index ``k``, the slice ``src[..., idx[k], ...]`` into its
place in ``out`` with the strided copy engine of ``kernels.shape.typed``
(simplified once, reused for every index), so any element size and dim
order works. Every index is bounds-checked before anything is written; an
out-of-range index returns InvalidArgument (the reference kernel then
explains it).

Block: ``[mode, src, index, out, scratch, elem size, dim, negative ok]``.
``G_TAKE``: out = index.shape + src.shape[1:] (embedding, index on dim 0);
``G_SELECT``: out = src.shape with ``dim`` replaced by index.numel (index_select).
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.copy_engine import (SCRATCH_WORDS, W_DS, W_OUT, W_SS, W_SZ,
                                                copy_simplified, resize_with, scratch, simplify)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, ST_I64, descs, lazy, ptr_like,
                                       resize_to)
from pyruntime.kernels.shape.typed import elem_size

G_TAKE, G_SELECT = 0, 1
INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


def gather_kernel(block):
    mode = block[0]
    x, ix, o = descs(block, 1, 3)
    w = scratch(block[4])
    es = block[5]
    d = block[6]
    neg = block[7]
    nx = x[D_NDIM]
    ni = ix[D_NDIM]
    k_count = ix[D_NUMEL]
    n = x[D_SIZES + d]
    i64 = ptr_like(ix[D_DATA], np.int64(0))
    i32 = ptr_like(ix[D_DATA], np.int32(0))
    wide = ix[D_DTYPE] == ST_I64
    for k in range(k_count):  # validate every index before writing anything
        v = i64[k] if wide else np.int64(i32[k])
        if v < 0 and neg != 0:
            v += n
        if v < 0 or v >= n:
            return INVALID_ARGUMENT
    # the out's sizes; the remaining (non-gathered) dims with their strides on both sides
    nr = 0
    if mode == G_TAKE:
        for j in range(ni):
            w[W_OUT + j] = ix[D_SIZES + j]
        for i in range(1, nx):
            w[W_OUT + ni + i - 1] = x[D_SIZES + i]
        st = resize_to(o, w[W_OUT:], ni + nx - 1)
    else:
        st = resize_with(o, x, d, k_count, w)
    if st != OK:
        return st
    for i in range(nx):
        if i != d:
            w[W_SZ + nr] = x[D_SIZES + i]
            w[W_SS + nr] = x[D_STRIDES + i]
            w[W_DS + nr] = o[D_STRIDES + (ni + i - 1 if mode == G_TAKE else i)]
            nr += 1
    nr = simplify(w, nr)
    if nr < 0 or k_count == 0:
        return OK
    xs = x[D_STRIDES + d]
    for k in range(k_count):
        v = i64[k] if wide else np.int64(i32[k])
        if v < 0:
            v += n
        if mode == G_TAKE:  # out position of index k: unravel k over the index's shape
            r = k
            off = 0
            for j in range(ni - 1, -1, -1):
                s = ix[D_SIZES + j]
                off += (r % s) * o[D_STRIDES + j]
                r //= s
        else:
            off = k * o[D_STRIDES + d]
        copy_simplified(x[D_DATA] + v * xs * es, o[D_DATA] + off * es, w, nr, es)
    return OK


def _bind(ctx, mode, src, index, out, dim, negative):
    es = elem_size(src, out)
    if es is None or src.ndim == 0 or index.dtype not in INDEX_DTYPES \
            or not index.is_contiguous():
        return None
    return ctx.bind(lazy(gather_kernel), [mode, ctx.desc(src), ctx.desc(index), ctx.desc(out),
                                          ctx.buffer(SCRATCH_WORDS * 8), es, dim, int(negative)])


def bind_embedding(ctx, weight, indices, padding_idx, scale_grad_by_freq, sparse, out):
    if weight.ndim != 2 or out.ndim != indices.ndim + 1:
        return None
    return _bind(ctx, G_TAKE, weight, indices, out, 0, False)


def bind_index_select(ctx, self, dim, index, out):
    n = self.ndim
    if n == 0 or index.ndim > 1 or isinstance(dim, bool) or not -n <= dim < n \
            or out.ndim != n:
        return None
    return _bind(ctx, G_SELECT, self, index, out, dim % n, False)


def bind_index(ctx, self, indices, out):
    if len(indices) != 1 or indices[0] is None or self.ndim == 0 \
            or out.ndim != indices[0].ndim + self.ndim - 1:
        return None
    return _bind(ctx, G_TAKE, self, indices[0], out, 0, True)
