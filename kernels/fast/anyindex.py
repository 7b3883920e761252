"""Compiled indexing, scatter, mask, top-k and random kernels for every dtype.

Five cfuncs serve every op here; each reads element types from the
descriptors at run time (``nb.load_*``/``store_*``, bytes moved as they are
when source and destination types agree) and walks any dim order through
the descriptor strides:

* ``scatter_kernel``: gather, scatter (src / value / add), select_scatter,
  slice_scatter;
* ``adv_kernel``: advanced indexing ``x[indices]`` and ``x[indices] = values``
  (index.Tensor, index_put, index_put_, and the generic forms of
  index_select and embedding): int32/int64 index tensors broadcast together,
  bool/uint8 masks expand to their true positions, and the indexed dims land
  where ATen (and numpy) put them. Each indexed position moves a whole
  sub-block of the remaining dims with the strided copy engine of
  ``kernels.fast.shape``;
* ``mask_kernel``: masked_select, masked_scatter, nonzero,
  repeat_interleave (outs sized at run time);
* ``topk_kernel``: top-k along one dim by a heap over a total order
  (value, then position), so ties and NaN (ranked largest) come out as the
  reference kernel's stable sort gives them;
* ``rand_kernel``: rand, randn, native_dropout from a splitmix64 stream
  seeded at bind time (the distribution, not the reference's stream).

Every index is checked before anything is written; an out-of-range index or
a shape that does not fit returns InvalidArgument, and the reference kernel
then explains it.
"""
from __future__ import annotations

import math
import os

import ml_dtypes
import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from kernels.fast import register_fast
from kernels.fast.nb import (INVALID_ARGUMENT, OK, ST_F16, ST_F32, ST_F64,
                             bf16_to_f64, bits_to_f64, desc, elem_size, f64_to_bf16, f64_to_half,
                             half_to_f64, is_contiguous, is_float_st, lazy, load_f64, load_i64,
                             offset_of, ptr_like, resize_like, resize_to, scratch, store_f64,
                             store_i64)
from kernels.fast.shape import (SCRATCH_WORDS, W_DS, W_IX, W_SS, W_SZ, copy_simplified,
                                simplify)

BOOL, U8 = np.dtype(np.bool_), np.dtype(np.uint8)
I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
ALL = (BOOL, U8, np.dtype(np.int8), np.dtype(np.int16), I32, I64, F16, BF16, F32, F64)
FLOATS = (F16, BF16, F32, F64)
INDEX = (I64, I32)
MASK = (BOOL, U8)
E = SCRATCH_WORDS  # this file's scratch words start after the copy engine's
BIG = 1 << 62


# ---- elements and strided blocks of any dtype ---------------------------------------

@njit
def _move(sp, sst, si, dp, dst, di):
    """dst[di] = src[si], converting as a C++ static_cast (bits copied when types agree)."""
    if sst == dst:
        es = elem_size(sst)
        if es == 4:
            ptr_like(dp, np.uint32(0))[di] = ptr_like(sp, np.uint32(0))[si]
        elif es == 8:
            ptr_like(dp, np.uint64(0))[di] = ptr_like(sp, np.uint64(0))[si]
        elif es == 2:
            ptr_like(dp, np.uint16(0))[di] = ptr_like(sp, np.uint16(0))[si]
        else:
            ptr_like(dp, np.uint8(0))[di] = ptr_like(sp, np.uint8(0))[si]
    elif is_float_st(sst):
        store_f64(dp, dst, di, load_f64(sp, sst, si))
    else:
        store_i64(dp, dst, di, load_i64(sp, sst, si))


@njit(inline="always")
def _round_to(st, v):
    """float64 ``v`` rounded to float type ``st`` (and back, exactly)."""
    if st == ST_F32:
        return np.float64(np.float32(v))
    if st == ST_F16:
        return half_to_f64(f64_to_half(v))
    if st == ST_F64:
        return v
    return bf16_to_f64(f64_to_bf16(v))


@njit
def _add(sp, sst, si, dp, dst, di):
    """dst[di] += src[si] in dst's type, src cast to it first (numpy ``add.at`` after astype)."""
    if is_float_st(dst):
        store_f64(dp, dst, di, load_f64(dp, dst, di) + _round_to(dst, load_f64(sp, sst, si)))
    elif dst == 11:  # bool: logical or
        b = load_f64(sp, sst, si) != 0.0 if is_float_st(sst) else load_i64(sp, sst, si) != 0
        store_i64(dp, dst, di, np.int64(load_i64(dp, dst, di) != 0 or b))
    else:
        store_i64(dp, dst, di, load_i64(dp, dst, di) + load_i64(sp, sst, si))


