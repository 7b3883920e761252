"""Compiled data movement and creation for every dtype: copies and casts, views, flips and
rolls, pads, triangles, joins and splits, and the constant/range creation ops.

One kernel (``move_kernel``) serves every data-movement op: it describes the
op's result as an iteration space over the source (sizes, source strides, an
offset; all read from the descriptors at run time, so dynamic shapes and any
dim order work), resizes ``out``, and runs it as *pieces*: each dim may be cut
into up to three affine segments (a flip is one segment with step -1, a roll
two, a reflection/replication pad three), and every combination of segments is
a strided copy. Same dtype: the byte copy engine of ``kernels.fast.shape``
(``copy_nd``); different dtypes: a strided cast, a row chunk at a time through
float64 (float sources) or int64 (integer/bool sources) with one dtype switch
per chunk (C++ static_cast semantics; half and bfloat16 by bit manipulation,
rounding to nearest even as c10 does), so every op also takes an ``out`` of
another dtype, as the reference kernels' ``out.write`` does.

``create_kernel`` fills (full/ones/zeros/full_like/scalar_tensor/empty: the
value is converted to out's dtype at bind time exactly as the reference kernel
converts it and stored as a bit pattern) and computes ranges (arange, linspace,
logspace) element by element in the reference kernel's accumulate type.

Block of ``move_kernel``: ``[op, src, out, scratch, params...]`` (list ops:
``[op, src|0, out|0, scratch, dim, n, tensors...]``). ``scratch`` is
``SCR`` words owned by the instruction: the copy engine's words, then the
iteration space and the segments.
"""
from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
from numba import carray, njit

from cython_ext import from_numpy_dtype
from kernels.args import wrap_dim
from kernels.fast import register_fast
from kernels.fast.nb import (INVALID_ARGUMENT, NOT_SUPPORTED, OK, ST_BF16, ST_BOOL, ST_F16, ST_F32,
                             ST_F64, ST_I8, ST_I16, ST_I32, ST_I64, bf16_to_f64, bits_to_f64,
                             desc, elem_size, f32_from_bits, f32_to_bits, f64_to_bf16,
                             f64_to_half, f64_to_i32, f64_to_int, half_to_f64, is_contiguous,
                             is_float_st, lazy, offset_of, ptr_like, resize_like, resize_to, scratch,
                             store_f64, store_i64)
from kernels.fast.shape import W_DS, W_IX, W_OUT, W_SS, W_SZ, copy_nd, simplify
from kernels.promote import category, compute_dtype, promote_types

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
    outer = 1
    for i in range(last):
        w[W_IX + i] = 0
        outer *= w[W_SZ + i]
    so = 0
    do = 0
    for _ in range(outer):
        for c0 in range(0, n, CH):
            m = min(CH, n - c0)
            _load_row(sp, sst, so + c0 * si, si, bf, bi, m)
            _store_row(dp, dst, do + c0 * di, di, bf, bi, m, fl)
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


# ---- building the iteration space of each op ---------------------------------------------

@njit(inline="always")
def _view_in(s, a, nd):
    for i in range(nd):
        s[V_N + i] = a[8 + i]
        s[V_S + i] = a[24 + i]


@njit
def _bcast(s, a, t):
    """``a`` broadcast to ``t``'s sizes (ATen's copy rules)."""
    nd = t[2]
    lead = nd - a[2]
    if lead < 0:
        return INVALID_ARGUMENT
    for i in range(nd):
        want = t[8 + i]
        s[V_N + i] = want
        if i < lead:
            s[V_S + i] = 0
        else:
            have = a[8 + i - lead]
            if have == want:
                s[V_S + i] = a[24 + i - lead]
            elif have == 1:
                s[V_S + i] = 0
            else:
                return INVALID_ARGUMENT
    return OK


@njit
def _pad_segments(s, a, d, lo, hi, reflect):
    """Reflection/replication pad of dim ``d``: three affine segments (ATen's index maps)."""
    n = a[8 + d]
    size = n + lo + hi
    if size <= 0 or n == 0 or (reflect and (lo >= n or hi >= n)):
        return INVALID_ARGUMENT
    s[V_N + d] = size
    s[NSEG + d] = 3
    ca = min(lo, size) if lo > 0 else 0  # out positions left of the input
    if reflect:
        _seg(s, d, 0, 0, ca, lo, -1)
    else:
        _seg(s, d, 0, 0, ca, 0, 0)
    bs = max(lo, 0)
    _seg(s, d, 1, bs, min(lo + n, size) - bs, bs - lo, 1)
    cs = max(lo + n, 0)  # right of the input
    if reflect:
        _seg(s, d, 2, cs, size - cs, 2 * (n - 1) - (cs - lo), -1)
    else:
        _seg(s, d, 2, cs, size - cs, n - 1, 0)
    return OK


