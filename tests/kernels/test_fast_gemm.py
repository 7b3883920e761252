"""The register-blocked ordered product (``kernels.fast.gemm`` behind ``ordered.ordered_gemm``)
against a numpy loop that adds each output's k products in order from zero: bit for bit, over
edge sizes (0, 1, not multiples of the 6 x NR tile, k past a KC block, n past an NCB block),
both orientations, strided operands and weights packed at load for other sizes."""
from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from pyruntime.kernels.fast.gemm import KC, NCB, swapped
from pyruntime.kernels.fast.ordered import (PK_A_ROWS, PK_AT_COLS, PK_B_COLS, PK_BT_ROWS, gemm_scratch,
                                  ordered_gemm, pack_weight, scratch_size)

RNG = np.random.default_rng(7)


@njit
def _run(m, n, k, A, ars, acs, B, brs, bcs, C, ldc, S, zero, item, pw, pwk):
    ordered_gemm(m, n, k, A.ctypes.data, ars, acs, B.ctypes.data, brs, bcs, C.ctypes.data, ldc,
                 S, zero, item, pw, pwk)


def _ordered(a, b):
    """Each output a running sum over k in order, from zero, in the operands' dtype."""
    c = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    for t in range(a.shape[1]):
        c += a[:, t:t + 1] * b[t:t + 1, :]
    return c


def _gemm(a, b, ldc_pad=0, pw=None, pwk=0, a_t=False, b_t=False):
    """``ordered_gemm`` of a (m x k) and b (k x n), each stored as given or transposed."""
    m, k = a.shape
    n = b.shape[1]
    dt = a.dtype
    A = np.ascontiguousarray(a.T) if a_t else np.ascontiguousarray(a)
    B = np.ascontiguousarray(b.T) if b_t else np.ascontiguousarray(b)
    ars, acs = (1, m) if a_t else (k, 1)
    brs, bcs = (1, k) if b_t else (n, 1)
    ldc = n + ldc_pad
    C = np.full((max(m, 1), max(ldc, 1)), np.nan, dt)
    assert scratch_size(m, n, k) >= gemm_scratch(m, n, k)
    S = np.full(scratch_size(m, n, k) + 1, np.nan, dt)
    _run(m, n, k, A.reshape(-1) if A.size else np.zeros(1, dt), ars, acs,
         B.reshape(-1) if B.size else np.zeros(1, dt), brs, bcs, C.reshape(-1), ldc, S,
         dt.type(0), dt.itemsize, 0 if pw is None else pw.ctypes.data, pwk)
    return C[:m, :n], C


SIZES = [(0, 5, 3), (4, 0, 3), (3, 4, 0), (1, 1, 1), (1, 40, 7), (40, 1, 7), (6, 16, 5),
         (7, 17, 9), (13, 31, 33), (5, 300, 11), (300, 5, 11), (24, 50, KC + 3),
         (30, NCB + 21, 20), (64, 4, 600), (2, 3, 2 * KC + 1),
         # one row: two, four, four + two + a partial panel (float32: 16 columns a panel)
         (1, 32, 9), (1, 64, 3), (1, 64 + 32 + 5, KC + 3), (13, 48, 8)]


@pytest.mark.parametrize("m,n,k", SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sizes(m, n, k, dtype):
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    want = _ordered(a, b)
    got, full = _gemm(a, b, ldc_pad=3)
    np.testing.assert_array_equal(got, want)
    if m and n:
        assert np.isnan(full[:m, n:]).all()  # nothing written past n in a row
    for a_t, b_t in ((True, False), (False, True), (True, True)):
        np.testing.assert_array_equal(_gemm(a, b, a_t=a_t, b_t=b_t)[0], want)


@pytest.mark.parametrize("bind,run", [((8, 300), (8, 300)), ((300, 8), (300, 8)),
                                      ((8, 300), (300, 8)), ((300, 8), (8, 300)),
                                      ((50, 70), (1, 70)), ((1, 70), (50, 70))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_packed_weight(bind, run, dtype):
    """A constant packed at load for one (m, n) is used when the run's sizes pick the same
    orientation, and ignored (the operand packed per call) when they do not."""
    k = 37
    for as_a in (True, False):
        m, n = run
        a = RNG.standard_normal((m if as_a else run[0], k)).astype(dtype)
        b = RNG.standard_normal((k, n)).astype(dtype)
        if as_a:  # the weight is A: its rows (m) are fixed, the run's n may differ
            a = RNG.standard_normal((bind[0], k)).astype(dtype)
            m = bind[0]
            pw, kind = pack_weight(a, bind[0], bind[1], True)
            assert kind in (PK_A_ROWS, PK_AT_COLS)
            assert (kind == PK_AT_COLS) == swapped(bind[0], bind[1], 64 // a.itemsize)
        else:  # the weight is B: its columns (n) are fixed
            b = RNG.standard_normal((k, bind[1])).astype(dtype)
            n = bind[1]
            pw, kind = pack_weight(b, bind[0], bind[1], False)
            assert kind in (PK_B_COLS, PK_BT_ROWS)
        b = b[:, :n]
        np.testing.assert_array_equal(_gemm(a, b, pw=pw, pwk=kind)[0], _ordered(a, b))


def test_no_fma_contraction():
    """Products round before the add: (1 + 2^-12)^2 rounds to 1 + 2^-11 in float32, so the
    sum with -(1 + 2^-11) is 0; an FMA would keep the exact 2^-24."""
    a = np.array([[1 + 2 ** -12, 1.0]], np.float32)
    b = np.array([[1 + 2 ** -12] * 16, [-(1 + 2 ** -11)] * 16], np.float32)
    assert (_gemm(a, b)[0] == 0).all()