@njit
def _xfer(sp, sst, dp, dst, w, nr, acc):
    """Copy (``acc`` 0) or accumulate (1) a space simplified by ``simplify`` (sizes and
    element strides in the copy engine's words of ``w``) from ``sp`` to ``dp``."""
    if nr < 0:
        return
    if acc == 0 and sst == dst:
        copy_simplified(sp, dp, w, nr, elem_size(sst))
        return
    if nr == 0:
        if acc == 0:
            _move(sp, sst, 0, dp, dst, 0)
        else:
            _add(sp, sst, 0, dp, dst, 0)
        return
    last = nr - 1
    n = w[W_SZ + last]
    si = w[W_SS + last]
    di = w[W_DS + last]
    outer = 1
    for i in range(last):
        w[W_IX + i] = 0
        outer *= w[W_SZ + i]
    so = 0
    do = 0
    for _ in range(outer):
        if acc == 0:
            for c in range(n):
                _move(sp, sst, so + c * si, dp, dst, do + c * di)
        else:
            for c in range(n):
                _add(sp, sst, so + c * si, dp, dst, do + c * di)
        for i in range(last - 1, -1, -1):
            w[W_IX + i] += 1
            so += w[W_SS + i]
            do += w[W_DS + i]
            if w[W_IX + i] < w[W_SZ + i]:
                break
            so -= w[W_SS + i] * w[W_SZ + i]
            do -= w[W_DS + i] * w[W_SZ + i]
            w[W_IX + i] = 0


@njit
def _copy_all(a, o, w):
    """o = a, same sizes, any dim orders and (convertible) dtypes."""
    nd = a[2]
    for i in range(nd):
        w[W_SZ + i] = a[8 + i]
        w[W_SS + i] = a[24 + i]
        w[W_DS + i] = o[24 + i]
    _xfer(a[0], a[1], o[0], o[1], w, simplify(w, nd), 0)


@njit(inline="always")
def _index_at(ix, k):
    return load_i64(ix[0], ix[1], k)


# Row walks (gather/scatter, masks, top-k): scratch words E sizes, E+16/E+32/E+48 three
# stride sets, E+64 counter, R_OFF.. the three offsets of the current row.
R_OFF = E + 80


