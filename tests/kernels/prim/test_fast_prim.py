"""Compiled prim ops (kernels/prim/typed.py) against the reference prim kernels.

Every scalar op runs over a grid of Int / Double / Bool operands (edge values
included); the compiled result must equal the reference result with the same
tag, and wherever the reference raises, the compiled kernel must fail.
"""
from __future__ import annotations

import ctypes
import itertools
import math

import numpy as np
import pytest

from pyruntime.cython_ext import ETensor
from pyruntime.cython_ext.desc import DescTable
from pyruntime.cython_ext.errors import ExecuTorchError
from pyruntime.kernels import get_kernel
from pyruntime.kernels.prim import typed as prim
from pyruntime.kernels.fast.context import BindContext
from pyruntime.fastpath import _encode
from tests.kernels.helpers import bound_out, call_fast_prim, static_out

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
INTS = [0, 1, -1, 7, -7, 2, -3, I64_MIN, I64_MAX, 1 << 40]
DOUBLES = [0.0, -0.0, 1.5, -2.5, 2.5, 0.5, 3.0, -7.25, math.inf, -math.inf, math.nan, 1e300]
BOOLS = [True, False]
VALUES = INTS + DOUBLES + BOOLS


def _ctx(tensors=()):
    tensors = list(tensors)
    table = DescTable(tensors, [t.storage for t in tensors])
    return BindContext(table, {id(t): i for i, t in enumerate(tensors)}, []), table


def _run(bound, keep):
    fn, block = bound
    return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(fn)(block)


def _same(got, want):
    if type(got) is not type(want):
        return False
    if isinstance(want, float) and math.isnan(want):
        return math.isnan(got)
    if isinstance(want, float):
        return got == want and math.copysign(1, got) == math.copysign(1, want)
    return got == want


def _check(name, operands):
    ref = get_kernel(name).fn
    try:
        want = ref(*operands)
    except ExecuTorchError:
        want = ExecuTorchError
    try:
        got = call_fast_prim(name, *operands)
    except RuntimeError as e:  # the compiled kernel returned an error status
        assert want is ExecuTorchError, f"{name}{tuple(operands)}: {e}, want {want!r}"
        return
    assert want is not ExecuTorchError, \
        f"{name}{tuple(operands)}: reference raises, compiled gave {got!r}"
    assert _same(got, want), f"{name}{tuple(operands)}: got {got!r}, want {want!r}"


BINARY = [n for n, op in prim.OPS.items() if op in (
    prim.P_ADD, prim.P_SUB, prim.P_MUL, prim.P_FLOORDIV, prim.P_TRUEDIV, prim.P_FLOORDIV_INT,
    prim.P_MOD, prim.P_EQ, prim.P_GT, prim.P_LT, prim.P_GE, prim.P_LE, prim.P_MAX, prim.P_MIN)]
UNARY = [n for n, op in prim.OPS.items() if op in (
    prim.P_NEG, prim.P_NOT, prim.P_FLOAT, prim.P_INT, prim.P_CEIL, prim.P_ROUND, prim.P_TRUNC)]


@pytest.mark.parametrize("name", BINARY)
def test_binary_scalar_ops(name):
    for a, b in itertools.product(VALUES, VALUES):
        _check(name, [a, b])


@pytest.mark.parametrize("name", UNARY)
def test_unary_scalar_ops(name):
    for a in VALUES:
        _check(name, [a])


def test_sym_ite():
    for c, t, f in itertools.product([True, False, 1], [3, 2.5, True], [-4, math.inf]):
        _check("executorch_prim::sym_ite.Scalar", [c, t, f])


def _tensor_op(name, t, dim=None):
    """The compiled op's result, or None when it returns an error status."""
    try:
        return call_fast_prim(name, t, *([] if dim is None else [dim]))
    except RuntimeError:
        return None


@pytest.mark.parametrize("shape", [(), (0,), (2, 3, 4)])
def test_sym_size_and_numel(shape):
    t = ETensor.from_array(np.zeros(shape, np.float32))
    assert _tensor_op("aten::sym_numel", t) == int(np.prod(shape))
    for dim in range(-len(shape) - 1, len(shape) + 1):
        got = _tensor_op("aten::sym_size.int", t, dim)
        assert got == (shape[dim] if -len(shape) <= dim < len(shape) else None)


@pytest.mark.parametrize("value", [np.float32(2.5), np.float16(-1.5), np.int8(-3), np.uint8(200),
                                   np.int64(I64_MIN), np.bool_(True), np.float64(np.nan)])
def test_local_scalar_dense(value):
    t = ETensor.from_array(np.array([value, value]))
    got = _tensor_op("aten::_local_scalar_dense", t)
    assert got is not None and _same(got, get_kernel("aten::_local_scalar_dense").fn(t))
    empty = ETensor.from_array(np.zeros((0,), np.float32))
    assert _tensor_op("aten::_local_scalar_dense", empty) is None


def _view(src, out, sizes):
    ctx, table = _ctx([src, out])
    recs = np.array([_encode(s) for s in sizes], np.int64).reshape(-1, 2)
    bound = prim.bind_view(ctx, src, out, [recs.ctypes.data + 16 * i for i in range(len(sizes))])
    assert bound is not None
    status = _run(bound, ctx)
    table.pull(1, out)
    return status


@pytest.mark.parametrize("sizes", [[3, 8], [-1, 4], [24, 1], [2, -1]])
def test_et_view_aliases_and_resizes(sizes):
    src = ETensor.from_array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    out = bound_out((24, 24), np.float32)
    assert _view(src, out, sizes) == 0
    want = np.arange(24, dtype=np.float32).reshape([s for s in sizes])
    np.testing.assert_array_equal(out.numpy(), want)
    src.numpy()[0, 0, 0] = 100.0  # a view, not a copy
    assert out.numpy().reshape(-1)[0] == 100.0


@pytest.mark.parametrize("sizes", [[5, 5], [-1, -1], [0, -1], [7, 4]])
def test_et_view_rejects_what_the_reference_rejects(sizes):
    src = ETensor.from_array(np.zeros((2, 3, 4), np.float32))
    out = bound_out((24, 24), np.float32)
    assert _view(src, out, sizes) != 0
    with pytest.raises(ExecuTorchError):
        get_kernel("executorch_prim::et_view.default").fn(src, sizes, bound_out((24, 24),
                                                                                np.float32))


def test_et_view_static_out_cannot_change_shape():
    src = ETensor.from_array(np.zeros((2, 3, 4), np.float32))
    assert _view(src, static_out((6, 4), np.float32), [6, 4]) == 0
    assert _view(src, static_out((6, 4), np.float32), [4, 6]) != 0


def test_et_copy_index_grows_dim0():
    dst = bound_out((4, 2, 3), np.int32)
    src = ETensor.from_array(np.zeros((2, 3), np.int32))
    ctx, table = _ctx([dst, src])
    rec = np.zeros(2, np.int64)
    bound = prim.bind_copy_index(ctx, dst, src, rec.ctypes.data)
    for i in range(4):
        src.numpy()[...] = i
        table.push(1, src, force=True)
        rec[:] = _encode(i)
        assert _run(bound, ctx) == 0
        table.pull(0, dst)
        assert dst.shape == (i + 1, 2, 3)
        np.testing.assert_array_equal(dst.numpy()[:, 0, 0], np.arange(i + 1))
    rec[:] = _encode(-1)
    assert _run(bound, ctx) != 0
