"""Pooling, resampling and distance kernels, shared part: typed element access through
descriptor strides and plane walks.
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.fast.deferred import njit
from pyruntime.kernels.fast.nb import (ST_BF16, ST_F16, ST_F32, ST_F64, ST_U8, f32_from_bits, f64_to_bf16,
                             f64_to_half, half_to_f64, is_contiguous, load_f64, load_i64, offset_of,
                             ptr_like, resize_to, store_f64, store_i64)


U8 = np.dtype(np.uint8)
F64 = np.dtype(np.float64)


def _is_float(dt):
    return dt.kind == "f" or dt.name == "bfloat16"


def _lp(dt):
    """True when the reference computes in float32 (float32 and the half types)."""
    return _is_float(dt) and dt != F64


# ---- shared helpers ---------------------------------------------------------------------

# Element access through the run-time scalar type, compiled once and called (not inlined)
# from every site: inlining nb's 10-way dtype switches at each site multiplies compile time.

@njit
def _ld(addr, st, i):
    if st == ST_F16:
        return half_to_f64(np.int64(ptr_like(addr, np.uint16(0))[i]))
    return load_f64(addr, st, i)


@njit
def _ldi(addr, st, i):
    return load_i64(addr, st, i)


@njit
def _stf(addr, st, i, v):
    store_f64(addr, st, i, v)


@njit
def _sti(addr, st, i, v):
    store_i64(addr, st, i, v)


@njit(inline="always")
def _ldx(addr, st, i):
    """Floats inline (the hot cases), integers through ``_ld``."""
    if st == ST_F32:
        return np.float64(ptr_like(addr, np.float32(0))[i])
    if st == ST_F64:
        return ptr_like(addr, np.float64(0))[i]
    if st == ST_F16:
        return half_to_f64(np.int64(ptr_like(addr, np.uint16(0))[i]))
    if st == ST_BF16:
        return np.float64(f32_from_bits(np.int32(np.int64(ptr_like(addr, np.uint16(0))[i]) << 16)))
    return _ld(addr, st, i)


@njit(inline="always")
def _ldix(addr, st, i):
    """uint8 / float64 (the fixed-point resampling cases) inline, others through ``_ldi``."""
    if st == ST_U8:
        return np.int64(ptr_like(addr, np.uint8(0))[i])
    if st == ST_F64:
        return np.int64(ptr_like(addr, np.float64(0))[i])
    return _ldi(addr, st, i)


@njit(inline="always")
def _stix(addr, st, i, v):
    if st == ST_U8:
        ptr_like(addr, np.uint8(0))[i] = np.uint8(v)
    elif st == ST_F64:
        ptr_like(addr, np.float64(0))[i] = np.float64(v)
    else:
        _sti(addr, st, i, v)


@njit(inline="always")
def _stx(addr, st, i, v):
    if st == ST_F32:
        ptr_like(addr, np.float32(0))[i] = np.float32(v)
    elif st == ST_F64:
        ptr_like(addr, np.float64(0))[i] = v
    elif st == ST_F16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_half(v))
    elif st == ST_BF16:
        ptr_like(addr, np.uint16(0))[i] = np.uint16(f64_to_bf16(v))
    else:
        _stf(addr, st, i, v)


@njit(inline="always")
def _r(v, lp):
    """float32 rounding of a float64 step when the op-math type is float32."""
    return np.float64(np.float32(v)) if lp else v


@njit(inline="always")
def _plane(d, p):
    """Storage offset of plane ``p`` (leading dims, row-major) of descriptor ``d``."""
    off = 0
    for i in range(d[2] - 3, -1, -1):
        sz = d[8 + i]
        off += (p % sz) * d[24 + i]
        p //= sz
    return off


@njit(inline="always")
def _planes(d):
    n = 1
    for i in range(d[2] - 2):
        n *= d[8 + i]
    return n


@njit(inline="always")
def _resize_hw(x, o, oh, ow, sc):
    """Resize ``o`` to x's leading dims + (oh, ow)."""
    nd = x[2]
    for i in range(nd - 2):
        sc[i] = x[8 + i]
    sc[nd - 2] = oh
    sc[nd - 1] = ow
    return resize_to(o, sc, nd)


@njit(inline="always")
def _off(d, k):
    return k if is_contiguous(d) else offset_of(d, k)


@njit
def _plane_offsets(d, P):
    """Storage offsets of the P planes (leading dims, row-major) of descriptor ``d``."""
    offs = np.zeros(max(P, 1), np.int64)
    for p in range(P):
        offs[p] = _plane(d, p)
    return offs


@njit(inline="always")
def _planes_outer(x):
    """Visit plane by plane unless planes interleave (channels-last): then pixel by pixel."""
    nd = x[2]
    return nd < 3 or x[24 + nd - 3] >= x[24 + nd - 1]