@njit
def _build(op, block, a, o, s):
    """Fill the iteration space for ``op``; returns (status, iteration rank, source offset)."""
    nd = a[2]
    for i in range(16):
        s[NSEG + i] = 0
    off = 0
    if op == OP_COPY or op == OP_TRIL or op == OP_TRIU or op == OP_ROLL_FLAT:
        _view_in(s, a, nd)
    elif op == OP_BCAST or op == OP_COPY_INTO:
        t = desc(block[4]) if op == OP_BCAST else o
        nd = t[2]
        st = _bcast(s, a, t)
        if st != OK:
            return st, nd, off
    elif op == OP_NARROW:
        d = block[4]
        start = block[5]
        length = block[6]
        n = a[8 + d]
        if start < -n or start > n:
            return INVALID_ARGUMENT, nd, off
        if start < 0:
            start += n
        if length < 0 or start + length > n:
            return INVALID_ARGUMENT, nd, off
        _view_in(s, a, nd)
        s[V_N + d] = length
        off = start * a[24 + d]
    elif op == OP_DIAG:
        offset = block[4]
        d1 = block[5]
        d2 = block[6]
        k = 0
        for i in range(nd):
            if i != d1 and i != d2:
                s[V_N + k] = a[8 + i]
                s[V_S + k] = a[24 + i]
                k += 1
        n1 = a[8 + d1]
        n2 = a[8 + d2]
        if offset >= 0:
            ln = min(n1, n2 - offset)
            off = offset * a[24 + d2]
        else:
            ln = min(n1 + offset, n2)
            off = -offset * a[24 + d1]
        if ln <= 0:
            ln = 0
            off = 0
        s[V_N + k] = ln
        s[V_S + k] = a[24 + d1] + a[24 + d2]
        nd = k + 1
    elif op == OP_STRIDED:
        nd = block[4]
        off = block[5]
        last = off
        empty = False
        for i in range(nd):
            sz = block[6 + i]
            s[V_N + i] = sz
            s[V_S + i] = block[6 + nd + i]
            if sz == 0:
                empty = True
            last += s[V_S + i] * (sz - 1)
        if not empty and last >= a[3]:  # strides index the input's storage
            return INVALID_ARGUMENT, nd, off
    elif op == OP_UNFOLD:
        d = block[4]
        size = block[5]
        step = block[6]
        if nd == 0:
            if size > 1:
                return INVALID_ARGUMENT, nd, off
            s[V_N] = size
            s[V_S] = 0
            nd = 1
        else:
            n = a[8 + d]
            if size > n:
                return INVALID_ARGUMENT, nd, off
            _view_in(s, a, nd)
            s[V_N + d] = (n - size) // step + 1
            s[V_S + d] = a[24 + d] * step
            s[V_N + nd] = size
            s[V_S + nd] = a[24 + d]
            nd += 1
    elif op == OP_REAL:  # in units of the complex type's components
        for i in range(nd):
            s[V_N + i] = a[8 + i]
            s[V_S + i] = 2 * a[24 + i]
        s[V_N + nd] = 2
        s[V_S + nd] = 1
        nd += 1
    elif op == OP_FLIP:
        _view_in(s, a, nd)
        mask = block[4]
        for i in range(nd):
            if (mask >> i) & 1 == 1:
                n = a[8 + i]
                s[NSEG + i] = 1
                _seg(s, i, 0, 0, n, n - 1, -1)
    elif op == OP_ROLL:
        _view_in(s, a, nd)
        for k in range(block[4]):
            d = block[5 + 2 * k]
            n = a[8 + d]
            if n == 0:
                continue
            sh = block[6 + 2 * k] % n
            if sh != 0:  # out[i] = in[(i - sh) mod n]
                s[NSEG + d] = 2
                _seg(s, d, 0, 0, sh, n - sh, 1)
                _seg(s, d, 1, sh, n - sh, 0, 1)
    elif op == OP_CPAD:
        _view_in(s, a, nd)
        for i in range(block[5]):
            d = nd - 1 - i
            lo = block[6 + 2 * i]
            hi = block[7 + 2 * i]
            n = a[8 + d]
            size = n + lo + hi
            if size < 0:
                return INVALID_ARGUMENT, nd, off
            clo = max(0, -lo)  # negative pads crop
            keep = max(0, n - clo - max(0, -hi))
            s[V_N + d] = size
            s[NSEG + d] = 1
            _seg(s, d, 0, max(0, lo), keep, clo, 1)
    elif op == OP_REFLECT or op == OP_REPLICATE:
        _view_in(s, a, nd)
        for i in range(block[4]):
            st = _pad_segments(s, a, nd - 1 - i, block[5 + 2 * i], block[6 + 2 * i],
                               op == OP_REFLECT)
            if st != OK:
                return st, nd, off
    elif op == OP_REPEAT:  # out sizes only; the iteration space follows the resize
        n = block[4]
        lead = n - nd
        for j in range(n):
            r = block[5 + j]
            s[W_OUT + j] = r if j < lead else r * a[8 + j - lead]
        nd = n
    elif op == OP_PSHUF or op == OP_PUNSHUF:
        r = block[4]
        for i in range(nd):
            s[W_OUT + i] = a[8 + i]
        c = a[8 + nd - 3]
        h = a[8 + nd - 2]
        w = a[8 + nd - 1]
        if op == OP_PSHUF:
            if c % (r * r) != 0:
                return INVALID_ARGUMENT, nd, off
            s[W_OUT + nd - 3] = c // (r * r)
            s[W_OUT + nd - 2] = h * r
            s[W_OUT + nd - 1] = w * r
        else:
            if h % r != 0 or w % r != 0:
                return INVALID_ARGUMENT, nd, off
            s[W_OUT + nd - 3] = c * r * r
            s[W_OUT + nd - 2] = h // r
            s[W_OUT + nd - 1] = w // r
    else:
        return _build_view(op, block, a, s)
    return OK, nd, off


@njit(inline="always")
def _clamp(i, n):
    if i < 0:
        i += n
        if i < 0:
            i = 0
    return n if i > n else i


