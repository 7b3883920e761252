"""Compiled gathers (kernels/index/typed.py) against the reference tier."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pyruntime.cython_ext import ETensor, from_numpy_dtype
from tests.kernels.helpers import call_fast, check_compiled, static_out

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64, np.int64, np.int16, np.bool_, np.dtype(ml_dtypes.bfloat16)]


def rand(shape, dtype=np.float32):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.asarray(RNG.random(shape) > 0.5)
    if dt.kind in "iu":
        return np.asarray(RNG.integers(0, 100, shape)).astype(dt)
    return np.asarray(RNG.standard_normal(shape)).astype(np.float32).astype(dt)


def idx(values, dtype=np.int64):
    """An index tensor (rank 0 kept)."""
    a = np.asarray(values, dtype)
    t = ETensor.empty(from_numpy_dtype(a.dtype), a.shape)
    t.write(a)
    return t


check = check_compiled


@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("ishape", [(), (5,), (2, 3), (1, 1), (0,)])
def test_embedding(ishape, idx_dtype):
    w = rand((11, 6))
    i = RNG.integers(0, 11, ishape)
    got = check("aten::embedding.out", [w, idx(i, idx_dtype), -1, False, False],
                tuple(ishape) + (6,), np.float32)
    assert np.array_equal(got, w[i])


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_dtypes_and_bounds(dtype):
    w = rand((7, 5), dtype)
    check("aten::embedding.out", [w, idx([[0, 6], [3, 3]]), -1, False, False], (2, 2, 5), dtype)
    for bad in ([7], [-1], [0, 2, 100]):
        assert call_fast("aten::embedding.out", w, idx(bad), -1, False, False,
                         static_out((len(bad), 5), dtype)) != 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim, dtype):
    x = rand((4, 5, 6), dtype)
    n = x.shape[dim]
    for values in ([0, n - 1, 1, 1], [2], []):
        shape = list(x.shape)
        shape[dim] = len(values)
        check("aten::index_select.out", [x, dim, idx(values, np.int32)], tuple(shape), dtype)
    check("aten::index_select.out", [x, dim, idx(n - 1)], np.take(x, [n - 1], dim).shape, dtype)
    for bad in ([n], [-1]):
        shape = list(x.shape)
        shape[dim] = 1
        assert call_fast("aten::index_select.out", x, dim, idx(bad), static_out(shape, dtype)) != 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_tensor_dim0(dtype):
    x = rand((8, 3, 2), dtype)
    for values in ([1], [0, -1, 7, -8], [[2, 3], [-2, 0]], []):
        i = np.asarray(values, np.int64)
        got = check("aten::index.Tensor_out", [x, [idx(i)]], i.shape + (3, 2), dtype)
        assert np.array_equal(got, x[i])
    assert call_fast("aten::index.Tensor_out", x, [idx([8])], static_out((1, 3, 2), dtype)) != 0
    assert call_fast("aten::index.Tensor_out", x, [idx([-9])], static_out((1, 3, 2), dtype)) != 0


def test_non_contiguous_layouts():
    x = rand((3, 4, 5, 6))
    cl = (0, 2, 3, 1)
    src = ETensor(from_numpy_dtype(x.dtype), x.shape, cl)
    src.storage = np.ascontiguousarray(x.transpose(cl)).reshape(-1).view(np.uint8).copy()
    i = idx([3, 0, 3])
    for out_order in (None, cl):
        out = ETensor.empty(from_numpy_dtype(x.dtype), (3, 3, 5, 6), out_order)
        assert call_fast("aten::index_select.out", src, 1, i, out) == 0
        assert np.array_equal(out.numpy(), x[:, [3, 0, 3]])
        out = ETensor.empty(from_numpy_dtype(x.dtype), (3, 4, 5, 6), out_order)
        assert call_fast("aten::index.Tensor_out", src, [idx([2, 1, 0])], out) == 0
        assert np.array_equal(out.numpy(), x[[2, 1, 0]])


def test_other_index_patterns_run_on_the_generic_kernel():
    x = rand((4, 5))
    # None first, several indices, masks, a 2-d index: kernels/index/generic.py
    check_compiled("aten::index.Tensor_out", [x, [None, idx([1])]], (4, 1), np.float32)
    check_compiled("aten::index.Tensor_out", [x, [idx([1]), idx([1])]], (1,), np.float32)
    check_compiled("aten::index.Tensor_out", [x, [idx([True, False, True, False], np.bool_)]],
                   (2, 5), np.float32)
    check_compiled("aten::index_select.out", [x, 0, idx([[1]])], (1, 5), np.float32)


def test_declines():
    x = rand((4, 5))
    assert call_fast("aten::embedding.out", x, idx([1.0], np.float32), -1, False, False,
                     static_out((1, 5), np.float32)) is None
