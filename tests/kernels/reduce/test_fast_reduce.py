"""Compiled sum/mean against the reference tier: BIT-IDENTICAL results required.

The reference sums sequentially in the output dtype in index order (like
ExecuTorch's portable kernels; quantized parity depends on it), so every
comparison here is on the raw bytes, with inputs long enough that pairwise
(numpy) summation would round differently.
"""
from __future__ import annotations


import numpy as np
import pytest

from pyruntime.cython_ext import Dynamism, ETensor, from_numpy_dtype
from tests.kernels.helpers import bind_fast, bound_out, call, call_fast, static_out

RNG = np.random.default_rng(0)
OPS = ["aten::sum.IntList_out", "aten::mean.out"]
FLOATS = [np.float32, np.float64]


def _rand(shape, dtype):
    return np.asarray(RNG.standard_normal(shape) * 3 + 0.5).astype(dtype)


def _out_shape(shape, dim, keepdim):
    nd = len(shape)
    if nd == 0:
        return ()
    axes = set(range(nd)) if not dim else {d % nd for d in dim}
    return tuple(1 if i in axes else s for i, s in enumerate(shape) if keepdim or i not in axes)


def _bits_equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == want.tobytes(), f"not bit-identical:\n{got}\n{want}"


def _check(name, x, dim, keepdim, dtype=None):
    dt = x.dtype
    shape = _out_shape(x.shape, dim, keepdim)
    ref = static_out(shape, dt)
    call(name, x, dim, keepdim, dtype, ref)
    for out in (static_out(shape, dt), bound_out(tuple(s + 2 for s in shape), dt)):
        assert call_fast(name, x, dim, keepdim, dtype, out) == 0
        _bits_equal(out.numpy(), ref.numpy())
    return ref.numpy()


CASES = [((2, 3, 4), None), ((2, 3, 4), []), ((2, 3, 4), [0]), ((2, 3, 4), [1]),
         ((2, 3, 4), [-1]), ((2, 3, 4), [0, -1]), ((2, 3, 4), [2, 0, 1]), ((5,), [0]),
         ((), []), ((), [0]), ((3, 1, 2), [1]), ((0, 3), [0]), ((0, 3), [1]),
         ((2, 5, 3, 4), [1, 3]), ((2, 5, 3, 4), [0, 2]), ((2, 5, 3, 4), [2, 3]),
         ((1, 64, 1, 9), [-1, -2])]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", OPS)
def test_bit_identical_to_reference(name, dtype, shape, dim, keepdim):
    _check(name, _rand(shape, dtype), dim, keepdim)


@pytest.mark.parametrize("dim", [[-1], [0], [1], [0, 2], [1, 2], None])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", OPS)
def test_long_extents_sequential_not_pairwise(name, dtype, dim):
    # reductions over 3000+ elements, where numpy's pairwise summation differs
    x = (RNG.standard_normal((5, 7, 3000)) * 1e3).astype(dtype)
    ref = _check(name, x, dim, False)
    axes = None if dim is None else tuple(d % 3 for d in dim)
    if dtype == np.float32 and (axes is None or 2 in axes):
        pairwise = np.sum(x, axis=axes, dtype=dtype)
        if name.startswith("aten::mean"):
            pairwise = pairwise / dtype(x.size // max(np.asarray(pairwise).size, 1))
        assert np.asarray(pairwise).tobytes() != ref.tobytes()  # the test can tell them apart


@pytest.mark.parametrize("name", OPS)
def test_negative_zero_and_specials(name):
    z = np.full((3, 4), -0.0, np.float32)
    got = _check(name, z, [1], False)
    assert np.all(np.signbit(got))  # -0.0 + -0.0 + ... stays -0.0
    x = _rand((4, 6), np.float32)
    x[0, 2], x[1, 0], x[2, 5], x[3, 1] = np.nan, np.inf, -np.inf, 1e38
    x[3, 2] = 1e38  # overflows to inf in float32 sequentially
    _check(name, x, [1], True)
    _check(name, x, [0], False)


def test_empty_reduction_sum_zero_mean_nan():
    x = np.zeros((0, 3), np.float32)
    s = _check("aten::sum.IntList_out", x, [0], False)
    m = _check("aten::mean.out", x, [0], False)
    assert np.all(s == 0) and not np.any(np.signbit(s)) and np.all(np.isnan(m))


def test_dtype_argument():
    x = _rand((3, 4), np.float64)
    _check("aten::sum.IntList_out", x, [1], False, dtype=int(from_numpy_dtype(np.float64)))
    _check("aten::mean.out", x, [0], True, dtype=int(from_numpy_dtype(np.float64)))


@pytest.mark.parametrize("name", OPS)
def test_input_resized_at_run_time(name):
    # A dynamic input changes shape between executes: sizes are read at run time.
    x = ETensor.from_array(_rand((4, 6, 5), np.float32), dynamism=Dynamism.DYNAMIC_BOUND)
    out = bound_out((4, 1, 5), np.float32)
    run = bind_fast(name, x, [1], True, None, out)
    for shape in [(4, 6, 5), (2, 3, 5), (4, 1, 1), (1, 6, 2)]:
        a = _rand(shape, np.float32)
        x.write(a)
        assert run() == 0
        ref = static_out(_out_shape(shape, [1], True), np.float32)
        call(name, a, [1], True, None, ref)
        _bits_equal(out.numpy(), ref.numpy())


def test_declines_and_failures():
    x = _rand((2, 3), np.float32)
    o = static_out((2,), np.float32)
    # the typed kernel declines other dtypes / mixed dtypes / a dtype-argument mismatch
    assert call_fast("aten::sum.IntList_out", x.astype(np.int32), [1], False, None,
                     static_out((2,), np.int32), typed=True) is None
    assert call_fast("aten::sum.IntList_out", x, [1], False, None,
                     static_out((2,), np.float64), typed=True) is None
    assert call_fast("aten::mean.out", x, [1], False, int(from_numpy_dtype(np.float64)),
                     o, typed=True) is None
    assert call_fast("aten::sum.IntList_out", x, [1, 1], False, None, o, typed=True) is None
    assert call_fast("aten::sum.IntList_out", x, [2], False, None, o) is None  # bad dim
    # the any-dtype fallback takes the other dtypes
    assert call_fast("aten::sum.IntList_out", x.astype(np.int32), [1], False, None,
                     static_out((2,), np.int32)) == 0
    # a non-contiguous dim order declines
    t = ETensor.empty(from_numpy_dtype(np.float32), (2, 3), dim_order=(1, 0))
    assert call_fast("aten::sum.IntList_out", t, [1], False, None, o, typed=True) is None
    # a static out of the wrong shape fails (the loop then reruns the reference for the error)
    assert call_fast("aten::sum.IntList_out", x, [1], False, None,
                     static_out((3,), np.float32)) not in (None, 0)
