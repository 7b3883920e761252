"""Compiled gather, scatter (src / value / add), select_scatter and slice_scatter of
every dtype (``scatter_kernel``).
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast import register_fast
from pyruntime.kernels.fast.copy_engine import W_DS, W_SS, W_SZ, clamp_bound, simplify
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.index_io import (ALL, BIG, E, INDEX, R_OFF, add_element, copy_all,
                                           index_at, move, move_simplified, next_row,
                                           start_rows)
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, bits_to_f64, desc, elem_size,
                                       is_float_st, lazy, load_i64, ptr_like, resize_like,
                                       resize_to, scratch, store_f64, store_i64)


# ---- gather / scatter / select_scatter / slice_scatter ------------------------------
(OP_GATHER, OP_SCATTER, OP_SCATTER_VALUE, OP_SCATTER_ADD, OP_SELECT_SCATTER,
 OP_SLICE_SCATTER) = range(6)
# words: a row walk over the index (strides: index, self side with dim d zeroed, other side)
GS_WORDS = E + 84


@njit
def _gather_scatter(op, x, ix, s, o, w, d, vf, vi):
    nd = ix[D_NDIM]
    xnd = x[D_NDIM]
    n = x[D_SIZES + d] if xnd > 0 else 1
    xsd = x[D_STRIDES + d] if xnd > 0 else 0
    for i in range(nd):
        sz = ix[D_SIZES + i]
        if xnd > 0 and i != d and sz > x[D_SIZES + i]:
            return INVALID_ARGUMENT
        if op == OP_SCATTER or op == OP_SCATTER_ADD:
            if sz > s[D_SIZES + i]:
                return INVALID_ARGUMENT
    for k in range(ix[D_NUMEL]):  # validate every index before writing anything
        v = index_at(ix, k)
        if v < 0 or v >= n:
            return INVALID_ARGUMENT
    if op == OP_GATHER:
        st = resize_to(o, ix[D_SIZES:], nd)
        if st != OK:
            return st
        osd = 0
    else:
        st = resize_like(o, x)
        if st != OK:
            return st
        if o[D_DATA] != x[D_DATA]:
            copy_all(x, o, w)
        osd = o[D_STRIDES + d] if xnd > 0 else 0
    for i in range(nd):
        w[E + i] = ix[D_SIZES + i]
        w[E + 16 + i] = ix[D_STRIDES + i]
        w[E + 64 + i] = 0
        if op == OP_GATHER:
            w[E + 32 + i] = x[D_STRIDES + i] if xnd > 0 and i != d else 0
            w[E + 48 + i] = o[D_STRIDES + i]
        else:
            w[E + 32 + i] = o[D_STRIDES + i] if xnd > 0 and i != d else 0
            w[E + 48 + i] = s[D_STRIDES + i] if op != OP_SCATTER_VALUE else 0
    rows, ln = start_rows(w, nd)
    last = max(nd, 1) - 1
    sd = xsd if op == OP_GATHER else osd
    a = x if op == OP_GATHER else s
    if (op == OP_GATHER or op == OP_SCATTER) and a[1] == o[D_DTYPE]:
        es = elem_size(o[D_DTYPE])
        if es == 4:
            _gs_bits(op, ix, a[0], o[D_DATA], w, rows, ln, last, sd, np.uint32(0))
        elif es == 8:
            _gs_bits(op, ix, a[0], o[D_DATA], w, rows, ln, last, sd, np.uint64(0))
        elif es == 2:
            _gs_bits(op, ix, a[0], o[D_DATA], w, rows, ln, last, sd, np.uint16(0))
        else:
            _gs_bits(op, ix, a[0], o[D_DATA], w, rows, ln, last, sd, np.uint8(0))
        return OK
    s0 = w[E + 16 + last]
    s1 = w[E + 32 + last]
    s2 = w[E + 48 + last]
    for _ in range(rows):
        b0 = w[R_OFF]
        b1 = w[R_OFF + 1]
        b2 = w[R_OFF + 2]
        for j in range(ln):
            v = index_at(ix, b0 + j * s0)
            p1 = b1 + j * s1
            p2 = b2 + j * s2
            if op == OP_GATHER:
                move(x[D_DATA], x[D_DTYPE], p1 + v * xsd, o[D_DATA], o[D_DTYPE], p2)
            elif op == OP_SCATTER:
                move(s[D_DATA], s[D_DTYPE], p2, o[D_DATA], o[D_DTYPE], p1 + v * osd)
            elif op == OP_SCATTER_ADD:
                add_element(s[D_DATA], s[D_DTYPE], p2, o[D_DATA], o[D_DTYPE], p1 + v * osd)
            elif is_float_st(o[D_DTYPE]):
                store_f64(o[D_DATA], o[D_DTYPE], p1 + v * osd, vf)
            else:
                store_i64(o[D_DATA], o[D_DTYPE], p1 + v * osd, vi)
        next_row(w, last)
    return OK


@njit
def _gs_bits(op, ix, sp, dp, w, rows, ln, last, sd, m):
    """The gather / scatter walk for one element type, moved as bits of ``m``'s size."""
    src = ptr_like(sp, m)
    dst = ptr_like(dp, m)
    s0 = w[E + 16 + last]
    s1 = w[E + 32 + last]
    s2 = w[E + 48 + last]
    ip = ix[D_DATA]
    ist = ix[D_DTYPE]
    for _ in range(rows):
        b0 = w[R_OFF]
        b1 = w[R_OFF + 1]
        b2 = w[R_OFF + 2]
        for j in range(ln):
            v = load_i64(ip, ist, b0 + j * s0)
            if op == OP_GATHER:
                dst[b2 + j * s2] = src[b1 + j * s1 + v * sd]
            else:
                dst[b1 + j * s1 + v * sd] = src[b2 + j * s2]
        next_row(w, last)


