"""Comparison, logical, where, masked_fill and clamp kernels against torch.ops.aten."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests.kernels.helpers import call, static_out
from tests.kernels.elementwise.test_elementwise import DTYPES, SHAPES, check, dim_ordered, make

A = torch.ops.aten
CMP = ["eq", "ne", "lt", "le", "gt", "ge"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
SHAPE_PAIRS = [((), ()), ((0,), (0,)), ((3,), (3,)), ((2, 3, 4), (2, 3, 4)),
               ((2, 1, 4), (3, 1)), ((2, 3), ())]
MIXED = [("int32", "float16"), ("uint8", "int8"), ("bool", "float32"), ("int64", "bfloat16"),
         ("float16", "bfloat16"), ("int8", "float64")]


def _ints(shape, dtype, seed):
    return make(shape, dtype, seed=seed, low=-2, high=2)  # small range: many equal pairs


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", CMP + LOGICAL)
def test_dtypes(name, dtype):
    a, b = _ints((2, 1, 4), dtype, 1), _ints((3, 1), dtype, 2)
    kernel = f"aten::{name}.Tensor_out" if name in CMP else f"aten::{name}.out"
    check(kernel, getattr(torch, name), a, b)


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("name", CMP + LOGICAL)
def test_shapes(name, shapes):
    a, b = _ints(shapes[0], "float32", 1), _ints(shapes[1], "float32", 2)
    kernel = f"aten::{name}.Tensor_out" if name in CMP else f"aten::{name}.out"
    check(kernel, getattr(torch, name), a, b)


@pytest.mark.parametrize("dtypes", MIXED, ids="-".join)
@pytest.mark.parametrize("name", CMP + LOGICAL)
def test_promotion(name, dtypes):
    a = make((2, 3), dtypes[0], seed=1, low=-2, high=2)
    b = make((2, 3), dtypes[1], seed=2, low=-2, high=2)
    kernel = f"aten::{name}.Tensor_out" if name in CMP else f"aten::{name}.out"
    check(kernel, getattr(torch, name), a, b)
    check(kernel, getattr(torch, name), a, np.array(b[0, 0]))  # zero-dim other


@pytest.mark.parametrize("scalar", [1, -1, 0.5, True, 255, 1000], ids=repr)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", CMP)
def test_scalar(name, dtype, scalar):
    x = _ints((2, 3), dtype, 3)
    if x.dtype == np.uint8:
        x[0, 0] = 255
    check(f"aten::{name}.Scalar_out", getattr(A, name).Scalar, x, scalar)


@pytest.mark.parametrize("name", CMP + LOGICAL)
def test_into_other_out_dtypes(name):
    x = np.array([np.nan, np.inf, 0.0, -0.0, 1.0, -2.0], np.float32)
    y = np.array([np.nan, np.inf, -0.0, 1.0, 1.0, 0.0], np.float32)
    kernel = f"aten::{name}.Tensor_out" if name in CMP else f"aten::{name}.out"
    for out_dtype in (np.bool_, np.float32, np.int32):
        check(kernel, getattr(torch, name), x, y, out_dtype=out_dtype)


# ---- where / masked_fill -----------------------------------------------------------------------

@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int32", "float16"), ("bool", "int8"),
                                    ("bfloat16", "float64"), ("uint8", "int64")], ids="-".join)
@pytest.mark.parametrize("shapes", [((), (), ()), ((0,), (0,), (0,)), ((3,), (3,), (3,)),
                                    ((2, 1, 4), (3, 1), (4,)), ((2, 3), (), (1, 3))], ids=str)
def test_where(shapes, dtypes):
    cond = make(shapes[0], "bool", seed=1)
    a, b = make(shapes[1], dtypes[0], seed=2), make(shapes[2], dtypes[1], seed=3)
    check("aten::where.self_out", torch.where, cond, a, b)


def test_where_refuses_int_condition():
    with pytest.raises(ExecuTorchError, match="condition"):
        call("aten::where.self_out", np.ones(2, np.int32), np.ones(2, np.float32),
             np.ones(2, np.float32), static_out((2,), np.float32))


@pytest.mark.parametrize("value", [0, -3, 2.5, True], ids=repr)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shapes", [((), ()), ((0,), (0,)), ((3,), (3,)), ((2, 3, 4), (3, 1)),
                                    ((3,), (2, 1))], ids=str)
def test_masked_fill(shapes, dtype, value):
    if DTYPES[dtype] == np.uint8 and value == -3:
        value = 3
    x, mask = make(shapes[0], dtype, seed=1), make(shapes[1], "bool", seed=2)
    check("aten::masked_fill.Scalar_out", A.masked_fill.Scalar, x, mask, value)


def test_masked_fill_refusals():
    x = np.zeros(3, np.int32)
    with pytest.raises(ExecuTorchError, match="mask"):
        call("aten::masked_fill.Scalar_out", x, np.ones(3, np.uint8), 1, static_out((3,), np.int32))
    with pytest.raises(ExecuTorchError, match="value"):
        call("aten::masked_fill.Scalar_out", x, np.ones(3, np.bool_), 2 ** 40,
             static_out((3,), np.int32))


# ---- clamp ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bounds", [(-1, 2), (0.5, None), (None, 1), (3, -1), (-1.5, 1.5), (True, None)],
                         ids=str)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_clamp_scalar(dtype, bounds):
    x = make((2, 3, 4), dtype, seed=1)
    check("aten::clamp.out", torch.clamp, x, *bounds)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_clamp_shapes_and_nan(shape):
    x = make(shape, "float32", seed=1)
    if x.size:
        x.reshape(-1)[0] = np.nan
    check("aten::clamp.out", torch.clamp, x, -1.0, 1.0)
    check("aten::clamp.out", torch.clamp, x, float("nan"), None)


@pytest.mark.parametrize("dtypes", [("float32", "float32", "float32"), ("int32", "int32", "int64"),
                                    ("int32", "float16", None), ("float16", None, "bfloat16"),
                                    ("uint8", "int8", "int8"), ("float64", "float32", "int32")],
                         ids=str)
def test_clamp_tensor(dtypes):
    x = make((2, 1, 4), dtypes[0], seed=1)
    lo = None if dtypes[1] is None else make((3, 1), dtypes[1], seed=2, low=-3, high=0)
    hi = None if dtypes[2] is None else make((4,), dtypes[2], seed=3, low=0, high=3)
    check("aten::clamp.Tensor_out", torch.clamp, x, lo, hi)


def test_clamp_tensor_nan_bound_and_dim_order():
    x = make((2, 3, 4), "float32", seed=1)
    lo = np.full((4,), -0.5, np.float32)
    lo[1] = np.nan
    check("aten::clamp.Tensor_out", torch.clamp, x, lo, None)
    out = static_out((2, 3, 4), np.float32)
    call("aten::clamp.Tensor_out", dim_ordered(x, (1, 0, 2)), lo, None, out)
    np.testing.assert_array_equal(out.numpy(), torch.clamp(torch.from_numpy(x),
                                                           torch.from_numpy(lo)).numpy())


def test_clamp_needs_a_bound():
    with pytest.raises(ExecuTorchError, match="min"):
        call("aten::clamp.out", np.ones(3, np.float32), None, None, static_out((3,), np.float32))


@pytest.mark.parametrize("bounds", ["min", "max", "both"])
@pytest.mark.parametrize("out_dtype", ["bool", "int32"])
def test_clamp_tensor_bool(bounds, out_dtype):
    # ATen: clamp_min / clamp_max take bool (logical or / and); clamp with both bounds refuses
    x = make((2, 1, 4), "bool", seed=1)
    lo = make((3, 1), "bool", seed=2) if bounds != "max" else None
    hi = make((4,), "bool", seed=3) if bounds != "min" else None
    check("aten::clamp.Tensor_out", torch.clamp, x, lo, hi, out_dtype=out_dtype)
