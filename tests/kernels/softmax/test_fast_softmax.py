"""Compiled _softmax / _log_softmax against the reference tier (itself tested against torch)."""
from __future__ import annotations


import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from tests.kernels.helpers import (assert_close, bind_fast, bound_out, call, call_fast,
                                   call_split, static_out)

RNG = np.random.default_rng(0)
OPS = ["aten::_softmax.out", "aten::_log_softmax.out"]
TOL = {np.float32: 2e-6, np.float64: 1e-13}


def _rand(shape, dtype, scale=3.0):
    return np.asarray(RNG.standard_normal(shape) * scale).astype(dtype)


def _check(name, x, dim):
    dt = x.dtype.type
    ref = static_out(x.shape, dt)
    call(name, x, dim, False, ref)
    for out in (static_out(x.shape, dt), bound_out(tuple(s + 1 for s in x.shape), dt)):
        assert call_fast(name, x, dim, False, out) == 0
        assert_close(out.numpy(), ref.numpy(), rtol=TOL[dt], atol=TOL[dt])
    return ref.numpy()


SHAPES = [((3, 5), 1), ((3, 5), 0), ((3, 5), -2), ((2, 3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), 0),
          ((7,), 0), ((), 0), ((), -1), ((0, 3), 1), ((3, 0), 0), ((4, 1, 6), 1),
          ((2, 3, 4, 5), 2), ((1, 3, 50, 50), -1), ((2, 300), 1), ((300, 3), 0)]


@pytest.mark.parametrize("shape,dim", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", OPS)
def test_against_reference(name, dtype, shape, dim):
    got = _check(name, _rand(shape, dtype), dim)
    if name == OPS[0] and got.size:  # rows sum to one
        np.testing.assert_allclose(np.sum(got.astype(np.float64), axis=dim), 1.0, rtol=1e-5)


@pytest.mark.parametrize("dim", [-1, 0])
@pytest.mark.parametrize("name", OPS)
def test_large_values_and_specials(name, dim):
    x = _rand((6, 9), np.float32, scale=1e4)  # exp would overflow without the max shift
    x[1, :] = -np.inf                          # all -inf: NaN, as the reference
    x[2, 3] = np.nan                           # NaN poisons its row
    x[3, 4] = -np.inf                          # one -inf: 0 (log: -inf)
    x[4, :] = np.float32(-1e30)                # a constant row: uniform
    x[5, 0] = np.inf                           # +inf: inf - inf = NaN, as the reference
    _check(name, x, dim)


def test_exp_polynomial_accuracy():
    # log_softmax's float32 exp runs through a float64 polynomial: compare with float64
    # math over the whole range it sees (x - max <= 0), incl. subnormal results and -inf.
    from numba import njit

    from pyruntime.kernels.softmax.typed import _exp_f32

    @njit
    def run(x, out):
        for i in range(x.size):
            out[i] = _exp_f32(x[i])

    x = np.concatenate([np.linspace(-110, 0, 100_001), [-np.inf, -87.5, -103.9, 0.0]])
    x = x.astype(np.float32)
    out = np.empty_like(x)
    run(x, out)
    want = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=3e-7, atol=1e-45)


@pytest.mark.parametrize("shape,dim", [((1, 100_005), 1), ((50, 40), 0), ((3, 7, 9), 1)])
def test_softmax_is_executorchs_loop(shape, dim):
    # _softmax.out reproduces ExecuTorch's portable loop (sequential max and sum, libm's
    # expf): both tiers agree bit for bit, also where exp underflows to subnormals.
    x = _rand(shape, np.float32, scale=30.0)
    ref = static_out(x.shape, np.float32)
    call(OPS[0], x, dim, False, ref)
    out = static_out(x.shape, np.float32)
    assert call_fast(OPS[0], x, dim, False, out) == 0
    np.testing.assert_array_equal(out.numpy().view(np.uint32), ref.numpy().view(np.uint32))


