"""Compiled predicates / any / where / fills / index_put against the reference tier."""
from __future__ import annotations

import numpy as np
import pytest

from pyruntime.cython_ext import ETensor
from tests.kernels.helpers import assert_close, bound_out, call, call_fast, static_out

RNG = np.random.default_rng(0)


def _rand(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        a = RNG.integers(-3, 4, shape).astype(dtype)  # small ints: equality cases happen
        if a.size:
            a.reshape(-1)[0] = -np.inf
            a.reshape(-1)[-1] = np.nan
        return a
    return RNG.integers(-3, 4 if dtype.kind == "i" else 3, shape).astype(dtype)


def _check(name, args, out_shape, dtype, bound=True):
    ref = static_out(out_shape, dtype)
    call(name, *args, ref)
    outs = [static_out(out_shape, dtype)]
    if bound:
        outs.append(bound_out(tuple(s + 2 for s in out_shape), dtype))
    for out in outs:
        status = call_fast(name, *args, out)
        assert status == 0, f"{name}: compiled kernel returned {status}"
        assert_close(out.numpy(), ref.numpy(), rtol=0, atol=0)


SHAPES = [(), (5,), (2, 3, 4), (0, 3)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int32, np.int64, np.float32,
                                   np.float64])
def test_logical_not(dtype, shape):
    _check("aten::logical_not.out", [_rand(shape, dtype)], shape, np.bool_)


CMP_CASES = [(np.float32, -np.inf), (np.float32, 1), (np.float32, 0.5), (np.float64, 2.0),
             (np.float64, np.nan), (np.int64, 1), (np.int32, -2), (np.bool_, True),
             (np.bool_, 0), (np.bool_, 5), (np.uint8, 2)]


@pytest.mark.parametrize("dtype,scalar", CMP_CASES)
@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_scalar(op, dtype, scalar):
    for shape in ((2, 3, 4), ()):
        _check(f"aten::{op}.Scalar_out", [_rand(shape, dtype), scalar], shape, np.bool_)


def test_compare_scalar_rounds_to_float32():
    a = np.array([0.1, 0.2], np.float32)
    _check("aten::eq.Scalar_out", [a, 0.1], (2,), np.bool_)
    out = static_out((2,), np.bool_)
    assert call_fast("aten::eq.Scalar_out", a, 0.1, out) == 0
    assert out.numpy().tolist() == [True, False]


def test_compare_cases_the_typed_kernel_declines_run_generic():
    a = np.arange(3, dtype=np.int64)
    for args, out_dtype in [((a, 1.5), np.bool_), ((a.astype(np.int32), 2 ** 40), np.bool_),
                            ((a, 1), np.int64), ((a.astype(np.float16), 1), np.bool_)]:
        _check("aten::eq.Scalar_out", list(args), (3,), out_dtype)


@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("shape,dim", [((1, 4, 1, 32), -1), ((2, 3, 4), 1), ((2, 3, 4), 0),
                                       ((5,), 0), ((3, 0, 2), 1), ((3, 0, 2), 2)])
def test_any_dim(shape, dim, keepdim):
    for dtype in (np.bool_, np.uint8):
        x = RNG.random(shape) < 0.1
        if x.size:
            x.reshape(-1)[-1] = True
        x = x.astype(dtype)
        want = np.any(x, axis=dim, keepdims=keepdim)
        _check("aten::any.out", [x, dim, keepdim], want.shape, np.bool_)


def test_any_all():
    for x in (np.zeros((3, 4), bool), RNG.random((3, 4)) < 0.1, np.zeros((0,), bool),
              np.array(True)):
        _check("aten::any.all_out", [x], (), np.bool_, bound=False)


WHERE_SHAPES = [((1, 32), (), ()), ((1, 4, 1, 1), (1, 4, 1, 32), (1, 4, 1, 32)),
                ((2, 3), (2, 3), (2, 3)), ((3, 1), (1, 4), (4,)), ((), (2, 2), ()),
                ((2, 1, 3), (5, 1), (2, 5, 3)), ((0, 3), (3,), ()),
                # contiguous rows of self/other/out: the condition broadcast along them (an
                # attention's masked softmax) or a row of its own, operands broadcast over
                # outer dims
                ((1, 4, 30, 1), (1, 4, 30, 30), (1, 4, 30, 30)), ((2, 3, 24), (3, 24), (2, 3, 24)),
                ((3, 1, 20), (2, 20), (3, 2, 20))]


