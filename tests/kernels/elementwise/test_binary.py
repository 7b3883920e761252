"""Binary arithmetic, bitwise and shift kernels against torch.ops.aten."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pyruntime.cython_ext import ExecuTorchError
from tests.kernels.helpers import call, static_out
from tests.kernels.elementwise.test_elementwise import DTYPES, FLOATS, check, dim_ordered, make

A = torch.ops.aten
SHAPE_PAIRS = [((), ()), ((0,), (0,)), ((3,), (3,)), ((2, 3, 4), (2, 3, 4)),
               ((2, 1, 4), (3, 1)), ((3,), ()), ((), (2, 3)), ((0, 3), (1, 3))]
MIXED = [("int32", "float16"), ("uint8", "int8"), ("bool", "float32"), ("int64", "bfloat16"),
         ("float16", "bfloat16"), ("int8", "float64"), ("bool", "int32"), ("float32", "float64")]

# (kernel, torch reference, divisor-like: keep integer `other` nonzero); add/sub get alpha=1
# from the wrapper below, as the runtime passes every schema argument.
TENSOR_OPS = [
    ("add.out", torch.add, False),
    ("sub.out", torch.sub, False),
    ("mul.out", torch.mul, False),
    ("div.out", torch.div, True),
    ("floor_divide.out", torch.floor_divide, True),
    ("fmod.Tensor_out", torch.fmod, True),
    ("remainder.Tensor_out", torch.remainder, True),
    ("atan2.out", torch.atan2, False),
    ("maximum.out", torch.maximum, False),
    ("minimum.out", torch.minimum, False),
    ("pow.Tensor_Tensor_out", torch.pow, False),
    ("bitwise_and.Tensor_out", torch.bitwise_and, False),
    ("bitwise_or.Tensor_out", torch.bitwise_or, False),
    ("bitwise_xor.Tensor_out", torch.bitwise_xor, False),
    ("bitwise_left_shift.Tensor_out", torch.bitwise_left_shift, False),
    ("bitwise_right_shift.Tensor_out", torch.bitwise_right_shift, False),
]
TENSOR_IDS = [t[0] for t in TENSOR_OPS]


def _pair(shapes, dtypes, divisor, name):
    a = make(shapes[0], dtypes[0], seed=1)
    low, high = (0, 7) if "shift" in name else (-4, 4)
    if name.startswith("pow"):
        low = 0  # keep integer powers in range; negative exponents are tested separately
    b = make(shapes[1], dtypes[1], seed=2, low=low, high=high, nonzero=divisor)
    return a, b


def check_tensor_op(name, fn, a, b):
    if name in ("add.out", "sub.out"):
        return check(f"aten::{name}", lambda x, y, al: fn(x, y, alpha=al), a, b, 1)
    return check(f"aten::{name}", fn, a, b)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name,fn,divisor", TENSOR_OPS, ids=TENSOR_IDS)
def test_tensor_ops_dtypes(name, fn, divisor, dtype):
    a, b = _pair(((2, 1, 4), (3, 1)), (dtype, dtype), divisor, name)
    check_tensor_op(name, fn, a, b)


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("name,fn,divisor", TENSOR_OPS, ids=TENSOR_IDS)
def test_tensor_ops_shapes(name, fn, divisor, shapes):
    dtype = "int32" if "bitwise" in name else "float32"
    a, b = _pair(shapes, (dtype, dtype), divisor, name)
    check_tensor_op(name, fn, a, b)


@pytest.mark.parametrize("dtypes", MIXED, ids="-".join)
@pytest.mark.parametrize("name,fn,divisor", TENSOR_OPS, ids=TENSOR_IDS)
def test_tensor_ops_promotion(name, fn, divisor, dtypes):
    a, b = _pair(((2, 3), (2, 3)), dtypes, divisor, name)
    check_tensor_op(name, fn, a, b)
    a0, b0 = _pair(((2, 3), ()), dtypes, divisor, name)  # a zero-dim operand ranks lower
    check_tensor_op(name, fn, a0, b0)


# (kernel, torch reference taking (tensor, scalar))
SCALAR_OPS = [
    ("add.Scalar_out", A.add.Scalar),
    ("sub.Scalar_out", A.sub.Scalar),
    ("rsub.Scalar_out", A.rsub.Scalar),
    ("mul.Scalar_out", A.mul.Scalar),
    ("div.Scalar_out", A.div.Scalar),
    ("fmod.Scalar_out", A.fmod.Scalar),
    ("remainder.Scalar_out", A.remainder.Scalar),
    ("pow.Tensor_Scalar_out", A.pow.Tensor_Scalar),
    ("bitwise_and.Scalar_out", A.bitwise_and.Scalar),
    ("bitwise_or.Scalar_out", A.bitwise_or.Scalar),
    ("bitwise_xor.Scalar_out", A.bitwise_xor.Scalar),
    ("bitwise_left_shift.Tensor_Scalar_out", A.bitwise_left_shift.Tensor_Scalar),
    ("bitwise_right_shift.Tensor_Scalar_out", A.bitwise_right_shift.Tensor_Scalar),
]


@pytest.mark.parametrize("scalar", [3, -2, 2.5, True, 1000], ids=repr)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name,fn", SCALAR_OPS, ids=[s[0] for s in SCALAR_OPS])
def test_scalar_ops(name, fn, dtype, scalar):
    if name.startswith("pow") and scalar == 1000:
        scalar = 3
    extra = (1,) if name.split(".")[0] in ("add", "sub", "rsub") else ()  # alpha
    check(f"aten::{name}", fn, make((2, 3), dtype, seed=4, nonzero=True), scalar, *extra)


@pytest.mark.parametrize("alpha", [1, 2, -3, 0.5, True], ids=repr)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8", "bool", "bfloat16"])
@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha(name, dtype, alpha):
    a, b = make((2, 1, 3), dtype, seed=5), make((4, 1), dtype, seed=6)
    check(f"aten::{name}.out", lambda x, y, al: getattr(torch, name)(x, y, alpha=al), a, b, alpha)
    check(f"aten::{name}.Scalar_out", getattr(A, name).Scalar, a, 3, alpha)
    check("aten::rsub.Scalar_out", A.rsub.Scalar, a, 3, alpha)


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_div_modes(dtype, mode):
    a = make((2, 1, 4), dtype, seed=7, low=-9, high=9)
    b = make((3, 1), dtype, seed=8, nonzero=True)
    check("aten::div.out_mode", lambda x, y, m: torch.div(x, y, rounding_mode=m), a, b, mode)
    for s in (3, -2, 2.5):
        check("aten::div.Scalar_mode_out", lambda x, y, m: torch.div(x, y, rounding_mode=m),
              a, s, mode)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5.0, -5.0, 2.5, -7.5, 1e-3])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name,fn,divisor", TENSOR_OPS[:11], ids=TENSOR_IDS[:11])
def test_special_values(name, fn, divisor, dtype):
    a = SPECIAL.astype(DTYPES[dtype])[:, None]
    check_tensor_op(name, fn, a, a.T.copy())


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_mode_special_values(mode):
    a = SPECIAL.astype(np.float32)[:, None]
    check("aten::div.out_mode", lambda x, y, m: torch.div(x, y, rounding_mode=m), a, a.T.copy(),
          mode)


def test_python_floor_semantics_for_integers():
    a = np.array([7, -7, 7, -7, 0], np.int64)
    b = np.array([2, 2, -2, -2, 3], np.int64)
    assert check("aten::floor_divide.out", torch.floor_divide, a, b).tolist() == [3, -4, -4, 3, 0]
    assert check("aten::remainder.Tensor_out", torch.remainder, a, b).tolist() == [1, 1, -1, -1, 0]
    assert check("aten::fmod.Tensor_out", torch.fmod, a, b).tolist() == [1, -1, 1, -1, 0]
    got = check("aten::div.out_mode", lambda x, y, m: torch.div(x, y, rounding_mode=m), a, b,
                "trunc")
    assert got.tolist() == [3, -3, -3, 3, 0]


@pytest.mark.parametrize("name", ["floor_divide.out", "fmod.Tensor_out", "remainder.Tensor_out"])
def test_integer_division_by_zero_raises(name):
    a, b = np.array([1, 2], np.int32), np.array([1, 0], np.int32)
    with pytest.raises(ExecuTorchError, match="division by zero"):
        call(f"aten::{name}", a, b, static_out((2,), np.int32))
    with pytest.raises(ExecuTorchError, match="division by zero"):
        call("aten::div.Scalar_mode_out", a, 0, "floor", static_out((2,), np.int32))


def test_integer_true_division_by_zero_gives_inf():
    check("aten::div.out", torch.div, np.array([1, 0, -1], np.int64), np.zeros(3, np.int64))


def test_integer_pow_negative_exponents():
    base = np.array([-2, -1, 0, 1, 2, -1, 3], np.int64)
    exp = np.array([-1, -1, -1, -1, -2, -3, 2], np.int64)
    assert check("aten::pow.Tensor_Tensor_out", torch.pow, base, exp).tolist() == \
        [0, -1, 0, 1, 0, -1, 9]
    check("aten::pow.Scalar_out", A.pow.Scalar, 2, exp)
    with pytest.raises(ExecuTorchError):
        call("aten::pow.Tensor_Scalar_out", base, -1, static_out((7,), np.int64))


@pytest.mark.parametrize("scalar", [2, 2.5, True, -1])
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bool", "int8"])
def test_pow_scalar_base(dtype, scalar):
    check("aten::pow.Scalar_out", A.pow.Scalar, scalar, make((2, 3), dtype, low=0, high=4))


def test_shift_out_of_range_amounts():
    a = np.array([1, -1, 5, -128, 64], np.int8)
    b = np.array([8, -1, 3, 9, 1], np.int8)
    check("aten::bitwise_left_shift.Tensor_out", torch.bitwise_left_shift, a, b)
    check("aten::bitwise_right_shift.Tensor_out", torch.bitwise_right_shift, a, b)
    check("aten::bitwise_left_shift.Tensor_Scalar_out", A.bitwise_left_shift.Tensor_Scalar, a, 9)


def test_out_dtype_cast_and_refusal():
    a, b = make((2, 3), "float16"), make((2, 3), "float16", seed=9)
    check("aten::mul.out", torch.mul, a, b, out_dtype=np.float32)  # half product, then widened
    with pytest.raises(ExecuTorchError, match="out"):
        call("aten::add.out", a, b, 1, static_out((2, 3), np.int64))


def test_not_broadcastable_raises():
    with pytest.raises(ExecuTorchError, match="broadcast"):
        call("aten::mul.out", np.ones((2, 3), np.float32), np.ones((4,), np.float32),
             static_out((2, 3), np.float32))


def test_dim_ordered_inputs():
    a = make((2, 3, 4), "float32", seed=1)
    b = make((2, 3, 4), "float32", seed=2)
    out = static_out((2, 3, 4), np.float32)
    call("aten::sub.out", dim_ordered(a, (0, 2, 1)), dim_ordered(b, (2, 0, 1)), 2, out)
    np.testing.assert_allclose(out.numpy(), a - 2 * b, rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_add_alpha_half_precision(dtype):
    a, b = make((5,), dtype, seed=1), make((5,), dtype, seed=2)
    check("aten::add.out", lambda x, y, al: torch.add(x, y, alpha=al), a, b, 0.3)
