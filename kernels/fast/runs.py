"""Strided runs: ``n`` elements ``step`` apart moved between a tensor's storage (any stored
type) and a compute buffer (float32, float64 or int64), converting each element.

One loop body each way (``_load``/``_store``); ``load_run``/``store_run`` switch on the
stored type once per run and hand the loop a typed pointer and a conversion function, so
numba compiles one specialisation of the loop per stored type and LLVM vectorizes each
(a dtype switch inside the loop is ~2-3x slower: LLVM does not unswitch it). Every
engine that converts runs of elements (elementwise, reductions, casting copies) goes
through these two.

    load_run(buf, 0, addr, ST_F16, off, step, n)             # buf[j] = float value
    store_run(addr, ST_I8, off, step, n, buf, 0, narrow_c)   # C++ static_cast<int8_t>
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from kernels.fast.nb import (ST_BF16, ST_BOOL, ST_F16, ST_F32, ST_F64, ST_I8, ST_I16, ST_I32,
                             ST_I64, cast_like, f32_from_bits, f32_to_half, f64_to_bf16, f64_to_i32,
                             half_to_f32, ptr_like)


U = np.uint64  # unsigned buffer indices: no negative-index wraparound code in the loops

# ---- stored element -> number (float16/bfloat16 bits become float32, exactly) -----------

@njit
def _num(v):
    return v


@njit
def _half(v):
    return half_to_f32(np.int64(v))


@njit
def _bf16(v):
    return f32_from_bits(np.int32(np.uint32(np.int64(v) << 16)))


@njit
def _load(buf, b, p, off, step, n, num):
    m = buf[0]
    for j in range(n):
        buf[U(b + j)] = cast_like(num(p[off + j * step]), m)


@njit
def load_run(buf, b, addr, st, off, step, n):
    """``buf[b + j]`` = element ``off + j * step`` (type ``st``) as buf's type, ``j < n``;
    as numpy's astype converts (floats to int64 truncate toward zero; NaN and out of
    range give INT64_MIN, as x86's cvttsd2si)."""
    if st == ST_F32:
        _load(buf, b, ptr_like(addr, np.float32(0)), off, step, n, _num)
    elif st == ST_F64:
        _load(buf, b, ptr_like(addr, np.float64(0)), off, step, n, _num)
    elif st == ST_I64:
        _load(buf, b, ptr_like(addr, np.int64(0)), off, step, n, _num)
    elif st == ST_I32:
        _load(buf, b, ptr_like(addr, np.int32(0)), off, step, n, _num)
    elif st == ST_I16:
        _load(buf, b, ptr_like(addr, np.int16(0)), off, step, n, _num)
    elif st == ST_I8:
        _load(buf, b, ptr_like(addr, np.int8(0)), off, step, n, _num)
    elif st == ST_F16:
        _load(buf, b, ptr_like(addr, np.uint16(0)), off, step, n, _half)
    elif st == ST_BF16:
        _load(buf, b, ptr_like(addr, np.uint16(0)), off, step, n, _bf16)
    else:  # uint8, bool
        _load(buf, b, ptr_like(addr, np.uint8(0)), off, step, n, _num)


# ---- number -> stored element ----------------------------------------------------------
# Integers narrower than 64 bits keep the low bits of ``narrow(v)``, an int64:
# ``narrow_c`` is C++'s static_cast on x86 (a float goes through int32: NaN and out of
# range give INT32_MIN), ``narrow_wrap`` goes through int64 (numpy's astype of a float
# result to a narrow integer, as the reductions store it).

def _through_i32(v):
    """``v`` as int64, a float truncated through int32 (numba only)."""
    raise NotImplementedError


@overload(_through_i32)
def _ov_through_i32(v):
    if isinstance(v, types.Float):
        return lambda v: f64_to_i32(np.float64(v))
    return lambda v: np.int64(v)


@njit
def narrow_c(v):
    return _through_i32(v)


@njit
def narrow_wrap(v):
    return cast_like(v, np.int64(0))


@njit
def _to_f32(v, narrow):
    return np.float32(v)


@njit
def _to_f64(v, narrow):
    return np.float64(v)


@njit
def _to_half(v, narrow):  # through float32, as C++ converts double -> Half
    return np.uint16(f32_to_half(np.float32(v)))


@njit
def _to_bf16(v, narrow):  # through float32 (one rounding from an integer), as C++ does
    return np.uint16(f64_to_bf16(np.float64(np.float32(v))))


@njit
def _to_bool(v, narrow):
    return np.uint8(v != 0)


@njit
def _to_i64(v, narrow):
    return cast_like(v, np.int64(0))


@njit
def _to_i32(v, narrow):
    return np.int32(narrow(v))


@njit
def _to_i16(v, narrow):
    return np.int16(narrow(v))


@njit
def _to_i8(v, narrow):
    return np.int8(narrow(v))


@njit
def _to_u8(v, narrow):
    return np.uint8(narrow(v) & 0xFF)


@njit
def _store(p, off, step, n, buf, b, to, narrow):
    for j in range(n):
        p[off + j * step] = to(buf[U(b + j)], narrow)


@njit
def store_run(addr, st, off, step, n, buf, b, narrow):
    """Element ``off + j * step`` (type ``st``) = ``buf[b + j]``, ``j < n``: floats round to
    the stored float type (float16 through float32), bool is ``!= 0``, int64 as
    ``load_run`` converts, narrower integers keep the low bits of ``narrow(v)``."""
    if st == ST_F32:
        _store(ptr_like(addr, np.float32(0)), off, step, n, buf, b, _to_f32, narrow)
    elif st == ST_F64:
        _store(ptr_like(addr, np.float64(0)), off, step, n, buf, b, _to_f64, narrow)
    elif st == ST_F16:
        _store(ptr_like(addr, np.uint16(0)), off, step, n, buf, b, _to_half, narrow)
    elif st == ST_BF16:
        _store(ptr_like(addr, np.uint16(0)), off, step, n, buf, b, _to_bf16, narrow)
    elif st == ST_BOOL:
        _store(ptr_like(addr, np.uint8(0)), off, step, n, buf, b, _to_bool, narrow)
    elif st == ST_I64:
        _store(ptr_like(addr, np.int64(0)), off, step, n, buf, b, _to_i64, narrow)
    elif st == ST_I32:
        _store(ptr_like(addr, np.int32(0)), off, step, n, buf, b, _to_i32, narrow)
    elif st == ST_I16:
        _store(ptr_like(addr, np.int16(0)), off, step, n, buf, b, _to_i16, narrow)
    elif st == ST_I8:
        _store(ptr_like(addr, np.int8(0)), off, step, n, buf, b, _to_i8, narrow)
    else:  # uint8
        _store(ptr_like(addr, np.uint8(0)), off, step, n, buf, b, _to_u8, narrow)
