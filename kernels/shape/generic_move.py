"""Compiled data movement for every dtype: the engine behind copies and casts, views, flips
and rolls, pads, triangles, joins and splits (binders: ``copy_shape.py``; the creation ops:
``creation.py``; the iteration spaces: ``move_space.py``; row copies: ``move_copy.py``).

One kernel (``move_kernel``) serves every data-movement op: it describes the
op's result as an iteration space over the source (sizes, source strides, an
offset; all read from the descriptors at run time, so dynamic shapes and any
dim order work), resizes ``out``, and runs it as *pieces*: each dim may be cut
into up to three affine segments (a flip is one segment with step -1, a roll
two, a reflection/replication pad three), and every combination of segments is
a strided copy. Same dtype: the byte copy engine of ``kernels.shape.typed``
(``copy_nd``); different dtypes: a strided cast, a row chunk at a time through
float64 (float sources) or int64 (integer/bool sources) with one dtype switch
per chunk (C++ static_cast semantics; half and bfloat16 by bit manipulation,
rounding to nearest even as c10 does), so every op also takes an ``out`` of
another dtype, as the reference kernels' ``out.write`` does.

``create_kernel`` (``creation.py``) fills (full/ones/zeros/full_like/scalar_tensor/empty: the
value is converted to out's dtype at bind time exactly as the reference kernel
converts it and stored as a bit pattern) and computes ranges (arange, linspace,
logspace) element by element in the reference kernel's accumulate type.

Block of ``move_kernel``: ``[op, src, out, scratch, params...]`` (list ops:
``[op, src|0, out|0, scratch, dim, n, tensors...]``). ``scratch`` is
``SCR`` words owned by the instruction: the copy engine's words, then the
iteration space and the segments.
"""
from __future__ import annotations


from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.copy_engine import W_OUT, join_out
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.move_copy import (NSEG, OP_CAT, OP_COPY_INTO, OP_CPAD, OP_REAL,
                                            OP_ROLL_FLAT, OP_SPLIT, OP_SPLITS, OP_STACK, OP_TRIL,
                                            OP_TRIU, OP_UNBIND, SCR, SPECIAL, V_N, V_S, V_T, fill,
                                            copy_pieces, seg, whole_dim)
from pyruntime.kernels.shape.generic_space import build, roll_flat, special, triangle
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, desc, descs, elem_size,
                                       is_contiguous, resize_to, scratch)


# ---- joins and splits ----------------------------------------------------------------------

@njit
def _part(s, a, o, d, drop, pos):
    """Copy ``a``'s sizes with dim ``d`` of size ``s[W_OUT + d]`` (or dropped) starting at ``pos``
    along ``d``, into ``o`` (already resized)."""
    nd = a[D_NDIM]
    k = 0
    for i in range(nd):
        if drop and i == d:
            continue
        whole_dim(s, k, o[D_SIZES + k], a[D_STRIDES + i], o[D_STRIDES + k])
        k += 1
    copy_pieces(s, k, a[D_DATA] + pos * a[D_STRIDES + d] * elem_size(a[D_DTYPE]), a[D_DTYPE],
                o[D_DATA], o[D_DTYPE])


@njit
def _lists(op, block, s):
    d = block[4]
    n = block[5]
    if op == OP_STACK or op == OP_CAT:
        o = desc(block[2])
        nd = o[D_NDIM]
        st = join_out(block, 6, n, o, d, s, op == OP_STACK)
        if st != OK:
            return st
        pos = 0
        for k in range(n):
            a = desc(block[6 + k])
            if op == OP_CAT and a[D_NDIM] == 1 and a[D_NUMEL] == 0:
                continue
            m = 0
            for i in range(nd):
                if op == OP_STACK and i == d:
                    continue
                whole_dim(s, m, a[D_SIZES + m], a[D_STRIDES + m], o[D_STRIDES + i])
                m += 1
            copy_pieces(s, m, a[D_DATA], a[D_DTYPE],
                        o[D_DATA] + pos * o[D_STRIDES + d] * elem_size(o[D_DTYPE]), o[D_DTYPE])
            pos += 1 if op == OP_STACK else a[D_SIZES + d]
        return OK
    a = desc(block[1])
    nd = a[D_NDIM]
    size = a[D_SIZES + d]
    if op == OP_SPLIT:
        ss = block[6 + n]
        parts = 1
        if ss > 0:
            parts = max(1, (size + ss - 1) // ss)
        elif size != 0:
            return INVALID_ARGUMENT
        if parts != n:
            return INVALID_ARGUMENT
    elif op == OP_UNBIND:
        if size != n:
            return INVALID_ARGUMENT
    else:
        total = 0
        for k in range(n):
            total += block[6 + n + k]
        if total != size:
            return INVALID_ARGUMENT
    pos = 0
    for k in range(n):
        o = desc(block[6 + k])
        m = 0
        for i in range(nd):
            if op == OP_UNBIND and i == d:
                continue
            s[W_OUT + m] = a[D_SIZES + i]
            m += 1
        part = 1
        if op == OP_SPLIT:
            part = min(block[6 + n], size - pos)
            s[W_OUT + d] = part
        elif op == OP_SPLITS:
            part = block[6 + n + k]
            s[W_OUT + d] = part
        st = resize_to(o, s[W_OUT:], m)
        if st != OK:
            return st
        _part(s, a, o, d, op == OP_UNBIND, pos)
        pos += part
    return OK


def move_kernel(block):
    op = block[0]
    s = scratch(block[3], SCR)
    if op >= OP_STACK:
        return _lists(op, block, s)
    a, o = descs(block, 1, 2)
    st, nd, off = build(op, block, a, o, s)
    if st != OK:
        return st
    if op != OP_COPY_INTO:
        # (a rank other than out's, e.g. a squeeze of a dim no longer of size 1: NOT_SUPPORTED)
        st = resize_to(o, s[W_OUT:], o[D_NDIM]) if op in SPECIAL else resize_to(o, s[V_N:], nd)
        if st != OK:
            return st
    sst = block[4] if op == OP_REAL else a[D_DTYPE]
    if op == OP_ROLL_FLAT:
        if not (is_contiguous(a) and is_contiguous(o)):
            roll_flat(a, o, sst, block[4], s)
            return OK
        n = a[D_NUMEL]  # both flat: two runs
        if n == 0:
            return OK
        sh = block[4] % n
        nd = 1
        s[V_N] = n
        s[V_S] = 1
        s[NSEG] = 2
        seg(s, 0, 0, 0, sh, n - sh, 1)
        seg(s, 0, 1, sh, n - sh, 0, 1)
        s[V_T] = 1
    elif op in SPECIAL:
        nd = special(op, block, a, o, s)
        if nd < 0:
            return NOT_SUPPORTED
    else:
        for i in range(nd):
            s[V_T + i] = o[D_STRIDES + i]
    if op == OP_CPAD:
        fill(o[D_DATA], elem_size(o[D_DTYPE]), o[D_NUMEL], block[4], 1)
    copy_pieces(s, nd, a[D_DATA] + off * elem_size(sst), sst, o[D_DATA], o[D_DTYPE])
    if op == OP_TRIL or op == OP_TRIU:
        triangle(o, op == OP_TRIL, block[4])
    return OK
