"""Compiled masked_select, masked_scatter, nonzero and repeat_interleave of every dtype
(``mask_kernel``): outs sized at run time.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.index_io import ALL, E, MASK, R_OFF, move, next_row, start_rows
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, desc, is_contiguous, is_float_st, lazy,
                                       load_f64, load_i64, offset_of, ptr_like, resize_to, scratch,
                                       store_i64)


# ---- masks and run-time-sized outs --------------------------------------------------
K_SELECT, K_SCATTER, K_NONZERO, K_REPEAT = range(4)
# words: a row walk over the broadcast shape (strides: self, mask, out), then out sizes
MK_OUT = R_OFF + 4
MK_WORDS = MK_OUT + 4


@njit(inline="always")
def _nonzero_at(a, q):
    if is_float_st(a[D_DTYPE]):
        return load_f64(a[D_DATA], a[D_DTYPE], q) != 0.0
    return load_i64(a[D_DATA], a[D_DTYPE], q) != 0


@njit
def _masked(op, a, mk, src, o, w):
    na = a[D_NDIM]
    nm = mk[D_NDIM]
    nd = max(na, nm) if op != K_NONZERO else na
    total = 1
    for i in range(nd):
        ia = i - (nd - na)
        im = i - (nd - nm)
        da = a[D_SIZES + ia] if ia >= 0 else 1
        dm = mk[D_SIZES + im] if im >= 0 and op != K_NONZERO else 1
        if da != dm and da != 1 and dm != 1:
            return INVALID_ARGUMENT
        w[E + i] = da if dm == 1 else dm
        w[E + 16 + i] = a[D_STRIDES + ia] if ia >= 0 and da != 1 else 0
        w[E + 32 + i] = mk[D_STRIDES + im] if im >= 0 and dm != 1 and op != K_NONZERO else 0
        w[E + 48 + i] = 0
        w[E + 64 + i] = 0
        total *= w[E + i]
    m8 = ptr_like(mk[D_DATA], np.uint8(0))
    rows, ln = start_rows(w, nd)
    last = max(nd, 1) - 1
    s0 = w[E + 16 + last]
    s1 = w[E + 32 + last]
    cnt = 0
    for _ in range(rows):
        b0 = w[R_OFF]
        b1 = w[R_OFF + 1]
        for j in range(ln):
            if op == K_NONZERO:
                if _nonzero_at(a, b0 + j * s0):
                    cnt += 1
            elif m8[b1 + j * s1] != 0:
                cnt += 1
        next_row(w, last)
    if op == K_SELECT:
        w[MK_OUT] = cnt
        st = resize_to(o, w[MK_OUT:], 1)
    elif op == K_NONZERO:
        w[MK_OUT] = cnt
        w[MK_OUT + 1] = nd
        st = resize_to(o, w[MK_OUT:], 2)
    else:
        if src[D_NUMEL] < cnt:
            return INVALID_ARGUMENT
        st = resize_to(o, w[E:], nd)
        for i in range(nd):
            w[E + 48 + i] = o[D_STRIDES + i]
    if st != OK:
        return st
    rows, ln = start_rows(w, nd)
    s2 = w[E + 48 + last]
    q = 0
    dense = is_contiguous(src)
    for _ in range(rows):
        b0 = w[R_OFF]
        b1 = w[R_OFF + 1]
        b2 = w[R_OFF + 2]
        for j in range(ln):
            p0 = b0 + j * s0
            if op == K_NONZERO:
                if _nonzero_at(a, p0):
                    for i in range(nd):
                        store_i64(o[D_DATA], o[D_DTYPE], q * o[D_STRIDES] + i * o[D_STRIDES + 1],
                                  j if i == last else w[E + 64 + i])
                    q += 1
            elif m8[b1 + j * s1] != 0:
                if op == K_SELECT:
                    move(a[D_DATA], a[D_DTYPE], p0, o[D_DATA], o[D_DTYPE], q * o[D_STRIDES])
                else:
                    move(src[D_DATA], src[D_DTYPE], q if dense else offset_of(src, q), o[D_DATA],
                         o[D_DTYPE], b2 + j * s2)
                q += 1
            elif op == K_SCATTER:
                move(a[D_DATA], a[D_DTYPE], p0, o[D_DATA], o[D_DTYPE], b2 + j * s2)
        next_row(w, last)
    return OK


@njit
def _repeat(r, o, w, want):
    n = r[D_NUMEL] if r[D_NDIM] == 1 else 0
    total = 0
    for i in range(n):
        c = load_i64(r[D_DATA], r[D_DTYPE], i * r[D_STRIDES])
        if c < 0:
            return INVALID_ARGUMENT
        total += c
    if want >= 0 and want != total:
        return INVALID_ARGUMENT
    w[E] = total
    st = resize_to(o, w[E:], 1)
    if st != OK:
        return st
    q = 0
    for i in range(n):
        for _ in range(load_i64(r[D_DATA], r[D_DTYPE], i * r[D_STRIDES])):
            store_i64(o[D_DATA], o[D_DTYPE], q * o[D_STRIDES], i)
            q += 1
    return OK


def mask_kernel(block):
    op = block[0]
    a = desc(block[1])
    o = desc(block[4])
    w = scratch(block[5], MK_WORDS)
    if op == K_REPEAT:
        return _repeat(a, o, w, block[2])
    mk = desc(block[2]) if block[2] != 0 else a
    src = desc(block[3]) if block[3] != 0 else a
    return _masked(op, a, mk, src, o, w)


def _bind_mask(ctx, op, self, mask, source, out, extra=0):
    if self.dtype not in ALL or out.dtype not in ALL:
        return None
    words = [op, ctx.desc(self), extra, 0, ctx.desc(out), ctx.buffer(MK_WORDS * 8)]
    if mask is not None:
        if mask.dtype not in MASK:
            return None
        words[2] = ctx.desc(mask)
    if source is not None:
        if source.dtype not in ALL:
            return None
        words[3] = ctx.desc(source)
    return ctx.bind(lazy(mask_kernel), words)


@register_fast("aten::masked_select.out")
def bind_masked_select(ctx, self, mask, out):
    if out.ndim != 1:
        return None
    return _bind_mask(ctx, K_SELECT, self, mask, None, out)


@register_fast("aten::masked_scatter.out")
def bind_masked_scatter(ctx, self, mask, source, out):
    if out.ndim != max(self.ndim, mask.ndim):
        return None
    return _bind_mask(ctx, K_SCATTER, self, mask, source, out)


@register_fast("aten::nonzero.out")
def bind_nonzero(ctx, self, out):
    if out.ndim != 2:
        return None
    return _bind_mask(ctx, K_NONZERO, self, None, None, out)


@register_fast("aten::repeat_interleave.Tensor_out")
def bind_repeat_interleave(ctx, repeats, output_size, out):
    if repeats.ndim != 1 or repeats.dtype.kind not in "iu" or out.ndim != 1 \
            or (output_size is not None and (isinstance(output_size, bool)
                                             or not isinstance(output_size, int))):
        return None
    return _bind_mask(ctx, K_REPEAT, repeats, None, None, out,
                      -1 if output_size is None else max(output_size, -1))