@njit
def _build_view(op, block, a, s):
    """The plain views (permute, expand, slice, select, squeeze, unsqueeze, view), for
    casting outs: the same-dtype ones run in ``kernels.fast.shape``."""
    nd = a[2]
    off = 0
    if op == OP_PERMUTE:
        for i in range(nd):
            p = block[4 + i]
            s[V_N + i] = a[8 + p]
            s[V_S + i] = a[24 + p]
    elif op == OP_EXPAND:
        n = block[4]
        lead = n - nd
        for i in range(n):
            want = block[5 + i]
            if i < lead:
                s[V_S + i] = 0
            else:
                have = a[8 + i - lead]
                if want == -1:
                    want = have
                if want == have:
                    s[V_S + i] = a[24 + i - lead]
                elif have == 1 and want >= 0:
                    s[V_S + i] = 0
                else:
                    return INVALID_ARGUMENT, nd, off
            s[V_N + i] = want
        nd = n
    elif op == OP_SLICE:
        d = block[4]
        step = block[7]
        n = a[8 + d]
        start = _clamp(block[5], n)
        end = _clamp(block[6], n)
        _view_in(s, a, nd)
        s[V_N + d] = (end - start + step - 1) // step if end > start else 0
        s[V_S + d] = a[24 + d] * step
        off = start * a[24 + d]
    elif op == OP_SELECT or op == OP_SQUEEZE or op == OP_UNSQUEEZE:
        d = block[4]
        if op == OP_SELECT:
            n = a[8 + d]
            idx = block[5]
            if idx < -n or idx >= n:
                return INVALID_ARGUMENT, nd, off
            off = (idx + n if idx < 0 else idx) * a[24 + d]
        k = 0
        for i in range(nd + 1):
            if op == OP_UNSQUEEZE and i == d:
                s[V_N + k] = 1
                s[V_S + k] = 0
                k += 1
            if i == nd:
                break
            if op == OP_SELECT and i == d:
                continue
            if op == OP_SQUEEZE and (d >> i) & 1 == 1 and a[8 + i] == 1:
                continue
            s[V_N + k] = a[8 + i]
            s[V_S + k] = a[24 + i]
            k += 1
        nd = k
    elif op == OP_VIEW:  # out sizes only (one -1 inferred); see _special
        n = block[4]
        known = 1
        hole = -1
        for i in range(n):
            sz = block[5 + i]
            s[W_OUT + i] = sz
            if sz == -1:
                hole = i
            else:
                known *= sz
        if hole >= 0:
            if known == 0 or a[3] % known != 0:
                return INVALID_ARGUMENT, nd, off
            s[W_OUT + hole] = a[3] // known
        elif known != a[3]:
            return INVALID_ARGUMENT, nd, off
        nd = n
    else:
        return NOT_SUPPORTED, nd, off
    return OK, nd, off


@njit(inline="always")
def _dim3(s, k, n, ss, ts):
    s[V_N + k] = n
    s[V_S + k] = ss
    s[V_T + k] = ts


