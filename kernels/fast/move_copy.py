"""Data movement, part 1: op codes, scratch layout, and copying one iteration space
(bytes, or a cast through float64/int64 runs of ``kernels.fast.runs``).
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.fast.copy_engine import W_DS, W_SS, W_SZ, advance, copy_nd, simplify, start
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import elem_size, is_float_st, ptr_like
from pyruntime.kernels.fast.runs import load_run, narrow_c, store_run


SCR = 768
CHUNK, CH = 512, 256  # a cast goes through this many scratch words at a time
# scratch words after the copy engine's first 128: iteration sizes, source strides,
# destination strides, segments per dim, segment counter, segments (3 per dim x 4 words:
# out start, count, source start, source step)
V_N, V_S, V_T, NSEG, CNT, SEG = 128, 144, 160, 176, 192, 208

(OP_COPY, OP_BCAST, OP_COPY_INTO, OP_NARROW, OP_DIAG, OP_STRIDED, OP_UNFOLD, OP_REAL, OP_FLIP,
 OP_ROLL, OP_ROLL_FLAT, OP_CPAD, OP_REFLECT, OP_REPLICATE, OP_TRIL, OP_TRIU, OP_REPEAT,
 OP_PSHUF, OP_PUNSHUF, OP_PERMUTE, OP_EXPAND, OP_SLICE, OP_SELECT, OP_SQUEEZE, OP_UNSQUEEZE,
 OP_VIEW, OP_STACK, OP_CAT, OP_SPLIT, OP_SPLITS, OP_UNBIND) = range(31)
SPECIAL = (OP_REPEAT, OP_PSHUF, OP_PUNSHUF, OP_VIEW)  # iteration dims are not out's dims


# ---- copying one iteration space: bytes, or a cast -------------------------------------

@njit
def _convert_nd(sp, sst, dp, dst, w, nd):
    """Cast-copy ``w``'s iteration space from ``sp`` (type ``sst``) to ``dp`` (``dst``), a row
    at a time in chunks through ``w``'s buffer words."""
    k = simplify(w, nd)
    if k < 0:
        return
    fl = is_float_st(sst)
    bi = w[CHUNK:CHUNK + CH]
    bf = bi.view(np.float64)
    last = max(k - 1, 0)
    n = w[W_SZ + last] if k > 0 else 1  # rank 0: one element
    si = w[W_SS + last] if k > 0 else 0
    di = w[W_DS + last] if k > 0 else 0
    outer = start(w, last)
    so = 0
    do = 0
    for _ in range(outer):
        for c0 in range(0, n, CH):
            m = min(CH, n - c0)
            if fl:  # float sources through float64, the others through int64
                load_run(bf, 0, sp, sst, so + c0 * si, si, m)
                store_run(dp, dst, do + c0 * di, di, m, bf, 0, narrow_c)
            else:
                load_run(bi, 0, sp, sst, so + c0 * si, si, m)
                store_run(dp, dst, do + c0 * di, di, m, bi, 0, narrow_c)
        so, do = advance(w, last, so, do)


@njit
def copy_space(sp, sst, dp, dst, w, nd):
    """Copy ``w``'s iteration space of ``nd`` dims (sizes and element strides in the copy
    engine's words) from ``sp`` to ``dp``: bytes, or a cast when the types differ."""
    if sst == dst:
        copy_nd(sp, dp, w, nd, elem_size(sst))
    else:
        _convert_nd(sp, sst, dp, dst, w, nd)


@njit
def copy_pieces(s, nd, sp, sst, dp, dst):
    """Copy the iteration space ``s[V_N/V_S/V_T]`` cut by the per-dim segments."""
    ses = elem_size(sst)
    des = elem_size(dst)
    total = 1
    for i in range(nd):
        s[CNT + i] = 0
        total *= max(s[NSEG + i], 1)
    for _ in range(total):
        so = 0
        do = 0
        for i in range(nd):
            if s[NSEG + i] == 0:
                s[W_SZ + i] = s[V_N + i]
                s[W_SS + i] = s[V_S + i]
            else:
                b = SEG + (i * 3 + s[CNT + i]) * 4
                s[W_SZ + i] = s[b + 1]
                s[W_SS + i] = s[V_S + i] * s[b + 3]
                so += s[b + 2] * s[V_S + i]
                do += s[b] * s[V_T + i]
            s[W_DS + i] = s[V_T + i]
        copy_space(sp + so * ses, sst, dp + do * des, dst, s, nd)
        for i in range(nd - 1, -1, -1):
            if s[NSEG + i] > 1:
                s[CNT + i] += 1
                if s[CNT + i] < s[NSEG + i]:
                    break
                s[CNT + i] = 0


@njit(inline="always")
def whole_dim(s, k, n, ss, ts):
    """Iteration dim ``k``: ``n`` elements, source and target strides ``ss``/``ts``, uncut."""
    s[V_N + k] = n
    s[V_S + k] = ss
    s[V_T + k] = ts
    s[NSEG + k] = 0


@njit(inline="always")
def seg(s, i, k, out_start, count, src_start, step):
    b = SEG + (i * 3 + k) * 4
    s[b] = out_start
    s[b + 1] = max(count, 0)
    s[b + 2] = src_start
    s[b + 3] = step


@njit
def fill(dp, es, n, pattern, step):
    """Store the ``es``-byte ``pattern`` ``n`` times, ``step`` elements apart."""
    if es == 8:
        p8 = ptr_like(dp, np.int64(0))
        for i in range(n):
            p8[i * step] = pattern
    elif es == 4:
        p4 = ptr_like(dp, np.int32(0))
        v4 = np.int32(pattern)
        for i in range(n):
            p4[i * step] = v4
    elif es == 2:
        p2 = ptr_like(dp, np.int16(0))
        v2 = np.int16(pattern)
        for i in range(n):
            p2[i * step] = v2
    else:
        p1 = ptr_like(dp, np.int8(0))
        v1 = np.int8(pattern)
        for i in range(n):
            p1[i * step] = v1