@njit
def _region(op, x, s, o, w, d, start, end, step):
    """out = self with src written over ``self.select(d, start)`` or a slice of dim ``d``."""
    st = resize_like(o, x)
    if st != OK:
        return st
    nd = x[D_NDIM]
    n = x[D_SIZES + d]
    cnt = 0
    if op == OP_SELECT_SCATTER:
        if start < -n or start >= n:
            return INVALID_ARGUMENT
        base = (start + n if start < 0 else start) * o[D_STRIDES + d]
        rnd = nd - 1
    else:
        a = clamp_bound(start, n)
        b = clamp_bound(end, n)
        cnt = (b - a + step - 1) // step if b > a else 0
        base = a * o[D_STRIDES + d]
        rnd = nd
    if s[D_NDIM] != rnd:
        return INVALID_ARGUMENT
    r = 0
    for i in range(nd):
        if i == d and op == OP_SELECT_SCATTER:
            continue
        want = cnt if i == d else x[D_SIZES + i]
        if s[D_SIZES + r] != want:
            return INVALID_ARGUMENT
        r += 1
    if o[D_DATA] != x[D_DATA]:
        copy_all(x, o, w)
    r = 0
    for i in range(nd):
        if i == d and op == OP_SELECT_SCATTER:
            continue
        w[W_SZ + r] = s[D_SIZES + r]
        w[W_SS + r] = s[D_STRIDES + r]
        w[W_DS + r] = o[D_STRIDES + i] * (step if i == d else 1)
        r += 1
    es = elem_size(o[D_DTYPE])
    move_simplified(s[D_DATA], s[D_DTYPE], o[D_DATA] + base * es, o[D_DTYPE], w,
                    simplify(w, rnd), 0)
    return OK


def scatter_kernel(block):
    op = block[0]
    x = desc(block[1])
    o = desc(block[4])
    w = scratch(block[5], GS_WORDS)
    d = block[6]
    if op >= OP_SELECT_SCATTER:
        return _region(op, x, desc(block[2]), o, w, d, block[7], block[8], block[9])
    s = desc(block[3]) if block[3] != 0 else x
    return _gather_scatter(op, x, desc(block[2]), s, o, w, d, bits_to_f64(block[7]), block[8])


