"""Strided runs: ``n`` elements ``step`` apart moved between a tensor's storage (any stored
type) and a compute buffer (float32, float64 or int64), converting each element.

One loop body each way (``_load``/``_store``); ``load_run``/``store_run`` switch on the
stored type once per run (one switch, ``move_run``, serves both) and hand the loop a
typed pointer and a tag value whose numba type picks the conversion, so numba compiles
one specialisation of the loop per stored type and LLVM vectorizes each (a dtype switch
inside the loop is ~2-3x slower: LLVM does not unswitch it). Tags, not functions, pick
it: a kernel that passes a jitted function as an argument cannot be cached on disk
("dynamic globals"). Every engine that converts runs of elements (elementwise,
reductions, casting copies) goes through these two.

    load_run(buf, 0, addr, ST_F16, off, step, n)             # buf[j] = float value
    store_run(addr, ST_I8, off, step, n, buf, 0, narrow_c)   # C++ static_cast<int8_t>
"""
from __future__ import annotations

import numpy as np

from pyruntime.kernels.fast.deferred import njit, overload, types
from pyruntime.kernels.fast.nb import (ST_BF16, ST_BOOL, ST_F16, ST_F32, ST_F64, ST_I16, ST_I32,
                                       ST_I64, ST_I8, cast_like, f32_from_bits, f32_to_half,
                                       f64_to_bf16, f64_to_i32, f64_to_int, half_to_f32, ptr_like)


U = np.uint64  # unsigned buffer indices: no negative-index wraparound code in the loops


# ---- stored element -> number ----------------------------------------------------------
# tags (the stores' too): float16 bits (uint16), bfloat16 bits (uint32), others as they are

def _number(v, tag):
    """A stored element as a number: float16/bfloat16 bits become float32, exactly."""
    raise NotImplementedError


@overload(_number)
def _ov_number(v, tag):
    if tag == types.uint16:
        return lambda v, tag: half_to_f32(np.int64(v))
    if tag == types.uint32:
        return lambda v, tag: f32_from_bits(np.int32(np.uint32(np.int64(v) << 16)))
    return lambda v, tag: v


@njit
def _load(buf, b, p, off, step, n, tag):
    m = buf[0]
    for j in range(n):
        buf[U(b + j)] = cast_like(_number(p[off + j * step], tag), m)


@njit
def load_run(buf, b, addr, st, off, step, n):
    """``buf[b + j]`` = element ``off + j * step`` (type ``st``) as buf's type, ``j < n``;
    as numpy's astype converts (floats to int64 truncate toward zero; NaN and out of
    range give INT64_MIN, as x86's cvttsd2si)."""
    move_run(addr, st, off, step, n, buf, b, narrow_c, _LOAD)


# ---- number -> stored element ----------------------------------------------------------
# Integers narrower than 64 bits keep the low bits of an int64: with ``narrow_c`` a float
# goes through int32 first (C++'s static_cast on x86: NaN and out of range give
# INT32_MIN); with ``narrow_wrap`` through int64 (numpy's astype of a float result to a
# narrow integer, as the reductions store it).
narrow_c, narrow_wrap = False, True


def _narrow(v, wrap):
    """``v`` as the int64 whose low bits a narrow integer keeps (numba only)."""
    raise NotImplementedError


@overload(_narrow)
def _ov_narrow(v, wrap):
    if isinstance(v, types.Float):
        return lambda v, wrap: f64_to_int(np.float64(v)) if wrap else f64_to_i32(np.float64(v))
    return lambda v, wrap: np.int64(v)


def _stored(v, tag, wrap):
    """``v`` as the element a tensor of the tag's kind stores (numba only): tags are the
    stored numpy type, but uint16 = float16 bits, uint32 = bfloat16 bits, bool_ = bool."""
    raise NotImplementedError


