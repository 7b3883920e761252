"""Compiled 2-D pooling against the reference tier (itself tested against torch)."""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.cython_ext import ETensor, from_numpy_dtype
from tests.kernels.helpers import assert_close, bound_out, call, call_fast, static_out

RNG = np.random.default_rng(0)
FLOATS = [np.float32, np.float64]
MAXP = "aten::max_pool2d_with_indices.out"
AVGP = "aten::avg_pool2d.out"
ADAP = "aten::_adaptive_avg_pool2d.out"


def _rand(shape, dtype):
    return np.asarray(RNG.standard_normal(shape)).astype(dtype)


def _ref_outs(name, args, shape, dtypes):
    """Reference outs: dynamic-bound at the input's shape (+ padding room), resized by it."""
    refs = [bound_out(tuple(s + 4 for s in shape), d) for d in dtypes]
    call(name, *args, *refs)
    return refs


def _check(name, args, shape, dtypes, exact=False, tol=1e-6):
    refs = _ref_outs(name, args, shape, dtypes)
    for outs in ([static_out(r.shape, d) for r, d in zip(refs, dtypes)],
                 [bound_out(tuple(s + 4 for s in shape), d) for d in dtypes]):
        assert call_fast(name, *args, *outs) == 0
        for o, r in zip(outs, refs):
            assert o.shape == r.shape
            if exact or o.dtype.kind == "i":
                np.testing.assert_array_equal(o.numpy(), r.numpy())
            else:
                assert_close(o.numpy(), r.numpy(), rtol=tol, atol=tol)
    return [r.numpy() for r in refs]


# (shape, kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [
    ((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),
    ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], [1, 1], False),    # ResNet stem pool
    ((1, 2, 9, 7), [3, 2], [2, 3], [1, 1], [1, 1], True),     # ceil_mode
    ((2, 10, 11), [3, 3], [], [1, 0], [2, 2], False),         # unbatched, dilated, default stride
    ((1, 3, 10, 10), [3, 3], [2, 2], [1, 1], [2, 2], True),   # dilated + ceil_mode
    ((1, 1, 6, 6), [2], [1], [0], [1], True),                  # one-element lists
    ((0, 2, 5, 5), [2, 2], [2, 2], [0, 0], [1, 1], False),     # empty batch
    ((1, 4, 1, 9), [1, 3], [1, 2], [0, 1], [1, 1], False),
]


@pytest.mark.parametrize("case", MAX_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_max_pool2d_with_indices_identical(case, dtype):
    shape, k, s, p, d, ceil = case
    x = _rand(shape, dtype)
    _check(MAXP, [x, k, s, p, d, ceil], shape, [dtype, np.int64], exact=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_max_pool2d_ties_nan_and_inf(dtype):
    # ties: the first maximum wins; NaN wins and propagates (the last NaN's index); windows
    # of -inf keep tap 0's index, even where tap 0 is padding (the reference's rule)
    x = np.round(_rand((2, 3, 9, 9), dtype))
    x[0, 0, 2, 2] = np.nan
    x[0, 1, 4:6, 4:6] = np.nan
    x[1, 2, :4, :4] = -np.inf
    x[1, 1] = 1.0
    for s, p in (([2, 2], [1, 1]), ([1, 1], [0, 0])):
        vals, idx = _check(MAXP, [x, [3, 3], s, p, [1, 1], False], x.shape, [dtype, np.int64],
                           exact=True)
        assert np.isnan(vals).any() and (idx < 0).any() == (p[0] > 0)


# (shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [
    ((2, 3, 8, 8), [2, 2], [2, 2], [0, 0], False, True, None),
    ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], False, True, None),
    ((1, 2, 9, 7), [3, 3], [2, 2], [1, 1], False, False, None),
    ((1, 2, 10, 7), [3, 2], [2, 2], [1, 1], True, True, None),
    ((1, 2, 10, 7), [3, 2], [2, 2], [1, 1], True, False, None),
    ((2, 6, 6), [3, 3], [], [1, 1], True, True, 5),            # unbatched, divisor_override
    ((1, 1, 5, 5), [2], [1], [1], False, False, None),
    ((0, 2, 4, 4), [2, 2], [2, 2], [0, 0], False, True, None),
]


@pytest.mark.parametrize("case", AVG_CASES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_avg_pool2d(case, dtype):
    shape, k, s, p, ceil, cip, div = case
    x = _rand(shape, dtype)
    _check(AVGP, [x, k, s, p, ceil, cip, div], shape, [dtype],
           tol=1e-6 if dtype == np.float32 else 1e-14)


@pytest.mark.parametrize("shape,osize", [
    ((2, 3, 7, 7), [1, 1]), ((1, 4, 8, 6), [4, 3]), ((1, 2, 7, 9), [3, 4]),
    ((3, 10, 5), [4, 7]), ((1, 2, 3, 3), [6, 5]), ((1, 64, 7, 7), [1, 1]), ((1, 2, 4, 4), [2]),
    ((1, 2, 4, 4), [0, 2]),
])
@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_avg_pool2d(shape, osize, dtype):
    x = _rand(shape, dtype)
    _check(ADAP, [x, osize], shape, [dtype], tol=1e-6 if dtype == np.float32 else 1e-14)


def test_declines_and_failures():
    x = _rand((1, 2, 6, 6), np.float32)
    mo = lambda s: (static_out(s, np.float32), static_out(s, np.int64))  # noqa: E731
    # padding over half the kernel: the reference kernel (which raises)
    assert call_fast(MAXP, x, [2, 2], [2, 2], [2, 2], [1, 1], False, *mo((1, 2, 5, 5))) is None
    # integer input, channels-last: the any-dtype fallback (kernels/pool/generic.py)
    xi = x.astype(np.int64)
    got = (static_out((1, 2, 3, 3), np.int64), static_out((1, 2, 3, 3), np.int64))
    want = (static_out((1, 2, 3, 3), np.int64), static_out((1, 2, 3, 3), np.int64))
    assert call_fast(MAXP, xi, [2, 2], [2, 2], [0, 0], [1, 1], False, *got) == 0
    call(MAXP, xi, [2, 2], [2, 2], [0, 0], [1, 1], False, *want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    t = ETensor.from_array(x)
    cl = ETensor.empty(from_numpy_dtype(np.float32), (1, 2, 6, 6), dim_order=(0, 2, 3, 1))
    cl.write(x)
    out, ref = static_out((1, 2, 3, 3), np.float32), static_out((1, 2, 3, 3), np.float32)
    assert call_fast(AVGP, cl, [2, 2], [2, 2], [0, 0], False, True, None, out) == 0
    call(AVGP, t, [2, 2], [2, 2], [0, 0], False, True, None, ref)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
    assert call_fast(AVGP, x, [2, 2], [2, 2], [0, 0], False, True, 0,
                     static_out((1, 2, 3, 3), np.float32)) is None
    # a window larger than the input / a static out of the wrong shape: error status
    assert call_fast(MAXP, _rand((1, 1, 2, 2), np.float32), [3, 3], [1, 1], [0, 0], [1, 1],
                     False, *mo((1, 1, 1, 1))) not in (None, 0)
    assert call_fast(ADAP, x, [2, 2], static_out((1, 2, 3, 3), np.float32)) not in (None, 0)
