"""Compiled data-movement kernels: the ``*_copy`` view ops, clone/copy, cat and split.

Every op here only moves bytes, so one body per element size (1/2/4/8 bytes)
serves every dtype of that size. A view op is "source strides + offset at
run time, then a strided copy into ``out``": the kernel reads the input's
current sizes and strides from its descriptor (dynamic shapes), builds the
view of the output in terms of the source memory, resizes ``out`` and runs
the strided copy engine (``copy_nd``) with the out's own strides, so any dim
order is handled on either side. The engine drops size-1 dims, merges dims
that are contiguous on both sides, copies contiguous runs in a flat loop and
transposes in cache-sized tiles.

Block of ``view_kernel``: ``[op, src, out, scratch, elem size, params...]``
(``cat``: ``[op, out, 0, scratch, elem size, dim, n, inputs...]``; ``split``:
``[op, src, 0, scratch, elem size, dim, n, (out, size)...]``). ``scratch``
is a 128-word buffer owned by the instruction: sizes/strides/counters, so the
hot path allocates nothing. Clone/copy ops that change the dtype (among
float32/float64/int32/int64/bool, same dim order) use ``convert_kernel``,
a flat cast loop: ``[src, out]``.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.context import IntSlot
from pyruntime.kernels.fast.copy_engine import (SCRATCH_WORDS, W_DS, W_OUT, W_SS, W_SZ, clamp_bound,
                                                copy_nd, dst_strides, expand_view, join_out,
                                                resize_with, scratch, view_sizes)
from pyruntime.kernels.fast.deferred import carray, njit
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_BOOL, ST_F32, ST_F64,
                                       ST_I32, ST_I64, desc, descs, is_contiguous, lazy, ptr_like,
                                       resize_like, resize_to)


BIG = 1 << 62  # "no end" for slices

(OP_COPY, OP_RESHAPE, OP_PERMUTE, OP_EXPAND, OP_SLICE, OP_SELECT, OP_SQUEEZE, OP_UNSQUEEZE,
 OP_COPY_INTO, OP_CAT, OP_SPLIT) = range(11)


# ---- the view kernel ----------------------------------------------------------------

@njit
def _reshape(block, a, o, w, es):
    n = block[5]
    if not view_sizes(block, 6, n, a[D_NUMEL], w):
        return INVALID_ARGUMENT
    st = resize_to(o, w[W_OUT:], n)
    if st != OK:
        return st
    if is_contiguous(a):  # iterate the out's shape, reading the source flat
        s = 1
        for i in range(n - 1, -1, -1):
            w[W_SZ + i] = o[D_SIZES + i]
            w[W_SS + i] = s
            s *= o[D_SIZES + i]
        dst_strides(w, o, n)
        copy_nd(a[D_DATA], o[D_DATA], w, n, es)
        return OK
    if not is_contiguous(o):
        return NOT_SUPPORTED
    nd = a[D_NDIM]  # iterate the source's shape, writing the out flat
    s = 1
    for i in range(nd - 1, -1, -1):
        w[W_SZ + i] = a[D_SIZES + i]
        w[W_SS + i] = a[D_STRIDES + i]
        w[W_DS + i] = s
        s *= a[D_SIZES + i]
    copy_nd(a[D_DATA], o[D_DATA], w, nd, es)
    return OK


@njit
def _cat(block, o, w, es):
    d = block[5]
    n = block[6]
    st = join_out(block, 7, n, o, d, w, False)
    if st != OK:
        return st
    nd = o[D_NDIM]
    pos = 0
    for k in range(n):
        a = desc(block[7 + k])
        if a[D_NDIM] == 1 and a[D_NUMEL] == 0:
            continue
        for i in range(nd):
            w[W_SZ + i] = a[D_SIZES + i]
            w[W_SS + i] = a[D_STRIDES + i]
        dst_strides(w, o, nd)
        copy_nd(a[D_DATA], o[D_DATA] + pos * o[D_STRIDES + d] * es, w, nd, es)
        pos += a[D_SIZES + d]
    return OK


@njit
def _split(block, a, w, es):
    d = block[5]
    n = block[6]
    nd = a[D_NDIM]
    total = 0
    for k in range(n):
        total += block[8 + 2 * k]
    if total != a[D_SIZES + d]:
        return INVALID_ARGUMENT
    pos = 0
    for k in range(n):
        o = desc(block[7 + 2 * k])
        s = block[8 + 2 * k]
        st = resize_with(o, a, d, s, w)
        if st != OK:
            return st
        for i in range(nd):
            w[W_SZ + i] = o[D_SIZES + i]
            w[W_SS + i] = a[D_STRIDES + i]
        dst_strides(w, o, nd)
        copy_nd(a[D_DATA] + pos * a[D_STRIDES + d] * es, o[D_DATA], w, nd, es)
        pos += s
    return OK


def view_kernel(block):
    op = block[0]
    a = desc(block[1])  # cat: the out
    w = scratch(block[3])
    es = block[4]
    if op == OP_CAT:
        return _cat(block, a, w, es)
    if op == OP_SPLIT:
        return _split(block, a, w, es)
    o = desc(block[2])
    if op == OP_RESHAPE:
        return _reshape(block, a, o, w, es)
    na = a[D_NDIM]
    nd = na
    off = 0
    if op == OP_COPY:
        for i in range(na):
            w[W_SZ + i] = a[D_SIZES + i]
            w[W_SS + i] = a[D_STRIDES + i]
    elif op == OP_PERMUTE:
        for i in range(na):
            p = block[5 + i]
            w[W_SZ + i] = a[D_SIZES + p]
            w[W_SS + i] = a[D_STRIDES + p]
    elif op == OP_EXPAND or op == OP_COPY_INTO:
        if op == OP_EXPAND:
            nd = block[5]
            fits = expand_view(a, block, 6, nd, w, W_SZ, W_SS)
        else:
            nd = o[D_NDIM]
            fits = expand_view(a, o, 8, nd, w, W_SZ, W_SS)
        if not fits:
            return INVALID_ARGUMENT
    elif op == OP_SLICE:
        d = block[5]
        step = block[8]
        n = a[D_SIZES + d]
        start = clamp_bound(ptr_like(block[6], np.int64(0))[0], n)  # run-time Ints (ctx.int_ref)
        end = clamp_bound(ptr_like(block[7], np.int64(0))[0], n)
        for i in range(na):
            w[W_SZ + i] = a[D_SIZES + i]
            w[W_SS + i] = a[D_STRIDES + i]
        w[W_SZ + d] = (end - start + step - 1) // step if end > start else 0
        w[W_SS + d] = a[D_STRIDES + d] * step
        off = start * a[D_STRIDES + d]
    elif op == OP_SELECT:
        d = block[5]
        idx = block[6]
        n = a[D_SIZES + d]
        if idx < -n or idx >= n:
            return INVALID_ARGUMENT
        if idx < 0:
            idx += n
        off = idx * a[D_STRIDES + d]
        nd = 0
        for i in range(na):
            if i != d:
                w[W_SZ + nd] = a[D_SIZES + i]
                w[W_SS + nd] = a[D_STRIDES + i]
                nd += 1
    elif op == OP_SQUEEZE:
        mask = block[5]
        nd = 0
        for i in range(na):
            if (mask >> i) & 1 == 1 and a[D_SIZES + i] == 1:
                continue
            w[W_SZ + nd] = a[D_SIZES + i]
            w[W_SS + nd] = a[D_STRIDES + i]
            nd += 1
    elif op == OP_UNSQUEEZE:
        d = block[5]
        nd = na + 1
        for i in range(nd):
            j = i if i < d else i - 1
            if i == d:
                w[W_SZ + i] = 1
                w[W_SS + i] = 0
            else:
                w[W_SZ + i] = a[D_SIZES + j]
                w[W_SS + i] = a[D_STRIDES + j]
    else:
        return NOT_SUPPORTED
    if op != OP_COPY_INTO:
        st = resize_to(o, w, nd)
        if st != OK:
            return st
    dst_strides(w, o, nd)
    copy_nd(a[D_DATA] + off * es, o[D_DATA], w, nd, es)
    return OK


# ---- dtype conversion (flat: same sizes and dim order on both sides) -----------------
CONVERTIBLE = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32),
               np.dtype(np.int64), np.dtype(np.bool_))


@njit(inline="always")
def _conv_loop(sp, dp, n, ms, md):
    x = carray(ptr_like(sp, ms), n)  # (arrays, not raw pointers: bools are stored as bytes)
    z = carray(ptr_like(dp, md), n)
    for i in range(n):
        z[i] = x[i]


@njit
def _conv_to_bool(sp, dp, n, ms):
    x = carray(ptr_like(sp, ms), n)
    z = carray(ptr_like(dp, np.bool_(False)), n)
    for i in range(n):
        z[i] = x[i] != 0


@njit
def _conv_from(sp, dp, n, dst, ms):
    if dst == ST_F32:
        _conv_loop(sp, dp, n, ms, np.float32(0))
    elif dst == ST_F64:
        _conv_loop(sp, dp, n, ms, np.float64(0))
    elif dst == ST_I32:
        _conv_loop(sp, dp, n, ms, np.int32(0))
    elif dst == ST_I64:
        _conv_loop(sp, dp, n, ms, np.int64(0))
    else:  # ST_BOOL (the binder admits only these five dtypes)
        _conv_to_bool(sp, dp, n, ms)


def convert_kernel(block):
    a, o = descs(block, 0, 2)
    st = resize_like(o, a)
    if st != OK:
        return st
    n = a[D_NUMEL]
    src = a[D_DTYPE]
    dst = o[D_DTYPE]
    if src == ST_F32:
        _conv_from(a[D_DATA], o[D_DATA], n, dst, np.float32(0))
    elif src == ST_F64:
        _conv_from(a[D_DATA], o[D_DATA], n, dst, np.float64(0))
    elif src == ST_I32:
        _conv_from(a[D_DATA], o[D_DATA], n, dst, np.int32(0))
    elif src == ST_I64:
        _conv_from(a[D_DATA], o[D_DATA], n, dst, np.int64(0))
    elif src == ST_BOOL:
        _conv_from(a[D_DATA], o[D_DATA], n, dst, np.bool_(False))
    else:
        return NOT_SUPPORTED
    return OK


# ---- binders --------------------------------------------------------------------------

def elem_size(*ts):
    """The common element size of ``ts`` (same dtype), or None to decline."""
    dt = ts[0].dtype
    if any(t.dtype != dt for t in ts) or dt.itemsize not in (1, 2, 4, 8):
        return None
    return dt.itemsize


def _norm_dim(d, n):
    """A dim wrapped into [0, n), or None (the reference kernel reports the error)."""
    if isinstance(d, bool) or not isinstance(d, int) or not -n <= d < n:
        return None
    return d % n


def _bind_view(ctx, op, self, out, params=()):
    es = elem_size(self, out)
    if es is None:
        return None
    return ctx.bind(lazy(view_kernel),
                    [op, ctx.desc(self), ctx.desc(out), ctx.buffer(SCRATCH_WORDS * 8), es]
                    + [int(p) for p in params])


def _copy_like(ctx, self, out):
    """Same-shape copy; a dtype change goes to the flat conversion kernel."""
    if self.dtype == out.dtype:
        return _bind_view(ctx, OP_COPY, self, out)
    if self.dtype in CONVERTIBLE and out.dtype in CONVERTIBLE and self.dim_order == out.dim_order:
        return ctx.bind(lazy(convert_kernel), [ctx.desc(self), ctx.desc(out)])
    return None


def bind_clone(ctx, self, memory_format, out):
    if memory_format not in (None, 0, 1):
        return None
    return _copy_like(ctx, self, out)


def bind_clone_dim_order(ctx, self, non_blocking, dim_order, out):
    if dim_order is not None and tuple(dim_order) != tuple(out.dim_order):
        return None
    return _copy_like(ctx, self, out)


def bind_to_dim_order_copy(ctx, self, non_blocking, dim_order, out):
    return bind_clone_dim_order(ctx, self, non_blocking, dim_order, out)


def bind_copy_(ctx, self, src, non_blocking):
    if src.ndim > self.ndim:
        return None
    return _bind_view(ctx, OP_COPY_INTO, src, self)


def bind_view_copy(ctx, self, size, out):
    size = [int(s) for s in size]
    if len(size) != out.ndim or size.count(-1) > 1 or any(s < -1 for s in size) \
            or not (self.is_contiguous() or out.is_contiguous()):
        return None
    return _bind_view(ctx, OP_RESHAPE, self, out, [len(size)] + size)


def bind_permute(ctx, self, dims, out):
    n = self.ndim
    perm = [_norm_dim(d, n) for d in dims] if n else []
    if len(dims) != n or None in perm or len(set(perm)) != n:
        return None
    return _bind_view(ctx, OP_PERMUTE, self, out, perm)


def bind_transpose(ctx, self, dim0, dim1, out):
    n = self.ndim
    if n == 0:
        return _bind_view(ctx, OP_COPY, self, out)
    d0, d1 = _norm_dim(dim0, n), _norm_dim(dim1, n)
    if d0 is None or d1 is None:
        return None
    perm = list(range(n))
    perm[d0], perm[d1] = d1, d0
    return _bind_view(ctx, OP_PERMUTE, self, out, perm)


def bind_t(ctx, self, out):
    if self.ndim > 2:
        return None
    return _bind_view(ctx, OP_PERMUTE, self, out, list(range(self.ndim))[::-1])


def bind_expand(ctx, self, size, implicit, out):
    size = [int(s) for s in size]
    lead = len(size) - self.ndim
    if lead < 0 or len(size) != out.ndim or any(s < 0 for s in size[:lead]) \
            or any(s < -1 for s in size):
        return None
    return _bind_view(ctx, OP_EXPAND, self, out, [len(size)] + size)


def bind_unsqueeze(ctx, self, dim, out):
    d = _norm_dim(dim, self.ndim + 1)
    return None if d is None else _bind_view(ctx, OP_UNSQUEEZE, self, out, [d])


def bind_squeeze_dims(ctx, self, dim, out):
    n = self.ndim
    if n == 0:
        return _bind_view(ctx, OP_COPY, self, out)
    ds = [_norm_dim(d, n) for d in dim]
    if None in ds or len(set(ds)) != len(ds):
        return None
    return _bind_view(ctx, OP_SQUEEZE, self, out, [sum(1 << d for d in ds)])


def bind_squeeze_dim(ctx, self, dim, out):
    return bind_squeeze_dims(ctx, self, [dim], out)


def bind_slice(ctx, self, dim, start, end, step, out):
    d = _norm_dim(dim, self.ndim) if self.ndim and not isinstance(dim, IntSlot) else None
    if d is None or not isinstance(step, int) or isinstance(step, IntSlot) or step <= 0:
        return None
    if not isinstance(start, IntSlot):
        start = 0 if start is None else max(-BIG, min(BIG, int(start)))
    if not isinstance(end, IntSlot):
        end = BIG if end is None else max(-BIG, min(BIG, int(end)))
    return _bind_view(ctx, OP_SLICE, self, out, [d, ctx.int_ref(start), ctx.int_ref(end), step])


def bind_select(ctx, self, dim, index, out):
    d = _norm_dim(dim, self.ndim) if self.ndim else None
    if d is None or not isinstance(index, int) or abs(index) > BIG:
        return None
    return _bind_view(ctx, OP_SELECT, self, out, [d, index])


def bind_cat(ctx, tensors, dim, out):
    if not tensors or any(t is None for t in tensors):
        return None
    es = elem_size(out, *tensors)
    d = _norm_dim(dim, out.ndim) if out.ndim else None
    if es is None or d is None:
        return None
    return ctx.bind(lazy(view_kernel), [OP_CAT, ctx.desc(out), 0, ctx.buffer(SCRATCH_WORDS * 8), es,
                                        d, len(tensors)] + [ctx.desc(t) for t in tensors])


def bind_split_with_sizes(ctx, self, split_sizes, dim, out):
    if not out or len(out) != len(split_sizes) or any(o is None for o in out) \
            or any(not isinstance(s, int) or s < 0 for s in split_sizes):
        return None
    es = elem_size(self, *out)
    d = _norm_dim(dim, self.ndim) if self.ndim else None
    if es is None or d is None:
        return None
    words = [OP_SPLIT, ctx.desc(self), 0, ctx.buffer(SCRATCH_WORDS * 8), es, d, len(out)]
    for o, s in zip(out, split_sizes):
        words += [ctx.desc(o), s]
    return ctx.bind(lazy(view_kernel), words)
