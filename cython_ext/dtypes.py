"""ExecuTorch ScalarType codes and their numpy dtypes (spec section 2.1)."""
from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class ScalarType(enum.IntEnum):
    BYTE = 0
    CHAR = 1
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    COMPLEX32 = 8
    COMPLEX64 = 9
    COMPLEX128 = 10
    BOOL = 11
    QINT8 = 12
    QUINT8 = 13
    QINT32 = 14
    BFLOAT16 = 15
    QUINT4X2 = 16
    QUINT2X4 = 17
    BITS1X8 = 18
    BITS2X4 = 19
    BITS4X2 = 20
    BITS8 = 21
    BITS16 = 22
    FLOAT8E5M2 = 23
    FLOAT8E4M3FN = 24
    FLOAT8E5M2FNUZ = 25
    FLOAT8E4M3FNUZ = 26
    UINT16 = 27
    UINT32 = 28
    UINT64 = 29


_NUMPY = {
    ScalarType.BYTE: np.dtype(np.uint8),
    ScalarType.CHAR: np.dtype(np.int8),
    ScalarType.SHORT: np.dtype(np.int16),
    ScalarType.INT: np.dtype(np.int32),
    ScalarType.LONG: np.dtype(np.int64),
    ScalarType.HALF: np.dtype(np.float16),
    ScalarType.FLOAT: np.dtype(np.float32),
    ScalarType.DOUBLE: np.dtype(np.float64),
    ScalarType.COMPLEX32: np.dtype(np.uint32),  # storage only (2 x half)
    ScalarType.COMPLEX64: np.dtype(np.complex64),
    ScalarType.COMPLEX128: np.dtype(np.complex128),
    ScalarType.BOOL: np.dtype(np.bool_),
    ScalarType.QINT8: np.dtype(np.int8),
    ScalarType.QUINT8: np.dtype(np.uint8),
    ScalarType.QINT32: np.dtype(np.int32),
    ScalarType.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    ScalarType.QUINT4X2: np.dtype(np.uint8),
    ScalarType.QUINT2X4: np.dtype(np.uint8),
    ScalarType.BITS1X8: np.dtype(np.uint8),
    ScalarType.BITS2X4: np.dtype(np.uint8),
    ScalarType.BITS4X2: np.dtype(np.uint8),
    ScalarType.BITS8: np.dtype(np.uint8),
    ScalarType.BITS16: np.dtype(np.uint16),
    ScalarType.FLOAT8E5M2: np.dtype(ml_dtypes.float8_e5m2),
    ScalarType.FLOAT8E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    ScalarType.FLOAT8E5M2FNUZ: np.dtype(ml_dtypes.float8_e5m2fnuz),
    ScalarType.FLOAT8E4M3FNUZ: np.dtype(ml_dtypes.float8_e4m3fnuz),
    ScalarType.UINT16: np.dtype(np.uint16),
    ScalarType.UINT32: np.dtype(np.uint32),
    ScalarType.UINT64: np.dtype(np.uint64),
}

# numpy dtype -> the ScalarType a user array of that dtype maps to.
_FROM_NUMPY = {
    np.dtype(np.uint8): ScalarType.BYTE,
    np.dtype(np.int8): ScalarType.CHAR,
    np.dtype(np.int16): ScalarType.SHORT,
    np.dtype(np.int32): ScalarType.INT,
    np.dtype(np.int64): ScalarType.LONG,
    np.dtype(np.float16): ScalarType.HALF,
    np.dtype(np.float32): ScalarType.FLOAT,
    np.dtype(np.float64): ScalarType.DOUBLE,
    np.dtype(np.complex64): ScalarType.COMPLEX64,
    np.dtype(np.complex128): ScalarType.COMPLEX128,
    np.dtype(np.bool_): ScalarType.BOOL,
    np.dtype(ml_dtypes.bfloat16): ScalarType.BFLOAT16,
    np.dtype(np.uint16): ScalarType.UINT16,
    np.dtype(np.uint32): ScalarType.UINT32,
    np.dtype(np.uint64): ScalarType.UINT64,
    np.dtype(ml_dtypes.float8_e5m2): ScalarType.FLOAT8E5M2,
    np.dtype(ml_dtypes.float8_e4m3fn): ScalarType.FLOAT8E4M3FN,
}

# Scalar types a .pte tensor may carry (the runtime's valid set).
VALID_SCALAR_TYPES = frozenset(int(s) for s in ScalarType)


def to_numpy_dtype(st: int) -> np.dtype:
    """numpy dtype for an ExecuTorch ScalarType code.

    >>> to_numpy_dtype(6)
    dtype('float32')
    """
    return _NUMPY[ScalarType(st)]


def from_numpy_dtype(dt) -> ScalarType:
    """ScalarType for a numpy dtype; ValueError if there is none."""
    dt = np.dtype(dt)
    try:
        return _FROM_NUMPY[dt]
    except KeyError:
        raise ValueError(f"numpy dtype {dt} has no ExecuTorch ScalarType") from None


def element_size(st: int) -> int:
    return _NUMPY[ScalarType(st)].itemsize


def scalar_type_name(st: int) -> str:
    try:
        return ScalarType(st).name
    except ValueError:
        return f"ScalarType({st})"


_INT64_MIN = np.int64(-2**63)


def is_floating(dt) -> bool:
    """float16/32/64 and bfloat16 (numpy's ``kind`` says "V" for ml_dtypes' bfloat16)."""
    dt = np.dtype(dt)
    return dt.kind == "f" or dt == np.dtype(ml_dtypes.bfloat16)


def cast_array(a, dtype) -> np.ndarray:
    """``a`` converted to ``dtype`` as ExecuTorch's C++ kernels convert on x86, on any CPU.

    Floating to integer is what ``static_cast`` compiles to there (cvttss2si /
    cvttsd2si): truncation toward zero; to a type of 32 bits or fewer through
    int32, where NaN, inf and values outside int32 become INT32_MIN, then the
    low bits are kept (1e10 -> int8 is 0, 300.7 -> int8 is 44); to int64, NaN
    and out-of-range values become INT64_MIN. numpy leaves these cases to the
    C compiler and the SIMD unit, so they differ between machines; every other
    conversion (float to float, integer to anything, to bool) is defined and
    left to numpy.
    """
    a = np.asarray(a)
    dtype = np.dtype(dtype)
    if not (dtype.kind in "iu" and is_floating(a.dtype)):
        return a.astype(dtype)
    f = a.astype(np.float64)
    with np.errstate(invalid="ignore"):
        if dtype.itemsize == 8:
            ok = (f >= -2.0**63) & (f < 2.0**63)
            return np.where(ok, np.trunc(np.where(ok, f, 0.0)).astype(np.int64),
                            _INT64_MIN).astype(dtype)
        ok = (f > -2147483649.0) & (f < 2147483648.0)
        i = np.where(ok, np.trunc(np.where(ok, f, 0.0)).astype(np.int64), -2**31)
    return i.astype(dtype)  # integer narrowing keeps the low bits
