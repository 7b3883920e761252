"""Compiled data-movement kernels (kernels/shape/typed.py) against the reference tier."""
from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

from pyruntime.cython_ext import ETensor, from_numpy_dtype
from pyruntime.cython_ext.desc import DescTable
from pyruntime.cython_ext.tensor import Dynamism
from pyruntime.kernels.fast import get_binder
from pyruntime.kernels.fast.context import BindContext
from tests.kernels.helpers import (assert_close, bound_out, call, call_fast, check_compiled,
                                   static_out)

RNG = np.random.default_rng(0)
BF16 = np.dtype(ml_dtypes.bfloat16)
# one dtype per element size and then some: the kernels only move bytes
DTYPES = [np.float32, np.float64, np.int64, np.int16, np.uint8, np.bool_, BF16]
FEW = [np.float32, np.int64, np.bool_]


def rand(shape, dtype=np.float32):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.asarray(RNG.random(shape) > 0.5)
    if dt.kind in "iu":
        return np.asarray(RNG.integers(0, 100, shape)).astype(dt)
    return np.asarray(RNG.standard_normal(shape)).astype(np.float32).astype(dt)


def with_dim_order(x: np.ndarray, dim_order, dynamism=Dynamism.STATIC) -> ETensor:
    """An ETensor holding the logical values ``x`` laid out in ``dim_order``."""
    t = ETensor(from_numpy_dtype(x.dtype), x.shape, dim_order, dynamism)
    t.storage = np.ascontiguousarray(x.transpose(dim_order)).reshape(-1).view(np.uint8).copy()
    assert np.array_equal(t.numpy(), x)
    return t


check = check_compiled


class Bound:
    """A compiled kernel bound once (as at method load) and run many times, with the
    inputs' sizes changed in between (dynamic shapes)."""

    def __init__(self, name, *args):
        flat = []
        for v in args:
            flat += v if isinstance(v, list) else [v]
        self.tensors = [v for v in flat if isinstance(v, ETensor)]
        self.table = DescTable(self.tensors, [t.storage for t in self.tensors])
        ctx = BindContext(self.table, {id(t): i for i, t in enumerate(self.tensors)}, [])
        self.ctx = ctx
        self.fn, self.block = get_binder(name)(ctx, *args)

    def run(self):
        for i, t in enumerate(self.tensors):
            self.table.push(i, t)
        status = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(self.fn)(self.block)
        for i, t in enumerate(self.tensors):
            self.table.pull(i, t)
        return status


def dyn(x: np.ndarray, cap) -> ETensor:
    """A dynamic-bound input with capacity ``cap`` holding ``x``."""
    t = ETensor.empty(from_numpy_dtype(x.dtype), cap, dynamism=Dynamism.DYNAMIC_BOUND)
    t.write(x)
    return t


# ---- views ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dims", [((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [0, 2, 1]),
                                        ((1, 5, 1, 3, 6), [3, 1, 2, 0, 4]), ((70, 45), [1, 0]),
                                        ((3, 40, 37), [0, 2, -2]), ((), []), ((0, 3), [1, 0]),
                                        # 4-byte elements go through 8 x 8 register blocks:
                                        # whole blocks, edges, several tiles, a middle dim
                                        ((1, 4, 32, 16), [0, 1, 3, 2]), ((2, 67, 45), [0, 2, 1]),
                                        ((40, 3, 24), [2, 1, 0]), ((8, 9), [1, 0])])
def test_permute(shape, dims, dtype):
    x = rand(shape, dtype)
    want = check("aten::permute_copy.out", [x, dims], np.transpose(x, dims).shape, dtype)
    assert np.array_equal(want, np.transpose(x, dims))


