"""Pooling, resampling and distance kernels, shared part: typed element access through
descriptor strides and plane walks.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import D_DATA, D_DTYPE, D_NDIM, D_SIZES, D_STRIDES
from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (ST_BF16, ST_F16, ST_F32, ST_F64, ST_U8, f32_from_bits,
                                       f64_to_bf16, f64_to_half, half_to_f64, is_contiguous,
                                       load_f64_call, load_i64_call, offset_in, offset_of, ptr_like,
                                       resize_to, store_f64_call, store_i64_call)


U8 = np.dtype(np.uint8)
F64 = np.dtype(np.float64)


def is_float(dt):
    return dt.kind == "f" or dt.name == "bfloat16"


def computes_f32(dt):
    """True when the reference computes in float32 (float32 and the half types)."""
    return is_float(dt) and dt != F64


# ---- shared helpers ---------------------------------------------------------------------

# Floats and the resampling cases inline; the rest through nb's called loads/stores
# (``*_call``): inlining nb's 10-way dtype switches at each site multiplies compile time.

@njit(inline="always")
def ldx(addr, st, i):
    """Floats inline (the hot cases), integers through ``load_f64_call``."""
    if st == ST_F32:
        return np.float64(ptr_like(addr, np.float32(0))[i])
    if st == ST_F64:
        return ptr_like(addr, np.float64(0))[i]
    if st == ST_F16:
        return half_to_f64(np.int64(ptr_like(addr, np.uint16(0))[i]))
    if st == ST_BF16:
        return np.float64(f32_from_bits(np.int32(np.int64(ptr_like(addr, np.uint16(0))[i]) << 16)))
    return load_f64_call(addr, st, i)


@njit(inline="always")
def ldix(addr, st, i):
    """uint8 / float64 (the fixed-point resampling cases) inline, others called."""
    if st == ST_U8:
        return np.int64(ptr_like(addr, np.uint8(0))[i])
    if st == ST_F64:
        return np.int64(ptr_like(addr, np.float64(0))[i])
    return load_i64_call(addr, st, i)


@njit(inline="always")
def stix(addr, st, i, v):
    if st == ST_U8:
        ptr_like(addr, np.uint8(0))[i] = np.uint8(v)
    elif st == ST_F64:
        ptr_like(addr, np.float64(0))[i] = np.float64(v)
    else:
        store_i64_call(addr, st, i, v)


@njit(inline="always")
def stx(addr, st, i, v):
    if st == ST_F32:
        ptr_like(addr, np.float32(0))[i] = np.float32(v)
    elif st == ST_F64:
        ptr_like(addr, np.float64(0))[i] = v
    elif st == ST_F16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_half(v))
    elif st == ST_BF16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_bf16(v))
    else:
        store_f64_call(addr, st, i, v)


@njit(inline="always")
def r32(v, lp):
    """float32 rounding of a float64 step when the op-math type is float32."""
    return np.float64(np.float32(v)) if lp else v


@njit(inline="always")
def plane_count(d):
    n = 1
    for i in range(d[D_NDIM] - 2):
        n *= d[D_SIZES + i]
    return n


@njit(inline="always")
def resize_hw(x, o, oh, ow, sc):
    """Resize ``o`` to x's leading dims + (oh, ow)."""
    nd = x[D_NDIM]
    for i in range(nd - 2):
        sc[i] = x[D_SIZES + i]
    sc[nd - 2] = oh
    sc[nd - 1] = ow
    return resize_to(o, sc, nd)


@njit(inline="always")
def element_offset(d, k):
    return k if is_contiguous(d) else offset_of(d, k)


@njit
def plane_offsets(d, P):
    """Storage offsets of the P planes (leading dims, row-major) of descriptor ``d``."""
    offs = np.zeros(max(P, 1), np.int64)
    for p in range(P):
        offs[p] = offset_in(d, p, d[D_NDIM] - 2)  # over the leading dims
    return offs


@njit(inline="always")
def _planes_outer(x):
    """Visit plane by plane unless planes interleave (channels-last): then pixel by pixel."""
    nd = x[D_NDIM]
    return nd < 3 or x[D_STRIDES + nd - 3] >= x[D_STRIDES + nd - 1]


@njit(inline="always")
def hw_view(d):
    """(data address, scalar type, row stride, column stride) of ``d``'s last two dims."""
    nd = d[D_NDIM]
    return d[D_DATA], d[D_DTYPE], d[D_STRIDES + nd - 2], d[D_STRIDES + nd - 1]


@njit
def plane_walk(x, o, oh, ow):
    """(x's and o's plane offsets, planes outer, loop extents n1, n2, n3) of a plane walk."""
    P = plane_count(x)
    po = _planes_outer(x)
    n1, n2, n3 = (P, oh, ow) if po else (oh, ow, P)
    return plane_offsets(x, P), plane_offsets(o, P), po, n1, n2, n3
