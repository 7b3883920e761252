"""Data movement, part 1: op codes, scratch layout, and copying one iteration space
(bytes, or a cast through float64/int64 rows).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from kernels.fast.copy_engine import W_DS, W_SS, W_SZ, advance, copy_nd, simplify, start
from kernels.fast.nb import (ST_BF16, ST_BOOL, ST_F16, ST_F32, ST_F64, ST_I8, ST_I16, ST_I32,
                             ST_I64, elem_size, f32_from_bits, f32_to_bits, f64_to_i32, f64_to_int,
                             is_float_st, ptr_like)


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

@njit(inline="always")
def _half_to_f32(h):
    """IEEE half bits -> float32 (exact)."""
    sign = (h & 0x8000) << 16
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0:  # zero and subnormals: m * 2**-24
        v = np.float32(m) * np.float32(5.960464477539063e-08)
        return -v if sign != 0 else v
    if e == 31:
        bits = sign | 0x7F800000 | (m << 13)
    else:
        bits = sign | ((e + 112) << 23) | (m << 13)
    return f32_from_bits(np.int32(np.uint32(bits)))


@njit(inline="always")
def _f32_to_half(f):
    """float32 -> IEEE half bits, round to nearest even (as c10::Half)."""
    x = np.int64(f32_to_bits(f)) & 0xFFFFFFFF
    sign = (x >> 16) & 0x8000
    x &= 0x7FFFFFFF
    if x >= 0x7F800000:  # inf, nan
        return sign | (0x7E00 if x > 0x7F800000 else 0x7C00)
    if x >= 0x477FF000:  # >= 65520: rounds to inf
        return sign | 0x7C00
    if x < 0x38800000:  # below 2**-14: a subnormal half, in units of 2**-24
        return sign | np.int64(np.rint(np.float64(f32_from_bits(np.int32(x))) * 16777216.0))
    x -= 0x38000000  # rebias the exponent, then round 23 mantissa bits to 10
    return sign | ((x + 0xFFF + ((x >> 13) & 1)) >> 13)


@njit(inline="always")
def _bf16_to_f32(h):
    return f32_from_bits(np.int32(np.uint32(h << 16)))


@njit(inline="always")
def _f32_to_bf16(f):
    if f != f:
        return 0x7FC0
    u = np.int64(f32_to_bits(f)) & 0xFFFFFFFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


@njit
def _load_row(sp, sst, off, step, bf, bi, m):
    """``m`` elements ``sp[off + j * step]`` into ``bf`` (float sources, as float64) or ``bi``
    (integer/bool sources, as int64): one dtype switch per row, not per element."""
    if sst == ST_F32:
        p4 = ptr_like(sp, np.float32(0))
        for j in range(m):
            bf[j] = p4[off + j * step]
    elif sst == ST_F64:
        p8 = ptr_like(sp, np.float64(0))
        for j in range(m):
            bf[j] = p8[off + j * step]
    elif sst == ST_F16:
        ph = ptr_like(sp, np.uint16(0))
        for j in range(m):
            bf[j] = _half_to_f32(np.int64(ph[off + j * step]))
    elif sst == ST_BF16:
        pb = ptr_like(sp, np.uint16(0))
        for j in range(m):
            bf[j] = _bf16_to_f32(np.int64(pb[off + j * step]))
    elif sst == ST_I64:
        q8 = ptr_like(sp, np.int64(0))
        for j in range(m):
            bi[j] = q8[off + j * step]
    elif sst == ST_I32:
        q4 = ptr_like(sp, np.int32(0))
        for j in range(m):
            bi[j] = q4[off + j * step]
    elif sst == ST_I16:
        q2 = ptr_like(sp, np.int16(0))
        for j in range(m):
            bi[j] = q2[off + j * step]
    elif sst == ST_I8:
        q1 = ptr_like(sp, np.int8(0))
        for j in range(m):
            bi[j] = q1[off + j * step]
    else:  # uint8, bool
        u1 = ptr_like(sp, np.uint8(0))
        for j in range(m):
            bi[j] = u1[off + j * step]


@njit
def _store_row(dp, dst, off, step, bf, bi, m, fl):
    """Store ``m`` values from ``bf`` (``fl``) or ``bi`` as ``dst`` (C++ static_cast:
    float -> int truncates toward zero, integers wrap, -> bool is != 0)."""
    if dst == ST_F32:
        p4 = ptr_like(dp, np.float32(0))
        for j in range(m):
            p4[off + j * step] = np.float32(bf[j]) if fl else np.float32(bi[j])
    elif dst == ST_F64:
        p8 = ptr_like(dp, np.float64(0))
        for j in range(m):
            p8[off + j * step] = bf[j] if fl else np.float64(bi[j])
    elif dst == ST_F16:  # through float32, as C++ converts double -> Half
        ph = ptr_like(dp, np.uint16(0))
        for j in range(m):
            ph[off + j * step] = np.uint16(_f32_to_half(np.float32(bf[j]) if fl
                                                        else np.float32(bi[j])))
    elif dst == ST_BF16:
        pb = ptr_like(dp, np.uint16(0))
        for j in range(m):
            pb[off + j * step] = np.uint16(_f32_to_bf16(np.float32(bf[j]) if fl
                                                        else np.float32(bi[j])))
    elif dst == ST_BOOL:
        u1 = ptr_like(dp, np.uint8(0))
        for j in range(m):
            u1[off + j * step] = np.uint8(bf[j] != 0.0) if fl else np.uint8(bi[j] != 0)
    else:
        if fl:
            for j in range(m):
                bi[j] = f64_to_int(bf[j]) if dst == ST_I64 else f64_to_i32(bf[j])
        if dst == ST_I64:
            q8 = ptr_like(dp, np.int64(0))
            for j in range(m):
                q8[off + j * step] = bi[j]
        elif dst == ST_I32:
            q4 = ptr_like(dp, np.int32(0))
            for j in range(m):
                q4[off + j * step] = np.int32(bi[j])
        elif dst == ST_I16:
            q2 = ptr_like(dp, np.int16(0))
            for j in range(m):
                q2[off + j * step] = np.int16(bi[j])
        elif dst == ST_I8:
            q1 = ptr_like(dp, np.int8(0))
            for j in range(m):
                q1[off + j * step] = np.int8(bi[j])
        else:
            u1 = ptr_like(dp, np.uint8(0))
            for j in range(m):
                u1[off + j * step] = np.uint8(bi[j] & 0xFF)


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
            _load_row(sp, sst, so + c0 * si, si, bf, bi, m)
            _store_row(dp, dst, do + c0 * di, di, bf, bi, m, fl)
        so, do = advance(w, last, so, do)


@njit
def _xfer(sp, sst, dp, dst, w, nd):
    if sst == dst:
        copy_nd(sp, dp, w, nd, elem_size(sst))
    else:
        _convert_nd(sp, sst, dp, dst, w, nd)


@njit
def _pieces(s, nd, sp, sst, dp, dst):
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
        _xfer(sp + so * ses, sst, dp + do * des, dst, s, nd)
        for i in range(nd - 1, -1, -1):
            if s[NSEG + i] > 1:
                s[CNT + i] += 1
                if s[CNT + i] < s[NSEG + i]:
                    break
                s[CNT + i] = 0


@njit(inline="always")
def _seg(s, i, k, out_start, count, src_start, step):
    b = SEG + (i * 3 + k) * 4
    s[b] = out_start
    s[b + 1] = max(count, 0)
    s[b + 2] = src_start
    s[b + 3] = step


@njit
def _fill(dp, es, n, pattern, step):
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