@njit
def _special(op, block, a, o, s):
    """Iteration space of repeat / pixel (un)shuffle over the resized out; returns its rank."""
    nd = a[2]
    if op == OP_VIEW:  # iterate whichever side is contiguous, the other in its own strides
        src_flat = is_contiguous(a)
        if not src_flat and not is_contiguous(o):
            return -1
        v = o if src_flat else a
        k = v[2]
        st = 1
        for i in range(k - 1, -1, -1):
            s[V_N + i] = v[8 + i]
            s[V_S + i] = st if src_flat else a[24 + i]
            s[V_T + i] = o[24 + i] if src_flat else st
            st *= v[8 + i]
        return k
    if op == OP_REPEAT:
        n = block[4]
        lead = n - nd
        k = 0
        for j in range(n):
            r = block[5 + j]
            t = o[24 + j]
            if j < lead:
                _dim3(s, k, r, 0, t)
                k += 1
            else:
                m = a[8 + j - lead]
                if r != 1:  # the copies of the whole dim, then the dim itself
                    _dim3(s, k, r, 0, t * m)
                    k += 1
                _dim3(s, k, m, a[24 + j - lead], t)
                k += 1
        return k
    r = block[4]
    lead = nd - 3
    for i in range(lead):
        _dim3(s, i, a[8 + i], a[24 + i], o[24 + i])
    sc, sh, sw = a[24 + lead], a[24 + lead + 1], a[24 + lead + 2]
    tc, th, tw = o[24 + lead], o[24 + lead + 1], o[24 + lead + 2]
    h = a[8 + lead + 1]
    w = a[8 + lead + 2]
    if op == OP_PSHUF:  # out[c, y*r+i, x*r+j] = in[c*r*r + i*r + j, y, x]
        _dim3(s, lead, o[8 + lead], sc * r * r, tc)
        _dim3(s, lead + 1, h, sh, th * r)
        _dim3(s, lead + 2, r, sc * r, th)
        _dim3(s, lead + 3, w, sw, tw * r)
        _dim3(s, lead + 4, r, sc, tw)
    else:  # out[c*r*r + i*r + j, y, x] = in[c, y*r+i, x*r+j]
        _dim3(s, lead, a[8 + lead], sc, tc * r * r)
        _dim3(s, lead + 1, r, sh, tc * r)
        _dim3(s, lead + 2, r, sw, tc)
        _dim3(s, lead + 3, h // r, sh * r, th)
        _dim3(s, lead + 4, w // r, sw * r, tw)
    return lead + 5


@njit
def _triangle(o, lower, diag):
    """Zero out's elements above (tril) or below (triu) diagonal ``diag``."""
    nd = o[2]
    rows = o[8 + nd - 2]
    cols = o[8 + nd - 1]
    tr = o[24 + nd - 2]
    tc = o[24 + nd - 1]
    es = elem_size(o[1])
    batch = 1
    for i in range(nd - 2):
        batch *= o[8 + i]
    for b in range(batch):
        base = 0
        rem = b
        for i in range(nd - 3, -1, -1):
            base += (rem % o[8 + i]) * o[24 + i]
            rem //= o[8 + i]
        for r in range(rows):
            if lower:
                c0 = min(max(r + diag + 1, 0), cols)
                c1 = cols
            else:
                c0 = 0
                c1 = min(max(r + diag, 0), cols)
            if c1 > c0:
                _fill(o[0] + (base + r * tr + c0 * tc) * es, es, c1 - c0, 0, tc)


@njit
def _roll_flat(a, o, sst, shift, w):
    """Roll of the flattened tensor when either side is not contiguous: element by element."""
    n = a[3]
    if n == 0:
        return
    sh = shift % n
    ses = elem_size(sst)
    des = elem_size(o[1])
    for k in range(n):
        _xfer(a[0] + offset_of(a, (k - sh + n) % n) * ses, sst, o[0] + offset_of(o, k) * des,
              o[1], w, 0)


# ---- joins and splits ----------------------------------------------------------------------

@njit
def _part(s, a, o, d, drop, pos):
    """Copy ``a``'s sizes with dim ``d`` of size ``s[W_OUT + d]`` (or dropped) starting at ``pos``
    along ``d``, into ``o`` (already resized)."""
    nd = a[2]
    k = 0
    for i in range(nd):
        if drop and i == d:
            continue
        s[V_N + k] = o[8 + k]
        s[V_S + k] = a[24 + i]
        s[V_T + k] = o[24 + k]
        s[NSEG + k] = 0
        k += 1
    _pieces(s, k, a[0] + pos * a[24 + d] * elem_size(a[1]), a[1], o[0], o[1])


@njit
def _lists(op, block, s):
    d = block[4]
    n = block[5]
    if op == OP_STACK or op == OP_CAT:
        o = desc(block[2])
        nd = o[2]
        first = -1
        total = 0
        for k in range(n):
            a = desc(block[6 + k])
            if op == OP_CAT and a[2] == 1 and a[3] == 0:
                continue  # legacy empty tensors are skipped whatever their rank
            if first < 0:
                first = k
                for i in range(a[2]):
                    s[W_OUT + i] = a[8 + i]
            na = nd - 1 if op == OP_STACK else nd
            if a[2] != na:
                return INVALID_ARGUMENT
            for i in range(na):
                if a[8 + i] != s[W_OUT + i] and (op == OP_STACK or i != d):
                    return INVALID_ARGUMENT
            total += 1 if op == OP_STACK else a[8 + d]
        if first < 0:
            if nd != 1:
                return NOT_SUPPORTED
            s[W_OUT] = 0
        elif op == OP_STACK:
            for i in range(nd - 1, d, -1):
                s[W_OUT + i] = s[W_OUT + i - 1]
            s[W_OUT + d] = n
        else:
            s[W_OUT + d] = total
        st = resize_to(o, s[W_OUT:], nd)
        if st != OK:
            return st
        pos = 0
        for k in range(n):
            a = desc(block[6 + k])
            if op == OP_CAT and a[2] == 1 and a[3] == 0:
                continue
            m = 0
            for i in range(nd):
                if op == OP_STACK and i == d:
                    continue
                s[V_N + m] = a[8 + m]
                s[V_S + m] = a[24 + m]
                s[V_T + m] = o[24 + i]
                s[NSEG + m] = 0
                m += 1
            _pieces(s, m, a[0], a[1], o[0] + pos * o[24 + d] * elem_size(o[1]), o[1])
            pos += 1 if op == OP_STACK else a[8 + d]
        return OK
    a = desc(block[1])
    nd = a[2]
    size = a[8 + d]
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
            s[W_OUT + m] = a[8 + i]
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
    a = desc(block[1])
    o = desc(block[2])
    st, nd, off = _build(op, block, a, o, s)
    if st != OK:
        return st
    if op != OP_COPY_INTO:
        # (a rank other than out's, e.g. a squeeze of a dim no longer of size 1: NOT_SUPPORTED)
        st = resize_to(o, s[W_OUT:], o[2]) if op in SPECIAL else resize_to(o, s[V_N:], nd)
        if st != OK:
            return st
    sst = block[4] if op == OP_REAL else a[1]
    if op == OP_ROLL_FLAT:
        if not (is_contiguous(a) and is_contiguous(o)):
            _roll_flat(a, o, sst, block[4], s)
            return OK
        n = a[3]  # both flat: two runs
        if n == 0:
            return OK
        sh = block[4] % n
        nd = 1
        s[V_N] = n
        s[V_S] = 1
        s[NSEG] = 2
        _seg(s, 0, 0, 0, sh, n - sh, 1)
        _seg(s, 0, 1, sh, n - sh, 0, 1)
        s[V_T] = 1
    elif op in SPECIAL:
        nd = _special(op, block, a, o, s)
        if nd < 0:
            return NOT_SUPPORTED
    else:
        for i in range(nd):
            s[V_T + i] = o[24 + i]
    if op == OP_CPAD:
        _fill(o[0], elem_size(o[1]), o[3], block[4], 1)
    _pieces(s, nd, a[0] + off * elem_size(sst), sst, o[0], o[1])
    if op == OP_TRIL or op == OP_TRIU:
        _triangle(o, op == OP_TRIL, block[4])
    return OK


# ---- creation: fills and ranges ------------------------------------------------------------
C_FILL, C_EMPTY, C_ARANGE, C_LINSPACE, C_LOGSPACE = range(5)
A_INT, A_F64, A_F32, A_F16, A_BF16 = range(5)  # accumulate types


@njit(inline="always")
def _round_acc(x, kind):
    """A float32 result rounded to the accumulate type (numpy half / ml_dtypes bfloat16 ops
    compute in float32 and round)."""
    if kind == A_F16:
        return np.float32(half_to_f64(f64_to_half(np.float64(x))))
    if kind == A_BF16:
        return np.float32(bf16_to_f64(f64_to_bf16(np.float64(x))))
    return x


@njit
def _linspace_at(i, steps, kind, s0, s1, step):
    """Element ``i``: the first half forward from start, the second backward from end."""
    if kind == A_F64:
        if i < steps // 2:
            return s0 + step * np.float64(i)
        return s1 - step * np.float64(steps - 1 - i)
    f0 = np.float32(s0)
    f1 = np.float32(s1)
    fs = np.float32(step)
    if i < steps // 2:
        return np.float64(_round_acc(f0 + _round_acc(fs * _round_acc(np.float32(i), kind), kind),
                                     kind))
    j = _round_acc(np.float32(steps - 1 - i), kind)
    return np.float64(_round_acc(f1 - _round_acc(fs * j, kind), kind))


@njit
def _range_at(op, kind, i, n, w0, w1, w2, w3):
    """Element ``i`` of a float range: arange (start ``w0``, step ``w1``), linspace (start, end,
    step), logspace (the same and base ``w3``)."""
    if op == C_ARANGE:
        if kind == A_F64:
            return w0 + w1 * np.float64(i)
        return np.float64(np.float32(w0) + np.float32(w1) * np.float32(i))
    if op == C_LINSPACE:
        return _linspace_at(i, n, kind, w0, w1, w2)
    return w3 ** _linspace_at(i, n, A_F64, w0, w1, w2)


def create_kernel(block):
    op = block[0]
    o = desc(block[1])
    like = block[2]
    if op == C_FILL or op == C_EMPTY:
        nd = block[4]
        if like != 0:
            st = resize_like(o, desc(like))
        else:
            st = resize_to(o, carray(block, 5 + nd)[5:], nd)
        if st != OK:
            return st
        if op == C_FILL:
            _fill(o[0], elem_size(o[1]), o[3], block[3], 1)
        return OK
    n = block[3]
    st = resize_to(o, carray(block, 4)[3:], 1)
    if st != OK:
        return st
    dp = o[0]
    dst = o[1]
    kind = block[4]
    if op == C_ARANGE and kind == A_INT:
        for i in range(n):
            store_i64(dp, dst, i, block[5] + block[6] * i)
        return OK
    w0 = bits_to_f64(block[5])
    w1 = bits_to_f64(block[6])
    w2 = bits_to_f64(block[7]) if op != C_ARANGE else 0.0
    w3 = bits_to_f64(block[8]) if op == C_LOGSPACE else 0.0
    for i in range(n):
        store_f64(dp, dst, i, _range_at(op, kind, i, n, w0, w1, w2, w3))
    return OK


# ---- binders --------------------------------------------------------------------------------
ANY = tuple(np.dtype(t) for t in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
                                  np.float16, ml_dtypes.bfloat16, np.float32, np.float64))
COMPONENT = {np.dtype(np.complex64): np.dtype(np.float32),
             np.dtype(np.complex128): np.dtype(np.float64)}
BIG = 1 << 62


def _st(dt) -> int:
    return int(from_numpy_dtype(np.dtype(dt)))


def _ok(*ts) -> bool:
    return all(t is not None and t.dtype in ANY for t in ts)


def _dim(d, n):
    """``d`` wrapped as the reference kernel wraps it (rank 0 takes 0 and -1), or None."""
    if isinstance(d, bool) or not isinstance(d, int):
        return None
    try:
        return wrap_dim("", d, n)
    except Exception:  # noqa: BLE001 - the reference kernel reports it
        return None


def _dim_set(dims, n):
    ds = [_dim(d, n) for d in dims]
    return None if None in ds or len(set(ds)) != len(ds) else ds


def _ints(xs, lo=-BIG, hi=BIG) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi for x in xs)