@pytest.mark.parametrize("shapes", WHERE_SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_where(shapes, dtype):
    c = RNG.integers(0, 2, shapes[0]).astype(bool)
    a = _rand(shapes[1], dtype)
    b = _rand(shapes[2], dtype)
    shape = np.broadcast_shapes(*shapes)
    _check("aten::where.self_out", [c, a, b], shape, dtype)


def test_where_uint8_condition_and_declines():
    c = np.array([[1, 0, 3]], np.uint8)
    a, b = _rand((2, 3), np.float32), _rand((1, 3), np.float32)
    _check("aten::where.self_out", [c, a, b], (2, 3), np.float32)
    _check("aten::where.self_out", [c.astype(bool), a, b.astype(np.float64)], (2, 3),
           np.float64)  # mixed dtypes: the any-dtype fallback
    # shapes that do not broadcast fail (the reference kernel then explains)
    assert call_fast("aten::where.self_out", np.ones((4,), bool), a, b,
                     static_out((2, 3), np.float32)) != 0


@pytest.mark.parametrize("dtype,value", [(np.float32, 0), (np.float32, -1.5),
                                         (np.float64, float("-inf")), (np.int64, 7),
                                         (np.int32, -3), (np.bool_, 1), (np.bool_, 0.0),
                                         (np.uint8, 200)])
def test_full_like(dtype, value):
    for shape in ((1, 4, 1, 32), (), (0, 2)):
        self = _rand(shape, np.float32)
        _check("aten::full_like.out", [self, value, None], shape, dtype)


def test_full_like_float_into_int_runs_generic():
    _check("aten::full_like.out", [np.zeros(3, np.float32), 1.5, None], (3,), np.int64)


@pytest.mark.parametrize("dtype,value", [(np.float32, float("-inf")), (np.float32, 0.0),
                                         (np.float64, 0.1), (np.int64, -4), (np.bool_, True)])
def test_scalar_tensor(dtype, value):
    _check("aten::scalar_tensor.out", [value], (), dtype, bound=False)


def _put_case(shape, k, idx, vshape, dtype=np.float32):
    self = _rand(shape, dtype)
    values = _rand(vshape, dtype)
    indices = [None] * k + [np.asarray(idx, np.int64)]
    return self, indices, values


PUT_CASES = [((1, 2, 32, 16), 2, [5], (2, 1, 16)),     # the llama KV-cache update
             ((1, 2, 32, 16), 2, [3, 4, 5], (1, 2, 3, 16)),
             ((8, 3), 0, [1, 6], (2, 3)),
             ((8, 3), 0, [-1, 0], (3,)),              # values broadcast over rows
             ((8, 3), 0, [2], ()),                    # a scalar value
             ((4, 5, 3), 1, [0, 4, 4], (4, 1, 3)),    # a duplicate index: the last wins
             ((4, 5, 3), 1, [2, 1], (2, 1)),          # inner broadcast, not dense
             ((4, 5, 3), 1, [], (0, 3)),
             ((6,), 0, [5, -6], (2,))]


@pytest.mark.parametrize("case", PUT_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_index_put(case, dtype):
    shape, k, idx, vshape = case
    self, indices, values = _put_case(shape, k, idx, vshape, dtype)
    _check("aten::index_put.out", [self, indices, values, False], shape, dtype)


def test_index_put_in_place_when_out_aliases_self():
    self = ETensor.from_array(_rand((1, 2, 6, 4), np.float32))
    want = self.numpy().copy()
    values = _rand((2, 1, 4), np.float32)
    want[:, :, 3] = values[:, 0]
    status = call_fast("aten::index_put.out", self, [None, None, np.array([3], np.int64)],
                       values, False, self)
    assert status == 0
    assert_close(self.numpy(), want, rtol=0, atol=0)


def test_index_put_int32_index_and_declines():
    self, indices, values = _put_case((5, 3), 0, [4, 0], (2, 3))
    _check("aten::index_put.out", [self, [indices[0].astype(np.int32)], values, False], (5, 3),
           np.float32)
    out = static_out((5, 3), np.float32)
    # accumulate, several indices, other value dtypes: the any-dtype fallback
    _check("aten::index_put.out", [self, indices, values, True], (5, 3), np.float32)
    _check("aten::index_put.out", [self, [indices[0], np.array([2, 1])], values[:, 0], False],
           (5, 3), np.float32)
    _check("aten::index_put.out", [self, indices, values.astype(np.float64), False], (5, 3),
           np.float32)
    # out-of-range index: an error status, nothing written to an aliased self
    before = self.copy()
    t = ETensor.from_array(self)
    assert call_fast("aten::index_put.out", t, [np.array([5], np.int64)], values[:1], False,
                     t) != 0
    np.testing.assert_array_equal(t.numpy(), before)
    # values that do not broadcast to the indexed shape
    assert call_fast("aten::index_put.out", self, indices, _rand((3, 3), np.float32), False,
                     out) != 0