@njit
def _rows(w, nd):
    """Start a walk over the sizes at E (rank ``nd``) by rows of the last dim (a rank-0
    space is one row of one element); returns (rows, row length)."""
    if nd == 0:
        w[E] = 1
        w[E + 16] = 0
        w[E + 32] = 0
        w[E + 48] = 0
        nd = 1
    n = 1
    for i in range(nd):
        w[E + 64 + i] = 0
        n *= w[E + i]
    w[R_OFF] = 0
    w[R_OFF + 1] = 0
    w[R_OFF + 2] = 0
    ln = w[E + nd - 1]
    return (n // ln if ln > 0 else 0), ln


@njit
def _next_row(w, outer):
    """Advance the counter over dims [0, outer) and the three row offsets with it."""
    for i in range(outer - 1, -1, -1):
        w[E + 64 + i] += 1
        w[R_OFF] += w[E + 16 + i]
        w[R_OFF + 1] += w[E + 32 + i]
        w[R_OFF + 2] += w[E + 48 + i]
        if w[E + 64 + i] < w[E + i]:
            return
        w[R_OFF] -= w[E + 16 + i] * w[E + i]
        w[R_OFF + 1] -= w[E + 32 + i] * w[E + i]
        w[R_OFF + 2] -= w[E + 48 + i] * w[E + i]
        w[E + 64 + i] = 0


@njit(inline="always")
def _clamp(i, n):
    if i < 0:
        i += n
        if i < 0:
            i = 0
    return n if i > n else i


# ---- gather / scatter / select_scatter / slice_scatter ------------------------------
(OP_GATHER, OP_SCATTER, OP_SCATTER_VALUE, OP_SCATTER_ADD, OP_SELECT_SCATTER,
 OP_SLICE_SCATTER) = range(6)
# words: a row walk over the index (strides: index, self side with dim d zeroed, other side)
GS_WORDS = E + 84


@njit
def _gather_scatter(op, x, ix, s, o, w, d, vf, vi):
    nd = ix[2]
    xnd = x[2]
    n = x[8 + d] if xnd > 0 else 1
    xsd = x[24 + d] if xnd > 0 else 0
    for i in range(nd):
        sz = ix[8 + i]
        if xnd > 0 and i != d and sz > x[8 + i]:
            return INVALID_ARGUMENT
        if op == OP_SCATTER or op == OP_SCATTER_ADD:
            if sz > s[8 + i]:
                return INVALID_ARGUMENT
    for k in range(ix[3]):  # validate every index before writing anything
        v = _index_at(ix, k)
        if v < 0 or v >= n:
            return INVALID_ARGUMENT
    if op == OP_GATHER:
        st = resize_to(o, ix[8:], nd)
        if st != OK:
            return st
        osd = 0
    else:
        st = resize_like(o, x)
        if st != OK:
            return st
        if o[0] != x[0]:
            _copy_all(x, o, w)
        osd = o[24 + d] if xnd > 0 else 0
    for i in range(nd):
        w[E + i] = ix[8 + i]
        w[E + 16 + i] = ix[24 + i]
        w[E + 64 + i] = 0
        if op == OP_GATHER:
            w[E + 32 + i] = x[24 + i] if xnd > 0 and i != d else 0
            w[E + 48 + i] = o[24 + i]
        else:
            w[E + 32 + i] = o[24 + i] if xnd > 0 and i != d else 0
            w[E + 48 + i] = s[24 + i] if op != OP_SCATTER_VALUE else 0
    rows, ln = _rows(w, nd)
    last = max(nd, 1) - 1
    sd = xsd if op == OP_GATHER else osd
    a = x if op == OP_GATHER else s
    if (op == OP_GATHER or op == OP_SCATTER) and a[1] == o[1]:
        es = elem_size(o[1])
        if es == 4:
            _gs_bits(op, ix, a[0], o[0], w, rows, ln, last, sd, np.uint32(0))
        elif es == 8:
            _gs_bits(op, ix, a[0], o[0], w, rows, ln, last, sd, np.uint64(0))
        elif es == 2:
            _gs_bits(op, ix, a[0], o[0], w, rows, ln, last, sd, np.uint16(0))
        else:
            _gs_bits(op, ix, a[0], o[0], w, rows, ln, last, sd, np.uint8(0))
        return OK
    s0 = w[E + 16 + last]
    s1 = w[E + 32 + last]
    s2 = w[E + 48 + last]
    for _ in range(rows):
        b0 = w[R_OFF]
        b1 = w[R_OFF + 1]
        b2 = w[R_OFF + 2]
        for j in range(ln):
            v = _index_at(ix, b0 + j * s0)
            p1 = b1 + j * s1
            p2 = b2 + j * s2
            if op == OP_GATHER:
                _move(x[0], x[1], p1 + v * xsd, o[0], o[1], p2)
            elif op == OP_SCATTER:
                _move(s[0], s[1], p2, o[0], o[1], p1 + v * osd)
            elif op == OP_SCATTER_ADD:
                _add(s[0], s[1], p2, o[0], o[1], p1 + v * osd)
            elif is_float_st(o[1]):
                store_f64(o[0], o[1], p1 + v * osd, vf)
            else:
                store_i64(o[0], o[1], p1 + v * osd, vi)
        _next_row(w, last)
    return OK


@njit
def _gs_bits(op, ix, sp, dp, w, rows, ln, last, sd, m):
    """The gather / scatter walk for one element type, moved as bits of ``m``'s size."""
    src = ptr_like(sp, m)
    dst = ptr_like(dp, m)
    s0 = w[E + 16 + last]
    s1 = w[E + 32 + last]
    s2 = w[E + 48 + last]
    ip = ix[0]
    ist = ix[1]
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
        _next_row(w, last)


@njit
def _region(op, x, s, o, w, d, start, end, step):
    """out = self with src written over ``self.select(d, start)`` or a slice of dim ``d``."""
    st = resize_like(o, x)
    if st != OK:
        return st
    nd = x[2]
    n = x[8 + d]
    cnt = 0
    if op == OP_SELECT_SCATTER:
        if start < -n or start >= n:
            return INVALID_ARGUMENT
        base = (start + n if start < 0 else start) * o[24 + d]
        rnd = nd - 1
    else:
        a = _clamp(start, n)
        b = _clamp(end, n)
        cnt = (b - a + step - 1) // step if b > a else 0
        base = a * o[24 + d]
        rnd = nd
    if s[2] != rnd:
        return INVALID_ARGUMENT
    r = 0
    for i in range(nd):
        if i == d and op == OP_SELECT_SCATTER:
            continue
        want = cnt if i == d else x[8 + i]
        if s[8 + r] != want:
            return INVALID_ARGUMENT
        r += 1
    if o[0] != x[0]:
        _copy_all(x, o, w)
    r = 0
    for i in range(nd):
        if i == d and op == OP_SELECT_SCATTER:
            continue
        w[W_SZ + r] = s[8 + r]
        w[W_SS + r] = s[24 + r]
        w[W_DS + r] = o[24 + i] * (step if i == d else 1)
        r += 1
    es = elem_size(o[1])
    _xfer(s[0], s[1], o[0] + base * es, o[1], w, simplify(w, rnd), 0)
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


def _dim(d, n):
    """A dim wrapped into [0, max(n, 1)) as ATen does (rank 0 takes 0 and -1), or None."""
    m = max(n, 1)
    if isinstance(d, bool) or not isinstance(d, int) or not -m <= d < m:
        return None
    return d % m


def _bind_gs(ctx, op, self, dim, index, src, out, value=None):
    d = _dim(dim, self.ndim)
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
    d = _dim(dim, self.ndim) if self.ndim else None
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


# ---- advanced indexing: index.Tensor, index_put(_), index_select, embedding ---------------
M_INDEX, M_PUT, M_ACC = range(3)
IT_INT, IT_MASK, IT_FLAT = range(3)  # index tensor; bool mask; index flattened to 1-d
# block: [mode, x, values, out, scratch, scratch words, items, nb, p, x0, negative ok,
#         (kind, tensor, first dim, dims, positions word) per item]
A_ITEM, A_ITEM_WORDS = 11, 5
# words: E x sizes, E+16 x-side strides, E+32 broadcast sizes, E+48 result-side strides of
# the broadcast dims, E+64 sliced dims, E+80 result sizes, E+96 values strides over the
# result, E+112 counter, E+128 per item: 16 strides over the broadcast dims + count
A_X, A_XS, A_B, A_RB, A_SL, A_R, A_VS, A_C, A_IT = (E + 16 * i for i in range(9))
A_IT_WORDS = 17


@njit
def _adv(block, w):
    mode = block[0]
    x = desc(block[1])
    o = desc(block[3])
    nit = block[6]
    nb = block[7]
    p = block[8]
    x0 = block[9]
    neg = block[10]
    xnd = x[2]
    if mode != M_INDEX:
        st = resize_like(o, x)
        if st != OK:
            return st
    if x0 != 0:  # a rank-0 self indexed as if it had one dim of size 1
        xnd = 1
        w[A_X] = 1
        w[A_XS] = 0
    else:
        for i in range(xnd):
            w[A_X + i] = x[8 + i]
            w[A_XS + i] = x[24 + i] if mode == M_INDEX else o[24 + i]
    # masks: their true positions; the broadcast shape of every index
    for j in range(nb):
        w[A_B + j] = 1
    for k in range(nit):
        b = A_ITEM + A_ITEM_WORDS * k
        kind = block[b]
        t = desc(block[b + 1])
        d = block[b + 2]
        m = block[b + 3]
        iw = A_IT + A_IT_WORDS * k
        if kind == IT_MASK:
            if t[2] != m:
                return INVALID_ARGUMENT
            for i in range(m):
                if t[8 + i] != w[A_X + d + i]:
                    return INVALID_ARGUMENT
            pos = block[b + 4]
            cnt = 0
            u8 = ptr_like(t[0], np.uint8(0))
            dense = is_contiguous(t)
            for q in range(t[3]):
                if u8[q if dense else offset_of(t, q)] != 0:
                    w[pos + cnt] = q
                    cnt += 1
            w[iw + 16] = cnt
            r = 1
        elif kind == IT_FLAT:
            r = 1
        else:
            r = t[2]
        for i in range(r):
            j = nb - r + i
            sz = w[iw + 16] if kind == IT_MASK else (t[3] if kind == IT_FLAT else t[8 + i])
            if sz != 1:
                if w[A_B + j] == 1:
                    w[A_B + j] = sz
                elif w[A_B + j] != sz:
                    return INVALID_ARGUMENT
        for j in range(nb):
            i = j - (nb - r)
            w[iw + j] = 0
            if i >= 0:
                if kind == IT_INT:
                    if t[8 + i] != 1:
                        w[iw + j] = t[24 + i]
                else:
                    sz = w[iw + 16] if kind == IT_MASK else t[3]
                    if sz != 1:
                        w[iw + j] = 1
    nbel = 1
    for j in range(nb):
        nbel *= w[A_B + j]
    if nbel > 0:  # every element of every index is used: check them all before writing
        for k in range(nit):
            b = A_ITEM + A_ITEM_WORDS * k
            if block[b] == IT_MASK:
                continue
            t = desc(block[b + 1])
            n = w[A_X + block[b + 2]]
            for q in range(t[3]):
                v = _index_at(t, q)
                if v >= n or v < (-n if neg != 0 else 0):
                    return INVALID_ARGUMENT
    # the result: sliced dims [:p], the broadcast dims, sliced dims [p:]
    nsl = 0
    for i in range(xnd):
        covered = False
        for k in range(nit):
            b = A_ITEM + A_ITEM_WORDS * k
            if block[b + 2] <= i < block[b + 2] + block[b + 3]:
                covered = True
        if not covered:
            w[A_SL + nsl] = i
            nsl += 1
    nr = nsl + nb
    for r in range(nr):
        w[A_R + r] = w[A_X + w[A_SL + (r if r < p else r - nb)]] if r < p or r >= p + nb \
            else w[A_B + r - p]
    if mode == M_INDEX:
        if o[2] == nr:
            st = resize_to(o, w[A_R:], nr)
            if st != OK:
                return st
            for r in range(nr):
                w[A_VS + r] = o[24 + r]
        else:  # a rank-0 out of a rank-0 self (index_select): one element
            if nr - o[2] != 1 or w[A_R] != 1:
                return INVALID_ARGUMENT
            w[A_VS] = 0
    else:
        v = desc(block[2])
        nv = v[2]
        for r in range(nr):
            w[A_VS + r] = 0
        for i in range(nv):
            r = i - (nv - nr)
            sz = v[8 + i]
            if r < 0:
                if sz != 1:
                    return INVALID_ARGUMENT
            elif sz != 1:
                if sz != w[A_R + r]:
                    return INVALID_ARGUMENT
                w[A_VS + r] = v[24 + i]
        if o[0] != x[0]:
            _copy_all(x, o, w)
    # the block moved per broadcast position: the sliced dims
    for q in range(nsl):
        r = q if q < p else q + nb
        i = w[A_SL + q]
        w[W_SZ + q] = w[A_X + i]
        if mode == M_INDEX:
            w[W_SS + q] = w[A_XS + i]
            w[W_DS + q] = w[A_VS + r]
        else:
            w[W_SS + q] = w[A_VS + r]
            w[W_DS + q] = w[A_XS + i]
    ns = simplify(w, nsl)
    if ns < 0 or nbel == 0:
        return OK
    for j in range(nb):
        w[A_RB + j] = w[A_VS + p + j]
    xs = elem_size(x[1])
    os_ = elem_size(o[1])
    for bi in range(nbel):
        rem = bi
        for j in range(nb - 1, -1, -1):
            w[A_C + j] = rem % w[A_B + j]
            rem //= w[A_B + j]
        roff = 0
        for j in range(nb):
            roff += w[A_C + j] * w[A_RB + j]
        xoff = 0
        for k in range(nit):
            b = A_ITEM + A_ITEM_WORDS * k
            kind = block[b]
            t = desc(block[b + 1])
            d = block[b + 2]
            iw = A_IT + A_IT_WORDS * k
            e = 0
            for j in range(nb):
                e += w[A_C + j] * w[iw + j]
            if kind == IT_MASK:
                q = w[block[b + 4] + e]
                for i in range(d + block[b + 3] - 1, d - 1, -1):
                    xoff += (q % w[A_X + i]) * w[A_XS + i]
                    q //= w[A_X + i]
            else:
                if kind == IT_FLAT and not is_contiguous(t):
                    e = offset_of(t, e)
                v = _index_at(t, e)
                if v < 0:
                    v += w[A_X + d]
                xoff += v * w[A_XS + d]
        if mode == M_INDEX:
            _xfer(x[0] + xoff * xs, x[1], o[0] + roff * os_, o[1], w, ns, 0)
        else:
            v = desc(block[2])
            _xfer(v[0] + roff * elem_size(v[1]), v[1], o[0] + xoff * os_, o[1], w, ns,
                  1 if mode == M_ACC else 0)
    return OK


def adv_kernel(block):
    return _adv(block, scratch(block[4], block[5]))


def _bind_adv(ctx, mode, x, items, values, out, x0=False, neg=True):
    """``items``: (kind, tensor, first dim of x, dims) in order."""
    if x.dtype not in ALL or out.dtype not in ALL or (values is not None
                                                      and values.dtype not in ALL):
        return None
    xnd = 1 if x0 else x.ndim
    covered = sum(m for _, _, _, m in items)
    if covered > xnd:
        return None
    adjacent = all(items[k + 1][2] == items[k][2] + items[k][3] for k in range(len(items) - 1))
    p = items[0][2] if items and adjacent else 0
    nb = max([1 if kind != IT_INT else t.ndim for kind, t, _, _ in items], default=0)
    nr = nb + xnd - covered
    if mode == M_INDEX and not (out.ndim == nr or (x0 and out.ndim == nr - 1)):
        return None
    if mode != M_INDEX and (out.ndim != x.ndim or not items or values.ndim > nr):
        return None  # (values with more dims, or no index: ATen refuses them)
    nwords = A_IT + A_IT_WORDS * len(items)
    words = []
    for kind, t, d, m in items:
        pos = 0
        if kind == IT_MASK:
            pos = nwords
            nwords += max(t.capacity, 1)
        words += [kind, ctx.desc(t), d, m, pos]
    return ctx.bind(lazy(adv_kernel), [mode, ctx.desc(x), 0 if values is None else ctx.desc(values),
                                       ctx.desc(out), ctx.buffer(nwords * 8), nwords, len(items),
                                       nb, p, int(x0), int(neg)] + words)


def _items(x, indices):
    """The index items of an ATen ``Tensor?[]``, or None for what stays on the reference."""
    if not isinstance(indices, (list, tuple)):
        return None
    items, d = [], 0
    for t in indices:
        if t is None:
            d += 1
        elif t.dtype in MASK:
            if t.ndim == 0:
                return None  # a 0-d mask adds a dim: rare, left to the reference kernel
            items.append((IT_MASK, t, d, t.ndim))
            d += t.ndim
        elif t.dtype in INDEX:
            items.append((IT_INT, t, d, 1))
            d += 1
        else:
            return None
    return items if d <= x.ndim else None


@register_fast("aten::index.Tensor_out", fallback=True)
def bind_index(ctx, self, indices, out):
    items = _items(self, indices)
    return None if items is None else _bind_adv(ctx, M_INDEX, self, items, None, out)


def _bind_put(ctx, self, indices, values, accumulate, out):
    items = _items(self, indices)
    if items is None or not isinstance(accumulate, bool):
        return None
    return _bind_adv(ctx, M_ACC if accumulate else M_PUT, self, items, values, out)


@register_fast("aten::index_put.out", fallback=True)
def bind_index_put(ctx, self, indices, values, accumulate, out):
    return _bind_put(ctx, self, indices, values, accumulate, out)


@register_fast("aten::index_put_")
def bind_index_put_(ctx, self, indices, values, accumulate):
    return _bind_put(ctx, self, indices, values, accumulate, self)


@register_fast("aten::index_select.out", fallback=True)
def bind_index_select(ctx, self, dim, index, out):
    d = _dim(dim, self.ndim)
    if d is None or index.dtype not in INDEX:
        return None
    return _bind_adv(ctx, M_INDEX, self, [(IT_FLAT, index, d, 1)], None, out,
                     x0=self.ndim == 0, neg=False)


@register_fast("aten::embedding.out", fallback=True)
def bind_embedding(ctx, weight, indices, padding_idx, scale_grad_by_freq, sparse, out):
    if weight.ndim != 2 or indices.dtype not in INDEX:
        return None
    return _bind_adv(ctx, M_INDEX, weight, [(IT_INT, indices, 0, 1)], None, out, neg=False)


# ---- masks and run-time-sized outs --------------------------------------------------
K_SELECT, K_SCATTER, K_NONZERO, K_REPEAT = range(4)
# words: a row walk over the broadcast shape (strides: self, mask, out), then out sizes
MK_OUT = R_OFF + 4
MK_WORDS = MK_OUT + 4


@njit(inline="always")
def _nonzero_at(a, q):
    if is_float_st(a[1]):
        return load_f64(a[0], a[1], q) != 0.0
    return load_i64(a[0], a[1], q) != 0


@njit
def _masked(op, a, mk, src, o, w):
    na = a[2]
    nm = mk[2]
    nd = max(na, nm) if op != K_NONZERO else na
    total = 1
    for i in range(nd):
        ia = i - (nd - na)
        im = i - (nd - nm)
        da = a[8 + ia] if ia >= 0 else 1
        dm = mk[8 + im] if im >= 0 and op != K_NONZERO else 1
        if da != dm and da != 1 and dm != 1:
            return INVALID_ARGUMENT
        w[E + i] = da if dm == 1 else dm
        w[E + 16 + i] = a[24 + ia] if ia >= 0 and da != 1 else 0
        w[E + 32 + i] = mk[24 + im] if im >= 0 and dm != 1 and op != K_NONZERO else 0
        w[E + 48 + i] = 0
        w[E + 64 + i] = 0
        total *= w[E + i]
    m8 = ptr_like(mk[0], np.uint8(0))
    rows, ln = _rows(w, nd)
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
        _next_row(w, last)
    if op == K_SELECT:
        w[MK_OUT] = cnt
        st = resize_to(o, w[MK_OUT:], 1)
    elif op == K_NONZERO:
        w[MK_OUT] = cnt
        w[MK_OUT + 1] = nd
        st = resize_to(o, w[MK_OUT:], 2)
    else:
        if src[3] < cnt:
            return INVALID_ARGUMENT
        st = resize_to(o, w[E:], nd)
        for i in range(nd):
            w[E + 48 + i] = o[24 + i]
    if st != OK:
        return st
    rows, ln = _rows(w, nd)
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
                        store_i64(o[0], o[1], q * o[24] + i * o[25],
                                  j if i == last else w[E + 64 + i])
                    q += 1
            elif m8[b1 + j * s1] != 0:
                if op == K_SELECT:
                    _move(a[0], a[1], p0, o[0], o[1], q * o[24])
                else:
                    _move(src[0], src[1], q if dense else offset_of(src, q), o[0], o[1],
                          b2 + j * s2)
                q += 1
            elif op == K_SCATTER:
                _move(a[0], a[1], p0, o[0], o[1], b2 + j * s2)
        _next_row(w, last)
    return OK


@njit
def _repeat(r, o, w, want):
    n = r[3] if r[2] == 1 else 0
    total = 0
    for i in range(n):
        c = load_i64(r[0], r[1], i * r[24])
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
        for _ in range(load_i64(r[0], r[1], i * r[24])):
            store_i64(o[0], o[1], q * o[24], i)
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


# ---- topk ---------------------------------------------------------------------------
# words: a walk over the other dims (strides: self, values, indices), then the heap's keys (k)
# and positions (k)
TK_HEAP = R_OFF + 4


@intrinsic
def _f64_bits(typingctx, x):
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return sig, codegen


@njit(inline="always")
def _key(a, q):
    """An int64 that orders elements as their values do; NaN largest, -0.0 == 0.0."""
    if not is_float_st(a[1]):
        return load_i64(a[0], a[1], q)
    v = load_f64(a[0], a[1], q)
    if v != v:
        return np.int64(0x7FFFFFFFFFFFFFFF)
    if v == 0.0:
        return np.int64(0)
    b = _f64_bits(v)
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
    nd = a[2]
    n = a[8 + d] if nd > 0 else 1
    sd = a[24 + d] if nd > 0 else 0
    if k > n or (nd == 0 and k != 1):
        return INVALID_ARGUMENT
    for i in range(nd):
        w[TK_HEAP + i] = k if i == d else a[8 + i]  # (the heap's words, free until used)
    st = resize_to(ov, w[TK_HEAP:], nd)
    if st == OK:
        st = resize_to(oi, w[TK_HEAP:], nd)
    if st != OK:
        return st
    vd = ov[24 + d] if nd > 0 else 0
    idd = oi[24 + d] if nd > 0 else 0
    m = 0
    rows = 1
    for i in range(nd):
        if i != d:
            w[E + m] = a[8 + i]
            w[E + 16 + m] = a[24 + i]
            w[E + 32 + m] = ov[24 + i]
            w[E + 48 + m] = oi[24 + i]
            w[E + 64 + m] = 0
            rows *= a[8 + i]
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
            _move(a[0], a[1], pa + q * sd, ov[0], ov[1], pv + j * vd)
            store_i64(oi[0], oi[1], pi + j * idd, q)
        _next_row(w, m)
    return OK


def topk_kernel(block):
    k = block[4]
    return _topk(desc(block[0]), desc(block[1]), desc(block[2]),
                 scratch(block[3], TK_HEAP + 2 * k + 16), k, block[5], block[6])


@register_fast("aten::topk.values")
def bind_topk(ctx, self, k, dim, largest, sorted, values, indices):  # noqa: A002 (schema names)
    # sorted=False may return any order; the sorted order is one (the reference's too)
    d = _dim(dim, self.ndim)
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


# ---- random: rand, randn, native_dropout --------------------------------------------
R_RAND, R_RANDN, R_DROPOUT = range(3)
UNIT = np.array([2.0 ** -b for b in range(54)])
RS_SIZES, RS_WORDS = 8, 24
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)