def _bind(ctx, op, src, out, params=()):
    if not _ok(src, out):
        return None
    return ctx.bind(lazy(move_kernel), [op, ctx.desc(src), ctx.desc(out), ctx.buffer(SCR * 8)]
                    + [int(p) for p in params])


def _same_rank(ctx, op, self, out, params=()):
    return _bind(ctx, op, self, out, params) if self.ndim == out.ndim else None


def _pattern(value, dt) -> int:
    """``value`` (a numpy scalar/array) cast to ``dt`` as numpy's unsafe copy does, as the
    signed integer with the same bytes."""
    a = np.empty((), dt)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        np.copyto(a, value, casting="unsafe")
    signed = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[dt.itemsize]
    return int(a.reshape(1).view(signed)[0])


# -- copies and casts

@register_fast("aten::alias_copy.out", "aten::detach_copy.out", "aten::lift_fresh_copy.out",
               "et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out")
def bind_alias_copy(ctx, self, out):
    return _same_rank(ctx, OP_COPY, self, out)


@register_fast("aten::_to_copy.out")
def bind_to_copy(ctx, self, non_blocking, memory_format, out):
    # memory_format only picks out's dim order (fixed at export); the copy follows out's strides
    return _same_rank(ctx, OP_COPY, self, out) if memory_format in (None, 0, 1) else None


@register_fast("aten::clone.out", fallback=True)
def bind_clone_any(ctx, self, memory_format, out):
    return bind_to_copy(ctx, self, False, memory_format, out)


@register_fast("dim_order_ops::_to_dim_order_copy.out", "dim_order_ops::_clone_dim_order.out",
               fallback=True)
def bind_to_dim_order_copy_any(ctx, self, non_blocking, dim_order, out):
    if dim_order is not None and (sorted(dim_order) != list(range(self.ndim))
                                  or tuple(dim_order) != tuple(out.dim_order)):
        return None
    return _same_rank(ctx, OP_COPY, self, out)


@register_fast("aten::copy.out")
def bind_copy(ctx, self, src, non_blocking, out):
    # the value is src cast to self's dtype, then to out's: decline the one double cast
    if not _ok(self) or src.ndim > self.ndim or out.ndim != self.ndim \
            or (src.dtype != self.dtype and out.dtype != self.dtype):
        return None
    return _bind(ctx, OP_BCAST, src, out, [ctx.desc(self)])


@register_fast("aten::copy_", fallback=True)
def bind_copy_any(ctx, self, src, non_blocking):
    if src.ndim > self.ndim:
        return None
    return _bind(ctx, OP_COPY_INTO, src, self)


# -- views

@register_fast("aten::narrow_copy.out")
def bind_narrow(ctx, self, dim, start, length, out):
    d = _dim(dim, self.ndim) if self.ndim else None
    if d is None or not _ints([start, length]):
        return None
    return _same_rank(ctx, OP_NARROW, self, out, [d, start, length])


@register_fast("aten::diagonal_copy.out")
def bind_diagonal(ctx, self, offset, dim1, dim2, out):
    n = self.ndim
    d1, d2 = (_dim(dim1, n), _dim(dim2, n)) if n >= 2 else (None, None)
    if d1 is None or d2 is None or d1 == d2 or out.ndim != n - 1 or not _ints([offset]):
        return None
    return _bind(ctx, OP_DIAG, self, out, [offset, d1, d2])


@register_fast("aten::as_strided_copy.out")
def bind_as_strided(ctx, self, size, stride, storage_offset, out):
    off = 0 if storage_offset is None else storage_offset
    if len(size) != len(stride) or len(size) != out.ndim or len(size) > 16 \
            or not _ints(list(size) + list(stride) + [off], 0, 1 << 40):
        return None
    return _bind(ctx, OP_STRIDED, self, out, [len(size), off] + list(size) + list(stride))


@register_fast("aten::unfold_copy.out")
def bind_unfold(ctx, self, dimension, size, step, out):
    d = _dim(dimension, self.ndim)
    if d is None or not _ints([size, step], 0) or step <= 0 or out.ndim != self.ndim + 1 \
            or self.ndim >= 16:
        return None
    return _bind(ctx, OP_UNFOLD, self, out, [d, size, step])