def _special_rows(cols):
    """Rows whose max a vectorized scan could find differently from ExecuTorch's
    sequential one: NaNs (first, inside, last; two payloads), signed zeros as the max,
    infinities, ordinary rows between."""
    x = _rand((12, cols), np.float32, scale=30.0)
    x[0, 0] = np.nan
    x[1, cols // 2] = np.nan
    x[2, -1] = np.nan
    x[3, 1] = np.uint32(0x7FC01234).view(np.float32)  # a NaN with a payload
    x[3, 5] = -np.nan
    x[4] = -np.abs(x[4])
    x[4, ::3] = 0.0
    x[4, 1::3] = -0.0
    x[5] = -np.abs(x[5])
    x[5, 7] = -0.0
    x[6, 2] = np.inf
    x[7] = -np.inf
    x[8, 3] = -np.inf
    return x


@pytest.mark.parametrize("cols", [9, 64, 1500])
def test_softmax_specials_bit_for_bit(cols):
    # the exact softmax takes a row's max with a vectorized scan, ExecuTorch's sequential
    # one where the row has a NaN: the reference tier's bits either way, NaN payloads too
    x = _special_rows(cols)
    ref = static_out(x.shape, np.float32)
    call(OPS[0], x, 1, False, ref)
    out = static_out(x.shape, np.float32)
    with np.errstate(invalid="ignore"):
        assert call_fast(OPS[0], x, 1, False, out) == 0
    np.testing.assert_array_equal(out.numpy().view(np.uint32), ref.numpy().view(np.uint32))


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("threads", [2, 3, 5])
def test_rows_split_across_threads(name, threads):
    # from 16K elements a last-dim softmax runs its rows in parts on the loop's threads:
    # the one-part bits every time (each row is done whole by one part), dims other than
    # the last are never split (their column scratch is shared)
    for shape, dim, split in [((3, 197, 197), -1, True), ((1, 3, 40, 140), 3, True),
                              ((5, 4100), 1, True), ((2, 100), 1, False),
                              ((197, 197), 0, False)]:
        x = _rand(shape, np.float32, scale=20.0)
        x.reshape(-1)[::997] = np.nan
        want = static_out(x.shape, np.float32)
        assert call_fast(name, x, dim, False, want) == 0
        for _ in range(20):
            out = static_out(x.shape, np.float32)
            status, parts = call_split(name, x, dim, False, out, threads=threads)
            assert status == 0 and (parts > 1) == split, (shape, dim, parts)
            np.testing.assert_array_equal(out.numpy().view(np.uint32),
                                          want.numpy().view(np.uint32))


@pytest.mark.parametrize("name", OPS)
def test_input_resized_at_run_time(name):
    # Bound at (4, 3, 2): the per-column scratch is sized for inner=2 at load; a later
    # shape with a larger inner extent must still be right (per-call scratch then).
    x = ETensor.from_array(_rand((4, 3, 2), np.float32), dynamism=Dynamism.DYNAMIC_BOUND)
    out = bound_out((4, 3, 2), np.float32)
    run = bind_fast(name, x, 1, False, out)
    for shape in [(4, 3, 2), (1, 3, 8), (2, 2, 3), (1, 1, 24), (3, 2, 1)]:
        a = _rand(shape, np.float32)
        x.write(a)
        assert run() == 0
        ref = static_out(shape, np.float32)
        call(name, a, 1, False, ref)
        assert_close(out.numpy(), ref.numpy(), rtol=2e-6, atol=2e-6)


def test_declines_and_failures():
    x = _rand((2, 3), np.float32)
    assert call_fast(OPS[0], x, 1, False, static_out((2, 3), np.float64), typed=True) is None
    assert call_fast(OPS[0], x.astype(np.float16), 1, False, static_out((2, 3), np.float16),
                     typed=True) is None
    # ... and the any-dtype fallback takes those
    assert call_fast(OPS[0], x.astype(np.float16), 1, False, static_out((2, 3), np.float16)) == 0
    assert call_fast(OPS[0], x, 2, False, static_out((2, 3), np.float32)) is None  # bad dim
    t = ETensor.empty(from_numpy_dtype(np.float32), (2, 3), dim_order=(1, 0))
    assert call_fast(OPS[1], t, 1, False, static_out((2, 3), np.float32), typed=True) is None
    assert call_fast(OPS[0], x, 1, False, static_out((3, 2), np.float32)) not in (None, 0)