@pytest.mark.parametrize("dtype", FEW)
def test_transpose_and_t(dtype):
    x = rand((4, 5, 6), dtype)
    check("aten::transpose_copy.int_out", [x, 0, -1], (6, 5, 4), dtype)
    check("aten::transpose_copy.int_out", [x, 1, 1], (4, 5, 6), dtype)
    for shape in [(), (7,), (3, 8), (33, 65)]:
        y = rand(shape, dtype)
        check("aten::t_copy.out", [y], y.T.shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_expand(dtype):
    check("aten::expand_copy.out", [rand((1, 3, 1), dtype), [2, 3, 4], False], (2, 3, 4), dtype)
    check("aten::expand_copy.out", [rand((3, 1), dtype), [2, 2, -1, 5], False], (2, 2, 3, 5), dtype)
    check("aten::expand_copy.out", [rand((1, 4), dtype), [1, 4], False], (1, 4), dtype)
    check("aten::expand_copy.out", [rand((), dtype), [3, 2], False], (3, 2), dtype)


@pytest.mark.parametrize("dtype", FEW)
def test_squeeze_unsqueeze(dtype):
    x = rand((3, 1, 4, 1), dtype)
    check("aten::squeeze_copy.dims_out", [x, [1, -1]], (3, 4), dtype)
    check("aten::squeeze_copy.dims_out", [x, [0, 1]], (3, 4, 1), dtype)  # dim 0 is not 1: kept
    check("aten::squeeze_copy.dim_out", [x, 3], (3, 1, 4), dtype)
    check("aten::squeeze_copy.dims_out", [rand((), dtype), [0]], (), dtype)
    for d, shape in [(0, (1, 3, 1, 4, 1)), (2, (3, 1, 1, 4, 1)), (-1, (3, 1, 4, 1, 1))]:
        check("aten::unsqueeze_copy.out", [x, d], shape, dtype)
    check("aten::unsqueeze_copy.out", [rand((), dtype), 0], (1,), dtype)


@pytest.mark.parametrize("dtype", FEW)
@pytest.mark.parametrize("dim,start,end,step", [(0, 0, 4, 1), (1, 1, 5, 2), (2, -3, None, 1),
                                                (1, None, -1, 3), (0, -100, 100, 1), (2, 5, 2, 1),
                                                (2, 7, 2**63 - 1, 1), (-1, 0, 1, 1)])
def test_slice(dim, start, end, step, dtype):
    x = rand((5, 6, 7), dtype)
    shape = list(x.shape)
    shape[dim] = len(range(*slice(start, end, step).indices(shape[dim])))
    check("aten::slice_copy.Tensor_out", [x, dim, start, end, step], tuple(shape), dtype)


@pytest.mark.parametrize("dtype", FEW)
def test_select(dtype):
    x = rand((4, 5, 6), dtype)
    for dim, index in [(0, 0), (0, -1), (1, 3), (2, -6), (-1, 5)]:
        shape = np.take(x, index, axis=dim).shape
        check("aten::select_copy.int_out", [x, dim, index], shape, dtype)
    assert call_fast("aten::select_copy.int_out", x, 1, 5, static_out((4, 6), dtype)) != 0
    assert call_fast("aten::select_copy.int_out", x, 1, -6, static_out((4, 6), dtype)) != 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_view_copy(dtype):
    x = rand((2, 3, 4), dtype)
    check("aten::view_copy.out", [x, [6, -1]], (6, 4), dtype)
    check("aten::view_copy.out", [x, [24]], (24,), dtype)
    check("aten::view_copy.out", [x, [2, 1, 12]], (2, 1, 12), dtype)
    assert call_fast("aten::view_copy.out", x, [5, -1], bound_out((30, 30), dtype)) != 0


# ---- copies ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_clone(dtype):
    x = rand((3, 4, 5), dtype)
    check("aten::clone.out", [x, None], x.shape, dtype)
    check("dim_order_ops::_clone_dim_order.out", [x, False, None], x.shape, dtype)
    check("dim_order_ops::_to_dim_order_copy.out", [x, False, [0, 1, 2]], x.shape, dtype)


CONV = [np.float32, np.float64, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("src", CONV)
@pytest.mark.parametrize("dst", CONV)
def test_to_dim_order_copy_converts(src, dst):
    x = rand((4, 7), src)
    if np.dtype(src).kind == "f":
        x = (x * 10).astype(src)
        x[0, :3] = 0
    ref = static_out(x.shape, dst)
    call("dim_order_ops::_to_dim_order_copy.out", x, False, None, ref)
    for out in (static_out(x.shape, dst), bound_out((5, 8), dst)):
        assert call_fast("dim_order_ops::_to_dim_order_copy.out", x, False, None, out) == 0
        assert_close(out.numpy(), ref.numpy(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FEW)
def test_dim_order_changes(dtype):
    """Contiguous <-> channels-last on either side of clone, permute, view and cat."""
    x = rand((2, 5, 33, 35), dtype)
    cl = (0, 2, 3, 1)
    want = x
    for name, args in [("dim_order_ops::_clone_dim_order.out", [x, False, list(cl)]),
                       ("aten::clone.out", [x, None])]:
        out = ETensor.empty(from_numpy_dtype(dtype), x.shape, cl)
        assert call_fast(name, *args, out) == 0
        assert np.array_equal(out.numpy(), want)
    src = with_dim_order(x, cl)
    for name, args, res in [
            ("dim_order_ops::_clone_dim_order.out", [src, False, None], x),
            ("aten::permute_copy.out", [src, [0, 3, 1, 2]], x.transpose(0, 3, 1, 2)),
            ("aten::view_copy.out", [src, [10, -1]], x.reshape(10, -1)),
            ("aten::slice_copy.Tensor_out", [src, 1, 1, 4, 2], x[:, 1:4:2]),
            ("aten::select_copy.int_out", [src, 3, 7], x[:, :, :, 7]),
            ("aten::cat.out", [[src, src], 1], np.concatenate([x, x], 1))]:
        out = static_out(res.shape, dtype)
        assert call_fast(name, *args, out) == 0, name
        assert np.array_equal(out.numpy(), res), name
    # both sides non-contiguous with a changed shape: left to the reference kernel
    assert call_fast("aten::view_copy.out", src, [10, 33, 35],
                     ETensor.empty(from_numpy_dtype(dtype), (10, 33, 35), (1, 2, 0))) is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_copy_(dtype):
    for dst_shape, src_shape in [((3, 4), (3, 4)), ((2, 3, 4), (3, 1)), ((2, 3), ())]:
        src = rand(src_shape, dtype)
        want = ETensor.from_array(rand(dst_shape, dtype))
        got = ETensor.from_array(want.numpy().copy())
        call("aten::copy_", want, src, False)
        assert call_fast("aten::copy_", got, src, False) == 0
        assert_close(got.numpy(), want.numpy(), rtol=0, atol=0)
    bad = ETensor.from_array(rand((3, 4), dtype))
    assert call_fast("aten::copy_", bad, rand((2, 4), dtype), False) != 0


# ---- joins and splits -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_cat(dtype):
    a, b, c = rand((2, 3, 4), dtype), rand((2, 1, 4), dtype), rand((2, 5, 4), dtype)
    check("aten::cat.out", [[a, b, c], 1], (2, 9, 4), dtype)
    check("aten::cat.out", [[a, a], -1], (2, 3, 8), dtype)
    check("aten::cat.out", [[a, a, a], 0], (6, 3, 4), dtype)
    check("aten::cat.out", [[np.zeros((0,), dtype), a], 0], (2, 3, 4), dtype)  # legacy empty
    check("aten::cat.out", [[rand((2, 0, 4), dtype), a], 1], (2, 3, 4), dtype)
    assert call_fast("aten::cat.out", [a, rand((3, 3, 4), dtype)], 1,
                     bound_out((9, 9, 9), dtype)) != 0


@pytest.mark.parametrize("dtype", FEW)
def test_split_with_sizes(dtype):
    x = rand((4, 9, 3), dtype)
    for sizes, dim in [([2, 3, 4], 1), ([4], 0), ([1, 0, 2], -1)]:
        parts = np.split(x, np.cumsum(sizes)[:-1], axis=dim)
        for make in (lambda s: static_out(s, dtype), lambda s: bound_out(tuple(n + 1 for n in s),
                                                                         dtype)):
            outs = [make(p.shape) for p in parts]
            assert call_fast("aten::split_with_sizes_copy.out", x, sizes, dim, outs) == 0
            for o, p in zip(outs, parts):
                assert o.shape == p.shape
                assert np.array_equal(o.numpy(), p)
    outs = [static_out((4, 2, 3), dtype), static_out((4, 2, 3), dtype)]
    assert call_fast("aten::split_with_sizes_copy.out", x, [2, 2], 1, outs) != 0


# ---- dynamic shapes: sizes read from the descriptors at run time ----------------------

def test_dynamic_inputs_change_between_runs():
    x = dyn(rand((2, 3, 4)), (4, 3, 4))
    out = bound_out((12, 4), np.float32)
    view = Bound("aten::view_copy.out", x, [-1, 4], out)
    perm_out = bound_out((4, 4, 3), np.float32)
    perm = Bound("aten::permute_copy.out", x, [0, 2, 1], perm_out)
    sl_out = bound_out((4, 3, 4), np.float32)
    sl = Bound("aten::slice_copy.Tensor_out", x, 0, 1, None, 1, sl_out)
    for n in (2, 4, 1, 3):
        v = rand((n, 3, 4))
        x.write(v)
        assert view.run() == 0 and perm.run() == 0 and sl.run() == 0
        assert np.array_equal(out.numpy(), v.reshape(-1, 4))
        assert np.array_equal(perm_out.numpy(), v.transpose(0, 2, 1))
        assert np.array_equal(sl_out.numpy(), v[1:])


def test_declines():
    x = rand((2, 3), np.float32)
    # the byte-moving kernels decline dtype changes; the any-dtype fallback
    # (kernels/shape/generic.py) takes them
    for args, shape, dt in [(("aten::permute_copy.out", x, [1, 0]), (3, 2), np.float64),
                            (("aten::clone.out", x, None), (2, 3), np.float16),
                            (("aten::cat.out", [x, x.astype(np.float64)], 0), (4, 3),
                             np.float64)]:
        assert call_fast(*args, static_out(shape, dt), typed=True) is None
        want = static_out(shape, dt)
        call(*args, want)
        got = static_out(shape, dt)
        assert call_fast(*args, got) == 0
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert call_fast("aten::clone.out", x, 2, static_out((2, 3), np.float32)) is None
    assert call_fast("aten::slice_copy.Tensor_out", x, 0, 0, 1, 0,
                     static_out((1, 3), np.float32)) is None
    assert call_fast("aten::permute_copy.out", x, [0, 0], static_out((2, 2), np.float32)) is None
    c = rand((2, 3), np.complex128)
    assert call_fast("aten::clone.out", c, None, static_out((2, 3), np.complex128)) is None
