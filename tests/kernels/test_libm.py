"""kernels/libm.py: both tiers call the C library's float/double functions, as ExecuTorch.

The reference ufuncs and the compiled kernels must give the bits of ``expf``,
``tanhf``, ``logf``, ``erff`` (and the double ones) called through ctypes, on
ordinary and special inputs; the compiled code must call them, not a vectorised
approximation. (tests/programs/test_single_ops.py compares against
executorch.runtime itself: the ``*_exact`` transcendental cases.)
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import re

import numpy as np
import pytest

from pyruntime.kernels import libm

_C = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _c(name, ctype):
    f = getattr(_C, name)
    f.restype, f.argtypes = ctype, [ctype]
    return f


def _inputs(dtype):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(3000) * 10.0 ** rng.uniform(-4, 2.5, 3000)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e30, -1e30, 88.72, -87.33,
               -103.97, 709.8, -745.2]
    return np.concatenate([x, special]).astype(dtype)


def _bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def _same(got, want):
    """Bitwise, except that NaNs only need to be NaN (ctypes may requiet a NaN's payload)."""
    nan = np.isnan(want)
    return np.array_equal(np.isnan(got), nan) and np.array_equal(_bits(got)[~nan],
                                                                 _bits(want)[~nan])


_ONE_F = {"exp": "expf", "tanh": "tanhf", "log": "logf"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["exp", "tanh", "log"])
def test_ufunc_is_libm(name, dtype):
    x = _inputs(dtype)
    if dtype == np.float32:
        f = _c(_ONE_F[name], ctypes.c_float)
    else:
        f = _c(name, ctypes.c_double)
    want = np.array([f(float(v)) for v in x], dtype)
    with np.errstate(all="ignore"):
        got = libm.ufunc(name, dtype)(x)
    assert got.dtype == dtype and _same(got, want)


def test_sigmoid_and_gelu_follow_executorch_formulas():
    x = _inputs(np.float32)
    expf, erff, tanhf = (_c(n, ctypes.c_float) for n in ("expf", "erff", "tanhf"))
    f32 = np.float32
    one, half = f32(1), f32(0.5)
    with np.errstate(all="ignore"):
        e = np.array([expf(float(-v)) for v in x], f32)
        assert _same(libm.ufunc("sigmoid", f32)(x), one / (one + e))
        erf = np.array([erff(float(v)) for v in x * f32(math.sqrt(0.5))], f32)
        assert _same(libm.ufunc("gelu", f32)(x), x * half * (one + erf))
        inner = f32(libm.GELU_BETA) * (x + f32(0.044715) * (x * x * x))
        t = np.array([tanhf(float(v)) for v in inner], f32)
        assert _same(libm.ufunc("gelu_tanh", f32)(x), half * x * (one + t))


def test_compiled_code_calls_expf():
    """A loop over the external function stays a loop of calls (no SVML / vector exp)."""
    from numba import njit

    @njit
    def run(x, out):
        for i in range(x.size):
            out[i] = libm.c_sigmoid(x[i])

    x = _inputs(np.float32)
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        run(x, out)
        assert _same(out, libm.ufunc("sigmoid", np.float32)(x))
    asm = run.inspect_asm(run.signatures[0])
    assert "expf" in asm and not re.search(r"svml|__\w*expf\d", asm)