@register_fast("aten::view_as_real_copy.out")
def bind_view_as_real(ctx, self, out):
    comp = COMPONENT.get(self.dtype)
    if comp is None or not _ok(out) or out.ndim != self.ndim + 1 or self.ndim >= 16:
        return None
    return ctx.bind(lazy(move_kernel), [OP_REAL, ctx.desc(self), ctx.desc(out),
                                        ctx.buffer(SCR * 8), _st(comp)])


# -- the plain views into an out of another dtype (same dtype: kernels.fast.shape)

@register_fast("aten::permute_copy.out", fallback=True)
def bind_permute_any(ctx, self, dims, out):
    perm = _dim_set(dims, self.ndim)
    if perm is None or len(perm) != self.ndim:
        return None
    return _same_rank(ctx, OP_PERMUTE, self, out, perm)


@register_fast("aten::transpose_copy.int_out", fallback=True)
def bind_transpose_any(ctx, self, dim0, dim1, out):
    d0, d1 = _dim(dim0, self.ndim), _dim(dim1, self.ndim)
    if d0 is None or d1 is None:
        return None
    if self.ndim == 0:
        return _same_rank(ctx, OP_COPY, self, out)
    perm = list(range(self.ndim))
    perm[d0], perm[d1] = d1, d0
    return _same_rank(ctx, OP_PERMUTE, self, out, perm)


@register_fast("aten::t_copy.out", fallback=True)
def bind_t_any(ctx, self, out):
    if self.ndim > 2:
        return None
    return _same_rank(ctx, OP_PERMUTE, self, out, list(range(self.ndim))[::-1])


@register_fast("aten::expand_copy.out", fallback=True)
def bind_expand_any(ctx, self, size, implicit, out):
    lead = len(size) - self.ndim
    if lead < 0 or len(size) != out.ndim or not _ints(size, -1, 1 << 50) \
            or any(s < 0 for s in size[:lead]):
        return None
    return _bind(ctx, OP_EXPAND, self, out, [len(size)] + list(size))


@register_fast("aten::slice_copy.Tensor_out", fallback=True)
def bind_slice_any(ctx, self, dim, start, end, step, out):
    d = _dim(dim, self.ndim) if self.ndim else None
    start = 0 if start is None else start
    end = BIG if end is None else end
    if d is None or not _ints([step], 1) or not _ints([start, end], -(1 << 200), 1 << 200):
        return None
    start, end = (max(-BIG, min(BIG, v)) for v in (start, end))
    return _same_rank(ctx, OP_SLICE, self, out, [d, start, end, step])


@register_fast("aten::select_copy.int_out", fallback=True)
def bind_select_any(ctx, self, dim, index, out):
    d = _dim(dim, self.ndim) if self.ndim else None
    if d is None or not _ints([index]) or out.ndim != self.ndim - 1:
        return None
    return _bind(ctx, OP_SELECT, self, out, [d, index])


@register_fast("aten::squeeze_copy.dims_out", fallback=True)
def bind_squeeze_dims_any(ctx, self, dim, out):
    ds = _dim_set(dim, self.ndim)
    if ds is None:
        return None
    if self.ndim == 0:
        return _same_rank(ctx, OP_COPY, self, out)
    return _bind(ctx, OP_SQUEEZE, self, out, [sum(1 << d for d in ds)])


@register_fast("aten::squeeze_copy.dim_out", fallback=True)
def bind_squeeze_dim_any(ctx, self, dim, out):
    return bind_squeeze_dims_any(ctx, self, [dim], out)


@register_fast("aten::unsqueeze_copy.out", fallback=True)
def bind_unsqueeze_any(ctx, self, dim, out):
    d = _dim(dim, self.ndim + 1)
    if d is None or out.ndim != self.ndim + 1:
        return None
    return _bind(ctx, OP_UNSQUEEZE, self, out, [d])


@register_fast("aten::view_copy.out", fallback=True)
def bind_view_any(ctx, self, size, out):
    if len(size) != out.ndim or not _ints(size, -1, 1 << 50) or list(size).count(-1) > 1 \
            or not (self.is_contiguous() or out.is_contiguous()):
        return None
    return _bind(ctx, OP_VIEW, self, out, [len(size)] + list(size))


# -- rearrangements

@register_fast("aten::flip.out")
def bind_flip(ctx, self, dims, out):
    ds = _dim_set(dims, self.ndim)
    if ds is None:
        return None
    if self.ndim == 0:
        return _same_rank(ctx, OP_COPY, self, out)
    return _same_rank(ctx, OP_FLIP, self, out, [sum(1 << d for d in ds)])


@register_fast("aten::roll.out")
def bind_roll(ctx, self, shifts, dims, out):
    if not _ints(shifts):
        return None
    if not dims:
        if len(shifts) != 1:
            return None
        return _same_rank(ctx, OP_ROLL_FLAT, self, out, [shifts[0]])
    ds = [_dim(d, self.ndim) for d in dims]
    if len(shifts) != len(dims) or None in ds:
        return None
    if self.ndim == 0:
        return _same_rank(ctx, OP_COPY, self, out)
    total = {}
    for d, s in zip(ds, shifts):  # rolling a dim twice rolls it by the sum
        total[d] = total.get(d, 0) + s
    if not _ints(total.values()):
        return None
    params = [len(total)]
    for d, s in total.items():
        params += [d, s]
    return _same_rank(ctx, OP_ROLL, self, out, params)


@register_fast("aten::repeat.out")
def bind_repeat(ctx, self, repeats, out):
    lead = len(repeats) - self.ndim
    if lead < 0 or not _ints(repeats, 0, 1 << 40) or out.ndim != len(repeats) \
            or len(repeats) + sum(r != 1 for r in repeats[lead:]) > 16:
        return None
    return _bind(ctx, OP_REPEAT, self, out, [len(repeats)] + list(repeats))


def _bind_shuffle(ctx, op, self, r, out):
    if not _ints([r], 1, 1 << 20) or not 3 <= self.ndim <= 14:
        return None
    return _same_rank(ctx, op, self, out, [r])


