"""kernels/fast/runs.py: strided runs between any stored type and a compute buffer, against
nb's per-element load/store (themselves checked against numpy's casts in test_fast_nb.py).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from numba import njit

from pyruntime.cython_ext import from_numpy_dtype
from pyruntime.kernels.fast import nb
from pyruntime.kernels.fast.runs import load_run, narrow_c, narrow_wrap, store_run

TYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int64, np.int32, np.int16,
         np.int8, np.uint8, np.bool_]
RNG = np.random.default_rng(0)
SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 0.5, -0.5, 2.5, 255.5, 3e9, -3e9, 1e19, 65520.0,
           2.0 ** 24 + 1, 2.0 ** 53 + 1]


def _code(dt):
    return int(from_numpy_dtype(np.dtype(dt)))


def _source(dt, n):
    if dt is np.bool_:
        return RNG.integers(0, 2, n).astype(np.bool_)
    if np.dtype(dt).kind in "iu":
        return RNG.integers(np.iinfo(dt).min, np.iinfo(dt).max, n, dtype=dt, endpoint=True)
    vals = np.concatenate([SPECIAL, RNG.standard_normal(n) * 10.0 ** RNG.integers(-3, 12, n)])
    with np.errstate(over="ignore"):  # 3e9 and up to float16: inf, as intended
        return vals[:n].astype(dt)


@njit(cache=False)
def _runs(src, sst, dst, dstt, buf, n, step, narrow):
    """Element j * step of src -> buf (the run's offset b = 1), then buf -> dst[j * step]."""
    load_run(buf, 1, src, sst, 0, step, n)
    store_run(dst, dstt, 0, step, n, buf, 1, narrow)


@njit(cache=False)
def _elements(src, sst, dst, dstt, n, step, through_int):
    for j in range(n):
        if through_int:
            nb.store_i64(dst, dstt, j * step, nb.load_i64(src, sst, j * step))
        else:
            nb.store_f64(dst, dstt, j * step, nb.load_f64(src, sst, j * step))


@pytest.mark.parametrize("step", [1, 3])
@pytest.mark.parametrize("sdt", TYPES, ids=lambda d: np.dtype(d).name)
def test_runs_convert_as_the_element_access_does(sdt, step):
    """Every stored type to every other through a float64 (float sources) or int64 buffer:
    the same bits as nb's element-by-element load and store (C++ static_cast on x86)."""
    n = 300
    src = _source(sdt, n * step)
    through_int = np.dtype(sdt).kind in "iub"
    for ddt in TYPES:
        got = np.zeros(n * step, ddt)
        want = np.zeros(n * step, ddt)
        buf = np.zeros(n + 1, np.int64 if through_int else np.float64)
        _runs(src.ctypes.data, _code(sdt), got.ctypes.data, _code(ddt), buf, n, step, narrow_c)
        _elements(src.ctypes.data, _code(sdt), want.ctypes.data, _code(ddt), n, step,
                  through_int)
        assert got.view(np.uint8).tobytes() == want.view(np.uint8).tobytes(), \
            f"{np.dtype(sdt).name} -> {np.dtype(ddt).name}"


@pytest.mark.parametrize("sdt", [np.int64, np.int32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_float32_buffer_rounds_once_as_numpy_astype(sdt):
    """Reductions accumulate float32 in a float32 buffer: one rounding from the stored
    value, as numpy's astype(float32) (int64 2**24 + 1 -> 2**24, not through float64)."""
    src = _source(sdt, 400)
    if sdt is np.int64:
        src[:4] = [2 ** 24 + 1, 2 ** 53 + 1, -(2 ** 60) - 1, 2 ** 63 - 1]
    buf = np.zeros(401, np.float32)
    out = np.zeros(400, np.float32)
    _runs(src.ctypes.data, _code(sdt), out.ctypes.data, _code(np.float32), buf, 400, 1, narrow_c)
    np.testing.assert_array_equal(buf[1:], src.astype(np.float32))


def test_narrowing_policies():
    """A float stored to a narrow integer keeps the low bits of: narrow_c, the value through
    int32 (x86's cvttsd2si: NaN and out of range give INT32_MIN, whose low bits are 0);
    narrow_wrap, the value through int64."""
    vals = np.array([3e9 + 7, -3.5, np.nan, 300.7], np.float64)
    want = {(np.int8, narrow_c): [0, -3, 0, 44], (np.int8, narrow_wrap): [7, -3, 0, 44],
            (np.int16, narrow_c): [0, -3, 0, 300], (np.int16, narrow_wrap): [24071, -3, 0, 300]}
    for (dt, narrow), w in want.items():
        out = np.zeros(4, dt)
        store_run(out.ctypes.data, _code(dt), 0, 1, 4, vals, 0, narrow)
        np.testing.assert_array_equal(out, w)