@njit(inline="always")
def _mix(z):
    """splitmix64's output function: 64 random bits of the state ``z``."""
    z = (z ^ (z >> np.uint64(30))) * MIX1
    z = (z ^ (z >> np.uint64(27))) * MIX2
    return z ^ (z >> np.uint64(31))


@njit(inline="always")
def _unit(r, bits):
    """Random bits ``r`` as a uniform in [0, 1) on a grid of 2**-bits (``bits`` <= 53), so
    that a narrow float never rounds it up to 1.0."""
    return np.float64(r >> np.uint64(64 - bits)) * UNIT[bits]


@njit
def _random(op, o, a, m, s, block):
    z = s[0]  # the stream's state, kept local (written back at the end)
    if op != R_DROPOUT:
        st = resize_to(o, scratch(block[4], RS_WORDS)[RS_SIZES:], block[8])
        if st != OK:
            return st
        n = o[3]
        ot = o[1]
        bits = 53 if ot == ST_F64 else (11 if ot == ST_F16 else (8 if ot == 15 else 24))
        if op == R_RAND:
            for i in range(n):
                z += GOLDEN
                store_f64(o[0], ot, i, _unit(_mix(z), bits))
        i = 0
        while op == R_RANDN and i < n:  # Marsaglia's polar method: two normals per accepted pair
            z += GOLDEN
            u = 2.0 * _unit(_mix(z), 53) - 1.0
            z += GOLDEN
            v = 2.0 * _unit(_mix(z), 53) - 1.0
            q = u * u + v * v
            if q >= 1.0 or q == 0.0:
                continue
            f = math.sqrt(-2.0 * math.log(q) / q)
            store_f64(o[0], ot, i, u * f)
            if i + 1 < n:
                store_f64(o[0], ot, i + 1, v * f)
            i += 2
        s[0] = z
        return OK
    st = resize_like(o, a)
    if st == OK:
        st = resize_like(m, a)
    if st != OK:
        return st
    keep_p = bits_to_f64(block[5])  # 1 - p
    scale = bits_to_f64(block[6])
    mode = block[7]  # 0 copy (eval, p = 0), 1 float32 compute, 2 float64 compute
    same = block[8]  # same dim order everywhere: storage index = element
    for i in range(a[3]):
        ia = i if same != 0 else offset_of(a, i)
        io = i if same != 0 else offset_of(o, i)
        im = i if same != 0 else offset_of(m, i)
        if mode == 0:
            _move(a[0], a[1], ia, o[0], o[1], io)
            store_i64(m[0], m[1], im, 1)
        else:
            z += GOLDEN
            keep = _unit(_mix(z), 53) < keep_p
            v = load_f64(a[0], a[1], ia) * (1.0 if keep else 0.0) * scale
            store_f64(o[0], o[1], io, _round_to(ST_F32 if mode == 1 else ST_F64, v))
            store_i64(m[0], m[1], im, np.int64(keep))
    s[0] = z
    return OK