@register_fast("aten::pixel_shuffle.out")
def bind_pixel_shuffle(ctx, self, upscale_factor, out):
    return _bind_shuffle(ctx, OP_PSHUF, self, upscale_factor, out)


@register_fast("aten::pixel_unshuffle.out")
def bind_pixel_unshuffle(ctx, self, downscale_factor, out):
    return _bind_shuffle(ctx, OP_PUNSHUF, self, downscale_factor, out)


@register_fast("aten::tril.out")
def bind_tril(ctx, self, diagonal, out):
    if self.ndim < 2 or not _ints([diagonal]):
        return None
    return _same_rank(ctx, OP_TRIL, self, out, [diagonal])


@register_fast("aten::triu.out")
def bind_triu(ctx, self, diagonal, out):
    if self.ndim < 2 or not _ints([diagonal]):
        return None
    return _same_rank(ctx, OP_TRIU, self, out, [diagonal])


# -- pads

@register_fast("aten::constant_pad_nd.out")
def bind_constant_pad(ctx, self, pad, value, out):
    if len(pad) % 2 or len(pad) // 2 > self.ndim or not _ints(pad, -(1 << 40), 1 << 40) \
            or not isinstance(value, (bool, int, float)) or not _ok(self, out):
        return None
    # as the reference: the value in self's dtype, then cast to out's
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        v = np.array(value).astype(self.dtype)
    return _same_rank(ctx, OP_CPAD, self, out, [_pattern(v, out.dtype), len(pad) // 2] + list(pad))


def _pad_binder(k, op):
    def bind(ctx, self, padding, out):
        if len(padding) != 2 * k or self.ndim not in (k + 1, k + 2) \
                or not _ints(padding, -(1 << 40), 1 << 40):
            return None
        return _same_rank(ctx, op, self, out, [k] + list(padding))
    return bind


for _k in (1, 2, 3):
    register_fast(f"aten::reflection_pad{_k}d.out")(_pad_binder(_k, OP_REFLECT))
    register_fast(f"aten::replication_pad{_k}d.out")(_pad_binder(_k, OP_REPLICATE))


# -- joins and splits

MANTISSA = {np.dtype(np.float16): 11, np.dtype(ml_dtypes.bfloat16): 8,
            np.dtype(np.float32): 24, np.dtype(np.float64): 53}


def _exact(src, dt) -> bool:
    """Whether casting ``src`` to its promoted type ``dt`` keeps every value."""
    if src == dt or src == np.bool_ or category(src) == category(dt):
        return True
    info = np.iinfo(src)  # an integer into a float: exact while it fits the mantissa
    return max(info.max, -int(info.min)) <= 2 ** MANTISSA[dt]


def _join_ok(tensors, out) -> bool:
    """The reference casts every input to the promoted dtype, then to out's: accept the
    cases where that equals one cast."""
    if not tensors or any(t is None for t in tensors) or not _ok(out, *tensors):
        return False
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = promote_types(dt, t.dtype)
    if category(dt) > category(out.dtype):
        return False
    return out.dtype == dt or all(_exact(t.dtype, dt) for t in tensors)


def _bind_list(ctx, op, src, out, d, tensors, extra=()):
    return ctx.bind(lazy(move_kernel), [op, 0 if src is None else ctx.desc(src),
                                        0 if out is None else ctx.desc(out), ctx.buffer(SCR * 8),
                                        d, len(tensors)] + [ctx.desc(t) for t in tensors]
                    + [int(e) for e in extra])


@register_fast("aten::stack.out")
def bind_stack(ctx, tensors, dim, out):
    if not _join_ok(tensors, out) or any(t.ndim != out.ndim - 1 for t in tensors):
        return None
    d = _dim(dim, out.ndim)
    return None if d is None else _bind_list(ctx, OP_STACK, None, out, d, tensors)


@register_fast("aten::cat.out", fallback=True)
def bind_cat_any(ctx, tensors, dim, out):
    if not _join_ok(tensors, out) or out.ndim == 0:
        return None
    d = _dim(dim, out.ndim)
    return None if d is None else _bind_list(ctx, OP_CAT, None, out, d, tensors)


def _split_ok(self, out, rank):
    return self.ndim > 0 and out and not any(o is None for o in out) and _ok(self, *out) \
        and all(o.ndim == rank for o in out)


@register_fast("aten::split_copy.Tensor_out")
def bind_split(ctx, self, split_size, dim, out):
    d = _dim(dim, self.ndim)
    if d is None or not _split_ok(self, out, self.ndim) or not _ints([split_size], 0):
        return None
    return _bind_list(ctx, OP_SPLIT, self, None, d, out, [split_size])


@register_fast("aten::split_with_sizes_copy.out", fallback=True)
def bind_split_with_sizes_any(ctx, self, split_sizes, dim, out):
    d = _dim(dim, self.ndim)
    if d is None or not _split_ok(self, out, self.ndim) or len(split_sizes) != len(out) \
            or not _ints(split_sizes, 0):
        return None
    return _bind_list(ctx, OP_SPLITS, self, None, d, out, split_sizes)


@register_fast("aten::unbind_copy.int_out")
def bind_unbind(ctx, self, dim, out):
    d = _dim(dim, self.ndim)
    if d is None or not _split_ok(self, out, self.ndim - 1):
        return None
    return _bind_list(ctx, OP_UNBIND, self, None, d, out)


# -- creation

def _bind_fill(ctx, op, out, pattern, size=None, like=None):
    if not _ok(out):
        return None
    if like is None:
        if not _ints(size, 0, 1 << 50) or len(size) != out.ndim:
            return None
        tail = [len(size)] + list(size)
    else:
        if like.ndim != out.ndim:
            return None
        tail = [out.ndim]
    return ctx.bind(lazy(create_kernel), [op, ctx.desc(out), 0 if like is None else ctx.desc(like),
                                          pattern] + tail)


def _scalar(v) -> bool:
    return isinstance(v, (bool, int, float))


def _full_pattern(value, dt):
    # as the reference: np.full(..., np.asarray(value), compute_dtype(dt)), then out's cast
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        v = np.full((), np.asarray(value), compute_dtype(dt))
    return _pattern(v, dt)


@register_fast("aten::full.out")
def bind_full(ctx, size, fill_value, out):
    if not _scalar(fill_value) or not _ok(out):
        return None
    return _bind_fill(ctx, C_FILL, out, _full_pattern(fill_value, out.dtype), size)


@register_fast("aten::ones.out")
def bind_ones(ctx, size, out):
    return _bind_fill(ctx, C_FILL, out, _pattern(np.ones((), out.dtype), out.dtype), size) \
        if _ok(out) else None


@register_fast("aten::zeros.out")
def bind_zeros(ctx, size, out):
    return _bind_fill(ctx, C_FILL, out, 0, size)


@register_fast("aten::empty.out")
def bind_empty(ctx, size, memory_format, out):
    return _bind_fill(ctx, C_EMPTY, out, 0, size) if memory_format in (None, 0, 1) else None


@register_fast("dim_order_ops::_empty_dim_order.out")
def bind_empty_dim_order(ctx, size, dim_order, out):
    if dim_order is not None and (sorted(dim_order) != list(range(len(size)))
                                  or tuple(dim_order) != tuple(out.dim_order)):
        return None
    return _bind_fill(ctx, C_EMPTY, out, 0, size)


@register_fast("aten::full_like.out", fallback=True)
def bind_full_like_any(ctx, self, fill_value, memory_format, out):
    if not _scalar(fill_value) or not _ok(out):
        return None
    return _bind_fill(ctx, C_FILL, out, _full_pattern(fill_value, out.dtype), like=self)


@register_fast("aten::scalar_tensor.out", fallback=True)
def bind_scalar_tensor_any(ctx, s, out):
    if not _scalar(s) or not _ok(out) or out.ndim != 0:
        return None
    return _bind_fill(ctx, C_FILL, out, _pattern(np.asarray(s), out.dtype), [])


def _bind_range(ctx, op, out, n, kind, words):
    if not _ok(out) or out.ndim != 1 or not 0 <= n <= (1 << 50):
        return None
    return ctx.bind(lazy(create_kernel), [op, ctx.desc(out), 0, n, kind] + words)


def _bind_arange(ctx, start, end, step, out):
    if not all(_scalar(v) for v in (start, end, step)) or not _ok(out):
        return None
    # as the reference (and ATen): start + i * step in the accumulate type; the length from
    # the double values, except that an int64 out sizes from the truncated ones
    dt = out.dtype
    integral = dt.kind in "iub"
    try:
        xs = [int(v) for v in (start, end, step)] if integral else [start, end, step]
    except (OverflowError, ValueError):
        return None
    if xs[2] == 0 or (xs[1] - xs[0]) * xs[2] < 0:
        return None
    try:
        n = math.ceil((xs[1] - xs[0]) / xs[2] if dt == np.int64 else (end - start) / step)
    except (OverflowError, ValueError):
        return None
    if integral:
        if not _ints(xs[:1] + xs[2:], -(1 << 63), (1 << 63) - 1):
            return None
        return _bind_range(ctx, C_ARANGE, out, n, A_INT, [xs[0], xs[2]])
    kind = A_F64 if dt.itemsize >= 4 else A_F32
    acc = np.float64 if kind == A_F64 else np.float32
    with np.errstate(all="ignore"):
        words = [ctx.f64(float(acc(xs[0]))), ctx.f64(float(acc(xs[2])))]
    return _bind_range(ctx, C_ARANGE, out, n, kind, words)


@register_fast("aten::arange.out")
def bind_arange(ctx, end, out):
    return _bind_arange(ctx, 0, end, 1, out)


@register_fast("aten::arange.start_out")
def bind_arange_start(ctx, start, end, step, out):
    return _bind_arange(ctx, start, end, step, out)


def _linspace_words(ctx, start, end, steps, dt):
    """(accumulate kind, [start, end, step] words) as the reference computes them."""
    kinds = {np.dtype(np.float32): A_F32, np.dtype(np.float16): A_F16,
             np.dtype(ml_dtypes.bfloat16): A_BF16}
    if dt.kind in "iub":  # the Scalars convert to the out dtype first (wrapping)
        acc = np.float64
        start, end = (int(np.asarray(int(v)).astype(dt)) for v in (start, end))
    else:
        acc = dt.type
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        s0, s1 = acc(start), acc(end)
        step = (s1 - s0) / acc(steps - 1)
    return kinds.get(dt, A_F64), [ctx.f64(float(v)) for v in (s0, s1, step)]


def _tiny_range(ctx, out, steps, value):
    """0 or 1 steps: np.full(steps, value, float64) cast to out's dtype."""
    return _bind_fill(ctx, C_FILL, out, _pattern(np.float64(value), out.dtype), [steps])


@register_fast("aten::linspace.out")
def bind_linspace(ctx, start, end, steps, out):
    if not (_scalar(start) and _scalar(end) and _ints([steps], 0, 1 << 50)) or not _ok(out):
        return None
    dt = out.dtype
    try:
        if steps <= 1:
            v = int(np.asarray(int(start)).astype(dt)) if dt.kind in "iub" else start
            return _tiny_range(ctx, out, steps, v)
        kind, words = _linspace_words(ctx, start, end, steps, dt)
    except (OverflowError, ValueError):
        return None  # the reference kernel reports it
    return _bind_range(ctx, C_LINSPACE, out, steps, kind, words)


@register_fast("aten::logspace.out")
def bind_logspace(ctx, start, end, steps, base, out):
    if not (_scalar(start) and _scalar(end) and _scalar(base) and _ints([steps], 0, 1 << 50)) \
            or not _ok(out):
        return None
    if steps <= 1:
        with np.errstate(all="ignore"):  # as the reference: an array power
            v = np.power(np.float64(base), np.full(1, start, np.float64))[0]
        return _tiny_range(ctx, out, steps, v)
    _, words = _linspace_words(ctx, start, end, steps, np.dtype(np.float64))
    return _bind_range(ctx, C_LOGSPACE, out, steps, A_F64, words + [ctx.f64(float(base))])
