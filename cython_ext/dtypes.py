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