def rand_kernel(block):
    op = block[0]
    o = desc(block[1])
    s = ptr_like(block[4], np.uint64(0))
    if op != R_DROPOUT:
        return _random(op, o, o, o, s, block)
    return _random(op, o, desc(block[3]), desc(block[2]), s, block)


def _seed(ctx, sizes=()):
    """A state buffer: [random seed, 7 spare words, out sizes]."""
    addr = ctx.buffer(RS_WORDS * 8)
    words = ctx.scratch[-1][:RS_WORDS * 8].view(np.int64)
    words[0] = np.frombuffer(os.urandom(8), np.int64)[0]
    words[RS_SIZES:RS_SIZES + len(sizes)] = sizes
    return addr


def _bind_rand(ctx, op, size, out):
    if not isinstance(size, (list, tuple)) or len(size) != out.ndim or len(size) > 16 \
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in size) \
            or out.dtype not in ALL:
        return None
    return ctx.bind(lazy(rand_kernel), [op, ctx.desc(out), 0, 0,
                                        _seed(ctx, [int(s) for s in size]), 0, 0, 0, len(size)])


@register_fast("aten::rand.out")
def bind_rand(ctx, size, out):
    return _bind_rand(ctx, R_RAND, size, out)


@register_fast("aten::randn.out")
def bind_randn(ctx, size, out):
    return _bind_rand(ctx, R_RANDN, size, out)


@register_fast("aten::native_dropout.out")
def bind_native_dropout(ctx, input, p, train, out0, out1):  # noqa: A002 (schema name)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1 \
            or input.dtype not in ALL or out0.dtype not in ALL or out1.dtype not in ALL \
            or out0.ndim != input.ndim or out1.ndim != input.ndim:
        return None
    train = train is not False  # None means training, as in ATen
    if not train or p == 0:
        mode, scale = 0, 1.0  # no element dropped, none scaled: a copy
    elif input.dtype in FLOATS:
        mode = 2 if input.dtype == F64 else 1
        scale = 0.0 if p == 1 else 1.0 / (1 - p)
        if mode == 1:
            scale = float(np.float32(scale))
    else:
        return None  # integer dropout: ATen refuses it
    same = int(input.dim_order == out0.dim_order == out1.dim_order)
    return ctx.bind(lazy(rand_kernel), [R_DROPOUT, ctx.desc(out0), ctx.desc(out1),
                                        ctx.desc(input), _seed(ctx), ctx.f64(1 - p),
                                        ctx.f64(scale), mode, same])
