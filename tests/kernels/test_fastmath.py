"""``math="fast"``: the approximations and fused multiply-adds the fast kernels may use.

Program-level parity (every parity fixture within 1e-4 x max(1, |ref|) of
executorch.runtime, int programs within one quantisation step) is in
``tests/programs/test_parity.py``; determinism under threads in
``tests/test_thread_determinism.py``. Here: each building block of
``kernels.fast.fastmath`` against the C library (float64, scipy for erf) over many float32
inputs and the special values, and the FMA matrix product against float64 numpy.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special

from pyruntime.kernels.fast import deferred

deferred.materialize()
from numba import njit  # noqa: E402  (after materialize: the kernels' own Numba objects)

from pyruntime.kernels.fast import fastmath as F  # noqa: E402
from pyruntime.kernels.fast.ordered import gemm_scratch, ordered_gemm  # noqa: E402


def _loop(fn):
    @njit(error_model="numpy")  # as the kernels compile: no division checks
    def run(x, z):
        for i in range(x.size):
            z[i] = fn(x[i])
    return run


def _erf(v):
    return scipy.special.erf(v)


# name, function, float64 oracle, input range, bound on |got - ref| / max(1, |ref|)
# (exp: relative, in float32 ulps); each bound is the worst case measured here (AMD EPYC,
# AVX-512: exp 0.70 ulp, sigmoid 8.9e-8, silu 1.2e-7, tanh 8.9e-8, erf 3.4e-7, gelu 2.6e-7,
# gelu_tanh 1.6e-7) rounded up, with room for a CPU without FMA (two roundings per step)
CASES = [
    ("exp", F.exp_fast, np.exp, (-104.0, 88.7), 1.0),
    ("sigmoid", F.sigmoid_fast, lambda v: 1 / (1 + np.exp(-v)), (-40.0, 40.0), 1.5e-7),
    ("silu", F.silu_fast, lambda v: v / (1 + np.exp(-v)), (-40.0, 40.0), 2e-7),
    ("tanh", F.tanh_fast, np.tanh, (-12.0, 12.0), 1.5e-7),
    ("erf", F.erf_fast, _erf, (-6.0, 6.0), 5e-7),
    ("gelu", F.gelu_fast, lambda v: 0.5 * v * (1 + _erf(v / math.sqrt(2))), (-12.0, 12.0), 4e-7),
    ("gelu_tanh", F.gelu_tanh_fast,
     lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
     (-12.0, 12.0), 2.5e-7),
]
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, 0.3, -0.3,
                     0.29999998, 88.72, -87.5, -103.9], np.float32)


@pytest.mark.parametrize("name,fn,ref,span,bound", CASES, ids=[c[0] for c in CASES])
def test_approximation_within_its_bound(name, fn, ref, span, bound):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(*span, 1 << 20).astype(np.float32),
                        rng.standard_normal(1 << 16).astype(np.float32), SPECIALS])
    z = np.empty_like(x)
    _loop(fn)(x, z)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(z), nan), f"{name}: NaN where the oracle has none, or not"
    inf = np.isinf(want)
    assert np.array_equal(z[inf], want[inf].astype(np.float32)), f"{name}: infinities differ"
    ok = ~nan & ~inf
    got, want = z[ok].astype(np.float64), want[ok]
    if name == "exp":  # relative, in ulps of the float32 result (normal results)
        normal = np.abs(want) >= np.finfo(np.float32).tiny
        err = np.abs(got - want)[normal] / np.abs(want[normal]) / 2.0 ** -23
        assert not np.any((got == 0) & (want >= np.finfo(np.float32).tiny))
    else:
        err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    assert err.max() <= bound, f"{name}: worst error {err.max():.3g} > {bound:.3g}"


def test_odd_functions_keep_tiny_arguments():
    """tanh and erf below 0.3 take their Taylor polynomial: a tiny argument is not lost
    (1 - e would give 0)."""
    x = np.array([1e-30, -1e-30, 1e-8, -3e-5], np.float32)
    for fn, ref in ((F.tanh_fast, np.tanh), (F.erf_fast, _erf)):
        z = np.empty_like(x)
        _loop(fn)(x, z)
        np.testing.assert_allclose(z, ref(x.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("m,n,k", [(1, 1000, 1280), (7, 33, 129), (64, 3136, 576),
                                   (128, 49, 1152), (300, 17, 5)])
def test_fma_gemm_is_close_to_float64_and_exact_mode_close_to_it(m, n, k):
    """The FMA product keeps the exact one's order (one rounding less per step): both within
    a few ulps of the sum's scale of the float64 product, and different from each other
    (so the FMA path ran) unless k is tiny."""
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    outs = []
    for fma in (0, 1):
        c = np.empty((m, n), np.float32)
        s = np.empty(gemm_scratch(m, n, k), np.float32)
        ordered_gemm(m, n, k, a.ctypes.data, k, 1, b.ctypes.data, n, 1, c.ctypes.data, n, s,
                     np.float32(0), 4, 0, 0, fma)
        assert np.all(np.abs(c - want) <= k * 2.0 ** -23 * scale + 1e-30)
        outs.append(c)
    if k > 8:
        assert not np.array_equal(outs[0], outs[1])