def wrap_dim(d, n):
    """A dim wrapped into [0, max(n, 1)) as ATen does (rank 0 takes 0 and -1), or None."""
    m = max(n, 1)
    if isinstance(d, bool) or not isinstance(d, int) or not -m <= d < m:
        return None
    return d % m


def _bind_gs(ctx, op, self, dim, index, src, out, value=None):
    d = wrap_dim(dim, self.ndim)
    if d is None or index.dtype not in INDEX or self.dtype not in ALL or out.dtype not in ALL:
        return None
    if self.ndim == 0:
        if index.ndim > 1:
            return None  # the reference flattens such an index; rare, left to it
    elif index.ndim != self.ndim:
        return None
    vf, vi = 0.0, 0
    if op == OP_GATHER:
        if out.ndim != index.ndim:
            return None
    else:
        if out.dtype != self.dtype or out.ndim != self.ndim:
            return None  # ATen scatters in self's dtype into an out of that dtype
        if src is not None and (src.dtype not in ALL or src.ndim != index.ndim):
            return None
        if op == OP_SCATTER_VALUE:
            if isinstance(value, bool):
                value = int(value)
            if not isinstance(value, (int, float)):
                return None
            a = np.zeros(1, self.dtype)
            try:  # the value as numpy assigns it into self's dtype
                with np.errstate(all="ignore"):
                    a[0] = np.asarray(value)
            except (OverflowError, ValueError, TypeError):
                return None
            vf, vi = float(a.astype(np.float64)[0]), int(a.astype(np.int64)[0]) \
                if self.dtype.kind in "biu" else 0
    return ctx.bind(lazy(scatter_kernel), [op, ctx.desc(self), ctx.desc(index),
                                           0 if src is None else ctx.desc(src), ctx.desc(out),
                                           ctx.buffer(GS_WORDS * 8), d, ctx.f64(vf), vi])


@register_fast("aten::gather.out")
def bind_gather(ctx, self, dim, index, sparse_grad, out):
    return _bind_gs(ctx, OP_GATHER, self, dim, index, None, out)


@register_fast("aten::scatter.src_out")
def bind_scatter_src(ctx, self, dim, index, src, out):
    return _bind_gs(ctx, OP_SCATTER, self, dim, index, src, out)


@register_fast("aten::scatter.value_out")
def bind_scatter_value(ctx, self, dim, index, value, out):
    return _bind_gs(ctx, OP_SCATTER_VALUE, self, dim, index, None, out, value)


@register_fast("aten::scatter_add.out")
def bind_scatter_add(ctx, self, dim, index, src, out):
    return _bind_gs(ctx, OP_SCATTER_ADD, self, dim, index, src, out)


def _bind_region(ctx, op, self, src, dim, start, end, step, out):
    d = wrap_dim(dim, self.ndim) if self.ndim else None
    if d is None or self.dtype not in ALL or src.dtype not in ALL or out.dtype not in ALL \
            or out.ndim != self.ndim:
        return None
    return ctx.bind(lazy(scatter_kernel), [op, ctx.desc(self), ctx.desc(src), 0, ctx.desc(out),
                                           ctx.buffer(GS_WORDS * 8), d, start, end, step])


@register_fast("aten::select_scatter.out")
def bind_select_scatter(ctx, self, src, dim, index, out):
    if isinstance(index, bool) or not isinstance(index, int) or abs(index) > BIG:
        return None
    return _bind_region(ctx, OP_SELECT_SCATTER, self, src, dim, index, 0, 1, out)


@register_fast("aten::slice_scatter.out")
def bind_slice_scatter(ctx, self, src, dim, start, end, step, out):
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        return None
    start = 0 if start is None else max(-BIG, min(BIG, int(start)))
    end = BIG if end is None else max(-BIG, min(BIG, int(end)))
    return _bind_region(ctx, OP_SLICE_SCATTER, self, src, dim, start, end, step, out)
