"""Indexing kernels, shared part: dtype lists, moving elements and strided blocks of
any dtype, and row walks.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.copy_engine import (SCRATCH_WORDS, W_DS, W_SS, W_SZ, advance,
                                                copy_element, copy_simplified, simplify, start)
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (elem_size, is_float_st, load_f64, load_i64, round_to,
                             store_f64, store_i64)


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
def move(sp, sst, si, dp, dst, di):
    """dst[di] = src[si], converting as a C++ static_cast (bits copied when types agree)."""
    if sst == dst:
        copy_element(sp, si, dp, di, elem_size(sst))
    elif is_float_st(sst):
        store_f64(dp, dst, di, load_f64(sp, sst, si))
    else:
        store_i64(dp, dst, di, load_i64(sp, sst, si))


@njit
def add_element(sp, sst, si, dp, dst, di):
    """dst[di] += src[si] in dst's type, src cast to it first (numpy ``add.at`` after astype)."""
    if is_float_st(dst):
        store_f64(dp, dst, di, load_f64(dp, dst, di) + round_to(load_f64(sp, sst, si), dst))
    elif dst == 11:  # bool: logical or
        b = load_f64(sp, sst, si) != 0.0 if is_float_st(sst) else load_i64(sp, sst, si) != 0
        store_i64(dp, dst, di, np.int64(load_i64(dp, dst, di) != 0 or b))
    else:
        store_i64(dp, dst, di, load_i64(dp, dst, di) + load_i64(sp, sst, si))


@njit
def move_simplified(sp, sst, dp, dst, w, nr, acc):
    """Copy (``acc`` 0) or accumulate (1) a space simplified by ``simplify`` (sizes and
    element strides in the copy engine's words of ``w``) from ``sp`` to ``dp``."""
    if nr < 0:
        return
    if acc == 0 and sst == dst:
        copy_simplified(sp, dp, w, nr, elem_size(sst))
        return
    if nr == 0:
        if acc == 0:
            move(sp, sst, 0, dp, dst, 0)
        else:
            add_element(sp, sst, 0, dp, dst, 0)
        return
    last = nr - 1
    n = w[W_SZ + last]
    si = w[W_SS + last]
    di = w[W_DS + last]
    outer = start(w, last)
    so = 0
    do = 0
    for _ in range(outer):
        if acc == 0:
            for c in range(n):
                move(sp, sst, so + c * si, dp, dst, do + c * di)
        else:
            for c in range(n):
                add_element(sp, sst, so + c * si, dp, dst, do + c * di)
        so, do = advance(w, last, so, do)


@njit
def copy_all(a, o, w):
    """o = a, same sizes, any dim orders and (convertible) dtypes."""
    nd = a[D_NDIM]
    for i in range(nd):
        w[W_SZ + i] = a[D_SIZES + i]
        w[W_SS + i] = a[D_STRIDES + i]
        w[W_DS + i] = o[D_STRIDES + i]
    move_simplified(a[D_DATA], a[D_DTYPE], o[D_DATA], o[D_DTYPE], w, simplify(w, nd), 0)


@njit(inline="always")
def index_at(ix, k):
    return load_i64(ix[D_DATA], ix[D_DTYPE], k)


# Row walks (gather/scatter, masks, top-k): scratch words E sizes, E+16/E+32/E+48 three
# stride sets, E+64 counter, R_OFF.. the three offsets of the current row.
R_OFF = E + 80


@njit
def start_rows(w, nd):
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
def next_row(w, outer):
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

