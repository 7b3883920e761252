"""Generic compiled elementwise engine: every dtype, broadcasting, any layout.

One cfunc (``anyelem_kernel``) runs every unary, binary and ternary elementwise
op of ``kernels/elementwise/reference.py``, ``binary.py``, ``compare.py`` and
``activation.py`` for every dtype the reference kernel takes. The binder
decides everything the reference kernel decides from dtypes (type promotion,
the compute dtype, which casts happen) and writes it into the block; the
kernel only reads sizes at run time.

How a run goes:

1. shapes: the inputs broadcast (right-aligned) to the out's rank; ``out`` is
   resized; per-operand element strides over that shape (0 where broadcast);
   size-1 dims are dropped and dims contiguous for every operand merged, so
   contiguous same-shape operands become one flat row;
2. chunks of up to ``CH`` elements (spanning rows when rows are short) are
   gathered into float64 (floating compute) or int64 (integer/bool compute)
   buffers with one typed loop per dtype, computed with one loop per op, and
   scattered into ``out``'s dtype. The chunk buffers live on the stack.

Semantics follow the reference kernels: operands are first cast to the
compute dtype (int32/int64/float64 values rounded to float32 when the op
computes in float32, wider integers wrapped), float32 intermediate results
are rounded where the reference rounds them, the result is rounded to the
result dtype when ``out`` has another dtype, and integer results wrap on store.
Integer division by zero returns InvalidArgument (the reference raises).

An op that also has a typed binder (``generic_bind.PAIRED``) gets its binder from
``elementwise/choose.py``, the typed one first; the others register theirs plainly. A
binder never raises: arguments the reference kernel refuses are declined, so the
reference reports them.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_NUMEL, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.broadcast import bcast_dim, bcast_size
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.elementwise.generic_io import (BUF, B_FILL_T, B_GLU, CH, CNT, P0, SEG, SH,
                                                      STR, VD, WORDS, fix_chunk, gather_chunk,
                                                      round_chunk, scatter_chunk, stack_words,
                                                      words_at, wrap_chunk)
from pyruntime.kernels.elementwise.generic_math import cf1, cf2, ci1, ci2, ternary_rows
from pyruntime.kernels.fast.nb import (INVALID_ARGUMENT, OK, ST_BOOL, ST_F32, bits_to_f64, desc,
                                       elem_size, is_float_st, load_f64, load_i64, ptr_like,
                                       resize_to)


# ---- run-time preparation of special operands ---------------------------------------------

@njit(inline="always")
def _glu_views(s, dim, w, base):
    """Two views of ``s`` (first and second half along ``dim``) as descriptors in ``w``."""
    n = s[D_SIZES + dim]
    if n % 2 != 0:
        return INVALID_ARGUMENT
    h = n // 2
    for i in range(64):
        w[VD + i] = s[i]
        w[VD + 64 + i] = s[i]
    w[VD + 8 + dim] = h
    w[VD + 64 + 8 + dim] = h
    w[VD + 64] = s[D_DATA] + h * s[D_STRIDES + dim] * elem_size(s[D_DTYPE])
    return OK


@njit(inline="always")
def _check_fill(v, block):
    """fill.Tensor_out's value must fit an integer ``self``, as the reference checks."""
    if block[P0 + 4] == 0:
        return OK
    st = v[D_DTYPE]
    if is_float_st(st):
        f = load_f64(v[D_DATA], st, 0)
        if not bits_to_f64(block[P0 + 2]) <= f <= bits_to_f64(block[P0 + 3]):
            return INVALID_ARGUMENT  # also NaN
    elif st != ST_BOOL:
        i = load_i64(v[D_DATA], st, 0)
        if not block[P0] <= i <= block[P0 + 1]:
            return INVALID_ARGUMENT
    return OK


@njit(inline="always")
def gather_inputs(base, m, nin, skip, addrs, sts, strides, block, w, nseg, filled):
    """The chunk's ``nin`` inputs into their buffers (typed like ``m``), each cast as its
    block word 8 + k says; input 0 not at all where ``skip``'s bit 0 is set."""
    for k in range(nin):
        if k == 0 and skip & 1 != 0:
            continue
        buf = ptr_like(base + (BUF + k * CH) * 8, m)
        # its segment-table column: int64 k, so that one gather_chunk compiles per buffer type
        gather_chunk(buf, addrs[k], sts[k], w, 2 + k, nseg, strides[k])
        if block[8 + k] >= 0:
            fix_chunk(buf, filled, block[8 + k])


# ---- the kernel ----------------------------------------------------------------------------

