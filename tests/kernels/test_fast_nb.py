"""The any-dtype element load/store of kernels/fast/nb.py against numpy's casts.

Half and bfloat16 are converted bit by bit in compiled code; a value stored as
Half/BFloat16 must equal numpy's float32 -> float16 / ml_dtypes.bfloat16
conversion (C++ converts through float), and integer stores wrap like C++.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from numba import njit

from pyruntime.cython_ext import from_numpy_dtype
from pyruntime.kernels.fast import deferred, nb

deferred.materialize()  # nb's helpers are Numba's own before this file's njit uses them


@njit(cache=False)
def _convert(src, sst, dst, dstt, n, through_int):
    for i in range(n):
        if through_int:
            nb.store_i64(dst, dstt, i, nb.load_i64(src, sst, i))
        else:
            nb.store_f64(dst, dstt, i, nb.load_f64(src, sst, i))


def _code(dt):
    return int(from_numpy_dtype(np.dtype(dt)))


RNG = np.random.default_rng(0)
FLOATS = np.concatenate([
    RNG.standard_normal(3000) * np.logspace(-12, 6, 3000),
    [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 6e-8, 2.98e-8, 1e-40,
     3.0e38, 3.4e38, 1.0 + 2.0 ** -11, 1.0 + 2.0 ** -8 + 2.0 ** -20]])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_float_store_and_load_round_trip(dtype):
    src = FLOATS.astype(np.float64)
    dst = np.zeros(len(src), dtype)
    _convert(src.ctypes.data, _code(np.float64), dst.ctypes.data, _code(dtype), len(src), False)
    with np.errstate(over="ignore"):  # values past the narrow type's range: inf, as wanted
        want = src if dtype == np.float64 else src.astype(np.float32).astype(dtype)
    np.testing.assert_array_equal(dst.astype(np.float64), want.astype(np.float64))
    assert np.array_equal(np.signbit(dst.astype(np.float64)), np.signbit(want.astype(np.float64)))
    back = np.zeros(len(src))
    _convert(dst.ctypes.data, _code(dtype), back.ctypes.data, _code(np.float64), len(src), False)
    np.testing.assert_array_equal(back, dst.astype(np.float64))


def test_every_half_bit_pattern_loads_exactly():
    bits = np.arange(1 << 16, dtype=np.uint16)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        src = bits.view(dtype)
        out = np.zeros(len(src))
        _convert(src.ctypes.data, _code(dtype), out.ctypes.data, _code(np.float64), len(src), False)
        with np.errstate(invalid="ignore"):  # NaN bit patterns widen to NaN
            np.testing.assert_array_equal(out, src.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_])
def test_integer_stores_wrap_like_casts(dtype):
    src = np.array([-300, -129, -128, -1, 0, 1, 127, 128, 255, 256, 70000, 2 ** 40, -2 ** 63],
                   np.int64)
    dst = np.zeros(len(src), dtype)
    _convert(src.ctypes.data, _code(np.int64), dst.ctypes.data, _code(dtype), len(src), True)
    np.testing.assert_array_equal(dst, src.astype(dtype))


def test_float_to_int_truncates_toward_zero():
    src = np.array([2.7, -2.7, 0.5, -0.5, 100.9], np.float32)
    dst = np.zeros(len(src), np.int32)
    _convert(src.ctypes.data, _code(np.float32), dst.ctypes.data, _code(np.int32), len(src), False)
    np.testing.assert_array_equal(dst, [2, -2, 0, 0, 100])