@overload(_stored)
def _ov_stored(v, tag, wrap):
    if tag == types.float32:
        return lambda v, tag, wrap: np.float32(v)
    if tag == types.float64:
        return lambda v, tag, wrap: np.float64(v)
    if tag == types.uint16:  # through float32, as C++ converts double -> Half
        return lambda v, tag, wrap: np.uint16(f32_to_half(np.float32(v)))
    if tag == types.uint32:  # through float32 (one rounding from an integer), as C++ does
        return lambda v, tag, wrap: np.uint16(f64_to_bf16(np.float64(np.float32(v))))
    if isinstance(tag, types.Boolean):
        return lambda v, tag, wrap: np.uint8(v != 0)
    if tag == types.int64:
        return lambda v, tag, wrap: cast_like(v, np.int64(0))
    if tag == types.int32:
        return lambda v, tag, wrap: np.int32(_narrow(v, wrap))
    if tag == types.int16:
        return lambda v, tag, wrap: np.int16(_narrow(v, wrap))
    if tag == types.int8:
        return lambda v, tag, wrap: np.int8(_narrow(v, wrap))
    if tag == types.uint8:
        return lambda v, tag, wrap: np.uint8(_narrow(v, wrap) & 0xFF)
    return None


@njit
def _store(p, off, step, n, buf, b, tag, wrap):
    for j in range(n):
        p[off + j * step] = _stored(buf[U(b + j)], tag, wrap)


@njit
def store_run(addr, st, off, step, n, buf, b, wrap):
    """Element ``off + j * step`` (type ``st``) = ``buf[b + j]``, ``j < n``: floats round to
    the stored float type (float16 through float32), bool is ``!= 0``, int64 as
    ``load_run`` converts, narrower integers keep low bits (``narrow_c``/``narrow_wrap``)."""
    move_run(addr, st, off, step, n, buf, b, wrap, _STORE)


# ---- one switch on the stored type for both ways -----------------------------------------
# direction tags: a type, so each way compiles only its own loop
_LOAD, _STORE = np.int8(0), np.uint8(0)


def _move(p, off, step, n, buf, b, tag, wrap, way):
    """``_load`` or ``_store`` as ``way``'s type picks (numba only)."""
    raise NotImplementedError


@overload(_move)
def _ov_move(p, off, step, n, buf, b, tag, wrap, way):
    if way == types.uint8:
        return lambda p, off, step, n, buf, b, tag, wrap, way: \
            _store(p, off, step, n, buf, b, tag, wrap)
    return lambda p, off, step, n, buf, b, tag, wrap, way: _load(buf, b, p, off, step, n, tag)


@njit
def move_run(addr, st, off, step, n, buf, b, wrap, way):
    """``load_run`` (``way`` int8) or ``store_run`` (uint8): a typed pointer and tag per ``st``."""
    if st == ST_F32:
        _move(ptr_like(addr, np.float32(0)), off, step, n, buf, b, np.float32(0), wrap, way)
    elif st == ST_F64:
        _move(ptr_like(addr, np.float64(0)), off, step, n, buf, b, np.float64(0), wrap, way)
    elif st == ST_F16:
        _move(ptr_like(addr, np.uint16(0)), off, step, n, buf, b, np.uint16(0), wrap, way)
    elif st == ST_BF16:
        _move(ptr_like(addr, np.uint16(0)), off, step, n, buf, b, np.uint32(0), wrap, way)
    elif st == ST_BOOL:
        _move(ptr_like(addr, np.uint8(0)), off, step, n, buf, b, False, wrap, way)
    elif st == ST_I64:
        _move(ptr_like(addr, np.int64(0)), off, step, n, buf, b, np.int64(0), wrap, way)
    elif st == ST_I32:
        _move(ptr_like(addr, np.int32(0)), off, step, n, buf, b, np.int32(0), wrap, way)
    elif st == ST_I16:
        _move(ptr_like(addr, np.int16(0)), off, step, n, buf, b, np.int16(0), wrap, way)
    elif st == ST_I8:
        _move(ptr_like(addr, np.int8(0)), off, step, n, buf, b, np.int8(0), wrap, way)
    else:  # uint8
        _move(ptr_like(addr, np.uint8(0)), off, step, n, buf, b, np.uint8(0), wrap, way)