def anyelem_kernel(block):
    base = stack_words(np.int64(0))
    w = words_at(base, WORDS)
    op = block[0]
    fpath = block[1] != 0
    ct = block[2]
    rdt = block[3]
    o = desc(block[4])
    nin = 1 if op < 64 else (2 if op < 128 else 3)
    a0 = block[5]
    a1 = block[6]
    if op == B_GLU:
        st = _glu_views(desc(block[5]), block[18], w, base)
        if st != OK:
            return st
        a0 = base + VD * 8
        a1 = base + (VD + 64) * 8
    elif op == B_FILL_T:
        v = desc(a1)
        if v[D_NUMEL] != 1:
            return INVALID_ARGUMENT
        st = _check_fill(v, block)
        if st != OK:
            return st
    # broadcast the inputs to out's rank
    nd = o[D_NDIM]
    for i in range(nd):
        w[SH + i] = 1
    for k in range(nin):
        d = desc(a0 if k == 0 else (a1 if k == 1 else block[7]))
        nk = d[D_NDIM]
        if nk > nd:
            return INVALID_ARGUMENT
        for i in range(nd - nk, nd):
            sz = bcast_size(w[SH + i], d[D_SIZES + i - (nd - nk)])
            if sz < 0:
                return INVALID_ARGUMENT
            w[SH + i] = sz
    st = resize_to(o, w, nd)
    if st != OK:
        return st
    total = o[D_NUMEL]
    if total == 0:
        return OK
    for i in range(nd):
        w[STR + i] = o[D_STRIDES + i] if w[SH + i] != 1 else 0
    for k in range(nin):
        d = desc(a0 if k == 0 else (a1 if k == 1 else block[7]))
        c = STR + 16 * (k + 1)
        for i in range(nd):
            w[c + i] = bcast_dim(d, i, nd)[1]
    # drop size-1 dims, merge dims that are contiguous for every operand
    m = 0
    for i in range(nd):
        sz = w[SH + i]
        if sz == 1:
            continue
        if m > 0:
            ok = True
            for k in range(nin + 1):
                c = STR + 16 * k
                if w[c + m - 1] != w[c + i] * sz:
                    ok = False
            if ok:
                w[SH + m - 1] *= sz
                for k in range(nin + 1):
                    c = STR + 16 * k
                    w[c + m - 1] = w[c + i]
                continue
        w[SH + m] = sz
        for k in range(nin + 1):
            c = STR + 16 * k
            w[c + m] = w[c + i]
        m += 1
    if m == 0:
        m = 1
        w[SH] = 1
        for k in range(nin + 1):
            w[STR + 16 * k] = 0
    inner = w[SH + m - 1]
    so = w[STR + m - 1]
    s0 = w[STR + 16 + m - 1]
    s1 = w[STR + 32 + m - 1]
    s2 = w[STR + 48 + m - 1]
    d0 = desc(a0)
    addr0, st0 = d0[D_DATA], d0[D_DTYPE]
    addr1, st1, addr2, st2 = np.int64(0), np.int64(0), np.int64(0), np.int64(0)
    if nin > 1:
        d1 = desc(a1)
        addr1, st1 = d1[D_DATA], d1[D_DTYPE]
    if nin > 2:
        d2 = desc(block[7])
        addr2, st2 = d2[D_DATA], d2[D_DTYPE]
    addrs, sts, strides = (addr0, addr1, addr2), (st0, st1, st2), (s0, s1, s2)
    skip = block[11]
    c32 = fpath and ct == ST_F32
    fx = ptr_like(base + BUF * 8, np.float64(0))
    fy = ptr_like(base + (BUF + CH) * 8, np.float64(0))
    fz = ptr_like(base + (BUF + 2 * CH) * 8, np.float64(0))
    fr = ptr_like(base + (BUF + 3 * CH) * 8, np.float64(0))
    ix = ptr_like(base + BUF * 8, np.int64(0))
    iy = ptr_like(base + (BUF + CH) * 8, np.int64(0))
    iz = ptr_like(base + (BUF + 2 * CH) * 8, np.int64(0))
    ir_ = ptr_like(base + (BUF + 3 * CH) * 8, np.int64(0))
    fp0 = bits_to_f64(block[P0])
    fp1 = bits_to_f64(block[P0 + 1])
    fp2 = bits_to_f64(block[P0 + 2])
    for i in range(m - 1):
        w[CNT + i] = 0
    bo, b0, b1, b2 = np.int64(0), np.int64(0), np.int64(0), np.int64(0)
    pos = np.int64(0)
    done = np.int64(0)
    while done < total:
        filled = 0
        nseg = 0
        while filled < CH and done + filled < total:
            n = min(inner - pos, CH - filled)
            q = SEG + 5 * nseg
            w[q] = n
            w[q + 1] = bo + pos * so
            w[q + 2] = b0 + pos * s0
            w[q + 3] = b1 + pos * s1
            w[q + 4] = b2 + pos * s2
            nseg += 1
            filled += n
            pos += n
            if pos == inner:
                pos = 0
                for i in range(m - 2, -1, -1):  # advance the outer counter
                    w[CNT + i] += 1
                    bo += w[STR + i]
                    b0 += w[STR + 16 + i]
                    b1 += w[STR + 32 + i]
                    b2 += w[STR + 48 + i]
                    if w[CNT + i] < w[SH + i]:
                        break
                    bo -= w[STR + i] * w[SH + i]
                    b0 -= w[STR + 16 + i] * w[SH + i]
                    b1 -= w[STR + 32 + i] * w[SH + i]
                    b2 -= w[STR + 48 + i] * w[SH + i]
                    w[CNT + i] = 0
        if fpath:
            gather_inputs(base, np.float64(0), nin, skip, addrs, sts, strides, block, w, nseg,
                          filled)
            if nin == 1:
                cf1(op, fx, fr, filled, fp0, fp1, fp2, c32)
            elif nin == 2:
                cf2(op, fx, fy, fr, filled, fp0, c32)
            else:
                ternary_rows(op, fx, fy, fz, fr, filled)
            if rdt >= 0:
                round_chunk(fr, filled, rdt)
            scatter_chunk(fr, o[D_DATA], o[D_DTYPE], w, nseg, so)
        else:
            gather_inputs(base, np.int64(0), nin, skip, addrs, sts, strides, block, w, nseg,
                          filled)
            if nin == 1:
                ci1(op, ix, ir_, filled, block[P0], block[P0 + 1], block[P0 + 2])
            elif nin == 2:
                st = ci2(op, ix, iy, ir_, filled, block[P0])
                if st != OK:
                    return st
            else:
                ternary_rows(op, ix, iy, iz, ir_, filled)
            if rdt >= 0:
                wrap_chunk(ir_, filled, rdt)
            scatter_chunk(ir_, o[D_DATA], o[D_DTYPE], w, nseg, so)
        done += filled
    return OK
