"""Neural-net kernels of every dtype, shared part: gathering inputs into contiguous
compute-dtype scratch and scattering results with a cast.
"""
from __future__ import annotations

import numpy as np

from pyruntime.cython_ext.abi import (D_DATA, D_DTYPE, D_NDIM, D_NUMEL,
                                      D_CAP, D_DYN, D_SIZES, D_STRIDES, D_DIMORDER)
from pyruntime.kernels.fast.deferred import njit, overload, types
from pyruntime.kernels.fast.nb import (OK, ST_BF16, ST_F16, ST_F32, ST_F64, ST_I16, ST_I32, ST_I64,
                                       ST_I8, ST_U8, bits_to_f64, cast_like, f32_from_bits,
                                       f32_to_half, f64_to_bf16, half_to_f32, offset_of, ptr_like,
                                       resize_to, set_strides, store_f64, store_i64)


SUPPORTED = {0, 1, 2, 3, 4, 5, 6, 7, 11, 15}  # the scalar types nb's load/store handle
FAKE_WORDS = 10 * 64  # up to 8 made-up descriptors, a small int scratch, a conv block


# ---- gather / scatter: any dtype and layout <-> contiguous compute-dtype scratch -----

@njit(inline="always")
def _walk(d):
    """(rows, inner, inner stride): d's elements as rows along its last dim."""
    nd = d[D_NDIM]
    if nd == 0:
        return 1, 1, 0
    inner = d[D_SIZES + nd - 1]
    return (d[D_NUMEL] // inner if inner else 0), inner, d[D_STRIDES + nd - 1]


@njit(inline="always")
def cv(v, kind):
    """A stored element as a number: kind 1 float16 bits, 2 bfloat16 bits, else as is."""
    if kind == 1:
        return half_to_f32(np.int64(v))
    if kind == 2:
        return f32_from_bits(np.int32(np.uint32(np.int64(v) << 16)))
    return v


@njit(inline="always")
def _gather_body(dst, src, d, kind, mk):
    # ``kind`` is a constant at each call site below: after inlining LLVM drops the
    # other conversions and the contiguous loop vectorizes
    rows, inner, ist = _walk(d)
    o = 0
    for r in range(rows):
        base = offset_of(d, r * inner)
        if ist == 1:
            for j in range(inner):
                dst[o + j] = cast_like(cv(src[base + j], kind), mk)
        else:
            for j in range(inner):
                dst[o + j] = cast_like(cv(src[base + j * ist], kind), mk)
        o += inner


@njit
def _gather_typed(dst, src, d, mk):
    _gather_body(dst, src, d, 0, mk)


@njit
def _gather_f16(dst, src, d, mk):
    _gather_body(dst, src, d, 1, mk)


@njit
def _gather_bf16(dst, src, d, mk):
    _gather_body(dst, src, d, 2, mk)


@njit
def gather_compute(addr, d, mk):
    """Tensor ``d`` -> contiguous compute-dtype buffer at ``addr``."""
    dst = ptr_like(addr, mk)
    st, a = d[D_DTYPE], d[D_DATA]
    if d[D_NUMEL] == 0:
        return
    if st == ST_F32:
        _gather_typed(dst, ptr_like(a, np.float32(0)), d, mk)
    elif st == ST_F64:
        _gather_typed(dst, ptr_like(a, np.float64(0)), d, mk)
    elif st == ST_F16:
        _gather_f16(dst, ptr_like(a, np.uint16(0)), d, mk)
    elif st == ST_BF16:
        _gather_bf16(dst, ptr_like(a, np.uint16(0)), d, mk)
    elif st == ST_I64:
        _gather_typed(dst, ptr_like(a, np.int64(0)), d, mk)
    elif st == ST_I32:
        _gather_typed(dst, ptr_like(a, np.int32(0)), d, mk)
    elif st == ST_I16:
        _gather_typed(dst, ptr_like(a, np.int16(0)), d, mk)
    elif st == ST_I8:
        _gather_typed(dst, ptr_like(a, np.int8(0)), d, mk)
    else:  # uint8, bool
        _gather_typed(dst, ptr_like(a, np.uint8(0)), d, mk)


def _out_cv(v, kind, marker):
    """A computed value as the stored element (numba only)."""
    raise NotImplementedError


@overload(_out_cv)
def _ov_out_cv(v, kind, marker):
    if marker == types.uint16:  # kind 1 float16, 2 bfloat16
        def half(v, kind, marker):
            if kind == 1:
                return np.uint16(f32_to_half(np.float32(v)))
            return np.uint16(f64_to_bf16(np.float64(v)))
        return half
    return lambda v, kind, marker: cast_like(v, marker)


@njit(inline="always")
def _scatter_body(dst, src, d, kind, marker):
    rows, inner, ist = _walk(d)
    o = 0
    for r in range(rows):
        base = offset_of(d, r * inner)
        if ist == 1:
            for j in range(inner):
                dst[base + j] = _out_cv(src[o + j], kind, marker)
        else:
            for j in range(inner):
                dst[base + j * ist] = _out_cv(src[o + j], kind, marker)
        o += inner


@njit
def _scatter_float(dst, src, d, marker):
    _scatter_body(dst, src, d, 0, marker)


@njit
def _scatter_f16(dst, src, d):
    _scatter_body(dst, src, d, 1, np.uint16(0))


@njit
def _scatter_bf16(dst, src, d):
    _scatter_body(dst, src, d, 2, np.uint16(0))


@njit
def _scatter_any(addr, st, src, d, isint):
    rows, inner, ist = _walk(d)
    o = 0
    for r in range(rows):
        base = offset_of(d, r * inner)
        for j in range(inner):
            if isint:
                store_i64(addr, st, base + j * ist, np.int64(src[o]))
            else:
                store_f64(addr, st, base + j * ist, np.float64(src[o]))
            o += 1


@njit
def scatter_compute(addr, d, mk, isint):
    """Contiguous compute-dtype buffer at ``addr`` -> out ``d`` (already resized), cast."""
    src = ptr_like(addr, mk)
    st = d[D_DTYPE]
    if d[D_NUMEL] == 0:
        return
    if st == ST_F32 and not isint:
        _scatter_float(ptr_like(d[D_DATA], np.float32(0)), src, d, np.float32(0))
    elif st == ST_F64 and not isint:
        _scatter_float(ptr_like(d[D_DATA], np.float64(0)), src, d, np.float64(0))
    elif st == ST_F16 and not isint:
        _scatter_f16(ptr_like(d[D_DATA], np.uint16(0)), src, d)
    elif st == ST_BF16 and not isint:
        _scatter_bf16(ptr_like(d[D_DATA], np.uint16(0)), src, d)
    else:
        _scatter_any(d[D_DATA], st, src, d, isint)


@njit
def wrap(addr, n, ct):
    """Wrap int64 results in place to the integer compute dtype ``ct`` (numpy's overflow)."""
    z = ptr_like(addr, np.int64(0))
    for i in range(n):
        v = z[i]
        if ct == ST_I32:
            v = np.int64(np.int32(v))
        elif ct == ST_I16:
            v = np.int64(np.int16(v))
        elif ct == ST_I8:
            v = np.int64(np.int8(v))
        elif ct == ST_U8:
            v = v & 0xFF
        z[i] = v


@njit(inline="always")
def fake_desc(f, d, addr, st, cap):
    """Make ``f`` a contiguous dynamic-bound descriptor with ``d``'s sizes over ``addr``."""
    nd = d[D_NDIM]
    f[D_DATA] = addr
    f[D_DTYPE] = st
    f[D_NDIM] = nd
    f[D_NUMEL] = d[D_NUMEL]
    f[D_CAP] = cap
    f[D_DYN] = 1
    for i in range(nd):
        f[D_SIZES + i] = d[D_SIZES + i]
        f[D_DIMORDER + i] = i
    set_strides(f)


@njit(inline="always")
def finish(src_addr, fake, o, mk, isint):
    """Resize out ``o`` like the computed ``fake`` and scatter into it."""
    st = resize_to(o, fake[D_SIZES:D_STRIDES], fake[D_NDIM])
    if st != OK:
        return st
    scatter_compute(src_addr, o, mk, isint)
    return OK


def scal(word, mk):
    """A Scalar argument word in the compute dtype (numba only)."""
    raise NotImplementedError


@overload(scal, inline="always")
def _ov_scal(word, mk):
    if isinstance(mk, types.Integer):
        return lambda word, mk: word
    return lambda word, mk: cast_like(bits_to_f64(word), mk)
